#!/usr/bin/perl

# DELETE /api/v{version}/InvoiceSetting/DeleteInvoiceTax?TaxSettingId=...:
# 200 with no body, the TaxSettingId check, 404 for unknown and another
# tenant's settings (left in place), Envelope A in English and French,
# versions, 405, the bearer token.

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
            platform_invoices;
            platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;
        }
    }
EOF

my $vat = 'f0000000-0000-4000-8000-000000000001';
my $wht = 'f0000000-0000-4000-8000-000000000002';
my $stamp = 'f0000000-0000-4000-8000-000000000003';
my $other = 'f0000000-0000-4000-8000-000000000004';
my $levy = 'f0000000-0000-4000-8000-00000000000a';
my $unknown = 'f0000000-0000-4000-8000-000000000009';

$t->psql(<<"SQL");
INSERT INTO invoice_tax_settings (id, tenant_id, name, rate) VALUES
    ('$vat', 'tenant-a', 'VAT', 7.5),
    ('$wht', 'tenant-a', 'Withholding tax', 5),
    ('$stamp', 'tenant-a', 'Stamp duty', 0.5),
    ('$other', 'tenant-b', 'VAT', 7.5),
    ('$levy', 'tenant-a', 'Levy', 1);
SQL

sub token {
    my ($tenant) = @_;
    return Platform::JWT::hs256($k, tenantId => $tenant // 'tenant-a');
}

# a request; query: the query string (undef: none), id: TaxSettingId=id
sub del {
    my (%o) = @_;
    my %h = (Authorization => 'Bearer ' . token($o{tenant}),
             %{$o{headers} // {}});
    delete $h{Authorization} if $o{anonymous};
    my $v = $o{version} // '1';
    my $q = exists $o{id} ? "TaxSettingId=$o{id}" : $o{query};
    my $path = "/api/v$v/InvoiceSetting/DeleteInvoiceTax"
               . (defined $q ? "?$q" : '');
    return $t->request($o{method} // 'DELETE', $path, headers => \%h);
}

sub exists_row {
    my ($id) = @_;
    return $t->psql("SELECT count(*) FROM invoice_tax_settings"
                    . " WHERE id = '$id'");
}

sub envelope_error {
    my ($r, $status, $message, $detail, $name) = @_;
    is($r->{status}, $status, "$name: $status");
    is($r->{headers}{'content-type'}, 'application/json; charset=utf-8',
       "$name: content type");
    my $want = {
        succeeded => JSON::PP::false, message => $message,
        errors => [ $detail ], data => undef,
    };
    is_deeply($r->{json}, $want, "$name: Envelope A") or diag($r->{content});
}

my %fr = ('Accept-Language' => 'fr');

### deleted: 200, no body, gone

my $r = del(id => $vat, headers => { 'Content-Type' => 'application/json',
                                     'X-Request-Id' => 'req-25.1' });
is($r->{status}, 200, 'deleted: 200') or diag($r->{content});
is($r->{content}, '', 'deleted: no body');
ok(!defined $r->{headers}{'content-length'}
   || $r->{headers}{'content-length'} eq '0', 'deleted: no content');
ok(!defined $r->{headers}{'content-type'}, 'deleted: no content type');
is($r->{headers}{'x-request-id'}, 'req-25.1', 'deleted: X-Request-Id');
is(exists_row($vat), 0, 'the row is gone');
is(exists_row($wht), 1, 'the other rows stay');

envelope_error(del(id => $vat), 404, 'Tax setting not found.',
               'No tax setting with this id exists.', 'second delete');
envelope_error(del(id => $unknown), 404, 'Tax setting not found.',
               'No tax setting with this id exists.', 'unknown id');

$r = del(id => uc $levy);
is($r->{status}, 200, 'the uuid in upper case: the same setting')
    or diag($r->{content});
is(exists_row($levy), 0, 'deleted by its upper-case uuid');

### tenant isolation

my $unknown_r = del(id => $unknown);
$r = del(id => $other);
envelope_error($r, 404, 'Tax setting not found.',
               'No tax setting with this id exists.',
               "another tenant's setting");
is($r->{content}, $unknown_r->{content},
   "another tenant's setting: the same body as an unknown id");
is(exists_row($other), 1, "another tenant's setting is not deleted");

$r = del(id => $wht, tenant => 'tenant-b');
is($r->{status}, 404, "tenant-b cannot delete tenant-a's setting");
is(exists_row($wht), 1, "tenant-a's setting stays");

$r = del(id => $other, tenant => 'tenant-b');
is($r->{status}, 200, 'tenant-b deletes its own setting');
is(exists_row($other), 0, "tenant-b's setting is gone");

$r = del(id => $wht, headers => { tenantId => 'tenant-b' });
envelope_error($r, 403, 'Access denied.',
               'The tenantId header does not match the credentials.',
               'tenantId header against the token');
is(exists_row($wht), 1, '403: nothing deleted');

### TaxSettingId

for my $q (undef, '', 'TaxSettingId=', 'TaxSettingId', 'Id=' . $wht,
           'TaxSetting=' . $wht, 'XTaxSettingId=' . $wht)
{
    my $name = 'query ' . ($q // 'none');
    envelope_error(del(query => $q), 400, 'Bad request.',
                   'TaxSettingId is required.', "$name: missing");
}

for my $id ('not-a-uuid', 'f0000000-0000-4000-8000-00000000000',
            'f0000000000040008000000000000002',
            'f0000000-0000-4000-8000-00000000000g',
            "${wht}0", '%27%3Bselect%201', '%7B' . $wht . '%7D', '1',
            "$wht%00", "%20$wht", "+$wht", substr($wht, 0, 35) . '%67')
{
    envelope_error(del(id => $id), 400, 'Bad request.',
                   'TaxSettingId must be a uuid.', "TaxSettingId $id");
}
is(exists_row($wht), 1, 'after the bad ids the setting stays');

# the credentials are checked before the query
$r = del(query => 'TaxSettingId=nope', anonymous => 1);
envelope_error($r, 401, 'Authentication required.',
               'A bearer token is required.', 'no token and a bad id');
is($r->{headers}{'www-authenticate'}, 'Bearer', 'challenge');

$r = del(id => $wht, anonymous => 1);
envelope_error($r, 401, 'Authentication required.',
               'A bearer token is required.', 'no token');
is(exists_row($wht), 1, '401: nothing deleted');

$r = del(id => $wht, headers => { Authorization => 'Bearer x.y.z' });
is($r->{status}, 401, 'a malformed token: 401');
is($r->{json}{message}, 'Invalid token.', 'a malformed token: message');

### versions

for my $v ('2', '1.1', '0') {
    envelope_error(del(id => $wht, version => $v), 404,
                   'API version not supported.',
                   'Supported versions: 1, 1.0.', "v$v");
}
is(exists_row($wht), 1, 'v2: nothing deleted');

$r = del(id => $wht, version => '1.0');
is($r->{status}, 200, 'v1.0 deletes');
is($r->{content}, '', 'v1.0: no body');
is(exists_row($wht), 0, 'v1.0: gone');

### French

$r = del(id => $unknown, headers => \%fr);
envelope_error($r, 404, 'Paramètre de taxe introuvable.',
               'Aucun paramètre de taxe ne porte cet identifiant.',
               'fr: unknown id');
is($r->{headers}{'content-language'}, 'fr', 'fr: Content-Language');

envelope_error(del(query => 'TaxSettingId=nope', headers => \%fr), 400,
               'Requête invalide.', 'TaxSettingId doit être un uuid.',
               'fr: bad id');
envelope_error(del(headers => \%fr), 400, 'Requête invalide.',
               'TaxSettingId est requis.', 'fr: missing id');

envelope_error(del(id => $stamp, version => 2, headers => \%fr), 404,
               "Version d'API non prise en charge.",
               'Versions prises en charge : 1, 1.0.', 'fr: version');
envelope_error(del(id => $stamp, anonymous => 1, headers => \%fr), 401,
               'Authentification requise.',
               "Un jeton d'accès (Bearer) est requis.", 'fr: no token');

$r = del(id => $stamp, headers => { 'Accept-Language' => 'fr-FR' });
is($r->{status}, 200, 'fr: deleted');
is($r->{content}, '', 'fr: no body');

$r = del(id => $stamp, headers => { 'Accept-Language' => 'es' });
is($r->{json}{message}, 'Tax setting not found.', 'es falls back to en');
is($r->{headers}{'content-language'}, 'en', 'es: Content-Language en');

### methods and paths

$t->psql("INSERT INTO invoice_tax_settings (id, tenant_id, name, rate)"
         . " VALUES ('$vat', 'tenant-a', 'VAT', 7.5)");

for my $m ('GET', 'POST', 'PUT', 'HEAD') {
    $r = del(id => $vat, method => $m, anonymous => 1);
    is($r->{status}, 405, "$m is 405 (before authentication)");
    is($r->{headers}{allow}, 'DELETE', "$m: Allow");
    if ($m eq 'HEAD') {
        is($r->{content}, '', 'HEAD: no body');
        next;
    }
    envelope_error($r, 405, 'Method not allowed.',
                   'This endpoint accepts DELETE.', $m);
}
is(exists_row($vat), 1, 'other methods delete nothing');

$r = $t->request('DELETE', "/api/v1/InvoiceSetting/DeleteInvoiceTax/$vat",
                 headers => { Authorization => 'Bearer ' . token() });
envelope_error($r, 404, 'Resource not found.', 'No such endpoint.',
               'the id in the path: unknown path');

$r = $t->request('DELETE', "/api/v1/InvoiceSetting/deleteinvoicetax"
                 . "?TaxSettingId=$vat",
                 headers => { Authorization => 'Bearer ' . token() });
is($r->{status}, 404, 'the path is case-sensitive');
is(exists_row($vat), 1, 'unknown paths delete nothing');

$t->done;
done_testing;
