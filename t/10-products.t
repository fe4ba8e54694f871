#!/usr/bin/perl

# Product classifications: no auth, no envelope on success, ETag and 304,
# Envelope B errors, request ids.

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Platform::Test;

my $t = Platform::Test->new();

$t->run(<<'EOF');
    server {
        listen 127.0.0.1:%%PORT%%;
        location /api/v1/products/ {
            platform_products;
            platform_cache_max_age 120;
            platform_cache_time 0;
        }
    }

    server {
        listen 127.0.0.1:%%PORT_2%%;
        location /api/v1/products/ {
            platform_products;
            platform_cache_time 1500ms;
        }
    }
EOF

my $r = $t->request('GET', '/api/v1/products/classifications');
is($r->{status}, 200, 'empty catalogue answers');
is_deeply($r->{json}, { classifications => [] }, 'empty list');

$t->psql(<<'SQL');
INSERT INTO product_classifications (group_name, tags, position) VALUES
    ('Tubers', '{yam,cassava}', 2),
    ('Grains', '{rice,maize,sorghum}', 1),
    ('Livestock', '{}', 2);
SQL

$r = $t->request('GET', '/api/v1/products/classifications');
is($r->{status}, 200, 'classifications');
is($r->{headers}{'content-type'}, 'application/json; charset=utf-8',
   'content type');
is_deeply($r->{json}, { classifications => [
    { group => 'Grains', tags => [qw(rice maize sorghum)] },
    { group => 'Livestock', tags => [] },
    { group => 'Tubers', tags => [qw(yam cassava)] },
] }, 'groups in position then name order, tags kept');
ok(!exists $r->{json}{status}, 'no envelope on success');
is(Platform::Test::loose_json($r->{content}), '', 'compact JSON');
is($r->{headers}{'cache-control'}, 'public, max-age=120', 'cache control');
like($r->{headers}{etag}, qr/^"[0-9a-f]{32}"$/, 'strong etag');
like($r->{headers}{'x-request-id'}, qr/^[0-9a-f]{32}$/, 'request id');

my $etag = $r->{headers}{etag};

$r = $t->request('GET', '/api/v1/products/classifications',
                 headers => { 'If-None-Match' => $etag });
is($r->{status}, 304, 'matching If-None-Match is 304');
is($r->{content}, '', '304 has no body');
is($r->{headers}{etag}, $etag, '304 repeats the etag');
is($r->{headers}{'cache-control'}, 'public, max-age=120',
   '304 repeats cache control');

$r = $t->request('GET', '/api/v1/products/classifications',
                 headers => { 'If-None-Match' => "\"nope\", W/$etag" });
is($r->{status}, 304, 'weak tag in a list matches');

$r = $t->request('GET', '/api/v1/products/classifications',
                 headers => { 'If-None-Match' => '*' });
is($r->{status}, 304, 'star matches');

$r = $t->request('GET', '/api/v1/products/classifications',
                 headers => { 'If-None-Match' => '"0123"' });
is($r->{status}, 200, 'other tag gets the body');

$t->psql(q{UPDATE product_classifications SET tags = '{rice}'
           WHERE group_name = 'Grains'});

$r = $t->request('GET', '/api/v1/products/classifications',
                 headers => { 'If-None-Match' => $etag });
is($r->{status}, 200, 'changed catalogue: old tag no longer matches');
isnt($r->{headers}{etag}, $etag, 'new etag');

# the worker's cache: the same document for platform_cache_time

my $cached = $t->port(2);

$r = $t->request('GET', '/api/v1/products/classifications', port => $cached);
my $before = $r->{headers}{etag};
is($r->{headers}{'cache-control'}, 'public, max-age=60', 'default max-age');

$t->psql(q{UPDATE product_classifications SET tags = '{rice,millet}'
           WHERE group_name = 'Grains'});

$r = $t->request('GET', '/api/v1/products/classifications', port => $cached);
is($r->{headers}{etag}, $before, 'cached document within the cache time');

ok($t->wait_until(sub {
    $t->request('GET', '/api/v1/products/classifications',
                port => $cached)->{headers}{etag} ne $before }, 5),
   'fresh document after the cache time');

$r = $t->request('GET', '/api/v1/products/classifications', port => $cached);
is_deeply($r->{json}{classifications}[0]{tags}, [qw(rice millet)],
          'with the new tags');

$r = $t->request('HEAD', '/api/v1/products/classifications');
is($r->{status}, 200, 'HEAD');
is($r->{content}, '', 'HEAD has no body');

$r = $t->request('POST', '/api/v1/products/classifications', body => '{}');
is($r->{status}, 405, 'POST is 405');
is($r->{headers}{allow}, 'GET, HEAD', 'Allow header');
is($r->{json}{status}, JSON::PP::false, 'Envelope B on 405');
is($r->{json}{statusCode}, 405, 'statusCode is the HTTP status');
is($r->{json}{errors}[0]{message}, 'Method not allowed.', 'message');
is($r->{json}{errors}[0]{descriptiveMessage},
   'This endpoint accepts GET, HEAD.', 'names the allowed methods');

# a refused request's body is read and dropped: the connection goes on

my $raw = $t->raw_request(
    "POST /api/v1/products/classifications HTTP/1.1\r\nHost: x\r\n"
    . "Content-Type: application/json\r\nContent-Length: 11\r\n\r\n"
    . '{"a":"b c"}'
    . "GET /api/v1/products/classifications HTTP/1.1\r\nHost: x\r\n"
    . "Connection: close\r\n\r\n");
my @codes = $raw =~ m{HTTP/1\.1 (\d+) }g;
is("@codes", '405 200', 'keep-alive after a refused request with a body');

$r = $t->request('GET', '/api/v1/products/unknown');
is($r->{status}, 404, 'unknown path is 404');
is($r->{json}{status}, JSON::PP::false, 'Envelope B on 404');
is_deeply($r->{json}{data}, {}, 'data is an empty object');
ok($r->{json}{errors}[0]{descriptiveMessage}, 'descriptive message');

$r = $t->request('GET', '/api/v1/products/classifications',
                 headers => { 'X-Request-Id' => 'abc-123.x' });
is($r->{headers}{'x-request-id'}, 'abc-123.x', 'client request id kept');

$r = $t->request('GET', '/api/v1/products/classifications',
                 headers => { 'X-Request-Id' => 'bad id with spaces' });
like($r->{headers}{'x-request-id'}, qr/^[0-9a-f]{32}$/,
     'insane request id replaced');

$t->done;
done_testing;
