#!/usr/bin/perl

# PUT /api/v{version}/Counterparties/accounts and POST
# /api/v{version}/Counterparties/groups: Envelope A in English and French,
# the merchant's scope (tenant and merchant: another's rows are 404 or
# 400), the token's merchantId (403 before the body), partial updates,
# null clearing, IBAN and BIC vectors, the body checks of each operation,
# group names trimmed and unique case-insensitively, members checked and
# written with their group or not at all, random bodies that never get a
# 5xx, and concurrent updates of one account that never mix.

use strict;
use warnings;
use utf8;

use lib 't/lib';
use Encode qw(decode_utf8);
use Test::More;
use Platform::Test;
use Platform::JWT;

my $t = Platform::Test->new();
my $k = Platform::JWT::keys($t->testdir . '/keys');

$t->run(<<'EOF');
    # the concurrent updates below wait 0.3 s on a row the test holds: with
    # the queue behind it, that must not reach the lock timeout (503)
    platform_pg_lock_timeout 10s;

    server {
        listen 127.0.0.1:%%PORT%%;
        location ~ ^/api/v[^/]+/Counterparties/ {
            platform_counterparties;
            platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;
        }
        location = /metrics { platform_metrics; }
    }
EOF

# tenant-a: merchant M1 with counterparties C1..C4 (accounts A1, A2 of C1
# and C2), merchant M2 with C5 (account A5). tenant-b: a merchant of the
# same id as M1, with C6 (account A6): the tenant scopes it apart.
my $M1 = '91000000-0000-4000-8000-000000000001';
my $M2 = '91000000-0000-4000-8000-000000000002';
my %C = map { $_ => sprintf('81000000-0000-4000-8000-%012d', $_) } 1 .. 9;
$C{7} = '81000000-0000-4000-8000-0000000000ab';    # hex letters
my %A = map { $_ => sprintf('82000000-0000-4000-8000-%012d', $_) } 1 .. 9;
my $unknown = '82000000-0000-4000-8000-000000000099';

$t->psql(<<"SQL");
INSERT INTO counterparties (id, tenant_id, merchant_id, name) VALUES
    ('$C{1}', 'tenant-a', '$M1', 'Kano Grain Hub'),
    ('$C{2}', 'tenant-a', '$M1', 'Ibadan Farmers Coop'),
    ('$C{3}', 'tenant-a', '$M1', 'Kaduna Storage'),
    ('$C{4}', 'tenant-a', '$M1', 'Enugu Depot'),
    ('$C{7}', 'tenant-a', '$M1', 'Jos Potato Farm'),
    ('$C{9}', 'tenant-a', '$M1', 'Vanishing Ltd'),
    ('$C{5}', 'tenant-a', '$M2', 'Other Merchant Supplier'),
    ('$C{6}', 'tenant-b', '$M1', 'Other Tenant Supplier');
INSERT INTO counterparty_accounts (id, tenant_id, counterparty_id, account,
    counterparty_type, account_type, bank_code, bank_name, account_number,
    account_name, iban, swift_code, bank_address, routing_number)
VALUES
    ('$A{1}', 'tenant-a', '$C{1}', 1, 2, 1, '058', 'GTBank', '0123456789',
     'Kano Grain Hub', 'DE89370400440532013000', 'DEUTDEFF',
     'Plot 635 Akin Adesola Street, Lagos', '058152036'),
    ('$A{2}', 'tenant-a', '$C{2}', 2, 1, 2, '057', 'Zenith Bank',
     '1012345678', 'Ibadan Farmers Coop', NULL, NULL, NULL, NULL),
    ('$A{5}', 'tenant-a', '$C{5}', 1, 1, 1, '011', 'First Bank',
     '3012345678', 'Other Merchant Supplier', '', '', '', ''),
    ('$A{6}', 'tenant-b', '$C{6}', 1, 1, 1, '033', 'UBA', '2012345678',
     'Other Tenant Supplier', '', '', '', '');
SQL

sub token {
    my (%claims) = @_;
    my %c = (tenantId => 'tenant-a', merchantId => $M1, %claims);
    delete $c{$_} for grep { !defined $c{$_} } keys %c;
    return Platform::JWT::hs256($k, %c);
}

my $json = JSON::PP->new->canonical->utf8;

# call(METHOD, WHAT, BODY, %o): BODY a Perl structure (sent as JSON) or,
# with raw => 1, bytes
sub call {
    my ($method, $what, $body, %o) = @_;
    my %h = (Authorization => 'Bearer ' . ($o{token} // token()),
             'Content-Type' => 'application/json',
             %{$o{headers} // {}});
    delete $h{Authorization} if $o{anonymous};
    my $v = $o{version} // '1';
    return $t->request($method, "/api/v$v/Counterparties/$what",
                       headers => \%h,
                       body => $o{raw} ? $body : $json->encode($body));
}

sub put { call('PUT', 'accounts', @_) }
sub post { call('POST', 'groups', @_) }

sub envelope_error {
    my ($r, $status, $message, $detail, $name) = @_;
    is($r->{status}, $status, "$name: $status");
    my $want = {
        succeeded => JSON::PP::false, message => $message,
        errors => [ $detail ], data => undef,
    };
    is_deeply($r->{json}, $want, "$name: Envelope A") or diag($r->{content});
}

sub bad {
    my ($r, $detail, $name) = @_;
    envelope_error($r, 400, 'Bad request.', $detail, $name);
}

sub bad_fr {
    my ($r, $detail, $name) = @_;
    envelope_error($r, 400, 'Requête invalide.', $detail, $name);
}

sub ok_data {
    my ($r, $message, $name) = @_;
    is($r->{status}, 200, "$name: 200") or diag($r->{content});
    is($r->{json}{succeeded}, JSON::PP::true, "$name: succeeded");
    is($r->{json}{message}, $message, "$name: message");
    is_deeply($r->{json}{errors}, [], "$name: errors []");
    return $r->{json}{data};
}

# the stored account, as the answer's data should be
sub stored {
    my ($id) = @_;
    my $row = $t->psql(<<"SQL");
SELECT row_to_json(x) FROM (SELECT a.id, a.account,
    a.counterparty_type AS "counterpartyType",
    a.account_type AS "accountType", a.bank_code AS "bankCode",
    a.bank_name AS "bankName", a.account_number AS "accountNumber",
    a.account_name AS "accountName", a.iban, a.swift_code AS "swiftCode",
    a.bank_address AS "bankAddress", a.routing_number AS "routingNumber",
    c.merchant_id AS "merchantId", a.counterparty_id AS "counterpartyId"
  FROM counterparty_accounts a JOIN counterparties c
    ON c.id = a.counterparty_id WHERE a.id = '$id') x
SQL
    return JSON::PP->new->utf8->decode($row);
}

my %fr = ('Accept-Language' => 'fr');
my $updated = 'Counterparty bank account updated.';
my $updated_fr = 'Compte bancaire de la contrepartie mis à jour.';
my @fields = qw(id account counterpartyType accountType bankCode bankName
                accountNumber accountName iban swiftCode bankAddress
                routingNumber merchantId counterpartyId);

### PUT accounts: a whole update

my %set1 = (
    account => 2, counterpartyType => 1, accountType => 3,
    bankCode => '044', bankName => 'Access Bank',
    accountNumber => '0690000031', accountName => 'Kano Grain Hub Ltd',
    iban => 'GB29NWBK60161331926819', swiftCode => 'NWBKGB2L',
    bankAddress => '250 Bishopsgate, London', routingNumber => '044150149',
);

my $r = put({ id => $A{1}, %set1 });
my $d = ok_data($r, $updated, 'a whole update');
is_deeply($d, { id => $A{1}, %set1, merchantId => $M1,
                counterpartyId => $C{1} }, 'data: the account as sent');
is_deeply([ sort keys %$d ], [ sort @fields ], 'data: every field');
is_deeply($d, stored($A{1}), 'data: the row as stored');
is(Platform::Test::json_type($d->{$_}), 'number', "$_ is a JSON number")
    for qw(account counterpartyType accountType);
is(Platform::Test::json_type($d->{$_}), 'string', "$_ is a JSON string")
    for qw(id bankCode accountNumber routingNumber merchantId);
is(Platform::Test::loose_json($r->{content}), '', 'the body is compact');
is($r->{headers}{'content-type'}, 'application/json; charset=utf-8',
   'content type');
is($r->{headers}{'content-language'}, 'en', 'Content-Language en');
like($r->{headers}{'x-request-id'}, qr/^[0-9a-f]{32}$/, 'X-Request-Id');

### partial updates, null, ""

$r = put({ id => $A{1}, bankName => 'Access Bank Plc', accountType => 2 });
$d = ok_data($r, $updated, 'a partial update');
is_deeply($d, { id => $A{1}, %set1, bankName => 'Access Bank Plc',
                accountType => 2, merchantId => $M1,
                counterpartyId => $C{1} },
          'absent fields keep their values');
is_deeply($d, stored($A{1}), 'partial: the row as stored');

$r = put({ id => $A{1} });
$d = ok_data($r, $updated, 'only the id');
is_deeply($d, { id => $A{1}, %set1, bankName => 'Access Bank Plc',
                accountType => 2, merchantId => $M1,
                counterpartyId => $C{1} }, 'only the id: nothing changes');

$r = put({ id => $A{1}, bankCode => undef, iban => undef,
           swiftCode => undef, routingNumber => undef });
$d = ok_data($r, $updated, 'null clears');
is($d->{$_}, undef, "$_ null: cleared") for qw(bankCode iban swiftCode
                                              routingNumber);
like($r->{content}, qr/"bankCode":null,/, 'a cleared string is null');
is($d->{bankName}, 'Access Bank Plc', 'the others are kept');
is($t->psql("SELECT count(*) FROM counterparty_accounts WHERE id = '$A{1}'"
            . " AND bank_code IS NULL AND iban IS NULL"
            . " AND swift_code IS NULL AND routing_number IS NULL"), 1,
   'null: NULL in the row');

$r = put({ id => $A{1}, iban => '', swiftCode => '', bankName => '' });
$d = ok_data($r, $updated, '"" is no value');
is($d->{$_}, '', "$_ \"\" is stored as \"\"") for qw(iban swiftCode bankName);

$r = put({ id => $A{1}, bankName => "Banque d'Épargne \"Ü\" 銀行" });
$d = ok_data($r, $updated, 'UTF-8 and quotes');
is($d->{bankName}, "Banque d'Épargne \"Ü\" 銀行", 'UTF-8 text as sent');
is(decode_utf8($t->psql("SELECT bank_name FROM counterparty_accounts"
                       . " WHERE id = '$A{1}'")),
   "Banque d'Épargne \"Ü\" 銀行", 'UTF-8 stored');

# the id in upper case names the same account
$r = put({ id => uc $A{1}, accountName => 'Upper' });
$d = ok_data($r, $updated, 'the id in upper case');
is($d->{id}, $A{1}, 'the id, canonical');

# unknown fields are ignored, the second field set's among them
$r = put({ id => $A{2}, branchCode => 'X', countryCode => 'NG',
           currencyCode => 'NGN', accountHolderName => 'Y',
           merchantId => $M2, counterpartyId => $C{5} });
$d = ok_data($r, $updated, 'unknown fields');
is_deeply($d, stored($A{2}), 'unknown fields: nothing changed');
is($d->{merchantId}, $M1, 'merchantId comes from the token');
is($d->{counterpartyId}, $C{2}, 'counterpartyId is not changed by a body');

$r = put({ id => $A{1}, account => 1 }, version => '1.0');
ok_data($r, $updated, 'v1.0');

$r = put({ id => $A{2}, bankName => 'Zenith' }, headers => \%fr);
$d = ok_data($r, $updated_fr, 'fr');
is($r->{headers}{'content-language'}, 'fr', 'fr: Content-Language');
is($d->{bankName}, 'Zenith', 'fr: data as stored');

### 404: unknown, another merchant's, another tenant's

my $a5 = stored($A{5});
my $a6 = stored($A{6});
for my $case ([ $unknown, 'an unknown id' ],
              [ $A{5}, "another merchant's account" ],
              [ $A{6}, "another tenant's account" ])
{
    my ($id, $name) = @$case;
    envelope_error(put({ id => $id, bankName => 'Hijacked' }), 404,
                   'Counterparty bank account not found.',
                   "No bank account of the merchant's counterparties has"
                   . ' this id.', $name);
    envelope_error(put({ id => $id, bankName => 'Hijacked' },
                       headers => \%fr), 404,
                   'Compte bancaire de contrepartie introuvable.',
                   'Aucun compte bancaire des contreparties du marchand ne'
                   . ' porte cet identifiant.', "fr: $name");
}
is_deeply(stored($A{5}), $a5, "another merchant's account is unchanged");
is_deeply(stored($A{6}), $a6, "another tenant's account is unchanged");

# each is reachable by its own merchant and tenant
$r = put({ id => $A{5}, bankName => 'First Bank Plc' },
         token => token(merchantId => $M2));
is(ok_data($r, $updated, 'M2 updates its own')->{merchantId}, $M2,
   'M2: merchantId');
$r = put({ id => $A{6}, bankName => 'UBA Plc' },
         token => token(tenantId => 'tenant-b'));
is(ok_data($r, $updated, 'tenant-b updates its own')->{bankName},
   'UBA Plc', 'tenant-b: data');
envelope_error(put({ id => $A{1} }, token => token(tenantId => 'tenant-b')),
               404, 'Counterparty bank account not found.',
               "No bank account of the merchant's counterparties has this"
               . ' id.', "the same merchant id in another tenant: 404");
envelope_error(put({ id => $A{1} }, token => token(merchantId => 'x')),
               404, 'Counterparty bank account not found.',
               "No bank account of the merchant's counterparties has this"
               . ' id.', 'a merchantId that is not a uuid: 404');

### 401, 403 (before the body), 415

for my $op (\&put, \&post) {
    my $what = $op == \&put ? 'accounts' : 'groups';

    $r = $op->({ id => $A{1}, name => 'x' }, anonymous => 1);
    envelope_error($r, 401, 'Authentication required.',
                   'A bearer token is required.', "$what: no token");
    is($r->{headers}{'www-authenticate'}, 'Bearer', "$what: challenge");
    envelope_error($op->({}, anonymous => 1, headers => \%fr), 401,
                   'Authentification requise.',
                   "Un jeton d'accès (Bearer) est requis.",
                   "$what: fr: no token");

    my $no_merchant = token(merchantId => undef);
    for my $case ([ $json->encode({ id => $A{1}, name => 'x' }),
                    'a good body' ],
                  [ '{"id": ', 'a malformed body' ],
                  [ '', 'no body' ])
    {
        my ($body, $name) = @$case;
        envelope_error($op->($body, raw => 1, token => $no_merchant), 403,
                       'The token carries no merchantId.',
                       'This operation acts for a merchant: its token needs'
                       . ' a merchantId claim.',
                       "$what: no merchantId, $name");
    }
    envelope_error($op->('{"id": ', raw => 1, token => $no_merchant,
                         headers => \%fr), 403,
                   'Le jeton ne porte aucun merchantId.',
                   'Cette opération agit pour un marchand : son jeton doit'
                   . " porter l'attribut merchantId.",
                   "$what: fr: no merchantId, malformed body");
    envelope_error($op->({ id => $A{1}, name => 'x' },
                         token => token(merchantId => '')), 403,
                   'The token carries no merchantId.',
                   'This operation acts for a merchant: its token needs'
                   . ' a merchantId claim.', "$what: an empty merchantId");
    envelope_error($op->({ id => $A{1}, name => 'x' },
                         headers => { 'Content-Type' => 'application/xml',
                                      %fr }), 415,
                   'Type de contenu non pris en charge.',
                   'Envoyez le corps au format application/json.',
                   "$what: fr: 415");
    envelope_error($op->({ id => $A{1}, name => 'x' },
                         headers => { tenantId => 'tenant-b' }), 403,
                   'Access denied.',
                   'The tenantId header does not match the credentials.',
                   "$what: tenantId header against the token");
}

$r = put({ id => $A{1}, bankName => 'Typed' },
         headers => { 'Content-Type' => 'application/xml' });
envelope_error($r, 415, 'Unsupported media type.',
               'Send the body as application/json.', 'accounts: 415');
isnt(stored($A{1})->{bankName}, 'Typed', '415: nothing changed');
for my $type ('text/json', 'text/plain; charset=utf-8') {
    ok_data(put({ id => $A{1}, bankName => 'Typed' },
                headers => { 'Content-Type' => $type }),
            $updated, "accounts: $type");
}
# (HTTP::Tiny adds a type of its own to a body without one)
my $plain = $json->encode({ id => $A{1}, bankName => 'Untyped' });
$r = $t->parse_response($t->raw_request(
    "PUT /api/v1/Counterparties/accounts HTTP/1.1\r\nHost: localhost\r\n"
    . 'Authorization: Bearer ' . token() . "\r\n"
    . 'Content-Length: ' . length($plain) . "\r\n"
    . "Connection: close\r\n\r\n$plain"));
is(ok_data($r, $updated, 'accounts: no Content-Type')->{bankName}, 'Untyped',
   'no Content-Type: the body is read as JSON');

### malformed JSON, not an object, wrong JSON types: accounts

for my $case ([ put("{\n  \"id\": \"$A{1}\",\n  \"bankName\": }", raw => 1),
                3, 'accounts' ],
              [ post("{\"name\": \"x\",\n\"members\": [\n{]}", raw => 1),
                3, 'groups' ])
{
    my ($res, $line, $what) = @$case;
    is($res->{status}, 400, "$what: malformed JSON: 400");
    is($res->{json}{message}, 'The request body is not valid JSON.',
       "$what: malformed JSON: message");
    like($res->{json}{errors}[0],
         qr/^Malformed JSON at line $line, column \d+: \S/,
         "$what: malformed JSON: line and column");
}
$r = put('{"id": ', raw => 1, headers => \%fr);
is($r->{json}{message}, "Le corps de la requête n'est pas un JSON valide.",
   'fr: malformed JSON');
like($r->{json}{errors}[0],
     qr/^JSON mal formé à la ligne 1, colonne \d+ : élément inattendu à la fin du texte/,
     'fr: malformed JSON: where and why, in French');

for my $op (\&put, \&post) {
    envelope_error($op->('[]', raw => 1), 400,
                   'The request body must be a JSON object.',
                   'Expected a JSON object.', 'an array body');
}
$r = put('[1]', raw => 1, headers => \%fr);
is($r->{status}, 400, 'fr: an array body: 400');
is($r->{json}{message}, 'Le corps de la requête doit être un objet JSON.',
   'fr: an array body: message');

my $before = stored($A{1});
my @put_bad = (
    [ {}, 'id is required.', 'id est requis.' ],
    [ { id => undef }, 'id is required.', 'id est requis.' ],
    [ { id => 5 }, 'id must be a uuid.', 'id doit être un uuid.' ],
    [ { id => 'abc' }, 'id must be a uuid.', 'id doit être un uuid.' ],
    [ { id => "$A{1}x" }, 'id must be a uuid.', 'id doit être un uuid.' ],
    [ { id => $A{1}, account => '1' }, 'account must be an integer.',
      'account doit être un entier.' ],
    [ { id => $A{1}, account => 1.5 }, 'account must be an integer.',
      'account doit être un entier.' ],
    [ { id => $A{1}, account => JSON::PP::true },
      'account must be an integer.', 'account doit être un entier.' ],
    [ { id => $A{1}, account => undef }, 'account must not be null.',
      'account ne doit pas être null.' ],
    [ { id => $A{1}, account => 0 }, 'account must be at least 1.',
      'account doit valoir au moins 1.' ],
    [ { id => $A{1}, account => 3 }, 'account must be at most 2.',
      'account doit valoir au plus 2.' ],
    [ { id => $A{1}, counterpartyType => 3 },
      'counterpartyType must be at most 2.',
      'counterpartyType doit valoir au plus 2.' ],
    [ { id => $A{1}, counterpartyType => [] },
      'counterpartyType must be an integer.',
      'counterpartyType doit être un entier.' ],
    [ { id => $A{1}, accountType => 4 }, 'accountType must be at most 3.',
      'accountType doit valoir au plus 3.' ],
    [ { id => $A{1}, accountType => -1 }, 'accountType must be at least 1.',
      'accountType doit valoir au moins 1.' ],
    [ { id => $A{1}, bankName => 5 }, 'bankName must be a string.',
      'bankName doit être une chaîne de caractères.' ],
    [ { id => $A{1}, bankCode => {} }, 'bankCode must be a string.',
      'bankCode doit être une chaîne de caractères.' ],
    [ { id => $A{1}, routingNumber => JSON::PP::false },
      'routingNumber must be a string.',
      'routingNumber doit être une chaîne de caractères.' ],
    [ { id => $A{1}, iban => 5 }, 'iban must be a string.',
      'iban doit être une chaîne de caractères.' ],
    [ { id => $A{1}, swiftCode => [] }, 'swiftCode must be a string.',
      'swiftCode doit être une chaîne de caractères.' ],
    [ { id => $A{1}, bankName => 'x' x 201 },
      'bankName must be at most 200 characters long.',
      'bankName doit compter au plus 200 caractères.' ],
    [ { id => $A{1}, bankCode => 'x' x 33 },
      'bankCode must be at most 32 characters long.',
      'bankCode doit compter au plus 32 caractères.' ],
    [ { id => $A{1}, accountNumber => '1' x 35 },
      'accountNumber must be at most 34 characters long.',
      'accountNumber doit compter au plus 34 caractères.' ],
    [ { id => $A{1}, accountName => 'é' x 201 },
      'accountName must be at most 200 characters long.',
      'accountName doit compter au plus 200 caractères.' ],
    [ { id => $A{1}, bankAddress => 'x' x 501 },
      'bankAddress must be at most 500 characters long.',
      'bankAddress doit compter au plus 500 caractères.' ],
    [ { id => $A{1}, routingNumber => '1' x 33 },
      'routingNumber must be at most 32 characters long.',
      'routingNumber doit compter au plus 32 caractères.' ],
);
for my $case (@put_bad) {
    my ($body, $en, $fr) = @$case;
    my $name = 'accounts: ' . $json->encode($body);
    $name = substr($name, 0, 70) . '...' if length $name > 73;
    bad(put($body), $en, $name);
    bad_fr(put($body, headers => \%fr), $fr, "fr: $name");
}
is_deeply(stored($A{1}), $before, '400: nothing changed');

# the longest strings are accepted, counted in characters
$r = put({ id => $A{1}, bankName => 'é' x 200, bankCode => '9' x 32,
           accountNumber => '1' x 34, bankAddress => 'a' x 500 });
$d = ok_data($r, $updated, 'the longest strings');
is($d->{bankName}, 'é' x 200, '200 characters of two bytes');

### IBAN vectors

for my $iban ('DE89370400440532013000', 'GB29NWBK60161331926819',
              'FR1420041010050500013M02606', 'NL91ABNA0417164300',
              'NO9386011117947', 'MT84MALT011000012345MTLCAST001S',
              'BE68539007547034', 'CH9300762011623852957',
              'SA0380000000608010167519', 'LC55HEMM000100010012001200023015')
{
    $r = put({ id => $A{1}, iban => $iban });
    is(ok_data($r, $updated, "IBAN $iban")->{iban}, $iban,
       "IBAN $iban stored");
}

my %iban_why = (
    format => [ 'iban must be an IBAN in electronic format: upper case'
                . ' letters and digits, no spaces.',
                "iban doit être un IBAN au format électronique : lettres"
                . ' majuscules et chiffres, sans espaces.' ],
    country => [ 'iban does not start with the code of a country that uses'
                 . ' IBANs.',
                 "iban ne commence pas par le code d'un pays qui utilise"
                 . " l'IBAN." ],
    length => [ 'iban does not have the length of an IBAN of its country.',
                "iban n'a pas la longueur d'un IBAN de son pays." ],
    check => [ 'iban fails the IBAN check digits (ISO 13616, mod 97).',
               "iban échoue au contrôle de l'IBAN (ISO 13616, modulo 97)." ],
);
$before = stored($A{1});
for my $case ([ 'DE89370400440532013001', 'check' ],
              [ 'GB29NWBK60161331926818', 'check' ],
              [ 'DE88370400440532013000', 'check' ],
              [ 'DE8937040044053201300', 'length' ],
              [ 'DE893704004405320130000', 'length' ],
              [ 'NO938601111794', 'length' ],
              [ 'de89370400440532013000', 'format' ],
              [ 'GB29nwbk60161331926819', 'format' ],
              [ 'DE89 3704 0044 0532 0130 00', 'format' ],
              [ ' DE89370400440532013000', 'format' ],
              [ 'DE89-370400440532013000', 'format' ],
              [ 'XX89370400440532013000', 'country' ],
              [ 'US64SVBKUS6S3300958879', 'country' ],
              [ 'NG12345678901234567890', 'country' ],
              [ 'D', 'format' ], [ 'DEXX', 'format' ])
{
    my ($iban, $why) = @$case;
    bad(put({ id => $A{1}, iban => $iban }), $iban_why{$why}[0],
        "IBAN '$iban': $why");
    bad_fr(put({ id => $A{1}, iban => $iban }, headers => \%fr),
           $iban_why{$why}[1], "fr: IBAN '$iban': $why");
}
is_deeply(stored($A{1}), $before, 'refused IBANs: nothing changed');

### BIC vectors

for my $bic ('DEUTDEFF', 'DEUTDEFF500', 'NWBKGB2L', 'BNPAFRPP',
             'GTBINGLA', 'ABNANL2A', 'MALTMTMT', 'CHASUS33XXX') {
    $r = put({ id => $A{1}, swiftCode => $bic });
    is(ok_data($r, $updated, "BIC $bic")->{swiftCode}, $bic,
       "BIC $bic stored");
}

my @bic_why = ('swiftCode must be a BIC (ISO 9362): 8 or 11 upper case'
               . ' letters and digits, the first six letters.',
               'swiftCode doit être un BIC (ISO 9362) : 8 ou 11 lettres'
               . ' majuscules et chiffres, dont six lettres au début.');
for my $bic ('DEUTDEFF5', 'DEUTDEFF50', 'DEUTDEF', 'DEUTDEFF5000',
             'deutdeff', 'DeutDEFF', 'DEUTDEff', 'DEU1DEFF', 'DEUTD1FF',
             'DEUTDEF-', 'DEUT DEFF', 'DEUTDEFF50 ')
{
    bad(put({ id => $A{1}, swiftCode => $bic }), $bic_why[0],
        "BIC '$bic'");
    bad_fr(put({ id => $A{1}, swiftCode => $bic }, headers => \%fr),
           $bic_why[1], "fr: BIC '$bic'");
}

### POST groups

my $created = 'Counterparty group created.';
my $uuid_re = qr/^[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}$/;

sub groups_named {
    my ($name, $tenant, $merchant) = @_;
    $tenant //= 'tenant-a';
    $merchant //= $M1;
    $name =~ s/'/''/g;
    return $t->psql("SELECT count(*) FROM counterparty_groups"
                    . " WHERE tenant_id = '$tenant'"
                    . " AND merchant_id = '$merchant'"
                    . " AND lower(name) = lower('$name')");
}

sub members_of {
    my ($id) = @_;
    return $t->psql("SELECT string_agg(counterparty_id || ':'"
                    . " || coalesce(counterparty_name, '-'), ','"
                    . " ORDER BY position) FROM counterparty_group_members"
                    . " WHERE group_id = '$id'");
}

$r = post({ name => "  Grain suppliers\t",
            description => 'Who sells us maize and sorghum',
            members => [ { counterpartyId => $C{1},
                           counterpartyName => 'Kano Grain Hub' },
                         { counterpartyId => $C{3} },
                         { counterpartyId => $C{2},
                           counterpartyName => undef } ] });
$d = ok_data($r, $created, 'a group');
is_deeply([ sort keys %$d ], [ qw(id merchantId name) ],
          'data: name, merchantId, id');
is($d->{name}, 'Grain suppliers', 'data: the name, trimmed');
is($d->{merchantId}, $M1, 'data: merchantId');
like($d->{id}, $uuid_re, 'data: id, a uuid');
is(Platform::Test::loose_json($r->{content}), '', 'compact');
my $g1 = $d->{id};
is($t->psql("SELECT tenant_id || '|' || merchant_id || '|' || name || '|'"
            . " || description FROM counterparty_groups WHERE id = '$g1'"),
   "tenant-a|$M1|Grain suppliers|Who sells us maize and sorghum",
   'stored: tenant, merchant, trimmed name, description');
is(members_of($g1), "$C{1}:Kano Grain Hub,$C{3}:-,$C{2}:-",
   'stored: the members, in order, with their names');

$r = post({ name => 'Tubers', members => [] }, headers => \%fr);
$d = ok_data($r, 'Groupe de contreparties créé.', 'fr: empty members');
is($d->{name}, 'Tubers', 'fr: data');
is(members_of($d->{id}), '', 'empty members: none stored');
is($t->psql("SELECT description IS NULL FROM counterparty_groups"
            . " WHERE id = '$d->{id}'"), 't', 'no description: NULL');

$r = post({ name => 'Legumes' });
$d = ok_data($r, $created, 'members absent');
is(members_of($d->{id}), '', 'members absent: none stored');
$r = post({ name => 'Livestock', members => undef, description => undef });
$d = ok_data($r, $created, 'members and description null');
is(members_of($d->{id}), '', 'members null: none stored');

$r = post({ name => 'x' x 200 });
is(ok_data($r, $created, 'a name of 200 characters')->{name}, 'x' x 200,
   '200 characters');
$r = post({ name => (' ' x 10) . ('é' x 200) . "\n\r" });
is(ok_data($r, $created, '200 characters once trimmed')->{name}, 'é' x 200,
   'trimmed, then 200 characters');
$r = post({ name => 'Vegetables' }, version => '1.0');
ok_data($r, $created, 'v1.0');

# the most members, a body of some 90 KB (parsed in the thread pool)
$t->psql(<<"SQL");
INSERT INTO counterparties (id, tenant_id, merchant_id, name)
SELECT ('84000000-0000-4000-8000-' || lpad(g::text, 12, '0'))::uuid,
       'tenant-a', '$M2', 'Counterparty ' || g
FROM generate_series(1, 1000) AS g
SQL
my @many = map { { counterpartyId => sprintf('84000000-0000-4000-8000-%012d',
                                             $_),
                   counterpartyName => "Counterparty $_" } } 1 .. 1000;
my $many = $json->encode({ name => 'Everyone', members => \@many });
cmp_ok(length $many, '>', 65536, 'a body over 64 KB');
$r = post($many, raw => 1, token => token(merchantId => $M2));
$d = ok_data($r, $created, '1000 members');
is($t->psql("SELECT count(*) || ' ' || min(position) || ' ' || max(position)"
            . " FROM counterparty_group_members WHERE group_id = '$d->{id}'"),
   '1000 1 1000', '1000 members stored, in order');
$many[999]{counterpartyId} = $C{1};
envelope_error(post({ name => 'Everyone else', members => \@many },
                    token => token(merchantId => $M2)),
               400, 'Invalid group member.',
               "members[999].counterpartyId $C{1} is not a counterparty of"
               . ' the merchant.', 'the last of 1000 members is foreign');
is(groups_named('Everyone else', 'tenant-a', $M2), 0,
   'the last of 1000 foreign: no group');

### 409: unique per merchant, whatever the case and spaces

for my $case ([ 'Grain suppliers', 'the same name' ],
              [ 'GRAIN SUPPLIERS', 'in upper case' ],
              [ "  grain Suppliers \n", 'another case, with spaces' ])
{
    my ($name, $what) = @$case;
    envelope_error(post({ name => $name,
                          members => [ { counterpartyId => $C{4} } ] }),
                   409, 'Counterparty group already exists.',
                   'The merchant already has a group of this name.',
                   "409: $what");
}
envelope_error(post({ name => 'grain suppliers' }, headers => \%fr), 409,
               'Le groupe de contreparties existe déjà.',
               'Le marchand a déjà un groupe de ce nom.', 'fr: 409');
is(groups_named('Grain suppliers'), 1, '409: no second group');
is($t->psql("SELECT count(*) FROM counterparty_group_members"
            . " WHERE counterparty_id = '$C{4}'"), 0,
   '409: no member written');

# the same name for another merchant, or another tenant, is another group
ok_data(post({ name => 'Grain suppliers' },
             token => token(merchantId => $M2)), $created,
        'the same name for another merchant');
ok_data(post({ name => 'Grain suppliers' },
             token => token(tenantId => 'tenant-b')), $created,
        'the same name in another tenant');

### 400: the name, the members

for my $case ([ { members => [] }, 'name is required.', 'name est requis.' ],
              [ { name => undef }, 'name is required.', 'name est requis.' ],
              [ { name => '' }, 'name must be at least 1 character long.',
                'name doit compter au moins 1 caractère.' ],
              [ { name => "   \t\r\n " },
                'name must be at least 1 character long.',
                'name doit compter au moins 1 caractère.' ],
              [ { name => 'x' x 201 },
                'name must be at most 200 characters long.',
                'name doit compter au plus 200 caractères.' ],
              [ { name => 5 }, 'name must be a string.',
                'name doit être une chaîne de caractères.' ],
              [ { name => 'Nuts', members => {} },
                'members must be an array.', 'members doit être un tableau.' ],
              [ { name => 'Nuts', members => 'x' },
                'members must be an array.', 'members doit être un tableau.' ],
              [ { name => 'Nuts', members => [ $C{1} ] },
                'members[0] must be an object.',
                'members[0] doit être un objet.' ],
              [ { name => 'Nuts', members => [ {} ] },
                'members[0].counterpartyId is required.',
                'members[0].counterpartyId est requis.' ],
              [ { name => 'Nuts', members => [ { counterpartyId => $C{1} },
                                               { counterpartyId => 'x' } ] },
                'members[1].counterpartyId must be a uuid.',
                'members[1].counterpartyId doit être un uuid.' ],
              [ { name => 'Nuts', members => [ { counterpartyId => 7 } ] },
                'members[0].counterpartyId must be a uuid.',
                'members[0].counterpartyId doit être un uuid.' ],
              [ { name => 'Nuts',
                  members => [ { counterpartyId => $C{1},
                                 counterpartyName => 5 } ] },
                'members[0].counterpartyName must be a string.',
                'members[0].counterpartyName doit être une chaîne de'
                . ' caractères.' ],
              [ { name => 'Nuts', description => 5 },
                'description must be a string.',
                'description doit être une chaîne de caractères.' ],
              [ { name => 'Nuts', description => 'd' x 1001 },
                'description must be at most 1000 characters long.',
                'description doit compter au plus 1000 caractères.' ],
              [ { name => 'Nuts',
                  members => [ map { { counterpartyId => $C{1} } }
                               1 .. 1001 ] },
                'members must be at most 1000.',
                'members doit valoir au plus 1000.' ],
              [ { name => 'Nuts',
                  members => [ { counterpartyId => $C{1} },
                               { counterpartyId => $C{2} },
                               { counterpartyId => $C{1} } ] },
                'members[2].counterpartyId appears more than once.',
                'members[2].counterpartyId apparaît plus d\'une fois.' ])
{
    my ($body, $en, $fr) = @$case;
    my $name = 'groups: ' . $json->encode($body);
    $name = substr($name, 0, 70) . '...' if length $name > 73;
    bad(post($body), $en, $name);
    bad_fr(post($body, headers => \%fr), $fr, "fr: $name");
}
is(groups_named('Nuts'), 0, '400: no group written');

### members of another merchant or tenant, or unknown: 400, nothing written

my $members_before = $t->psql('SELECT count(*) FROM'
                              . ' counterparty_group_members');
for my $case ([ $C{5}, "another merchant's counterparty" ],
              [ $C{6}, "another tenant's counterparty" ],
              [ $unknown, 'an unknown counterparty' ],
              [ $A{1}, 'an account id, not a counterparty' ])
{
    my ($foreign, $what) = @$case;
    my $body = { name => 'Mixed', description => 'never stored',
                 members => [ { counterpartyId => $C{1} },
                              { counterpartyId => $C{2} },
                              { counterpartyId => $foreign },
                              { counterpartyId => $C{3} } ] };
    envelope_error(post($body), 400, 'Invalid group member.',
                   "members[2].counterpartyId $foreign is not a"
                   . ' counterparty of the merchant.', "third member: $what");
    envelope_error(post($body, headers => \%fr), 400,
                   'Membre de groupe invalide.',
                   "members[2].counterpartyId $foreign n'est pas une"
                   . ' contrepartie du marchand.', "fr: third member: $what");
    is(groups_named('Mixed'), 0, "$what: no group row");
}
is($t->psql('SELECT count(*) FROM counterparty_group_members'),
   $members_before, 'no member rows');

# the first foreign member is named; an upper case uuid as it was sent
envelope_error(post({ name => 'Mixed',
                      members => [ { counterpartyId => uc $C{5} },
                                   { counterpartyId => $C{6} } ] }),
               400, 'Invalid group member.',
               'members[0].counterpartyId ' . uc($C{5}) . ' is not a'
               . ' counterparty of the merchant.', 'the first foreign one');

# the other merchant's group may have its own counterparty
$r = post({ name => 'Mixed', members => [ { counterpartyId => $C{5} } ] },
          token => token(merchantId => $M2));
$d = ok_data($r, $created, "M2's group of its counterparty");
is(members_of($d->{id}), "$C{5}:-", "M2's member");

# one uuid in two cases is one counterparty, repeated
$r = post({ name => 'Cases', members => [ { counterpartyId => $C{7} },
                                          { counterpartyId => uc $C{7} } ] });
bad($r, 'members[1].counterpartyId appears more than once.',
    'a uuid in two cases');
$r = post({ name => 'Cases 2',
            members => [ { counterpartyId => uc $C{7} } ] });
$d = ok_data($r, $created, 'a uuid in upper case');
is(members_of($d->{id}), "$C{7}:-", 'the member, canonical');

# the durable guard: a counterparty that goes away while the group is
# written (here: a trigger deletes it before its member row) is a foreign
# key violation, 400, and nothing is written
$t->psql(<<'SQL');
CREATE FUNCTION test_vanish() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.counterparty_name = 'vanish' THEN
        DELETE FROM counterparties WHERE id = NEW.counterparty_id;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER test_vanish BEFORE INSERT ON counterparty_group_members
    FOR EACH ROW EXECUTE FUNCTION test_vanish();
SQL
my $body = { name => 'Vanishing',
             members => [ { counterpartyId => $C{1} },
                          { counterpartyId => $C{9},
                            counterpartyName => 'vanish' } ] };
envelope_error(post($body), 400, 'Invalid group member.',
               'A member is not a counterparty of the merchant.',
               'a counterparty deleted meanwhile');
is(groups_named('Vanishing'), 0, 'deleted meanwhile: no group row');
is($t->psql("SELECT count(*) FROM counterparties WHERE id = '$C{9}'"), 1,
   'deleted meanwhile: rolled back with the rest');
envelope_error(post($body, headers => \%fr), 400,
               'Membre de groupe invalide.',
               "Un membre n'est pas une contrepartie du marchand.",
               'fr: a counterparty deleted meanwhile');
$t->psql('DROP TRIGGER test_vanish ON counterparty_group_members;'
         . ' DROP FUNCTION test_vanish()');

### random bodies: never a 5xx

# Values of every kind in every field (and unknown ones, and raw bytes):
# whatever the validator lets through, PostgreSQL must take as the jsonb
# the statement reads. PLATFORM_TEST_SEED repeats a run.
my $seed = $ENV{PLATFORM_TEST_SEED} // int(rand(2**31));
srand($seed);
note("PLATFORM_TEST_SEED=$seed");

my @pool = (
    undef, JSON::PP::true, JSON::PP::false, 0, 1, 2, 3, -1, 1.5, 1e300,
    '9' x 18, '', ' ', 'x', "\t \n", 'é' x 201, "\x{1F600}", "a\\b\"c",
    $A{1}, uc $A{2}, $A{5}, $C{1}, $C{5}, $unknown, 'DE89370400440532013000',
    'NO9386011117947', 'DEUTDEFF', 'DEUTDEFF500', 'deutdeff', [], {},
    [ { counterpartyId => $C{1} } ], [ { counterpartyId => $C{5} } ],
    [ { counterpartyId => $C{2}, counterpartyName => 'x' }, 'x' ],
    { id => $A{1} }, [ [ [ [ [ 1 ] ] ] ] ],
);
my @keys = (qw(id account counterpartyType accountType bankCode bankName
               accountNumber accountName iban swiftCode bankAddress
               routingNumber name members description counterpartyId),
            'unknown', "\x{e9}t\x{e9}", '');
my ($fuzzed, $broken, %fuzz_seen) = (0, 0);
for my $i (1 .. 150) {
    my $raw;
    if ($i % 12 == 0) {
        $raw = join '', map { chr(int(rand(256))) } 1 .. int(rand(40));
    } elsif ($i % 12 == 1) {
        $raw = $json->encode({ id => $A{1}, name => "fuzz $i" });
        substr($raw, int(rand(length $raw)), 1, chr(int(rand(256))));
    } else {
        my %body = (($i % 2 ? (id => $A{1}) : (name => "fuzz $i")),
                    map { $keys[rand @keys] => $pool[rand @pool] }
                    1 .. 1 + int(rand(5)));
        $raw = $json->encode(\%body);
    }
    my $res = ($i % 2 ? \&put : \&post)->($raw, raw => 1);
    $fuzzed++;
    $fuzz_seen{$res->{status}}++;
    if ($res->{status} !~ /^(?:200|400|404|409)$/
        || ref $res->{json} ne 'HASH'
        || !exists $res->{json}{succeeded})
    {
        $broken++;
        diag("$res->{status} for $raw: $res->{content}") if $broken <= 5;
    }
}
is($broken, 0, "$fuzzed random bodies: each 200, 400, 404 or 409 in the"
   . ' envelope');
note(join ', ', map { "$_: $fuzz_seen{$_}" } sort keys %fuzz_seen);
ok($fuzz_seen{200} && $fuzz_seen{400}, 'some served, some refused')
    or diag(explain \%fuzz_seen);

### methods, paths, versions

$r = $t->request('GET', '/api/v1/Counterparties/accounts');
envelope_error($r, 405, 'Method not allowed.', 'This endpoint accepts PUT.',
               'GET accounts');
is($r->{headers}{allow}, 'PUT', 'accounts: Allow');
$r = $t->request('PUT', '/api/v1/Counterparties/groups');
envelope_error($r, 405, 'Method not allowed.',
               'This endpoint accepts POST.', 'PUT groups');
is($r->{headers}{allow}, 'POST', 'groups: Allow');
envelope_error(put({ id => $A{1} }, version => '2'), 404,
               'API version not supported.', 'Supported versions: 1, 1.0.',
               'accounts v2');
envelope_error(post({ name => 'v2' }, version => '2', headers => \%fr), 404,
               "Version d'API non prise en charge.",
               'Versions prises en charge : 1, 1.0.', 'fr: groups v2');
envelope_error(call('PUT', 'account', { id => $A{1} }), 404,
               'Resource not found.', 'No such endpoint.', 'unknown path');

### concurrent updates of one account

# Two whole field sets, each consistent: a stored row must be wholly one
# of them. Each round sends both at once; in the rounds with a lock, a
# transaction of the test holds the row first, so that both updates wait
# for it and then run one after the other on the row lock.
my %x = (account => 1, counterpartyType => 1, accountType => 1,
         bankCode => '058', bankName => 'GTBank', accountNumber => '0111111111',
         accountName => 'Set X', iban => 'NL91ABNA0417164300',
         swiftCode => 'ABNANL2A', bankAddress => 'X street',
         routingNumber => '111');
my %y = (account => 2, counterpartyType => 2, accountType => 3,
         bankCode => '057', bankName => 'Zenith', accountNumber => '0222222222',
         accountName => 'Set Y', iban => 'NO9386011117947',
         swiftCode => 'DNBANOKK', bankAddress => 'Y road',
         routingNumber => '222');

sub hold_row {
    my ($id, $seconds) = @_;
    return $t->hold_rows('counterparty_accounts', [$id],
                         seconds => $seconds);
}

sub strip { my ($d) = @_; delete @$d{qw(id merchantId counterpartyId)}; $d }

my ($mixed, $answered) = (0, 0);
for my $round (1 .. 20) {
    my $lock = $round % 4 == 0 ? hold_row($A{1}, 0.3) : undef;
    my @h = map {
        $t->request_async('PUT', '/api/v1/Counterparties/accounts',
            headers => { Authorization => 'Bearer ' . token(),
                         'Content-Type' => 'application/json' },
            body => $json->encode({ id => $A{1}, %$_ }))
    } ($round % 2 ? (\%x, \%y) : (\%y, \%x));
    my @res = map { $_->wait } @h;
    $lock->wait if $lock;
    $answered++ if 2 == grep { $_->{status} == 200 } @res;
    my $row = strip(stored($A{1}));
    $mixed++ unless $json->encode($row) eq $json->encode(\%x)
                    || $json->encode($row) eq $json->encode(\%y);
}
is($answered, 20, 'concurrent whole updates: every one answered 200');
is($mixed, 0, 'concurrent whole updates: each stored row is one set');

# Two partial updates of distinct fields: both land (the second applies
# its fields to the row the first left, not to what it read before).
my $lost = 0;
for my $round (1 .. 8) {
    put({ id => $A{2}, bankName => 'before', accountName => 'before' });
    my $lock = $round % 2 ? hold_row($A{2}, 0.3) : undef;
    my @h = map {
        $t->request_async('PUT', '/api/v1/Counterparties/accounts',
            headers => { Authorization => 'Bearer ' . token(),
                         'Content-Type' => 'application/json' },
            body => $json->encode({ id => $A{2}, %$_ }))
    } ({ bankName => "bank $round" }, { accountName => "name $round" });
    $_->wait for @h;
    $lock->wait if $lock;
    my $row = stored($A{2});
    $lost++ unless $row->{bankName} eq "bank $round"
                   && $row->{accountName} eq "name $round";
}
is($lost, 0, 'concurrent partial updates: neither is lost');

### metrics: the family is counted

my $m = $t->request('GET', '/metrics')->{content} // '';
for my $status (200, 400, 403, 404, 409) {
    like($m, qr/^platform_requests_total\{family="counterparties",
                status="$status"\}\ [1-9]/mx,
         "metrics: counterparties $status");
}

### configuration: a bearer token needs a key

$t->config_refused(<<'EOF', qr/"platform_counterparties".*"platform_jwt_key"/,
    server {
        listen 127.0.0.1:%%PORT%%;
        location ~ ^/api/v[^/]+/Counterparties/ { platform_counterparties; }
    }
EOF
    'platform_counterparties without a key');

$t->done;
done_testing;
