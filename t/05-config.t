#!/usr/bin/perl

# Configuration errors fail "nginx -t" with a message that says what is
# wrong.

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Platform::Test;

my $t = Platform::Test->new(db => 0);

sub conf {
    my ($http, $location) = @_;
    $location //= 'platform_otp;';
    return <<"EOF";
    $http

    server {
        listen 127.0.0.1:%%PORT%%;
        location /validate-otp/ { $location }
    }
EOF
}

my $r = $t->check_config(conf('platform_pg "host=127.0.0.1 dbname=x";'));
ok($r->{ok}, 'a valid configuration passes') or diag($r->{output});

$r = $t->check_config(conf('platform_thread_pool bodies;',
                           'platform_counterparties; platform_auth none;'),
                      main => 'thread_pool bodies threads=2;');
ok($r->{ok}, 'a thread pool declared with thread_pool')
    or diag($r->{output});

my @bad = (
    [ conf('platform_pg "host=127.0.0.1 nosuchkey=1";'),
      qr/invalid "platform_pg"/, 'unknown conninfo keyword' ],
    [ conf('platform_pg "postgresql://[::1";'),
      qr/invalid "platform_pg"/, 'broken conninfo URI' ],
    [ conf('platform_redis 127.0.0.1:99999;'),
      qr/invalid "platform_redis"/, 'redis port out of range' ],
    [ conf('platform_pg_pool_size 0;'),
      qr/must be between 1 and 1024/, 'pool size 0' ],
    [ conf('platform_pg_query_timeout soon;'),
      qr/platform_pg_query_timeout/, 'timeout that is no time' ],
    [ conf('platform_redis_db -1;'), qr/platform_redis_db/,
      'negative redis db' ],
    [ conf('', 'platform_otp; platform_otp;'), qr/is duplicate/,
      'family twice in a location' ],
    [ conf('', 'platform_otp; platform_tms;'), qr/is duplicate/,
      'two families in a location' ],
    [ conf('', 'platform_otp; platform_otp_attempts 0 5m;'),
      qr/invalid number of attempts/, 'zero attempts' ],
    [ conf('', 'platform_otp; platform_otp_attempts 5 never;'),
      qr/invalid attempts window/, 'bad window' ],
    [ conf('platform_otp;'), qr/"platform_otp" directive is not allowed/,
      'family outside a location' ],
    [ conf('', 'platform_pg "host=x";'),
      qr/"platform_pg" directive is not allowed/, 'platform_pg in a location' ],
    [ conf('platform_thread_pool nosuch;',
           'platform_counterparties; platform_auth none;'),
      qr/unknown thread pool "nosuch"/, 'a thread pool not declared' ],
    [ conf('', 'platform_otp; platform_thread_pool default;'),
      qr/"platform_thread_pool" directive is not allowed/,
      'platform_thread_pool in a location' ],
    [ conf('', 'platform_otp; platform_document_max_size lots;'),
      qr/"platform_document_max_size" directive invalid value/,
      'a document size that is no size' ],
);

$t->config_refused(@$_) for @bad;

$t->done;
done_testing;
