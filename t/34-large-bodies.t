#!/usr/bin/perl

# Large bodies are read (also from the temporary file nginx buffered them
# to) and parsed in nginx's thread pool: a body of megabytes gets the same
# answers as a small one, does not hold up the worker's other requests,
# and a client that goes away while its body is parsed frees nothing the
# thread still writes (the sanitizer build checks that). With
# "platform_thread_pool off" the same bodies are parsed in the worker.

# platform-test: serial (time bounds)

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Time::HiRes qw(time sleep);
use Platform::Test;
use Platform::JWT;

my $t = Platform::Test->new(workers => 1);
my $k = Platform::JWT::keys($t->testdir . '/keys');

my $unknown = '81000000-0000-4000-8000-0000000000ff';
my $path = '/api/v1/Counterparties/accounts';

my $token = Platform::JWT::hs256($k, tenantId => 'tenant-a',
                                 merchantId => 'merchant-a');
my %auth = (Authorization => "Bearer $token",
            'Content-Type' => 'application/json');

# about 6 MB of JSON: the known fields, and one unknown that is ignored
my $pad = 'x' x (6 * 1024 * 1024);
my $big = qq({"id":"$unknown","bankName":"Big Bank","note":"$pad"});
my $broken = qq({"id":"$unknown","note":"$pad",});
my $wrong = qq({"id":"$unknown","note":"$pad","bankName":12});

sub conf {
    my ($pool) = @_;
    return <<"EOF";
    platform_thread_pool $pool;

    server {
        listen 127.0.0.1:%%PORT%%;
        client_max_body_size 32m;
        client_body_buffer_size 16k;     # the body goes to a temporary file

        location ~ ^/api/v[^/]+/Counterparties/ {
            platform_counterparties;
            platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;
        }

        location = /static { return 200 "static"; }
    }
EOF
}

for my $pool ('default', 'off') {
    $t->run(conf($pool));

    my $r = $t->request('PUT', $path, headers => \%auth, body => $big);
    is($r->{status}, 404, "$pool: a 6 MB body is read, parsed and checked");
    is($r->{json}{errors}[0] // '',
       "No bank account of the merchant's counterparties has this id.",
       "$pool: and answered by the operation")
        or diag($r->{content});

    $r = $t->request('PUT', $path, headers => \%auth, body => $broken);
    is($r->{status}, 400, "$pool: malformed 6 MB body");
    like($r->{json}{errors}[0] // '',
         qr/^Malformed JSON at line 1, column \d+: /,
         "$pool: named with its line and column");

    $r = $t->request('PUT', $path, headers => \%auth, body => $wrong);
    is($r->{status}, 400, "$pool: a field of the wrong type after 6 MB");
    is($r->{json}{errors}[0] // '', 'bankName must be a string.',
       "$pool: names the field");

    # clients that send a whole large body and go away at once

    for (1 .. 8) {
        $t->raw_request("PUT $path HTTP/1.1\r\nHost: x\r\n"
                        . "Authorization: Bearer $token\r\n"
                        . "Content-Type: application/json\r\n"
                        . 'Content-Length: ' . length($big) . "\r\n"
                        . "Connection: close\r\n\r\n$big",
                        timeout => 0.01);
    }

    $r = $t->request('PUT', $path, headers => \%auth, body => $big);
    is($r->{status}, 404, "$pool: the worker serves on after clients left");

    # and nginx told to stop while their bodies are still parsed: the
    # worker waits for them, closes their connections, then exits (else
    # "open socket left" alerts, which fail the test at done)

    for (1 .. 8) {
        $t->raw_request("PUT $path HTTP/1.1\r\nHost: x\r\n"
                        . "Authorization: Bearer $token\r\n"
                        . "Content-Type: application/json\r\n"
                        . 'Content-Length: ' . length($big) . "\r\n"
                        . "Connection: close\r\n\r\n$big",
                        timeout => 0.01);
    }

    $t->stop;
}

# the worker answers other requests while large bodies are parsed

$t->run(conf('default'));

is($t->request('GET', '/static')->{status}, 200, 'warm up');

# 12 MB: parsed in the worker, it would hold it up for over 300 ms (well
# over a second in the sanitizer build)

my $huge = qq({"id":"$unknown","note":"$pad$pad"});

my $put = $t->request_async('PUT', $path, headers => \%auth, body => $huge);

my ($max, $n) = (0, 0);
my $until = time + 3;

while (time < $until) {
    my $r = $t->request('GET', '/static');
    $n++ if $r->{status} == 200;
    $max = $r->{time} if $r->{time} > $max;
}

is($put->wait->{status}, 404, 'the large body was answered meanwhile');
ok($n > 10, "quick requests were answered meanwhile ($n)");

cmp_ok($max, '<', 0.2, 'none of them waited on a parse')
    or diag("the slowest of $n took $max s");

$t->done;
done_testing;
