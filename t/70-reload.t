#!/usr/bin/perl

# nginx -s reload while requests flow: none of them fails, and the old
# workers exit promptly (their pool timers do not hold them).

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Platform::Test;

my $t = Platform::Test->new(workers => 2);

my $conf = <<'EOF';
    platform_pg_idle_timeout 60s;

    server {
        listen 127.0.0.1:%%PORT%%;
        location /api/v1/products/ { platform_products; }
        location /tms/ { platform_tms; platform_auth tenant; }
        location /validate-otp/ {
            platform_otp;
            platform_otp_attempts 1000 5m;
            platform_otp_tenant_attempts off;
        }
    }
EOF

$t->run($conf);

$t->psql(q{INSERT INTO product_classifications (group_name, tags)
           VALUES ('Grains', '{rice}')});

my %h = (tenantId => 'tenant-a', countryCode => 'NG');

my @paths = ('/api/v1/products/classifications',
             '/tms/delivery-orders/a0000000-0000-4000-8000-000000000001',
             '/validate-otp/12x');

my @expect = (200, 404, 400);

my (@handles, @want);

for my $i (0 .. 59) {
    my $n = $i % 3;
    push @handles, $t->request_async('GET', $paths[$n], headers => \%h);
    push @want, $expect[$n];

    if ($i == 15 || $i == 40) {
        ok($t->reload($conf), "reload $i: new workers run");
    }

    select(undef, undef, undef, 0.02);
}

my $bad = 0;

for my $i (0 .. $#handles) {
    my $r = $handles[$i]->wait;
    if ($r->{status} != $want[$i]) {
        diag("request $i: $r->{status} $r->{content}");
        $bad++;
    }
}

is($bad, 0, 'no request failed across two reloads');

# old workers leave: only the new set is running

sub shutting_down {
    my $n = 0;
    opendir(my $dh, '/proc') or return 0;
    for my $pid (grep { /^\d+$/ } readdir $dh) {
        open(my $fh, '<', "/proc/$pid/stat") or next;
        my $stat = <$fh> // '';
        my ($ppid) = $stat =~ /\)\s+\S\s+(\d+)/ or next;
        next if $ppid != $t->{master};
        open($fh, '<', "/proc/$pid/cmdline") or next;
        my $cmd = <$fh> // '';
        $n++ if $cmd =~ /shutting down/;
    }
    return $n;
}

ok($t->wait_until(sub { shutting_down() == 0 }, 10), 'old workers exited');
is(scalar(my @w = $t->workers), 2, 'two workers run');

$t->done;
done_testing;
