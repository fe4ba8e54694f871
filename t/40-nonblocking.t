#!/usr/bin/perl

# No blocking I/O in a worker: with one worker, while a request waits on a
# PostgreSQL lock held by the test, other requests on the same worker
# answer at once.

# platform-test: serial (time bounds)

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Platform::Test;

my $t = Platform::Test->new(workers => 1);

$t->run(<<'EOF');
    platform_pg_pool_size 4;
    platform_cache_time 0;     # every request goes to PostgreSQL

    server {
        listen 127.0.0.1:%%PORT%%;
        location /tms/ { platform_tms; }
        location /api/v1/products/ { platform_products; }
        location = /static { return 200 "static"; }
    }
EOF

my $order = 'a0000000-0000-4000-8000-000000000001';

$t->psql(<<"SQL");
INSERT INTO delivery_orders (id, tenant_id, country_code, order_number,
                             pickup_address, dropoff_address)
VALUES ('$order', 'tenant-a', 'NG', 'DO-1', '{}', '{}');
INSERT INTO product_classifications (group_name, tags)
VALUES ('Grains', '{rice}');
SQL

my %a = (tenantId => 'tenant-a', countryCode => 'NG');

# warm the pool so that the measured request needs no connect

is($t->request('GET', '/api/v1/products/classifications')->{status}, 200,
   'warm up');

my $lock = $t->hold_lock('delivery_orders', 2);
pass('test holds the lock');

my $slow = $t->request_async('GET', "/tms/delivery-orders/$order",
                             headers => \%a);

my $waiting = q{SELECT count(*) FROM pg_stat_activity
                WHERE application_name = 'ngx_platform'
                  AND datname = current_database()
                  AND wait_event_type = 'Lock'};

ok($t->wait_until(sub { $t->psql($waiting) > 0 }, 5),
   'the slow request waits on the lock inside PostgreSQL');

my $fast = $t->request('GET', '/api/v1/products/classifications');
is($fast->{status}, 200, 'another PostgreSQL request on the same worker');
cmp_ok($fast->{time}, '<', 0.5, 'answers in well under a second');

my $static = $t->request('GET', '/static');
is($static->{status}, 200, 'plain nginx location');
cmp_ok($static->{time}, '<', 0.5, 'answers at once');

my $s = $slow->wait;
is($s->{status}, 200, 'the slow request completes once the lock goes');
cmp_ok($s->{time}, '>=', 1, 'and it did wait on the lock');
is($s->{json}{data}{id}, $order, 'with its order');

$lock->wait;

$t->done;
done_testing;
