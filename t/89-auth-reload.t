#!/usr/bin/perl

# Keys are read when the configuration is loaded: a reload rotates them.
# Tokens the old workers verified and cached are not carried over: after
# the reload a token of the removed key is refused, a token of the new
# key accepted, without a restart and while requests keep flowing.

use strict;
use warnings;

use lib 't/lib';
use JSON::PP ();
use Test::More;
use Platform::Test;
use Platform::JWT;

my $t = Platform::Test->new(workers => 2);
my $dir = $t->testdir;
my $k = Platform::JWT::keys("$dir/keys");

my ($n, $e) = map { Platform::JWT::b64url($_) }
    Platform::JWT::rsa_public_numbers($k->{rsa_pub});
my ($n2, $e2) = map { Platform::JWT::b64url($_) }
    Platform::JWT::rsa_public_numbers($k->{rsa2_pub});

sub jwks {
    my (@keys) = @_;
    Platform::Test::_spew("$dir/jwks.json",
                          JSON::PP->new->encode({ keys => \@keys }));
}

my $old = { kty => 'RSA', kid => 'old', alg => 'RS256', n => $n, e => $e };
my $new = { kty => 'RSA', kid => 'new', alg => 'RS256', n => $n2,
            e => $e2 };

jwks($old);

my $conf = <<'EOF2';
    platform_jwt_jwks %%TESTDIR%%/jwks.json;

    server {
        listen 127.0.0.1:%%PORT%%;
        location /api/ { platform_persons; }
    }
EOF2

$t->run($conf);

my $acct = 'c0000000-0000-4000-8000-0000000000c1';

$t->psql(<<"SQL");
INSERT INTO person_accounts (id, tenant_id, person_id, account_name)
VALUES ('$acct', 'tenant-a', 'e0000000-0000-4000-8000-000000000001', 'Ada');
SQL

sub token {
    my ($kid, $key) = @_;
    return Platform::JWT::sign(
        alg => 'RS256', key => $key, header => { kid => $kid },
        claims => { tenantId => 'tenant-a', exp => int(time) + 600 });
}

sub account {
    my ($token) = @_;
    return $t->request('GET', "/api/v1/PersonAccounts/$acct/get",
                       headers => { Authorization => "Bearer $token" });
}

my $old_token = token('old', $k->{rsa});
my $new_token = token('new', $k->{rsa2});

# every worker verifies and caches the old token (two workers, so ask often)

is(account($old_token)->{status}, 200, "old key's token: 200") for 1 .. 6;

my $r = account($new_token);
is($r->{status}, 401, "new key's token before the reload: 401");
is($r->{json}{errors}[0], 'The token key is unknown.', 'its kid is unknown');

# rotate: the set holds only the new key now

jwks($new);

my $during = $t->request_async('GET', "/api/v1/PersonAccounts/$acct/get",
                               headers => { Authorization =>
                                            "Bearer $new_token" });

ok($t->reload, 'reloaded with the new key set');

$during->wait;

for (1 .. 6) {
    $r = account($old_token);
    is($r->{status}, 401, "old key's token after the reload: 401");
}

is($r->{json}{errors}[0], 'The token key is unknown.',
   'the cached verification did not survive the reload');

is(account($new_token)->{status}, 200, "new key's token: 200") for 1 .. 4;

# a key set that cannot be read keeps the running configuration

Platform::Test::_spew("$dir/jwks.json", '{"keys": [');

my $check = $t->check_config;
ok(!$check->{ok}, 'nginx -t refuses a broken key set');
like($check->{output}, qr/jwks\.json/, 'naming the file');

$t->ignore_log(qr/invalid JSON in JWKS|reconfigure/);

$t->reload;

is(account($new_token)->{status}, 200,
   'after a refused reload the running key set still serves');

$t->done;
done_testing;
