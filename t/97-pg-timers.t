#!/usr/bin/perl

# nginx's timer code reads the data of every timer event as a connection:
# its debug lines print ((ngx_connection_t *) ev->data)->fd. The transport's
# timers (connect, statement, idle, a queued request's wait) must point at
# a connection, so those lines show a real fd or -1, never bytes of
# another structure.

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Time::HiRes qw(sleep);
use Platform::Test;

my $t = Platform::Test->new(workers => 1, log_level => 'debug');

$t->run(<<'EOF');
    platform_pg_pool_size 1;
    platform_pg_pipeline_depth 1;
    platform_pg_connect_timeout 2345ms;
    platform_pg_query_timeout 3456ms;
    platform_pg_queue_timeout 4567ms;
    platform_pg_idle_timeout 234ms;
    platform_cache_time 0;

    server {
        listen 127.0.0.1:%%PORT%%;
        location /api/v1/products/ { platform_products; }
    }
EOF

$t->psql(q{INSERT INTO product_classifications (group_name, tags)
           VALUES ('Grains', '{rice}')});

my $path = '/api/v1/products/classifications';

plan(skip_all => 'nginx is built without --with-debug')
    unless $t->error_log =~ /\[debug\]/;

# a connect, statements, requests queued behind a slow one (one statement
# in flight, so that they wait for room), idle timeouts

is($t->request('GET', $path)->{status}, 200, 'connected');

my $lock = $t->hold_lock('product_classifications', 0.5);
my @h = map { $t->request_async('GET', $path) } 1 .. 3;
my @status = map { $_->wait->{status} } @h;
$lock->wait;
is("@status", '200 200 200', 'queued requests served');

sleep 0.4;
is($t->request('GET', $path)->{status}, 200, 'reconnected after idle');
sleep 0.4;

# the transport's timers, told apart by their odd durations

my (%bad, %seen);
my $log = $t->error_log;

while ($log =~ /event timer add: (-?\d+): (2345|3456|4567|234):/g) {
    $seen{$2}++;
    $bad{$1}++ unless $1 == -1 || ($1 >= 0 && $1 < 65536);
}

is(join(' ', sort keys %seen), '234 2345 3456 4567',
   'connect, statement, wait and idle timers logged');
is(join(' ', sort keys %bad), '', 'every timer names a real fd or -1');

$t->done;
done_testing;
