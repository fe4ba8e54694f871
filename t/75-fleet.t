#!/usr/bin/perl

# A fleet of three: three nginx with the module (their own prefixes and
# ports), sharing a Redis Cluster of three masters with a replica each, and
# PostgreSQL, a primary and a streaming replica, each behind a PgBouncer in
# transaction mode, all started by the test. Requests spread over the
# three nodes: an OTP code validates once under 30 concurrent attempts; 50
# concurrent deliveries of one webhook event store one row; a tenant's rate
# limit holds for the fleet; a Redis master killed under load gives only
# 503s, and the fleet serves again within 5 s of the promotion.

# platform-test: serial (three nginx, a failover, time bounds)

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Platform::Test;
use Time::HiRes qw(sleep time);

my $t = Platform::Test->new(workers => 1, db => 0);

my $primary = $t->start_private_pg;
$primary->psql(Platform::Test::demo_data(qr/.+/s));
my $replica = $t->start_private_replica($primary);
my $pgb = $t->start_pgbouncer(pg_port => $primary->port);
my $pgb_read = $t->start_pgbouncer(pg_port => $replica->port);
my $cl = $t->start_redis_cluster;

my $dsn = $pgb->dsn('platform', 'postgres');
my $read_dsn = $pgb_read->dsn('platform', 'postgres');
my $seeds = join ' ', $cl->seeds;

my $conf = Platform::Test::redis_routes_config(<<"EOF", <<"EOF");
    platform_pg "$dsn";
    platform_pg_read "$read_dsn";
    platform_pg_prepare off;
    platform_redis_cluster $seeds;
    platform_redis_timeout 500ms;
EOF
        location /tms/delivery-orders/ { platform_tms; platform_auth tenant; }

        location /limited/ {
            platform_rate_limit tenant 5r/s burst=5;
            rewrite ^/limited(/validate-otp/.*)\$ \$1 break;
            platform_otp;
        }
EOF

my @nodes = ($t, map { Platform::Test->new(workers => 1, db => 0) } 1 .. 2);
for my $n (@nodes) {
    $n->run($conf);
    $n->ignore_redis_failover;
}

for my $i (0 .. 2) {
    my $n = $nodes[$i];
    ok($n->wait_until(sub { $n->request('GET', '/health')->{status} == 200 },
                      15), "node $i: healthy");
}

# request $k of a spread goes to node $k % 3
sub spread {
    my ($count, $method, $path, %o) = @_;
    my @async = map { $nodes[$_ % 3]->request_async($method, $path, %o) }
                0 .. $count - 1;
    return map { $_->wait } @async;
}

### an OTP code validates once across the fleet

$cl->redis('SET', 'otp:{tenant-f}:NG:424242', 1, 'EX', 300);
my @r = spread(30, 'GET', '/validate-otp/424242',
               headers => { tenantId => 'tenant-f', countryCode => 'NG' });
my %st;
$st{$_->{status}}++ for @r;
is($st{200}, 1, 'OTP: one 200 of 30 attempts on three nodes');
is($st{404}, 29, 'OTP: the others 404') or diag(join ' ', %st);

### one webhook event, 50 deliveries, one row

@r = spread(50, 'POST', '/api/webhooks/public/src/events',
            headers => { 'Content-Type' => 'application/json' },
            body => '{"id":"fleet-1"}');
is(join(',', grep { $_ != 200 } map { $_->{status} } @r), '',
   'webhook: 50 deliveries answered 200');
is($primary->psql("SELECT count(*) FROM webhook_events"
                  . " WHERE event_key = 'fleet-1'") + 0, 1,
   'webhook: one row');

### a tenant's rate limit, fleet-wide

my $start = time;
@r = spread(60, 'GET', '/limited/validate-otp/000000',
            headers => { tenantId => 'tenant-r', countryCode => 'NG' });
my $elapsed = time - $start;
my $admitted = grep { $_->{status} == 404 } @r;
my $limited = grep { $_->{status} == 429 } @r;
is($admitted + $limited, 60, 'rate limit: 404 or 429 only');
cmp_ok($admitted, '<=', 5 + 1 + int(5 * $elapsed),
       sprintf 'rate limit: %d admitted in %.1f s over three nodes, within'
               . ' the rate and the burst', $admitted, $elapsed);
cmp_ok($admitted, '>=', 6, 'rate limit: the burst admitted');
my %by_node;
$by_node{$_ % 3} += $r[$_]{status} == 404 for 0 .. 59;
cmp_ok(scalar(grep { $_ } values %by_node), '>=', 2,
       'rate limit: admitted on several nodes');

### reads go to the replica through its PgBouncer

my $order = 'a1000000-0000-4000-8000-000000000001';
@r = spread(9, 'GET', "/tms/delivery-orders/$order",
            headers => { tenantId => 'tenant-demo', countryCode => 'NG' });
is(join(',', map { $_->{status} } @r), join(',', (200) x 9),
   'reads: a delivery order from every node');
like($pgb_read->admin('SHOW POOLS'), qr/^platform\|postgres\|/m,
     'reads: through the replica\'s PgBouncer');

### a Redis master killed under load

my $victim = 'tenant-k';
my $vmaster = $cl->master_of_slot($cl->slot_of("{$victim}"));
my (@statuses, $promoted_at, $killed);
my $last_503 = 0;
$start = time;
my $i = 0;

while (time - $start < 30) {
    for my $res (spread(6, 'GET', '/validate-otp/111111',
                        headers => { tenantId => $victim,
                                     countryCode => 'NG' }))
    {
        push @statuses, $res->{status};
        $last_503 = time if $res->{status} == 503;
    }
    $i++;

    if (!$killed && $i == 5) {
        $killed = $cl->kill_master($vmaster);
        my $took = $cl->wait_failover($vmaster, 15);
        $promoted_at = time;
        ok(defined $took, 'failover: the cluster promoted the replica')
            and diag(sprintf 'promoted %.1f s after the kill', $took);
    }

    last if $promoted_at && time - $promoted_at > 6;
}

ok(!grep({ $_ != 404 && $_ != 503 } @statuses),
   'failover: only 404 and 503 on the fleet') or diag("@statuses");
ok($promoted_at && $last_503 < $promoted_at + 5,
   'failover: the fleet served again within 5 s of the promotion')
    or diag(sprintf 'last 503 %.1f s after the promotion',
            $last_503 - ($promoted_at // 0));
is(join(',', map { $_->{status} }
             spread(3, 'GET', '/validate-otp/111111',
                    headers => { tenantId => $victim,
                                 countryCode => 'NG' })),
   '404,404,404', 'failover: every node answers');

$_->done for reverse @nodes[1, 2];
$t->done;
done_testing;
