#!/usr/bin/perl

# Redis deadlines: the commands in flight share one timer, set for the
# oldest. Under steady load for longer than platform_redis_timeout no
# command is timed out before its own deadline; a Redis that stops
# answering (SIGSTOP) gets every waiting request a 503 in the envelope at
# about the timeout, later ones included, and the worker reconnects once
# it answers again.

# platform-test: serial (time bounds)

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use POSIX ();
use Time::HiRes qw(time sleep);
use Platform::Test;

my $t = Platform::Test->new(workers => 1, db => 0);

my $redis = $t->start_private_redis;
my $raddr = $redis->addr;

$t->run(<<"EOF");
    platform_redis $raddr;
    platform_redis_timeout 500ms;

    server {
        listen 127.0.0.1:%%PORT%%;
        location /validate-otp/ {
            platform_otp;
            platform_otp_attempts 1000000000 1s;
            platform_otp_tenant_attempts off;
        }
    }
EOF

$t->ignore_log(qr/redis: command timed out|redis: no reply from|redis: connection to .* lost|redis: connect to .* (timed out|failed)/);

my $tenant = "t94s-$$";

sub otp {
    my ($code) = @_;
    return $t->request('GET', "/validate-otp/$code",
                       headers => { tenantId => $tenant,
                                    countryCode => 'NG' },
                       timeout => 5);
}

sub otp_async {
    my ($code) = @_;
    return $t->request_async('GET', "/validate-otp/$code",
                             headers => { tenantId => $tenant,
                                          countryCode => 'NG' },
                             timeout => 5);
}

ok($t->wait_until(sub { otp('1234')->{status} == 404 }, 10),
   'Redis connected: 404 for an unknown code');

# steady load, 1.5 s: the timer set for the first command fires while
# later ones wait; none of them is past its deadline

my @load;
for my $n (1 .. 4) {
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        my ($i, $bad) = (0, 0);
        my $end = time + 1.5;
        while (time < $end) {
            my $r = otp(sprintf('%04d', $i++ % 10000));
            $bad++ if $r->{status} != 404;
        }
        # no END blocks or destructors: they would stop the servers
        POSIX::_exit($bad ? 1 : 0);
    }
    push @load, $pid;
}

my $failed = 0;
for my $pid (@load) {
    waitpid($pid, 0);
    $failed++ if $? != 0;
}

is($failed, 0, 'steady load past the timeout: every answer 404, none 503');
unlike($t->error_log, qr/redis: command timed out/,
       'no command timed out under steady load');

# Redis stops answering: five requests, then five more 200 ms later

kill 'STOP', $redis->{pid};

my $t0 = time;
my @first = map { otp_async(sprintf('%04d', 5000 + $_)) } 1 .. 5;
sleep 0.2;
my @later = map { otp_async(sprintf('%04d', 6000 + $_)) } 1 .. 5;

my @r1 = map { $_->wait(timeout => 10) } @first;
my @r2 = map { $_->wait(timeout => 10) } @later;
my $elapsed = time - $t0;

kill 'CONT', $redis->{pid};

is(scalar(grep { $_->{status} == 503 } @r1, @r2), 10,
   'a stalled Redis: every waiting request 503');
is(scalar(grep { ($_->{json}{statusCode} // 0) == 503 } @r1, @r2), 10,
   'in Envelope B');
is(scalar(grep { ($_->{headers}{'retry-after'} // '') eq '1' } @r1, @r2),
   10, 'with Retry-After: 1');
cmp_ok((sort { $a <=> $b } map { $_->{time} } @r1)[0], '>=', 0.4,
       'not before the deadline of the first');
cmp_ok($elapsed, '<', 3, 'all answered at about the timeout');

my $log = $t->error_log;
like($log, qr/redis: command timed out/, 'the timeout is logged');
like($log, qr/redis: no reply from "\Q$raddr\E", reconnecting/,
     'a connection with no reply at all is dropped');

ok($t->wait_until(sub { otp('1234')->{status} == 404 }, 10),
   'Redis answers again: the worker reconnects');

$t->done;
done_testing();
