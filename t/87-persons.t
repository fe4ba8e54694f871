#!/usr/bin/perl

# GET /api/v{version}/PersonAccounts/{id}/get: the document of spec 2.6 with
# its JSON types, Envelope A, versions, the id check, tenant isolation,
# French, 405, X-Request-Id.

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
            platform_persons;
            platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;
        }
    }
EOF

my $acct = 'c0000000-0000-4000-8000-000000000001';
my $bare = 'c0000000-0000-4000-8000-000000000002';
my $other = 'c0000000-0000-4000-8000-000000000003';
my $unknown = 'c0000000-0000-4000-8000-000000000009';
my $person = 'e0000000-0000-4000-8000-000000000001';

$t->psql(<<"SQL");
INSERT INTO person_accounts (id, tenant_id, person_id, account_id,
    account_bic, account_type, account_name, currency, available_balance,
    account_limit, status_description, created, nuban_or_iban, purpose,
    comment, status, product_id, client_id)
VALUES ('$acct', 'tenant-a', '$person', 'ACC-100001', 'GTBINGLA',
        'SAVINGS', 'Amaka Nwankwo "Ada"', 'NGN', 250000.50, 1000,
        'Account is active.', '2024-03-04T09:15:00Z', '0123456789',
        'Épargne personnelle', 'first account', 'ACTIVE', 'PRD-SAV-01',
        'CL-100001'),
       ('$other', 'tenant-b', '$person', 'ACC-200001', 'ABCDNGLA',
        'CURRENT', 'Bola Ade', 'NGN', 10, 0, 'Account is active.',
        '2024-05-06T07:08:09Z', '9876543210', '', '', 'ACTIVE', 'PRD-CUR-01',
        'CL-200001');
INSERT INTO person_accounts (id, tenant_id, person_id, available_balance,
                             created)
VALUES ('$bare', 'tenant-a', '$person', -25.75, '2024-01-01T00:00:00Z');
SQL

sub token {
    my ($tenant) = @_;
    return Platform::JWT::hs256($k, tenantId => $tenant // 'tenant-a');
}

sub get {
    my ($id, %o) = @_;
    my %h = (Authorization => 'Bearer ' . token($o{tenant}),
             %{$o{headers} // {}});
    delete $h{Authorization} if $o{anonymous};
    my $v = $o{version} // '1';
    return $t->request($o{method} // 'GET',
                       $o{path} // "/api/v$v/PersonAccounts/$id/get",
                       headers => \%h);
}


sub envelope_error {
    my ($r, $status, $message, $detail, $name) = @_;
    is($r->{status}, $status, "$name: $status");
    is_deeply($r->{json}, {
        succeeded => JSON::PP::false, message => $message,
        errors => [ $detail ], data => undef,
    }, "$name: Envelope A") or diag($r->{content});
}

### the document

my $r = get($acct);
is($r->{status}, 200, 'account found') or diag($r->{content});
is($r->{headers}{'content-type'}, 'application/json; charset=utf-8',
   'content type');
is($r->{headers}{'content-language'}, 'en', 'Content-Language en');
like($r->{headers}{'x-request-id'}, qr/^[0-9a-f]{32}$/, 'X-Request-Id');
is($r->{json}{succeeded}, JSON::PP::true, 'succeeded true');
is($r->{json}{message}, 'Person account retrieved.', 'message');
is_deeply($r->{json}{errors}, [], 'errors []');
is_deeply([ sort keys %{$r->{json}} ],
          [ qw(data errors message succeeded) ], 'envelope members');
is(Platform::Test::loose_json($r->{content}), '',
   'the envelope and document are compact JSON');

my $d = $r->{json}{data};
my %types = map { $_ => Platform::Test::json_type($d->{$_}) } keys %$d;
is_deeply(\%types, {
    id => 'string', personId => 'string', accountId => 'string',
    accountBIC => 'string', accountType => 'string',
    accountName => 'string', currency => 'string',
    availableBalance => 'number', accountLimit => 'number',
    statusDescription => 'string', created => 'string',
    nubanOrIban => 'string', purpose => 'string', comment => 'string',
    status => 'string', productId => 'string', clientId => 'string',
}, 'every field of spec 2.6, with its JSON type');

my %want = (
    id => $acct, personId => $person, accountId => 'ACC-100001',
    accountBIC => 'GTBINGLA', accountType => 'SAVINGS',
    accountName => 'Amaka Nwankwo "Ada"', currency => 'NGN',
    statusDescription => 'Account is active.', nubanOrIban => '0123456789',
    purpose => 'Épargne personnelle', comment => 'first account',
    status => 'ACTIVE', productId => 'PRD-SAV-01', clientId => 'CL-100001',
);
for my $f (sort keys %want) {
    is($d->{$f}, $want{$f}, "$f");
}
cmp_ok($d->{availableBalance}, '==', 250000.5, 'availableBalance');
cmp_ok($d->{accountLimit}, '==', 1000, 'accountLimit');
like($d->{created}, qr/^2024-03-04T09:15:00(?:\.0+)?(?:Z|\+00:00)$/,
     'created: ISO 8601, UTC');
like($r->{content}, qr/"nubanOrIban"\s*:\s*"0123456789"/,
     'nubanOrIban keeps its leading zero (a string)');

$r = get($bare);
is($r->{status}, 200, 'account with default fields');
$d = $r->{json}{data};
is(Platform::Test::json_type($d->{availableBalance}), 'number',
   'negative balance a number');
cmp_ok($d->{availableBalance}, '==', -25.75, 'overdrawn balance');
cmp_ok($d->{accountLimit}, '==', 0, 'limit 0');
for my $f (qw(accountId accountBIC accountType accountName currency
              statusDescription nubanOrIban purpose comment status
              productId clientId))
{
    is($d->{$f}, '', "$f empty: \"\", not null");
}
like($d->{created}, qr/^2024-01-01T00:00:00(?:\.0+)?(?:Z|\+00:00)$/,
     'created');

$r = get($acct, headers => { 'X-Request-Id' => 'req-87.1' });
is($r->{headers}{'x-request-id'}, 'req-87.1', "the client's X-Request-Id");

$r = get($acct, path => "/api/v1/PersonAccounts/$acct/get/");
is($r->{status}, 200, 'trailing slash tolerated');

$r = get($acct, method => 'HEAD');
is($r->{status}, 200, 'HEAD');
is($r->{content}, '', 'HEAD: no body');

### versions

is(get($acct, version => '1.0')->{status}, 200, 'v1.0');
for my $v ('2', '1.1', '10', '1.00', '0') {
    $r = get($acct, version => $v);
    envelope_error($r, 404, 'API version not supported.',
                   'Supported versions: 1, 1.0.', "v$v");
    ok(defined $r->{headers}{'x-request-id'}, "v$v: X-Request-Id");
}

### the id

for my $id ('not-a-uuid', 'c0000000-0000-4000-8000-00000000000',
            'c0000000000040008000000000000001',
            'c0000000-0000-4000-8000-00000000000g',
            "${acct}0", '%27%3Bselect%201')
{
    envelope_error(get($id), 400, 'Invalid person account id.',
                   'The id must be a uuid.', "id $id");
}

# the route is matched and the credentials checked before the id
$r = get('not-a-uuid', anonymous => 1);
is($r->{status}, 401, 'no token and a bad id: 401 first');
is($r->{headers}{'www-authenticate'}, 'Bearer', 'challenge');

### tenant isolation

my $unknown_r = get($unknown);
envelope_error($unknown_r, 404, 'Person account not found.',
               'No person account with this id exists.', 'unknown id');

$r = get($other);
envelope_error($r, 404, 'Person account not found.',
               'No person account with this id exists.',
               "another tenant's account");
is($r->{content}, $unknown_r->{content},
   "another tenant's account: the same body as an unknown id");

$r = get($other, tenant => 'tenant-b');
is($r->{status}, 200, "tenant-b reads its own account");
is($r->{json}{data}{accountName}, 'Bola Ade', "tenant-b's account");

$r = get($acct, tenant => 'tenant-b');
is($r->{status}, 404, "tenant-b cannot read tenant-a's account");

$r = get($acct, headers => { tenantId => 'tenant-b' });
envelope_error($r, 403, 'Access denied.',
               'The tenantId header does not match the credentials.',
               'tenantId header against the token');

is(get($acct, headers => { tenantId => 'tenant-a' })->{status}, 200,
   'tenantId header equal to the token');

### French

my %fr = ('Accept-Language' => 'fr');

$r = get($acct, headers => \%fr);
is($r->{status}, 200, 'fr: 200');
is($r->{headers}{'content-language'}, 'fr', 'fr: Content-Language');
is($r->{json}{message}, 'Compte de personne récupéré.', 'fr: message');
is($r->{json}{data}{accountName}, 'Amaka Nwankwo "Ada"',
   'fr: the data is not translated');
is($r->{json}{data}{statusDescription}, 'Account is active.',
   'fr: nor the status description');

envelope_error(get($unknown, headers => \%fr), 404,
               'Compte de personne introuvable.',
               'Aucun compte de personne ne porte cet identifiant.',
               'fr: unknown id');
envelope_error(get('nope', headers => \%fr), 400,
               'Identifiant de compte de personne invalide.',
               "L'identifiant doit être un uuid.", 'fr: bad id');
envelope_error(get($acct, version => 2, headers => \%fr), 404,
               "Version d'API non prise en charge.",
               'Versions prises en charge : 1, 1.0.', 'fr: version');
envelope_error(get($acct, headers => { %fr, 'tenantId' => 'tenant-b' }), 403,
               'Accès refusé.',
               "L'en-tête tenantId ne correspond pas aux identifiants.",
               'fr: tenant mismatch');
$r = get($acct, anonymous => 1, headers => { 'Accept-Language' => 'fr-CA' });
envelope_error($r, 401, 'Authentification requise.',
               "Un jeton d'accès (Bearer) est requis.", 'fr-CA: no token');
is($r->{headers}{'content-language'}, 'fr', 'fr-CA: Content-Language fr');

$r = get($unknown, headers => { 'Accept-Language' => 'es' });
is($r->{json}{message}, 'Person account not found.', 'es falls back to en');
is($r->{headers}{'content-language'}, 'en', 'es: Content-Language en');

### methods and paths

for my $m ('POST', 'PUT', 'DELETE') {
    $r = get($acct, method => $m, anonymous => 1);
    is($r->{status}, 405, "$m is 405 (before authentication)");
    is($r->{headers}{allow}, 'GET, HEAD', "$m: Allow");
    is($r->{json}{succeeded}, JSON::PP::false, "$m: Envelope A");
    is($r->{json}{message}, 'Method not allowed.', "$m: message");
    ok(exists $r->{json}{data} && !defined $r->{json}{data}, "$m: data null");
    is(ref $r->{json}{errors}, 'ARRAY', "$m: errors");
}

$r = get($acct, path => "/api/v1/PersonAccounts/$acct");
is($r->{status}, 404, 'unknown path');
is($r->{json}{succeeded}, JSON::PP::false, 'unknown path: Envelope A');
ok(exists $r->{json}{data} && !defined $r->{json}{data},
   'unknown path: data null');

$t->done;
done_testing;
