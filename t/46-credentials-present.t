#!/usr/bin/perl

# Credentials that are sent are checked, even where a route trusts the
# tenancy headers alone: on the delivery order GET and assign a bearer
# token that is present is verified (a bad one is 401, one of another
# tenant than the tenantId header 403), and on task requests a verified
# token's sub must be the userId header, which the history then records.
# A location that demands a token for task requests ("platform_auth bearer
# tenant") refuses a request without one.

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Platform::Test;
use Platform::JWT;

my $t = Platform::Test->new();
my $k = Platform::JWT::keys($t->testdir . '/keys');

# port 1: every route's default, with a key to verify tokens with;
# port 2: the task requests demand a token; port 3: no key at all
$t->run(<<'EOF');
    server {
        listen 127.0.0.1:%%PORT%%;
        platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;

        location /tms/ { platform_tms; }
        location /api/v1/task-requests/ { platform_task_requests; }
    }

    server {
        listen 127.0.0.1:%%PORT_2%%;
        platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;

        location /api/v1/task-requests/ {
            platform_task_requests;
            platform_auth bearer tenant;
        }
    }

    server {
        listen 127.0.0.1:%%PORT_3%%;

        location /tms/ { platform_tms; platform_auth tenant; }
    }
EOF

my $order = 'a4600000-0000-4000-8000-000000000001';
my $driver = 'd4600000-0000-4000-8000-000000000001';
my $lab = '44600000-0000-4000-8000-0000000000a1';
my %T = map { $_ => sprintf('64600000-0000-4000-8000-%012d', $_) } 1 .. 6;

$t->psql(<<"SQL");
INSERT INTO drivers (id, tenant_id, country_code, name, phone, vehicle_type,
                     status)
VALUES ('$driver', 'tenant-a', 'NG', 'Ada Obi', '+2348000000001', 'BIKE',
        'AVAILABLE');
INSERT INTO delivery_orders (id, tenant_id, country_code, order_number,
                             status, pickup_address, dropoff_address,
                             created_at, updated_at)
VALUES ('$order', 'tenant-a', 'NG', 'DO-4601', 'PENDING', '{}', '{}',
        now(), now());
INSERT INTO laboratories (id, tenant_id, country_code, name)
VALUES ('$lab', 'tenant-a', 'NG', 'Lab A1');
INSERT INTO task_requests (id, tenant_id, country_code, laboratory_id,
                           status)
SELECT ('64600000-0000-4000-8000-' || lpad(n::text, 12, '0'))::uuid,
       'tenant-a', 'NG', '$lab', 'PENDING'
FROM generate_series(1, 6) AS n;
SQL

sub token {
    my (%claims) = @_;
    return Platform::JWT::hs256($k, %claims);
}

# another signature: its first character changed (the last one's unused
# bits would make it malformed instead, half the time)
my ($h64, $c64, $s64) = split /\./, token();
substr($s64, 0, 1) = substr($s64, 0, 1) eq 'A' ? 'B' : 'A';
my $bad_token = "$h64.$c64.$s64";
my $expired = token(exp => int(time) - 3600);

sub error_is { goto &Platform::Test::is_envelope_b_error }

sub order {
    my (%o) = @_;
    my %h = (tenantId => 'tenant-a', countryCode => 'NG',
             %{$o{headers} // {}});
    $h{Authorization} = $o{auth} if defined $o{auth};
    return $t->request('GET', "/tms/delivery-orders/$order", headers => \%h,
                       port => $o{port} // $t->port);
}

sub assign {
    my (%o) = @_;
    my %h = (tenantId => 'tenant-a', countryCode => 'NG');
    $h{Authorization} = $o{auth} if defined $o{auth};
    return $t->request('PATCH',
                       "/tms/delivery-orders/$order/assign/$driver",
                       headers => \%h);
}

### delivery orders: no token, as before; a token that is sent, checked

my $r = order();
is($r->{status}, 200, 'order, no token: 200') or diag($r->{content});

$r = order(auth => 'Bearer ' . token());
is($r->{status}, 200, "order, a valid token of the header's tenant: 200")
    or diag($r->{content});

for my $case ([ $bad_token, 'The token signature is invalid.', 'forged' ],
              [ $expired, 'The token has expired.', 'expired' ],
              [ 'not.a.token', 'The token is malformed.', 'malformed' ])
{
    my ($tok, $reason, $what) = @$case;
    $r = order(auth => "Bearer $tok");
    error_is($r, 401, 'Invalid token.', $reason, "order, $what token");
    like($r->{headers}{'www-authenticate'} // '', qr/^Bearer error=/,
         "order, $what token: WWW-Authenticate");
}

$r = order(auth => 'Bearer ' . token(tenantId => 'tenant-b'));
error_is($r, 403, 'Access denied.',
         'The tenantId header does not match the credentials.',
         "order, a token of another tenant than the header");

$r = order(auth => 'Basic dXNlcjpwYXNz');
is($r->{status}, 200, 'order, another scheme than Bearer: not a token, 200');

$r = order(auth => 'Bearer ' . token(tenantId => 'tenant-b'),
           port => $t->port(3));
is($r->{status}, 200,
   'order where no key is configured: the token cannot be checked, 200');

$r = assign(auth => "Bearer $bad_token");
error_is($r, 401, 'Invalid token.', 'The token signature is invalid.',
         'assign, forged token');
$r = assign(auth => 'Bearer ' . token(tenantId => 'tenant-b'));
error_is($r, 403, 'Access denied.',
         'The tenantId header does not match the credentials.',
         'assign, a token of another tenant');
is($t->psql("SELECT status FROM delivery_orders WHERE id = '$order'"),
   'PENDING', 'refused assigns changed nothing');

$r = assign(auth => 'Bearer ' . token());
is($r->{status}, 200, 'assign, a valid token: 200') or diag($r->{content});
is($t->psql("SELECT driver_id FROM delivery_orders WHERE id = '$order'"),
   $driver, 'assign, a valid token: assigned');

### task requests: the userId of a verified token is its sub

sub toggle {
    my ($id, %o) = @_;
    my %h = (tenantId => 'tenant-a', userId => $o{user} // 'user-1',
             'Content-Type' => 'application/json');
    $h{Authorization} = $o{auth} if defined $o{auth};
    return $t->request('PATCH',
                       "/api/v1/task-requests/$id/toggle-accept-reject",
                       headers => \%h, port => $o{port} // $t->port,
                       body => '{"status":"ACCEPTED","samplerOrLaboratoryId":"'
                               . $lab . '"}');
}

sub history {
    my ($id) = @_;
    return $t->psql("SELECT coalesce(string_agg(changed_by, ' '), '')"
                    . " FROM task_request_history WHERE task_id = '$id'");
}

$r = toggle($T{1});
is($r->{status}, 200, 'task, no token: the userId header, as before')
    or diag($r->{content});
is(history($T{1}), 'user-1', 'task, no token: the header recorded');

$r = toggle($T{2}, auth => 'Bearer ' . token(sub => 'user-9'));
error_is($r, 403, 'Access denied.',
         "The userId header does not match the token's sub.",
         'task, a token whose sub is another user');
is(history($T{2}), '', 'task, another user: nothing recorded');

$r = toggle($T{2}, auth => "Bearer $bad_token");
error_is($r, 401, 'Invalid token.', 'The token signature is invalid.',
         'task, a forged token');

$r = toggle($T{2}, auth => 'Bearer ' . token(sub => 'user-1'));
is($r->{status}, 200, 'task, the sub is the userId: 200')
    or diag($r->{content});
is(history($T{2}), 'user-1', 'task, the verified sub recorded');

# a location that demands a token

$r = toggle($T{3}, port => $t->port(2));
error_is($r, 401, 'Authentication required.', 'A bearer token is required.',
         'task where a token is required: none sent');
$r = toggle($T{3}, port => $t->port(2), user => 'user-1',
            auth => 'Bearer ' . token(sub => 'user-7'));
error_is($r, 403, 'Access denied.',
         "The userId header does not match the token's sub.",
         'task where a token is required: userId is not the sub');
$r = toggle($T{3}, port => $t->port(2), user => 'user-7',
            auth => 'Bearer ' . token(sub => 'user-7'));
is($r->{status}, 200, 'task where a token is required: sub and userId agree')
    or diag($r->{content});
is(history($T{3}), 'user-7', 'task where a token is required: sub recorded');

$t->done;
done_testing;
