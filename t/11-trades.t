#!/usr/bin/perl

# GET /api/v1/trades/process-flows?name=: Envelope B, an API key and a
# bearer token by default (each refused alone, tenants that must agree),
# the tenant's flows only, by name then id, the name filter
# case-insensitive with "%", "_" and "\" matching themselves.

use strict;
use warnings;
use utf8;

use lib 't/lib';
use Encode qw(encode_utf8);
use Test::More;
use Platform::Test;
use Platform::JWT;

my $t = Platform::Test->new();
my $k = Platform::JWT::keys($t->testdir . '/keys');

$t->run(<<'EOF');
    server {
        listen 127.0.0.1:%%PORT%%;
        platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;
        platform_apikey_cache_time 0;

        location /api/v1/trades/ { platform_trades; }
    }
EOF

my %F = map { $_ => sprintf('f1000000-0000-4000-8000-%012d', $_) } 1 .. 20;

# tenant-a's flows, inserted out of order; two named alike (ties by id);
# tenant-b's flows share words with tenant-a's
$t->psql(<<"SQL");
INSERT INTO trade_process_flows (id, tenant_id, name, description) VALUES
    ('$F{5}', 'tenant-a', 'Export of cocoa', 'Farm gate to port'),
    ('$F{2}', 'tenant-a', 'Cocoa import', 'Port to warehouse'),
    ('$F{3}', 'tenant-a', '100% cotton import', 'A percent sign'),
    ('$F{4}', 'tenant-a', 'Grain_export', 'An underscore'),
    ('$F{1}', 'tenant-a', 'Back\\slash flow', 'A backslash'),
    ('$F{7}', 'tenant-a', 'Export of cocoa', 'The same name, a later id'),
    ('$F{6}', 'tenant-a', 'Grainexport', 'Like Grain_export without _'),
    ('$F{8}', 'tenant-a', '1000 bags', 'No percent sign'),
    ('$F{9}', 'tenant-a', 'Éclair exports', 'Non-ASCII'),
    ('$F{10}', 'tenant-a', 'Backslash flow', 'No backslash'),
    ('$F{11}', 'tenant-b', 'Export of cocoa', 'Another tenant''s'),
    ('$F{12}', 'tenant-b', 'Sesame export', 'Another tenant''s');
INSERT INTO trade_process_flows (id, tenant_id, name)
VALUES ('$F{13}', 'tenant-a', 'Zero description');
SQL

sub token {
    my ($tenant) = @_;
    return Platform::JWT::hs256($k, tenantId => $tenant // 'tenant-a');
}

# a key inserted by hand, as scripts/apikey makes them: (id, key)
sub insert_key {
    my ($id, $tenant, %o) = @_;
    my @c = ('A' .. 'Z', 'a' .. 'z', '0' .. '9', '-', '_');
    my $key = "plk_$id." . join('', map { $c[int rand @c] } 1 .. 43);
    my $revoked = $o{revoked} ? 'now()' : 'NULL';
    $t->psql("INSERT INTO api_keys (id, tenant_id, scope, key_digest,"
             . " revoked_at) VALUES ('$id', '$tenant', 'trades',"
             . " sha256(convert_to('$key', 'UTF8')), $revoked)");
    return $key;
}

my $key_a = insert_key('00000000000011aa', 'tenant-a');
my $key_b = insert_key('00000000000011bb', 'tenant-b');
my $key_c = insert_key('00000000000011cc', 'tenant-c');
my $key_r = insert_key('00000000000011dd', 'tenant-a', revoked => 1);

# %o: query (raw, already escaped), tenant (of the token and the key: a),
# key, token (undef: none), headers, method
sub flows {
    my (%o) = @_;
    my $tenant = $o{tenant} // 'tenant-a';
    my %h;
    my $key = exists $o{key} ? $o{key}
            : { 'tenant-a' => $key_a, 'tenant-b' => $key_b,
                'tenant-c' => $key_c }->{$tenant};
    my $tok = exists $o{token} ? $o{token} : token($tenant);
    $h{apiKey} = $key if defined $key;
    $h{Authorization} = "Bearer $tok" if defined $tok;
    %h = (%h, %{$o{headers} // {}});
    return $t->request($o{method} // 'GET', '/api/v1/trades/process-flows'
                       . (defined $o{query} ? "?name=$o{query}" : ''),
                       headers => \%h);
}

sub ids { [ map { $_->{id} } @{$_[0]{json}{data} // []} ] }

sub is_error { goto &Platform::Test::is_envelope_b_error }

my $r;

### the list

$r = flows();
is($r->{status}, 200, 'flows: 200') or diag($r->{content});
is($r->{headers}{'content-type'}, 'application/json; charset=utf-8',
   'content type');
is($r->{json}{status}, JSON::PP::true, 'status true');
is($r->{json}{statusCode}, 0, 'statusCode 0');
is($r->{json}{message}, 'Trade process flows retrieved.', 'message');
is_deeply($r->{json}{errors}, [], 'no errors');
is(Platform::Test::loose_json($r->{content}), '', 'compact JSON');
is_deeply(ids($r), [ @F{3, 8, 1, 10, 2, 5, 7, 4, 6, 13, 9} ],
          "the tenant's flows, by name (byte order), then id")
    or diag($r->{content});
is_deeply($r->{json}{data}[0], { id => $F{3}, name => '100% cotton import',
                                 description => 'A percent sign' },
          'a flow: id, name, description');
is_deeply([ map { join ',', sort keys %$_ } @{$r->{json}{data}} ],
          [ ('description,id,name') x 11 ], 'each flow has the three keys');
is($r->{json}{data}[9]{description}, '', 'no description: ""');
is(Platform::Test::json_type($r->{json}{data}[0]{id}), 'string',
   'id is a string');

### the name filter

my @cases = (
    ['export', [ @F{5, 7, 4, 6, 9} ], 'a substring, any case'],
    ['EXPORT', [ @F{5, 7, 4, 6, 9} ], 'upper case finds lower case'],
    ['CoCoA', [ @F{2, 5, 7} ], 'mixed case'],
    ['%25', [ $F{3} ], '"%" matches a percent sign only'],
    ['100%25', [ $F{3} ], '"100%" is not "100" and anything'],
    ['_', [ $F{4} ], '"_" matches an underscore only'],
    ['grain_', [ $F{4} ], '"grain_" does not match "Grainexport"'],
    ['%5C', [ $F{1} ], '"\\" matches a backslash only'],
    ['back%5Cs', [ $F{1} ], '"back\\s" is no escape'],
    ['%5C%25', [], '"\\%" is not an escaped "%"'],
    ['%25%25', [], '"%%" matches nothing here'],
    ['.*', [], 'no regular expression either'],
    ['of+cocoa', [ @F{5, 7} ], '"+" is a space'],
    ['%C3%A9clair', [ $F{9} ], 'UTF-8, percent-encoded'],
    ['%C3%89CLAIR', [ $F{9} ], 'non-ASCII letters in any case'],
    ['sesame', [], "another tenant's flow is not found"],
    ['nothing+like+it', [], 'no match'],
    ['', [ @F{3, 8, 1, 10, 2, 5, 7, 4, 6, 13, 9} ],
     'an empty name is no filter'],
);
for my $c (@cases) {
    my ($q, $want, $name) = @$c;
    $r = flows(query => $q);
    is($r->{status}, 200, "name=$q: 200");
    is_deeply(ids($r), $want, "name=$q: $name") or diag($r->{content});
}
$r = flows(query => 'nothing');
is($r->{content} =~ /"data":\[\]/ ? 1 : 0, 1, 'no match: data []');

is_error(flows(query => 'x' x 201), 400, 'Bad request.',
         'name must be at most 200 characters long.', 'name too long');
$r = flows(query => join('', map { sprintf '%%%02X', ord }
                                 split //, encode_utf8('é' x 200)));
is($r->{status}, 200, 'name of 200 characters, 400 bytes: 200');

### tenants

$r = flows(tenant => 'tenant-b');
is_deeply(ids($r), [ @F{11, 12} ], "tenant-b lists its own flows only");
$r = flows(tenant => 'tenant-b', query => 'cocoa');
is_deeply(ids($r), [ $F{11} ], "tenant-b's filter");
$r = flows(tenant => 'tenant-c');
is($r->{status}, 200, 'a tenant without flows: 200');
is_deeply($r->{json}{data}, [], 'data []');

### credentials: an API key and a bearer token, of one tenant

$r = flows(key => undef);
is_error($r, 401, 'Authentication required.', 'An API key is required.',
         'a token without a key');
is($r->{headers}{'www-authenticate'}, 'Bearer', 'challenge');
$r = flows(token => undef);
is_error($r, 401, 'Authentication required.', 'A bearer token is required.',
         'a key without a token');
$r = flows(token => undef, key => undef);
is($r->{status}, 401, 'neither: 401');
is_error(flows(key => $key_r), 401, 'Invalid API key.',
         'The API key is not valid.', 'a revoked key');
is_error(flows(key => 'plk_00000000000011aa.' . 'A' x 43), 401,
         'Invalid API key.', 'The API key is not valid.',
         'a wrong secret for a known key id');
$r = flows(token => token('tenant-a') . 'x');
is($r->{status}, 401, 'a bad token');
like($r->{headers}{'www-authenticate'} // '', qr/invalid_token/,
     'invalid_token');
is_error(flows(key => $key_b), 403, 'Access denied.',
         'The API key and the token belong to other tenants.',
         "tenant-a's token with tenant-b's key");
is_error(flows(headers => { tenantId => 'tenant-b' }), 403, 'Access denied.',
         'The tenantId header does not match the credentials.',
         'a tenantId header of another tenant');
$r = flows(headers => { tenantId => 'tenant-a' });
is($r->{status}, 200, 'a tenantId header that agrees: 200');

### methods, paths

$r = flows(method => 'POST');
is($r->{status}, 405, 'POST: 405');
is($r->{headers}{allow}, 'GET, HEAD', 'Allow');
is($r->{json}{statusCode}, 405, 'Envelope B');
$r = flows(method => 'HEAD');
is($r->{status}, 200, 'HEAD: 200');
is($r->{content}, '', 'HEAD: no body');
$r = $t->request('GET', '/api/v1/trades/other',
                 headers => { apiKey => $key_a,
                              Authorization => 'Bearer ' . token() });
is($r->{status}, 404, 'an unknown path: 404');
is($r->{json}{status}, JSON::PP::false, 'in Envelope B');

### configuration: the default needs a token key

$t->config_refused(<<'EOF', qr/"platform_trades".*"platform_jwt_key"/,
    server {
        listen 127.0.0.1:%%PORT%%;
        location /api/v1/trades/ { platform_trades; }
    }
EOF
    'platform_trades without a key');

$t->done;
done_testing;
