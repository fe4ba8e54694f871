#!/usr/bin/perl

# PUT /tms/vehicles/{uuid} and GET /tms/drivers/available: Envelope B, a
# bearer token and the tenancy headers, tenant and country isolation, the
# vehicle document with every field of spec 2.7, partial updates and null,
# year and capacity checks, linking a driver by user id (moved from the
# vehicle he drove), unlinking, the available drivers of a vehicle type in
# a stable order, and concurrent links of one driver that leave him on one
# vehicle.

use strict;
use warnings;
use utf8;

use lib 't/lib';
use Test::More;
use Platform::Test;
use Platform::JWT;

my $t = Platform::Test->new(workers => 2);
my $k = Platform::JWT::keys($t->testdir . '/keys');

$t->run(<<'EOF');
    server {
        listen 127.0.0.1:%%PORT%%;
        location /tms/ {
            platform_tms;
            platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;
        }
    }
EOF

my $json = JSON::PP->new->utf8->canonical;

# tenant-a NG: drivers 1 (u-1, VAN), 2 (u-2, BIKE) available, 3 on a
# delivery, 4 offline, 8 and 9 available with the same name (ties by id),
# 10 (u-10, TRUCK) available; tenant-a GH: 5 (u-5); tenant-b NG: 6 (user
# id u-1, like driver 1 of tenant-a). Vehicles: 1 (driven by driver 2) and
# 2 of tenant-a NG, 3 of tenant-a GH, 4 of tenant-b NG.
my %D = map { $_ => sprintf('d0000000-0000-4000-8000-%012d', $_) } 1 .. 12;
my %V = map { $_ => sprintf('e0000000-0000-4000-8000-%012d', $_) } 1 .. 9;
my $unknown = 'e0000000-0000-4000-8000-000000000099';
my $year = (gmtime)[5] + 1900;

$t->psql(<<"SQL");
INSERT INTO drivers (id, tenant_id, country_code, user_id, name, phone,
                     vehicle_type, status) VALUES
    ('$D{1}', 'tenant-a', 'NG', 'u-1', 'Chidi', '+234800000001', 'VAN',
     'AVAILABLE'),
    ('$D{2}', 'tenant-a', 'NG', 'u-2', 'Ada', '+234800000002', 'BIKE',
     'AVAILABLE'),
    ('$D{3}', 'tenant-a', 'NG', 'u-3', 'Bola', '+234800000003', 'VAN',
     'ON_DELIVERY'),
    ('$D{4}', 'tenant-a', 'NG', 'u-4', 'Aaron', '+234800000004', 'VAN',
     'OFFLINE'),
    ('$D{9}', 'tenant-a', 'NG', NULL, 'Emeka', NULL, 'TRUCK', 'AVAILABLE'),
    ('$D{8}', 'tenant-a', 'NG', 'u-8', 'Emeka', '+234800000008', 'van',
     'AVAILABLE'),
    ('$D{10}', 'tenant-a', 'NG', 'u-10', 'Zainab', '+234800000010',
     'TRUCK', 'AVAILABLE'),
    ('$D{5}', 'tenant-a', 'GH', 'u-5', 'Kofi', '+233200000005', 'VAN',
     'AVAILABLE'),
    ('$D{6}', 'tenant-b', 'NG', 'u-1', 'Other Chidi', '+234800000006',
     'VAN', 'AVAILABLE');
INSERT INTO vehicles (id, tenant_id, country_code, driver_id, license_plate,
                      model, manufacturer, type, colour, year, capacity,
                      condition, image_url, carrier_id,
                      carrier_phone_number) VALUES
    ('$V{1}', 'tenant-a', 'NG', '$D{2}', 'LAG-001-AA', 'Boxer', 'Bajaj',
     'BIKE', 'red', 2019, 150, 'GOOD', 'https://img.example/v1.png',
     'carrier-1', '+234811111111'),
    ('$V{2}', 'tenant-a', 'NG', NULL, 'LAG-002-BB', 'Hiace', 'Toyota',
     'VAN', 'white', 2015, 1200.5, 'FAIR', NULL, NULL, NULL),
    ('$V{3}', 'tenant-a', 'GH', NULL, 'GR-3-22', 'Sprinter', 'Mercedes',
     'VAN', 'blue', 2020, 2000, 'GOOD', NULL, NULL, NULL),
    ('$V{4}', 'tenant-b', 'NG', NULL, 'ABJ-4-CC', 'Actros', 'Mercedes',
     'TRUCK', 'grey', 2018, 18000, 'GOOD', NULL, NULL, NULL);
SQL

sub token {
    my ($tenant) = @_;
    return Platform::JWT::hs256($k, tenantId => $tenant // 'tenant-a');
}

# headers of tenant-a in NG with its token; %o: tenant, country, token
# (undef: none), headers (merged over)
sub hdrs {
    my (%o) = @_;
    my $tenant = $o{tenant} // 'tenant-a';
    my %h = (tenantId => $tenant, countryCode => $o{country} // 'NG');
    $h{Authorization} = 'Bearer ' . (exists $o{token} ? $o{token}
                                                      : token($tenant))
        if !exists $o{token} || defined $o{token};
    %h = (%h, %{$o{headers} // {}});
    delete $h{$_} for grep { !defined $h{$_} } keys %h;
    return \%h;
}

sub put {
    my ($id, $body, %o) = @_;
    my %args = (headers => hdrs(%o));
    $args{body} = ref $body ? $json->encode($body) : $body;
    $args{headers}{'Content-Type'} = 'application/json';
    return $t->request($o{method} // 'PUT', "/tms/vehicles/$id", %args);
}

sub available {
    my ($query, %o) = @_;
    return $t->request($o{method} // 'GET',
                       '/tms/drivers/available' . ($query // ''),
                       headers => hdrs(%o));
}

sub is_error { goto &Platform::Test::is_envelope_b_error }

sub bad_field {
    my ($body, $detail, $name) = @_;
    is_error(put($V{2}, $body), 400, 'Bad request.', $detail, $name);
}

# the vehicle as stored, in the shape of the document
sub stored {
    my ($id) = @_;
    my $row = $t->psql(<<"SQL");
SELECT row_to_json(x) FROM (SELECT v.license_plate AS "licensePlate",
    v.model, v.manufacturer, v.type, v.colour, v.year::text AS year,
    v.capacity::text AS capacity, v.condition, v.image_url AS "imageUrl",
    v.carrier_id AS "carrierId",
    v.carrier_phone_number AS "carrierPhoneNumber", v.driver_id AS driver
    FROM vehicles v WHERE v.id = '$id') x
SQL
    return $json->decode($row);
}

sub driver_of { stored($_[0])->{driver} }

# a value in a test's name, non-ASCII characters escaped
sub shown {
    return join '', map { ord > 127 ? sprintf('\\x{%x}', ord) : $_ }
                    split //, $_[0];
}

my $r;

### a whole update: every field of spec 2.7

my %all = (
    licensePlate => 'LAG-777-ZZ', model => 'Transit', manufacturer => 'Ford',
    capacity => '1500.50', colour => 'silver', year => '2021',
    type => 'VAN', imageUrl => 'https://img.example/transit.png',
    carrierId => 'carrier-9', condition => 'NEW',
    carrierPhoneNumber => '+2348099999999', driverUserId => 'u-1',
    assignDriver => JSON::PP::true,
);

my $before = $t->psql("SELECT updated_at FROM vehicles WHERE id = '$V{2}'");
$r = put($V{2}, \%all);
is($r->{status}, 200, 'whole update: 200') or diag($r->{content});
is($r->{headers}{'content-type'}, 'application/json; charset=utf-8',
   'content type');
is($r->{json}{status}, JSON::PP::true, 'status true');
is($r->{json}{statusCode}, 0, 'statusCode 0');
is($r->{json}{message}, 'Vehicle updated.', 'message');
is_deeply($r->{json}{errors}, [], 'no errors');
is(Platform::Test::loose_json($r->{content}), '', 'compact JSON');

my $d = $r->{json}{data};
is_deeply([ sort keys %$d ],
          [ sort qw(id tenantId countryCode licensePlate model manufacturer
                    type colour year capacity condition imageUrl carrierId
                    carrierPhoneNumber driverUserId driver createdAt
                    updatedAt) ], 'the vehicle document has every key');
is($d->{id}, $V{2}, 'id');
is($d->{tenantId}, 'tenant-a', 'tenantId');
is($d->{countryCode}, 'NG', 'countryCode');
for my $f (qw(licensePlate model manufacturer capacity colour year type
              imageUrl carrierId condition carrierPhoneNumber)) {
    is($d->{$f}, $all{$f}, "field $f answered");
}
is(Platform::Test::json_type($d->{year}), 'string', 'year is a string');
is(Platform::Test::json_type($d->{capacity}), 'string',
   'capacity is a string');
is($d->{driverUserId}, 'u-1', 'driverUserId');
is_deeply($d->{driver}, { id => $D{1}, userId => 'u-1', name => 'Chidi',
                          phone => '+234800000001', vehicleType => 'VAN',
                          status => 'AVAILABLE' }, 'the driver');
like($d->{createdAt}, qr/^\d{4}-\d\d-\d\dT/, 'createdAt');
like($d->{updatedAt}, qr/^\d{4}-\d\d-\d\dT/, 'updatedAt');
isnt($t->psql("SELECT updated_at FROM vehicles WHERE id = '$V{2}'"),
     $before, 'updated_at moves');

my %want = %all;
delete @want{qw(driverUserId assignDriver)};
$want{driver} = $D{1};
is_deeply(stored($V{2}), \%want, 'every field stored');

### partial updates, null, ""

$r = put($V{2}, { colour => 'black' });
is($r->{status}, 200, 'one field: 200');
is_deeply(stored($V{2}), { %want, colour => 'black' },
          'one field replaced, the others kept');
is($r->{json}{data}{driver}{id}, $D{1}, 'the driver stays');

$r = put($V{2}, {});
is($r->{status}, 200, 'an empty body object: 200');
is_deeply(stored($V{2}), { %want, colour => 'black' }, 'changes nothing');

$r = put($V{2}, { model => undef, imageUrl => undef, year => undef,
                  capacity => undef, carrierId => '' });
is($r->{status}, 200, 'null clears: 200') or diag($r->{content});
ok(exists $r->{json}{data}{model} && !defined $r->{json}{data}{model},
   'model null in the answer');
ok(!defined $r->{json}{data}{year}, 'year null in the answer');
is($r->{json}{data}{carrierId}, '', '"" is a value');
is_deeply(stored($V{2}), { %want, colour => 'black', model => undef,
                           imageUrl => undef, year => undef,
                           capacity => undef, carrierId => '' },
          'null cleared, "" stored');

$r = put($V{2}, { driverUserId => 'u-10' });
is($r->{status}, 200, 'driverUserId without assignDriver: 200');
is(driver_of($V{2}), $D{1}, 'driverUserId alone links nobody');

### year

for my $y ('2021', '1000', "$year", $year + 1) {
    $r = put($V{2}, { year => "$y" });
    is($r->{status}, 200, "year $y: 200");
    is($r->{json}{data}{year}, "$y", "year $y stored");
}
for my $y ($year + 2, '9999', '0999', '999', '20211', 'abcd', '', ' 2021',
           '2021 ', '２０２１', '-201', '20.1') {
    bad_field({ year => "$y" },
              'year must be a 4-digit year, not after next year.',
              "year '" . shown($y) . "'");
}
bad_field({ year => 2021 }, 'year must be a string.', 'year as a number');
is(stored($V{2})->{year}, $year + 1, 'refused years change nothing');

### capacity

for my $c ('0', '1500', '1500.50', '0.125', '999999999.999', '007') {
    $r = put($V{2}, { capacity => $c });
    is($r->{status}, 200, "capacity $c: 200");
    (my $n = $c) =~ s/^0+(?=\d)//;
    is($r->{json}{data}{capacity}, $n, "capacity $c answered as given");
}
for my $c ('-1', '1e3', '1.2345', 'abc', '', '.5', '5.', '1000000000',
           '1,5', ' 1', 'NaN', '+1', '0x10') {
    bad_field({ capacity => $c },
              'capacity must be a non-negative decimal number in a string: '
              . 'at most 9 digits before the point and 3 after it.',
              "capacity '$c'");
}
bad_field({ capacity => 12 }, 'capacity must be a string.',
          'capacity as a number');

### the other fields' types and lengths

bad_field({ licensePlate => 'X' x 21 },
          'licensePlate must be at most 20 characters long.',
          'licensePlate too long');
$r = put($V{2}, { licensePlate => 'É' x 20 });
is($r->{status}, 200, 'lengths count characters, not bytes');
bad_field({ model => 'x' x 101 }, 'model must be at most 100 characters long.',
          'model too long');
bad_field({ imageUrl => 'x' x 2049 },
          'imageUrl must be at most 2048 characters long.', 'imageUrl');
bad_field({ carrierPhoneNumber => 5 }, 'carrierPhoneNumber must be a string.',
          'carrierPhoneNumber a number');
bad_field({ condition => ['GOOD'] }, 'condition must be a string.',
          'condition an array');
bad_field({ assignDriver => 'yes' }, 'assignDriver must be a boolean.',
          'assignDriver a string');
bad_field({ assignDriver => undef }, 'assignDriver must not be null.',
          'assignDriver null');
bad_field({ driverUserId => 7, assignDriver => JSON::PP::true },
          'driverUserId must be a string.', 'driverUserId a number');
is_error(put($V{2}, '{"model":'), 400, 'The request body is not valid JSON.',
         'Malformed JSON at line 1, column 9: '
         . 'unexpected token near end of file',
         'malformed JSON');
is_error(put($V{2}, '[1]'), 400, 'The request body must be a JSON object.',
         'Expected a JSON object.', 'an array body');

### linking and unlinking drivers

$r = put($V{2}, { assignDriver => JSON::PP::false });
is($r->{status}, 200, 'assignDriver false: 200');
ok(exists $r->{json}{data}{driver} && !defined $r->{json}{data}{driver},
   'unlinked: driver null');
ok(!defined $r->{json}{data}{driverUserId}, 'unlinked: driverUserId null');
is(driver_of($V{2}), undef, 'unlinked in the table');

$r = put($V{2}, { assignDriver => JSON::PP::false, driverUserId => 'u-1' });
is($r->{status}, 200, 'unlinking an unlinked vehicle: 200');

# driver 2 drives vehicle 1: linking him to vehicle 2 moves him
$r = put($V{2}, { assignDriver => JSON::PP::true, driverUserId => 'u-2',
                  colour => 'green' });
is($r->{status}, 200, 'linking the driver of another vehicle: 200')
    or diag($r->{content});
is($r->{json}{data}{driver}{id}, $D{2}, 'he drives this one');
is(driver_of($V{2}), $D{2}, 'stored');
is(driver_of($V{1}), undef, 'and no longer the other one');
is(stored($V{2})->{colour}, 'green', 'the other fields with it');

$r = put($V{2}, { assignDriver => JSON::PP::true, driverUserId => 'u-2' });
is($r->{status}, 200, 'linking him again: 200');
is(driver_of($V{2}), $D{2}, 'unchanged');

$r = put($V{1}, { assignDriver => JSON::PP::true, driverUserId => 'u-4' });
is($r->{status}, 200, 'an offline driver may be linked');
is($r->{json}{data}{driver}{status}, 'OFFLINE', 'his status shows');

# refused links change nothing, not even the other fields
my $snap = stored($V{2});
for my $case (['u-6', 'a user id of no driver of the tenant'],
              ['u-5', 'a driver of the tenant in another country'],
              ['nobody', 'an unknown user id'],
              ['U-1', 'user ids are compared exactly']) {
    is_error(put($V{2}, { assignDriver => JSON::PP::true,
                          driverUserId => $case->[0], colour => 'pink' }),
             400, 'invalid request',
             'driverUserId is not a driver of the tenant in this country.',
             $case->[1]);
}
is_error(put($V{2}, { assignDriver => JSON::PP::true, colour => 'pink' }),
         400, 'Bad request.',
         'driverUserId is required when assignDriver is true.',
         'assignDriver true without driverUserId');
for my $u ('', undef) {
    is_error(put($V{2}, { assignDriver => JSON::PP::true,
                          driverUserId => $u }),
             400, 'Bad request.',
             'driverUserId is required when assignDriver is true.',
             'assignDriver true, driverUserId ' . ($u // 'null'));
}
is_deeply(stored($V{2}), $snap, 'refused updates changed nothing');

# tenant-b's u-1 is its own driver 6
$r = put($V{4}, { assignDriver => JSON::PP::true, driverUserId => 'u-1' },
         tenant => 'tenant-b');
is($r->{status}, 200, "tenant-b links its own u-1");
is($r->{json}{data}{driver}{id}, $D{6}, "tenant-b's driver, not tenant-a's");

### unknown vehicles, other tenants and countries: 404

for my $case ([$unknown, {}, 'an unknown vehicle'],
              [$V{4}, {}, "tenant-b's vehicle"],
              [$V{3}, {}, 'a vehicle of another country'],
              [$V{1}, { tenant => 'tenant-b' }, 'tenant-b asking for one of '
                                                . "tenant-a's"],
              [$V{3}, { country => 'GH', tenant => 'tenant-b' },
               "tenant-b asking for one of tenant-a's in GH"]) {
    my ($id, $o, $name) = @$case;
    is_error(put($id, { colour => 'pink', assignDriver => JSON::PP::true,
                        driverUserId => 'u-1' }, %$o),
             404, 'Vehicle not found.', 'No vehicle with this id exists.',
             $name);
}
is($t->psql("SELECT count(*) FROM vehicles WHERE colour = 'pink'"), 0,
   'a 404 changes nothing');
$r = put($V{3}, { colour => 'yellow' }, country => 'GH');
is($r->{status}, 200, 'the GH vehicle in GH');

# checks of the body come first, then the vehicle
is_error(put($unknown, { year => '3000' }), 400, 'Bad request.',
         'year must be a 4-digit year, not after next year.',
         'a bad year of an unknown vehicle: 400');

for my $id ('not-a-uuid', 'e0000000-0000-4000-8000-00000000000',
            'e0000000000040008000000000000001') {
    is_error(put($id, {}), 400, 'invalid request',
             'The vehicle id must be a uuid.', "vehicle id $id");
}
$r = put(uc $V{2}, { colour => 'teal' });
is($r->{status}, 200, 'an upper case uuid finds the vehicle');

### credentials and headers

$r = put($V{2}, {}, token => undef);
is_error($r, 401, 'Authentication required.', 'A bearer token is required.',
         'no token');
is($r->{headers}{'www-authenticate'}, 'Bearer', 'challenge');
is_error(put($V{2}, {}, token => token('tenant-b')), 403, 'Access denied.',
         'The tenantId header does not match the credentials.',
         "tenant-b's token with tenantId tenant-a");
$r = put($V{2}, {}, headers => { tenantId => undef });
is($r->{status}, 400, 'no tenantId header: 400');
is($r->{json}{message}, 'tenantId header is required.', 'names tenantId');
$r = put($V{2}, {}, headers => { countryCode => undef });
is($r->{status}, 400, 'no countryCode header: 400');
is($r->{json}{message}, 'countryCode header is required.',
   'names countryCode');

$r = put($V{2}, {}, method => 'GET');
is($r->{status}, 405, 'GET a vehicle: 405');
is($r->{headers}{allow}, 'PUT', 'Allow: PUT');
is($r->{json}{statusCode}, 405, 'Envelope B');
$r = put($V{2}, {}, method => 'PATCH');
is($r->{status}, 405, 'PATCH a vehicle: 405');

### GET /tms/drivers/available

my $v2 = put($V{2}, {})->{json}{data};
delete @$v2{qw(driver driverUserId)};
$r = available();
is($r->{status}, 200, 'available drivers: 200') or diag($r->{content});
is($r->{json}{message}, 'Available drivers retrieved.', 'message');
is($r->{json}{status}, JSON::PP::true, 'status true');
is(Platform::Test::loose_json($r->{content}), '', 'compact JSON');
my @l = @{$r->{json}{data}};
# Ada (2), Chidi (1), Emeka (8), Emeka (9), Zainab (10): by name, then id
is_deeply([ map { $_->{id} } @l ], [ @D{2, 1, 8, 9, 10} ],
          'AVAILABLE drivers of the tenant in NG, by name then id');
is_deeply($l[0], {
    id => $D{2}, userId => 'u-2', name => 'Ada', phone => '+234800000002',
    vehicleType => 'BIKE', status => 'AVAILABLE',
    vehicle => $v2,
}, 'a driver with his vehicle: the vehicle document without its driver')
    or diag($r->{content});
is_deeply([ sort keys %{$l[0]{vehicle}} ],
          [ sort qw(id tenantId countryCode licensePlate model manufacturer
                    type colour year capacity condition imageUrl carrierId
                    carrierPhoneNumber createdAt updatedAt) ],
          'the vehicle of a driver: the vehicle document without driver');
ok(exists $l[1]{vehicle} && !defined $l[1]{vehicle},
   'a driver without a vehicle: vehicle null');
ok(exists $l[3]{userId} && !defined $l[3]{userId}, 'userId null');
ok(exists $l[3]{phone} && !defined $l[3]{phone}, 'phone null');

$r = available('?vehicleType=VAN');
is_deeply([ map { $_->{id} } @{$r->{json}{data}} ], [ @D{1, 8} ],
          'vehicleType VAN (compared case-insensitively)');
$r = available('?vehicleType=truck');
is_deeply([ map { $_->{id} } @{$r->{json}{data}} ], [ @D{9, 10} ],
          'vehicleType truck');
$r = available('?vehicleType=PLANE');
is($r->{status}, 200, 'no driver of that type: 200');
is_deeply($r->{json}{data}, [], 'data []');
is($r->{content} =~ /"data":\[\]/ ? 1 : 0, 1, 'an empty array, not {}');
$r = available('?vehicleType=');
is(scalar @{$r->{json}{data}}, 5, 'an empty vehicleType is no filter');
$r = available('?vehicleType=%25');
is_deeply($r->{json}{data}, [], 'vehicleType % is no pattern');
is_error(available('?vehicleType=' . 'x' x 51), 400, 'Bad request.',
         'vehicleType must be at most 50 characters long.',
         'vehicleType too long');

$r = available(undef, tenant => 'tenant-b');
is_deeply([ map { $_->{id} } @{$r->{json}{data}} ], [ $D{6} ],
          "tenant-b sees its own drivers only");
is($r->{json}{data}[0]{vehicle}{id}, $V{4}, 'with its vehicle');
$r = available(undef, country => 'GH');
is_deeply([ map { $_->{id} } @{$r->{json}{data}} ], [ $D{5} ],
          'GH: the drivers in GH only');
$r = available(undef, tenant => 'tenant-c');
is_deeply($r->{json}{data}, [], 'a tenant without drivers: []');

$t->psql("UPDATE drivers SET status = 'OFFLINE' WHERE id = '$D{2}'");
$r = available();
is_deeply([ map { $_->{id} } @{$r->{json}{data}} ], [ @D{1, 8, 9, 10} ],
          'a driver gone offline leaves the list');

$r = available(undef, token => undef);
is_error($r, 401, 'Authentication required.', 'A bearer token is required.',
         'available without a token');
is_error(available(undef, token => token('tenant-b')), 403,
         'Access denied.',
         'The tenantId header does not match the credentials.',
         'available: a token of another tenant');
$r = available(undef, headers => { countryCode => undef });
is($r->{status}, 400, 'available without countryCode: 400');
is($r->{json}{message}, 'countryCode header is required.', 'names it');
$r = available(undef, headers => { tenantId => undef });
is($r->{status}, 400, 'available without tenantId: 400');
$r = available(undef, method => 'POST');
is($r->{status}, 405, 'POST available: 405');
is($r->{headers}{allow}, 'GET, HEAD', 'Allow');
$r = available(undef, method => 'HEAD');
is($r->{status}, 200, 'HEAD available: 200');
is($r->{content}, '', 'no body');

### concurrent links of one driver to two vehicles

# Each round links driver 10 to vehicles 1 and 2 at once: both may succeed
# one after the other (the second moves him), or the second finds the
# first's link not yet committed and is 409; never is he on both, nor
# dropped from both. In every other round a transaction of the test holds
# both vehicles' rows first, and lets them go once both requests wait for
# them (or after 5 s): they then run at the same time, and the second is
# always 409.
sub hold_vehicles {
    return $t->hold_rows('vehicles', [ $V{1}, $V{2} ], waiters => 2);
}

my (%seen, %locked, $conflict);
my ($both, $none) = (0, 0);
for my $round (1 .. 10) {
    put($_, { assignDriver => JSON::PP::false }) for @V{1, 2};
    my $lock = $round % 2 ? hold_vehicles() : undef;
    my @h = map {
        $t->request_async('PUT', "/tms/vehicles/$_",
            headers => { %{hdrs()}, 'Content-Type' => 'application/json' },
            body => '{"assignDriver":true,"driverUserId":"u-10"}')
    } ($round % 2 ? @V{1, 2} : @V{2, 1});
    my @res = map { $_->wait } @h;
    my @s = sort map { $_->{status} } @res;
    ($conflict) = grep { $_->{status} == 409 } @res unless $conflict;
    $lock->wait if $lock;
    $seen{$_}++ for @s;
    $locked{"@s"}++ if $lock;
    my $n = $t->psql("SELECT count(*) FROM vehicles"
                     . " WHERE driver_id = '$D{10}'");
    $both++ if $n > 1;
    $none++ if $n < 1;
}
is($both, 0, 'concurrent links: never on two vehicles');
is($none, 0, 'concurrent links: always on one');
is_deeply([ grep { $_ != 200 && $_ != 409 } keys %seen ], [],
          'concurrent links: 200 or 409 only')
    or diag(explain \%seen);
is_deeply(\%locked, { '200 409' => 5 },
          'links that ran at the same time: one 200, one 409')
    or diag(explain \%locked);
is_error($conflict // {}, 409, 'Vehicle update conflict.',
         'The driver was linked to another vehicle at the same time; retry.',
         'the conflict');
$r = put($V{1}, { assignDriver => JSON::PP::true, driverUserId => 'u-10' });
is($r->{status}, 200, 'afterwards the link is served');
$t->ignore_log(qr/duplicate key value violates unique constraint/);

$t->done;
done_testing;
