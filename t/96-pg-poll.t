#!/usr/bin/perl

# With the poll event method nginx keeps a table of connections by fd. The
# PostgreSQL sockets, which libpq opens and closes, must leave it as nginx
# connections do: a new socket that gets the number of a closed one must
# be found there, across idle timeouts and a PostgreSQL restart.

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Time::HiRes qw(sleep);
use Platform::Test;

my $t = Platform::Test->new(workers => 1, db => 0, events => 'use poll;');

# nginx builds poll only when asked to where epoll exists (Debian does not)

$t->ignore_log(qr/invalid event type "poll"/);
plan(skip_all => 'nginx is built without the poll module')
    if $t->check_config('')->{output} =~ /invalid event type "poll"/;

my $pg = $t->start_private_pg;
my $dsn = $pg->dsn;

$t->run(<<"EOF");
    platform_pg "$dsn";
    platform_pg_pool_size 2;
    platform_pg_idle_timeout 200ms;
    platform_pg_connect_timeout 2s;
    platform_cache_time 0;

    server {
        listen 127.0.0.1:%%PORT%%;
        location /api/v1/products/ { platform_products; }
    }
EOF

$pg->psql(q{INSERT INTO product_classifications (group_name, tags)
            VALUES ('Grains', '{rice}')});

my $path = '/api/v1/products/classifications';

# rounds of requests, two at a time, with the pool drained between them

sub rounds {
    my ($name) = @_;
    my @bad;
    for my $round (1 .. 4) {
        my @h = map { $t->request_async('GET', $path, timeout => 5) } 1 .. 2;
        push @bad, grep { $_ != 200 } map { $_->wait->{status} } @h;
        sleep 0.4;
    }
    is("@bad", '', "$name: every request served");
}

rounds('idle timeouts');

$pg->stop;
is($t->request('GET', $path)->{status}, 503, 'PostgreSQL stopped: 503');
$pg->start;

ok($t->wait_until(sub { $t->request('GET', $path)->{status} == 200 }, 8),
   'PostgreSQL back');

rounds('after a restart');

$t->done;
done_testing;
