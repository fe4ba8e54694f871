#!/usr/bin/perl

# The PostgreSQL pool under stress, pipelining on: a client that disconnects
# mid-query, more concurrent slow queries than the connections' pipelines
# plus waiters hold, a query timeout.

# platform-test: serial (time bounds)

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Platform::Test;

my $t = Platform::Test->new(workers => 1);

$t->run(<<'EOF');
    platform_pg_pool_size 2;
    platform_pg_pipeline_depth 2;
    platform_pg_queue_size 2;
    # one tenant fills the pool: no share of it is kept for others
    platform_pg_tenant_share 100;
    platform_pg_queue_timeout 5s;
    platform_pg_query_timeout 4s;

    server {
        listen 127.0.0.1:%%PORT%%;
        location /tms/ { platform_tms; platform_auth tenant; }
        location /api/v1/products/ { platform_products; }
    }
EOF

my $order = 'a0000000-0000-4000-8000-000000000001';
my $path = "/tms/delivery-orders/$order";
my %a = (tenantId => 'tenant-a', countryCode => 'NG');

$t->psql(<<"SQL");
INSERT INTO delivery_orders (id, tenant_id, country_code, order_number,
                             pickup_address, dropoff_address)
VALUES ('$order', 'tenant-a', 'NG', 'DO-1', '{}', '{}');
SQL

my $waiting = q{SELECT count(*) FROM pg_stat_activity
                WHERE application_name = 'ngx_platform'
                  AND datname = current_database()
                  AND wait_event_type = 'Lock'};

sub hold_lock {
    my ($seconds) = @_;
    return $t->hold_lock('delivery_orders', $seconds);
}

is($t->request('GET', $path, headers => \%a)->{status}, 200, 'baseline');

# a client that goes away while its query waits

my $lock = hold_lock(1.5);

my $raw = $t->raw_request("GET $path HTTP/1.1\r\nHost: localhost\r\n"
                          . "tenantId: tenant-a\r\ncountryCode: NG\r\n"
                          . "Connection: close\r\n\r\n", timeout => 0.3);
is($raw, '', 'client left before the answer');

ok($t->wait_until(sub {
    $t->error_log =~ /client prematurely closed connection while waiting/ },
    2), 'the worker noticed the client leave mid-query');

$lock->wait;

for (1 .. 3) {
    is($t->request('GET', $path, headers => \%a)->{status}, 200,
       'pool keeps working after the abort');
}

# more slow queries than the pool (two connections, two statements in flight
# on each) and its queue hold

$lock = hold_lock(2);

my @h = map {
    $t->request_async('GET', $path, headers => \%a)
} 1 .. 8;

my @r = map { $_->wait } @h;

my @rejected = grep { $_->{status} == 503 } @r;
my @served = grep { $_->{status} == 200 } @r;

is(scalar @served, 6, 'pipelines plus waiters are served');
is(scalar @rejected, 2, 'the excess is rejected');
ok(!grep({ $_->{time} > 1 } @rejected), 'rejected at once');
is($rejected[0]{json}{statusCode}, 503, 'rejection in Envelope B')
    if @rejected;
is($rejected[0]{headers}{'retry-after'}, '1', 'with Retry-After')
    if @rejected;

$lock->wait;

# a statement that outlives platform_pg_query_timeout

$lock = hold_lock(6);

my $r = $t->request('GET', $path, headers => \%a);
is($r->{status}, 503, 'query timeout is 503');
cmp_ok($r->{time}, '<', 5.5, 'within the query timeout');
like($r->{json}{errors}[0]{descriptiveMessage}, qr/in time/,
     'says the backend did not answer in time');

$lock->kill;
$t->psql('SELECT pg_terminate_backend(pid) FROM pg_stat_activity'
         . " WHERE application_name = 'psql' AND pid <> pg_backend_pid()"
         . " AND datname = current_database()");

ok($t->wait_until(sub {
    $t->request('GET', $path, headers => \%a)->{status} == 200 }, 5),
   'served again after the timeout');

$t->done;
done_testing;
