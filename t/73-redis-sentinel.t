#!/usr/bin/perl

# platform_redis_sentinel against a real master, replica and three
# sentinels started by the test: the master found through the sentinels
# (a dead one first in the list is skipped); the master killed under load:
# nothing but 503 while the sentinels promote the replica, served again
# within 5 s of the promotion, no OTP code validated twice, no webhook
# event stored twice; a manual failover (the old master, alive, becomes a
# replica) followed; the master's password read from a file; nginx -t.

# platform-test: serial (a failover, time bounds)

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Platform::Test;
use Time::HiRes qw(sleep time);

my $t = Platform::Test->new(workers => 2);

### nginx -t

my $loc = <<'EOF';
    server {
        listen 127.0.0.1:%%PORT%%;
        location /validate-otp/ { platform_otp; }
    }
EOF

sub refused {
    my ($conf, $re, $name) = @_;
    like($t->check_config($conf . $loc)->{output}, $re, "nginx -t: $name");
}

refused("    platform_redis 127.0.0.1:6379;\n"
        . "    platform_redis_sentinel platform 127.0.0.1:26379;\n",
        qr/"platform_redis" and "platform_redis_sentinel" both/,
        'with platform_redis');
refused("    platform_redis_sentinel platform 127.0.0.1:26379;\n"
        . "    platform_redis_cluster 127.0.0.1:7000;\n",
        qr/is duplicate, or set with "platform_redis_sentinel"/,
        'with platform_redis_cluster');
refused("    platform_redis_sentinel 127.0.0.1:26379 127.0.0.1:26380;\n",
        qr/needs the master's name first/, 'the name first');
refused("    platform_redis_sentinel platform password=/nonexistent;\n",
        qr/names no sentinel|nonexistent/, 'no sentinel');
refused("    platform_redis_sentinel platform sentinel.example:26379;\n",
        qr/sentinel "sentinel.example:26379": an IP address and a port/,
        'an address');
refused("    platform_redis_sentinel platform 127.0.0.1:26379"
        . " password=%%TESTDIR%%/none;\n", qr/none.*failed/,
        'a password file that is not there');

### the servers

my $s = $t->start_redis_sentinel;
my $dead = Platform::Test::closed_port();
my $sentinels = join ' ', "127.0.0.1:$dead", $s->sentinels;

$t->run(Platform::Test::redis_routes_config(<<"EOF", <<'EOF'));
    platform_redis_sentinel platform $sentinels;
    platform_redis_timeout 500ms;
    platform_redis_connect_timeout 500ms;
EOF
        location = /metrics { platform_metrics; }
EOF

$t->ignore_redis_failover;

# each worker subscribes to a sentinel once its master answered ROLE: the
# requests below may reach either
ok($t->wait_until(sub { $s->subscribers == 2 }, 10),
   'each worker found the master and listens to a sentinel');
is($t->request('GET', '/health')->{status}, 200,
   'health: connected to the master the sentinels name');
like($t->error_log, qr/the master "platform" is at "\Q${\ $s->master }\E"/,
     'the master found through the sentinels');

sub otp {
    my ($code) = @_;
    return $t->request('GET', "/validate-otp/$code",
                       headers => { tenantId => 'tenant-a',
                                    countryCode => 'NG' })->{status};
}

sub store_code { $s->redis('SET', "otp:tenant-a:NG:$_[0]", 1, 'EX', 300) }

sub rows {
    my ($id) = @_;
    return $t->psql("SELECT count(*) FROM webhook_events"
                    . " WHERE event_key = '$id'") + 0;
}

store_code('246810');
is(otp('246810'), 200, 'the code validates');
is(otp('246810'), 404, 'once');
is($t->request('POST', '/api/webhooks/public/src/events',
               headers => { 'Content-Type' => 'application/json' },
               body => '{"id":"ev-1"}')->{status}, 200, 'a webhook stored');
is($s->redis('GET', 'webhook:source:src::ev-1'), 'stored',
   'its claim on the master, in the form of one Redis');

### the master killed under load

sub failover_under_load {
    my ($what, $break) = @_;
    my @codes = map { sprintf '7%05d', $_ } 1 .. 20;
    store_code($_) for @codes;
    $s->redis('WAIT', 1, 2000);

    my (%ok, %when, @statuses, @events);
    my ($i, $done, $promoted_at, $last_503) = (0, 0, undef, 0);
    my $start = time;
    my $event = "ev-$what";

    while (time - $start < 30) {
        my $code = $codes[$i % @codes];
        my @batch = map {
            $t->request_async('GET', "/validate-otp/$code",
                              headers => { tenantId => 'tenant-a',
                                           countryCode => 'NG' })
        } 1 .. 3;
        my $ev = $t->request_async('POST',
            '/api/webhooks/public/src/events',
            headers => { 'Content-Type' => 'application/json' },
            body => qq({"id":"$event"}));
        for my $req (@batch) {
            my $st = $req->wait->{status};
            push @statuses, $st;
            if ($st == 200) {
                $ok{$code}++;
                push @{$when{$code}}, sprintf '%.2f', time - $start;
            }
            $last_503 = time if $st == 503;
        }
        push @events, $ev->wait->{status};
        $i++;

        if (!$done && $i == 5) {
            $done = 1;
            my $took = $break->();
            $promoted_at = time;
            ok(defined $took, "$what: the sentinels promoted the replica")
                and diag(sprintf '%s: promoted in %.1f s', $what, $took);
        }

        last if $promoted_at && time - $promoted_at > 6;
    }

    ok(!grep({ $_ != 200 && $_ != 404 && $_ != 503 } @statuses),
       "$what: OTP answers only 200, 404 and 503")
        or diag("@statuses");
    ok(!grep({ $_ > 1 } values %ok), "$what: no code validated twice")
        or diag(sprintf("break at %.2f\n", $promoted_at - $start),
                map { "$_ at @{$when{$_}}\n" } grep { $ok{$_} > 1 } keys %ok);
    ok(!grep({ $_ != 200 } @events), "$what: deliveries answered 200")
        or diag("@events");
    is(rows($event), 1, "$what: one row for the event");
    ok($promoted_at && $last_503 < $promoted_at + 5,
       "$what: served again within 5 s of the promotion")
        or diag(sprintf 'last 503 %.1f s after the promotion',
                $last_503 - ($promoted_at // 0));
    is(otp('000001'), 404, "$what: the new master answers");
}

my $killed;
failover_under_load('kill', sub {
    $killed = $s->kill_master;
    return $s->wait_failover($killed, 20);
});

like($t->error_log, qr/after a failover \(\+switch-master\)|named by a sentinel/,
     'the new master learned from the sentinels');

### a manual failover: the old master lives on as a replica

$s->revive($killed);

# the workers learn of the replica (ROLE, every second) before the failover
sleep 2.5;
failover_under_load('manual', sub { $s->failover(20) });

my $m = $t->request('GET', '/metrics')->{content};
my ($switches) = $m =~ /^platform_redis_master_switches_total (\d+)/m;
cmp_ok($switches // 0, '>=', 6,
       'metrics: the switches of both workers, at start and twice after');

### a master with a password, read from a file

my $pass = 'pw-' . join '', map { ('a' .. 'z')[rand 26] } 1 .. 16;
for my $n ($s->nodes) {
    $s->redis_at($n, 'CONFIG', 'SET', 'masterauth', $pass);
    $s->redis_at($n, 'CONFIG', 'SET', 'requirepass', $pass);
}
$s->redis_at($_, 'SENTINEL', 'SET', 'platform', 'auth-pass', $pass)
    for $s->sentinels;
open my $fh, '>', $t->testdir . '/redis.pass' or die;
print $fh "$pass\n";
close $fh;

my $t2 = Platform::Test->new(workers => 1, db => 0);
my $sent = join ' ', $s->sentinels;
my $dsn = $t->pg_dsn;
my $dir = $t->testdir;
$t2->run(<<"EOF");
    platform_pg "$dsn";
    platform_redis_sentinel platform $sent password=$dir/redis.pass;

    server {
        listen 127.0.0.1:%%PORT%%;
        location /validate-otp/ { platform_otp; }
        location = /health { platform_health; }
    }
EOF
ok($t2->wait_until(sub { $t2->request('GET', '/health')->{status} == 200 }),
   'password: connected');
$s->redis_at($s->master, '-a', $pass, '--no-auth-warning', 'SET',
             'otp:tenant-p:NG:135790', 1);
is($t2->request('GET', '/validate-otp/135790',
                headers => { tenantId => 'tenant-p', countryCode => 'NG' })
       ->{status}, 200, 'password: the code validates');
unlike($t2->error_log, qr/\Q$pass\E/, 'password: never in the log');
$t2->done;

$t->done;
done_testing;
