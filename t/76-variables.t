#!/usr/bin/perl

# The $platform_* variables, read from a real access log (log_format
# escape=json): request id, trace id, tenant, credential (API key id or
# token sub), family, operationId (the OpenAPI document's), the reason of
# an error, the time waited on PostgreSQL and on Redis, for successes,
# errors, PostgreSQL and Redis requests and a location that is not the
# module's (all empty). And limit_req keyed by $platform_tenant: one
# tenant limited, not another; a tenantId header without the credential
# its route requires spends nobody's budget; an API key counts from its
# first lookup in the worker.

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use JSON::PP;
use Time::HiRes qw(time sleep);
use Platform::Test;
use Platform::JWT;

my $t = Platform::Test->new(workers => 1);
my $k = Platform::JWT::keys($t->testdir . '/keys');

# a Redis of its own, to hold up with CLIENT PAUSE
my $redis = $t->start_private_redis;
my $addr = $redis->addr;

my $vars = join(',', map { qq("$_":"\$platform_$_") }
                qw(request_id trace_id tenant credential family operation
                   error pg_time redis_time));

$t->run(<<"EOF");
    platform_redis $addr;

    log_format platform_json escape=json
        '{"marker":"\$http_x_marker","status":"\$status",$vars}';

    limit_req_zone \$platform_tenant zone=tenants:1m rate=1r/m;

    server {
        listen 127.0.0.1:%%PORT%%;
        access_log %%TESTDIR%%/access.log platform_json;

        platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;

        location /validate-otp/ {
            platform_otp;
            platform_otp_attempts 1000 5m;
            platform_otp_tenant_attempts off;
        }
        location /tms/ { platform_tms; }
        location /api/v1/products/ { platform_products; }
        location /api/v1/task-requests/ { platform_task_requests; }
        location /api/v1/trades/ {
            platform_trades;
            platform_auth apikey;
        }
        location /api/ { platform_persons; }
        location = /openapi.json { platform_openapi; }
        location /plain { return 200 "plain\\n"; }
    }

    server {
        listen 127.0.0.1:%%PORT_2%%;
        access_log %%TESTDIR%%/limited.log platform_json;

        platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;
        limit_req zone=tenants burst=2 nodelay;
        limit_req_status 429;

        location /tms/ { platform_tms; }
        location /api/v1/trades/ {
            platform_trades;
            platform_auth apikey;
            platform_apikey_cache_time 60s;
        }
        location /api/ { platform_persons; }
    }
EOF

my @c = ('A' .. 'Z', 'a' .. 'z', '0' .. '9', '-', '_');

sub insert_key {
    my ($id, $tenant) = @_;
    my $key = "plk_$id." . join('', map { $c[int rand @c] } 1 .. 43);
    $t->psql("INSERT INTO api_keys (id, tenant_id, scope, key_digest)"
             . " VALUES ('$id', '$tenant', 'trades',"
             . " sha256(convert_to('$key', 'UTF8')))");
    return $key;
}

sub token {
    my ($tenant, $sub) = @_;
    return Platform::JWT::hs256($k, tenantId => $tenant, sub => $sub);
}

my $n = 0;

# a request marked for its log line: (response, log entry)
sub logged {
    my ($method, $path, %o) = @_;
    my $file = delete $o{log} // 'access.log';
    my $marker = 'm' . ++$n;
    my %h = (%{delete $o{headers} // {}}, 'X-Marker' => $marker);
    my $r = $t->request($method, $path, headers => \%h, %o);
    my $entry = $t->wait_until(sub { entry($file, $marker) }, 5);
    return ($r, $entry // {});
}

sub entry {
    my ($file, $marker) = @_;
    open(my $fh, '<', $t->testdir . "/$file") or return undef;
    while (my $line = <$fh>) {
        my $e = eval { decode_json($line) } or next;
        return $e if $e->{marker} eq $marker;
    }
    return undef;
}

my $ms = qr/^\d+\.\d{3}$/;

my $doc = $t->request('GET', '/openapi.json')->{json};

# the operationId of a path and method in the served document
sub operation_id {
    my ($path, $method) = @_;
    return $doc->{paths}{$path}{$method}{operationId} // 'none';
}

# --- a success on PostgreSQL, with an API key --------------------------

my $key = insert_key('00000000000076aa', 't76-keyed');

my ($r, $e) = logged('GET', '/api/v1/trades/process-flows',
                     headers => { apiKey => $key,
                                  'X-Request-Id' => 'r76-trades' });
is($r->{status}, 200, 'trades: 200');
is($e->{request_id}, 'r76-trades', 'trades: request id');
like($e->{trace_id}, qr/^[0-9a-f]{32}$/, 'trades: trace id');
is($e->{tenant}, 't76-keyed', "trades: the key's tenant");
is($e->{credential}, '00000000000076aa', "trades: the key's id");
is($e->{family}, 'trades', 'trades: family');
is($e->{operation}, operation_id('/api/v1/trades/process-flows', 'get'),
   'trades: the operationId of the OpenAPI document');
is($e->{operation}, 'getApiV1TradesProcessFlows', 'trades: operationId');
is($e->{error}, '', 'trades: no error');
like($e->{pg_time}, $ms, 'trades: PostgreSQL time');
is($e->{redis_time}, '', 'trades: no Redis');

# the wait is the statement's: a lock held for 0.6 s shows in it

my $lock = $t->hold_lock('trade_process_flows', 0.6);
($r, $e) = logged('GET', '/api/v1/trades/process-flows',
                  headers => { apiKey => $key });
$lock->wait;
is($r->{status}, 200, 'trades behind a lock: 200');
cmp_ok($e->{pg_time}, '>=', 400, 'trades behind a lock: its wait counted')
    or diag("pg_time $e->{pg_time}");
cmp_ok($e->{pg_time}, '<', 5000, 'trades behind a lock: in milliseconds');

# --- an error on PostgreSQL, with a bearer token -------------------------

($r, $e) = logged('GET',
                  '/api/v1/PersonAccounts/c0000000-0000-4000-8000-000000000076/get',
                  headers => { Authorization => 'Bearer '
                                   . token('t76-bearer', 'user-76') });
is($r->{status}, 404, 'person account: 404');
is($e->{tenant}, 't76-bearer', "person account: the token's tenant");
is($e->{credential}, 'user-76', "person account: the token's sub");
is($e->{family}, 'persons', 'person account: family');
is($e->{operation},
   operation_id('/api/v{version}/PersonAccounts/{id}/get', 'get'),
   'person account: operationId');
is($e->{error}, 'not_found', 'person account: not_found');
like($e->{pg_time}, $ms, 'person account: PostgreSQL time');
is($e->{redis_time}, '', 'person account: no Redis');
is($e->{request_id}, $r->{headers}{'x-request-id'},
   'person account: the request id answered');

# --- Redis ------------------------------------------------------------

$redis->redis(qw(SET otp:t76-otp:NG:123456 1 EX 600));

my %otp = (tenantId => 't76-otp', countryCode => 'NG');

($r, $e) = logged('GET', '/validate-otp/123456', headers => \%otp);
is($r->{status}, 200, 'otp: 200');
is($e->{tenant}, 't76-otp', 'otp: the tenantId header');
is($e->{credential}, '', 'otp: no credential');
is($e->{family}, 'otp', 'otp: family');
is($e->{operation}, operation_id('/validate-otp/{otpCode}', 'get'),
   'otp: operationId');
is($e->{error}, '', 'otp: no error');
like($e->{redis_time}, $ms, 'otp: Redis time');
is($e->{pg_time}, '', 'otp: no PostgreSQL');

($r, $e) = logged('GET', '/validate-otp/654321', headers => \%otp);
is($r->{status}, 404, 'otp unknown: 404');
is($e->{error}, 'not_found', 'otp unknown: not_found');
like($e->{redis_time}, $ms, 'otp unknown: Redis time');

# Redis held up for 0.4 s: the command's wait counted

$redis->redis(qw(CLIENT PAUSE 400 ALL));
($r, $e) = logged('GET', '/validate-otp/111111', headers => \%otp);
is($r->{status}, 404, 'otp, Redis paused: answered');
cmp_ok($e->{redis_time}, '>=', 300, 'otp, Redis paused: its wait counted')
    or diag("redis_time $e->{redis_time}");

# --- errors before any backend ------------------------------------------

($r, $e) = logged('GET',
                  '/tms/delivery-orders/a1000000-0000-4000-8000-000000000076',
                  headers => { tenantId => 't76-tms' });
is($r->{status}, 400, 'no countryCode: 400');
is($e->{error}, 'validation', 'no countryCode: validation');
is($e->{tenant}, 't76-tms', 'no countryCode: the tenant');
is($e->{operation},
   operation_id('/tms/delivery-orders/{deliveryOrderUuid}', 'get'),
   'no countryCode: operationId');
is($e->{pg_time}, '', 'no countryCode: no PostgreSQL');

($r, $e) = logged('POST', '/validate-otp/123456', headers => \%otp);
is($r->{status}, 405, 'POST: 405');
is($e->{error}, 'method_not_allowed', 'POST: method_not_allowed');
is($e->{operation}, '', 'POST: no operation');
is($e->{family}, 'otp', 'POST: family');

($r, $e) = logged('GET', '/tms/nothing', headers => { tenantId => 't76' });
is($r->{status}, 404, 'unknown path: 404');
is($e->{error}, 'not_found', 'unknown path: not_found');
is($e->{tenant}, '', 'unknown path: no tenant');

($r, $e) = logged('PATCH',
    '/api/v1/task-requests/a1000000-0000-4000-8000-000000000076/assign-sampler',
    headers => { tenantId => 't76-task', userId => 'u1',
                 'Content-Type' => 'application/json' },
    body => '{"status":');
is($r->{status}, 400, 'malformed JSON: 400');
is($e->{error}, 'invalid_json', 'malformed JSON: invalid_json');

($r, $e) = logged('PATCH',
    '/api/v1/task-requests/a1000000-0000-4000-8000-000000000076/assign-sampler',
    headers => { tenantId => 't76-task', userId => 'u1',
                 'Content-Type' => 'application/json' },
    body => '[]');
is($r->{status}, 400, 'an array: 400');
is($e->{error}, 'validation', 'an array: validation');

($r, $e) = logged('PATCH',
    '/api/v1/task-requests/a1000000-0000-4000-8000-000000000076/assign-sampler',
    headers => { tenantId => 't76-task', userId => 'u1',
                 'Content-Type' => 'application/json' },
    body => '[' x 65 . ']' x 65);
is($e->{error}, 'body_too_complex', 'nested too deeply: body_too_complex');

($r, $e) = logged('GET',
                  '/api/v1/PersonAccounts/c0000000-0000-4000-8000-000000000076/get',
                  headers => { Authorization => 'Bearer nonsense' });
is($r->{status}, 401, 'bad token: 401');
is($e->{error}, 'unauthorized', 'bad token: unauthorized');
is($e->{tenant}, '', 'bad token: no tenant');
is($e->{credential}, '', 'bad token: no credential');

# a HEAD is its own operation in the document

($r, $e) = logged('HEAD', '/api/v1/products/classifications');
is($r->{status}, 200, 'HEAD: 200');
is($e->{operation}, operation_id('/api/v1/products/classifications', 'head'),
   "HEAD: the HEAD's operationId");
like($e->{operation}, qr/^head/, 'HEAD: a head operation');
like($e->{pg_time}, $ms, 'HEAD: PostgreSQL time');
is($e->{tenant}, '', 'HEAD: an anonymous route has no tenant');

# --- a location that is not the module's: everything empty ---------------

($r, $e) = logged('GET', '/plain',
                  headers => { tenantId => 't76', 'X-Request-Id' => 'r76',
                               traceparent => '00-' . 'a' x 32 . '-'
                                              . 'b' x 16 . '-01' });
is($r->{status}, 200, 'plain: 200');
is($e->{$_}, '', "plain: $_ empty")
    for qw(request_id trace_id tenant credential family operation error
           pg_time redis_time);

# --- limit_req keyed by $platform_tenant ---------------------------------

sub limited {
    my ($method, $path, %o) = @_;
    return logged($method, $path, log => 'limited.log', port => $t->port(2),
                  %o);
}

my $order = '/tms/delivery-orders/a1000000-0000-4000-8000-000000000076';

# rate 1r/m, burst 2: a tenant's fourth request is refused

my @s = map { (limited('GET', $order, headers => { tenantId => 't76-a',
                                                    countryCode => 'NG' }))[0]
              ->{status} } 1 .. 4;
is_deeply(\@s, [404, 404, 404, 429], 'tenant a: limited after its burst');

($r, $e) = limited('GET', $order, headers => { tenantId => 't76-a',
                                                countryCode => 'NG' });
is($r->{status}, 429, 'tenant a: still limited');
is($e->{error}, 'rate_limited', 'tenant a: rate_limited');
is($e->{tenant}, 't76-a', 'tenant a: the tenant logged');
is($r->{json}{statusCode}, 429, 'tenant a: in the envelope');

($r, $e) = limited('GET', $order, headers => { tenantId => 't76-b',
                                                countryCode => 'NG' });
is($r->{status}, 404, 'tenant b: not limited');

# no tenant: not counted (limit_req skips an empty key)

@s = map { (limited('GET', $order, headers => { countryCode => 'NG' }))[0]
           ->{status} } 1 .. 5;
is_deeply(\@s, [(400) x 5], 'no tenant: never limited');

# a route that requires a token: a tenantId header alone counts for
# nobody, the token's tenant does

my $person = '/api/v1/PersonAccounts/c0000000-0000-4000-8000-000000000076/get';

@s = map { (limited('GET', $person, headers => { tenantId => 't76-victim' }))[0]
           ->{status} } 1 .. 5;
is_deeply(\@s, [(401) x 5], 'a header without its token: 401, not counted');

my $victim = 'Bearer ' . token('t76-victim', 'user-v');

@s = map { (limited('GET', $person, headers => { Authorization => $victim }))[0]
           ->{status} } 1 .. 4;
is_deeply(\@s, [404, 404, 404, 429], "the token's tenant: its own budget");

# an API key: counted once the worker has looked it up

my $key_c = insert_key('00000000000076cc', 't76-c');

@s = map { (limited('GET', '/api/v1/trades/process-flows',
                    headers => { apiKey => $key_c }))[0]->{status} } 1 .. 5;
is_deeply(\@s, [200, 200, 200, 200, 429],
          "an API key's tenant: counted from its first lookup");

$t->done;
done_testing;
