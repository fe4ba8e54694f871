#!/usr/bin/perl

# Smoke test of the harness: nginx starts with the module loaded, the test's
# database and the suite's Redis answer.

# platform-test: serial (time bounds)

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Platform::Test;

my $t = Platform::Test->new;

$t->run(<<'EOF');
    server {
        listen 127.0.0.1:%%PORT%%;

        location = /ping {
            return 200 "pong";
        }
    }
EOF

my $r = $t->request('GET', '/ping');
is($r->{status}, 200, 'ping status');
is($r->{content}, 'pong', 'ping body');
ok(defined $r->{time} && $r->{time} < 5, 'request time measured');

my $raw = $t->raw_request("GET /ping HTTP/1.0\r\nHost: localhost\r\n\r\n");
like($raw, qr{^HTTP/1\.1 200 .*\r\n\r\npong$}s, 'raw request');
is($t->parse_response($raw)->{content}, 'pong', 'parsed raw response');

my $async = $t->request_async('GET', '/ping');
is($async->wait->{content}, 'pong', 'async request');

is($t->request('GET', '/nothing-here')->{status}, 404, 'unknown path');

is($t->psql('SELECT 1'), '1', 'psql');
ok($t->psql('SELECT count(*) FROM schema_migrations') > 0,
   'database cloned from the migrated template');
is($t->psql('SELECT count(*) FROM delivery_orders'), '0',
   'template holds no data');

is($t->redis('PING'), 'PONG', 'redis');

ok($t->reload, 'reload');
is($t->request('GET', '/ping')->{content}, 'pong', 'ping after reload');

$t->done;
done_testing;
