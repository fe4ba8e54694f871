#!/usr/bin/perl

# platform_redis_cluster against a real Redis Cluster of three masters with
# a replica each, started by the test: OTP codes, webhook claims and rate
# limits of tenants whose keys live on different masters, each key where
# its hash tag says; the map learned from one seed; a slot moved under
# load (-MOVED followed) and a slot left in migration (-ASK followed); a
# master killed under load: nothing but 503 while the cluster promotes its
# replica, served again within 5 s of the promotion, no OTP code validated
# twice, no webhook event stored twice; nginx -t.

# platform-test: serial (a failover, time bounds)

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Platform::Test;
use Time::HiRes qw(sleep time);

my $t = Platform::Test->new(workers => 2);

### nginx -t

my $seed_conf = <<'EOF';
    server {
        listen 127.0.0.1:%%PORT%%;
        location /validate-otp/ { platform_otp; }
    }
EOF

$t->write_config("    platform_redis 127.0.0.1:6379;\n"
                 . "    platform_redis_cluster 127.0.0.1:7000;\n$seed_conf");
like($t->check_config->{output}, qr/"platform_redis" and "platform_redis_cluster" both/,
     'nginx -t: platform_redis and platform_redis_cluster');

$t->write_config("    platform_redis_cluster 127.0.0.1:7000;\n"
                 . "    platform_redis_cluster 127.0.0.1:7001;\n$seed_conf");
like($t->check_config->{output}, qr/is duplicate/, 'nginx -t: twice');

$t->write_config("    platform_redis_cluster redis.example:7000;\n$seed_conf");
like($t->check_config->{output}, qr/seed "redis.example:7000": an IP address and a port/,
     'nginx -t: a seed is an address');

$t->write_config("    platform_redis_cluster 127.0.0.1;\n$seed_conf");
like($t->check_config->{output}, qr/seed "127.0.0.1": an IP address and a port/,
     'nginx -t: a seed has a port');

$t->write_config("    platform_redis_cluster 127.0.0.1:7000;\n"
                 . "    platform_redis_db 2;\n$seed_conf");
like($t->check_config->{output}, qr/has only the database 0/, 'nginx -t: a database');

### the cluster

my $cl = $t->start_redis_cluster;
my ($seed) = $cl->seeds;

# one seed is enough: the map names the others
$t->run(<<"EOF");
    platform_redis_cluster $seed;
    platform_redis_timeout 500ms;
    platform_otp_attempts 100000 5m;
    platform_otp_tenant_attempts off;

    server {
        listen 127.0.0.1:%%PORT%%;

        location /validate-otp/ { platform_otp; }

        location ^~ /api/webhooks/ {
            platform_webhooks;
            platform_webhook_source src;
        }

        location /limited/ {
            platform_rate_limit tenant 1r/m burst=2;
            rewrite ^/limited(/validate-otp/.*)\$ \$1 break;
            platform_otp;
        }

        location = /health { platform_health; }
    }
EOF

$t->ignore_log(qr/redis: /);
$t->ignore_log(qr/platform: Redis (?:answered|error|cannot|answers)/);
$t->ignore_log(qr/webhooks: Redis/);

ok($t->wait_until(sub { $t->request('GET', '/health')->{status} == 200 }),
   'health: every slot has a connected master');

# three tenants, one per master
my (%by_master, @tenants);
for my $i (1 .. 200) {
    my $tenant = "tenant-$i";
    my $m = $cl->master_of_slot($cl->slot_of("{$tenant}"));
    next if $by_master{$m}++;
    push @tenants, $tenant;
    last if @tenants == 3;
}
is(scalar @tenants, 3, 'three tenants on three masters');

sub otp {
    my ($tenant, $code, $prefix) = @_;
    return $t->request('GET', ($prefix // '') . "/validate-otp/$code",
                       headers => { tenantId => $tenant,
                                    countryCode => 'NG' })->{status};
}

sub store_code {
    my ($tenant, $code) = @_;
    $cl->redis('SET', "otp:{$tenant}:NG:$code", 1, 'EX', 300);
}

for my $tenant (@tenants) {
    store_code($tenant, '246810');
    is(otp($tenant, '246810'), 200, "$tenant: the code validates");
    is(otp($tenant, '246810'), 404, "$tenant: once");

    my $slot = $cl->slot_of("{$tenant}");
    my $m = $cl->master_of_slot($slot);
    is($cl->redis_at($m, 'EXISTS', "otp:attempts:{$tenant}:127.0.0.1"), 1,
       "$tenant: the attempts counter is on the tenant's master");
}

# a tenant with a brace cannot have a hash tag: no code, never -CROSSSLOT
is(otp('}x{', '246810'), 404, 'a tenant with braces: 404');
is(otp('a}b', '246810'), 404, 'a tenant with a closing brace: 404');

# webhooks: the claim key carries the name and tenant as its tag
sub deliver {
    my ($id) = @_;
    return $t->request('POST', '/api/webhooks/public/src/events',
                       headers => { 'Content-Type' => 'application/json' },
                       body => qq({"id":"$id"}));
}

sub rows {
    my ($id) = @_;
    return $t->psql("SELECT count(*) FROM webhook_events"
                    . " WHERE event_key = '$id'") + 0;
}

my $r = deliver('ev-1');
is($r->{status}, 200, 'webhook: stored');
is(deliver('ev-1')->{json}{data}{duplicate}, JSON::PP::true(),
   'webhook: the duplicate answered');
is($cl->redis('GET', 'webhook:source:{src:}:ev-1'), 'stored',
   'webhook: the claim key has its hash tag');

# rate limits of two tenants on two masters, each its own budget
my ($ta, $tb) = @tenants;
is(join(',', map { otp($ta, '000000', '/limited') } 1 .. 4),
   '404,404,404,429', "rate limit: $ta has burst + 1");
is(otp($tb, '000000', '/limited'), 404, "rate limit: $tb is not limited");

### a slot moved under load: -MOVED

my $moved = $tenants[0];
my $slot = $cl->slot_of("{$moved}");
my $from = $cl->master_of_slot($slot);
my ($to) = grep { $_ ne $from } $cl->masters;

store_code($moved, '111111');

my @load = map {
    $t->request_async('GET', "/validate-otp/99999$_",
                      headers => { tenantId => $moved, countryCode => 'NG' })
} 0 .. 9;
$cl->move_slot($slot, $to);
push @load, map {
    $t->request_async('GET', "/validate-otp/88888$_",
                      headers => { tenantId => $moved, countryCode => 'NG' })
} 0 .. 9;
my @st = map { $_->wait->{status} } @load;
is_deeply([ grep { $_ != 404 } @st ], [], 'moved: no answer but 404 under load');
is($cl->master_of_slot($slot), $to, 'moved: the slot is on another master');
is(otp($moved, '111111'), 200, 'moved: the code moved with its slot');
is(otp($moved, '111111'), 404, 'moved: once');

### a slot in migration: -ASK for a key not on the old owner

my $event = 'ev-ask';
my $ekey = "webhook:source:{src:}:$event";
my $eslot = $cl->slot_of($ekey);
my $efrom = $cl->master_of_slot($eslot);
my ($eto) = grep { $_ ne $efrom } $cl->masters;
$cl->move_slot_begin($eslot, $eto);
is(deliver($event)->{status}, 200, 'ask: stored');
is($cl->redis_at($eto, 'CLUSTER', 'COUNTKEYSINSLOT', $eslot), 1,
   'ask: its claim was written on the importing master');
$cl->move_slot_finish($eslot, $eto, $efrom);
is(deliver($event)->{json}{data}{duplicate}, JSON::PP::true(),
   'ask: the duplicate answered from the claim');
is(rows($event), 1, 'ask: one row');

### a master killed under load

my $victim = $tenants[1];
my $vslot = $cl->slot_of("{$victim}");
my $vmaster = $cl->master_of_slot($vslot);

# codes written to the master and its replica before the kill
my @codes = map { sprintf '5%05d', $_ } 1 .. 20;
store_code($victim, $_) for @codes;
$cl->redis_at($vmaster, 'WAIT', 1, 2000);

my (%ok, @statuses, @events);
my $killed = 0;
my $start = time;
my ($promoted_at, $took);
my $last_503 = 0;
my $i = 0;

while (time - $start < 25) {
    my $code = $codes[$i % @codes];
    my @batch = map {
        $t->request_async('GET', "/validate-otp/$code",
                          headers => { tenantId => $victim,
                                       countryCode => 'NG' })
    } 1 .. 3;
    my $ev = $t->request_async('POST', '/api/webhooks/public/src/events',
                               headers => { 'Content-Type' =>
                                            'application/json' },
                               body => '{"id":"ev-failover"}');
    for my $req (@batch) {
        my $s = $req->wait->{status};
        push @statuses, $s;
        $ok{$code}++ if $s == 200;
        $last_503 = time if $s == 503;
    }
    push @events, $ev->wait->{status};
    $i++;

    if (!$killed && $i == 5) {
        $cl->kill_master($vmaster);
        $killed = 1;
        $took = $cl->wait_failover($vmaster, 15);
        $promoted_at = time;
        ok(defined $took, 'failover: the cluster promoted the replica')
            ? diag(sprintf 'promoted %.1f s after the kill', $took)
            : diag(map { "$_: " . $cl->redis_at($_, 'CLUSTER', 'NODES') . "\n" }
                   grep { $_ ne $vmaster } $cl->nodes);
    }

    last if $promoted_at && time - $promoted_at > 6;
}

is_deeply([ sort { $a <=> $b } keys %{{ map { $_ => 1 } @statuses }} ]
          , [ grep { my $s = $_; grep { $_ == $s } @statuses } 200, 404, 503 ],
          'failover: OTP answers only 200, 404 and 503');
ok(!grep({ $_ != 200 && $_ != 404 && $_ != 503 } @statuses),
   'failover: no other status') or diag("@statuses");
ok(!grep({ $_ > 1 } values %ok), 'failover: no code validated twice')
    or diag(join ' ', %ok);
ok(!grep({ $_ != 200 } @events), 'failover: webhook deliveries answered 200')
    or diag("@events");
is(rows('ev-failover'), 1, 'failover: one row for the event');
ok($promoted_at && $last_503 < $promoted_at + 5,
   'failover: served again within 5 s of the promotion')
    or diag(sprintf 'last 503 %.1f s after the promotion',
            $last_503 - ($promoted_at // 0));
is(otp($victim, '000001'), 404, 'failover: the new master answers');

$t->done;
done_testing;
