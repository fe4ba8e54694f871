#!/usr/bin/perl

# Fair use of a worker's PostgreSQL pool: a tenant whose statements hold
# its share of the pipeline slots and of the queue (platform_pg_tenant_share)
# gets 429 while another tenant's requests are all served, at once; two
# tenants that fill the queue make room in it for a third (the newest of
# one of them is pushed out, 429), where before the third got 503; a
# write waiting on a row lock ends at platform_pg_lock_timeout (503) and
# does not hold up a read pipelined behind it on the same connection;
# nginx -t refuses a share that is not a percentage.

# platform-test: serial (time bounds)

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Platform::Test;
use Time::HiRes ();

my $t = Platform::Test->new(workers => 1);

my $server = <<'EOF';
    server {
        listen 127.0.0.1:%%PORT%%;
        location /tms/ { platform_tms; platform_auth tenant; }
    }
EOF

### nginx -t

for my $bad ('0', '101', '50.5', 'half', '-1') {
    $t->config_refused("platform_pg_tenant_share $bad;\n$server",
                       qr/invalid share "\Q$bad\E": a percentage of the pool from 1 to 100/,
                       "platform_pg_tenant_share $bad refused, saying why");
}

ok($t->check_config("platform_pg_tenant_share 30%;\n$server")->{ok},
   'platform_pg_tenant_share 30% accepted');
ok($t->check_config("platform_pg_tenant_share 100;\n$server")->{ok},
   'platform_pg_tenant_share 100 accepted');

### one tenant floods slow statements; another is served meanwhile

# two connections of one statement each, a queue of four: each tenant may
# hold one slot and two places in the queue (50%)

$t->run(<<"EOF");
    platform_pg_pool_size 2;
    platform_pg_pipeline_depth 1;
    platform_pg_queue_size 4;
    platform_pg_queue_timeout 10s;
    platform_pg_query_timeout 10s;
$server
EOF

my $order = 'a0000000-0000-4000-8000-000000000065';
my $driver = 'd0000000-0000-4000-8000-000000000065';
my %a = (tenantId => 'share-a', countryCode => 'NG');
my %b = (tenantId => 'share-b', countryCode => 'NG');

$t->psql(<<"SQL");
INSERT INTO delivery_orders (id, tenant_id, country_code, order_number,
                             pickup_address, dropoff_address)
VALUES ('$order', 'share-a', 'NG', 'DO-65', '{}', '{}');
INSERT INTO drivers (id, tenant_id, country_code, name, status)
VALUES ('$driver', 'share-b', 'NG', 'Fair', 'AVAILABLE');
SQL

my $a_path = "/tms/delivery-orders/$order";
my $b_path = '/tms/drivers/available';

is($t->request('GET', $a_path, headers => \%a)->{status}, 200,
   'baseline: tenant A');
is($t->request('GET', $b_path, headers => \%b)->{status}, 200,
   'baseline: tenant B');

# tenant A's reads wait on a table lock for 4 s

my $lock = $t->hold_lock('delivery_orders', 4);

my @ha = map {
    $t->request_async('GET', $a_path, headers => \%a, timeout => 20)
} 1 .. 10;

my $waiting = q{SELECT count(*) FROM pg_stat_activity
                WHERE application_name = 'ngx_platform'
                  AND datname = current_database()
                  AND wait_event_type = 'Lock'};

# once A's statements wait on the lock, and its other requests are in
ok($t->wait_until(sub { $t->psql($waiting) > 0 }, 3),
   'tenant A\'s statements wait');
Time::HiRes::sleep(0.5);

my (@rb, $start);
$start = Time::HiRes::time();

for my $round (1 .. 3) {
    push @rb, @{ $t->burst([ map { [ 'GET', $b_path, headers => \%b ] }
                             1 .. 3 ]) };
}

my $elapsed = Time::HiRes::time() - $start;

is(scalar(grep { $_->{status} == 200 } @rb), 9,
   'tenant B: all nine requests served while A floods')
    or diag(explain [ map { "$_->{status} $_->{content}" } @rb ]);
cmp_ok($elapsed, '<', 3, 'tenant B: served before A\'s lock is released');
like($rb[0]{content} // '', qr/"data":\[\{"id":"\Q$driver\E"/,
     'tenant B: its driver');

like($t->error_log, qr/PostgreSQL share of "share-a" in use/,
     'the refusals are logged, naming the tenant');

my @ra = map { $_->wait(timeout => 30) } @ha;
$lock->wait;

my @served = grep { $_->{status} == 200 } @ra;
my @limited = grep { $_->{status} == 429 } @ra;

is(scalar @served, 3, 'tenant A: its slot and its two queue places served');
is(scalar @limited, 7, 'tenant A: the rest is 429')
    or diag(explain [ map { $_->{status} } @ra ]);
ok(!grep({ $_->{time} > 2 } @limited), 'tenant A: refused at once');

if (@limited) {
    Platform::Test::is_envelope_b_error($limited[0], 429, 'Too many requests.',
        'Your share of the database connections is in use; retry shortly.',
        '429');
    is($limited[0]{headers}{'retry-after'}, '1', '429 with Retry-After: 1');
}

ok($t->wait_until(sub {
    $t->request('GET', $a_path, headers => \%a)->{status} == 200 }, 5),
   'tenant A served again once its statements ended');

### two tenants fill the queue; a third still gets a place in it

# A and C each hold their slot and their two places: the queue is full.
# B's statement takes the place of the newest of one of them, which is
# refused 429; without that B would be 503 until A or C let go.

my %c = (tenantId => 'share-c', countryCode => 'NG');

$lock = $t->hold_lock('delivery_orders', 4);

my @hac = map {
    $t->request_async('GET', $a_path, headers => $_, timeout => 20)
} (\%a, \%c) x 3;

ok($t->wait_until(sub { $t->psql($waiting) >= 2 }, 3),
   'the statements of A and C wait');
Time::HiRes::sleep(0.5);

my $rb = $t->request('GET', $b_path, headers => \%b, timeout => 20);
my @rac = map { $_->wait(timeout => 30) } @hac;
$lock->wait;

is($rb->{status}, 200, 'tenant B: served, not refused by the full queue')
    or diag("$rb->{status} $rb->{content}");
my @pushed = grep { $_->{status} == 429 } @rac;
is(scalar @pushed, 1, 'one statement of A or C pushed out of the queue')
    or diag(explain [ map { $_->{status} } @rac ]);
ok(!grep({ $_->{time} > 2 } @pushed), 'and refused at once');
is(scalar(grep { $_->{status} == 200 || $_->{status} == 404 } @rac), 5,
   'the other five served once the lock went (A 200, C 404)')
    or diag(explain [ map { $_->{status} } @rac ]);
like($t->error_log, qr/PostgreSQL share of "share-[ac]" in use, statement "[^"]+" pushed out of the full queue/,
     'the push-out is logged, naming the tenant');

### a write waiting on a row lock does not hold up a read behind it

# one connection that pipelines: the read goes behind the waiting write

ok($t->reload(<<"EOF"), 'reloaded: one connection, pipelined');
    platform_pg_pool_size 1;
    platform_pg_pipeline_depth 4;
    platform_pg_tenant_share 100;
    platform_pg_lock_timeout 500ms;
    platform_pg_query_timeout 10s;
$server
EOF

my $hold = $t->hold_rows('delivery_orders', [ $order ], seconds => 5);

my $w = $t->request_async('PATCH', "$a_path/assign/$driver", headers => \%a,
                          timeout => 20);

ok($t->wait_until(sub { $t->psql($waiting) > 0 }, 3),
   'the write waits on the row lock');

my $r = $t->request('GET', $b_path, headers => \%b, timeout => 20);

is($r->{status}, 200, 'the read behind it is served');
cmp_ok($r->{time}, '<', 2.5, 'long before the lock is released (5 s)');

my $wr = $w->wait(timeout => 30);

Platform::Test::is_envelope_b_error($wr, 503,
    'Service temporarily unavailable.',
    'The resource is being changed by another request; retry shortly.',
    'the write past its lock timeout');
is($wr->{headers}{'retry-after'}, '1', '503 with Retry-After');
cmp_ok($wr->{time}, '<', 2.5, 'the write ended at its lock timeout');

$hold->kill;
$t->psql('SELECT pg_terminate_backend(pid) FROM pg_stat_activity'
         . " WHERE application_name = 'psql' AND pid <> pg_backend_pid()"
         . " AND datname = current_database()");

is($t->psql("SELECT status FROM delivery_orders WHERE id = '$order'"),
   'PENDING', 'the write left nothing behind');

$t->done;
done_testing;
