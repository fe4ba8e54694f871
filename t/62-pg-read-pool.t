#!/usr/bin/perl

# platform_pg_read: a streaming replica of a private primary, both started
# by the test, with replay paused where it matters: then what the primary
# commits is not on the replica, and an answer tells which server read it.
# GETs and HEADs read from the replica, every other method's statements run
# on the primary (a replica would refuse a write: 25006); every GET route
# of conf/platform.conf answers as without a read pool; the replica stopped
# (also under a statement in flight) or crashed, reads fall back to the
# primary without a 5xx and come back to the replica once it is up; a
# replica never reachable, the primary serves. nginx -t, health and
# metrics.

# platform-test: serial (time bounds)

use strict;
use warnings;
use utf8;

use lib 't/lib';
use Test::More;
use Platform::Test;
use Platform::JWT;

my $t = Platform::Test->new(workers => 1, db => 0);
my $k = Platform::JWT::keys($t->testdir . '/keys');

my $primary = $t->start_private_pg;
$primary->psql(Platform::Test::demo_data(qr/.+/s));

# every statement in the servers' logs, with the client's name: which
# server ran a request's statements is read there
$primary->psql("ALTER SYSTEM SET log_statement = 'all'");
$primary->psql("ALTER SYSTEM SET log_line_prefix = '%m [%p] %a '");
$primary->psql('SELECT pg_reload_conf()');

# an API key of tenant-demo, made as scripts/apikey makes them
my @c = ('A' .. 'Z', 'a' .. 'z', '0' .. '9', '-', '_');
my $apikey = 'plk_00000000000062aa.' . join('', map { $c[rand @c] } 1 .. 43);
$primary->psql("INSERT INTO api_keys (id, tenant_id, scope, key_digest)"
               . " VALUES ('00000000000062aa', 'tenant-demo', 'trades',"
               . " sha256(convert_to('$apikey', 'UTF8')))");

# the copy carries the settings above (postgresql.auto.conf)
my $replica = $t->start_private_replica($primary);

my $top = $ENV{PLATFORM_TEST_TOP} // '.';
my $pdsn = $primary->dsn;

sub conf {
    my ($read) = @_;
    return <<"EOF";
    platform_pg "$pdsn";
    platform_pg_read $read;
    platform_pg_connect_timeout 1s;

    server {
        listen 127.0.0.1:%%PORT%%;

        platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;
        platform_cache_time 0;
        platform_apikey_cache_time 0;

        include $top/conf/platform.conf;

        location = /health { platform_health; }
        location = /metrics { platform_metrics; }
    }
EOF
}

my $read_dsn = '"' . $replica->dsn . ' target_session_attrs=prefer-standby"';

$t->ignore_log(qr/platform_identity_bureau/);

$t->run(conf($read_dsn));

### requests on demo data

my $order = 'a1000000-0000-4000-8000-000000000001';
my $order2 = 'a1000000-0000-4000-8000-000000000002';
my $driver = 'd1000000-0000-4000-8000-000000000001';
my $acct = 'b1000000-0000-4000-8000-000000000001';
my $transfer = 'e1000000-0000-4000-8000-000000000001';
my $cp_account = '82000000-0000-4000-8000-000000000001';

my %tms = (tenantId => 'tenant-demo', countryCode => 'NG');
my $token = Platform::JWT::hs256($k, tenantId => 'tenant-demo',
    merchantId => '91000000-0000-4000-8000-000000000001');
my %bearer = (Authorization => "Bearer $token");

sub get_order {
    my ($id) = @_;
    return $t->request('GET', '/tms/delivery-orders/' . ($id // $order),
                       headers => \%tms);
}

sub get_account {
    return $t->request('GET', "/api/v1/PersonAccounts/$acct/get",
                       headers => \%bearer);
}

sub get_transfers {
    return $t->request('GET', '/api/v1/BankTransfers/all-account'
                       . '?PageNumber=1&PageSize=5', headers => \%bearer);
}

sub order_number {
    my $r = get_order();
    return $r->{status} == 200 ? $r->{json}{data}{orderNumber}
                               : "status $r->{status}";
}

# the module's statements each server ran from a point in its log on
# (log_statement = all; psql's own lines left out)

sub mark {
    my ($pg) = @_;
    return length($pg->log // '');
}

sub statements {
    my ($pg, $mark) = @_;
    my $log = substr($pg->log // '', $mark);
    # the scope of row-level security goes with its statement, uncounted
    return scalar grep { !/\] psql LOG/ && !/execute platform_scope/ }
                  $log =~ /^.*LOG:\s+(?:execute \S+|statement):.*$/mg;
}

# every GET route the module serves, with credentials and demo rows: the
# status expected, and whether PostgreSQL answers it ('key': the API key is
# looked up on the primary, so that a revoked key is refused at once, and
# the operation's statement, if it gets that far, runs on the read pool)
my $otp_tenant = "t62-$$";

my @gets = (
    [ GET => '/api/v1/products/classifications', {}, 200, 1 ],
    [ GET => "/tms/delivery-orders/$order", \%tms, 200, 1 ],
    [ HEAD => "/tms/delivery-orders/$order", \%tms, 200, 1 ],
    [ GET => '/tms/delivery-orders/a1000000-0000-4000-8000-000000000099',
      \%tms, 404, 1 ],
    [ GET => '/tms/drivers/available?vehicleType=VAN',
      { %tms, %bearer }, 200, 1 ],
    [ GET => '/api/v1/trades/process-flows?name=export',
      { %bearer, apiKey => $apikey }, 200, 'key' ],
    [ GET => '/api/v1/trades/process-flows',
      { %bearer, apiKey => 'plk_00000000000062bb.' . ('x' x 43) }, 401,
      'key' ],
    [ GET => "/api/v1/PersonAccounts/$acct/get", \%bearer, 200, 1 ],
    [ HEAD => "/api/v1/PersonAccounts/$acct/get", \%bearer, 200, 1 ],
    [ GET => '/api/v1/PersonAccounts/b2000000-0000-4000-8000-000000000001'
      . '/get', \%bearer, 404, 1 ],
    [ GET => '/api/v1/BankTransfers/all-account?PageNumber=1&PageSize=5',
      \%bearer, 200, 1 ],
    [ GET => '/api/v1.0/BankTransfers/all-account?PageNumber=3',
      \%bearer, 200, 1 ],
    [ GET => '/validate-otp/123456',
      { tenantId => $otp_tenant, countryCode => 'NG' }, 404, 0 ],
    [ GET => '/health', {}, 200, undef ],
    [ GET => '/metrics', {}, 200, 0 ],
);

# runs @gets: each answers its status; $where ('read', 'primary' or
# 'either') says on which server the statements of those that ask
# PostgreSQL must run
sub every_get {
    my ($name, $where) = @_;
    my (@bad, @misplaced);
    for my $g (@gets) {
        my ($method, $path, $headers, $status, $pg) = @$g;
        my ($mp, $mr) = (mark($primary), mark($replica));
        my $r = $t->request($method, $path, headers => $headers);
        push @bad, "$method $path: $r->{status}, not $status"
            if $r->{status} != $status;
        next unless $pg;
        my ($np, $nr) = (statements($primary, $mp),
                         statements($replica, $mr));
        my $wrong = $where eq 'either' ? !($np + $nr)
                  : $where ne 'read' ? $nr || !$np
                  : $pg eq 'key' ? $np != 1 || $nr != ($status == 200)
                  : $np || !$nr;
        push @misplaced, "$method $path: $np on the primary, $nr on the"
                         . " replica"
            if $wrong;
    }
    is(join("\n", @bad), '', "$name: every GET route answers its status");
    is(join("\n", @misplaced), '',
       "$name: their statements ran on the "
       . ($where eq 'read' ? 'replica only'
          : $where eq 'either' ? 'one server or the other'
          : 'primary only'));
}

sub metrics {
    return $t->request('GET', '/metrics')->{content};
}

### the read pool serves GETs

# a first GET may have waited for the read pool's connection; once
# connected, the replica answers

ok($t->wait_until(sub {
       my $m = mark($replica);
       get_order()->{status} == 200 && statements($replica, $m) > 0 }, 10),
   'a GET reaches the replica');

my $r = $t->request('GET', '/health');
is($r->{status}, 200, 'health: 200');
is_deeply([ sort keys %{$r->{json} // {}} ],
          [ qw(postgres postgresRead redis status) ],
          'health: the read pool beside the primary');
is($r->{json}{postgresRead}{status}, 'up', 'health: the read pool is up');

my $m = metrics();
like($m, qr/^platform_pg_connections\{worker="0",pool="read",state="idle"\}
            \s\d+$/mx, 'metrics: the read pool\'s connections');
like($m, qr/^platform_pg_connections\{worker="0",pool="primary",
            state="idle"\}\s\d+$/mx, 'metrics: the primary\'s, labelled');

# every GET route, each one's statements on the replica; nothing a GET
# runs writes (the replica would refuse it: "cannot execute ... in a
# read-only transaction" in its log)

my $replica_mark = mark($replica);
every_get('read pool', 'read');
unlike(substr($replica->log, $replica_mark), qr/ERROR:/,
       'the replica refused none of their statements');

# the other methods' statements run on the primary, the reads among them
# too (a POST list)

my ($mp, $mr) = (mark($primary), mark($replica));
$r = $t->request('POST', '/api/v1/BankTransfers/all-account',
                 headers => \%bearer, json => { PageNumber => 1 });
is($r->{status}, 200, 'POST list: 200');
ok(statements($primary, $mp) > 0 && statements($replica, $mr) == 0,
   'POST list: on the primary');

### replay paused: the GETs show what the replica has

ok($replica->wait_replayed, 'the replica caught up');
$replica->pause_replay;

$primary->psql(<<"SQL");
UPDATE delivery_orders SET order_number = 'DO-1001-P' WHERE id = '$order';
UPDATE person_accounts SET account_name = 'Amaka N. Paused'
    WHERE id = '$acct';
UPDATE bank_transfers SET amount = 1.23 WHERE id = '$transfer';
SQL

# the old rows: a read pool ignored (the primary answering) fails these
is(order_number(), 'DO-1001', 'replay paused: the order as it was');
$r = get_account();
is($r->{json}{data}{accountName}, 'Amaka Nwankwo',
   'replay paused: the account as it was');
$r = get_transfers();
is($r->{json}{data}[0]{id}, $transfer, 'the first transfer');
cmp_ok($r->{json}{data}[0]{amount}, '==', 8019.37,
       'replay paused: its amount as it was');

# writes run on the primary while the replica is behind: each is answered
# with what the primary has, and lands there

$r = $t->request('PATCH', "/tms/delivery-orders/$order2/assign/$driver",
                 headers => \%tms);
is($r->{status}, 200, 'assign: 200') or diag($r->{content});
is($primary->psql("SELECT status || ' ' || driver_id FROM delivery_orders"
                  . " WHERE id = '$order2'"), "ASSIGNED $driver",
   'assign: on the primary');
is(get_order($order2)->{json}{data}{status}, 'PENDING',
   'assign: the replica, paused, does not have it yet');

$r = $t->request('PUT', '/api/v1/Counterparties/accounts',
                 headers => \%bearer,
                 json => { id => $cp_account, bankName => 'Read Pool Bank' });
is($r->{status}, 200, 'counterparty account update: 200')
    or diag($r->{content});
is($r->{json}{data}{bankName}, 'Read Pool Bank',
   'counterparty account update: answered with the new row');
is($primary->psql("SELECT bank_name FROM counterparty_accounts"
                  . " WHERE id = '$cp_account'"), 'Read Pool Bank',
   'counterparty account update: on the primary');

$replica->resume_replay;
ok($replica->wait_replayed, 'replay resumed, caught up');

is(order_number(), 'DO-1001-P', 'replayed: the new order number');
is(get_account()->{json}{data}{accountName}, 'Amaka N. Paused',
   'replayed: the new account name');
cmp_ok(get_transfers()->{json}{data}[0]{amount}, '==', 1.23,
       'replayed: the new amount');
is(get_order($order2)->{json}{data}{status}, 'ASSIGNED',
   'replayed: the assign');

### the replica goes away, with a statement in flight on it

# the primary locks the orders for 2 s; the lock is replayed, so a GET of
# an order waits for it on the replica, until the replica goes away; then
# it runs again on the primary, once the lock is gone

sub waiting_on_replica {
    return $replica->psql("SELECT count(*) FROM pg_stat_activity"
                          . " WHERE wait_event_type = 'Lock'"
                          . " AND application_name <> 'psql'");
}

for my $mode (qw(fast immediate)) {
    my $name = $mode eq 'fast' ? 'replica stopped' : 'replica crashed';

    my $lock = $primary->psql_async(<<'SQL');
BEGIN;
LOCK TABLE delivery_orders IN ACCESS EXCLUSIVE MODE;
SELECT pg_sleep(2);
COMMIT;
SQL
    ok($t->wait_until(sub {
           # a synchronous commit flushes the lock's WAL record, which the
           # replica then replays
           $primary->psql('SET synchronous_commit = on;'
                          . ' SELECT txid_current()');
           $replica->psql("SELECT count(*) FROM pg_locks WHERE relation ="
                          . " 'delivery_orders'::regclass AND mode ="
                          . " 'AccessExclusiveLock' AND granted") > 0
       }, 5), "$name: the primary's lock replayed on the replica");

    my $inflight = $t->request_async('GET', "/tms/delivery-orders/$order",
                                     headers => \%tms, timeout => 15);
    ok($t->wait_until(sub { waiting_on_replica() > 0 }, 5),
       "$name: a GET waits on the replica");

    $replica->stop(mode => $mode);

    # the first GETs after it went down (on other tables: the primary's
    # lock holds the orders), then the one in flight, run again on the
    # primary once the lock is gone
    my @bad;
    for (1 .. 5) {
        my $r = get_account();
        push @bad, $r->{status} if $r->{status} != 200;
        $r = get_transfers();
        push @bad, $r->{status} if $r->{status} != 200;
    }
    is("@bad", '', "$name: the next GETs answer 200, from the primary");

    $r = $inflight->wait;
    is($r->{status}, 200, "$name: the GET in flight answers 200")
        or diag($r->{content});
    is($r->{json}{data}{orderNumber}, 'DO-1001-P',
       "$name: with the order");
    $lock->wait;

    @bad = ();
    ($mp) = mark($primary);
    for (1 .. 5) {
        my $r = get_order();
        push @bad, $r->{status} if $r->{status} != 200;
    }
    is("@bad", '', "$name: GETs of orders answer 200");
    ok(statements($primary, $mp) >= 5, "$name: from the primary");

    $r = $t->request('GET', '/health');
    is($r->{status}, 200, "$name: health 200: reads have the primary");
    is($r->{json}{postgresRead}{status}, 'down',
       "$name: health: the read pool is down");

    # back: after the read pool's backoff, GETs read from the replica
    # again; proven with replay paused
    $replica->start;
    ok($replica->wait_replayed, "$name: started again, caught up");
    $replica->pause_replay;
    $primary->psql("UPDATE delivery_orders SET order_number = 'DO-$mode'"
                   . " WHERE id = '$order'");
    ok($t->wait_until(sub { order_number() eq 'DO-1001-P' }, 10),
       "$name, started again: GETs read from the replica again");
    $replica->resume_replay;
    ok($replica->wait_replayed, "$name: replay resumed");
    is(order_number(), "DO-$mode", "$name: the replica has the change");
    $primary->psql("UPDATE delivery_orders SET order_number = 'DO-1001-P'"
                   . " WHERE id = '$order'");
    ok($replica->wait_replayed, "$name: caught up again");
}

### a read pool over two servers: its connections take the hosts in turn

# the replica and then the primary, either suits: without the turns, libpq
# would connect every one of them to the first

$t->stop;
my ($rport) = $replica->dsn =~ /port=(\d+)/;
my ($pport) = $pdsn =~ /port=(\d+)/;
$t->run(conf('"host=127.0.0.1,127.0.0.1 port=' . "$rport,$pport"
             . ' dbname=platform user=postgres target_session_attrs=any"'));

my @orders = map { [ GET => "/tms/delivery-orders/$order",
                     headers => \%tms ] } 1 .. 20;
my (@statuses, $on_primary, $on_replica);
($mp, $mr) = (mark($primary), mark($replica));
ok($t->wait_until(sub {
       push @statuses, grep { $_ != 200 } map { $_->{status} }
                            @{$t->burst(\@orders)};
       $on_primary = statements($primary, $mp);
       $on_replica = statements($replica, $mr);
       $on_primary > 0 && $on_replica > 0 }, 10),
   'two hosts: GETs read from both servers')
    or diag("$on_primary on the primary, $on_replica on the replica");
is("@statuses", '', 'two hosts: every GET answers 200');
every_get('two hosts', 'either');

### the same statuses without the read pool, and with one never reachable

$t->stop;
$t->run(conf('off'));

every_get('platform_pg_read off', 'primary');
$r = $t->request('GET', '/health');
is_deeply($r->{json}, { status => 'up', postgres => { status => 'up' },
                        redis => { status => 'up' } },
          'off: health without the read pool');
unlike(metrics(), qr/pool="read"/, 'off: no read pool in the metrics');

$t->stop;
my $closed = Platform::Test::closed_port();
$t->run(conf('"host=127.0.0.1 port=' . $closed . ' dbname=platform'
             . ' user=postgres target_session_attrs=prefer-standby"'));

every_get('read pool never reachable', 'primary');
my @slow;
for (1 .. 5) {
    my $r = get_order();
    push @slow, "$r->{status} in $r->{time} s"
        if $r->{status} != 200 || $r->{time} > 3;
}
is("@slow", '', 'never reachable: GETs answer 200 at once, from the primary');
$r = $t->request('GET', '/health');
is($r->{status}, 200, 'never reachable: health 200');
is($r->{json}{postgresRead}{status}, 'down',
   'never reachable: health: the read pool is down');
like(metrics(), qr/pool="read"/, 'never reachable: metrics name it');

### nginx -t

$t->config_refused(conf('"host=127.0.0.1 port"'), qr/platform_pg_read/,
                   'a malformed conninfo');
$t->config_refused(conf('"nosuchoption=1"'), qr/platform_pg_read/,
                   'an unknown conninfo option');
ok($t->check_config(conf('off'))->{ok}, 'platform_pg_read off: accepted');
$t->config_refused(conf($read_dsn) =~ s/^\s*platform_pg .*\n//mr,
                   qr/platform_pg_read.*platform_pg|platform_pg\b.*not set/,
                   'a read pool without platform_pg');
ok($t->check_config(conf($read_dsn))->{ok}, 'a conninfo: accepted');

$t->done;
done_testing;
