#!/usr/bin/perl

# "error_log ... debug" in the main context: nginx's timer debug lines read
# every event's data as a connection (its fd). The module's timers (the
# metrics gauges, Redis connect, reconnect and command timers) carry one,
# so OTP, health and metrics are served with no crash, and Redis going away
# and coming back changes nothing to that.

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Time::HiRes qw(sleep);
use Platform::Test;

my $t = Platform::Test->new(workers => 2, log_level => 'debug');

my $redis = $t->start_private_redis;
my $raddr = $redis->addr;

$t->run(<<"EOF");
    platform_redis $raddr;
    platform_redis_timeout 500ms;

    server {
        listen 127.0.0.1:%%PORT%%;
        location /validate-otp/ { platform_otp; }
        location = /health { platform_health; }
        location = /metrics { platform_metrics; }
    }
EOF

my @workers = sort $t->workers;
is(scalar @workers, 2, 'workers run');

my %h = (tenantId => 'tenant', countryCode => 'NG');

sub otp {
    my ($code) = @_;
    return $t->request('GET', "/validate-otp/$code", headers => \%h);
}

sub serves {
    my ($code) = @_;
    $redis->redis('SET', "otp:tenant:NG:$code", 'x', 'EX', '60');
    return $t->wait_until(sub { otp($code)->{status} == 200 }, 10);
}

ok(serves('1234'), 'OTP');
is(otp('1234')->{status}, 404, 'OTP used');
ok($t->wait_until(sub { $t->request('GET', '/health')->{status} == 200 }),
   'health');
is($t->request('GET', '/metrics')->{status}, 200, 'metrics');

sleep 1.2;      # the metrics gauges timer fires

# reconnect and connect timers

$redis->stop;
is(otp('2345')->{status}, 503, 'Redis down: OTP 503');
is($t->request('GET', '/health')->{status}, 503, 'Redis down: health 503');
sleep 0.7;
$redis->start;
ok(serves('2345'), 'OTP once Redis is back');

is_deeply([sort $t->workers], \@workers, 'no worker died');

my $log = $t->error_log;
like($log, qr/\[debug\] .*event timer add: -1: /,
     'timers with no connection of their own have fd -1');
unlike($log, qr/exited on signal/, 'no crash');

$t->done;
done_testing;
