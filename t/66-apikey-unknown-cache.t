#!/usr/bin/perl

# API key ids that are not found are remembered per worker
# (platform_apikey_unknown_cache), apart from the known keys: a flood of
# made-up ids costs PostgreSQL one lookup per id, repeats cost nothing, and
# the known keys stay cached; a key created for an id remembered as unknown
# is accepted once the entry expires. nginx -t refuses bad values.

# platform-test: serial (time bounds)

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Platform::Test;

my $t = Platform::Test->new(workers => 1);

my $server = <<'EOF';
    server {
        listen 127.0.0.1:%%PORT%%;
        location /api/ {
            platform_persons;
            platform_auth apikey;
            platform_apikey_cache_time 60s;
        }
        location = /metrics { platform_metrics; }
    }
EOF

### nginx -t

for my $bad ('0 10s', '-5 10s', 'many 10s', '100 0', '100 soon') {
    $t->config_refused("platform_apikey_unknown_cache $bad;\n$server",
                       qr/invalid (number of entries|time) "[^"]+": .* is expected/,
                       "platform_apikey_unknown_cache $bad refused, saying why");
}

ok($t->check_config("platform_apikey_unknown_cache off;\n$server")->{ok},
   'platform_apikey_unknown_cache off accepted');

### the worker's caches: sixteen known keys, a thousand unknown ids for 2 s

$t->run(<<"EOF");
    platform_auth_cache_size 16;
    platform_apikey_unknown_cache 1000 2s;
    # the lookups of one address at once are not what this file counts
    platform_pg_tenant_share 100;
$server
EOF

my $acct = 'c0000000-0000-4000-8000-000000000066';

$t->psql(<<"SQL");
INSERT INTO person_accounts (id, tenant_id, person_id, account_name)
VALUES ('$acct', 'tenant-66', 'e0000000-0000-4000-8000-000000000066', 'Ada');
SQL

my @c = ('A' .. 'Z', 'a' .. 'z', '0' .. '9', '-', '_');

sub secret { join('', map { $c[int rand @c] } 1 .. 43) }

sub new_key {
    my ($id) = @_;
    my $key = "plk_$id." . secret();
    $t->psql("INSERT INTO api_keys (id, tenant_id, scope, key_digest)"
             . " VALUES ('$id', 'tenant-66', 'any',"
             . " sha256(convert_to('$key', 'UTF8')))");
    return $key;
}

sub account {
    my ($key) = @_;
    return $t->request('GET', "/api/v1/PersonAccounts/$acct/get",
                       headers => { apiKey => $key });
}

sub lookups {
    my $m = $t->request('GET', '/metrics')->{content};
    return $m =~ /^platform_apikey_lookups_total (\d+)$/m ? $1 : -1;
}

my $known = new_key('0000000000006601');

is(account($known)->{status}, 200, 'a known key: 200');

# one unknown id, again and again

my $before = lookups();
my @r = map { account('plk_00000000000066ff.' . secret()) } 1 .. 20;
is(scalar(grep { $_->{status} == 401 } @r), 20, 'an unknown id: 401');
is(lookups(), $before + 1, 'twenty requests of one unknown id: one lookup');

# a hundred made-up ids, more than the known keys' cache holds, twice

my @ids = map { sprintf('6600%012x', $_) } 1 .. 100;

$before = lookups();
for my $round (1, 2) {
    my $r = $t->burst([ map {
        [ 'GET', "/api/v1/PersonAccounts/$acct/get",
          headers => { apiKey => "plk_$_." . secret() } ]
    } @ids ]);
    is(scalar(grep { $_->{status} == 401 } @$r), 100,
       "round $round: a hundred unknown ids, each 401");
}
is(lookups(), $before + 100, 'a hundred unknown ids twice: one lookup each');

$before = lookups();
is(account($known)->{status}, 200, 'the known key: still 200');
is(lookups(), $before, 'the known key was not pushed out: no lookup');

# a key created for an id remembered as unknown

my $late_id = '00000000000066ee';
is(account("plk_$late_id." . secret())->{status}, 401,
   'an id without a key: 401');
my $late = new_key($late_id);
is(account($late)->{status}, 401,
   'its key, created meanwhile: still 401 while the id is remembered');
ok($t->wait_until(sub { account($late)->{status} == 200 }, 5),
   'its key accepted once the entry expires');

$t->done;
done_testing;
