#!/usr/bin/perl

# PostgreSQL or Redis stopped: the endpoints that need it answer 503 in their
# envelope within the configured timeout, the others keep working, and once
# the server is back requests succeed again without a reload.

# platform-test: serial (time bounds)

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Platform::Test;

my $t = Platform::Test->new(workers => 1, db => 0);

my $pg = $t->start_private_pg;
my $redis = $t->start_private_redis;

my $dsn = $pg->dsn;
my $raddr = $redis->addr;

$t->run(<<"EOF");
    platform_pg "$dsn";
    platform_pg_connect_timeout 1s;
    platform_pg_query_timeout 2s;
    platform_redis $raddr;
    platform_redis_timeout 500ms;
    platform_cache_time 0;     # every request goes to PostgreSQL

    server {
        listen 127.0.0.1:%%PORT%%;
        location /api/v1/products/ { platform_products; }
        location /tms/ { platform_tms; }
        location /validate-otp/ { platform_otp; }
    }
EOF

$pg->psql(q{INSERT INTO product_classifications (group_name, tags)
            VALUES ('Grains', '{rice}')});

my %h = (tenantId => 'tenant-a', countryCode => 'NG');

sub classifications {
    return $t->request('GET', '/api/v1/products/classifications');
}

sub otp {
    my ($code) = @_;
    return $t->request('GET', "/validate-otp/$code", headers => \%h);
}

is(classifications()->{status}, 200, 'PostgreSQL up');
is(otp('123456')->{status}, 404, 'Redis up');

# PostgreSQL goes away

$pg->stop;

my $r = classifications();
is($r->{status}, 503, 'PostgreSQL down: 503');
cmp_ok($r->{time}, '<', 2, 'within the connect timeout');
is($r->{headers}{'retry-after'}, '1', 'Retry-After');
is($r->{json}{status}, JSON::PP::false, 'Envelope B');
is($r->{json}{statusCode}, 503, 'statusCode 503');
is($r->{json}{message}, 'Service temporarily unavailable.', 'message');
unlike($r->{content}, qr/(?i)select|postgres|libpq|connection to server/,
       'no backend detail in the body');

$r = $t->request('GET', '/tms/delivery-orders/'
                 . 'a0000000-0000-4000-8000-000000000001', headers => \%h);
is($r->{status}, 503, 'delivery order: 503');

for (1 .. 5) {
    $r = classifications();
    last if $r->{status} != 503;
}
is($r->{status}, 503, 'still 503 while down');
cmp_ok($r->{time}, '<', 2, 'answered quickly');

$redis->redis('SET', 'otp:tenant-a:NG:4321', 'x', 'EX', '60');
is(otp('4321')->{status}, 200, 'OTP still served while PostgreSQL is down');

$pg->start;

ok($t->wait_until(sub { classifications()->{status} == 200 }, 8),
   'PostgreSQL back: requests succeed again without a reload');

# Redis goes away

$redis->stop;

$r = otp('123456');
is($r->{status}, 503, 'Redis down: OTP 503');
cmp_ok($r->{time}, '<', 2, 'answered quickly');
is($r->{headers}{'retry-after'}, '1', 'Retry-After');
is($r->{json}{statusCode}, 503, 'Envelope B');

is(classifications()->{status}, 200,
   'PostgreSQL endpoints keep working while Redis is down');

$redis->start;

ok($t->wait_until(sub { otp('123456')->{status} == 404 }, 15),
   'Redis back: OTP answers again without a reload');

$redis->redis('SET', 'otp:tenant-a:NG:8765', 'x', 'EX', '60');
is(otp('8765')->{status}, 200, 'and validates codes');

$t->done;
done_testing;
