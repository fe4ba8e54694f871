#!/usr/bin/perl

# Latency histograms of platform_metrics: request duration by family and
# status class, and the round trips to PostgreSQL and Redis. Buckets are
# cumulative and end in +Inf, which equals _count; the counts of a family
# agree with platform_requests_total; a request held up by a table lock is
# counted above 0.5 s, and so is its PostgreSQL round trip. Both workers'
# requests add up, a reload keeps the counts, a reload with other bounds
# (platform_metrics_buckets) starts them afresh, and nginx -t refuses bounds
# that are not increasing whole milliseconds.

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Platform::Test;
use Platform::JWT;

my $t = Platform::Test->new(workers => 2);
Platform::JWT::keys($t->testdir . '/keys');

my $order = 'a1000000-0000-4000-8000-000000000001';

$t->psql(<<"SQL");
INSERT INTO delivery_orders (id, tenant_id, country_code, order_number,
                             status, pickup_address, dropoff_address)
VALUES ('$order', 'tenant-a', 'NG', 'DO-81', 'PENDING', '{}', '{}');
SQL

my $conf = <<'EOF';
    server {
        listen 127.0.0.1:%%PORT%%;
        platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;
        location = /metrics { platform_metrics; }
        location /tms/ { platform_tms; }
        location /validate-otp/ {
            platform_otp;
            platform_otp_attempts 1000 5m;
            platform_otp_tenant_attempts off;
        }
    }
EOF

$t->run($conf);

my %a = (tenantId => 'tenant-a', countryCode => 'NG');

sub order {
    my ($id) = @_;
    return $t->request('GET', "/tms/delivery-orders/$id", headers => \%a);
}

# name{labels} => value, of every sample
sub scrape {
    my $r = $t->request('GET', '/metrics');
    die "metrics: $r->{status}\n" unless $r->{status} == 200;
    my %m;
    for (split /\n/, $r->{content}) {
        next if /^#/;
        /^(\S+) (\S+)$/ or die "not a sample: $_\n";
        $m{$1} = $2;
    }
    return (\%m, $r->{content});
}

# the histogram of the labels given: [ [le, cumulative], ... ], sum, count
sub histogram {
    my ($m, $name, $labels) = @_;
    my @b;
    for my $k (keys %$m) {
        next unless $k =~ /^\Q${name}\E_bucket\{\Q$labels\E,le="([^"]+)"\}$/;
        push @b, [ $1, $m->{$k} ];
    }
    @b = sort { ($a->[0] eq '+Inf' ? 9e9 : $a->[0])
                <=> ($b->[0] eq '+Inf' ? 9e9 : $b->[0]) } @b;
    return { buckets => \@b,
             sum => $m->{"${name}_sum{$labels}"},
             count => $m->{"${name}_count{$labels}"} };
}

sub at_most {
    my ($h, $le) = @_;
    my ($b) = grep { $_->[0] eq $le } @{$h->{buckets}};
    return $b ? $b->[1] : undef;
}

# cumulative, ends in +Inf, +Inf is the count
sub well_formed {
    my ($h, $name) = @_;
    my @b = @{$h->{buckets}};
    my $ok = @b && $b[-1][0] eq '+Inf' && $b[-1][1] == $h->{count};
    for my $i (1 .. $#b) {
        $ok &&= $b[$i][1] >= $b[$i - 1][1];
    }
    ok($ok, "$name: cumulative buckets, +Inf is the count")
        or diag(explain($h));
}

my $req = 'platform_request_duration_seconds';
my $rtt = 'platform_backend_duration_seconds';
my $tms2 = 'family="tms",class="2xx"';
my $tms4 = 'family="tms",class="4xx"';
my $pg = 'backend="postgresql",pool="primary"';

my ($m, $text) = scrape();
like($text, qr/^# TYPE $req histogram$/m, 'request duration: a histogram');
like($text, qr/^# TYPE $rtt histogram$/m, 'backend duration: a histogram');
ok(!grep(/^\Q$req\E_bucket\{family="tms"/, keys %$m),
   'no tms series before a tms request');

### fast requests, answered and not found, and one held by a lock

for (1 .. 5) {
    is(order($order)->{status}, 200, "order $_: 200");
}
for (1 .. 2) {
    is(order('a1000000-0000-4000-8000-0000000000ff')->{status}, 404,
       "unknown order $_: 404");
}

my $lock = $t->hold_lock('delivery_orders', 1.2);
my $r = order($order);
$lock->wait;
is($r->{status}, 200, 'an order held up by a table lock: 200');
cmp_ok($r->{time}, '>', 0.5, 'it took over 0.5 s');

for (1 .. 3) {
    $t->request('GET', '/validate-otp/000000', headers => \%a);
}

# a request is counted in its log phase, after its answer has left: the
# scrape, perhaps on the other worker, may come first
$t->wait_until(sub {
    ($m) = scrape();
    ($m->{'platform_requests_total{family="otp",status="404"}'} // 0) >= 3;
}, 5);

my $h = histogram($m, $req, $tms2);
well_formed($h, 'tms 2xx');
is($h->{count}, 6, 'tms 2xx: six requests, of both workers');
is($h->{count},
   $m->{'platform_requests_total{family="tms",status="200"}'},
   'as many as platform_requests_total says');
is_deeply([ map { $_->[0] } @{$h->{buckets}} ],
          [ qw(0.001 0.002 0.005 0.01 0.025 0.05 0.1 0.25 0.5 1 2.5 5 +Inf) ],
          'the default bounds, 1 ms to 5 s');
cmp_ok(at_most($h, '0.25'), '>=', 5, 'the fast ones under 0.25 s');
is($h->{count} - at_most($h, '0.5'), 1, 'the held one above 0.5 s');
cmp_ok($h->{sum}, '>', 0.5, 'the sum in seconds counts it');
cmp_ok($h->{sum}, '<', 10, 'and is not in milliseconds');

$h = histogram($m, $req, $tms4);
well_formed($h, 'tms 4xx');
is($h->{count}, 2, 'tms 4xx: the two unknown orders');

$h = histogram($m, $req, 'family="otp",class="4xx"');
is($h->{count}, 3, 'otp 4xx: three unknown codes');

$h = histogram($m, $rtt, $pg);
well_formed($h, 'postgresql primary');
cmp_ok($h->{count}, '>=', 8, 'a PostgreSQL round trip per tms request');
cmp_ok($h->{count} - at_most($h, '0.5'), '>=', 1,
       'the one behind the lock above 0.5 s');

$h = histogram($m, $rtt, 'backend="redis"');
well_formed($h, 'redis');
cmp_ok($h->{count}, '>=', 3, 'a Redis round trip per OTP request');

ok(!defined histogram($m, $rtt, 'backend="postgresql",pool="read"')->{count},
   'no read pool, no read series');

### a reload keeps them; other bounds start them afresh

ok($t->reload($conf), 'reload');
($m) = scrape();
is(histogram($m, $req, $tms2)->{count}, 6, 'a reload keeps the counts');

ok($t->reload("    platform_metrics_buckets 5ms 1s 1.5s;\n$conf"),
   'reload with other bounds');
($m) = scrape();
ok(!defined histogram($m, $req, $tms2)->{count},
   'the histograms start afresh');
is(order($order)->{status}, 200, 'an order');
$t->wait_until(sub {
    ($m) = scrape();
    ($m->{'platform_requests_total{family="tms",status="200"}'} // 0) >= 7;
}, 5);
$h = histogram($m, $req, $tms2);
is_deeply([ map { $_->[0] } @{$h->{buckets}} ], [ qw(0.005 1 1.5 +Inf) ],
          'counted with the new bounds');
is($h->{count}, 1, 'one request');
is($m->{'platform_requests_total{family="tms",status="200"}'}, 7,
   'platform_requests_total goes on counting');

ok($t->reload("    platform_metrics_buckets 5ms 1s 1500ms;\n$conf"),
   'reload with the same bounds written otherwise');
($m) = scrape();
is(histogram($m, $req, $tms2)->{count}, 1, 'the counts stay');

### nginx -t

my %refused = (
    'platform_metrics_buckets 10ms 5ms;'
        => qr/bound "5ms" is not above "10ms": bounds must increase/,
    'platform_metrics_buckets 10ms 10ms;' => qr/is not above/,
    'platform_metrics_buckets 1.5ms;'
        => qr/bound "1.5ms" is not a whole number of milliseconds/,
    'platform_metrics_buckets 0.0001s;' => qr/not a whole number/,
    'platform_metrics_buckets fast;' => qr/invalid bound "fast"/,
    'platform_metrics_buckets 10;' => qr/invalid bound "10"/,
    'platform_metrics_buckets 1.s;' => qr/invalid bound "1.s"/,
    'platform_metrics_buckets .5s;' => qr/invalid bound ".5s"/,
    'platform_metrics_buckets 0ms;' => qr/bound "0ms" is out of range/,
    'platform_metrics_buckets 2h;' => qr/invalid bound "2h"/,
    'platform_metrics_buckets 3601s;' => qr/bound "3601s" is out of range/,
    'platform_metrics_buckets '
        . join(' ', map { "${_}ms" } 1 .. 17) . ';'
        => qr/takes at most 16 bounds, not 17/,
    "platform_metrics_buckets 1ms;\n    platform_metrics_buckets 2ms;"
        => qr/"platform_metrics_buckets" directive is duplicate/,
);

for my $d (sort keys %refused) {
    $t->config_refused("    $d\n$conf", $refused{$d}, $d);
}

$t->config_refused(<<'EOF', qr/directive is not allowed here/, 'in a server');
    server {
        listen 127.0.0.1:%%PORT%%;
        platform_metrics_buckets 1ms;
        location = /metrics { platform_metrics; }
    }
EOF

ok($t->check_config('    platform_metrics_buckets '
                    . join(' ', map { "${_}ms" } 1 .. 16) . ";\n$conf")->{ok},
   'sixteen bounds: accepted');

$t->done;
done_testing;
