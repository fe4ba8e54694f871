#!/usr/bin/perl

# platform_redis leads to a replica (after a failover, say): writes answer
# -READONLY. The worker drops that connection and reconnects with the usual
# backoff, so that once the address leads to a primary again requests
# succeed without a reload.

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Platform::Test;

my $t = Platform::Test->new(workers => 1, db => 0);

my $primary = $t->start_private_redis;
my $replica = $t->start_private_redis;

is($replica->redis('REPLICAOF', '127.0.0.1', $primary->port), 'OK',
   'a replica');

my $raddr = $replica->addr;

$t->run(<<"EOF");
    platform_redis $raddr;
    platform_redis_timeout 500ms;

    server {
        listen 127.0.0.1:%%PORT%%;
        location /validate-otp/ { platform_otp; }
    }
EOF

my %h = (tenantId => 'tenant', countryCode => 'NG');

sub otp {
    my ($code) = @_;
    return $t->request('GET', "/validate-otp/$code", headers => \%h);
}

sub connects {
    my $n = () = $t->error_log =~ /redis: connected to /g;
    return $n;
}

ok($t->wait_until(sub { connects() >= 1 }), 'connected to the replica');

# the script writes (DEL, INCR): a replica refuses

my $r = otp('1234');
is($r->{status}, 503, 'a write on a replica is 503');
is($r->{headers}{'retry-after'}, '1', 'with Retry-After');
is($r->{json}{statusCode}, 503, 'in Envelope B');
like($t->error_log, qr/redis: "\Q$raddr\E" is a read-only replica/,
     'the worker logs the failover');
ok($t->wait_until(sub { connects() >= 2 }), 'and reconnects');

# the replica is promoted: no reload needed

is($replica->redis('REPLICAOF', 'NO', 'ONE'), 'OK', 'promoted');
$replica->redis('SET', 'otp:tenant:NG:2345', 'x', 'EX', '60');

ok($t->wait_until(sub { otp('2345')->{status} == 200 }, 15),
   'requests succeed on the new primary');
is(otp('2345')->{status}, 404, 'the code was used once');

$t->done;
done_testing;
