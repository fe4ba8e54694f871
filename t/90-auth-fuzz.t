#!/usr/bin/perl

# Malformed credentials by the hundred: tokens mutated byte by byte, good
# tokens spelled otherwise (unused base64url bits set, ECDSA's high s),
# header and claims JSON of every wrong shape (signed, so that the module
# reaches their parsing), signatures of every length, and random API keys.
# Every answer must be 200 or 401 (403 for a tenant mismatch), in the family's
# envelope, and no worker may fall over (the harness fails on an alert).
# PLATFORM_TEST_SEED repeats a run.

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Platform::Test;
use Platform::JWT;

my $seed = $ENV{PLATFORM_TEST_SEED} // time;
srand($seed);
note("seed $seed");

my $t = Platform::Test->new(workers => 1);
my $k = Platform::JWT::keys($t->testdir . '/keys');

$t->run(<<'EOF2');
    large_client_header_buffers 4 16k;

    server {
        listen 127.0.0.1:%%PORT%%;
        location /api/ {
            platform_persons;
            platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;
            platform_jwt_audience platform-api;
            platform_jwt_cache off;
        }
    }

    server {
        listen 127.0.0.1:%%PORT_2%%;
        location /api/ {
            platform_persons;
            platform_jwt_jwks %%TESTDIR%%/keys/jwks.json;
        }
    }

    server {
        listen 127.0.0.1:%%PORT_3%%;
        location /api/ {
            platform_persons;
            platform_auth bearer apikey;
            platform_jwt_key ES256 %%TESTDIR%%/keys/ec.pub;
            platform_apikey_cache_time 0;
        }
    }
EOF2

my $acct = 'c0000000-0000-4000-8000-0000000000f1';

$t->psql(<<"SQL");
INSERT INTO person_accounts (id, tenant_id, person_id)
VALUES ('$acct', 'tenant-a', 'e0000000-0000-4000-8000-000000000001');
SQL

my $secret = Platform::JWT::secret($k->{hs256});
my %good = (tenantId => 'tenant-a', aud => 'platform-api',
            exp => int(time) + 3600);

# one request; returns a description of what is wrong with the answer
# (a port of 1 negated: the credential must be refused)
sub check {
    my ($port, %h) = @_;
    my $refuse = $port < 0;
    my $r = $t->request('GET', "/api/v1/PersonAccounts/$acct/get",
                        port => $t->port(abs $port), headers => \%h);
    my $s = $r->{status};
    return "status $s" unless $s == 200 || $s == 401 || $s == 403;
    return 'accepted' if $refuse && $s == 200;
    return 'no JSON body' unless ref $r->{json} eq 'HASH';
    return 'not Envelope A' unless exists $r->{json}{succeeded};
    return 'a 401 without WWW-Authenticate'
        if $s == 401 && !$r->{headers}{'www-authenticate'};
    return '';
}

sub run_cases {
    my ($name, @cases) = @_;
    my ($bad, @what) = (0);
    for my $c (@cases) {
        my $w = check(@$c);
        next if $w eq '';
        $bad++;
        push @what, "$w: " . substr(join(' ', @$c), 0, 200) if @what < 5;
    }
    is($bad, 0, "$name: " . scalar(@cases) . " requests, each 200 or 401")
        or diag(join("\n", "PLATFORM_TEST_SEED=$seed repeats it:", @what));
}

sub rnd_bytes {
    my ($n) = @_;
    return join('', map { chr(int rand 256) } 1 .. $n);
}

my @alphabet = ('A' .. 'Z', 'a' .. 'z', '0' .. '9', '-', '_', '.', '=',
                '+', '/', ' ', '%', '"', "\\", '~');

sub mutate {
    my ($s) = @_;
    my $how = int rand 6;
    my $i = int rand length $s;
    if ($how == 0) {        # replace a character
        substr($s, $i, 1) = $alphabet[int rand @alphabet];
    } elsif ($how == 1) {   # cut
        $s = substr($s, 0, $i);
    } elsif ($how == 2) {   # insert
        substr($s, $i, 0) = $alphabet[int rand @alphabet] x (1 + int rand 4);
    } elsif ($how == 3) {   # drop a run
        substr($s, $i, 1 + int rand 8) = '';
    } elsif ($how == 4) {   # duplicate a part
        my @p = split /\./, $s, -1;
        push @p, $p[int rand @p] if @p;
        $s = join '.', @p;
    } else {                # swap two parts
        my @p = split /\./, $s, -1;
        @p[0, -1] = @p[-1, 0] if @p > 1;
        $s = join '.', @p;
    }
    $s =~ s/[\x00-\x1f\x7f]//g;   # what an HTTP header can carry
    return $s;
}

my $valid = Platform::JWT::sign(alg => 'HS256', key => $secret,
                                claims => \%good);

is(check(1, Authorization => "Bearer $valid"), '', 'the valid token');

# 1. a valid token mutated: never accepted

run_cases('mutated tokens',
    map { [-1, Authorization => "Bearer $_"] }
        grep { $_ ne $valid } map { mutate(mutate($valid)) } 1 .. 300);

# 1b. good tokens spelled otherwise, signed as sent: every value of the
# unused low bits of each part's last character, and ECDSA's other s
# (n - s); never accepted

my (@base, @spellings);

for my $v ([1, 'HS256', $secret, undef], [2, 'ES256', $k->{ec}, 'ec-1'],
           [2, 'RS256', $k->{rsa}, 'rsa-1'])
{
    my ($port, $alg, $key, $kid) = @$v;

    # pads that give header and claims each length modulo 4 in turn
    for my $n (0 .. 3) {
        my %o = (alg => $alg, key => $key,
                 header => { kid => $kid, x => 'x' x $n },
                 claims => { %good, pad => 'p' x $n });
        my $token = Platform::JWT::sign(%o);
        my @p = split /\./, $token;

        push @base, [$port, $token];

        for my $i (0 .. 2) {
            my $mask = { 2 => 15, 3 => 3 }->{length($p[$i]) % 4} or next;

            for my $bits (1 .. $mask) {
                my @q = @p;
                $q[$i] = Platform::JWT::spare_bits($q[$i], $bits);
                my $s = $i == 2 ? join('.', @q)
                      : Platform::JWT::sign(%o, header_b64 => $q[0],
                                            claims_b64 => $q[1]);
                push @spellings, [-$port, Authorization => "Bearer $s"];
            }
        }

        next unless $alg eq 'ES256';

        # the high s, alone and with a part's unused bits set
        my @parts = grep { length($p[$_]) % 4 > 1 } 0 .. 2;
        push @spellings, map {
            [-$port, Authorization => 'Bearer ' . Platform::JWT::sign(
                 %o, high_s => 1,
                 spare_bits => [ (qw(header claims signature))[@$_] ])]
        } [], map { [$_] } @parts;
    }
}

my @refused = grep { $_->[2] != 200 } map {
    [ @$_, $t->request('GET', "/api/v1/PersonAccounts/$acct/get",
                       port => $t->port($_->[0]),
                       headers => { Authorization => "Bearer $_->[1]" })
           ->{status} ]
} @base;
is(scalar @refused, 0,
   scalar(@base) . ' tokens of HS256, ES256 and RS256 accepted')
    or diag(join "\n", map { "port $_->[0]: $_->[2] for $_->[1]" } @refused);

run_cases('the same tokens spelled otherwise', @spellings);

# 2. claims of every wrong shape, correctly signed

my @claims_json = (
    '', 'null', 'true', '1', '"x"', '[]', '[{}]', '{', '{"a":}', '{}',
    '{"exp":"soon","tenantId":"tenant-a"}',
    '{"exp":1e308,"tenantId":"tenant-a","aud":"platform-api"}',
    '{"exp":-1e308,"tenantId":"tenant-a","aud":"platform-api"}',
    '{"exp":99999999999999999999999999,"tenantId":"tenant-a","aud":"platform-api"}',
    '{"exp":' . (time + 600) . ',"tenantId":null,"aud":"platform-api"}',
    '{"exp":' . (time + 600) . ',"tenantId":["tenant-a"],"aud":"platform-api"}',
    '{"exp":' . (time + 600) . ',"tenantId":"tenant-a","aud":{"x":1}}',
    '{"exp":' . (time + 600) . ',"tenantId":"tenant-a","aud":[1,2,null]}',
    '{"exp":' . (time + 600) . ',"tenantId":"tenant-a","aud":"platform-api","sub":{}}',
    '{"exp":' . (time + 600) . ',"tenantId":"tenant-a","aud":"platform-api","nbf":"x"}',
    '{"exp":' . (time + 600) . ',"tenantId":"ten\u0000ant","aud":"platform-api"}',
    '{"exp":' . (time + 600) . ',"tenantId":"tenant-a","tenantId":"b"}',
    '{"exp":' . (time + 600) . ',"tenantId":"' . ('t' x 2000) . '"}',
    '[' x 3000 . ']' x 3000,
    '{"a":' x 2000 . '1' . '}' x 2000,
    "\xff\xfe{}",
    '{"exp":' . (time + 600) . ',"tenantId":"tenant-a","aud":"platform-api"}'
        . 'trailing',
);

run_cases('claims of every shape',
    map { [1, Authorization => 'Bearer ' . Platform::JWT::sign(
              alg => 'HS256', key => $secret, claims_json => $_)] }
        @claims_json);

run_cases('claims of random bytes',
    map { [-1, Authorization => 'Bearer ' . Platform::JWT::sign(
              alg => 'HS256', key => $secret,
              claims_json => rnd_bytes(1 + int rand 200))] } 1 .. 100);

# 3. headers of every wrong shape, correctly signed

my @header_json = (
    '', 'null', '[]', '{}', '{"alg":null}', '{"alg":256}', '{"alg":["HS256"]}',
    '{"alg":"HS256","crit":["exp"]}', '{"alg":"hs256"}', '{"alg":"HS256 "}',
    '{"alg":"HS256","alg":"none"}', '{"alg":"' . ('A' x 3000) . '"}',
);

push @header_json, map { rnd_bytes(1 + int rand 100) } 1 .. 50;

run_cases('headers of every shape',
    map { [-1, Authorization => 'Bearer ' . Platform::JWT::sign(
              alg => 'HS256', key => $secret, header_json => $_,
              claims => \%good)] }
        @header_json);

# without a JWKS the kid is not looked at; other members are ignored

run_cases('headers with odd members',
    map { [1, Authorization => 'Bearer ' . Platform::JWT::sign(
              alg => 'HS256', key => $secret, header_json => $_,
              claims => \%good)] }
        ('{"alg":"HS256","kid":{}}', '{"alg":"HS256","kid":["rsa-1"]}',
         '{"alg":"HS256",' . '"x":[' x 1000 . ']' x 1000 . '}'));

# 4. JWKS: kids of every kind, signatures of every length

my @kids = (undef, '', 'rsa-1', 'ec-1', 'hs-1', 'RSA-1', 'rsa-1 ', 1, 0,
            [], {}, 'x' x 5000);

run_cases('JWKS kids and algorithms',
    map {
        my $kid = $_;
        map {
            my ($alg, $key) = @$_;
            [2, Authorization => 'Bearer ' . Platform::JWT::sign(
                 alg => $alg, key => $key, header => { kid => $kid },
                 claims => \%good)]
        } (['HS256', $secret], ['RS256', $k->{rsa}], ['ES256', $k->{ec}])
    } @kids);

run_cases('signatures of every length',
    map {
        my $n = $_;
        [$n % 2 ? -2 : -3, Authorization => 'Bearer ' . Platform::JWT::sign(
             alg => ($n % 2 ? 'RS256' : 'ES256'), header => { kid => 'rsa-1' },
             claims => \%good,
             signature_b64 => Platform::JWT::b64url(rnd_bytes($n)))]
    } (0 .. 70, 126 .. 130, 254 .. 258, 510 .. 514));

# 5. API keys of every shape (behind a valid ES256 token)

my $es = Platform::JWT::sign(alg => 'ES256', key => $k->{ec},
                             claims => \%good);

my @apikeys = ('plk_', 'plk_0123456789abcdef.',
               'plk_0123456789abcdef.' . ('a' x 43),
               'plk_0123456789ABCDEF.' . ('a' x 43),
               'plk_0123456789abcdef.' . ('a' x 42) . '=',
               'plk_0123456789abcdef.' . ('a' x 44),
               'PLK_0123456789abcdef.' . ('a' x 43), 'x' x 5000);

push @apikeys, map {
    join('', map { $alphabet[int rand @alphabet] } 1 .. (1 + int rand 80))
} 1 .. 100;

push @apikeys, map { mutate('plk_0123456789abcdef.' . ('Zz0-_' x 8) . 'abc') }
    1 .. 100;

run_cases('API keys of every shape',
    map { [-3, Authorization => "Bearer $es", apiKey => $_] } @apikeys);

is(check(1, Authorization => "Bearer $valid"), '',
   'the valid token still works');

$t->done;
done_testing;
