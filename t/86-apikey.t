#!/usr/bin/perl

# API keys (header apiKey): scripts/apikey create/revoke, what is stored,
# every refusal with its 401/403 body, revocation against the lookup cache,
# scopes, keys combined with bearer tokens, and OTP/TMS tightened with
# "platform_auth apikey tenant".

# platform-test: serial (time bounds)

use strict;
use warnings;
use utf8;

use lib 't/lib';
use Digest::SHA qw(sha256_hex);
use File::Temp ();
use POSIX ();
use Test::More;
use Time::HiRes qw(time);
use Platform::Test;
use Platform::JWT;

my $t = Platform::Test->new();
my $k = Platform::JWT::keys($t->testdir . '/keys');
my $top = $ENV{PLATFORM_TEST_TOP} // '.';

my $r;

my %port = (apikey => 1, cache60 => 2, cache1 => 3, scope => 4, both => 5,
            tight => 6, open => 7);

$t->run(<<'EOF');
    server {
        listen 127.0.0.1:%%PORT%%;
        location /api/ {
            platform_persons;
            platform_auth apikey;
            platform_apikey_cache_time 0;
        }
    }

    server {
        listen 127.0.0.1:%%PORT_2%%;
        location /api/ {
            platform_persons;
            platform_auth apikey;
            platform_apikey_cache_time 60s;
        }
    }

    server {
        listen 127.0.0.1:%%PORT_3%%;
        location /api/ {
            platform_persons;
            platform_auth apikey;
            platform_apikey_cache_time 1s;
        }
    }

    server {
        listen 127.0.0.1:%%PORT_4%%;
        location /api/ {
            platform_persons;
            platform_auth apikey;
            platform_apikey_cache_time 0;
            platform_apikey_scope trades;
        }
    }

    server {
        listen 127.0.0.1:%%PORT_5%%;
        location /api/ {
            platform_persons;
            platform_auth bearer apikey;
            platform_apikey_cache_time 0;
            platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;
        }
    }

    server {
        listen 127.0.0.1:%%PORT_6%%;
        platform_auth apikey tenant;
        platform_apikey_cache_time 0;
        location /validate-otp/ { platform_otp; }
        location /tms/ { platform_tms; }
    }

    server {
        listen 127.0.0.1:%%PORT_7%%;
        # the TMS vehicles and drivers routes default to a bearer token
        platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;
        location /validate-otp/ { platform_otp; }
        location /tms/ { platform_tms; }
    }
EOF

my $acct_a = 'c0000000-0000-4000-8000-00000000000a';
my $acct_b = 'c0000000-0000-4000-8000-00000000000b';

$t->psql(<<"SQL");
INSERT INTO person_accounts (id, tenant_id, person_id, account_name, created)
VALUES ('$acct_a', 'tenant-a', 'e0000000-0000-4000-8000-000000000001',
        'Ada', now()),
       ('$acct_b', 'tenant-b', 'e0000000-0000-4000-8000-000000000002',
        'Bola', now());
SQL

sub slurp {
    my ($file) = @_;
    open my $fh, '<', $file or return '';
    local $/;
    return scalar(<$fh>) // '';
}

# scripts/apikey on the test's database: (exit status, stdout, stderr)
sub apikey {
    my (@args) = @_;
    local $ENV{PLATFORM_PG} = $t->pg_admin_dsn;
    local $ENV{PATH} = $ENV{PLATFORM_TEST_PG_BINDIR}
        ? "$ENV{PLATFORM_TEST_PG_BINDIR}:$ENV{PATH}" : $ENV{PATH};
    my $err = File::Temp->new;
    my $pid = open(my $fh, '-|') // die "fork: $!\n";
    if ($pid == 0) {
        open STDERR, '>', $err->filename or POSIX::_exit(1);
        open STDIN, '<', '/dev/null';
        exec("$top/scripts/apikey", @args) or POSIX::_exit(127);
    }
    local $/;
    my $out = <$fh> // '';
    close $fh;
    return ($? >> 8, $out, slurp($err->filename));
}

# a key made by scripts/apikey: (id, key)
sub create_key {
    my ($tenant, $scope) = @_;
    my ($rc, $out, $err) = apikey('create', '--tenant', $tenant,
                                  '--scope', $scope);
    die "apikey create: $rc $err$out\n" if $rc != 0;
    my ($id) = $out =~ /^id: (\S+)$/m;
    my ($key) = $out =~ /^key: (\S+)$/m;
    die "apikey create printed: $out\n" unless $id && $key;
    return ($id, $key);
}

# a key inserted by hand: (id, key)
sub insert_key {
    my ($id, $tenant, $scope, %o) = @_;
    my @c = ('A' .. 'Z', 'a' .. 'z', '0' .. '9', '-', '_');
    my $key = "plk_$id." . join('', map { $c[int rand @c] } 1 .. 43);
    my $revoked = $o{revoked} ? 'now()' : 'NULL';
    $t->psql("INSERT INTO api_keys (id, tenant_id, scope, key_digest,"
             . " revoked_at) VALUES ('$id', '$tenant', '$scope',"
             . " sha256(convert_to('$key', 'UTF8')), $revoked)");
    return ($id, $key);
}

sub get {
    my (%o) = @_;
    my %h = %{$o{headers} // {}};
    $h{apiKey} = $o{key} if defined $o{key};
    $h{Authorization} = "Bearer $o{token}" if defined $o{token};
    my $acct = $o{acct} // $acct_a;
    return $t->request('GET', $o{path} // "/api/v1/PersonAccounts/$acct/get",
                       port => $t->port($port{$o{at} // 'apikey'}),
                       headers => \%h);
}

sub token {
    my ($tenant) = @_;
    return Platform::JWT::sign(
        alg => 'HS256', key => Platform::JWT::secret($k->{hs256}),
        claims => { sub => 'user-1', tenantId => $tenant,
                    exp => int(time) + 600 });
}

sub envelope_a {
    my ($r, $status, $message, $detail, $name) = @_;
    is($r->{status}, $status, "$name: $status");
    is_deeply($r->{json}, {
        succeeded => JSON::PP::false, message => $message,
        errors => [ $detail ], data => undef,
    }, "$name: body") or diag($r->{content});
}

sub is_missing {
    my ($r, $name) = @_;
    envelope_a($r, 401, 'Authentication required.', 'An API key is required.',
               $name);
    is($r->{headers}{'www-authenticate'}, 'Bearer', "$name: challenge");
}

sub is_refused {
    my ($r, $name) = @_;
    envelope_a($r, 401, 'Invalid API key.', 'The API key is not valid.',
               $name);
    is($r->{headers}{'www-authenticate'}, 'Bearer', "$name: challenge");
}

sub is_account {
    my ($r, $acct, $name) = @_;
    is($r->{status}, 200, "$name: 200") or diag($r->{content});
    is($r->{json}{succeeded}, JSON::PP::true, "$name: succeeded");
    is($r->{json}{data}{id}, $acct, "$name: the account");
}

### scripts/apikey create

my ($rc, $out, $err) = apikey('create', '--tenant', 'tenant-a',
                              '--scope', 'trades');
is($rc, 0, 'apikey create: exit 0') or diag($err);
like($out, qr/\Aid: [0-9a-f]{16}\nkey: \S+\n\z/,
     'apikey create prints exactly the id and key lines');
like($err, qr/once/, 'apikey create: the note on stderr says "once"');
my ($id_a) = $out =~ /^id: (\S+)$/m;
my ($key_a) = $out =~ /^key: (\S+)$/m;
like($key_a, qr/^plk_\Q$id_a\E\.[A-Za-z0-9_-]{43}$/, 'key format');
is(length $key_a, 64, 'the key has 64 characters');

is($t->psql("SELECT tenant_id || ' ' || scope || ' '"
            . " || (revoked_at IS NULL) FROM api_keys WHERE id = '$id_a'"),
   'tenant-a trades true', 'row: tenant, scope, not revoked');
is($t->psql("SELECT encode(key_digest, 'hex') FROM api_keys"
            . " WHERE id = '$id_a'"),
   sha256_hex($key_a), 'key_digest is SHA-256 of the key');
my ($secret_a) = $key_a =~ /\.(.*)$/;
is($t->psql("SELECT count(*) FROM api_keys k"
            . " WHERE strpos(k::text, '$secret_a') > 0"
            . " OR strpos(encode(k.key_digest, 'escape'), '$secret_a') > 0"
            . " OR strpos(encode(k.key_digest, 'hex'),"
            . "           encode(convert_to('$secret_a', 'UTF8'), 'hex')) > 0"),
   '0', 'neither the key nor its secret is stored');

($rc, $out, $err) = apikey('create', '--tenant', 'tenant:a',
                           '--scope', 'trades');
isnt($rc, 0, 'apikey create refuses a tenant with a colon');
($rc, $out, $err) = apikey('create', '--tenant', 'tenant-a');
isnt($rc, 0, 'apikey create without --scope fails');
is($out, '', 'and prints no key');

my ($id_b, $key_b) = insert_key('00000000000000b1', 'tenant-b', 'webhooks');
my (undef, $key_r) = insert_key('00000000000000c1', 'tenant-a', 'webhooks',
                                revoked => 1);

### refusals

is_missing(get(), 'no apiKey header');
is_missing(get(token => token('tenant-a')),
           'a bearer token where an API key is required');

my $unknown_key = 'plk_0123456789abcdef.' . ('A' x 43);
my $unknown = get(key => $unknown_key);
is_refused($unknown, 'unknown key');

for my $bad ('hello', 'plk_', "plk_$id_a", "plk_$id_a.",
             substr($key_a, 0, 63), "${key_a}x", uc($key_a),
             'plk_' . ('g' x 16) . '.' . ('A' x 43),
             "plk_$id_a:" . substr($key_a, 21), " $key_a x")
{
    is_refused(get(key => $bad), "malformed key '$bad'");
}

my $wrong_secret = "plk_$id_a." . ('B' x 43);
$wrong_secret = "plk_$id_a." . ('C' x 43) if $wrong_secret eq $key_a;
$r = get(key => $wrong_secret);
is_refused($r, 'the id of a key with another secret');
is($r->{content}, $unknown->{content}, 'same body as an unknown key');

my $revoked = get(key => $key_r);
is_refused($revoked, 'revoked key');
is($revoked->{content}, $unknown->{content},
   'a revoked key gets exactly the body of an unknown one');
is($revoked->{headers}{'www-authenticate'},
   $unknown->{headers}{'www-authenticate'}, 'and the same challenge');

### valid keys: the tenant is the key's

is_account(get(key => $key_a), $acct_a, 'valid key');
$r = get(key => $key_a, acct => $acct_b);
is($r->{status}, 404, "another tenant's account is 404");
is($r->{json}{message}, 'Person account not found.', '404 message');
is_account(get(key => $key_b, acct => $acct_b), $acct_b,
           "tenant-b's key reads tenant-b's account");
is(get(key => $key_b)->{status}, 404, "tenant-b's key: tenant-a's account 404");

envelope_a(get(key => $key_a, headers => { tenantId => 'tenant-b' }), 403,
           'Access denied.',
           'The tenantId header does not match the credentials.',
           'tenantId header differing from the key');
is_account(get(key => $key_a, headers => { tenantId => 'tenant-a' }),
           $acct_a, 'tenantId header equal to the key');

### French

envelope_a(get(headers => { 'Accept-Language' => 'fr' }), 401,
           'Authentification requise.', "Une clé d'API est requise.",
           'fr: no key');
$r = get(key => $unknown_key, headers => { 'Accept-Language' => 'fr' });
envelope_a($r, 401, "Clé d'API invalide.", "La clé d'API n'est pas valide.",
           'fr: unknown key');
is($r->{headers}{'content-language'}, 'fr', 'fr: Content-Language');

### revocation against the lookup cache

# 60 s: a revoked key is still served from the worker's cache
my ($id_60, $key_60) = create_key('tenant-a', 'trades');
is_account(get(key => $key_60, at => 'cache60'), $acct_a,
           'cache 60s: valid key');
($rc, $out, $err) = apikey('revoke', $id_60);
is($rc, 0, 'apikey revoke: exit 0') or diag($err);
is($out, "revoked: $id_60\n", 'apikey revoke prints the id');
isnt($t->psql("SELECT revoked_at FROM api_keys WHERE id = '$id_60'"), '',
     'revoked_at is set');
is_account(get(key => $key_60, at => 'cache60'), $acct_a,
           'cache 60s: still served right after the revocation');
is_refused(get(key => $key_60), 'but refused where nothing is cached');

($rc, $out, $err) = apikey('revoke', $id_60);
is($rc, 1, 'revoking it again: exit 1');
like($err, qr/\Q$id_60\E/, 'with a message naming the id');
($rc) = apikey('revoke', 'fedcba9876543210');
is($rc, 1, 'revoking an unknown id: exit 1');

# 1 s: the revocation shows within the cache time
my ($id_1, $key_1) = create_key('tenant-a', 'trades');
is_account(get(key => $key_1, at => 'cache1'), $acct_a, 'cache 1s: valid key');
($rc) = apikey('revoke', $id_1);
is($rc, 0, 'revoked');
my $start = time;
my $last;
ok($t->wait_until(sub {
    $last = get(key => $key_1, at => 'cache1');
    $last->{status} == 401;
}, 5), 'cache 1s: the revoked key is refused within 5 s');
is_refused($last, 'cache 1s: after the cache time');
cmp_ok(time - $start, '<', 3.5, 'within about the cache time');

# a key inserted after a lookup found nothing is accepted once the cache
# time has passed
my ($id_n, $key_n) = ('00000000000000d1');
$key_n = "plk_$id_n." . ('D' x 43);
is_refused(get(key => $key_n, at => 'cache1'), 'cache 1s: not yet a key');
$t->psql("INSERT INTO api_keys (id, tenant_id, scope, key_digest)"
         . " VALUES ('$id_n', 'tenant-a', 'trades',"
         . " sha256(convert_to('$key_n', 'UTF8')))");
ok($t->wait_until(sub {
    get(key => $key_n, at => 'cache1')->{status} == 200 }, 5),
   'cache 1s: a key inserted later is accepted within 5 s');

### scope

is_account(get(key => $key_a, at => 'scope'), $acct_a,
           'scope trades accepted');
$r = get(key => $key_b, acct => $acct_b, at => 'scope');
envelope_a($r, 403, 'Access denied.',
           'The API key is not valid for this endpoint.',
           'scope webhooks refused');
ok(!defined $r->{headers}{'www-authenticate'}, 'no challenge on 403');
is_refused(get(key => $key_r, at => 'scope'),
           'a revoked key of another scope: 401, not 403');
is_refused(get(key => $unknown_key, at => 'scope'),
           'unknown key at the scoped location');

### bearer and apikey together

my $tok_a = token('tenant-a');
$r = get(at => 'both');
is($r->{status}, 401, 'both required: nothing is 401');
is($r->{headers}{'www-authenticate'}, 'Bearer', 'challenge');
envelope_a(get(at => 'both', key => $key_a), 401, 'Authentication required.',
           'A bearer token is required.', 'both required: key only');
$r = get(at => 'both', token => $tok_a);
envelope_a($r, 401, 'Authentication required.', 'An API key is required.',
           'both required: token only');
is($r->{headers}{'www-authenticate'}, 'Bearer', 'token only: challenge');
is_account(get(at => 'both', token => $tok_a, key => $key_a), $acct_a,
           'both required: both given');
$r = get(at => 'both', token => $tok_a, key => $key_b);
is($r->{status}, 403, "key tenant differs from the token's: 403");
is($r->{json}{message}, 'Access denied.', '403 message');
is($r->{json}{succeeded}, JSON::PP::false, '403 Envelope A');
is_refused(get(at => 'both', token => $tok_a, key => $unknown_key),
           'token and an unknown key');
$r = get(at => 'both', token => $tok_a . 'x', key => $key_a);
is($r->{status}, 401, 'a bad token and a good key');
like($r->{headers}{'www-authenticate'}, qr/^Bearer error="invalid_token"/,
     'bad token: invalid_token');
envelope_a(get(at => 'both', token => $tok_a, key => $key_a,
               headers => { tenantId => 'tenant-b' }), 403,
           'Access denied.',
           'The tenantId header does not match the credentials.',
           'both: tenantId header differing');

### OTP and TMS tightened with "platform_auth apikey tenant"

my $tenant = "t86-$$";
my (undef, $key_t) = create_key($tenant, 'otp');
my %th = (tenantId => $tenant, countryCode => 'NG');

sub otp {
    my ($code, %o) = @_;
    return get(path => "/validate-otp/$code", %o);
}

my $required_b = {
    status => JSON::PP::false, statusCode => 401,
    message => 'Authentication required.', data => {},
    errors => [ { message => 'Authentication required.',
                  descriptiveMessage => 'An API key is required.' } ],
};

$t->redis('SET', "otp:$tenant:NG:135790", '1', 'EX', '600');
$t->redis('SET', "otp:$tenant:NG:246802", '1', 'EX', '600');

$r = otp('135790', at => 'tight', headers => \%th);
is($r->{status}, 401, 'OTP tightened: no key is 401');
is($r->{headers}{'www-authenticate'}, 'Bearer', 'OTP: challenge');
is_deeply($r->{json}, $required_b, 'OTP: 401 in Envelope B')
    or diag($r->{content});
is($t->redis('EXISTS', "otp:$tenant:NG:135790"), '1',
   'OTP: the code is not consumed');

$r = otp('135790', at => 'tight', headers => \%th, key => $unknown_key);
is($r->{status}, 401, 'OTP: unknown key 401');
is_deeply($r->{json}, {
    status => JSON::PP::false, statusCode => 401,
    message => 'Invalid API key.', data => {},
    errors => [ { message => 'Invalid API key.',
                  descriptiveMessage => 'The API key is not valid.' } ],
}, 'OTP: invalid key in Envelope B') or diag($r->{content});

$r = otp('135790', at => 'tight', key => $key_t,
         headers => { countryCode => 'NG' });
is($r->{status}, 400, 'OTP: key but no tenantId header is 400');
is($r->{json}{message}, 'tenantId header is required.', 'names tenantId');

$r = otp('135790', at => 'tight', key => $key_t,
         headers => { tenantId => $tenant });
is($r->{status}, 400, 'OTP: key but no countryCode header is 400');
is($r->{json}{message}, 'countryCode header is required.',
   'names countryCode');

$r = otp('135790', at => 'tight', key => $key_a, headers => \%th);
is($r->{status}, 403, "OTP: tenantId header differs from the key's tenant");
is($r->{json}{statusCode}, 403, 'OTP: Envelope B');
is($r->{json}{errors}[0]{descriptiveMessage},
   'The tenantId header does not match the credentials.', 'OTP: detail');
is($t->redis('EXISTS', "otp:$tenant:NG:135790"), '1',
   'OTP: still not consumed');

$r = otp('135790', at => 'tight', key => $key_t, headers => \%th);
is($r->{status}, 200, 'OTP: key and headers: validated')
    or diag($r->{content});
is($r->{json}{message}, 'OTP code validated', 'OTP: message');

$r = otp('246802', at => 'open', headers => \%th);
is($r->{status}, 200, 'OTP without platform_auth: no key needed');

my $order = 'a0000000-0000-4000-8000-000000000086';
$t->psql(<<"SQL");
INSERT INTO delivery_orders (id, tenant_id, country_code, order_number,
                             pickup_address, dropoff_address)
VALUES ('$order', '$tenant', 'NG', 'DO-86', '{}', '{}');
SQL

$r = get(path => "/tms/delivery-orders/$order", at => 'tight',
         headers => \%th);
is($r->{status}, 401, 'TMS tightened: no key is 401');
is($r->{headers}{'www-authenticate'}, 'Bearer', 'TMS: challenge');
is_deeply($r->{json}, $required_b, 'TMS: 401 in Envelope B')
    or diag($r->{content});

$r = get(path => "/tms/delivery-orders/$order", at => 'tight',
         headers => \%th, key => $key_t);
is($r->{status}, 200, 'TMS: key and headers') or diag($r->{content});
is($r->{json}{data}{orderNumber}, 'DO-86', 'TMS: the order');

$r = get(path => "/tms/delivery-orders/$order", at => 'tight',
         headers => { %th, tenantId => 'tenant-a' }, key => $key_a);
is($r->{status}, 404, "TMS: another tenant's key and headers: 404");

$r = get(path => "/tms/delivery-orders/$order", at => 'open',
         headers => \%th);
is($r->{status}, 200, 'TMS without platform_auth: no key needed');

$t->done;
done_testing;
