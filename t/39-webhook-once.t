#!/usr/bin/perl

# Each webhook event stored exactly once: 50 concurrent deliveries of one
# event give one row and 49 duplicates, also while they wait together
# inside PostgreSQL, with Redis stopped, and with Redis flushed between
# and during deliveries. PostgreSQL stopped or timing out: 503 and the
# Redis claim released, and the sender's retry is stored once; a
# duplicate of a call in flight is never 200 for an event not stored; a
# stale claim of a dead worker blocks nothing; clients that leave while
# their event waits still get it stored.

# platform-test: serial (time bounds)

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Platform::Test;
use IO::Select;
use IO::Socket::INET;
use POSIX ();
use Time::HiRes qw(sleep time);

my $t = Platform::Test->new(workers => 2, db => 0);

my $pg = $t->start_private_pg;
my $redis = $t->start_private_redis;
my $dsn = $pg->dsn;
my $raddr = $redis->addr;

$t->run(<<"EOF");
    platform_pg "$dsn";
    platform_pg_connect_timeout 1s;
    platform_pg_query_timeout 1500ms;
    # the deliveries wait 0.8 s on a lock the test holds
    platform_pg_lock_timeout 2s;
    platform_redis $raddr;
    platform_redis_timeout 500ms;

    server {
        listen 127.0.0.1:%%PORT%%;

        location ^~ /api/webhooks/ {
            platform_webhooks;
            platform_webhook_source src;
        }
    }
EOF

$t->ignore_log(qr/redis: .*(?:failed|refused|connect|reconnect)/i);

my $path = '/api/webhooks/public/src/events';

sub deliver {
    my ($id, %o) = @_;
    return $t->request('POST', $path, timeout => $o{timeout} // 10,
                       headers => { 'Content-Type' => 'application/json' },
                       body => qq({"id":"$id","amount":10}));
}

sub deliver_async {
    my ($id, %o) = @_;
    return $t->request_async('POST', $path, timeout => $o{timeout} // 20,
                             headers => {
                                 'Content-Type' => 'application/json' },
                             body => qq({"id":"$id","amount":10}));
}

sub rows {
    my ($id) = @_;
    return $pg->psql("SELECT count(*) FROM webhook_events"
                     . " WHERE event_key = '$id'");
}

sub rkey { "webhook:source:src::$_[0]" }

# Every worker that found Redis failing has claimed in it again: each
# worker reconnects on its own, and a delivery shows which one answered
# ("Redis answers again" in its log line), so deliveries are sent until
# no worker is left that said it sends events straight to PostgreSQL
my $warm = 0;

sub redis_back_in_every_worker {
    return $t->wait_until(sub {
        deliver('evt-warm-' . $warm++);
        my %down;
        for (split /\n/, $t->error_log) {
            my ($pid) = /\] (\d+)#\d+: / or next;
            $down{$pid} = 1 if /events go straight to PostgreSQL/;
            delete $down{$pid} if /Redis answers again/;
        }
        return !%down;
    }, 15);
}

# a lock on the table, held for $secs by a psql of its own
sub hold_lock {
    my ($secs) = @_;
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        open STDOUT, '>', '/dev/null';
        exec('psql', '-X', '-q', '-d', "$dsn application_name=locker",
             '-c', "BEGIN; LOCK TABLE webhook_events IN ACCESS EXCLUSIVE"
                   . " MODE; SELECT pg_sleep($secs); COMMIT;")
            or POSIX::_exit(127);
    }
    $t->wait_until(sub {
        $pg->psql("SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a"
                  . " USING (pid) WHERE a.application_name = 'locker'"
                  . " AND l.mode = 'AccessExclusiveLock' AND l.granted") > 0
    }, 5) or die "the lock was not granted\n";
    return $pid;
}

# 50 deliveries at once, from one process: 50 connections, each request
# written before any answer is read; (new, duplicates, others)
sub burst {
    my ($id) = @_;
    my $body = qq({"id":"$id","amount":10});
    my $req = "POST $path HTTP/1.1\r\nHost: localhost\r\n"
              . "Content-Type: application/json\r\nConnection: close\r\n"
              . "Content-Length: " . length($body) . "\r\n\r\n$body";
    my @socks = map {
        IO::Socket::INET->new(PeerAddr => '127.0.0.1',
                              PeerPort => $t->port(1), Proto => 'tcp')
            or die "connect: $!\n";
    } 1 .. 50;
    $_->syswrite($req) for @socks;

    my %buf;
    my $sel = IO::Select->new(@socks);
    my $deadline = time + 20;
    while ($sel->count && time < $deadline) {
        for my $s ($sel->can_read(1)) {
            my $n = $s->sysread(my $chunk, 65536);
            if ($n) {
                $buf{$s} .= $chunk;
            } else {
                $sel->remove($s);
                close $s;
            }
        }
    }

    my ($new, $dup, @other) = (0, 0);
    for my $s (@socks) {
        my $r = $t->parse_response($buf{$s} // '');
        if (($r->{status} // 0) == 200
            && defined $r->{json}{data}{duplicate})
        {
            $r->{json}{data}{duplicate} ? $dup++ : $new++;
        } else {
            push @other, ($r->{status} // 'none') . " $r->{content}";
        }
    }
    diag("unexpected: $other[0]") if @other;
    return ($new, $dup, scalar @other);
}

sub exactly_once {
    my ($id, $name, %o) = @_;
    my ($new, $dup, $other) = burst($id, %o);
    is($new, 1, "$name: one delivery stored the event");
    is($dup, 49, "$name: 49 answered duplicate");
    is($other, 0, "$name: no other answer");
    is(rows($id), 1, "$name: one row");
}

### 50 concurrent deliveries

exactly_once('evt-burst', '50 at once');
is($redis->redis('GET', rkey('evt-burst')), 'stored', 'the key is stored');

# all of them waiting together inside PostgreSQL: the first holds the
# claim, the 49 others find it pending and go on to PostgreSQL, where the
# unique index decides
my $lock = hold_lock(0.8);
exactly_once('evt-waiting', '50 waiting on a lock');
waitpid($lock, 0);

### Redis flushed between and during deliveries

my ($new, $dup) = (0, 0);
for (1 .. 10) {
    $redis->redis('FLUSHALL');
    my $r = deliver('evt-flushed');
    $r->{json}{data}{duplicate} ? $dup++ : $new++ if $r->{status} == 200;
}
is("$new $dup", '1 9', 'flushed before each of 10: one new, 9 duplicates');
is(rows('evt-flushed'), 1, 'flushed before each: one row');

my $flusher = fork // die "fork: $!";
if ($flusher == 0) {
    # a plain death: not the test's exit, which would stop its servers
    $SIG{TERM} = 'DEFAULT';
    my $end = time + 3;
    while (time < $end) {
        system("redis-cli -p " . $redis->port . " FLUSHALL >/dev/null 2>&1");
        sleep 0.01;
    }
    POSIX::_exit(0);
}
exactly_once('evt-flushing', '50 while Redis is flushed again and again');
kill 'TERM', $flusher;
waitpid($flusher, 0);

### Redis stopped

$redis->stop;
exactly_once('evt-noredis', '50 with Redis stopped');
$lock = hold_lock(0.8);
exactly_once('evt-noredis-waiting', '50 waiting on a lock, Redis stopped');
waitpid($lock, 0);

my $said = () = $t->error_log =~ /events go straight to PostgreSQL/g;
ok($said >= 1 && $said <= 2,
   "Redis down is logged once per worker, not per request ($said)");

$redis->start;
ok($t->wait_until(sub {
       deliver('evt-redis-back')->{status} == 200
       && $redis->redis('GET', rkey('evt-redis-back')) eq 'stored' }, 15),
   'Redis back: the keys are marked again');
like($t->error_log, qr/webhooks: Redis answers again/, 'and that is logged');
is(rows('evt-redis-back'), 1, 'one row');

# Redis that does not answer in time, or answers errors: PostgreSQL
# decides alone

$redis->redis('CLIENT', 'PAUSE', '1500');
my $r = deliver('evt-paused');
is($r->{status}, 200, 'Redis paused: 200') or diag($r->{content});
is($r->{json}{data}{duplicate}, JSON::PP::false, 'Redis paused: stored');
cmp_ok($r->{time}, '<', 1.4, 'after the Redis timeout, not the pause');
is(deliver('evt-paused')->{json}{data}{duplicate}, JSON::PP::true,
   'Redis paused: a duplicate');
is(rows('evt-paused'), 1, 'Redis paused: one row');
sleep 1;

ok($t->wait_until(sub { deliver('evt-redis-back')->{status} == 200
                        && $redis->redis('PING') eq 'PONG' }, 15),
   'Redis answers again');
$redis->redis('CONFIG', 'SET', 'maxmemory', '1');
$r = deliver('evt-oom');
is($r->{status}, 200, 'Redis out of memory: 200') or diag($r->{content});
is($r->{json}{data}{duplicate}, JSON::PP::false, 'Redis out of memory: stored');
is(deliver('evt-oom')->{json}{data}{duplicate}, JSON::PP::true,
   'Redis out of memory: a duplicate');
is(rows('evt-oom'), 1, 'Redis out of memory: one row');
$redis->redis('CONFIG', 'SET', 'maxmemory', '0');

### a claim left pending by a worker that died blocks nothing

$redis->redis('SET', rkey('evt-orphan'), 'pending:1:1:dead', 'EX', '60');
$r = deliver('evt-orphan');
is($r->{status}, 200, 'a stale pending claim: 200');
is($r->{json}{data}{duplicate}, JSON::PP::false, 'and stored');
is(rows('evt-orphan'), 1, 'one row');

### clients that leave while their event waits

# Their statements finish as orphans when they were sent already (the
# event is stored), or are dropped while they waited for a connection
# (it is not): either way the sender's retry ends with one row, and the
# claims they left pending block nothing.

$lock = hold_lock(1);
my @gone = map { deliver_async("evt-gone-$_", timeout => 0.3) } 1 .. 10;
is(scalar(grep { $_->wait->{status} == 599 } @gone), 10,
   'ten clients gave up while PostgreSQL waited');
waitpid($lock, 0);
my $retried = 0;
for my $i (1 .. 10) {
    my $res = deliver("evt-gone-$i");
    $retried++ if $res->{status} == 200 && rows("evt-gone-$i") == 1;
}
is($retried, 10, 'each retry: 200 and one row');
### PostgreSQL timing out: 503, the claim released; a duplicate in flight
### meanwhile is not 200

ok(redis_back_in_every_worker(), 'Redis answers every worker again');
$lock = hold_lock(3);
my $first = deliver_async('evt-slow');
ok($t->wait_until(sub {
       ($redis->redis('GET', rkey('evt-slow')) // '') =~ /^pending:/ }, 5),
   'the first delivery holds the claim while PostgreSQL waits');
my $second = deliver('evt-slow');
$r = $first->wait;
is($r->{status}, 503, 'PostgreSQL timing out: 503');
is($r->{headers}{'retry-after'}, '1', 'Retry-After');
is($r->{json}{statusCode}, 503, 'Envelope B');
isnt($second->{status}, 200, "a duplicate in flight meanwhile: not 200 "
                             . "($second->{status})");
is($redis->redis('EXISTS', rkey('evt-slow')), '0', 'the claim is released');
waitpid($lock, 0);
is(rows('evt-slow'), 0, 'nothing stored');
$r = deliver('evt-slow');
is($r->{status}, 200, 'the retry: 200');
is($r->{json}{data}{duplicate}, JSON::PP::false, 'the retry is stored');
is(deliver('evt-slow')->{json}{data}{duplicate}, JSON::PP::true,
   'then a duplicate');
is(rows('evt-slow'), 1, 'one row');

### PostgreSQL stopped

$pg->stop;
$r = deliver('evt-pgdown');
is($r->{status}, 503, 'PostgreSQL stopped: 503');
is($r->{headers}{'retry-after'}, '1', 'Retry-After');
is($r->{json}{status}, JSON::PP::false, 'Envelope B');
unlike($r->{content}, qr/(?i)postgres|libpq|insert/, 'no backend detail');
is($redis->redis('EXISTS', rkey('evt-pgdown')), '0',
   'the Redis claim is gone');

$r = deliver('evt-slow');
is($r->{json}{data}{duplicate}, JSON::PP::true,
   'a stored event\'s duplicate is answered from Redis meanwhile');

$pg->start;
ok($t->wait_until(sub { deliver('evt-pgdown')->{status} == 200 }, 15),
   'PostgreSQL back: the retry is answered 200');
is(rows('evt-pgdown'), 1, 'and stored once');
is(deliver('evt-pgdown')->{json}{data}{duplicate}, JSON::PP::true,
   'a further retry: duplicate');

is($t->request('GET', '/api/webhooks/public/src/events')->{status}, 405,
   'the workers still answer');

$t->done;
done_testing;
