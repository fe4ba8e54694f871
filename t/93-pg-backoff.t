#!/usr/bin/perl

# PostgreSQL unreachable in a way libpq reports at once (no socket file:
# PQconnectStartParams() fails before any event): the failure backs off
# like any other failed connect and is counted, so quick requests get 503
# without each of them trying to connect again.

# platform-test: serial (time bounds)

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Time::HiRes qw(time);
use Platform::Test;

my $t = Platform::Test->new(workers => 1, db => 0);

# a socket directory where no server listens

$t->run(<<'EOF');
    platform_pg "host=%%TESTDIR%% port=5432 dbname=platform user=postgres";
    platform_cache_time 0;

    server {
        listen 127.0.0.1:%%PORT%%;
        location /api/v1/products/ { platform_products; }
        location = /metrics { platform_metrics; }
    }
EOF

sub metric {
    my ($name) = @_;
    my $r = $t->request('GET', '/metrics');
    my ($v) = $r->{content} =~ /^\Q$name\E(?:\{[^}]*\})? (\d+)$/m;
    return $v // 0;
}

my (@bad, $start);

$start = time;

for my $i (1 .. 30) {
    my $r = $t->request('GET', '/api/v1/products/classifications');
    push @bad, "$i: $r->{status}" if $r->{status} != 503
                                     || ($r->{headers}{'retry-after'} // '')
                                        ne '1';
}

my $elapsed = time - $start;

is("@bad", '', '30 requests: 503 with Retry-After');

# one attempt, then one a backoff period later (250 ms doubling)

my $failures = metric('platform_pg_connect_failures_total');
my $bound = 2 + int($elapsed / 0.25);

cmp_ok($failures, '>=', 1, 'failed connects are counted');
cmp_ok($failures, '<=', $bound,
       "few connects tried in ${\ sprintf('%.2f', $elapsed)} s (backoff)");

my $logged = () = $t->error_log =~ /PostgreSQL connect failed/g;
cmp_ok($logged, '<=', $bound, 'the failures are not logged 30 times');

$t->done;
done_testing;
