#!/usr/bin/perl

# Operations: the health check asks PostgreSQL and Redis for real; metrics
# in Prometheus text format add up across workers and survive a reload.

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Platform::Test;

my $t = Platform::Test->new(workers => 2, db => 0);

my $pg = $t->start_private_pg;
my $redis = $t->start_private_redis;

my ($dsn, $raddr) = ($pg->dsn, $redis->addr);

my $conf = <<"EOF";
    platform_pg "$dsn";
    platform_pg_connect_timeout 1s;
    platform_redis $raddr;
    platform_redis_timeout 500ms;

    server {
        listen 127.0.0.1:%%PORT%%;
        location = /health { platform_health; }
        location = /metrics { platform_metrics; }
        location /api/v1/products/ {
            platform_products;
            platform_cache_time 0;
        }
        location /validate-otp/ { platform_otp; }
    }
EOF

$t->run($conf);

my $r = $t->request('GET', '/health');
is($r->{status}, 200, 'healthy');
is_deeply($r->{json}, { status => 'up', postgres => { status => 'up' },
                        redis => { status => 'up' } }, 'both up');

for (1 .. 6) {
    $t->request('GET', '/api/v1/products/classifications');
}
$t->request('GET', '/api/v1/products/nope');

sub metric {
    my ($text, $line) = @_;
    return $text =~ /^\Q$line\E (\d+)$/m ? $1 : 0;
}

$r = $t->request('GET', '/metrics');
is($r->{status}, 200, 'metrics');
like($r->{headers}{'content-type'}, qr{^text/plain; version=0\.0\.4},
     'Prometheus text format');
like($r->{content}, qr/^# TYPE platform_requests_total counter$/m,
     'TYPE line');

my $ok = 'platform_requests_total{family="products",status="200"}';
is(metric($r->{content}, $ok), 6, 'requests of both workers add up');
is(metric($r->{content},
          'platform_requests_total{family="products",status="404"}'),
   1, 'by status');
cmp_ok(metric($r->{content}, 'platform_pg_statements_total'), '>=', 6,
       'statements counted');
like($r->{content},
     qr/^platform_pg_connections\{worker="\d",pool="primary",state="idle"\} \d+$/m,
     'pool gauges per worker');

ok($t->reload($conf), 'reload');

$r = $t->request('GET', '/metrics');
cmp_ok(metric($r->{content}, $ok), '>=', 6, 'counters survive a reload');

$pg->stop;

$r = $t->request('GET', '/health');
is($r->{status}, 503, 'PostgreSQL down: 503');
is($r->{json}{postgres}{status}, 'down', 'postgres down');
is($r->{json}{redis}{status}, 'up', 'redis up');

$pg->start;
$redis->stop;

ok($t->wait_until(sub {
    my $h = $t->request('GET', '/health')->{json} // {};
    ($h->{postgres}{status} // '') eq 'up'
        && ($h->{redis}{status} // '') eq 'down';
}, 8), 'Redis down, PostgreSQL back');

$redis->start;

ok($t->wait_until(sub { $t->request('GET', '/health')->{status} == 200 },
                  15), 'healthy again');

$r = $t->request('POST', '/health', body => '{}');
is($r->{status}, 405, 'POST /health is 405');

$t->done;
done_testing;
