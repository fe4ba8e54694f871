#!/usr/bin/perl

# platform_redis_sentinel, each way of finding the master on its own,
# against a real master, replica and three sentinels (with passwords, the
# sentinels' their own) and servers of the test's: the master found past
# sentinels that are down, accept and never answer, do not know the
# master (logged once by a worker) or name a replica (its ROLE refuses
# it, and another sentinel is asked); a paused master failed over while
# the module is idle, followed without a request; and, with the
# sentinels refusing the +switch-master subscription (an ACL), the master
# killed under a load of OTP validations and webhook deliveries, followed
# from the lost connection alone: only 200, 404 and 503, served again
# within 5 s of the promotion, no code validated twice, each event stored
# once and its retry answered as a duplicate. nginx -t on password files.

# platform-test: serial (failovers, time bounds)

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Platform::Test;
use IO::Socket::INET;
use Time::HiRes qw(sleep time);

my $t = Platform::Test->new(workers => 2);
my $dir = $t->testdir;

### nginx -t: password files

my $locations = <<'EOF';
    server {
        listen 127.0.0.1:%%PORT%%;
        location /validate-otp/ { platform_otp; }
    }
EOF

Platform::Test::_spew("$dir/empty", "\n");
mkdir "$dir/adir";

for my $case ([ 'empty', qr/"[^"]*empty" holds no password/,
                'an empty password file' ],
              [ 'adir', qr/cannot read "[^"]*adir"/,
                'a password file that cannot be read' ])
{
    my ($file, $re, $name) = @$case;
    $t->write_config("    platform_redis_sentinel platform 127.0.0.1:26379"
                     . " password=$dir/$file;\n$locations");
    my $r = $t->check_config;
    ok(!$r->{ok}, "nginx -t: $name: refused");
    like($r->{output}, $re, "nginx -t: $name: says why");
}

### the servers

my $s = $t->start_redis_sentinel(password => 'master-secret',
                                 sentinel_password => 'sentinel-secret',
                                 failover_timeout => 2000);
my @sentinels = $s->sentinels;

Platform::Test::_spew("$dir/master.pass", "master-secret\n");
Platform::Test::_spew("$dir/sentinel.pass", "sentinel-secret\n");

# the servers started here, stopped however the test ends
my @extra;
my $owner = $$;
END { kill 'TERM', @extra if $owner && $$ == $owner }

# a redis-server or a sentinel of the test's own, with the same passwords
# as the others: only what it says differs
sub start_own {
    my ($kind, @conf) = @_;
    my $d = "$dir/redis-$kind";
    mkdir $d;
    my $port = Platform::Test::free_port();
    Platform::Test::_spew("$d/redis.conf", join '', map { "$_\n" }
        "port $port", 'bind 127.0.0.1', 'daemonize yes', "dir $d",
        "pidfile $d/redis.pid", "logfile $d/redis.log", @conf);
    system($kind =~ /sentinel/ ? 'redis-sentinel' : 'redis-server',
           "$d/redis.conf") == 0 or die "$kind did not start\n";
    $t->wait_until(sub { -s "$d/redis.pid"
                         && `redis-cli -p $port PING 2>&1` =~ /PONG|NOAUTH/ },
                   10) or die "$kind on $port does not answer\n";
    push @extra, Platform::Test::_read_pid("$d/redis.pid");
    return "127.0.0.1:$port";
}

# a replica of nothing, and a sentinel that names it as the master
my $nowhere = Platform::Test::closed_port();
my $lonely = start_own('lonely', "save ''", 'requirepass master-secret',
                       "replicaof 127.0.0.1 $nowhere");
my $lonely_at = join ' ', split /:/, $lonely;
my @sentinel_conf = ('requirepass sentinel-secret',
                     'sentinel resolve-hostnames no');
my $liar = start_own('sentinel-liar', @sentinel_conf,
                     "sentinel monitor platform $lonely_at 2",
                     'sentinel auth-pass platform master-secret');

# a sentinel that watches another master only
my $stranger = start_own('sentinel-stranger', @sentinel_conf,
                         "sentinel monitor other $lonely_at 2",
                         'sentinel auth-pass other master-secret');

# a port that accepts connections and never answers
my $silent = IO::Socket::INET->new(Listen => 16, LocalAddr => '127.0.0.1',
                                   LocalPort => 0, ReuseAddr => 1)
    or die "listen: $!\n";
my $silent_at = '127.0.0.1:' . $silent->sockport;

my $down = '127.0.0.1:' . Platform::Test::closed_port();

# the one that does not know is next after the first that does
my $list = join ' ', $down, $silent_at, $liar, $sentinels[0], $stranger,
                     @sentinels[1, 2];

$t->run(Platform::Test::redis_routes_config(<<"EOF"));
    platform_redis_sentinel platform $list
        password=$dir/master.pass sentinel_password=$dir/sentinel.pass;
    platform_redis_connect_timeout 300ms;
    platform_redis_timeout 500ms;
EOF

$t->ignore_redis_failover;

sub otp {
    my ($code) = @_;
    return $t->request('GET', "/validate-otp/$code",
                       headers => { tenantId => 'tenant-a',
                                    countryCode => 'NG' })->{status};
}

sub store_code { $s->redis('SET', "otp:tenant-a:NG:$_[0]", 1, 'EX', 300) }

sub deliver {
    my ($id) = @_;
    return $t->request('POST', '/api/webhooks/public/src/events',
                       headers => { 'Content-Type' => 'application/json' },
                       body => qq({"id":"$id"}));
}

### the master found past sentinels that cannot say where it is

# a worker listens there once its master answered ROLE: until both do,
# one of them may still send events straight to PostgreSQL, unclaimed
ok($t->wait_until(sub { $s->subscribers == 2 }, 10),
   'discovery: each worker listens to a sentinel that named the master');
is($t->request('GET', '/health')->{status}, 200,
   'discovery: health, through the sentinels');

store_code('135790');
is(otp('135790'), 200, 'discovery: an OTP code validates');
is(otp('135790'), 404, 'discovery: once');
is(deliver('ev-1')->{status}, 200, 'discovery: a webhook event stored');
is($s->redis('GET', 'webhook:source:src::ev-1'), 'stored',
   'discovery: its claim on the master');

unlike($t->error_log, qr/master-secret|sentinel-secret/,
       'no password in the log');

is(Platform::Test::redis_subscribers($liar, 'sentinel-secret')
   + Platform::Test::redis_subscribers($stranger, 'sentinel-secret'), 0,
   'discovery: none to one that named a replica or knows another master');

### sentinels that only name a replica or do not know the master

# which sentinel a worker asks first is the first to connect: here no
# other can say where the master is
my $t2 = Platform::Test->new(workers => 1, db => 0);
my $dsn = $t->pg_dsn;
$t2->run(<<"EOF");
    platform_pg "$dsn";
    platform_redis_sentinel platform $liar $stranger
        password=$dir/master.pass sentinel_password=$dir/sentinel.pass;
    platform_redis_connect_timeout 300ms;
    platform_redis_timeout 500ms;

    server {
        listen 127.0.0.1:%%PORT%%;
        location = /health { platform_health; }
    }
EOF
$t2->ignore_log(qr/redis: /);

sleep 2;
is($t2->request('GET', '/health')->{status}, 503,
   'a replica named: not served, though it answers PING');
my $refused = () = $t2->error_log =~ /"\Q$lonely\E" is not a master, leaving it/g;
cmp_ok($refused, '>=', 2, 'a replica named: refused by its ROLE, each time');
my $unknown = () = $t2->error_log =~ /"\Q$stranger\E" does not know the master "platform"/g;
is($unknown, 1, 'a sentinel that does not know the master: logged once');
$t2->done;

### no subscription: the sentinels refuse it (an ACL)

for my $sn (@sentinels) {
    $s->redis_at($sn, 'ACL', 'SETUSER', 'default', 'resetchannels');
}

ok($t->reload, 'no subscription: reloaded');
ok($t->wait_until(sub { $t->error_log =~ /NOPERM/ }, 5),
   'no subscription: the sentinels refuse it');
ok($t->wait_until(sub { $t->request('GET', '/health')->{status} == 200 }),
   'no subscription: health');

### a paused master, the module idle: followed without a request, from
### the ROLE asked every second and not answered

my $old = $s->master;
my ($pid) = $s->redis_at($old, 'INFO', 'server') =~ /^process_id:(\d+)/m;
$s->wait_ready(10);
kill 'STOP', $pid;

my $took = $s->wait_failover($old, 20);
ok(defined $took, 'pause: the sentinels promoted the replica')
    and diag(sprintf 'pause: promoted %.1f s after the pause', $took);
my $new = $s->master;

sub moved_to {
    my ($addr) = @_;
    my $log = $t->error_log;
    my %pids;
    $pids{$1} = 1 while $log =~ /(\d+)#\d+: redis: the master "platform" is at "\Q$addr\E"/g;
    return scalar keys %pids;
}

ok($t->wait_until(sub { moved_to($new) == 2 }, 1.5),
   'pause: each worker moved to the new master, no request needed');

store_code('864200');
is(otp('864200'), 200, 'pause: the first request is served');

# no longer needed: a replica of the new master in its place
kill 'KILL', $pid;
kill 'CONT', $pid;
$t->wait_until(sub { !kill 0, $pid }, 5);
$s->revive($old);

### the master killed under load: followed from its lost connection

my @codes = map { sprintf '5%05d', $_ } 1 .. 30;
store_code($_) for @codes;
$s->redis('WAIT', 1, 2000);

my (%ok, @statuses, %event_status);
my ($killed_at, $promoted_at, $first_after, $last_503);
my $start = time;
my $i = 0;
$old = $s->master;

while (time - $start < 30) {
    my $code = $codes[$i % @codes];
    my @batch = map {
        $t->request_async('GET', "/validate-otp/$code",
                          headers => { tenantId => 'tenant-a',
                                       countryCode => 'NG' },
                          timeout => 10)
    } 1 .. 3;
    my $id = "ev-fo-$i";
    my $ev = $t->request_async('POST', '/api/webhooks/public/src/events',
                               headers => { 'Content-Type' =>
                                            'application/json' },
                               body => qq({"id":"$id"}), timeout => 10);
    for my $req (@batch) {
        my $st = $req->wait->{status};
        push @statuses, $st;
        $ok{$code}++ if $st == 200;
        $last_503 = time if $st == 503;
        $first_after //= time if $promoted_at && $st != 503;
    }
    $event_status{$id} = $ev->wait->{status};
    $i++;

    if (!$killed_at && $i == 10) {
        $s->kill_master;
        $killed_at = time;
    }

    if ($killed_at && !$promoted_at) {
        my ($host, $port) = split /\n/, $s->redis_at($sentinels[0],
            'SENTINEL', 'GET-MASTER-ADDR-BY-NAME', 'platform');
        $promoted_at = time if ($port // '') =~ /^\d+$/
                               && "$host:$port" ne $old;
    }

    last if $promoted_at && time - $promoted_at > 6;
}

ok($promoted_at, 'failover: the sentinels promoted the replica')
    and diag(sprintf 'failover: promoted %.1f s after the kill',
                     $promoted_at - $killed_at);
ok(!grep({ $_ != 200 && $_ != 404 && $_ != 503 } @statuses),
   'failover: OTP answers only 200, 404 and 503 (no 500, no hang)')
    or diag("@statuses");
ok(grep({ $_ == 503 } @statuses), 'failover: 503 while there was no master');
ok(!grep({ $_ > 1 } values %ok), 'failover: no code validated twice')
    or diag(join ' ', %ok);
ok($promoted_at && $first_after && ($last_503 // 0) < $promoted_at + 5,
   'failover: served again within 5 s of the promotion')
    and diag(sprintf 'failover: served again %.2f s after the promotion,'
                     . ' the last 503 %.2f s after it',
                     $first_after - $promoted_at,
                     ($last_503 // 0) - $promoted_at);

my @ev_bad = grep { $event_status{$_} != 200 && $event_status{$_} != 503 }
             keys %event_status;
ok(!@ev_bad, 'failover: webhook deliveries answered 200 or 503')
    or diag(join ' ', map { "$_=$event_status{$_}" } @ev_bad);

# the sender sends each event again (after a 503, or not knowing)
my @retried = map { [ $_, deliver($_) ] } sort keys %event_status;
ok(!grep({ $_->[1]{status} != 200 } @retried),
   'failover: every retry answered 200');
ok(!grep({ $event_status{$_->[0]} == 200
           && !$_->[1]{json}{data}{duplicate} } @retried),
   'failover: the retry of a stored event answered as a duplicate');
my $n = keys %event_status;
is($t->psql("SELECT count(*), count(DISTINCT event_key) FROM webhook_events"
            . " WHERE event_key LIKE 'ev-fo-%'"), "$n|$n",
   'failover: one row per event, none twice');

is(otp('000001'), 404, 'failover: the new master answers');

# asked at the failed connects to the dead master: logged once a worker
my $log = $t->error_log;
my %unknown;
$unknown{$1}++ while $log =~ /(\d+)#\d+: [^\n]*"\Q$stranger\E" does not [^\n]*master "platform"/g;
ok(keys %unknown >= 2, 'a sentinel that does not know the master: asked')
    or diag(join ' ', %unknown);
ok(!grep({ $_ != 1 } values %unknown),
   'a sentinel that does not know the master: logged once by a worker')
    or diag(join ' ', %unknown);

for my $sn (@sentinels) {
    $s->redis_at($sn, 'ACL', 'SETUSER', 'default', 'allchannels');
}

$t->done;
done_testing;
