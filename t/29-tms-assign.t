#!/usr/bin/perl

# PATCH /tms/delivery-orders/{uuid}/assign/{driverId}?shippingFee=: Envelope
# B, the tenancy headers, orders in every status, the driver's checks,
# shippingFee, re-assigning to another driver (the first is freed) and to
# the same one, tenant and country isolation, the delivery order GET
# afterwards, and concurrent assigns: of one driver to fifty orders
# (exactly one succeeds), and of one order to several drivers (exactly one
# driver holds it).

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Platform::Test;
use Platform::JWT;

my $t = Platform::Test->new(workers => 2);
my $k = Platform::JWT::keys($t->testdir . '/keys');

# every route's default: the assign needs the headers only (the key is
# for the vehicles and drivers routes of the location)
$t->run(<<'EOF');
    # the race below keeps assigns queued for a connection for seconds,
    # waiting for the driver's row that the test holds
    platform_pg_queue_timeout 10s;
    platform_pg_lock_timeout 0;

    server {
        listen 127.0.0.1:%%PORT%%;
        location /tms/ {
            platform_tms;
            platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;
        }
    }
EOF

my %O = map { $_ => sprintf('a0000000-0000-4000-8000-%012d', $_) } 1 .. 20;
my %D = map { $_ => sprintf('d0000000-0000-4000-8000-%012d', $_) } 1 .. 20;
my $unknown = 'a0000000-0000-4000-8000-000000000999';

# tenant-a NG: drivers 1, 2, 5 AVAILABLE, 3 ON_DELIVERY (order 2), 4
# OFFLINE, 6 ON_DELIVERY (order 3), 7 ON_DELIVERY (order 4); tenant-a GH:
# driver 8 AVAILABLE; tenant-b NG: driver 9 AVAILABLE.
# Orders of tenant-a NG: 1 PENDING, 2 ASSIGNED (driver 3), 3 PICKED_UP
# (driver 6), 4 IN_TRANSIT (driver 7), 5 DELIVERED, 6 CANCELLED, 7 and 8
# PENDING; 10 of tenant-a GH, 11 of tenant-b NG.
$t->psql(<<"SQL");
INSERT INTO drivers (id, tenant_id, country_code, user_id, name, phone,
                     vehicle_type, status) VALUES
    ('$D{1}', 'tenant-a', 'NG', 'u-1', 'Ada', '+2348001', 'VAN', 'AVAILABLE'),
    ('$D{2}', 'tenant-a', 'NG', 'u-2', 'Bola', '+2348002', 'BIKE',
     'AVAILABLE'),
    ('$D{3}', 'tenant-a', 'NG', 'u-3', 'Chidi', '+2348003', 'VAN',
     'ON_DELIVERY'),
    ('$D{4}', 'tenant-a', 'NG', 'u-4', 'Dayo', '+2348004', 'VAN', 'OFFLINE'),
    ('$D{5}', 'tenant-a', 'NG', 'u-5', 'Efe', '+2348005', 'TRUCK',
     'AVAILABLE'),
    ('$D{6}', 'tenant-a', 'NG', 'u-6', 'Femi', '+2348006', 'VAN',
     'ON_DELIVERY'),
    ('$D{7}', 'tenant-a', 'NG', 'u-7', 'Gozie', '+2348007', 'VAN',
     'ON_DELIVERY'),
    ('$D{8}', 'tenant-a', 'GH', 'u-8', 'Kofi', '+2332008', 'VAN',
     'AVAILABLE'),
    ('$D{9}', 'tenant-b', 'NG', 'u-9', 'Other', '+2348009', 'VAN',
     'AVAILABLE');
INSERT INTO delivery_orders (id, tenant_id, country_code, order_number,
                             status, pickup_address, dropoff_address,
                             driver_id, shipping_fee, currency, assigned_at)
VALUES
    ('$O{1}', 'tenant-a', 'NG', 'DO-1', 'PENDING', '{}', '{}', NULL, NULL,
     'NGN', NULL),
    ('$O{2}', 'tenant-a', 'NG', 'DO-2', 'ASSIGNED', '{}', '{}', '$D{3}', 700,
     'NGN', '2026-01-02T10:00:00Z'),
    ('$O{3}', 'tenant-a', 'NG', 'DO-3', 'PICKED_UP', '{}', '{}', '$D{6}',
     800, 'NGN', '2026-01-02T10:00:00Z'),
    ('$O{4}', 'tenant-a', 'NG', 'DO-4', 'IN_TRANSIT', '{}', '{}', '$D{7}',
     900, 'NGN', '2026-01-02T10:00:00Z'),
    ('$O{5}', 'tenant-a', 'NG', 'DO-5', 'DELIVERED', '{}', '{}', '$D{3}',
     100, 'NGN', '2026-01-01T10:00:00Z'),
    ('$O{6}', 'tenant-a', 'NG', 'DO-6', 'CANCELLED', '{}', '{}', NULL, NULL,
     NULL, NULL),
    ('$O{7}', 'tenant-a', 'NG', 'DO-7', 'PENDING', '{}', '{}', NULL, 50,
     'NGN', NULL),
    ('$O{8}', 'tenant-a', 'NG', 'DO-8', 'PENDING', '{}', '{}', NULL, NULL,
     NULL, NULL),
    ('$O{10}', 'tenant-a', 'GH', 'DO-10', 'PENDING', '{}', '{}', NULL, NULL,
     NULL, NULL),
    ('$O{11}', 'tenant-b', 'NG', 'DO-11', 'PENDING', '{}', '{}', NULL, NULL,
     NULL, NULL);
SQL

my %a = (tenantId => 'tenant-a', countryCode => 'NG');

sub assign {
    my ($order, $driver, $fee, %o) = @_;
    my $q = defined $fee ? "?shippingFee=$fee" : '';
    return $t->request($o{method} // 'PATCH',
                       "/tms/delivery-orders/$order/assign/$driver$q",
                       headers => $o{headers} // \%a);
}

sub get {
    my ($order, %o) = @_;
    return $t->request('GET', "/tms/delivery-orders/$order",
                       headers => $o{headers} // \%a)->{json}{data};
}

sub is_error { goto &Platform::Test::is_envelope_b_error }

sub is_assigned {
    my ($r, $name) = @_;
    is($r->{status}, 200, "$name: 200") or diag($r->{content});
    is_deeply($r->{json}, { status => JSON::PP::true, statusCode => 0,
                            message => 'Delivery order assigned.',
                            data => {}, errors => [] },
              "$name: data {}") or diag($r->{content});
}

sub status_of {
    my ($driver) = @_;
    return $t->psql("SELECT status FROM drivers WHERE id = '$driver'");
}

# orders, drivers and fees as stored: what a refusal must not change
sub snapshot {
    return $t->psql("SELECT string_agg(concat_ws(' ', id, status, driver_id,"
                    . " shipping_fee, assigned_at), ';' ORDER BY id)"
                    . " FROM delivery_orders")
           . $t->psql("SELECT string_agg(id || ' ' || status, ';'"
                      . " ORDER BY id) FROM drivers");
}

my $r;

### a pending order to an available driver

$r = assign($O{1}, $D{1}, '1500.5');
is_assigned($r, 'assign a pending order');
my $o = get($O{1});
is($o->{status}, 'ASSIGNED', 'the order is ASSIGNED');
is($o->{driver}{id}, $D{1}, 'GET shows the driver');
is($o->{driver}{status}, 'ON_DELIVERY', 'the driver is ON_DELIVERY');
is($o->{shippingFee}, 1500.5, 'GET shows the fee');
like($o->{assignedAt}, qr/^\d{4}-\d\d-\d\dT/, 'assignedAt is set');
is(status_of($D{1}), 'ON_DELIVERY', 'stored: ON_DELIVERY');
my $assigned_at = $o->{assignedAt};

### the same driver again: idempotent

$r = assign($O{1}, $D{1});
is_assigned($r, 'the same driver again');
$o = get($O{1});
is($o->{driver}{id}, $D{1}, 'still the driver');
is($o->{shippingFee}, 1500.5, 'no fee given: the fee stays');
is($o->{assignedAt}, $assigned_at, 'assignedAt stays');
is(status_of($D{1}), 'ON_DELIVERY', 'still ON_DELIVERY');

$r = assign($O{1}, uc $D{1}, '2000');
is_assigned($r, 'the same driver (upper case) with a new fee');
$o = get($O{1});
is($o->{shippingFee}, 2000, 'the fee is replaced');
is($o->{assignedAt}, $assigned_at, 'assignedAt stays');

### re-assigning to another driver frees the first

$r = assign($O{1}, $D{2});
is_assigned($r, 'reassign to another driver');
$o = get($O{1});
is($o->{driver}{id}, $D{2}, 'the new driver holds it');
is($o->{status}, 'ASSIGNED', 'ASSIGNED');
is($o->{shippingFee}, 2000, 'the fee stays');
is(status_of($D{2}), 'ON_DELIVERY', 'the new driver is ON_DELIVERY');
is(status_of($D{1}), 'AVAILABLE', 'the first driver is AVAILABLE again');

# an order picked up or in transit changes hands: ASSIGNED to the new
# driver (he picks it up from the first), the first is freed
$r = assign($O{3}, $D{1}, '0');
is_assigned($r, 'reassign a PICKED_UP order');
$o = get($O{3});
is($o->{status}, 'ASSIGNED', 'it is ASSIGNED to the new driver');
is($o->{driver}{id}, $D{1}, 'the new driver');
is($o->{shippingFee}, 0, 'a fee of 0');
is(status_of($D{6}), 'AVAILABLE', 'the driver who had it is freed');

$r = assign($O{4}, $D{5});
is_assigned($r, 'reassign an IN_TRANSIT order');
is(status_of($D{7}), 'AVAILABLE', 'the driver who had it is freed');
is(get($O{4})->{shippingFee}, 900, 'no fee: the fee stays');

# the same driver of an order in transit: nothing changes
$r = assign($O{4}, $D{5}, '950');
is_assigned($r, 'the same driver of an order');
is(get($O{4})->{status}, 'ASSIGNED', 'status kept');

# a driver with another open order stays ON_DELIVERY when freed from this
# one (data written by others may give a driver two orders)
$t->psql("UPDATE delivery_orders SET driver_id = '$D{3}', status = 'ASSIGNED'"
         . " WHERE id = '$O{8}'");
$r = assign($O{2}, $D{2});
is($r->{status}, 400, 'a driver on a delivery cannot take another order');
$t->psql("UPDATE drivers SET status = 'AVAILABLE' WHERE id = '$D{6}'");
$r = assign($O{2}, $D{6});
is_assigned($r, 'reassign an order of a driver who holds two');
is(status_of($D{3}), 'ON_DELIVERY', 'he keeps his other order: ON_DELIVERY');
$t->psql("UPDATE delivery_orders SET driver_id = NULL, status = 'PENDING'"
         . " WHERE id = '$O{8}';"
         . " UPDATE drivers SET status = 'AVAILABLE' WHERE id = '$D{3}'");

# an offline driver freed from an order stays offline
$t->psql("UPDATE drivers SET status = 'OFFLINE' WHERE id = '$D{6}'");
$r = assign($O{2}, $D{3});
is_assigned($r, 'reassign from an offline driver');
is(status_of($D{6}), 'OFFLINE', 'an OFFLINE driver is not made AVAILABLE');

### refusals: each changes nothing

my $before = snapshot();

for my $case ([$D{2}, 'a driver ON_DELIVERY'],
              [$D{4}, 'an OFFLINE driver'],
              [$D{8}, 'a driver of the tenant in another country'],
              [$D{9}, 'a driver of another tenant'],
              ['d0000000-0000-4000-8000-000000000999', 'an unknown driver'])
{
    is_error(assign($O{7}, $case->[0], '10'), 400, 'invalid reference',
             'The driver is not an available driver of the tenant in this '
             . 'country.', $case->[1]);
}

for my $id ('not-a-uuid', 'd0000000-0000-4000-8000-00000000000',
            'd0000000000040008000000000000001', '1', "d0000000-0000-4000-"
            . "8000-00000000000g") {
    is_error(assign($O{7}, $id), 400, 'invalid reference',
             'The driver id must be a uuid.', "driver id $id");
}

for my $case ([$O{5}, 'DELIVERED'], [$O{6}, 'CANCELLED']) {
    is_error(assign($case->[0], $D{5}, '10'), 409, 'Delivery order closed.',
             'A delivered or cancelled order cannot be assigned.',
             "a $case->[1] order");
}
is_error(assign($O{5}, 'd0000000-0000-4000-8000-000000000999'), 409,
         'Delivery order closed.',
         'A delivered or cancelled order cannot be assigned.',
         'a closed order is 409 whatever the driver');

for my $case ([$unknown, \%a, 'an unknown order'],
              [$O{11}, \%a, "another tenant's order"],
              [$O{10}, \%a, "an order of another country"],
              [$O{7}, { tenantId => 'tenant-b', countryCode => 'NG' },
               "tenant-b assigning tenant-a's order"],
              [$O{7}, { tenantId => 'tenant-a', countryCode => 'GH' },
               'tenant-a in GH assigning its NG order']) {
    is_error(assign($case->[0], $D{5}, '10', headers => $case->[1]), 404,
             'Delivery order not found.',
             'No delivery order with this id exists.', $case->[2]);
}

for my $id ('not-a-uuid', 'a0000000-0000-4000-8000-00000000000') {
    is_error(assign($id, $D{5}), 400, 'invalid delivery order id',
             'The delivery order id must be a uuid.', "order id $id");
}

for my $case (['-1', 'shippingFee must be at least 0.'],
              ['-0.01', 'shippingFee must be at least 0.'],
              ['abc', 'shippingFee must be a number.'],
              ['NaN', 'shippingFee must be a number.'],
              ['Infinity', 'shippingFee must be a number.'],
              ['inf', 'shippingFee must be a number.'],
              ['1e400', 'shippingFee must be a number.'],
              ['0x10', 'shippingFee must be a number.'],
              ['1,5', 'shippingFee must be a number.'],
              ['1000000000000',
               'shippingFee must be at most 999999999999.99.'],
              ['1.234', 'shippingFee must have at most two decimal places.'],
              ['0.001', 'shippingFee must have at most two decimal places.'],
              ['1e-3', 'shippingFee must have at most two decimal places.'])
{
    is_error(assign($O{7}, $D{5}, $case->[0]), 400, 'Bad request.',
             $case->[1], "shippingFee $case->[0]");
}
is_error(assign($unknown, $D{5}, '1.234'), 400, 'Bad request.',
         'shippingFee must have at most two decimal places.',
         'shippingFee is checked before the order is looked up');

is(snapshot(), $before, 'the refusals changed nothing');

# shippingFee absent or empty: the order keeps its fee (driver 7 was
# freed from order 4 above)
$r = assign($O{7}, $D{7}, '');
is_assigned($r, 'an empty shippingFee');
is(get($O{7})->{shippingFee}, 50, 'the stored fee stays');
$r = assign($O{7}, $D{7}, '1e3');
is_assigned($r, 'shippingFee 1e3');
is(get($O{7})->{shippingFee}, 1000, 'is 1000');
$r = assign($O{7}, $D{7}, '12.50');
is_assigned($r, 'shippingFee 12.50');
is(get($O{7})->{shippingFee}, 12.5, 'is 12.5');

### headers, methods

$r = assign($O{7}, $D{5}, undef, headers => { tenantId => 'tenant-a' });
is($r->{status}, 400, 'no countryCode: 400');
is($r->{json}{message}, 'countryCode header is required.', 'names it');
$r = assign($O{7}, $D{5}, undef, headers => { countryCode => 'NG' });
is($r->{status}, 400, 'no tenantId: 400');
is($r->{json}{message}, 'tenantId header is required.', 'names it');

for my $m (qw(HEAD GET PUT POST)) {
    $r = assign($O{7}, $D{5}, undef, method => $m);
    is($r->{status}, 405, "$m on assign: 405");
    is($r->{headers}{allow}, 'PATCH', "$m: Allow: PATCH");
}
is($r->{json}{statusCode}, 405, '405 in Envelope B');
is(get($O{7})->{driver}{id}, $D{7}, 'a HEAD changes nothing');

### fifty assigns of one driver to fifty orders at once

$t->psql(<<"SQL");
INSERT INTO drivers (id, tenant_id, country_code, name, status)
VALUES ('$D{20}', 'tenant-a', 'NG', 'Racer', 'AVAILABLE');
INSERT INTO delivery_orders (id, tenant_id, country_code, order_number,
                             status, pickup_address, dropoff_address)
SELECT ('b0000000-0000-4000-8000-' || lpad(g::text, 12, '0'))::uuid,
       'tenant-a', 'NG', 'RACE-' || g, 'PENDING', '{}', '{}'
FROM generate_series(1, 50) AS g;
SQL

# A transaction of the test holds the driver's row meanwhile, so that the
# assigns that reach PostgreSQL (as many at once as the two workers have
# connections) wait for it together and race when it is let go.
my $hold = $t->hold_rows('drivers', [ $D{20} ], seconds => 4);
my @h = map {
    $t->request_async('PATCH', sprintf('/tms/delivery-orders/b0000000-0000-'
                                       . '4000-8000-%012d/assign/%s'
                                       . '?shippingFee=%d', $_, $D{20}, $_),
                      headers => \%a)
} 1 .. 50;
my $waiting = 0;
$t->wait_until(sub {
    my $n = $t->psql("SELECT count(*) FROM pg_stat_activity"
                     . " WHERE application_name = 'ngx_platform'"
                     . " AND datname = current_database()"
                     . " AND wait_event_type = 'Lock'");
    $waiting = $n if $n > $waiting;
    return $waiting >= 8;
}, 3.5);
cmp_ok($waiting, '>=', 8, 'at least eight assigns wait for the driver at '
                          . 'once');
my @res = map { $_->wait } @h;
$hold->wait;
my %n;
$n{$_->{status}}++ for @res;
is($n{200}, 1, 'fifty assigns of one driver: exactly one 200')
    or diag(explain \%n);
is($n{400}, 49, 'the other 49: 400') or diag(explain \%n);
is(scalar(grep { ($_->{json}{message} // '') eq 'invalid reference' }
          @res), 49, 'each an invalid reference');
is($t->psql("SELECT count(*) FROM delivery_orders WHERE driver_id = '$D{20}'"),
   1, 'exactly one order holds the driver');
is($t->psql("SELECT count(*) FROM delivery_orders"
            . " WHERE order_number LIKE 'RACE-%' AND status = 'ASSIGNED'"),
   1, 'exactly one order is ASSIGNED');
is(status_of($D{20}), 'ON_DELIVERY', 'the driver is ON_DELIVERY');

### one order assigned to several drivers at once

# They queue on the order's lock and each takes it in turn from the one
# before, freeing him: at the end one driver holds it, and every other is
# AVAILABLE again. In every other round a transaction of the test holds the
# order's row first, so that they all wait and wake together.
my @free = map { sprintf('d0000000-0000-4000-8000-0000000001%02d', $_) }
           1 .. 6;
$t->psql("INSERT INTO drivers (id, tenant_id, country_code, name, status)"
         . " SELECT id::uuid, 'tenant-a', 'NG', 'Relay', 'AVAILABLE'"
         . " FROM unnest(ARRAY['" . join("','", @free) . "']) AS id");
my ($held, $stuck, $answered) = (0, 0, 0);
for my $round (1 .. 6) {
    my $lock;
    if ($round % 2) {
        $lock = $t->hold_rows('delivery_orders', [ $O{8} ],
                              seconds => 0.4);
    }
    my @r = map { $_->wait }
            map { $t->request_async('PATCH', "/tms/delivery-orders/$O{8}"
                                    . "/assign/$_", headers => \%a) } @free;
    $lock->wait if $lock;
    $answered++ if 6 == grep { $_->{status} == 200 || $_->{status} == 400 }
                          @r;
    my $on = $t->psql("SELECT count(*) FROM drivers WHERE status ="
                      . " 'ON_DELIVERY' AND name = 'Relay'");
    my $holder = $t->psql("SELECT driver_id FROM delivery_orders"
                          . " WHERE id = '$O{8}'");
    $held++ if $on == 1
               && status_of($holder) eq 'ON_DELIVERY';
    $stuck++ if $on != 1;
}
is($answered, 6, 'concurrent reassigns: each 200 or 400');
is($held, 6, 'concurrent reassigns: the holder alone is ON_DELIVERY');
is($stuck, 0, 'concurrent reassigns: no driver left ON_DELIVERY without '
              . 'an order');

### two reassigns of one order, queued on its lock

# The first takes the order from driver 11 to driver 12; the second, which
# asked for driver 11 while he still had the order, finds him freed by the
# first once it has the lock: it is served, not refused.
$t->psql(<<"SQL");
INSERT INTO drivers (id, tenant_id, country_code, name, status) VALUES
    ('$D{11}', 'tenant-a', 'NG', 'Queue One', 'ON_DELIVERY'),
    ('$D{12}', 'tenant-a', 'NG', 'Queue Two', 'AVAILABLE');
INSERT INTO delivery_orders (id, tenant_id, country_code, order_number,
                             status, pickup_address, dropoff_address,
                             driver_id)
VALUES ('$O{12}', 'tenant-a', 'NG', 'DO-12', 'ASSIGNED', '{}', '{}',
        '$D{11}');
SQL

sub waiting_for_locks {
    return $t->psql("SELECT count(*) FROM pg_stat_activity"
                    . " WHERE application_name = 'ngx_platform'"
                    . " AND datname = current_database()"
                    . " AND wait_event_type = 'Lock'");
}

# the order's row, held by a transaction of the test until two requests
# wait for locks (or 5 s)
my $lock = $t->psql_async(<<"SQL");
BEGIN;
SELECT 1 FROM delivery_orders WHERE id = '$O{12}' FOR UPDATE;
DO \$\$
BEGIN
    FOR i IN 1 .. 250 LOOP
        PERFORM pg_stat_clear_snapshot();
        EXIT WHEN (SELECT count(*) FROM pg_stat_activity
                   WHERE application_name = 'ngx_platform'
                     AND datname = current_database()
                     AND wait_event_type = 'Lock') >= 2;
        PERFORM pg_sleep(0.02);
    END LOOP;
END
\$\$;
SELECT pg_stat_clear_snapshot();
SELECT 'waiting: ' || count(*) FROM pg_stat_activity
WHERE application_name = 'ngx_platform' AND wait_event_type = 'Lock'
AND datname = current_database();
COMMIT;
SQL
$t->wait_until(sub {
    $t->psql("SELECT count(*) FROM pg_locks l JOIN pg_class c"
             . " ON c.oid = l.relation WHERE c.relname = 'delivery_orders'"
             . " AND l.mode = 'RowShareLock' AND l.granted"
             . " AND l.database = (SELECT oid FROM pg_database"
             . " WHERE datname = current_database())")
}, 5) or die "the order's row lock was not taken\n";
my $first = $t->request_async('PATCH', "/tms/delivery-orders/$O{12}/assign/"
                                       . $D{12}, headers => \%a);
ok($t->wait_until(sub { waiting_for_locks() >= 1 }, 5),
   'the first reassign waits for the order');
my $second = $t->request_async('PATCH', "/tms/delivery-orders/$O{12}/assign/"
                                        . $D{11}, headers => \%a);
is_assigned($first->wait, 'the first reassign');
is_assigned($second->wait, 'the second, to the driver the first freed');
like($lock->wait, qr/^waiting: 2$/m,
     'both waited for the order when it was let go');
is(get($O{12})->{driver}{id}, $D{11}, 'the second one holds it');
is(status_of($D{11}), 'ON_DELIVERY', 'he is ON_DELIVERY');
is(status_of($D{12}), 'AVAILABLE', 'the first one is freed again');

### the delivery order GET of another tenant still 404

$r = $t->request('GET', "/tms/delivery-orders/$O{1}",
                 headers => { tenantId => 'tenant-b', countryCode => 'NG' });
is($r->{status}, 404, "tenant-b cannot read tenant-a's assigned order");

$t->done;
done_testing;
