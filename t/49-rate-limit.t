#!/usr/bin/perl

# Fleet-wide rate limits (platform_rate_limit): per tenant across two
# nginx sharing one Redis, the burst, the 429 in the family's envelope
# with Retry-After and the RateLimit headers, tenant, credential and
# address counted apart, IPv6 by /64, the address checked before the
# credentials and before any OTP counter is written, the nearest level's
# limits only, the per-worker fallback when Redis cannot answer (logged
# once), the metrics, and what nginx -t refuses.

use strict;
use warnings;
use utf8;

use lib 't/lib';
use Test::More;
use Platform::Test;
use Platform::JWT;
use IO::Socket::INET;
use Time::HiRes ();

my $t = Platform::Test->new(db => 0);
my $k = Platform::JWT::keys($t->testdir . '/keys');

# rates of a few a minute: a request refills its slot only after 20 s or
# more, far longer than the test takes, so no count depends on timing

my $conf = <<'EOF';
    set_real_ip_from 127.0.0.1;
    real_ip_header X-Forwarded-For;

    server {
        listen 127.0.0.1:%%PORT%%;

        location /validate-otp/ {
            platform_otp;
            platform_rate_limit tenant 2r/m burst=2;
        }

        location = /openapi.json {
            platform_openapi;
            platform_rate_limit address 1r/m burst=4;
        }

        location = /metrics { platform_metrics; }
    }

    server {
        listen 127.0.0.1:%%PORT_2%%;

        # the server's limit is not inherited where a location declares one
        platform_rate_limit tenant 1r/m;

        location /validate-otp/ {
            platform_otp;
            platform_rate_limit address 3r/m burst=1;
        }
    }

    server {
        listen 127.0.0.1:%%PORT_3%%;

        location /validate-otp/ {
            platform_otp;
            platform_auth bearer;
            platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;
            platform_rate_limit credential 1r/m;
            platform_rate_limit tenant 3r/m burst=2;
        }
    }
EOF

$t->run($conf);

# keys of this file only: the suite's Redis is shared, and a run within
# the same minute must not meet the last one's budgets
my $id = "t49-$$-" . time;
my ($o1, $o2) = ($$ % 250 + 1, int(time) % 250 + 1);

# the worker connects to Redis once started, and OTP is 503 until then:
# wait for it with a tenant of its own, whose budget nothing below uses
ok($t->wait_until(sub { otp("$id-warm")->{status} != 503 }, 10),
   'the worker answers with Redis');

sub otp {
    my ($tenant, %opts) = @_;
    my %h = (countryCode => 'NG', %{ $opts{headers} // {} });
    $h{tenantId} = $tenant if defined $tenant;
    $h{'X-Forwarded-For'} = $opts{from} if defined $opts{from};
    return ($opts{t} // $t)->request('GET', '/validate-otp/1234',
                                     headers => \%h,
                                     port => $opts{port}
                                             // ($opts{t} // $t)->port);
}

# n requests from one address on connections opened before and written
# while the worker is stopped: it reads them all in one pass of its loop

sub together {
    my ($t, $n, $from) = @_;
    my ($worker) = $t->workers;

    my @s = map {
        IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $t->port,
                              Proto => 'tcp') or die "connect: $!\n"
    } 1 .. $n;

    # accepted, one a pass, before the stop
    select(undef, undef, undef, 0.3);

    kill 'STOP', $worker;
    $_->syswrite("GET /openapi.json HTTP/1.1\r\nHost: localhost\r\n"
                 . "X-Forwarded-For: $from\r\nConnection: close\r\n\r\n")
        for @s;
    kill 'CONT', $worker;

    return map {
        my ($s, $raw, $buf) = ($_, '');
        $raw .= $buf while $s->sysread($buf, 65536);
        $t->parse_response($raw);
    } @s;
}

###############################################################################
# per tenant: burst + 1 at once, then 429

my @r = map { otp("$id-a") } 1 .. 3;
is_deeply([map { $_->{status} } @r], [404, 404, 404],
          'tenant: burst + 1 requests pass');
is($r[0]{headers}{'ratelimit-policy'}, '"tenant";q=2;w=60',
   'RateLimit-Policy: the quota and window');
is($r[0]{headers}{ratelimit}, '"tenant";r=2;t=30',
   'RateLimit: what remains, when it is whole again');
is($r[2]{headers}{ratelimit}, '"tenant";r=0;t=90', 'RateLimit: none left');

my $r = otp("$id-a");
is($r->{status}, 429, 'tenant: past the burst, 429');
Platform::Test::is_envelope_b_error($r, 429, 'Too many requests.',
    'The rate limit is reached. Retry after the time Retry-After gives.',
    'tenant: 429');
ok($r->{headers}{'retry-after'} >= 25 && $r->{headers}{'retry-after'} <= 30,
   "Retry-After: the seconds until one more ($r->{headers}{'retry-after'})");
is($r->{headers}{ratelimit}, '"tenant";r=0;t=90', '429: RateLimit');
like($r->{headers}{'x-request-id'} // '', qr/./, '429: X-Request-Id');

is(otp("$id-b")->{status}, 404, 'another tenant is not limited');

# the key: the identity's hash tag, the interval and the burst

my $ttl = $t->redis('PTTL', "platform:rl:{tenant:$id-a}:30000000:2");
ok($ttl > 60000 && $ttl <= 90000, "the key expires when whole ($ttl ms)");

###############################################################################
# checks of one key arriving together are counted by one script call as
# one by one: the first burst + 1 admitted, each with what remained in
# its turn, the others 429, the arrival time moved once per admitted one

my $baddr = "10.46.$o1.$o2";
my $commands = sub {
    ($t->request('GET', '/metrics')->{content}
        =~ /^platform_redis_commands_total (\d+)$/m)[0] // 0;
};
my $before = $commands->();

my @b = together($t, 12, $baddr);
my @ok = grep { $_->{status} == 200 } @b;
my @no = grep { $_->{status} == 429 } @b;

is(scalar @ok, 5, 'together: burst + 1 admitted');
is(scalar @no, 7, 'together: the others 429');
is_deeply([sort map { $_->{headers}{ratelimit} // '' } @ok],
          [sort map { sprintf '"address";r=%d;t=%d', 4 - $_, 60 * ($_ + 1) }
                    0 .. 4],
          'together: each admitted one has what remained in its turn');
is(scalar(grep { ($_->{headers}{'retry-after'} // 0) =~ /^(59|60)$/
                 && ($_->{headers}{ratelimit} // '') eq
                    '"address";r=0;t=300' } @no),
   7, 'together: each 429 with Retry-After, one interval');

my ($sec, $usec) = split /\n/, $t->redis('TIME');
my $ahead = $t->redis('GET', "platform:rl:{address:$baddr}:60000000:4")
            - ($sec * 1000000 + $usec);
ok($ahead > 295_000_000 && $ahead <= 300_000_000,
   "together: the arrival time is 5 intervals ahead ($ahead us)");
# one pass of the event loop reads them all, on a quiet machine; on a
# loaded one the worker may find the last connections readable only in
# its next pass: at most two calls, never one per request
cmp_ok($commands->() - $before, '<=', 2,
       'together: one script call per pass, not one per request');

###############################################################################
# one budget for the fleet: a second nginx on the same Redis

my $t2 = Platform::Test->new(db => 0);
Platform::JWT::keys($t2->testdir . '/keys');
$t2->run($conf);

@r = map { otp("$id-c", t => ($_ % 2 ? $t2 : $t)) } 1 .. 4;
is_deeply([map { $_->{status} } @r], [404, 404, 404, 429],
          'two nginx share the tenant\'s budget');
is(otp("$id-c", t => $t2)->{status}, 429, 'and both refuse past it');
$t2->done;

###############################################################################
# per address, before the credentials and before any OTP counter

my $port2 = $t->port(2);
my $addr = "10.49.$o1.$o2";

@r = map { otp(undef, port => $port2, from => $addr) } 1 .. 2;
is_deeply([map { $_->{status} } @r], [400, 400],
          'address: a request without its tenant is refused (400)');
is($r[0]{headers}{'ratelimit-policy'}, '"address";q=3;w=60',
   'address: RateLimit-Policy');
is(otp("$id-d", port => $port2, from => $addr)->{status}, 429,
   'address: past the burst, 429 before the credentials are looked at');
is(otp("$id-d", port => $port2, from => $addr)->{status}, 429,
   'address: still 429');
is($t->redis('GET', "otp:attempts:$id-d:$addr"), '',
   'no OTP attempt counted for a limited address');
is(otp("$id-d", port => $port2, from => "10.49.$o1." . ($o2 % 250 + 2))
       ->{status}, 404,
   'another address is not limited');

# the server's tenant limit (1r/m) is not the location's

is(otp("$id-e", port => $port2, from => "10.48.$o1.$o2")->{status}, 404,
   'tenant: first');
is(otp("$id-e", port => $port2, from => "10.47.$o1.$o2")->{status}, 404,
   'tenant: the server level\'s limit is not inherited');

# IPv6: one /64 is one client

my $net = sprintf '2001:db8:%x:%x', $o1, $o2;
@r = map { otp("$id-f", port => $port2, from => "$net:0:1::$_")->{status} }
     1 .. 3;
is_deeply(\@r, [404, 404, 429], 'IPv6: addresses of one /64 share a budget');
is(otp("$id-f", port => $port2,
       from => sprintf('2001:db8:%x:%x:0:1::1', $o1, $o2 + 300))->{status},
   404,
   'IPv6: another /64 is another client');

###############################################################################
# per credential: a token's sub, apart from its tenant

my $port3 = $t->port(3);

sub bearer {
    my ($sub, $tenant) = @_;
    my $token = Platform::JWT::hs256($k, sub => $sub, tenantId => $tenant);
    return otp(undef, port => $port3,
               headers => { Authorization => "Bearer $token" });
}

is(bearer("$id-u1", "$id-g")->{status}, 404, 'credential: first');
$r = bearer("$id-u1", "$id-g");
is($r->{status}, 429, 'credential: the second of the sub is 429');
is($r->{headers}{'ratelimit-policy'},
   '"credential";q=1;w=60, "tenant";q=3;w=60',
   'credential and tenant: both policies');
is(bearer("$id-u2", "$id-g")->{status}, 404,
   'another sub of the tenant is not limited');

# the refused request spent the tenant's budget too: 3 of 3 are gone
is(bearer("$id-u3", "$id-g")->{status}, 429,
   'the tenant\'s own limit counts every sub');

###############################################################################
# metrics

$r = $t->request('GET', '/metrics');
my ($tenant_n) = $r->{content}
    =~ /^platform_rate_limited_total\{family="otp",kind="tenant"\} (\d+)$/m;
my ($addr_n) = $r->{content}
    =~ /^platform_rate_limited_total\{family="otp",kind="address"\} (\d+)$/m;
my ($cred_n) = $r->{content}
    =~ /^platform_rate_limited_total\{family="otp",kind="credential"\} (\d+)$/m;
ok(($tenant_n // 0) >= 3, 'metrics: refusals of tenant limits');
ok(($addr_n // 0) >= 3, 'metrics: refusals of address limits');
ok(($cred_n // 0) >= 1, 'metrics: refusals of credential limits');

###############################################################################
# nginx -t

for my $bad (['platform_rate_limit user 1r/s;', qr/invalid kind "user"/,
              'a bad kind'],
             ['platform_rate_limit tenant 10r/h;', qr/invalid rate "10r\/h"/,
              'a bad unit'],
             ['platform_rate_limit tenant 0r/s;', qr/invalid rate "0r\/s"/,
              'a zero rate'],
             ['platform_rate_limit tenant 5r/s burst=x;',
              qr/invalid burst "burst=x"/, 'a bad burst'],
             ['platform_rate_limit tenant 5r/s per=1;',
              qr/only "burst=N" may follow/, 'another parameter'],
             ["platform_rate_limit tenant 5r/s;\n"
              . 'platform_rate_limit tenant 9r/s;',
              qr/"tenant" limit is already declared at this level/,
              'a kind twice at one level'],
             ['platform_identity_bureau_rate 5/s;', qr/invalid rate "5\/s"/,
              'a bad bureau rate'])
{
    $t->config_refused(<<"EOF", $bad->[1], $bad->[2]);
    server {
        listen 127.0.0.1:%%PORT%%;
        location /validate-otp/ {
            platform_otp;
            $bad->[0]
        }
    }
EOF
}

$t->done;

###############################################################################
# Redis cannot answer: each worker limits alone, logged once

my $t3 = Platform::Test->new(db => 0);
my $redis = $t3->start_private_redis;

$t3->run(<<"EOF");
    platform_redis ${\ $redis->addr};

    server {
        listen 127.0.0.1:%%PORT%%;

        location = /openapi.json {
            platform_openapi;
            platform_rate_limit address 2r/m burst=1;
        }

        location = /metrics { platform_metrics; }
    }
EOF

# Redis answers first: the first decisions are the fleet's
ok($t3->wait_until(sub {
    $t3->request('GET', '/metrics')->{content}
        =~ /^platform_redis_connects_total [1-9]/m }, 10),
   'the worker is connected to Redis');

@r = map { $t3->request('GET', '/openapi.json')->{status} } 1 .. 3;
is_deeply(\@r, [200, 200, 429], 'Redis: limited');

$redis->stop;
$t3->ignore_log(qr/redis|Redis/);

@r = map { $t3->request('GET', '/openapi.json')->{status} } 1 .. 6;
is_deeply(\@r, [200, 200, 429, 429, 429, 429],
          'Redis down: the worker limits alone');

my @lines = $t3->error_log =~ /Redis cannot answer rate limits/g;
is(scalar @lines, 1, 'the outage is logged once');

$r = $t3->request('GET', '/metrics');
my ($local) = $r->{content} =~ /^platform_rate_limit_local_total (\d+)$/m;
ok(($local // 0) >= 6, 'metrics: decisions taken alone');

$t3->done;

###############################################################################
# clients gone while their checks wait for Redis: the reply finds none of
# them, and the worker serves the next request

my $t5 = Platform::Test->new(db => 0);
my $redis5 = $t5->start_private_redis;

$t5->run(<<"EOF");
    platform_redis ${\ $redis5->addr};
    platform_redis_timeout 5s;

    server {
        listen 127.0.0.1:%%PORT%%;

        location = /openapi.json {
            platform_openapi;
            platform_rate_limit address 1000r/s burst=1000;
        }

        location = /metrics { platform_metrics; }
    }
EOF

ok($t5->wait_until(sub {
    $t5->request('GET', '/metrics')->{content}
        =~ /^platform_redis_connects_total [1-9]/m }, 10),
   'gone: the worker is connected to Redis');

my ($worker5) = $t5->workers;
$redis5->redis('CLIENT', 'PAUSE', 1500);

@r = @{ $t5->burst([ map { ['GET', '/openapi.json'] } 1 .. 20 ],
                   timeout => 0.3) };
is(scalar(grep { $_->{status} == 599 } @r), 20,
   'gone: the clients leave while Redis is paused');

ok($t5->wait_until(sub {
    $t5->request('GET', '/openapi.json')->{status} == 200 }, 5),
   'gone: the next request is served');
is_deeply([$t5->workers], [$worker5], 'gone: by the same worker');
like($t5->error_log, qr/client prematurely closed connection while waiting/,
     'gone: the worker saw the clients leave');

$t5->done;

###############################################################################
# far from the limit a request does not wait for Redis: the hint of the
# last reply admits it, and Redis counts it all the same; near the limit
# it waits. A rate of 6r/m: the arrival time a request moves (10 s) is
# far longer than the test takes, so Redis's key still shows the count.

my $t6 = Platform::Test->new(db => 0);
my $redis6 = $t6->start_private_redis;

$t6->run(<<"EOF");
    platform_redis ${\ $redis6->addr};
    platform_redis_timeout 5s;

    server {
        listen 127.0.0.1:%%PORT%%;

        location = /openapi.json {
            platform_openapi;
            platform_rate_limit address 6r/m burst=1000;
        }

        location = /metrics { platform_metrics; }
    }

    server {
        listen 127.0.0.1:%%PORT_2%%;

        location = /openapi.json {
            platform_openapi;
            platform_rate_limit address 6r/m burst=4;
        }
    }
EOF

ok($t6->wait_until(sub {
    $t6->request('GET', '/metrics')->{content}
        =~ /^platform_redis_connects_total [1-9]/m }, 10),
   'hint: the worker is connected to Redis');

sub timed {
    my ($t, %opts) = @_;
    my $start = Time::HiRes::time();
    my $r = $t->request('GET', '/openapi.json', %opts);
    return ($r, Time::HiRes::time() - $start);
}

# the first waits for Redis, whose reply is the worker's hint
$r = $t6->request('GET', '/openapi.json');
is($r->{status}, 200, 'hint: the first request');
is($r->{headers}{ratelimit}, '"address";r=1000;t=10',
   'hint: the first request\'s RateLimit, from Redis');

$redis6->redis('CLIENT', 'PAUSE', 1500);

my $elapsed;
($r, $elapsed) = timed($t6, timeout => 1);
is($r->{status}, 200,
   'hint: far from the limit, admitted while Redis is paused');
ok($elapsed < 0.5, sprintf 'hint: at once (%.3f s)', $elapsed);
is($r->{headers}{ratelimit}, '"address";r=999;t=20',
   'hint: RateLimit from the hint');

# after the pause: both counted, the arrival time two intervals ahead of
# the first request, less the time since
($sec, $usec) = split /\n/, $redis6->redis('TIME');
$ahead = $redis6->redis('GET',
                        'platform:rl:{address:127.0.0.1}:10000000:1000')
         - ($sec * 1000000 + $usec);
ok($ahead > 15_000_000 && $ahead <= 20_000_000,
   "hint: Redis counted both requests ($ahead us ahead)");

# near the limit (burst=4, less than the margin of 8): the request waits
is($t6->request('GET', '/openapi.json', port => $t6->port(2))->{status},
   200, 'near: the first request');

$redis6->redis('CLIENT', 'PAUSE', 1000);

($r, $elapsed) = timed($t6, port => $t6->port(2), timeout => 5);
is($r->{status}, 200, 'near: admitted once Redis answers');
ok($elapsed > 0.7, sprintf 'near: it waited for Redis (%.3f s)', $elapsed);
like($r->{headers}{ratelimit}, qr/^"address";r=3;t=(19|20)$/,
     'near: RateLimit, from Redis after the pause');

$t6->done;

###############################################################################
# identity: a tenant's budget of bureau calls; an answer on record is free

my $t4 = Platform::Test->new;
my $k4 = Platform::JWT::keys($t4->testdir . '/keys');

$t4->run(<<'EOF');
    server {
        listen 127.0.0.1:%%PORT%%;

        location /api/ {
            platform_identity;
            platform_identity_bureau /_bureau;
            platform_identity_cache_time 1h;
            platform_identity_bureau_rate 1r/m;
            platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;
        }

        location = /_bureau {
            internal;
            default_type application/json;
            return 200 '{"companyName":"Acme Trading Limited","address":"1 Road"}';
        }
    }
EOF

sub verify {
    my ($tenant, $rc, %h) = @_;
    my $token = Platform::JWT::hs256($k4, tenantId => $tenant);
    return $t4->request('POST',
        '/api/v1/Identity/verification/business-credit-bureau',
        json => { rc_number => $rc },
        headers => { Authorization => "Bearer $token", %h });
}

is(verify("$id-h", 'RC1001')->{status}, 200, 'bureau: the first call');
is(verify("$id-h", 'RC1001')->{status}, 200,
   'bureau: the answer on record costs nothing');
$r = verify("$id-h", 'RC1002');
is($r->{status}, 429, 'bureau: past the budget, 429');
is_deeply($r->{json}, { succeeded => JSON::PP::false,
                        message => 'Too many requests.',
                        errors => ["The tenant's budget of credit bureau "
                                   . 'calls is spent. Retry after the time '
                                   . 'Retry-After gives.'],
                        data => undef }, 'bureau: Envelope A');
ok(($r->{headers}{'retry-after'} // 0) >= 50, 'bureau: Retry-After');
$r = verify("$id-h", 'RC1003', 'Accept-Language' => 'fr');
is($r->{json}{message}, 'Trop de requêtes.', 'bureau: in French');
like($r->{json}{errors}[0] // '', qr/^Le budget d'appels au bureau/,
     'bureau: the detail in French');
is(verify("$id-i", 'RC1002')->{status}, 200,
   'bureau: another tenant has its own budget');

$t4->done;

done_testing;
