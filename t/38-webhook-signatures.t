#!/usr/bin/perl

# Standard Webhooks signatures on sources and payment methods that have
# signing secrets: valid ones (each secret of a rotation, whsec_ and raw,
# several entries in the header), every way one is refused with 401 naming
# the header (tampered body, id or timestamp, old and future timestamps,
# missing and malformed headers) and nothing stored then, a captured
# delivery replayed with any Idempotency-Key (a duplicate: the key is the
# signed webhook-id) and no webhook-signature among the stored headers, a
# 1 MB body that nginx buffered to a temporary file, and nginx -t refusing
# bad configurations of platform_webhook_source and _payment_method, and a
# name that a route without a credential and one with it would both serve
# (the shipped layout passes).

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Platform::Test;
use Digest::SHA qw(hmac_sha256 sha256_hex);
use MIME::Base64 qw(encode_base64);

my $t = Platform::Test->new(workers => 1);
my $dir = $t->testdir;

# the secrets: a rotation file (a whsec_ secret and a raw one, a comment,
# CRLF line ends), and single ones
my $s1 = join('', map { chr(int rand 256) } 1 .. 32);
my $s2 = 'raw-secret-of-the-old-kind-0123456789';
my $s3 = join('', map { chr(int rand 256) } 1 .. 24);
my $other = join('', map { chr(int rand 256) } 1 .. 32);

sub spew {
    my ($name, $text) = @_;
    Platform::Test::_spew("$dir/$name", $text);
    return "$dir/$name";
}

spew('rotation.secrets', "# new, then old\r\nwhsec_" . encode_base64($s1, '')
                         . "\r\n\r\n  $s2  \r\n");
spew('card.secret', 'whsec_' . encode_base64($s3, '') . "\n");
spew('other.secret', 'whsec_' . encode_base64($other, '') . "\n");

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

my $r = $t->check_config(conf("platform_webhook_source a.b-c_D secret="
                              . "$dir/rotation.secrets secret="
                              . "$dir/card.secret;"));
ok($r->{ok}, 'nginx -t: a source with two secret files')
    or diag($r->{output});

spew('short.secret', "whsec_" . encode_base64('x' x 15, '') . "\n");
spew('short-raw.secret', "fifteen-bytes!!\n");
spew('empty.secret', "# nothing yet\n\n");
spew('bad.secret', "whsec_not*base64*at*all\n");
spew('trailing.secret', "whsec_" . encode_base64($s1, '') . "=x\n");

my @refused = (
    [ 'platform_webhook_source "";', qr/invalid name ""/, 'empty name' ],
    [ 'platform_webhook_source a/b;', qr/invalid name "a\/b"/,
      'a name with a slash' ],
    [ 'platform_webhook_source ' . ('x' x 65) . ';', qr/invalid name/,
      'a name of 65 characters' ],
    [ 'platform_webhook_source a; platform_webhook_source a;',
      qr/"a" is configured twice/, 'a name twice' ],
    [ 'platform_webhook_payment_method card key=x;',
      qr/invalid parameter "key=x": expected "secret=<file>" or "max_body=<size>"/,
      'an unknown parameter' ],
    [ 'platform_webhook_source a secret=;', qr/invalid parameter/,
      'secret= without a file' ],
    [ "platform_webhook_source a secret=$dir/missing.secret;",
      qr/missing\.secret.*failed/, 'a missing file' ],
    [ "platform_webhook_source a secret=$dir/empty.secret;",
      qr/holds no secret/, 'a file without secrets' ],
    [ "platform_webhook_source a secret=$dir/short.secret;",
      qr/line 1 of .*shorter than 16 bytes/, 'a whsec_ secret of 15 bytes' ],
    [ "platform_webhook_payment_method a secret=$dir/short-raw.secret;",
      qr/shorter than 16 bytes/, 'a raw secret of 15 bytes' ],
    [ "platform_webhook_source a secret=$dir/bad.secret;",
      qr/"whsec_" is not base64/, 'whsec_ not base64' ],
    [ "platform_webhook_source a secret=$dir/trailing.secret;",
      qr/"whsec_" is not base64/, 'whsec_ with bytes after the padding' ],
    [ 'platform_webhook_source;', qr/invalid number of arguments/,
      'no name' ],
);
for my $c (@refused) {
    $t->config_refused(conf($c->[0]), $c->[1], $c->[2]);
}

### nginx -t: no name served both without a credential and with one

# the three locations of platform.conf, each with more directives
sub layout {
    my ($http, $keyed, $open, $methods, $more) = @_;
    return <<"EOF";
    $http
    server {
        listen 127.0.0.1:%%PORT%%;
        location ^~ /api/v1/webhooks/ { platform_webhooks; $keyed }
        location ^~ /api/webhooks/ { platform_webhooks; $open }
        location ^~ /webhooks/ { platform_webhooks; $methods }
        $more
    }
EOF
}

# the refusal, as nginx -t says it
my $open_route = '/api/webhooks/public/{string:source}/events';
my $keyed_route = '/api/v1/webhooks/public/{string:source}/events';
my $method_route = '/webhooks/{string:paymentmethod}';

sub refusal {
    my ($what, $open, $open_via, $keyed, $keyed_via) = @_;
    my $text = "$what is served without a credential by location \"$open\""
               . " (POST $open_via) and with one by location \"$keyed\""
               . " (POST $keyed_via), so its events could be posted"
               . ' without the key: declare it only in locations that'
               . ' serve it one way (it is declared in ';
    return qr/\[emerg\] \Q$text\E/;
}

$r = $t->config_refused(
    layout('platform_webhook_source shop;', '', '', '', ''),
    refusal('source "shop"', '/api/webhooks/', $open_route,
            '/api/v1/webhooks/', $keyed_route),
    'a source of the http level, served by the keyless and the keyed '
    . 'locations');
like($r->{output}, qr/declared in \S*nginx\.conf:\d+\)/,
     'where the source is declared');

my @mixed = (
    [ layout('', 'platform_webhook_source shop;',
             'platform_webhook_source shop;', '', ''),
      qr/declared in \S*nginx\.conf:\d+ and \S*nginx\.conf:\d+\)/,
      'a source declared in both locations: both places' ],
    [ layout('', '', '', '', 'location /api/ { platform_webhooks;'
                             . ' platform_webhook_source shop; }'),
      refusal('source "shop"', '/api/', $open_route, '/api/',
              $keyed_route),
      'one location that serves both {source} routes' ],
    [ layout('platform_webhook_source shop;', 'platform_auth tenant;',
             'platform_auth apikey;', '', ''),
      refusal('source "shop"', '/api/v1/webhooks/', $keyed_route,
              '/api/webhooks/', $open_route),
      'platform_auth replaces the routes\' defaults, both ways' ],
    [ layout('platform_webhook_payment_method card;', '', '', '',
             'location ~ ^/hooks/ { platform_webhooks; platform_auth none; }'),
      refusal('payment method "card"', '^/hooks/', $method_route,
              '/webhooks/', $method_route),
      'a payment method in a regular expression location without a '
      . 'credential' ],
    [ layout('', '', '', 'platform_webhook_payment_method card;',
             'location @fallback { platform_webhooks; platform_auth none;'
             . ' platform_webhook_payment_method card; }'),
      refusal('payment method "card"', '@fallback', $method_route,
              '/webhooks/', $method_route),
      'a named location may serve any route' ],
    [ layout('', 'platform_webhook_source shop;', '', '', '')
      . "    server {\n        listen 127.0.0.1:%%PORT_2%%;\n"
      . "        location /api/webhooks/ { platform_webhooks;"
      . " platform_webhook_source shop; }\n    }\n",
      refusal('source "shop"', '/api/webhooks/', $open_route,
              '/api/v1/webhooks/', $keyed_route),
      'keyless in one server, keyed in another' ],
);
for my $c (@mixed) {
    $t->config_refused(@$c);
}

my @accepted = (
    [ layout('platform_webhook_source shop;', '',
             'platform_auth apikey;', '', ''),
      'a source of the http level with an API key on both routes' ],
    [ layout('platform_webhook_payment_method card;',
             'platform_webhook_source shop;',
             'platform_webhook_source open;', '', ''),
      'a payment method of the http level: only /webhooks/ serves it' ],
    [ layout('platform_webhook_source shop;', 'platform_auth none;', '', '',
             'location /other/ { platform_webhooks; platform_auth apikey; }'),
      'a location that serves no route of the name' ],
    [ layout('', 'platform_webhook_source shop;',
             'platform_webhook_source open;'
             . ' if ($arg_x) { set $y 1; } limit_except POST { deny all; }',
             '', ''),
      '"if" and "limit_except" in a location' ],
    [ layout('', 'platform_webhook_source shop;'
                 . ' location /api/v1/webhooks/public/legacy/ {'
                 . ' platform_auth none; proxy_pass http://127.0.0.1:1; }',
             '', '', ''),
      'a nested location that proxies' ],
);
for my $c (@accepted) {
    $r = $t->check_config($c->[0]);
    ok($r->{ok}, "nginx -t: $c->[1]") or diag($r->{output});
}

# the shipped platform.conf with the names its comments show, each in its
# location
my $top = $ENV{PLATFORM_TEST_TOP} // '.';
my $shipped = Platform::Test::_slurp("$top/conf/platform.conf");
my $shown = $shipped =~ s/^(\s+)# (platform_webhook_\w+ [^;]*;)$/$1$2/mg;
$shipped =~ s/secret=\S+;/secret=$dir\/card.secret;/g;
is($shown, 3, 'platform.conf shows a name in each webhook location');
spew('platform.conf', $shipped);
spew('jwt.key', 'k' x 48);
$r = $t->check_config(<<"EOF");
    server {
        listen 127.0.0.1:%%PORT%%;
        platform_jwt_key HS256 $dir/jwt.key;
        platform_identity_bureau /_bureau;
        include $dir/platform.conf;
    }
EOF
ok($r->{ok}, 'nginx -t: the shipped layout with those names')
    or diag($r->{output});
unlike($r->{output}, qr/\[(?:warn|emerg)\]/, 'and no warning')
    or diag($r->{output});

# as shipped, with its names commented out, every webhook call would be
# 404: nginx -t warns of each of the three locations, but for one whose
# route a longer location takes (as the development configuration does)
spew('platform.conf', Platform::Test::_slurp("$top/conf/platform.conf"));
$r = $t->check_config(<<"EOF");
    server {
        listen 127.0.0.1:%%PORT%%;
        platform_jwt_key HS256 $dir/jwt.key;
        platform_identity_bureau /_bureau;
        include $dir/platform.conf;
        location /hooks/ { platform_webhooks; platform_webhook_source a; }
        location ^~ /api/v1/webhooks/public/ {
            platform_webhooks;
            platform_apikey_scope webhooks;
            platform_webhook_source b;
        }
    }
EOF
ok($r->{ok}, 'nginx -t: the shipped layout without names passes')
    or diag($r->{output});
for my $loc ('/api/webhooks/', '/webhooks/') {
    like($r->{output},
         qr/\[warn\].*location\ "\Q$loc\E"\ serves\ webhooks\ but\ accepts
            \ no\ name:.*platform_webhook_source
            .*platform_webhook_payment_method/x,
         "and warns that $loc accepts no name");
}
like($r->{output},
     qr/\[warn\].*location\ "\/hooks\/"\ serves\ webhooks\ but\ its\ path
        \ matches\ none\ of\ their\ routes/x,
     'and that a location off the routes serves none of them');
# (each message is both on stderr and in the log)
my %warned = map { $_ => 1 } $r->{output} =~ /\[warn\][^\n]*?(location "[^"]*")/g;
is(join(' ', sort keys %warned),
   'location "/api/webhooks/" location "/hooks/" location "/webhooks/"',
   'and warns of these locations only')
    or diag($r->{output});
unlike($r->{output}, qr/\[warn\](?![^\n]*serves webhooks)/,
       'and of nothing else') or diag($r->{output});

### the server

$t->run(<<"EOF");
    platform_apikey_cache_time 0;
    client_body_buffer_size 8k;
    client_max_body_size 2m;

    server {
        listen 127.0.0.1:%%PORT%%;

        location ^~ /api/webhooks/ {
            platform_webhooks;
            platform_webhook_source signed secret=$dir/rotation.secrets
                                    max_body=2m;
            platform_webhook_source open max_body=2m;
        }

        location ^~ /api/v1/webhooks/ {
            platform_webhooks;
            platform_webhook_source signed-a secret=$dir/card.secret;
        }

        location ^~ /webhooks/ {
            platform_webhooks;
            platform_webhook_payment_method card secret=$dir/card.secret;
        }
    }
EOF

my $key = 'plk_00000000000000a1.' . ('k' x 43);
$t->psql("INSERT INTO api_keys (id, tenant_id, scope, key_digest)"
         . " VALUES ('00000000000000a1', 'tenant-a', 'webhooks',"
         . " sha256(convert_to('$key', 'UTF8')))");

my $signed = '/api/webhooks/public/signed/events';
my $n = 0;

sub sign {
    my ($secret, $id, $ts, $body) = @_;
    return 'v1,' . encode_base64(hmac_sha256(($id // '') . '.' . ($ts // '')
                                         . "." . $body, $secret), '');
}

# deliver(%o): a signed delivery to $signed unless told otherwise; each
# part can be overridden or dropped (undef); headers: more headers
sub deliver {
    my (%o) = @_;
    my $id = exists $o{id} ? $o{id} : 'msg_' . ++$n;
    my $ts = exists $o{ts} ? $o{ts} : time;
    my $body = $o{body} // qq({"type":"test","n":$n});
    my $sig = exists $o{sig}
        ? $o{sig}
        : sign($o{secret} // $s1, $o{sign_id} // $id, $o{sign_ts} // $ts,
               $o{sign_body} // $body);
    my %h = ('Content-Type' => 'application/json', %{$o{headers} // {}});
    $h{'webhook-id'} = $id if defined $id;
    $h{'webhook-timestamp'} = $ts if defined $ts;
    $h{'webhook-signature'} = $sig if defined $sig;
    $h{apiKey} = $o{key} if $o{key};
    return $t->request('POST', $o{path} // $signed, headers => \%h,
                       body => $body);
}

sub stored {
    my ($r) = @_;
    is($r->{status}, 200, 'stored: 200') or diag($r->{content});
    is($r->{json}{data}{duplicate}, JSON::PP::false, 'stored: a new event');
}

sub refused {
    my ($r, $detail, $name) = @_;
    is($r->{status}, 401, "$name: 401") or diag($r->{content});
    is($r->{json}{status}, JSON::PP::false, "$name: Envelope B");
    is($r->{json}{statusCode}, 401, "$name: statusCode");
    is($r->{json}{message}, 'Invalid webhook signature.', "$name: message");
    like($r->{json}{errors}[0]{descriptiveMessage} // '', $detail,
         "$name: says which header and why");
    like($r->{headers}{'www-authenticate'} // '', qr/^Webhook-Signature/,
         "$name: WWW-Authenticate");
    my $c = $r->{content};
    ok(index($c, encode_base64($s1, '')) < 0 && index($c, $s2) < 0
       && index($c, unpack('H*', $s1)) < 0, "$name: no secret material");
}

sub rows {
    return $t->psql('SELECT count(*) FROM webhook_events');
}

### valid signatures

my $r1 = deliver(id => 'msg_valid');
stored($r1);
is($t->psql("SELECT event_key || ' ' || signed || ' ' || name"
            . " FROM webhook_events WHERE id = " . ($r1->{json}{data}{id}
                                                   // 0)),
   'msg_valid true signed', 'the key is webhook-id, stored as signed');
is(deliver(id => 'msg_valid')->{json}{data}{duplicate}, JSON::PP::true,
   'the same delivery again: duplicate');

stored(deliver(secret => $s2));
pass('the old secret of the rotation (raw) passes too');

### a captured delivery replayed: its key is its signed webhook-id alone

my %captured = (id => 'msg_captured', ts => time,
                body => '{"type":"captured"}');
my $first = deliver(%captured);
stored($first);

my $headers = JSON::PP->new->decode($t->psql(
    "SELECT headers::text FROM webhook_events WHERE id = "
    . ($first->{json}{data}{id} // 0)));
ok(!exists $headers->{'webhook-signature'},
   'the stored headers hold no webhook-signature');
is($headers->{'webhook-id'}, 'msg_captured', 'but the webhook-id');

my $count = rows();
is(deliver(%captured, headers => { 'Idempotency-Key' => 'replay-1' })
   ->{json}{data}{duplicate}, JSON::PP::true,
   'replayed with a new Idempotency-Key: duplicate');
is(deliver(%captured, headers => { 'Idempotency-Key' => 'msg_future' })
   ->{json}{data}{duplicate}, JSON::PP::true,
   'replayed with the Idempotency-Key of a future webhook-id: duplicate');
is(rows(), $count, 'the replays stored nothing');
is($t->psql("SELECT count(*) FROM webhook_events"
            . " WHERE event_key IN ('replay-1', 'msg_future')"), 0,
   'under none of their keys');

my $future = deliver(id => 'msg_future', headers => {
                         'Idempotency-Key' => 'msg_captured' });
stored($future);
is($t->psql("SELECT event_key FROM webhook_events WHERE id = "
            . ($future->{json}{data}{id} // 0)), 'msg_future',
   'the genuine event of that webhook-id is stored, under it');

my $id = 'msg_multi';
my $ts = time;
my $body = '{"multi":true}';
stored(deliver(id => $id, ts => $ts, body => $body,
               sig => join(' ', 'v1,' . encode_base64('x' x 32, ''),
                           'v1a,' . encode_base64('y' x 64, ''),
                           'v2,abc', sign($s2, $id, $ts, $body))));
pass('several entries: any one matching passes');

stored(deliver(ts => time - 290));
stored(deliver(ts => time + 290));
pass('timestamps within 300 s either way pass');

stored(deliver(path => '/webhooks/card', key => $key, secret => $s3));
pass('a payment method with a secret');

### refused, and nothing stored

my $before = rows();

refused(deliver(sign_body => '{"type":"other"}'),
        qr/webhook-signature header matches none/, 'tampered body');
refused(deliver(id => 'msg_x', sign_id => 'msg_y'),
        qr/webhook-signature header matches none/, 'tampered id');
refused(deliver(ts => time, sign_ts => time - 10),
        qr/webhook-signature header matches none/, 'tampered timestamp');
refused(deliver(secret => $other),
        qr/webhook-signature header matches none/, 'an unknown secret');
refused(deliver(secret => $s3),
        qr/webhook-signature header matches none/,
        'the secret of another source');
refused(deliver(ts => time - 301), qr/webhook-timestamp header is too old/,
        'a timestamp 301 s old');
refused(deliver(ts => time - 86400), qr/webhook-timestamp header is too old/,
        'a day old');
# a few seconds more than the limit: nginx's clock may have ticked past
# this process's once the request is checked
refused(deliver(ts => time + 305),
        qr/webhook-timestamp header is in the future/,
        'a timestamp 305 s ahead');
refused(deliver(id => undef), qr/webhook-id header is missing/,
        'no webhook-id');
refused(deliver(ts => undef), qr/webhook-timestamp header is missing/,
        'no webhook-timestamp');
refused(deliver(sig => undef), qr/webhook-signature header is missing/,
        'no webhook-signature');
refused(deliver(id => 'a b'), qr/webhook-id header is malformed/,
        'a webhook-id with a space');
refused(deliver(id => 'x' x 257), qr/webhook-id header is malformed/,
        'a webhook-id of 257 characters');
for my $bad ('abc', '12.5', '-5', '1' x 13) {
    refused(deliver(ts => $bad), qr/webhook-timestamp header is malformed/,
            "timestamp \"$bad\"");
}
for my $bad ('v2,' . encode_base64('x' x 32, ''), 'v1,not*base64',
             'v1,' . encode_base64('x' x 31, ''), 'v1', 'v1,',
             'v1,' . encode_base64('x' x 32, '') . '=x', 'garbage') {
    refused(deliver(sig => $bad), qr/webhook-signature header is malformed/,
            "signature \"$bad\"");
}
refused(deliver(path => '/webhooks/card', key => $key),
        qr/matches none/, 'payment method: another secret');

is(rows(), $before, 'nothing stored for refused signatures');

### a signed source on an apiKey route: both are required

my $a_path = '/api/v1/webhooks/public/signed-a/events';
is(deliver(path => $a_path, secret => $s3)->{status}, 401,
   'apiKey route: a signature alone is 401');
is(deliver(path => $a_path, secret => $s3)->{json}{message},
   'Authentication required.', 'for the missing apiKey');
refused(deliver(path => $a_path, key => $key, sig => undef),
        qr/webhook-signature header is missing/,
        'apiKey route: the key alone');
stored(deliver(path => $a_path, key => $key, secret => $s3));
pass('apiKey route: the key and the signature');

### a source without secrets takes unsigned calls

is($t->request('POST', '/api/webhooks/public/open/events',
               headers => { 'Content-Type' => 'application/json' },
               body => '{"id":"unsigned"}')->{status}, 200,
   'a source without secrets: no signature needed');

### 1 MB bodies through a temporary file

my $big = '{"id":"ignored-for-signed","pad":"' . ('0123456789abcdef' x 65536)
          . '"}';
cmp_ok(length $big, '>', 1024 * 1024, 'a body of over 1 MB');

my $temp_before = () = ($t->error_log =~ /buffered to a temporary file/g);
$r = deliver(id => 'msg_big', body => $big);
stored($r);
my $temp_after = () = ($t->error_log =~ /buffered to a temporary file/g);
cmp_ok($temp_after, '>', $temp_before,
       'nginx buffered it to a temporary file');
is($t->psql("SELECT encode(sha256(body), 'hex') || ' ' || length(body)"
            . " FROM webhook_events WHERE event_key = 'msg_big'"),
   sha256_hex($big) . ' ' . length($big), 'stored byte for byte');

my $tampered = $big;
substr($tampered, -3, 1) = 'X';
refused(deliver(id => 'msg_big2', body => $tampered, sign_body => $big),
        qr/matches none/, '1 MB, one byte changed');
refused(deliver(id => 'msg_big3', body => $big, ts => time - 400),
        qr/too old/, '1 MB, old timestamp');

# no id in a large unsigned body: its digest is computed in the thread
my $big_open = '{"pad":"' . ('x' x (1024 * 1024)) . '"}';
$r = $t->request('POST', '/api/webhooks/public/open/events',
                 headers => { 'Content-Type' => 'application/json' },
                 body => $big_open);
is($r->{status}, 200, 'a large body without an id') or diag($r->{content});
is($t->psql("SELECT event_key FROM webhook_events WHERE id = "
            . ($r->{json}{data}{id} // 0)), sha256_hex($big_open),
   'its key is the digest of its bytes');

$t->done;
done_testing;
