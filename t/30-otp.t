#!/usr/bin/perl

# GET /validate-otp/{code}: exact messages and status codes, single use,
# tenant and country scoping, the failed-attempt limit with 429.

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Platform::Test;

my $t = Platform::Test->new(db => 0);

$t->run(<<'EOF');
    server {
        listen 127.0.0.1:%%PORT%%;

        location /validate-otp/ {
            platform_otp;
            platform_otp_attempts 1000 5m;
            platform_otp_tenant_attempts off;
        }
    }

    server {
        listen 127.0.0.1:%%PORT_2%%;

        location /validate-otp/ {
            platform_otp;
            platform_otp_attempts 3 2s;
        }
    }
EOF

# keys of this file only: the suite's Redis is shared
my $tenant = "t30-$$";
my %h = (tenantId => $tenant, countryCode => 'NG');

sub otp {
    my ($code, %opts) = @_;
    return $t->request('GET', "/validate-otp/$code",
                       headers => $opts{headers} // \%h, %opts);
}

$t->redis('SET', "otp:$tenant:NG:123456", '1', 'EX', '600');

my $r = otp('123456');
is($r->{status}, 200, 'valid code');
is($r->{headers}{'content-type'}, 'application/json; charset=utf-8',
   'content type');
is_deeply($r->{json}, {
    status => JSON::PP::true, statusCode => 0,
    message => 'OTP code validated', data => {}, errors => [],
}, 'success envelope');
is($t->redis('EXISTS', "otp:$tenant:NG:123456"), '0', 'code deleted');

$r = otp('123456');
is($r->{status}, 404, 'a code validates once');
is_deeply($r->{json}, {
    status => JSON::PP::false, statusCode => 404,
    message => 'OTP Code not found.', data => {},
    errors => [ { message => 'OTP Code not found.',
                  descriptiveMessage => 'The OTP code was not found.' } ],
}, 'not found envelope');

for my $code ('123', '123456789', '12a4', '12%2034', '%D9%A1%D9%A2%D9%A3%D9%A4',
              '-1234', '1234.5')
{
    $r = otp($code);
    is($r->{status}, 400, "malformed code $code is 400");
    is($r->{json}{message}, 'Invalid OTP Code.', 'message');
    is($r->{json}{statusCode}, 400, 'statusCode');
    is($r->{json}{errors}[0]{descriptiveMessage},
       'The OTP code is not valid. Please check the code and try again.',
       'descriptive message');
}

$t->redis('SET', "otp:$tenant:NG:1234", '1', 'EX', '600');
$t->redis('SET', "otp:$tenant:NG:87654321", '1', 'EX', '600');
is(otp('1234')->{status}, 200, 'four digits');
is(otp('87654321')->{status}, 200, 'eight digits');

# scoping: another tenant or country does not see the code

$t->redis('SET', "otp:$tenant:NG:555555", '1', 'EX', '600');

$r = otp('555555', headers => { tenantId => "$tenant-x", countryCode => 'NG' });
is($r->{status}, 404, 'other tenant: not found');

$r = otp('555555', headers => { tenantId => $tenant, countryCode => 'GH' });
is($r->{status}, 404, 'other country: not found');

is($t->redis('EXISTS', "otp:$tenant:NG:555555"), '1',
   'the code is still there for its tenant');
is(otp('555555')->{status}, 200, 'and validates for it');

# required headers

$r = otp('123456', headers => { countryCode => 'NG' });
is($r->{status}, 400, 'missing tenantId');
is($r->{json}{message}, 'tenantId header is required.', 'names it');
is($r->{json}{statusCode}, 400, 'Envelope B');

$r = otp('123456', headers => { tenantId => $tenant });
is($r->{status}, 400, 'missing countryCode');
is($r->{json}{message}, 'countryCode header is required.', 'names it');

# a colon would let one tenant name another's key

$t->redis('SET', "otp:$tenant:NG:X:7777", '1', 'EX', '600');
$r = otp('7777', headers => { tenantId => $tenant, countryCode => 'NG:X' });
is($r->{status}, 400, 'colon in countryCode is refused');
is($r->{json}{message}, 'countryCode header is invalid.', 'says so');
$r = otp('7777', headers => { tenantId => "$tenant:NG", countryCode => 'X' });
is($r->{status}, 400, 'colon in tenantId is refused');
is($t->redis('EXISTS', "otp:$tenant:NG:X:7777"), '1', 'key untouched');

$r = $t->request('POST', '/validate-otp/123456', headers => \%h,
                 body => '{}');
is($r->{status}, 405, 'POST is 405');
is($r->{headers}{allow}, 'GET', 'Allow: no HEAD, which would validate');

$r = $t->request('GET', '/validate-otp/', headers => \%h);
is($r->{status}, 404, 'no code in the path');
is($r->{json}{statusCode}, 404, 'Envelope B');

# attempt limit: 3 failures per 2 s on the second server

my $limited = "t30-limit-$$";
my %l = (tenantId => $limited, countryCode => 'NG');
my $port2 = $t->port(2);

sub otp2 {
    my ($code, $headers) = @_;
    return $t->request('GET', "/validate-otp/$code", port => $port2,
                       headers => $headers // \%l);
}

$t->redis('SET', "otp:$limited:NG:246810", '1', 'EX', '600');

is(otp2('0000')->{status}, 404, 'failure 1 (not found)');
is(otp2('12')->{status}, 400, 'failure 2 (malformed)');
is(otp2('1111')->{status}, 404, 'failure 3');

$r = otp2('2222');
is($r->{status}, 429, 'limit reached: 429');
is($r->{json}{statusCode}, 429, 'Envelope B');
is($r->{json}{message}, 'Too many attempts.', 'message');
like($r->{headers}{'retry-after'}, qr/^[12]$/, 'Retry-After within window');

$r = otp2('246810');
is($r->{status}, 429, 'even a valid code is refused while locked out');
is($t->redis('EXISTS', "otp:$limited:NG:246810"), '1',
   'and the code is not consumed');

is(otp2('0000', { tenantId => "$limited-b", countryCode => 'NG' })->{status},
   404, 'another tenant is not locked out');

ok($t->wait_until(sub { otp2('246810')->{status} == 200 }, 5),
   'after the window the valid code validates');

$t->done;
done_testing;
