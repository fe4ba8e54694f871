#!/usr/bin/perl

# PostgreSQL through a real PgBouncer in pool_mode = transaction, with
# platform_pg_prepare off: every GET route of conf/platform.conf answers as
# connected directly, writes and a refused multi-step write too, row-level
# security keeps each request to its tenant while server connections pass
# from one client to the next, the API key lookup, a webhook stored once;
# pipelined operations (several syncs in flight on one client connection)
# go through PgBouncer 1.18; and with platform_pg_prepare on the module's
# session (startup options, then named statements) is what the pooler
# cannot keep, which is why the setting exists.

use strict;
use warnings;
use utf8;

use lib 't/lib';
use Test::More;
use Platform::Test;
use Platform::JWT;

my $t = Platform::Test->new(workers => 1);
my $k = Platform::JWT::keys($t->testdir . '/keys');

$t->psql(Platform::Test::demo_data(qr/.+/s));

my @c = ('A' .. 'Z', 'a' .. 'z', '0' .. '9', '-', '_');
my $apikey = 'plk_00000000000071aa.' . join('', map { $c[rand @c] } 1 .. 43);
$t->psql("INSERT INTO api_keys (id, tenant_id, scope, key_digest)"
         . " VALUES ('00000000000071aa', 'tenant-demo', 'trades',"
         . " sha256(convert_to('$apikey', 'UTF8')))");

# a server whose sessions are not in UTC: what the module sets at connect
# directly must hold through the pooler too
$t->psql("ALTER DATABASE " . $t->db . " SET timezone = 'Asia/Tokyo'");

# two server connections for every client: they are shared
my $pgb = $t->start_pgbouncer(pool_size => 2);
my $dsn = $pgb->dsn($t->db);
my $top = $ENV{PLATFORM_TEST_TOP} // '.';

sub conf {
    my ($prepare) = @_;
    return <<"EOF";
    platform_pg "$dsn";
    platform_pg_prepare $prepare;
    platform_pg_pool_size 4;
    platform_pg_pipeline_depth 8;

    server {
        listen 127.0.0.1:%%PORT%%;

        platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;
        platform_cache_time 0;
        platform_apikey_cache_time 0;

        include $top/conf/platform.conf;

        location = /health { platform_health; }
    }

    server {
        listen 127.0.0.1:%%PORT_2%%;

        location ^~ /api/webhooks/ {
            platform_webhooks;
            platform_webhook_source src;
        }
    }
EOF
}

$t->ignore_log(qr/platform_identity_bureau/);
$t->run(conf('off'));

my $order = 'a1000000-0000-4000-8000-000000000001';
my $acct = 'b1000000-0000-4000-8000-000000000001';
my %tms = (tenantId => 'tenant-demo', countryCode => 'NG');
my $token = Platform::JWT::hs256($k, tenantId => 'tenant-demo',
    merchantId => '91000000-0000-4000-8000-000000000001');
my %bearer = (Authorization => "Bearer $token");

my @gets = (
    [ GET => '/api/v1/products/classifications', {}, 200 ],
    [ GET => "/tms/delivery-orders/$order", \%tms, 200 ],
    [ GET => '/tms/delivery-orders/a1000000-0000-4000-8000-000000000099',
      \%tms, 404 ],
    [ GET => "/tms/delivery-orders/$order",
      { tenantId => 'tenant-other', countryCode => 'NG' }, 404 ],
    [ GET => '/tms/drivers/available?vehicleType=VAN',
      { %tms, %bearer }, 200 ],
    [ GET => '/api/v1/trades/process-flows?name=export',
      { %bearer, apiKey => $apikey }, 200 ],
    [ GET => '/api/v1/trades/process-flows',
      { %bearer, apiKey => 'plk_00000000000071bb.' . ('x' x 43) }, 401 ],
    [ GET => "/api/v1/PersonAccounts/$acct/get", \%bearer, 200 ],
    [ GET => '/api/v1/BankTransfers/all-account?PageNumber=1&PageSize=5',
      \%bearer, 200 ],
    [ GET => '/health', {}, 200 ],
);

# the same answers as without PgBouncer: the status, and the body
sub every_get {
    my ($name) = @_;
    my @bad;
    for my $g (@gets) {
        my ($method, $path, $headers, $status) = @$g;
        my $r = $t->request($method, $path, headers => $headers);
        push @bad, "$method $path: $r->{status}, not $status"
            if $r->{status} != $status;
    }
    is(join("\n", @bad), '', "$name: every GET route answers its status");
}

ok($t->wait_until(sub { $t->request('GET', '/health')->{status} == 200 }),
   'health through PgBouncer');
every_get('prepare off');

my $r = $t->request('GET', "/tms/delivery-orders/$order", headers => \%tms);
is($r->{json}{data}{id}, $order, 'the order read through PgBouncer');

# the same answers as an nginx connected directly, byte for byte
my $direct = Platform::Test->new(workers => 1, db => 0);
my $direct_dsn = $t->pg_dsn;
$direct->run(<<"EOF");
    platform_pg "$direct_dsn";

    server {
        listen 127.0.0.1:%%PORT%%;

        platform_jwt_key HS256 @{[ $t->testdir ]}/keys/hs256.key;
        platform_cache_time 0;

        include $top/conf/platform.conf;
    }
EOF
for my $g ([ "/tms/delivery-orders/$order", \%tms ],
           [ "/api/v1/PersonAccounts/$acct/get", \%bearer ],
           [ '/api/v1/BankTransfers/all-account?PageNumber=1&PageSize=5',
             \%bearer ])
{
    my ($path, $h) = @$g;
    my $a = $t->request('GET', $path, headers => $h);
    my $b = $direct->request('GET', $path, headers => $h);
    is($a->{content}, $b->{content}, "the same answer as directly: $path");
}
$direct->ignore_log(qr/platform_identity_bureau/);
$direct->done;

### writes

# a webhook event, stored once
sub deliver {
    return $t->request('POST', '/api/webhooks/public/src/events',
                       headers => { 'Content-Type' => 'application/json' },
                       port => $t->port(2), body => '{"id":"ev-71"}');
}
is(deliver()->{status}, 200, 'webhook stored');
is(deliver()->{json}{data}{duplicate}, JSON::PP::true(), 'then a duplicate');
is($t->psql("SELECT count(*) FROM webhook_events WHERE event_key = 'ev-71'")
   + 0, 1, 'one row');

# a counterparty group: a multi-step write, and one refused half-way
my %mt = (%bearer, 'Content-Type' => 'application/json');
my $groups = "SELECT count(*) FROM counterparty_groups"
             . " WHERE tenant_id = 'tenant-demo'";
my $before = $t->psql($groups) + 0;
my $c1 = '81000000-0000-4000-8000-000000000001';
my $c2 = '81000000-0000-4000-8000-000000000002';
my $unknown = '81000000-0000-4000-8000-0000000000ff';
$r = $t->request('POST', '/api/v1/Counterparties/groups', headers => \%mt,
                 body => qq({"name":"t71 group","members":)
                         . qq([{"counterpartyId":"$c1"}]}));
ok($r->{status} == 200 || $r->{status} == 201, 'a group made')
    or diag("$r->{status} $r->{content}");
$r = $t->request('POST', '/api/v1/Counterparties/groups', headers => \%mt,
                 body => qq({"name":"t71 bad","members":)
                         . qq([{"counterpartyId":"$c1"},{"counterpartyId":"$c2"},)
                         . qq({"counterpartyId":"$unknown"}]}));
is($r->{status}, 400, 'a group naming an unknown counterparty refused')
    or diag("$r->{status} $r->{content}");
is($t->psql($groups) + 0, $before + 1, 'nothing of the refused one written');

### pipelining: many operations in flight on the worker's connections

my @b = @{ $t->burst([ map { [ 'GET', "/tms/delivery-orders/$order",
                            headers => \%tms ] } 1 .. 60 ]) };
is(join(',', grep { $_ != 200 } map { $_->{status} } @b), '',
   'pipelined: 60 concurrent reads answered through two server connections');
like($pgb->admin('SHOW POOLS'), qr/\|transaction\s*$/m,
     'the pool is in transaction mode');

### row-level security: scopes never leak from one request to the next

my @mixed = map {
    $t->request_async('GET', "/tms/delivery-orders/$order",
                      headers => { %tms, tenantId => $_ % 2 ? 'tenant-demo'
                                                            : 'tenant-other' })
} 1 .. 40;
my @wrong = grep { $_->[1] != ($_->[0] % 2 ? 200 : 404) }
            map { [ $_, $mixed[$_ - 1]->wait->{status} ] } 1 .. 40;
is(scalar @wrong, 0, 'two tenants interleaved: each sees only its rows');

### platform_pg_prepare on: named statements and a transaction pooler

$t->stop;
$t->run(conf('on'));
my @on = @{ $t->burst([ map { [ 'GET', "/tms/delivery-orders/$order",
                             headers => \%tms ] } 1 .. 60 ]) };
my @failed = grep { $_ != 200 } map { $_->{status} } @on;
ok(@failed && !grep({ $_ != 503 } @failed),
   'prepare on: refused through the pooler, 503')
    or diag("@failed");
like($t->error_log, qr/unsupported startup parameter: options/,
     'prepare on: its session settings at startup are what PgBouncer refuses');

$t->done;
done_testing;
