#!/usr/bin/perl

# GET /tms/delivery-orders/{uuid}: tenancy headers, uuid check, tenant and
# country isolation, the delivery order document.

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Platform::Test;
use Platform::JWT;

my $t = Platform::Test->new();
my $k = Platform::JWT::keys($t->testdir . '/keys');

# the location keeps every route's default: the vehicles and drivers
# routes need a token key, the delivery order GET only the headers
$t->run(<<'EOF');
    server {
        listen 127.0.0.1:%%PORT%%;
        location /tms/ {
            platform_tms;
            platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;
        }
    }
EOF

my $order = 'a0000000-0000-4000-8000-000000000001';
my $other = 'a0000000-0000-4000-8000-000000000002';
my $bare = 'a0000000-0000-4000-8000-000000000003';
my $driver = 'd0000000-0000-4000-8000-000000000001';

$t->psql(<<"SQL");
INSERT INTO drivers (id, tenant_id, country_code, name, phone, vehicle_type,
                     status)
VALUES ('$driver', 'tenant-a', 'NG', 'Ada Obi', '+2348000000001', 'BIKE',
        'ON_DELIVERY');
INSERT INTO delivery_orders (id, tenant_id, country_code, order_number,
                             status, pickup_address, dropoff_address,
                             driver_id, shipping_fee, currency, assigned_at,
                             created_at, updated_at)
VALUES ('$order', 'tenant-a', 'NG', 'DO-1001', 'ASSIGNED',
        '{"address": "1 Marina", "city": "Lagos", "state": "Lagos",
          "country": "NG", "latitude": 6.45, "longitude": 3.39}',
        '{"address": "2 Allen Ave", "city": "Ikeja", "state": "Lagos",
          "country": "NG", "contactName": "Bola"}',
        '$driver', 1500.50, 'NGN', '2026-01-02T10:00:00Z',
        '2026-01-01T09:00:00Z', '2026-01-02T10:00:00Z'),
       ('$other', 'tenant-b', 'NG', 'DO-1001', 'PENDING', '{}', '{}',
        NULL, NULL, NULL, NULL, now(), now()),
       ('$bare', 'tenant-a', 'GH', 'DO-2001', 'PENDING', '{}', '{}',
        NULL, NULL, NULL, NULL, now(), now());
SQL

my %a = (tenantId => 'tenant-a', countryCode => 'NG');

my $r = $t->request('GET', "/tms/delivery-orders/$order", headers => \%a);
is($r->{status}, 200, 'order found');
is($r->{headers}{'content-type'}, 'application/json; charset=utf-8',
   'content type');
is($r->{json}{status}, JSON::PP::true, 'status true');
is($r->{json}{statusCode}, 0, 'statusCode 0');
is($r->{json}{message}, 'Delivery order retrieved.', 'message');
is_deeply($r->{json}{errors}, [], 'no errors');

my $d = $r->{json}{data};
is($d->{id}, $order, 'id');
is($d->{orderNumber}, 'DO-1001', 'order number');
is($d->{status}, 'ASSIGNED', 'status');
is($d->{tenantId}, 'tenant-a', 'tenant');
is($d->{countryCode}, 'NG', 'country');
is($d->{pickupAddress}{city}, 'Lagos', 'pickup address');
is($d->{pickupAddress}{latitude}, 6.45, 'latitude is a number');
is($d->{dropOffAddress}{contactName}, 'Bola', 'drop-off address');
is($d->{driver}{id}, $driver, 'driver id');
is($d->{driver}{name}, 'Ada Obi', 'driver name');
is($d->{driver}{phone}, '+2348000000001', 'driver phone');
is($d->{driver}{vehicleType}, 'BIKE', 'driver vehicle');
is($d->{driver}{status}, 'ON_DELIVERY', 'driver status');
is($d->{shippingFee}, 1500.5, 'shipping fee is a number');
is($d->{currency}, 'NGN', 'currency');
like($d->{assignedAt}, qr/^2026-01-02T10:00:00(\+00:00|Z)/, 'assignedAt');
like($d->{createdAt}, qr/^2026-01-01T09:00:00/, 'createdAt');
like($d->{updatedAt}, qr/^2026-01-02T10:00:00/, 'updatedAt');
is(Platform::Test::loose_json($r->{content}), '',
   'the document is compact JSON');

$r = $t->request('GET', "/tms/delivery-orders/$bare",
                 headers => { tenantId => 'tenant-a', countryCode => 'GH' });
is($r->{status}, 200, 'order without driver');
ok(exists $r->{json}{data}{driver} && !defined $r->{json}{data}{driver},
   'driver null');
ok(!defined $r->{json}{data}{shippingFee}, 'fee null');

# tenant and country isolation: 404, never 403

$r = $t->request('GET', "/tms/delivery-orders/$other", headers => \%a);
is($r->{status}, 404, "another tenant's order is 404");
is($r->{json}{status}, JSON::PP::false, 'status false');
is($r->{json}{statusCode}, 404, 'statusCode 404');
is($r->{json}{message}, 'Delivery order not found.', '404 message');
is_deeply($r->{json}{data}, {}, 'data {}');

$r = $t->request('GET', "/tms/delivery-orders/$bare", headers => \%a);
is($r->{status}, 404, "another country's order is 404");

$r = $t->request('GET', "/tms/delivery-orders/$order",
                 headers => { tenantId => 'tenant-b', countryCode => 'NG' });
is($r->{status}, 404, 'tenant b cannot see tenant a order');

$r = $t->request('GET', '/tms/delivery-orders/b0000000-0000-4000-8000-'
                 . '000000000009', headers => \%a);
is($r->{status}, 404, 'unknown order');

# bad input

for my $id ('not-a-uuid', 'a0000000-0000-4000-8000-00000000000',
            'a0000000000040008000000000000001',
            'a0000000-0000-4000-8000-00000000000g', "%27%3Bselect%201")
{
    $r = $t->request('GET', "/tms/delivery-orders/$id", headers => \%a);
    is($r->{status}, 400, "bad id $id is 400");
    is($r->{json}{message}, 'invalid delivery order id', 'message');
    is($r->{json}{errors}[0]{message}, 'invalid delivery order id',
       'errors[0].message');
}

$r = $t->request('GET', "/tms/delivery-orders/$order",
                 headers => { countryCode => 'NG' });
is($r->{status}, 400, 'missing tenantId');
is($r->{json}{message}, 'tenantId header is required.', 'names tenantId');

$r = $t->request('GET', "/tms/delivery-orders/$order",
                 headers => { tenantId => 'tenant-a' });
is($r->{status}, 400, 'missing countryCode');
is($r->{json}{message}, 'countryCode header is required.',
   'names countryCode');

$r = $t->request('GET', "/tms/delivery-orders/$order",
                 headers => { tenantId => 'x' x 200, countryCode => 'NG' });
is($r->{status}, 400, 'overlong tenantId');
is($r->{json}{message}, 'tenantId header is invalid.', 'invalid header');

$r = $t->request('DELETE', "/tms/delivery-orders/$order", headers => \%a);
is($r->{status}, 405, 'DELETE is 405');
is($r->{headers}{allow}, 'GET, HEAD', 'Allow');
is($r->{json}{statusCode}, 405, 'Envelope B');

$r = $t->request('GET', '/tms/nothing', headers => \%a);
is($r->{status}, 404, 'unknown path');
is($r->{json}{status}, JSON::PP::false, 'Envelope B on unknown path');

$r = $t->request('GET', "/tms/delivery-orders/$order/", headers => \%a);
is($r->{status}, 200, 'trailing slash tolerated');

$t->done;
done_testing;
