#!/usr/bin/perl

# Client input the module refuses at the door rather than pass on: query
# arguments and "{string}" path captures that are not UTF-8, or hold a
# NUL, are 400 naming them (PostgreSQL would have answered 500, or cut
# the text short); "+" is decoded in the module's own copy, so the
# request line that the access log shows is the client's; and a 500 is
# never silent: it is logged with the request id the client was given.

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Platform::Test;
use Platform::JWT;

my $t = Platform::Test->new();
my $k = Platform::JWT::keys($t->testdir . '/keys');

$t->run(<<'EOF');
    log_format request '$request';

    server {
        listen 127.0.0.1:%%PORT%%;
        platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;
        access_log %%TESTDIR%%/access.log request;

        location /api/v1/trades/ { platform_trades; platform_auth bearer; }
        location /tms/ { platform_tms; }
    }
EOF

my $flow = 'f4700000-0000-4000-8000-000000000001';
my $order = 'a4700000-0000-4000-8000-000000000001';

$t->psql(<<"SQL");
INSERT INTO trade_process_flows (id, tenant_id, name, description)
VALUES ('$flow', 'tenant-a', 'Éclair cocoa export', 'Non-ASCII');
INSERT INTO delivery_orders (id, tenant_id, country_code, order_number,
                             status, pickup_address, dropoff_address,
                             created_at, updated_at)
VALUES ('$order', 'tenant-a', 'NG', 'DO-4701', 'PENDING', '{}', '{}',
        now(), now());
SQL

my %h = (Authorization => 'Bearer ' . Platform::JWT::hs256($k),
         tenantId => 'tenant-a', countryCode => 'NG');

sub error_is { goto &Platform::Test::is_envelope_b_error }

sub get {
    my ($target, %o) = @_;
    return $t->request($o{method} // 'GET', $target,
                       headers => { %h, %{$o{headers} // {}} });
}

### query arguments

my $r = get('/api/v1/trades/process-flows?name=%C3%A9clair');
is($r->{status}, 200, 'name, UTF-8 percent-encoded: 200')
    or diag($r->{content});
is(scalar @{$r->{json}{data} // []}, 1, 'name, UTF-8: the flow found');

for my $case ([ '%FF', 'a lone 0xFF' ], [ '%C3%28', 'a lead byte, then "("' ],
              [ '%C3%C3', 'two lead bytes' ], [ '%C0%80', 'an overlong NUL' ],
              [ '%E0%80%AF', 'an overlong "/"' ],
              [ '%ED%A0%80', 'a UTF-16 surrogate' ],
              [ '%F4%90%80%80', 'past U+10FFFF' ],
              [ 'cocoa%E2%82', 'a sequence cut short' ])
{
    my ($value, $what) = @$case;
    error_is(get("/api/v1/trades/process-flows?name=$value"), 400,
             'Bad request.', 'name must be valid UTF-8.', "name, $what");
}

error_is(get('/api/v1/trades/process-flows?name=cocoa%00export'), 400,
         'Bad request.', 'name must not contain a NUL character.',
         'name with %00: refused, not cut short');

error_is(get('/tms/drivers/available?vehicleType=%C3%28'), 400,
         'Bad request.', 'vehicleType must be valid UTF-8.',
         'vehicleType, not UTF-8');
$r = get('/tms/drivers/available?vehicleType=VAN');
is($r->{status}, 200, 'vehicleType, ASCII: 200') or diag($r->{content});

### "{string}" path captures

error_is(get("/tms/delivery-orders/$order/assign/%C3%28", method => 'PATCH'),
         400, 'Bad request.', 'driverId must be valid UTF-8.',
         'a path capture, not UTF-8');
$r = get("/tms/delivery-orders/$order/assign/x%00y", method => 'PATCH');
is($r->{status}, 400, 'a path capture with %00: 400');
is($t->psql("SELECT status FROM delivery_orders WHERE id = '$order'"),
   'PENDING', 'refused captures changed nothing');

### the request line stays the client's

$r = get('/api/v1/trades/process-flows?name=cocoa+export');
is($r->{status}, 200, '"+" in a query: 200') or diag($r->{content});
is(scalar @{$r->{json}{data} // []}, 1, '"+" is a space: the flow found');

$t->wait_until(sub {
    (Platform::Test::_slurp($t->testdir . '/access.log') // '')
        =~ /name=cocoa\+export/
}, 5);
like(Platform::Test::_slurp($t->testdir . '/access.log') // '',
     qr{^GET /api/v1/trades/process-flows\?name=cocoa\+export HTTP/1\.1$}m,
     'the access log shows the request line as sent');

### a 500 is logged with its request id

$t->psql('ALTER TABLE drivers RENAME TO drivers_gone');
$r = get('/tms/drivers/available', headers => { 'X-Request-Id' => 'r47-500' });
is($r->{status}, 500, 'a statement PostgreSQL cannot run: 500');
is($r->{headers}{'x-request-id'}, 'r47-500', '500: the request id answered');
$t->psql('ALTER TABLE drivers_gone RENAME TO drivers');

like($t->error_log, qr/\[error\].*answered 500.*request_id: "r47-500"/,
     '500: an error line names the request id');

$t->done;
done_testing;
