#!/usr/bin/perl

# What anonymous clients can make a node hold. A webhook name's body limit
# (platform_webhook_source/payment_method max_body=, 256k by default, and
# the default for a name the location does not accept): 413 in Envelope B
# from Content-Length before the body is read (no "100 Continue"), and for
# a chunked body as soon as it grows past, before its end. And every key
# the webhooks and the OTP validation write to Redis has a TTL, so a Redis
# under maxmemory with a volatile-* policy can evict them; the suite's
# Redis servers run so.

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Platform::Test;
use IO::Socket::INET;
use Time::HiRes qw(time);

my $t = Platform::Test->new(workers => 1);

# names and tenants of this file only: the suite's Redis is shared
my $p = "t51-$$";

### nginx -t

sub conf {
    my ($directive) = @_;
    return <<"EOF";
    server {
        listen 127.0.0.1:%%PORT%%;
        location /webhooks/ { platform_webhooks; $directive }
    }
EOF
}

my $r = $t->check_config(conf('platform_webhook_source a max_body=1m; '
                              . 'platform_webhook_payment_method b '
                              . 'max_body=300;'));
ok($r->{ok}, 'nginx -t: max_body in bytes and megabytes')
    or diag($r->{output});

$t->config_refused(conf('platform_webhook_source a max_body=lots;'),
                   qr/invalid size "max_body=lots": a number of bytes/,
                   'max_body not a size');
$t->config_refused(conf('platform_webhook_source a max_body=;'),
                   qr/invalid size "max_body="/, 'max_body empty');
$t->config_refused(conf('platform_webhook_source a max_body=-1;'),
                   qr/invalid size "max_body=-1"/, 'max_body negative');
$t->config_refused(conf('platform_webhook_source a max_body=0;'),
                   qr/"max_body=0" is too small: the shortest body, "\{\}", is 2 bytes/,
                   'max_body 0');
$t->config_refused(conf('platform_webhook_payment_method a max_body=1;'),
                   qr/"max_body=1" is too small/, 'max_body 1');
$t->config_refused(conf('platform_webhook_source a max_body=1k '
                        . 'max_body=2k;'),
                   qr/"max_body=" is given twice for "a"/, 'max_body twice');

### the limits

$t->run(<<"EOF");
    client_max_body_size 4m;
    client_body_buffer_size 16k;

    server {
        listen 127.0.0.1:%%PORT%%;

        location ^~ /api/webhooks/ {
            platform_webhooks;
            platform_webhook_source $p-default;
            platform_webhook_source $p-big max_body=1m;
            platform_webhook_source $p-tiny max_body=100;
        }

        location ^~ /webhooks/ {
            platform_webhooks;
            platform_auth none;
            platform_webhook_payment_method $p-card max_body=1k;
        }

        location /validate-otp/ {
            platform_otp;
        }
    }
EOF

my $default = 256 * 1024;

# a JSON object of exactly $len bytes
sub body_of {
    my ($len, $id) = @_;
    my $head = qq({"id":"$id","pad":");
    return $head . ('x' x ($len - length($head) - 2)) . '"}';
}

sub post {
    my ($path, $body, %o) = @_;
    return $t->request('POST', $path, body => $body,
                       headers => { 'Content-Type' => 'application/json',
                                    %{ $o{headers} // {} } });
}

sub too_large {
    my ($r, $max, $name) = @_;
    Platform::Test::is_envelope_b_error($r, 413, 'Request body too large.',
        "This route accepts a body of at most $max bytes.", $name);
}

my $src = "/api/webhooks/public/$p-default/events";
my $n = 0;

is(length(body_of($default, 'x')), $default, 'a body of exactly 256k');

$r = post($src, body_of($default, "$p-" . ++$n));
is($r->{status}, 200, 'default: 256k is accepted') or diag($r->{content});

$r = post($src, body_of($default + 1, "$p-" . ++$n));
too_large($r, $default, 'default: one byte more is 413 in Envelope B');

is($t->psql("SELECT count(*) FROM webhook_events WHERE name = '$p-default'"),
   1, 'and not stored');

# a name with its own limit: more than the default, and less

$r = post("/api/webhooks/public/$p-big/events", body_of(300 * 1024, "$p-b1"));
is($r->{status}, 200, 'max_body=1m takes 300k, which the default refuses')
    or diag($r->{content});
too_large(post("/api/webhooks/public/$p-big/events",
               body_of(1024 * 1024 + 1, "$p-b2")),
          1024 * 1024, 'max_body=1m: 1m and a byte is 413');
is(post("/api/webhooks/public/$p-tiny/events", body_of(100, "$p-t1"))
       ->{status}, 200, 'max_body=100: 100 bytes');
too_large(post("/api/webhooks/public/$p-tiny/events", body_of(101, "$p-t2")),
          100, 'max_body=100: 101 bytes');
is(post("/webhooks/$p-card", body_of(1024, "$p-c1"))->{status}, 200,
   'a payment method: max_body=1k takes 1k');
too_large(post("/webhooks/$p-card", body_of(1025, "$p-c2")), 1024,
          'a payment method: 1k and a byte');

# a name the location does not accept: the default, then 404

too_large(post("/api/webhooks/public/$p-nobody/events",
               body_of($default + 1, "$p-u1")),
          $default, 'an undeclared name: the default limit');
is(post("/api/webhooks/public/$p-nobody/events", body_of(300, "$p-u2"))
       ->{status}, 404, 'an undeclared name under the limit: 404');
too_large(post("/webhooks/$p-other", body_of($default + 1, "$p-u3")),
          $default, 'an undeclared payment method: the default limit');

# the answer to bytes sent in parts (0.05 s apart), as soon as it is
# whole: a refused connection lingers a while before it closes
sub answer {
    my ($parts, $timeout) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
                                  PeerPort => $t->port, Proto => 'tcp')
        or die "connect: $!\n";
    my $start = time;
    my $raw = '';
    local $SIG{PIPE} = 'IGNORE';

    for my $part (@$parts) {
        $s->syswrite($part) // last;
        Time::HiRes::sleep(0.05);
    }

    my $sel = '';
    vec($sel, fileno($s), 1) = 1;

    while (time - $start < $timeout) {
        last if $raw =~ /\r\n\r\n/
                && $raw =~ /Content-Length: (\d+)/i
                && length($raw) >= $+[0] + $1;
        my $rin = $sel;
        last if select($rin, undef, undef, 0.1) < 0;
        next unless vec($rin, fileno($s), 1);
        last if !$s->sysread(my $buf, 65536);
        $raw .= $buf;
    }

    close $s;
    return ($raw, time - $start);
}

# refused from Content-Length, before a byte of the body: the answer
# comes although the body never does

my $head = "POST $src HTTP/1.1\r\nHost: localhost\r\n"
           . "Content-Type: application/json\r\n";

my ($raw, $took) = answer([ $head . "Content-Length: 3000000\r\n\r\n" ], 5);
too_large($t->parse_response($raw), $default,
          'a Content-Length of 3 MB without its body');
cmp_ok($took, '<', 4, 'answered without waiting for the body');
unlike($raw, qr/100 Continue/, 'no "100 Continue" invites the body');

($raw, $took) = answer([ $head . "Expect: 100-continue\r\n"
                         . "Content-Length: " . ($default + 1) . "\r\n\r\n"
                       ], 5);
unlike($raw, qr/^HTTP\/1\.1 100/, 'Expect: 100-continue is not invited');
like($raw, qr/^HTTP\/1\.1 413 /, 'but refused at once');

# chunked: refused as the body grows past, before its last chunk

my $chunk = 'x' x 65536;
my $open = qq({"id":"$p-ch1","pad":");
my @chunks = ($head . "Transfer-Encoding: chunked\r\n\r\n",
              sprintf("%x\r\n", length $open) . "$open\r\n");
push @chunks, sprintf("%x\r\n", length $chunk) . "$chunk\r\n" for 1 .. 5;

($raw, $took) = answer(\@chunks, 5);
too_large($t->parse_response($raw), $default,
          'chunked: over 256k and not ended');
cmp_ok($took, '<', 4, 'answered before the body ends');

# under the limit, chunked and ended: stored
my $body = body_of(200 * 1024, "$p-ch2");
my @ok = ($head . "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
for (my $o = 0; $o < length $body; $o += 65536) {
    my $c = substr($body, $o, 65536);
    push @ok, sprintf("%x\r\n", length $c) . "$c\r\n";
}
push @ok, "0\r\n\r\n";
my $res = $t->parse_response($t->raw_request(\@ok, timeout => 5));
is($res->{status}, 200, 'chunked: 200k, ended, is stored')
    or diag($res->{content});

is($t->psql("SELECT count(*) FROM webhook_events WHERE name LIKE '$p-%'"),
   5, 'only the bodies under their limits are stored');

### every key written to Redis has a TTL

# an OTP failure (client and tenant counters) and a locked-out client
$t->redis('SET', "otp:$p:NG:1234", '1', 'EX', '600');
for my $code (1 .. 11) {
    $t->request('GET', sprintf('/validate-otp/%04d', 5000 + $code),
                headers => { tenantId => $p, countryCode => 'NG' });
}
$r = $t->request('GET', '/validate-otp/1234',
                 headers => { tenantId => $p, countryCode => 'NG' });
is($r->{status}, 429, 'the client is locked out');

# a webhook claim of a duplicate in flight is "pending", then "stored"
post($src, body_of(100, "$p-dup")) for 1 .. 2;

my @keys;
for my $pattern ("webhook:*:$p-*", "otp:attempts:$p", "otp:attempts:$p:*") {
    push @keys, grep { length } split /\n/,
                $t->redis('--scan', '--pattern', $pattern);
}

cmp_ok(scalar @keys, '>=', 8, 'keys written: ' . scalar @keys);
ok((grep { /^otp:attempts:\Q$p\E$/ } @keys), 'the tenant counter is one');
ok((grep { /^otp:attempts:\Q$p\E:/ } @keys), 'the client counter is one');

for my $k (@keys) {
    my $ttl = $t->redis('TTL', $k);
    cmp_ok($ttl, '>', 0, "TTL of $k");
}

### the suite's Redis and a private one are bounded as the guide advises

for my $redis ($t, $t->start_private_redis) {
    my %c = split /\n/, $redis->redis('CONFIG', 'GET', 'maxmemory*');
    cmp_ok($c{maxmemory}, '>', 0, 'Redis has a maxmemory');
    is($c{'maxmemory-policy'}, 'volatile-lru', 'and evicts expiring keys');
}

$t->done;

done_testing;
