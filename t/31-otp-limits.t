#!/usr/bin/perl

# The OTP attempt limits: per tenant and client, where the client is an
# IPv4 address or an IPv6 /64 (an IPv4-mapped address is its IPv4 address),
# as the realip module sets it; and the per-tenant ceiling across all
# clients, platform_otp_tenant_attempts, on by default.

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Platform::Test;

my $t = Platform::Test->new(db => 0);

$t->run(<<'EOF');
    set_real_ip_from 127.0.0.1;
    real_ip_header X-Forwarded-For;

    server {
        listen 127.0.0.1:%%PORT%%;

        location /validate-otp/ {
            platform_otp;
            platform_otp_attempts 3 1m;
        }
    }

    server {
        listen 127.0.0.1:%%PORT_2%%;

        platform_otp_attempts 3 1m;
        platform_otp_tenant_attempts 5 2s;

        location /validate-otp/ {
            platform_otp;
        }
    }

    server {
        listen 127.0.0.1:%%PORT_3%%;

        platform_otp_attempts 3 1m;
        platform_otp_tenant_attempts 1 1m;

        location /validate-otp/ {
            platform_otp;
            platform_otp_tenant_attempts off;
        }
    }
EOF

# keys of this file only: the suite's Redis is shared
my $tenant = "t31-$$";

sub otp {
    my ($code, $from, %opts) = @_;
    my %h = (tenantId => $opts{tenant} // $tenant, countryCode => 'NG');
    $h{'X-Forwarded-For'} = $from if defined $from;
    return $t->request('GET', "/validate-otp/$code", headers => \%h,
                       port => $opts{port} // $t->port);
}

# IPv6: one bucket per /64

is(otp('0001', '2001:db8:1:2::1')->{status}, 404, '/64 failure 1');
is(otp('0002', '2001:db8:1:2::1')->{status}, 404, '/64 failure 2');
is(otp('0003', '2001:db8:1:2::ffff')->{status}, 404,
   '/64 failure 3, from another host of the /64');
is($t->redis('GET', "otp:attempts:$tenant:2001:db8:1:2::/64"), '3',
   'the key names the /64');

my $r = otp('0004', '2001:db8:1:2::1');
is($r->{status}, 429, 'the /64 is locked out');
like($r->{headers}{'retry-after'}, qr/^\d+$/, 'Retry-After');
is(otp('0004', '2001:db8:1:2:ffff:ffff:ffff:fffe')->{status}, 429,
   'for every host of it');

is(otp('0005', '2001:db8:1:3::1')->{status}, 404,
   'the next /64 is another client');
is(otp('0006', '2001:db8:1::1')->{status}, 404, 'and so is the one before');
is(otp('0007')->{status}, 404, 'and the proxy itself');

# IPv4, and IPv4-mapped IPv6 counted as IPv4

is(otp('0011', '::ffff:192.0.2.1')->{status}, 404, 'mapped failure 1');
is(otp('0012', '192.0.2.1')->{status}, 404, 'IPv4 failure 2');
is(otp('0013', '::ffff:192.0.2.1')->{status}, 404, 'mapped failure 3');
is($t->redis('GET', "otp:attempts:$tenant:192.0.2.1"), '3',
   'one IPv4 key for both');
is(otp('0014', '192.0.2.1')->{status}, 429, 'IPv4 locked out');
is(otp('0014', '::ffff:192.0.2.1')->{status}, 429, 'and mapped too');
is(otp('0015', '192.0.2.2')->{status}, 404, 'the next IPv4 is another client');
is($t->redis('EXISTS', "otp:attempts:${tenant}:::ffff:192.0.2.1"), '0',
   'no key for the mapped form');

# the ceiling is on by default, 100 failures per 5 minutes: addresses
# that each stay under their own limit (3 here) guess a 4-digit code in
# turn, and are all refused after the tenant's 100th failure, long before
# they reach the code

my $guessed = "t31-guess-$$";
$t->redis('SET', "otp:$guessed:NG:0150", '1', 'EX', '600');

my ($failed, $found, $refused_at) = (0, 0, undef);
for my $guess (0 .. 1099) {
    my $from = sprintf('198.51.%d.%d', 100 + int($guess / 3 / 250),
                       1 + int($guess / 3) % 250);
    my $st = otp(sprintf('%04d', $guess), $from, tenant => $guessed)
             ->{status};
    if ($st == 429) {
        $refused_at = $guess;
        last;
    }
    $found++ if $st == 200;
    $failed++ if $st == 404;
}
is($found, 0, 'many addresses: the code is not found');
is($failed, 100, 'the tenant\'s 100 failures are tried');
is($refused_at, 100, 'then a fresh address is refused');
is($t->redis('GET', "otp:attempts:$guessed"), '100', 'counted per tenant');
cmp_ok($t->redis('TTL', "otp:attempts:$guessed"), '>', 250,
       'for 5 minutes');
is(otp('0150', '198.51.110.1', tenant => $guessed)->{status}, 429,
   'the code itself is refused from a new address');
is($t->redis('EXISTS', "otp:$guessed:NG:0150"), '1', 'and not consumed');

# the ceiling: 5 failures per 2 s per tenant, across clients

my $capped = "t31-cap-$$";
my $port2 = $t->port(2);

$t->redis('SET', "otp:$capped:NG:246810", '1', 'EX', '600');
$t->redis('SET', "otp:$capped:NG:135790", '1', 'EX', '600');

is(otp('0031', '203.0.113.1', tenant => $capped, port => $port2)->{status},
   404, 'tenant failure 1');
is(otp('135790', '203.0.113.1', tenant => $capped, port => $port2)->{status},
   200, 'a valid code validates');
is($t->redis('GET', "otp:attempts:$capped"), '1',
   'and does not count as a failure');

is(otp('0032', '2001:db8:9:1::1', tenant => $capped, port => $port2)
   ->{status}, 404, 'tenant failure 2');
is(otp('12', '203.0.113.2', tenant => $capped, port => $port2)->{status},
   400, 'tenant failure 3 (malformed)');
is(otp('0034', '::ffff:203.0.113.3', tenant => $capped, port => $port2)
   ->{status}, 404, 'tenant failure 4');
is(otp('0035', '203.0.113.4', tenant => $capped, port => $port2)->{status},
   404, 'tenant failure 5');
is($t->redis('GET', "otp:attempts:$capped"), '5', 'counted per tenant');

$r = otp('0036', '203.0.113.200', tenant => $capped, port => $port2);
is($r->{status}, 429, 'the ceiling: a fresh client is refused');
is($r->{json}{statusCode}, 429, 'Envelope B');
is($r->{json}{message}, 'Too many attempts.', 'message');
like($r->{headers}{'retry-after'}, qr/^[12]$/, 'Retry-After within window');

$r = otp('246810', '2001:db8:77::1', tenant => $capped, port => $port2);
is($r->{status}, 429, 'even a valid code, from anywhere');
ok($r->{headers}{'retry-after'}, 'with Retry-After');
is($t->redis('EXISTS', "otp:$capped:NG:246810"), '1', 'not consumed');
is($t->redis('GET', "otp:attempts:$capped"), '5',
   'refused attempts do not count');

is(otp('0037', '203.0.113.200', tenant => "t31-other-$$", port => $port2)
   ->{status}, 404, 'another tenant is unaffected');

ok($t->wait_until(sub {
       otp('246810', '203.0.113.201', tenant => $capped, port => $port2)
       ->{status} == 200
   }, 6), 'after the window the valid code validates');

# the client limit still applies under a ceiling, and its Retry-After is
# the longer of the two

my $both = "t31-both-$$";

otp("004$_", '203.0.113.50', tenant => $both, port => $port2) for 1 .. 3;
$r = otp('0044', '203.0.113.50', tenant => $both, port => $port2);
is($r->{status}, 429, 'client limit under a ceiling');
cmp_ok($r->{headers}{'retry-after'}, '>', 2, 'the client window, 1m');

# "off" lifts a ceiling set at an outer level

my $off = "t31-off-$$";

for my $i (1 .. 3) {
    is(otp('0050', "203.0.113.$i", tenant => $off, port => $t->port(3))
       ->{status}, 404, "ceiling off: failure $i");
}
is($t->redis('EXISTS', "otp:attempts:$off"), '0', 'no tenant key');

# nginx -t

sub conf {
    my ($directive) = @_;
    return <<"EOF";
    server {
        listen 127.0.0.1:%%PORT%%;
        location /validate-otp/ { platform_otp; $directive }
    }
EOF
}

$r = $t->check_config(conf('platform_otp_tenant_attempts 1000 1h;'));
ok($r->{ok}, 'a valid ceiling passes') or diag($r->{output});

$t->config_refused(conf('platform_otp_tenant_attempts 0 5m;'),
    qr/invalid number of attempts "0"/, 'zero attempts');
$t->config_refused(conf('platform_otp_tenant_attempts -3 5m;'),
    qr/invalid number of attempts "-3"/, 'negative attempts');
$t->config_refused(conf('platform_otp_tenant_attempts many 5m;'),
    qr/invalid number of attempts "many"/, 'not a number');
$t->config_refused(
    conf('platform_otp_tenant_attempts 99999999999999999999 5m;'),
    qr/invalid number of attempts/, 'too many to count');
$t->config_refused(conf('platform_otp_tenant_attempts 100 never;'),
    qr/invalid attempts window "never"/, 'bad window');
$t->config_refused(conf('platform_otp_tenant_attempts 100 0s;'),
    qr/invalid attempts window "0s"/, 'zero window');
$t->config_refused(conf('platform_otp_tenant_attempts 100;'),
    qr/needs a number of attempts and a window, or "off"/, 'no window');
$t->config_refused(conf('platform_otp_tenant_attempts off 5m;'),
    qr/invalid number of attempts "off"/, 'off with a window');
$t->config_refused(conf('platform_otp_tenant_attempts 1 1m 2;'),
    qr/invalid number of arguments/, 'three arguments');
$t->config_refused(conf('platform_otp_tenant_attempts 10 1m; '
                        . 'platform_otp_tenant_attempts 20 1m;'),
    qr/is duplicate/, 'twice in a location');

$t->done;
done_testing;
