#!/usr/bin/perl

# Declared inputs under random bytes: query strings (escapes of any byte,
# "+", repeated and differently cased names, huge and signed numbers) and
# path captures (near-miss uuids, escapes, long segments) sent raw to the
# bank transfers, the tax delete and the delivery order; text arguments
# and a "{string}" capture (escapes that are not UTF-8, %00) to the trade
# flows' name, the drivers' vehicleType and the assign's driver id. Every
# answer is a 2xx or a 4xx in the family's envelope, never a 5xx, and no
# worker dies (the harness fails on alerts and sanitizer lines).
# PLATFORM_TEST_SEED repeats a run.

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Platform::Test;
use Platform::JWT;

my $seed = $ENV{PLATFORM_TEST_SEED} // int(rand(2**31));
srand($seed);
diag("PLATFORM_TEST_SEED=$seed");

my $t = Platform::Test->new();
my $k = Platform::JWT::keys($t->testdir . '/keys');

$t->run(<<'EOF');
    server {
        listen 127.0.0.1:%%PORT%%;
        platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;

        location /api/v1/BankTransfers/ { platform_transfers; }
        location /api/v1/InvoiceSetting/ { platform_invoices; }
        location /tms/ { platform_tms; }
        location /api/v1/trades/ { platform_trades; platform_auth bearer; }
    }
EOF

$t->psql(<<'SQL');
INSERT INTO bank_transfers (id, tenant_id, reference, amount, status, date,
                            currency)
SELECT ('f0000000-0000-4000-8000-' || lpad(n::text, 12, '0'))::uuid,
       'tenant-a', 'R-' || n, n * 10.5, 'COMPLETED',
       timestamptz '2024-01-01 00:00:00+00' + n * interval '1 hour', 'NGN'
FROM generate_series(1, 30) AS n;
SQL

my $token = Platform::JWT::sign(
    alg => 'HS256', key => Platform::JWT::secret($k->{hs256}),
    claims => { sub => 'fuzz', tenantId => 'tenant-a',
                exp => int(time) + 3600 });

my @printable = map { chr } grep { $_ != 0x23 && $_ != 0x25 } 0x21 .. 0x7e;

# a piece of a query value: printable bytes, escapes of any byte, numbers
sub piece {
    my $r = rand;
    return sprintf('%%%02X', int rand 256) if $r < 0.2;
    return ('-', '+', '0', '00', '1e5', '0x1A', '9' x (1 + int rand 30),
            '-9223372036854775809', '1.5', 'NaN', 'inf', '')[int rand 12]
        if $r < 0.5;
    return join('', map { $printable[int rand @printable] }
                    1 .. 1 + int rand 12);
}

sub value { join('', map { piece() } 1 .. 1 + int rand 4) }

sub name {
    my @n = qw(PageNumber PageSize pagenumber PAGESIZE TaxSettingId
               taxsettingid x);
    return rand() < 0.9 ? $n[int rand @n] : value();
}

sub query {
    return join('&', map { rand() < 0.1 ? value() : name() . '=' . value() }
                     1 .. int rand 5);
}

sub uuidish {
    my $u = sprintf('%08x-%04x-4%03x-8%03x-%012x', int rand 2**32,
                    int rand 2**16, int rand 2**12, int rand 2**12,
                    int rand 2**32);
    my $r = rand;
    return $u if $r < 0.3;
    return uc $u if $r < 0.4;
    substr($u, int rand length $u, 1) =
        ('g', '-', '%2F', '%00', 'Z')[int rand 5] if $r < 0.8;
    return $r < 0.9 ? $u . value() : value();
}

# text that PostgreSQL would refuse: bytes that are not UTF-8, NULs, cut
# and overlong sequences, among UTF-8 that is fine
sub text {
    return join('', map {
        ('%FF', '%C3%28', '%C3%C3', '%C0%80', '%ED%A0%80', '%F4%90%80%80',
         '%E2%82', '%00', '%C3%A9', '%E2%80%AE', '+', 'cocoa', piece())
        [int rand 13]
    } 1 .. 1 + int rand 5);
}

sub send_raw {
    my ($method, $target) = @_;
    my $raw = $t->raw_request("$method $target HTTP/1.1\r\n"
                              . "Host: localhost\r\n"
                              . "Authorization: Bearer $token\r\n"
                              . "tenantId: tenant-a\r\ncountryCode: NG\r\n"
                              . "Connection: close\r\n\r\n");
    return $t->parse_response($raw);
}

my ($n, $bad, %seen) = (0, 0);

my $order = 'f0000000-0000-4000-8000-000000000001';

for my $i (1 .. 1000) {
    my $which = $i % 5;
    my ($method, $target, $family);

    if ($which == 0) {
        $method = rand() < 0.5 ? 'GET' : 'POST';
        $target = '/api/v1/BankTransfers/all-account?' . query();

    } elsif ($which == 1) {
        $method = 'DELETE';
        $target = '/api/v1/InvoiceSetting/DeleteInvoiceTax?'
                  . (rand() < 0.5 ? 'TaxSettingId=' . uuidish() : query());

    } elsif ($which == 2) {
        $method = 'GET';
        $target = '/tms/delivery-orders/' . uuidish();

    } elsif ($which == 3) {
        $method = 'GET';
        $target = rand() < 0.5
                  ? '/api/v1/trades/process-flows?name=' . text()
                  : '/tms/drivers/available?vehicleType=' . text();

    } else {
        $method = 'PATCH';
        $target = "/tms/delivery-orders/$order/assign/" . text();
    }

    my $r = send_raw($method, $target);
    $n++;

    my $status = $r->{status} // 0;
    $seen{$status}++;

    my $ok = $status >= 200 && $status < 500;

    # nginx itself refuses some request lines before any location: only
    # the module's answers must be JSON
    if ($ok && ($r->{headers}{'content-type'} // '') =~ /json/) {
        $ok = ref $r->{json} eq 'HASH';
    }

    if (!$ok) {
        $bad++;
        diag("$method $target: " . ($status || 'no answer')) if $bad <= 5;
    }
}

is($bad, 0, "$n random requests: none answered 5xx or broken JSON");
ok($seen{200}, "some were served") or diag(explain \%seen);
note(join(", ", map { "$_: $seen{$_}" } sort keys %seen));
ok($seen{400}, 'some were refused as bad requests') or diag(explain \%seen);

# the module still serves normally afterwards
my $r = $t->request('GET', '/api/v1/BankTransfers/all-account?PageSize=5',
                    headers => { Authorization => "Bearer $token" });
is($r->{status}, 200, 'a page after the storm');
is(scalar @{$r->{json}{data} // []}, 5, 'with its five transfers');
is($r->{json}{total}, 30, 'and the total');

$t->done;
done_testing;
