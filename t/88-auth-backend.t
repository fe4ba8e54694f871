#!/usr/bin/perl

# API key lookups go through the worker's PostgreSQL pool like any
# statement: a lookup stuck on a lock delays no other request of the
# worker, PostgreSQL down is 503 in the family's envelope, and a key the
# worker has cached keeps working through the outage until its cache time
# ends. Bearer tokens need no backend at all.

# platform-test: serial (time bounds)

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Platform::Test;
use Platform::JWT;

my $conf = <<'EOF2';
    platform_pg_connect_timeout 1s;
    platform_pg_query_timeout 5s;
    platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;

    server {
        listen 127.0.0.1:%%PORT%%;

        location /api/v1/products/ { platform_products; }

        location /api/ {
            platform_persons;
            platform_auth apikey;
            platform_apikey_cache_time 0;
        }

        location = /metrics { platform_metrics; }
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

        # the token alone: the account's query still needs PostgreSQL
        location /api/ { platform_persons; }
    }
EOF2

my $acct = 'c0000000-0000-4000-8000-0000000000a1';

my $data = <<"SQL";
INSERT INTO person_accounts (id, tenant_id, person_id, account_name)
VALUES ('$acct', 'tenant-a', 'e0000000-0000-4000-8000-000000000001', 'Ada');
INSERT INTO product_classifications (group_name, tags)
VALUES ('Grains', '{rice}');
SQL

my @c = ('A' .. 'Z', 'a' .. 'z', '0' .. '9', '-', '_');

# a key inserted by hand with $psql: the key
sub new_key {
    my ($psql, $id) = @_;
    my $key = "plk_$id." . join('', map { $c[int rand @c] } 1 .. 43);
    $psql->("INSERT INTO api_keys (id, tenant_id, scope, key_digest)"
            . " VALUES ('$id', 'tenant-a', 'any',"
            . " sha256(convert_to('$key', 'UTF8')))");
    return $key;
}

sub account {
    my ($t, %o) = @_;
    my %h;
    $h{apiKey} = $o{key} if $o{key};
    $h{Authorization} = "Bearer $o{token}" if $o{token};
    return $t->request('GET', "/api/v1/PersonAccounts/$acct/get",
                       port => $t->port($o{port} // 1), headers => \%h);
}

# API key lookups sent to PostgreSQL so far
sub lookups {
    my ($t) = @_;
    my $m = $t->request('GET', '/metrics')->{content};
    return $m =~ /^platform_apikey_lookups_total (\d+)$/m ? $1 : -1;
}

# a lookup that waits on a lock inside PostgreSQL (the suite's server)

my $t = Platform::Test->new(workers => 1);
Platform::JWT::keys($t->testdir . '/keys');
$t->run($conf);
$t->psql($data);

my $key = new_key(sub { $t->psql(@_) }, '00000000000000a1');
my $cached = new_key(sub { $t->psql(@_) }, '00000000000000a2');

is(account($t, key => $key)->{status}, 200, 'key looked up: 200');
is(account($t, key => $cached, port => 2)->{status}, 200,
   'key looked up and cached: 200');
is($t->request('GET', '/api/v1/products/classifications')->{status}, 200,
   'classifications');

# What a lookup found is cached by key id: varying the secret part of one
# id, known or not, never reaches PostgreSQL again within the cache time.

my $secret = sub { join('', map { $c[int rand @c] } 1 .. 43) };

my $before = lookups($t);
for (1 .. 20) {
    my $r = account($t, key => 'plk_00000000000000ff.' . $secret->(),
                    port => 2);
    is($r->{status}, 401, 'an unknown key id is 401') if $_ == 1;
}
is(lookups($t), $before + 1,
   'twenty secrets of one unknown id: one lookup');

$before = lookups($t);
for (1 .. 20) {
    my $r = account($t, key => 'plk_00000000000000a2.' . $secret->(),
                    port => 2);
    is($r->{status}, 401, 'a known id with a wrong secret is 401')
        if $_ == 1;
}
is(lookups($t), $before, 'wrong secrets of a cached id: no lookup');
is(account($t, key => $cached, port => 2)->{status}, 200,
   'and the right secret still passes from the cache');

my $lock = $t->hold_lock('api_keys', 2);
pass('the test holds a lock on api_keys');

my $slow = $t->request_async('GET', "/api/v1/PersonAccounts/$acct/get",
                             headers => { apiKey => $key });

my $waiting = q{SELECT count(*) FROM pg_stat_activity
                WHERE application_name = 'ngx_platform'
                  AND datname = current_database()
                  AND wait_event_type = 'Lock'};

ok($t->wait_until(sub { $t->psql($waiting) > 0 }, 5),
   'the key lookup waits on the lock inside PostgreSQL');

my $fast = $t->request('GET', '/api/v1/products/classifications');
is($fast->{status}, 200, 'meanwhile another PostgreSQL request');
cmp_ok($fast->{time}, '<', 0.5, 'answers in well under a second');

$fast = account($t, key => $cached, port => 2);
is($fast->{status}, 200, 'meanwhile a cached key');
cmp_ok($fast->{time}, '<', 0.5, 'answers in well under a second');

my $s = $slow->wait;
is($s->{status}, 200, 'the waiting lookup completes once the lock goes');
cmp_ok($s->{time}, '>=', 1, 'after waiting for it');
is($s->{json}{data}{id}, $acct, 'with the account');

$lock->wait;
$t->done;

# PostgreSQL stopped and started again (a server of this test's own)

$t = Platform::Test->new(workers => 1, db => 0);
my $k = Platform::JWT::keys($t->testdir . '/keys');
my $pg = $t->start_private_pg;
my $dsn = $pg->dsn;

$t->run(qq{    platform_pg "$dsn";\n} . $conf);
$pg->psql($data);

$key = new_key(sub { $pg->psql(@_) }, '00000000000000b1');
$cached = new_key(sub { $pg->psql(@_) }, '00000000000000b2');

is(account($t, key => $cached, port => 2)->{status}, 200,
   'key looked up and cached: 200');

# PostgreSQL goes away

$pg->stop;

my $r = account($t, key => $key);
is($r->{status}, 503, 'PostgreSQL down: a key lookup is 503');
is($r->{headers}{'retry-after'}, '1', 'with Retry-After: 1');
is($r->{json}{succeeded}, JSON::PP::false, 'in Envelope A');
is($r->{json}{message}, 'Service temporarily unavailable.', 'message');
ok(!defined $r->{headers}{'www-authenticate'}, 'not a 401');

$r = account($t, key => 'plk_00000000000000a1.short');
is($r->{status}, 401, 'PostgreSQL down: a malformed key is still 401');

$before = lookups($t);
$r = account($t, key => $cached, port => 2);
is($r->{status}, 503,
   'a cached key passes; the account itself needs PostgreSQL');
is(lookups($t), $before, 'the cached key was not looked up');
account($t, key => $key);
is(lookups($t), $before + 1, 'an uncached key is');

my $token = Platform::JWT::sign(
    alg => 'HS256', key => Platform::JWT::secret($k->{hs256}),
    claims => { tenantId => 'tenant-a', exp => int(time) + 600 });

is(account($t, token => $token, port => 3)->{status}, 503,
   'a bearer token is checked without PostgreSQL: 503 from the query');
is(account($t, port => 3)->{status}, 401, 'no token: 401 without PostgreSQL');

# and back

$pg->start;

ok($t->wait_until(sub { account($t, key => $key)->{status} == 200 }, 10),
   'PostgreSQL back: the key works again without a reload');

$t->ignore_log(qr/PostgreSQL|connect|Connection refused|server closed/i);

$t->done;
done_testing;
