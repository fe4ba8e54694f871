#!/usr/bin/perl

# Body errors that nginx itself detects come back in the family's JSON
# envelope, not nginx's HTML page: a body over client_max_body_size is
# 413, a malformed chunked body is 400.

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Platform::Test;

my $t = Platform::Test->new();

my $tms = <<'EOF';
    server {
        listen 127.0.0.1:%%PORT%%;

        location /tms/ {
            platform_tms;
            platform_auth tenant;
            client_max_body_size 1k;
        }
    }
EOF

# an Envelope A family (the tenantId header names the tenant)
my $transfers = <<'EOF';
    server {
        listen 127.0.0.1:%%PORT_2%%;

        location /api/ {
            platform_transfers;
            platform_auth tenant;
            client_max_body_size 1k;
        }
    }
EOF

$t->run($tms . $transfers);

my $order = 'a0000000-0000-4000-8000-000000000033';
my $vehicle = 'b0000000-0000-4000-8000-000000000033';

$t->psql(<<"SQL");
INSERT INTO delivery_orders (id, tenant_id, country_code, order_number,
                             status, pickup_address, dropoff_address,
                             created_at, updated_at)
VALUES ('$order', 'tenant-a', 'NG', 'DO-3301', 'PENDING', '{}', '{}',
        now(), now());
SQL

my $tenancy = "tenantId: tenant-a\r\ncountryCode: NG\r\n";

# an error in the envelope: JSON of the right content type, and the status
# inside it (Envelope B: statusCode; Envelope A: succeeded false)
sub envelope {
    my ($r, $status, $name) = @_;

    is($r->{status}, $status, "$name: $status");
    like($r->{headers}{'content-type'} // '', qr{^application/json\b},
         "$name: JSON, not nginx's page");
    ok(ref $r->{json} eq 'HASH', "$name: a JSON object") or return;

    if (exists $r->{json}{statusCode}) {
        is($r->{json}{statusCode}, $status, "$name: Envelope B statusCode");
        is($r->{json}{status}, JSON::PP::false, "$name: status false");

    } else {
        is($r->{json}{succeeded}, JSON::PP::false,
           "$name: Envelope A succeeded false");
    }

    ok(ref $r->{json}{errors} eq 'ARRAY' && @{$r->{json}{errors}},
       "$name: errors");
}

sub raw {
    my ($head, $body, %opts) = @_;
    my $raw = $t->raw_request($head . "Connection: close\r\n\r\n" . $body,
                              %opts);
    return $t->parse_response($raw);
}

sub too_large {
    my ($method, $path, $extra, %opts) = @_;
    my $body = '{"a":"' . ('x' x 2000) . '"}';
    return raw("$method $path HTTP/1.1\r\nHost: localhost\r\n$extra"
               . "Content-Type: application/json\r\n"
               . 'Content-Length: ' . length($body) . "\r\n",
               $body, %opts);
}

sub bad_chunked {
    my ($method, $path, $extra, %opts) = @_;
    return raw("$method $path HTTP/1.1\r\nHost: localhost\r\n$extra"
               . "Content-Type: application/json\r\n"
               . "Transfer-Encoding: chunked\r\n",
               "zz\r\n{}\r\n0\r\n\r\n", %opts);
}

# the location works for a plain GET

my $r = $t->request('GET', "/tms/delivery-orders/$order",
                    headers => { tenantId => 'tenant-a', countryCode => 'NG' });
is($r->{status}, 200, 'delivery order');

# a body over client_max_body_size: nginx refuses it by Content-Length
# before any handler runs

envelope(too_large('PUT', "/tms/vehicles/$vehicle", $tenancy), 413,
         'PUT over client_max_body_size');
envelope(too_large('GET', "/tms/delivery-orders/$order", $tenancy), 413,
         'GET with a body over client_max_body_size');

# a malformed chunked body: nginx's chunked parser refuses it

envelope(bad_chunked('GET', "/tms/delivery-orders/$order", $tenancy), 400,
         'GET with a malformed chunked body');

# a route that takes no body: the answer may be about the route (404, 405)
# or about the body (400), but it is the envelope
$r = bad_chunked('PUT', "/tms/vehicles/$vehicle", $tenancy);
ok($r->{status} =~ /^(400|404|405)$/, "PUT, malformed chunked: $r->{status}");
envelope($r, $r->{status}, 'PUT with a malformed chunked body');

# a chunk longer than it says
$r = raw("GET /tms/delivery-orders/$order HTTP/1.1\r\nHost: localhost\r\n"
         . $tenancy . "Transfer-Encoding: chunked\r\n",
         "2\r\n{}xyz\r\n0\r\n\r\n");
envelope($r, 400, 'chunk data longer than its size');

{
    my $path = '/api/v1/BankTransfers/all-account';
    my %o = (port => $t->port(2));
    my $auth = "tenantId: tenant-a\r\ncountryCode: NG\r\n";

    envelope(too_large('POST', $path, $auth, %o), 413,
             'transfers: POST over client_max_body_size');
    envelope(bad_chunked('POST', $path, $auth, %o), 400,
             'transfers: POST with a malformed chunked body');
}

$t->done;
done_testing;
