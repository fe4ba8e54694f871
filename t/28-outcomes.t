#!/usr/bin/perl

# The one place that maps what PostgreSQL answered to a status
# (ngx_platform_op.c), seen through the tax delete: a trigger the test puts
# on the table raises the SQLSTATE under test. A serialization failure or a
# deadlock is retried once (the retry's success is 200, a second failure
# 503); a server out of resources, shutting down or cancelling is 503 with
# Retry-After; anything else is 500, and none of the server's text reaches
# the client.

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Platform::Test;
use Platform::JWT;

my $t = Platform::Test->new();
my $k = Platform::JWT::keys($t->testdir . '/keys');

$t->run(<<'EOF');
    server {
        listen 127.0.0.1:%%PORT%%;
        location /api/ {
            platform_invoices;
            platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;
        }
        location = /metrics { platform_metrics; }
    }
EOF

# the next raise.failures deletes fail with raise.state; a sequence counts
# them, since it is not rolled back with the failing transaction
$t->psql(<<'SQL');
CREATE TABLE raise (state text, failures int);
INSERT INTO raise VALUES ('00000', 0);
CREATE SEQUENCE raised;
-- the trigger runs as the module's role
GRANT SELECT ON raise TO platform_module;
GRANT USAGE ON SEQUENCE raised TO platform_module;

CREATE FUNCTION raise_on_delete() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    s text;
BEGIN
    SELECT state INTO s FROM raise WHERE nextval('raised') <= failures;
    IF s IS NOT NULL THEN
        RAISE EXCEPTION 'secret internal detail % of the trigger', s
            USING ERRCODE = s;
    END IF;
    RETURN OLD;
END $$;

CREATE TRIGGER raise_on_delete BEFORE DELETE ON invoice_tax_settings
    FOR EACH ROW EXECUTE FUNCTION raise_on_delete();
SQL

my $token = Platform::JWT::hs256($k);
my $n = 0;

# a new tax setting of tenant-a, deleted; failing the given times first
sub delete_failing {
    my ($state, $failures) = @_;
    my $id = sprintf('f0000000-0000-4000-8000-%012d', ++$n);
    $t->psql("INSERT INTO invoice_tax_settings (id, tenant_id, name, rate)"
             . " VALUES ('$id', 'tenant-a', 'tax $n', 1);"
             . " UPDATE raise SET state = '$state', failures = $failures;"
             . " SELECT setval('raised', 1, false)");
    my $r = $t->request('DELETE',
        "/api/v1/InvoiceSetting/DeleteInvoiceTax?TaxSettingId=$id",
        headers => { Authorization => "Bearer $token" });
    $r->{id} = $id;
    return $r;
}

sub exists_still {
    return $t->psql("SELECT count(*) FROM invoice_tax_settings"
                    . " WHERE id = '$_[0]'");
}

sub retries {
    my $m = $t->request('GET', '/metrics')->{content};
    return $m =~ /^platform_pg_retries_total (\d+)$/m ? $1 : -1;
}

sub unavailable {
    my ($r, $name) = @_;
    is($r->{status}, 503, "$name: 503");
    is($r->{headers}{'retry-after'}, '1', "$name: Retry-After");
    is($r->{json}{succeeded}, JSON::PP::false, "$name: Envelope A");
    is($r->{json}{message}, 'Service temporarily unavailable.',
       "$name: message");
    unlike($r->{content}, qr/secret|trigger|SQLSTATE/i,
           "$name: nothing of the server's text");
}

# retried once

for my $state (qw(40001 40P01)) {
    my $before = retries();
    my $r = delete_failing($state, 1);
    is($r->{status}, 200, "$state once: the retry deletes");
    is(exists_still($r->{id}), 0, "$state once: gone");
    is(retries(), $before + 1, "$state once: one retry counted");

    $r = delete_failing($state, 2);
    unavailable($r, "$state twice");
    is(exists_still($r->{id}), 1, "$state twice: nothing deleted");
}

# unavailable without a retry

for my $state (qw(53300 53200 57P01 57014 08006)) {
    my $before = retries();
    my $r = delete_failing($state, 1);
    unavailable($r, $state);
    is(retries(), $before, "$state: not retried");
}

# anything else: 500, nothing internal

for my $state (qw(P0001 23505 22012 42501)) {
    my $r = delete_failing($state, 1);
    is($r->{status}, 500, "$state: 500");
    is($r->{json}{message}, 'Internal server error.', "$state: message");
    is_deeply($r->{json}{errors}, ['The request could not be completed.'],
              "$state: the generic detail");
    unlike($r->{content}, qr/secret|trigger|SQLSTATE|$state/i,
           "$state: nothing of the server's text");
    is(exists_still($r->{id}), 1, "$state: nothing deleted");
}

like($t->error_log, qr/statement "platform_invoices\w*" failed: SQLSTATE P0001/,
     'the error log names the statement and its SQLSTATE');

$t->ignore_log(qr/statement "platform_invoices|Redis|PostgreSQL/);

$t->done;
done_testing;
