#!/usr/bin/perl

# Bearer tokens (JWT) on the persons family: every way a token is refused,
# with its 401 challenge and Envelope A body; the algorithms HS256/384/512,
# RS256, ES256/384/512 and a JWKS; one spelling per token (base64url without
# stray bits, ECDSA with the low s); leeway, issuer, audience, the tenant
# claim against the tenantId header; the verified-token cache never outliving
# exp; and the configurations "nginx -t" refuses.

use strict;
use warnings;
use utf8;

use lib 't/lib';
use Test::More;
use Time::HiRes qw(sleep time);
use Platform::Test;
use Platform::JWT;

my $t = Platform::Test->new();
my $dir = $t->testdir;
my $k = Platform::JWT::keys("$dir/keys");

# one server per key set; the port's number names it below
my %port = (hs256 => 1, hs384 => 2, hs512 => 3, rs256 => 4, es256 => 5,
            jwks => 6, issaud => 7, leeway => 8, cache => 9, es384 => 10,
            es512 => 11);

$t->run(<<'EOF');
    # tokens of more than 8 KiB must reach the module
    large_client_header_buffers 4 32k;

    server {
        listen 127.0.0.1:%%PORT%%;
        location /api/ {
            platform_persons;
            platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;
            platform_jwt_cache off;
        }
    }

    server {
        listen 127.0.0.1:%%PORT_2%%;
        location /api/ {
            platform_persons;
            platform_jwt_key HS384 %%TESTDIR%%/keys/hs384.key;
        }
    }

    server {
        listen 127.0.0.1:%%PORT_3%%;
        location /api/ {
            platform_persons;
            platform_jwt_key HS512 %%TESTDIR%%/keys/hs512.key;
        }
    }

    server {
        listen 127.0.0.1:%%PORT_4%%;
        location /api/ {
            platform_persons;
            platform_jwt_key RS256 %%TESTDIR%%/keys/rsa.pub;
        }
    }

    server {
        listen 127.0.0.1:%%PORT_5%%;
        location /api/ {
            platform_persons;
            platform_jwt_key ES256 %%TESTDIR%%/keys/ec.pub;
        }
    }

    server {
        listen 127.0.0.1:%%PORT_6%%;
        location /api/ {
            platform_persons;
            platform_jwt_jwks %%TESTDIR%%/keys/jwks.json;
        }
    }

    server {
        listen 127.0.0.1:%%PORT_7%%;
        location /api/ {
            platform_persons;
            platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;
            platform_jwt_issuer "https://issuer.test/";
            platform_jwt_audience "platform-api";
        }
    }

    server {
        listen 127.0.0.1:%%PORT_8%%;
        location /api/ {
            platform_persons;
            platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;
            platform_jwt_leeway 30s;
        }
    }

    server {
        listen 127.0.0.1:%%PORT_9%%;
        location /api/ {
            platform_persons;
            platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;
            platform_jwt_cache on;
        }
    }

    server {
        listen 127.0.0.1:%%PORT_10%%;
        location /api/ {
            platform_persons;
            platform_jwt_key ES384 %%TESTDIR%%/keys/ec384.pub;
        }
    }

    server {
        listen 127.0.0.1:%%PORT_11%%;
        location /api/ {
            platform_persons;
            platform_jwt_key ES512 %%TESTDIR%%/keys/ec521.pub;
        }
    }
EOF

my $account = 'c0000000-0000-4000-8000-000000000001';
my $path = "/api/v1/PersonAccounts/$account/get";

$t->psql(<<"SQL");
INSERT INTO person_accounts (id, tenant_id, person_id, account_id,
    account_bic, account_type, account_name, currency, available_balance,
    account_limit, status_description, created, nuban_or_iban, purpose,
    comment, status, product_id, client_id)
VALUES ('$account', 'tenant-a', 'e0000000-0000-4000-8000-000000000001',
    'ACC-1', 'ABCDNGLA', 'SAVINGS', 'Ada Obi', 'NGN', 1500.50, 10000,
    'Active', '2025-03-04T05:06:07Z', '0123456789', 'savings', 'none',
    'ACTIVE', 'prod-1', 'client-1');
SQL

my $hs256 = Platform::JWT::secret($k->{hs256});
my $hs384 = Platform::JWT::secret($k->{hs384});
my $hs512 = Platform::JWT::secret($k->{hs512});
my $hs256_other = Platform::JWT::secret($k->{hs256_other});
my $rsa_pub_pem = do {
    open my $fh, '<', $k->{rsa_pub} or die "read $k->{rsa_pub}: $!\n";
    local $/;
    <$fh>;
};

# whole seconds: NumericDate claims as issuers write them
sub now { return int time }

# claims of a good token for tenant-a, with members replaced (undef: removed)
sub claims {
    my (%o) = @_;
    my $now = int time;
    my %c = (sub => 'user-1', tenantId => 'tenant-a', iat => $now,
             exp => $now + 300, %o);
    delete @c{grep { !defined $c{$_} } keys %c};
    return \%c;
}

# a token: HS256 with the first secret unless said otherwise
sub tok {
    my (%o) = @_;
    $o{claims} = claims(%{$o{claims} // {}});
    $o{alg} //= 'HS256';
    $o{key} //= $hs256 if $o{alg} eq 'HS256';
    return Platform::JWT::sign(%o);
}

sub get {
    my (%o) = @_;
    my %h = %{$o{headers} // {}};
    $h{Authorization} = "Bearer $o{token}" if defined $o{token};
    return $t->request('GET', $o{path} // $path,
                       port => $t->port($port{$o{at} // 'hs256'}),
                       headers => \%h);
}

sub is_ok {
    my ($r, $name) = @_;
    is($r->{status}, 200, "$name: 200")
        or diag($r->{headers}{'www-authenticate'} // '', ' ', $r->{content});
    is($r->{json}{succeeded}, JSON::PP::true, "$name: succeeded");
    is($r->{json}{data}{id}, $account, "$name: the account");
}

sub is_missing {
    my ($r, $name) = @_;
    is($r->{status}, 401, "$name: 401");
    is($r->{headers}{'www-authenticate'}, 'Bearer', "$name: bare challenge");
    is_deeply($r->{json}, {
        succeeded => JSON::PP::false, message => 'Authentication required.',
        errors => [ 'A bearer token is required.' ], data => undef,
    }, "$name: body") or diag($r->{content});
}

sub is_invalid {
    my ($r, $detail, $name) = @_;
    is($r->{status}, 401, "$name: 401");
    is($r->{headers}{'www-authenticate'},
       qq{Bearer error="invalid_token", error_description="$detail"},
       "$name: challenge");
    is_deeply($r->{json}, {
        succeeded => JSON::PP::false, message => 'Invalid token.',
        errors => [ $detail ], data => undef,
    }, "$name: body") or diag($r->{content});
}

my $MALFORMED = 'The token is malformed.';
my $TOO_LARGE = 'The token is too large.';
my $ALG = 'The token algorithm is not accepted.';
my $KID = 'The token key is unknown.';
my $SIG = 'The token signature is invalid.';
my $NO_EXP = 'The token has no expiry.';
my $EXPIRED = 'The token has expired.';
my $NOT_YET = 'The token is not valid yet.';
my $ISS = 'The token issuer is not accepted.';
my $AUD = 'The token audience is not accepted.';
my $TENANT = 'The token has no tenant.';

# a sanity check first: the good token is good
is_ok(get(token => tok()), 'HS256 token');

### no token

is_missing(get(), 'no Authorization header');
is_missing(get(headers => { Authorization => 'Basic dXNlcjpwYXNz' }),
           'Basic scheme');
is_missing(get(headers => { Authorization => 'Bearer' }), 'empty token');
is_missing(get(headers => { Authorization => 'Token ' . tok() }),
           'a token under another scheme');
is_ok(get(headers => { Authorization => 'bearer ' . tok() }),
      'scheme is case-insensitive');

### malformed

my $good = tok();
my ($h64, $c64, $s64) = split /\./, $good;

is_invalid(get(token => "$h64.$c64"), $MALFORMED, 'two parts');
is_invalid(get(token => "$good.$s64"), $MALFORMED, 'four parts');
is_invalid(get(token => '..'), $MALFORMED, 'three empty parts');
# signed as they are, so that the signature is not what is wrong
is_invalid(get(token => tok(claims_b64 => '!!!!')), $MALFORMED,
           'claims not base64url');
# JWS (RFC 7515 section 2) leaves the padding out
my ($padded) = grep { length($_) % 4 }
    map { Platform::JWT::b64url(JSON::PP->new->canonical->encode(
              claims(pad => 'p' x $_))) } 0 .. 2;
$padded .= '=' x (4 - length($padded) % 4);
is_invalid(get(token => tok(claims_b64 => $padded)), $MALFORMED,
           'claims with base64 padding');
is_invalid(get(token => tok(header_b64 => "*$h64")), $MALFORMED,
           'header not base64url');
# a decoder that stops at the first "=" would take the rest for padding
is_invalid(get(token => "$good=AAAA"), $MALFORMED,
           'a good token with "=AAAA" after its signature');
is_invalid(get(token => tok(header_json => '["HS256"]')), $MALFORMED,
           'header JSON not an object');
is_invalid(get(token => tok(header_json => '{"alg":"HS256"')), $MALFORMED,
           'header not JSON');
is_invalid(get(token => tok(claims_json => '"tenant-a"')), $MALFORMED,
           'claims JSON not an object');
is_invalid(get(token => tok(claims_json => '[{"tenantId":"tenant-a"}]')),
           $MALFORMED, 'claims JSON an array');
is_invalid(get(token => tok(claims_json => 'tenantId=tenant-a')), $MALFORMED,
           'claims not JSON');

### algorithm

is_invalid(get(token => tok(alg => 'none')), $ALG, 'alg none, unsigned');
is_invalid(get(token => tok(alg => 'none', signing_alg => 'HS256',
                            key => $hs256)),
           $ALG, 'alg none with an HS256 signature');
is_invalid(get(token => tok(alg => 'None')), $ALG, 'alg None');
is_invalid(get(token => tok(header => { alg => undef })), $ALG, 'no alg');
is_invalid(get(token => tok(header => { alg => 'hs256' })), $ALG,
           'alg in lower case');
is_invalid(get(token => tok(alg => 'HS512', key => $hs512)), $ALG,
           'HS512 token at the HS256 location');
is_invalid(get(token => tok(alg => 'RS256', key => $k->{rsa})), $ALG,
           'RS256 token at the HS256 location');
is_invalid(get(token => tok(alg => 'ES256', key => $k->{ec}), at => 'rs256'),
           $ALG, 'ES256 token at the RS256 location');
is_invalid(get(token => tok(alg => 'RS256', key => $k->{rsa}), at => 'es256'),
           $ALG, 'RS256 token at the ES256 location');

# RS256 -> HS256 confusion: HMAC keyed with the public key the server holds
for my $variant ([ 'PEM file', $rsa_pub_pem ],
                 [ 'PEM without newline', $rsa_pub_pem =~ s/\n\z//r ])
{
    my ($what, $key) = @$variant;
    my $forged = tok(alg => 'HS256', key => $key);
    is_invalid(get(token => $forged, at => 'rs256'), $ALG,
               "HS256 keyed with the RSA public key ($what), RS256 location");
    is_invalid(get(token => $forged), $SIG,
               "the same at an HS256 location with another secret ($what)");
    is_invalid(get(token => tok(alg => 'HS256', key => $key,
                                header => { kid => 'rsa-1' }), at => 'jwks'),
               $ALG, "the same with kid rsa-1 at the JWKS location ($what)");
}

### signature

my (undef, $tc64) = split /\./, tok(claims => { tenantId => 'tenant-b' });
my ($th64) = split /\./, tok(header => { kid => 'k1' });
is_invalid(get(token => "$h64.$tc64.$s64"), $SIG, 'tampered claims');
is_invalid(get(token => "$th64.$c64.$s64"), $SIG, 'tampered header');

# first character changed: no padding bits involved
my $flipped = (substr($s64, 0, 1) eq 'A' ? 'B' : 'A') . substr($s64, 1);
is_invalid(get(token => "$h64.$c64.$flipped"), $SIG, 'altered signature');
# an empty part: no base64url part at all
is_invalid(get(token => "$h64.$c64."), $MALFORMED, 'empty signature');
is_invalid(get(token => tok(key => $hs256_other)), $SIG,
           'HS256 signed with another secret');
is_invalid(get(token => tok(key => $hs256 . "\n")), $SIG,
           'HS256 keyed with the trailing newline of the file');

my $rs = tok(alg => 'RS256', key => $k->{rsa});
my ($rh64, $rc64, $rs64) = split /\./, $rs;
is_invalid(get(token => "$rh64.$tc64.$rs64", at => 'rs256'), $SIG,
           'RS256 with tampered claims');
is_invalid(get(token => tok(alg => 'RS256', key => $k->{rsa2}), at => 'rs256'),
           $SIG, 'RS256 signed with another RSA key');
is_invalid(get(token => tok(alg => 'RS256', signing_alg => 'ES256',
                            key => $k->{ec}), at => 'rs256'),
           $SIG, 'RS256 header, ES256 signature');
my (undef, undef, $es64) = split /\./, tok(alg => 'ES256', key => $k->{ec});
my ($eh64) = split /\./, tok(alg => 'ES256', key => $k->{ec});
is_invalid(get(token => "$eh64.$tc64.$es64", at => 'es256'), $SIG,
           'ES256 with tampered claims');

### expiry, nbf

is_invalid(get(token => tok(claims => { exp => undef })), $NO_EXP,
           'no exp');
is_invalid(get(token => tok(claims => { exp => '' . (int(time) + 300) })),
           $NO_EXP, 'exp as a string');
is_invalid(get(token => tok(claims => { exp => now() - 10 })), $EXPIRED,
           'expired 10 s ago');
is_invalid(get(token => tok(claims => { exp => now() - 86400 })), $EXPIRED,
           'expired a day ago');
is_invalid(get(token => tok(claims => { nbf => now() + 120 })), $NOT_YET,
           'nbf two minutes ahead');
is_ok(get(token => tok(claims => { nbf => now() - 10 })), 'nbf in the past');

is_ok(get(token => tok(claims => { exp => now() - 10 }), at => 'leeway'),
      'expired 10 s ago, inside a 30 s leeway');
is_invalid(get(token => tok(claims => { exp => now() - 45 }), at => 'leeway'),
           $EXPIRED, 'expired 45 s ago, outside a 30 s leeway');
is_ok(get(token => tok(claims => { nbf => now() + 10 }), at => 'leeway'),
      'nbf 10 s ahead, inside a 30 s leeway');
is_invalid(get(token => tok(claims => { nbf => now() + 45 }), at => 'leeway'),
           $NOT_YET, 'nbf 45 s ahead, outside a 30 s leeway');

### issuer and audience

my %ia = (iss => 'https://issuer.test/', aud => 'platform-api');
is_ok(get(token => tok(claims => \%ia), at => 'issaud'),
      'issuer and audience (string)');
is_ok(get(token => tok(claims => { %ia, aud => [ 'other', 'platform-api' ] }),
          at => 'issaud'),
      'audience in an array');
is_invalid(get(token => tok(claims => { %ia, iss => 'https://evil.test/' }),
               at => 'issaud'), $ISS, 'wrong issuer');
is_invalid(get(token => tok(claims => { %ia, iss => 'https://issuer.test' }),
               at => 'issaud'), $ISS, 'issuer without its final slash');
is_invalid(get(token => tok(claims => { %ia, iss => undef }), at => 'issaud'),
           $ISS, 'no issuer');
is_invalid(get(token => tok(claims => { %ia, aud => 'platform' }),
               at => 'issaud'), $AUD, 'wrong audience');
is_invalid(get(token => tok(claims => { %ia, aud => 'platform-api-x' }),
               at => 'issaud'), $AUD, 'audience with a suffix');
is_invalid(get(token => tok(claims => { %ia, aud => [ 'a', 'b' ] }),
               at => 'issaud'), $AUD, 'audience array without it');
is_invalid(get(token => tok(claims => { %ia, aud => [] }), at => 'issaud'),
           $AUD, 'empty audience array');
is_invalid(get(token => tok(claims => { %ia, aud => undef }), at => 'issaud'),
           $AUD, 'no audience');
is_ok(get(token => tok(claims => { iss => 'anyone', aud => 'anything' })),
      'issuer and audience are not checked where not configured');

### tenant claim

is_invalid(get(token => tok(claims => { tenantId => undef })), $TENANT,
           'no tenantId');
is_invalid(get(token => tok(claims => { tenantId => 42 })), $TENANT,
           'tenantId a number');
is_invalid(get(token => tok(claims => { tenantId => [ 'tenant-a' ] })),
           $TENANT, 'tenantId an array');
is_invalid(get(token => tok(claims_json => '{"exp":' . (int(time) + 300)
                                           . ',"tenantId":null}')),
           $TENANT, 'tenantId null');
is_invalid(get(token => tok(claims => { tenantId => '' })), $TENANT,
           'tenantId empty');
is_invalid(get(token => tok(claims => { tenantId => 'tenant:a' })), $TENANT,
           'tenantId with a colon');
is_invalid(get(token => tok(claims => { tenantId => 'tenant a' })), $TENANT,
           'tenantId with a space');
is_invalid(get(token => tok(claims => { tenantId => 'x' x 129 })), $TENANT,
           'tenantId of 129 characters');
my $r = get(token => tok(claims => { tenantId => 'x' x 128 }));
is($r->{status}, 404, 'tenantId of 128 characters is accepted (no account '
   . 'of that tenant: 404)');

### size

# a token of exactly $len bytes: a pad claim and a pad header member
sub sized_token {
    my ($len) = @_;
    for my $hpad (0 .. 3) {
        my %hdr = $hpad ? (header => { x => 'h' x $hpad }) : ();
        my $probe = tok(%hdr, claims => { pad => '' });
        my ($ph, $pc, $ps) = split /\./, $probe;
        my $clen = $len - length($ph) - length($ps) - 2;
        next if $clen % 4 == 1;
        my $bytes = int(3 * $clen / 4);
        my $base = length Platform::JWT::b64url_decode($pc);
        my $token = tok(%hdr, claims => { pad => 'p' x ($bytes - $base) });
        return $token if length $token == $len;
    }
    die "no token of $len bytes\n";
}

my $big = sized_token(8192);
is(length $big, 8192, 'a token of 8192 bytes');
is_ok(get(token => $big), 'a token of 8192 bytes');
is_invalid(get(token => sized_token(8193)), $TOO_LARGE,
           'a token of 8193 bytes');
is_invalid(get(token => tok(claims => { pad => 'p' x 20000 })), $TOO_LARGE,
           'a token of 27 KB');

### the algorithms

is_ok(get(token => tok(alg => 'HS384', key => $hs384), at => 'hs384'), 'HS384');
is_ok(get(token => tok(alg => 'HS512', key => $hs512), at => 'hs512'), 'HS512');
is_ok(get(token => tok(alg => 'RS256', key => $k->{rsa}), at => 'rs256'),
      'RS256');
is_ok(get(token => tok(alg => 'RS256', key => $k->{rsa},
                       header => { kid => 'whatever' }), at => 'rs256'),
      'RS256: kid ignored with platform_jwt_key');
is_ok(get(token => tok(alg => 'ES256', key => $k->{ec}), at => 'es256'),
      'ES256');
# ECDSA signatures differ each time: a few, so that r or s with a leading
# zero byte turn up now and then
my $es_ok = 0;
for (1 .. 20) {
    $es_ok++ if get(token => tok(alg => 'ES256', key => $k->{ec},
                                 claims => { n => $_ }),
                    at => 'es256')->{status} == 200;
}
is($es_ok, 20, 'twenty ES256 tokens');
is_invalid(get(token => tok(alg => 'HS384', key => $hs256), at => 'hs384'),
           $SIG, 'HS384 keyed with the HS256 secret');
is_ok(get(token => tok(alg => 'ES384', key => $k->{ec384}), at => 'es384'),
      'ES384');
is_ok(get(token => tok(alg => 'ES512', key => $k->{ec521}), at => 'es512'),
      'ES512');

### one spelling per token

# base64url: the low bits of a part's last character that make no byte
# (4 of them at a length of 4k + 2, 2 at 4k + 3) must be zero; a lenient
# decoder gives the same bytes for each of their values

my $spare = tok();
my ($ph64, $pc64, $ps64) = split /\./, $spare;
is(length $ps64, 43, 'an HS256 signature: 43 characters, 2 unused bits');
is_ok(get(token => $spare), 'HS256 token of a canonical spelling');
my $ps64_spare = Platform::JWT::spare_bits($ps64);
is(Platform::JWT::b64url_decode($ps64_spare),
   Platform::JWT::b64url_decode($ps64),
   'the signature with a spare bit set: the same bytes, leniently');
is_invalid(get(token => "$ph64.$pc64.$ps64_spare"), $MALFORMED,
           'HS256 signature with a spare bit set');

# a pad member that gives the part a length of 4k + $mod
sub spare_pad {
    my ($part, $mod) = @_;
    for my $n (0 .. 3) {
        my %pad = $part eq 'header' ? (header => { x => 'x' x $n })
                                    : (claims => { pad => 'p' x $n });
        my @p = split /\./, tok(%pad);
        return %pad if length($p[$part eq 'header' ? 0 : 1]) % 4 == $mod;
    }
    die "no $part of length 4k + $mod\n";
}

for my $part (qw(header claims)) {
    for my $mod (2, 3) {
        my %pad = spare_pad($part, $mod);
        is_ok(get(token => tok(%pad)), "$part of length 4k + $mod");
        # signed as sent, so that only the spelling is wrong
        is_invalid(get(token => tok(%pad, spare_bits => $part)), $MALFORMED,
                   "$part of length 4k + $mod with a spare bit set");
    }
}

for my $v ([ 'rs256', 'RS256', $k->{rsa} ], [ 'es256', 'ES256', $k->{ec} ]) {
    my ($at, $alg, $key) = @$v;
    my (undef, undef, $ss) = split /\./, tok(alg => $alg, key => $key);
    is(length($ss) % 4, 2, "$alg signature: 4 unused bits");
    is_invalid(get(token => tok(alg => $alg, key => $key,
                                spare_bits => 'signature'), at => $at),
               $MALFORMED, "$alg signature with a spare bit set");
}

# ECDSA: (r, n - s) verifies as well as (r, s); only s <= n / 2 is taken
# (the signer makes those); r or s of zero is no signature

for my $v ([ 'es256', 'ES256', $k->{ec}, 32 ],
           [ 'es384', 'ES384', $k->{ec384}, 48 ],
           [ 'es512', 'ES512', $k->{ec521}, 66 ],
           [ 'jwks', 'ES256', $k->{ec}, 32, { kid => 'ec-1' } ])
{
    my ($at, $alg, $key, $size, $header) = @$v;
    my $name = $at eq 'jwks' ? "$alg (JWKS)" : $alg;
    my $token = tok(alg => $alg, key => $key, header => $header);
    my ($eh, $ec, $es) = split /\./, $token;
    my $raw = Platform::JWT::b64url_decode($es);

    is_ok(get(token => $token, at => $at), "$name with the low s");
    is_invalid(get(token => "$eh.$ec." . Platform::JWT::ecdsa_twin($alg, $es),
                   at => $at),
               $SIG, "$name: the same token with s replaced by n - s");
    is_invalid(get(token => tok(alg => $alg, key => $key, header => $header,
                                high_s => 1), at => $at),
               $SIG, "$name signed with the high s");

    my $r0 = ("\0" x $size) . substr($raw, $size);
    my $s0 = substr($raw, 0, $size) . ("\0" x $size);
    is_invalid(get(token => "$eh.$ec." . Platform::JWT::b64url($r0),
                   at => $at), $SIG, "$name with r zero");
    is_invalid(get(token => "$eh.$ec." . Platform::JWT::b64url($s0),
                   at => $at), $SIG, "$name with s zero");
}

### JWKS

is_ok(get(token => tok(alg => 'RS256', key => $k->{rsa},
                       header => { kid => 'rsa-1' }), at => 'jwks'),
      'JWKS kid rsa-1');
is_ok(get(token => tok(alg => 'ES256', key => $k->{ec},
                       header => { kid => 'ec-1' }), at => 'jwks'),
      'JWKS kid ec-1 (ES256 inferred from the curve)');
is_ok(get(token => tok(alg => 'HS256', key => $hs256,
                       header => { kid => 'hs-1' }), at => 'jwks'),
      'JWKS kid hs-1 (oct)');
is_invalid(get(token => tok(alg => 'RS256', key => $k->{rsa},
                            header => { kid => 'rsa-2' }), at => 'jwks'),
           $KID, 'JWKS unknown kid');
is_invalid(get(token => tok(alg => 'RS256', key => $k->{rsa}), at => 'jwks'),
           $KID, 'JWKS token without kid');
is_invalid(get(token => tok(alg => 'RS256', key => $k->{rsa},
                            header => { kid => '' }), at => 'jwks'),
           $KID, 'JWKS empty kid');
is_invalid(get(token => tok(alg => 'RS256', signing_alg => 'ES256',
                            key => $k->{ec}, header => { kid => 'rsa-1' }),
               at => 'jwks'),
           $SIG, 'JWKS kid rsa-1, signed with the EC key');
is_invalid(get(token => tok(alg => 'ES256', key => $k->{ec},
                            header => { kid => 'rsa-1' }), at => 'jwks'),
           $ALG, 'JWKS kid rsa-1 with alg ES256');
is_invalid(get(token => tok(alg => 'RS256', key => $k->{rsa2},
                            header => { kid => 'rsa-1' }), at => 'jwks'),
           $SIG, 'JWKS kid rsa-1, signed with another RSA key');
is_invalid(get(token => tok(alg => 'HS256', key => $hs256_other,
                            header => { kid => 'hs-1' }), at => 'jwks'),
           $SIG, 'JWKS kid hs-1, another secret');
is_invalid(get(token => tok(alg => 'none', header => { kid => 'rsa-1' }),
               at => 'jwks'),
           $ALG, 'JWKS kid rsa-1 with alg none');

### French

$r = get(headers => { 'Accept-Language' => 'fr' });
is($r->{status}, 401, 'fr: no token 401');
is($r->{headers}{'www-authenticate'}, 'Bearer', 'fr: challenge');
is($r->{headers}{'content-language'}, 'fr', 'fr: Content-Language');
is_deeply($r->{json}, {
    succeeded => JSON::PP::false, message => 'Authentification requise.',
    errors => [ "Un jeton d'accès (Bearer) est requis." ], data => undef,
}, 'fr: body') or diag($r->{content});

$r = get(token => tok(alg => 'none'),
         headers => { 'Accept-Language' => 'fr-FR,fr;q=0.9' });
is($r->{status}, 401, 'fr: bad token 401');
is_deeply($r->{json}, {
    succeeded => JSON::PP::false, message => 'Jeton invalide.',
    errors => [ "L'algorithme du jeton n'est pas accepté." ], data => undef,
}, 'fr: bad token body') or diag($r->{content});
is($r->{headers}{'content-language'}, 'fr', 'fr-FR: Content-Language');
like($r->{headers}{'www-authenticate'}, qr/^Bearer error="invalid_token"/,
     'fr: challenge');

$r = get(headers => { 'Accept-Language' => 'de' });
is($r->{json}{message}, 'Authentication required.', 'de falls back to en');

### tenantId header against the claim

my $mismatch = {
    succeeded => JSON::PP::false, message => 'Access denied.',
    errors => [ 'The tenantId header does not match the credentials.' ],
    data => undef,
};

$r = get(token => tok(), headers => { tenantId => 'tenant-b' });
is($r->{status}, 403, 'tenantId header differs from the claim: 403');
ok(!defined $r->{headers}{'www-authenticate'}, 'no challenge on 403');
is_deeply($r->{json}, $mismatch, '403 body') or diag($r->{content});

$r = get(token => tok(), headers => { tenantId => 'tenant-b',
                                      'Accept-Language' => 'fr' });
is($r->{status}, 403, 'fr: 403');
is_deeply($r->{json}, {
    succeeded => JSON::PP::false, message => 'Accès refusé.',
    errors => [ "L'en-tête tenantId ne correspond pas aux identifiants." ],
    data => undef,
}, 'fr: 403 body') or diag($r->{content});

is_ok(get(token => tok(), headers => { tenantId => 'tenant-a' }),
      'tenantId header equal to the claim');

# the tenant is the token's: another tenant's token does not see the account
$r = get(token => tok(claims => { tenantId => 'tenant-b' }));
is($r->{status}, 404, "tenant-b's token: tenant-a's account is 404");
is($r->{json}{succeeded}, JSON::PP::false, '404 in Envelope A');

### the verified-token cache does not outlive exp

my $exp = int(time) + 3;
my $short = tok(claims => { exp => $exp });
is_ok(get(token => $short, at => 'cache'), 'cache: token valid for ~3 s');
is_ok(get(token => $short, at => 'cache'), 'cache: again (cached)');

$r = get(token => $short, at => 'cache', headers => { tenantId => 'tenant-b' });
is($r->{status}, 403, 'cache: a cached token still meets the header check');

my ($sh64, $sc64, $ss64) = split /\./, $short;
my $sflip = (substr($ss64, 0, 1) eq 'A' ? 'B' : 'A') . substr($ss64, 1);
is_invalid(get(token => "$sh64.$sc64.$sflip", at => 'cache'), $SIG,
           'cache: a cached token with another signature');

my ($oh64, $oc64) = split /\./, tok(claims => { exp => $exp,
                                               tenantId => 'tenant-b' });
is_invalid(get(token => "$sh64.$oc64.$ss64", at => 'cache'), $SIG,
           'cache: the cached signature on other claims');

sleep($exp + 1.5 - time) if time < $exp + 1.5;
is_invalid(get(token => $short, at => 'cache'), $EXPIRED,
           'cache: after exp the cached token has expired');

### configurations nginx -t refuses

sub spew {
    my ($file, $data) = @_;
    open my $fh, '>', $file or die "write $file: $!\n";
    print $fh $data;
    close $fh;
}

spew("$dir/keys/short.key", "0123456789\n");
spew("$dir/keys/nokid.json", JSON::PP->new->encode({ keys => [
    { kty => 'oct', alg => 'HS256',
      k => Platform::JWT::b64url($hs256) } ] }));
# a JWK's members are read by the same decoder as tokens
my ($ecx, $ecy) = Platform::JWT::ec_public_point($k->{ec_pub});
spew("$dir/keys/spare.json", JSON::PP->new->encode({ keys => [
    { kty => 'EC', kid => 'ec-1', crv => 'P-256',
      x => Platform::JWT::spare_bits(Platform::JWT::b64url($ecx)),
      y => Platform::JWT::b64url($ecy) } ] }));

sub conf {
    my ($location, $http) = @_;
    $http //= '';
    return <<"EOF";
    $http

    server {
        listen 127.0.0.1:%%PORT%%;
        location /api/ {
            platform_persons;
            $location
        }
    }
EOF
}

my $ok = conf(<<'EOF');
            platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;
            platform_jwt_leeway 60s;
            platform_auth bearer;
EOF
$r = $t->check_config($ok);
ok($r->{ok}, 'a valid configuration passes') or diag($r->{output});

$r = $t->check_config(conf('platform_jwt_jwks %%TESTDIR%%/keys/jwks.json;'));
ok($r->{ok}, 'the JWKS passes') or diag($r->{output});

$r = $t->check_config(conf('', 'platform_jwt_key RS256 '
                           . '%%TESTDIR%%/keys/rsa.pub;'));
ok($r->{ok}, 'a key at http level is inherited') or diag($r->{output});

my @bad = (
    [ conf(''), qr/platform_jwt_key|platform_jwt_jwks/,
      'bearer location without a key' ],
    [ conf('platform_jwt_key HS256 %%TESTDIR%%/keys/nonexistent.key;'),
      qr/nonexistent\.key/, 'missing key file' ],
    [ conf('platform_jwt_key HS256 %%TESTDIR%%/keys/short.key;'),
      qr/short\.key/, 'HS256 secret of 10 bytes' ],
    [ conf('platform_jwt_key HS512 %%TESTDIR%%/keys/hs256.key;'),
      qr/hs256\.key/, 'HS512 secret of 48 bytes' ],
    [ conf('platform_jwt_key RS256 %%TESTDIR%%/keys/ec.pub;'),
      qr/ec\.pub/, 'RS256 pointed at the EC public key' ],
    [ conf('platform_jwt_key ES256 %%TESTDIR%%/keys/rsa.pub;'),
      qr/rsa\.pub/, 'ES256 pointed at the RSA public key' ],
    [ conf('platform_jwt_key HS999 %%TESTDIR%%/keys/hs256.key;'),
      qr/HS999/, 'unknown algorithm' ],
    [ conf('platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;'
           . ' platform_jwt_leeway 61s;'),
      qr/platform_jwt_leeway/, 'leeway 61s' ],
    [ conf('platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;'
           . ' platform_auth none bearer;'),
      qr/platform_auth/, 'platform_auth none bearer' ],
    [ conf('platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;'
           . ' platform_auth bogus;'),
      qr/bogus/, 'platform_auth bogus' ],
    [ conf('platform_jwt_jwks %%TESTDIR%%/keys/nokid.json;'),
      qr/nokid\.json/, 'JWKS key without kid' ],
    [ conf('platform_jwt_jwks %%TESTDIR%%/keys/hs256.key;'),
      qr/hs256\.key/, 'JWKS file that is no JSON' ],
    [ conf('platform_jwt_jwks %%TESTDIR%%/keys/spare.json;'),
      qr/spare\.json/, 'JWKS "x" with a spare bit set' ],
    [ conf('platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;'
           . ' platform_jwt_jwks %%TESTDIR%%/keys/jwks.json;'),
      qr/platform_jwt_(?:key|jwks)/, 'both platform_jwt_key and _jwks' ],
);

$t->config_refused(@$_) for @bad;

$t->done;
done_testing;
