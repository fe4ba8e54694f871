#!/usr/bin/perl

# HTTPS and HTTP/2: streams of one connection do not wait for each other
# while one of them waits on PostgreSQL, and a client that drops the
# connection while a stream waits leaves the worker and the pool in good
# order.

# platform-test: serial (time bounds)

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use POSIX ();
use Platform::Test;
use Time::HiRes qw(time);

my $t = Platform::Test->new(workers => 1);

my $dir = $t->testdir;

system("openssl req -x509 -newkey rsa:2048 -nodes -keyout '$dir/key.pem'"
       . " -out '$dir/cert.pem' -days 2 -subj /CN=localhost 2>/dev/null") == 0
    or die "openssl could not make a certificate\n";

$t->run(<<'EOF');
    platform_cache_time 0;

    server {
        listen 127.0.0.1:%%PORT%% ssl http2;
        ssl_certificate %%TESTDIR%%/cert.pem;
        ssl_certificate_key %%TESTDIR%%/key.pem;

        location /tms/ { platform_tms; }
        location /api/v1/products/ { platform_products; }
    }
EOF

my $order = 'a0000000-0000-4000-8000-000000000001';
my $port = $t->port;
my $base = "https://127.0.0.1:$port";

$t->psql(<<"SQL");
INSERT INTO delivery_orders (id, tenant_id, country_code, order_number,
                             pickup_address, dropoff_address)
VALUES ('$order', 'tenant-a', 'NG', 'DO-1', '{}', '{}');
SQL

# curl negotiates HTTP/2 over TLS (ALPN); one line per transfer
sub curl {
    my (@args) = @_;
    my @cmd = ('curl', '-s', '-k', '--http2',
               '-H', 'tenantId: tenant-a', '-H', 'countryCode: NG',
               '-w', '%{url_effective} %{http_version} %{http_code} '
                     . '%{time_total} %{num_connects}\n', @args);
    # curl's --parallel draws its progress meter despite -s: keep it quiet
    my $pid = open(my $fh, '-|') // die "fork: $!\n";
    if ($pid == 0) {
        open(STDERR, '>', '/dev/null');
        exec(@cmd) or POSIX::_exit(127);
    }
    my %r;
    while (my $line = <$fh>) {
        my ($url, $version, $code, $time, $connects) = split ' ', $line;
        $r{$url} = { version => $version, code => $code, time => $time,
                     connects => $connects };
    }
    close $fh;
    return \%r;
}

my $r = curl('-o', '/dev/null', "$base/tms/delivery-orders/$order");
is($r->{"$base/tms/delivery-orders/$order"}{version}, '2', 'HTTP/2');
is($r->{"$base/tms/delivery-orders/$order"}{code}, '200', 'order over h2');

sub hold_lock {
    my ($seconds) = @_;
    return $t->hold_lock('delivery_orders', $seconds);
}

# two streams on one connection: the slow one does not hold the other

my $lock = hold_lock(2);

$r = curl('--parallel', '--parallel-max', '2', '-o', '/dev/null',
          '-o', '/dev/null', "$base/tms/delivery-orders/$order",
          "$base/api/v1/products/classifications");

my $slow = $r->{"$base/tms/delivery-orders/$order"};
my $fast = $r->{"$base/api/v1/products/classifications"};

is($slow->{code}, '200', 'slow stream answered once the lock went');
cmp_ok($slow->{time}, '>=', 1, 'and it did wait');
is($fast->{code}, '200', 'other stream answered');
cmp_ok($fast->{time}, '<', 1, 'without waiting for the slow one');
is($slow->{connects} + $fast->{connects}, 1, 'both on one connection');

$lock->wait;

# the client drops the connection while a stream waits on the lock

$lock = hold_lock(1.5);

curl('--max-time', '0.3', '-o', '/dev/null',
     "$base/tms/delivery-orders/$order");

ok($t->wait_until(sub {
    $t->error_log =~ /client closed the request while waiting for a backend/
}, 2), 'the stream was let go at once');

$lock->wait;

for (1 .. 3) {
    $r = curl('-o', '/dev/null', "$base/tms/delivery-orders/$order");
    is($r->{"$base/tms/delivery-orders/$order"}{code}, '200',
       'served after a dropped HTTP/2 connection');
}

$t->done;
done_testing;
