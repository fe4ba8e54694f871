#!/usr/bin/perl

# Row-level security, the second wall behind each statement's own tenant
# condition: every table with tenant rows is guarded (FORCE, a policy on
# app.tenant_id); the module's role (platform_module, made by
# scripts/migrate) owns nothing and bypasses nothing, may only read
# api_keys and product_classifications, and by hand sees no row without the
# setting and only its tenant's with it, a transaction's setting ending with
# it. Through the module, with the tenant condition of the delivery order
# GET and of the bank transfers page taken away (the table is swapped for a
# view whose tenant_id is always the caller's), another tenant's rows stay
# invisible; with the policies disabled the same requests show them, so the
# wall is what stops them. platform_pg_row_security off sends no setting:
# the module's role then sees nothing, a role that bypasses sees all; on,
# connecting as a superuser is served and logs a warning.

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Platform::Test;
use Platform::JWT;

my $t = Platform::Test->new();
my $k = Platform::JWT::keys($t->testdir . '/keys');

my $mine = 'a0000000-0000-4000-8000-000000000001';
my $theirs = 'a0000000-0000-4000-8000-000000000002';

$t->psql(<<"SQL");
INSERT INTO delivery_orders (id, tenant_id, country_code, order_number,
                             status, pickup_address, dropoff_address)
VALUES ('$mine', 'tenant-a', 'NG', 'DO-1', 'PENDING', '{}', '{}'),
       ('$theirs', 'tenant-b', 'NG', 'DO-2', 'PENDING', '{}', '{}');
INSERT INTO bank_transfers (id, tenant_id, reference, amount, account_name,
    account_number, bank_name, beneficiary_account_name,
    beneficiary_account_number, beneficiary_bank_name, status, date, email,
    currency)
SELECT ('e0000000-0000-4000-8000-' || lpad(n::text, 12, '0'))::uuid,
       CASE WHEN n <= 3 THEN 'tenant-a' ELSE 'tenant-b' END,
       'REF-' || n, n, 'a', 'b', 'c', 'd', 'e', 'f', 'COMPLETED',
       now() - n * interval '1 day', 'x\@example.com', 'NGN'
  FROM generate_series(1, 5) n;
INSERT INTO webhook_events (tenant_id, kind, name, event_key, body)
VALUES (NULL, 'source', 'source-a', 'k1', '{}'),
       ('tenant-b', 'source', 'source-a', 'k2', '{}');
SQL

### the schema

is($t->psql("SELECT string_agg(t, ',') FROM platform_unguarded_tables() t"),
   '', 'every table with tenant rows is under row-level security');

is($t->psql(<<'SQL'), 'f|f|t|0', 'the role: no superuser, no BYPASSRLS, logs in, owns nothing');
SELECT r.rolsuper, r.rolbypassrls, r.rolcanlogin,
       (SELECT count(*) FROM pg_class c WHERE c.relowner = r.oid)
  FROM pg_roles r WHERE r.rolname = 'platform_module'
SQL

is($t->psql(<<'SQL'), 't|f|t|f|f|t|t', 'its privileges');
SELECT has_table_privilege('platform_module', 'api_keys', 'SELECT'),
       has_table_privilege('platform_module', 'api_keys', 'INSERT'),
       has_table_privilege('platform_module', 'product_classifications',
                           'SELECT'),
       has_table_privilege('platform_module', 'product_classifications',
                           'UPDATE'),
       has_table_privilege('platform_module', 'schema_migrations', 'SELECT'),
       has_table_privilege('platform_module', 'delivery_orders', 'DELETE'),
       has_table_privilege('platform_module', 'sale_payments', 'INSERT')
SQL

### by hand, as the module's role

# psql as the module connects: ($ok, output or error)
sub as_module {
    my ($sql) = @_;
    local $ENV{PGOPTIONS} = '-c client_min_messages=warning';
    my ($ok, $out, $err) = Platform::Test::_capture(
        Platform::Test::_pg_bin('psql'), '-X', '-A', '-t', '-q',
        '-v', 'ON_ERROR_STOP=1', '-d', $t->pg_dsn, '-c', $sql);
    chomp(my $text = $ok ? $out : $err);
    return ($ok, $text);
}

sub setting { "SELECT set_config('app.tenant_id', '$_[0]', true);" }

my ($ok, $out) = as_module('SELECT count(*) FROM bank_transfers');
is($out, '0', 'no setting: no row');

($ok, $out) = as_module('BEGIN;' . setting('tenant-a')
    . ' SELECT count(*) FROM bank_transfers;'
    . " SELECT count(*) FROM bank_transfers WHERE tenant_id = 'tenant-b';"
    . ' COMMIT; SELECT count(*) FROM bank_transfers');
is($out, "tenant-a\n3\n0\n0",
   "tenant-a: its 3 rows, none of tenant-b's; nothing once committed");

($ok, $out) = as_module('BEGIN;' . setting('tenant-a')
    . " UPDATE bank_transfers SET status = 'X' WHERE tenant_id = 'tenant-b'"
    . ' RETURNING id;'
    . " DELETE FROM delivery_orders WHERE id = '$theirs' RETURNING id;"
    . ' COMMIT');
is($out, 'tenant-a', "tenant-b's rows cannot be changed or deleted");
is($t->psql("SELECT count(*) FROM bank_transfers WHERE status = 'X'"),
   '0', '(nothing changed)');

($ok, $out) = as_module('BEGIN;' . setting('tenant-a')
    . " UPDATE bank_transfers SET tenant_id = 'tenant-b'"
    . " WHERE reference = 'REF-1'; COMMIT");
ok(!$ok && $out =~ /row-level security/,
   'a row cannot be given to another tenant') or diag($out);

($ok, $out) = as_module('BEGIN;' . setting('tenant-a')
    . " INSERT INTO delivery_orders (id, tenant_id, country_code,"
    . " order_number, status, pickup_address, dropoff_address)"
    . " VALUES (gen_random_uuid(), 'tenant-b', 'NG', 'DO-9', 'PENDING',"
    . " '{}', '{}'); COMMIT");
ok(!$ok && $out =~ /row-level security/,
   "nor inserted as another tenant's") or diag($out);

($ok, $out) = as_module('SET row_security = off;'
    . ' SELECT count(*) FROM bank_transfers');
ok(!$ok && $out =~ /row-level security/, 'nor can it turn the wall off')
    or diag($out);

($ok, $out) = as_module('BEGIN;' . setting('')
    . ' SELECT count(*) FROM webhook_events; COMMIT');
is($out, "\n1", 'webhook events: "" sees the tenantless one only');

### through the module, with the tenant conditions taken away

# tenant_id of every row reads as the caller's: the statements' own
# "tenant_id = $n" no longer tells tenants apart
for my $table (qw(delivery_orders bank_transfers)) {
    $t->psql(Platform::Test::tenant_blind_view($table)
             . "GRANT SELECT ON $table TO platform_module;");
}

my $conf = <<'EOF';
    server {
        listen 127.0.0.1:%%PORT%%;
        platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;
        location /tms/ { platform_tms; }
        location /api/ { platform_transfers; }
    }
EOF
$t->run($conf);

my %a = (tenantId => 'tenant-a', countryCode => 'NG');
my $bearer = 'Bearer ' . Platform::JWT::hs256($k, tenantId => 'tenant-a');

sub order { $t->request('GET', "/tms/delivery-orders/$_[0]", headers => \%a) }
sub page {
    my $r = $t->request('GET', '/api/v1/BankTransfers/all-account'
                        . '?PageNumber=1&PageSize=10',
                        headers => { Authorization => $bearer });
    return $r->{status} == 200
        ? scalar @{$r->{json}{data}} . '/' . $r->{json}{total}
        : $r->{status};
}

is(order($mine)->{status}, 200, "the order of the request's tenant: 200");
is(order($theirs)->{status}, 404,
   "another tenant's order, the tenant condition gone: 404");
is(page(), '3/3', 'the transfers page: the 3 of the tenant');

$t->psql('ALTER TABLE delivery_orders_guarded DISABLE ROW LEVEL SECURITY;'
         . ' ALTER TABLE bank_transfers_guarded DISABLE ROW LEVEL SECURITY');
my $r = order($theirs);
is($r->{status}, 200, 'without the policies that order is served')
    or diag($r->{content});
is(page(), '5/5', 'and the page has every tenant\'s transfers');
$t->psql('ALTER TABLE delivery_orders_guarded ENABLE ROW LEVEL SECURITY;'
         . ' ALTER TABLE bank_transfers_guarded ENABLE ROW LEVEL SECURITY');
is(order($theirs)->{status}, 404, 'policies back: 404 again');

### platform_pg_row_security off, the tables as they were

$t->psql('DROP VIEW delivery_orders; DROP VIEW bank_transfers;'
         . ' ALTER TABLE delivery_orders_guarded RENAME TO delivery_orders;'
         . ' ALTER TABLE bank_transfers_guarded RENAME TO bank_transfers');

ok($t->reload("    platform_pg_row_security off;\n$conf"), 'reload: off');
is(order($mine)->{status}, 404,
   'off, as the module role: no setting, no row, even its own');

my $admin = $t->pg_admin_dsn;
ok($t->reload("    platform_pg_row_security off;\n"
              . "    platform_pg \"$admin\";\n$conf"),
   'reload: off, connecting as a superuser');
is(order($mine)->{status}, 200, 'a role that bypasses: served');

ok($t->reload("    platform_pg \"$admin\";\n$conf"),
   'reload: on, connecting as a superuser');
is(order($mine)->{status}, 200, 'served');
$t->wait_until(sub { $t->error_log =~ /role "postgres" is a superuser/ }, 5);
like($t->error_log,
     qr/\[warn\].*PostgreSQL role "postgres" is a superuser, which row-level security does not bind/,
     'a warning says the wall does not bind a superuser');

ok($t->reload($conf), 'reload: on (the default)');
is(order($mine)->{status}, 200, 'on: served');
is(order($theirs)->{status}, 404, "on: the other tenant's is not");

$t->config_refused("    platform_pg_row_security maybe;\n$conf",
                   qr/platform_pg_row_security.*"on" or "off"/,
                   'platform_pg_row_security takes on or off');

$t->done;
done_testing;
