#!/usr/bin/perl

# HEAD /validate-otp/{code} changes no state (decisions.md: a HEAD never
# changes state): 405 with "Allow: GET" in Envelope B; the code is not
# consumed and no attempt is counted.

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
            platform_otp_attempts 3 1m;
        }
    }
EOF

# keys of this file only: the suite's Redis is shared
my $tenant = "t32-$$";
my %h = (tenantId => $tenant, countryCode => 'NG');

$t->redis('SET', "otp:$tenant:NG:123456", '1', 'EX', '600');

my $r = $t->request('HEAD', '/validate-otp/123456', headers => \%h);
is($r->{status}, 405, 'HEAD is 405');
is($r->{headers}{allow}, 'GET', 'Allow: GET');
is($r->{headers}{'content-type'}, 'application/json; charset=utf-8',
   'the envelope\'s content type');
is($r->{content}, '', 'no body to a HEAD');
is($t->redis('EXISTS', "otp:$tenant:NG:123456"), '1', 'code not consumed');

# the body a HEAD does not show, through a method that has one: POST's 405
# in Envelope B, with the same Allow

$r = $t->request('POST', '/validate-otp/123456', headers => \%h,
                 body => '{}');
is($r->{status}, 405, 'POST is 405');
is($r->{headers}{allow}, 'GET', 'Allow: GET, without HEAD');
is($r->{json}{statusCode}, 405, 'Envelope B');
is($r->{json}{status}, JSON::PP::false, 'status false');
is($r->{json}{message}, 'Method not allowed.', 'message');

# a HEAD is no attempt: three of them do not lock anyone out

for my $code ('0000', '12', '9999') {
    $r = $t->request('HEAD', "/validate-otp/$code", headers => \%h);
    is($r->{status}, 405, "HEAD $code is 405");
}
is($t->redis('EXISTS', "otp:attempts:$tenant:127.0.0.1"), '0',
   'no attempt counted');

# and the code still validates, once

$r = $t->request('GET', '/validate-otp/123456', headers => \%h);
is($r->{status}, 200, 'GET validates the code afterwards');
is($r->{json}{message}, 'OTP code validated', 'message');
is($t->redis('EXISTS', "otp:$tenant:NG:123456"), '0', 'now consumed');

$r = $t->request('HEAD', '/validate-otp/123456', headers => \%h);
is($r->{status}, 405, 'HEAD of a used code is 405 too, not 404');

$t->done;
done_testing;
