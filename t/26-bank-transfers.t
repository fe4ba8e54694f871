#!/usr/bin/perl

# GET and POST /api/v{version}/BankTransfers/all-account: the paged
# Envelope A, every field of spec 2.4 with its JSON type, compact JSON,
# PageNumber and PageSize, order (newest date first, ties by id), totals,
# tenant isolation, one statement per page, French, versions, 405.

use strict;
use warnings;
use utf8;

use lib 't/lib';
use Test::More;
use Platform::Test;
use Platform::JWT;

my $t = Platform::Test->new();
my $k = Platform::JWT::keys($t->testdir . '/keys');

$t->run(<<'EOF');
    server {
        listen 127.0.0.1:%%PORT%%;
        location /api/ {
            platform_transfers;
            platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;
        }
        location = /metrics { platform_metrics; }
    }
EOF

# tenant-a: 25 transfers. Transfer n (1..25) is dated 2024-06-30 12:00 UTC
# minus n days, except 6, 7 and 8, dated like 5 and inserted in reverse id
# order, and 20, dated like 19: the order is by date, then id.
my @a;
for my $n (1 .. 25) {
    my $days = $n >= 6 && $n <= 8 ? 5 : $n == 20 ? 19 : $n;
    push @a, {
        n => $n,
        id => sprintf('e0000000-0000-4000-8000-%012d', $n),
        days => $days,
    };
}
my $values = join(",\n", map {
    "('$_->{id}', 'tenant-a', 'REF-$_->{n}', $_->{n}.5 * 100,"
    . " 'Agro Ltd', '0123456789', 'GTBank',"
    . " 'Beneficiary $_->{n}', '30000000$_->{n}', 'Zenith Bank',"
    . " 'COMPLETED', timestamptz '2024-06-30 12:00:00+00'"
    . " - interval '$_->{days} days', 'pay\@agro.example', 'NGN')"
} reverse @a);

my @b = map { sprintf('e0000000-0000-4000-8000-%012d', 100 + $_) } 1 .. 3;

$t->psql(<<"SQL");
INSERT INTO bank_transfers (id, tenant_id, reference, amount, account_name,
    account_number, bank_name, beneficiary_account_name,
    beneficiary_account_number, beneficiary_bank_name, status, date, email,
    currency)
VALUES $values;
-- tenant-b: newer than every transfer of tenant-a; one has strings with
-- the separators and spaces that a compact body has only inside strings
INSERT INTO bank_transfers (id, tenant_id, reference, amount, account_name,
    account_number, bank_name, beneficiary_account_name,
    beneficiary_account_number, beneficiary_bank_name, status, date, email,
    currency)
VALUES ('$b[0]', 'tenant-b', 'INV 7, "Q2": paid', 1234567.89,
        'Bola, Ade & Co: {ops}', '0012345678', 'First Bank',
        'Çé Ltd [x]', '0000000001', 'Access Bank', 'PENDING',
        '2025-01-02 03:04:05.678+00', 'ops\@b.example', 'USD'),
       ('$b[1]', 'tenant-b', 'B-2', 0, '', '', '', '', '', '', '',
        '2025-01-01 00:00:00+00', '', ''),
       ('$b[2]', 'tenant-b', 'B-3', -15.25, 'x', 'y', 'z', 'x', 'y', 'z',
        'FAILED', '2024-12-31 23:59:59+00', 'e', 'NGN');
SQL

my @order = map { $_->{id} }
            sort { $a->{days} <=> $b->{days} || $a->{id} cmp $b->{id} } @a;

sub token {
    my ($tenant) = @_;
    return Platform::JWT::hs256($k, tenantId => $tenant // 'tenant-a');
}

sub list {
    my (%o) = @_;
    my %h = (Authorization => 'Bearer ' . token($o{tenant}),
             %{$o{headers} // {}});
    delete $h{Authorization} if $o{anonymous};
    my $v = $o{version} // '1';
    my $path = "/api/v$v/BankTransfers/all-account"
               . (defined $o{query} ? "?$o{query}" : '');
    return $t->request($o{method} // 'GET', $path, headers => \%h,
                       defined $o{body} ? (body => $o{body}) : ());
}


sub ids { [ map { $_->{id} } @{$_[0]{json}{data} // []} ] }

sub page_ok {
    my ($r, $number, $size, $total, $ids, $name) = @_;
    is($r->{status}, 200, "$name: 200") or diag($r->{content});
    is_deeply([ sort keys %{$r->{json} // {}} ],
              [ qw(data errors message pageNumber pageSize succeeded total) ],
              "$name: paged envelope members");
    is($r->{json}{succeeded}, JSON::PP::true, "$name: succeeded");
    is_deeply($r->{json}{errors}, [], "$name: errors []");
    is($r->{json}{pageNumber}, $number, "$name: pageNumber");
    is($r->{json}{pageSize}, $size, "$name: pageSize");
    is($r->{json}{total}, $total, "$name: total");
    is(Platform::Test::json_type($r->{json}{$_}), 'number',
       "$name: $_ a number")
        for qw(pageNumber pageSize total);
    is_deeply(ids($r), $ids, "$name: the transfers, in order");
}

sub envelope_error {
    my ($r, $status, $message, $detail, $name) = @_;
    is($r->{status}, $status, "$name: $status");
    my $want = {
        succeeded => JSON::PP::false, message => $message,
        errors => [ $detail ], data => undef,
    };
    is_deeply($r->{json}, $want, "$name: Envelope A") or diag($r->{content});
}

my %fr = ('Accept-Language' => 'fr');

### defaults, pages, order, total

my $r = list();
page_ok($r, 1, 10, 25, [ @order[0 .. 9] ], 'defaults');
is($r->{headers}{'content-type'}, 'application/json; charset=utf-8',
   'content type');
is($r->{headers}{'content-language'}, 'en', 'Content-Language en');
like($r->{headers}{'x-request-id'}, qr/^[0-9a-f]{32}$/, 'X-Request-Id');
is($r->{json}{message}, 'Bank transfers retrieved.', 'message');
is(Platform::Test::loose_json($r->{content}), '', 'the body is compact');

# the ties: 5 to 8 share a date, inserted in reverse order
is_deeply([ @order[4 .. 7] ],
          [ map { sprintf('e0000000-0000-4000-8000-%012d', $_) } 5 .. 8 ],
          'the expected order breaks date ties by id');

page_ok(list(query => 'PageNumber=2&PageSize=10'), 2, 10, 25,
        [ @order[10 .. 19] ], 'page 2');
page_ok(list(query => 'PageNumber=3&PageSize=10'), 3, 10, 25,
        [ @order[20 .. 24] ], 'the last page, partial');
page_ok(list(query => 'PageNumber=4&PageSize=10'), 4, 10, 25, [],
        'the page past the end');
like(list(query => 'PageNumber=4')->{content}, qr/"data":\[\]/,
     'past the end: "data":[]');
page_ok(list(query => 'PageNumber=2147483647&PageSize=100'),
        2147483647, 100, 25, [], 'the last page number');
page_ok(list(query => 'PageSize=100'), 1, 100, 25, \@order,
        'PageSize 100: everything');
page_ok(list(query => 'PageSize=1&PageNumber=25'), 25, 1, 25,
        [ $order[24] ], 'PageSize 1, the last one');
page_ok(list(query => 'PageSize=7&PageNumber=2'), 2, 7, 25,
        [ @order[7 .. 13] ], 'PageSize 7, page 2');
page_ok(list(query => 'PageNumber=2'), 2, 10, 25, [ @order[10 .. 19] ],
        'PageSize defaults to 10');
page_ok(list(query => 'PageSize=5'), 1, 5, 25, [ @order[0 .. 4] ],
        'PageNumber defaults to 1');
page_ok(list(query => 'PageSize=5&Other=x&pagesize=99'), 1, 5, 25,
        [ @order[0 .. 4] ], 'other arguments are ignored');

### the items: every field of spec 2.4

$r = list(query => 'PageSize=1');
my $d = $r->{json}{data}[0];
my %types = map { $_ => Platform::Test::json_type($d->{$_}) } keys %$d;
is_deeply(\%types, {
    id => 'string', reference => 'string', amount => 'number',
    account => 'HASH', beneficiary => 'HASH', status => 'string',
    date => 'string', tenantId => 'string', email => 'string',
    currency => 'string',
}, 'every field of spec 2.4, with its JSON type');
is_deeply($d->{account}, { accountName => 'Agro Ltd',
                           accountNumber => '0123456789',
                           bankName => 'GTBank' }, 'account');
is_deeply($d->{beneficiary}, { accountName => 'Beneficiary 1',
                               accountNumber => '300000001',
                               bankName => 'Zenith Bank' }, 'beneficiary');
is($d->{id}, $order[0], 'id');
is($d->{reference}, 'REF-1', 'reference');
cmp_ok($d->{amount}, '==', 150, 'amount');
is($d->{status}, 'COMPLETED', 'status');
like($d->{date}, qr/^2024-06-29T12:00:00(?:\.0+)?(?:Z|\+00:00)$/,
     'date: ISO 8601, UTC');
is($d->{tenantId}, 'tenant-a', 'tenantId: the tenant, as text');
is($d->{email}, 'pay@agro.example', 'email');
is($d->{currency}, 'NGN', 'currency');

### tenant isolation

$r = list(tenant => 'tenant-b');
page_ok($r, 1, 10, 3, \@b, "tenant-b: its own three, not tenant-a's");
is(Platform::Test::loose_json($r->{content}), '',
   'compact, with separators and spaces inside strings');
$d = $r->{json}{data}[0];
is($d->{reference}, 'INV 7, "Q2": paid', 'a reference with quotes');
is($d->{account}{accountName}, 'Bola, Ade & Co: {ops}', 'an account name');
is($d->{beneficiary}{accountName}, 'Çé Ltd [x]', 'UTF-8 text');
cmp_ok($d->{amount}, '==', 1234567.89, 'a large amount');
like($r->{content}, qr/"amount":1234567\.89[,}]/, 'the amount as written');
like($d->{date}, qr/^2025-01-02T03:04:05\.678(?:Z|\+00:00)$/,
     'a date with milliseconds');
is($r->{json}{data}[1]{status}, '', 'an empty status: ""');
cmp_ok($r->{json}{data}[1]{amount}, '==', 0, 'amount 0');
cmp_ok($r->{json}{data}[2]{amount}, '==', -15.25, 'a negative amount');

my %a_ids = map { $_ => 1 } @order;
ok(!grep({ $a_ids{$_} } @{ids($r)}), "tenant-b sees none of tenant-a's");
$r = list(query => 'PageSize=100');
ok(!grep({ $_ =~ /-0000000001\d\d$/ } @{ids($r)}),
   "tenant-a sees none of tenant-b's (newer) transfers");

page_ok(list(tenant => 'tenant-c'), 1, 10, 0, [], 'a tenant with none');
page_ok(list(tenant => 'tenant-c', query => 'PageNumber=3'), 3, 10, 0, [],
        'a tenant with none, page 3');

$r = list(headers => { tenantId => 'tenant-b' });
envelope_error($r, 403, 'Access denied.',
               'The tenantId header does not match the credentials.',
               'tenantId header against the token');

### POST: the same, no body read

$r = list(method => 'POST', query => 'PageNumber=2&PageSize=10');
page_ok($r, 2, 10, 25, [ @order[10 .. 19] ], 'POST page 2');
page_ok(list(method => 'POST'), 1, 10, 25, [ @order[0 .. 9] ],
        'POST defaults');
page_ok(list(method => 'POST', query => 'PageSize=3',
             body => '{"PageSize": 50, "PageNumber": 9}',
             headers => { 'Content-Type' => 'application/json' }),
        1, 3, 25, [ @order[0 .. 2] ], 'POST: a JSON body is ignored');
page_ok(list(method => 'POST', query => 'PageSize=3', body => 'not json',
             headers => { 'Content-Type' => 'application/xml' }),
        1, 3, 25, [ @order[0 .. 2] ],
        'POST: a body of another type is ignored');

### PageNumber and PageSize

my %why = (
    small => 'must be at least 1.',
    int => 'must be an integer.',
);
for my $case (
    [ PageNumber => '0', 'small' ], [ PageNumber => '-1', 'small' ],
    [ PageNumber => '-0', 'small' ],
    [ PageNumber => '-99999999999999999', 'small' ],
    [ PageNumber => 'abc', 'int' ], [ PageNumber => '1.5', 'int' ],
    [ PageNumber => '1e3', 'int' ], [ PageNumber => '%2B1', 'int' ],
    [ PageNumber => '2147483648', 'must be at most 2147483647.' ],
    [ PageNumber => '99999999999999999999', 'int' ],
    [ PageNumber => '-99999999999999999999', 'int' ],
    [ PageNumber => '1%00', 'int' ], [ PageNumber => '%201', 'int' ],
    [ PageNumber => '-', 'int' ],
    [ PageSize => '0', 'small' ], [ PageSize => '-1', 'small' ],
    [ PageSize => '101', 'must be at most 100.' ],
    [ PageSize => '1000000', 'must be at most 100.' ],
    [ PageSize => 'abc', 'int' ], [ PageSize => '10.0', 'int' ],
    [ PageSize => '99999999999999999999', 'int' ],
    [ PageSize => '18446744073709551617', 'int' ],
    [ PageSize => '0x10', 'int' ],
)
{
    my ($name, $value, $why) = @$case;
    my $detail = "$name " . ($why{$why} // $why);
    for my $m ('GET', 'POST') {
        envelope_error(list(method => $m, query => "$name=$value"), 400,
                       'Bad request.', $detail, "$m $name=$value");
    }
}

envelope_error(list(query => 'PageNumber=1&PageSize=0'), 400, 'Bad request.',
               'PageSize must be at least 1.',
               'PageSize named, not PageNumber');

# an empty value is as if absent: the default
page_ok(list(query => 'PageNumber=&PageSize='), 1, 10, 25,
        [ @order[0 .. 9] ], 'empty values: the defaults');
page_ok(list(query => 'PageNumber=02&PageSize=007'), 2, 7, 25,
        [ @order[7 .. 13] ], 'leading zeros');

# the credentials are checked before the query
$r = list(query => 'PageNumber=0', anonymous => 1);
envelope_error($r, 401, 'Authentication required.',
               'A bearer token is required.', 'no token and a bad page');
is($r->{headers}{'www-authenticate'}, 'Bearer', 'challenge');

for my $m ('GET', 'POST') {
    $r = list(method => $m, anonymous => 1);
    envelope_error($r, 401, 'Authentication required.',
                   'A bearer token is required.', "$m: no token");
}

### one statement per page

sub statements {
    my $m = $t->request('GET', '/metrics')->{content} // '';
    my $n = 0;
    $n += $1
        while $m =~ /^platform_pg_statements_total(?:\{[^}]*\})? (\d+)$/mg;
    return $n;
}

list();    # the statement is prepared on the connection by now
my $before = statements();
is(list(query => 'PageNumber=2')->{status}, 200, 'a page');
is(statements() - $before, 1, 'a page and its total: one statement');

### versions

page_ok(list(version => '1.0'), 1, 10, 25, [ @order[0 .. 9] ], 'v1.0');
page_ok(list(version => '1.0', method => 'POST'), 1, 10, 25,
        [ @order[0 .. 9] ], 'POST v1.0');
for my $v ('2', '1.1', '0') {
    envelope_error(list(version => $v), 404, 'API version not supported.',
                   'Supported versions: 1, 1.0.', "v$v");
}

### French

$r = list(headers => \%fr, query => 'PageSize=2');
page_ok($r, 1, 2, 25, [ @order[0 .. 1] ], 'fr');
is($r->{json}{message}, 'Virements bancaires récupérés.', 'fr: message');
is($r->{headers}{'content-language'}, 'fr', 'fr: Content-Language');
is($r->{json}{data}[0]{status}, 'COMPLETED', 'fr: data not translated');

envelope_error(list(headers => \%fr, query => 'PageNumber=0'), 400,
               'Requête invalide.', 'PageNumber doit valoir au moins 1.',
               'fr: PageNumber=0');
envelope_error(list(headers => \%fr, query => 'PageSize=101'), 400,
               'Requête invalide.', 'PageSize doit valoir au plus 100.',
               'fr: PageSize=101');
envelope_error(list(headers => \%fr, query => 'PageSize=x'), 400,
               'Requête invalide.', 'PageSize doit être un entier.',
               'fr: PageSize=x');
envelope_error(list(version => 2, headers => \%fr), 404,
               "Version d'API non prise en charge.",
               'Versions prises en charge : 1, 1.0.', 'fr: version');
envelope_error(list(anonymous => 1, headers => \%fr), 401,
               'Authentification requise.',
               "Un jeton d'accès (Bearer) est requis.", 'fr: no token');

$r = list(headers => { 'Accept-Language' => 'es' });
is($r->{json}{message}, 'Bank transfers retrieved.', 'es falls back to en');

### methods and paths

$r = list(method => 'HEAD');
is($r->{status}, 200, 'HEAD');
is($r->{content}, '', 'HEAD: no body');

for my $m ('PUT', 'DELETE', 'PATCH') {
    $r = list(method => $m, anonymous => 1);
    is($r->{status}, 405, "$m is 405 (before authentication)");
    is($r->{headers}{allow}, 'GET, HEAD, POST', "$m: Allow");
    envelope_error($r, 405, 'Method not allowed.',
                   'This endpoint accepts GET, HEAD, POST.', $m);
}

$r = $t->request('GET', '/api/v1/BankTransfers/all-accounts',
                 headers => { Authorization => 'Bearer ' . token() });
envelope_error($r, 404, 'Resource not found.', 'No such endpoint.',
               'unknown path');

$t->done;
done_testing;
