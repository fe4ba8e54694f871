#!/usr/bin/perl

# Requests waiting for a PostgreSQL connection when the worker is told to
# exit (reload, graceful stop) are still served: the connection that frees
# up serves the next waiter, and is closed only when none is left.

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Time::HiRes qw(sleep);
use Platform::Test;

my $t = Platform::Test->new(workers => 1);

my $conf = <<'EOF';
    platform_pg_pool_size 1;
    platform_pg_queue_timeout 3s;
    platform_cache_time 0;

    server {
        listen 127.0.0.1:%%PORT%%;
        location /api/v1/products/ { platform_products; }
    }
EOF

$t->run($conf);

$t->psql(q{INSERT INTO product_classifications (group_name, tags)
           VALUES ('Grains', '{rice}')});

my $path = '/api/v1/products/classifications';

is($t->request('GET', $path)->{status}, 200, 'the pool has its connection');

# one request holds the only connection, waiting for a lock; four more
# wait for the connection; then the worker is told to exit

sub queued {
    my ($name, $exit) = @_;

    my $lock = $t->hold_lock('product_classifications', 1);

    my @h = ($t->request_async('GET', $path));
    sleep 0.2;
    push @h, map { $t->request_async('GET', $path) } 1 .. 4;
    sleep 0.3;

    $exit->();

    my @status = map { $_->wait->{status} } @h;
    is("@status", '200 200 200 200 200', "$name: every queued request served");

    $lock->wait;
}

queued('reload', sub { ok($t->reload($conf), 'reload: new workers run') });

is($t->request('GET', $path)->{status}, 200, 'the new worker serves');

queued('graceful stop', sub { $t->stop });

$t->done;
done_testing;
