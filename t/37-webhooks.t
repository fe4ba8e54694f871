#!/usr/bin/perl

# The three webhook intakes: what is stored (tenant, kind and name, event
# key, headers, the body byte for byte, time), header bytes that are not
# UTF-8 (stored as \xHH, also random ones: never a 5xx), the answers (new
# and duplicate, Envelope B), the event key rules, credentials per route,
# unknown sources and payment methods, bodies refused (arrays, scalars,
# malformed, too deep, too many members; also in an Envelope A family),
# the Redis mark of a stored event, and the NOTIFY a LISTEN client gets.
# PLATFORM_TEST_SEED repeats the random header bytes.

use strict;
use utf8;
use warnings;

use lib 't/lib';
use Test::More;
use Platform::Test;
use Digest::SHA qw(sha256_hex);
use Encode ();
use POSIX ();
use Time::HiRes qw(sleep);

my $t = Platform::Test->new(workers => 1);

$t->run(<<'EOF');
    platform_apikey_cache_time 0;

    server {
        listen 127.0.0.1:%%PORT%%;

        location ^~ /api/v1/webhooks/ {
            platform_webhooks;
            platform_webhook_source source-a;
            platform_webhook_source Source.A_2;
        }

        location ^~ /api/webhooks/ {
            platform_webhooks;
            platform_webhook_source source-b;
        }

        location ^~ /webhooks/ {
            platform_webhooks;
            platform_webhook_payment_method card;
            platform_webhook_payment_method ussd;
        }

        # an Envelope A family: the JSON limits hold for every body
        location /api/ {
            platform_persons;
            platform_auth tenant;
        }
    }

    # names set at the server level are inherited, unless a location
    # names its own; header names of any bytes reach the module
    server {
        listen 127.0.0.1:%%PORT_2%%;
        ignore_invalid_headers off;
        platform_webhook_source outer;

        location ^~ /api/webhooks/ {
            platform_webhooks;
        }

        location ^~ /api/v1/webhooks/ {
            platform_webhooks;
            platform_auth none;
            platform_webhook_source inner;
        }
    }
EOF

my @c = ('A' .. 'Z', 'a' .. 'z', '0' .. '9', '-', '_');

sub new_key {
    my ($id, $tenant) = @_;
    my $key = "plk_$id." . join('', map { $c[int rand @c] } 1 .. 43);
    $t->psql("INSERT INTO api_keys (id, tenant_id, scope, key_digest)"
             . " VALUES ('$id', '$tenant', 'webhooks',"
             . " sha256(convert_to('$key', 'UTF8')))");
    return $key;
}

my $key_a = new_key('00000000000000a1', 'tenant-a');
my $key_b = new_key('00000000000000b1', 'tenant-b');

my $json = JSON::PP->new->canonical;

# post(PATH, BODY, %opts): BODY raw bytes, or a structure sent as JSON
sub post {
    my ($path, $body, %o) = @_;
    my %h = ('Content-Type' => 'application/json', %{$o{headers} // {}});
    $h{apiKey} = $o{key} if $o{key};
    delete $h{'Content-Type'} if $o{no_type};
    $body = $json->encode($body) if ref $body;
    return $t->request($o{method} // 'POST', $path, headers => \%h,
                       body => $body);
}

my $src_a = '/api/v1/webhooks/public/source-a/events';
my $src_b = '/api/webhooks/public/source-b/events';
my $card = '/webhooks/card';

sub rows {
    my ($where) = @_;
    return $t->psql("SELECT count(*) FROM webhook_events"
                    . ($where ? " WHERE $where" : ''));
}

sub ok_new {
    my ($r, $name) = @_;
    is($r->{status}, 200, "$name: 200") or diag($r->{content});
    is($r->{json}{status}, JSON::PP::true, "$name: status true");
    is($r->{json}{statusCode}, 0, "$name: statusCode 0");
    is($r->{json}{message}, 'Event received.', "$name: message");
    is($r->{json}{data}{duplicate}, JSON::PP::false,
       "$name: data.duplicate false");
    like($r->{json}{data}{id} // '', qr/^\d+$/, "$name: data.id");
    is(Platform::Test::json_type($r->{json}{data}{id}), 'number',
       "$name: data.id is a number");
    is_deeply($r->{json}{errors}, [], "$name: errors []");
    return $r->{json}{data}{id};
}

sub ok_duplicate {
    my ($r, $name) = @_;
    is($r->{status}, 200, "$name: 200") or diag($r->{content});
    is_deeply($r->{json}, {
        status => JSON::PP::true, statusCode => 0,
        message => 'Event already received.',
        data => { duplicate => JSON::PP::true }, errors => [],
    }, "$name: data {duplicate: true}") or diag($r->{content});
}

sub error_b {
    my ($r, $status, $message, $detail, $name) = @_;
    is($r->{status}, $status, "$name: $status") or diag($r->{content});
    is($r->{json}{status}, JSON::PP::false, "$name: status false");
    is($r->{json}{statusCode}, $status, "$name: statusCode");
    is($r->{json}{message}, $message, "$name: message") if defined $message;
    if (ref $detail) {
        like($r->{json}{errors}[0]{descriptiveMessage} // '', $detail,
             "$name: detail");
    } elsif (defined $detail) {
        is($r->{json}{errors}[0]{descriptiveMessage}, $detail,
           "$name: detail");
    }
    is_deeply($r->{json}{data}, {}, "$name: data {}");
}

### the LISTEN client, started first so that it sees the first event

my $listen_out = $t->testdir . '/listen.out';
my $listener = fork // die "fork: $!";
if ($listener == 0) {
    open STDOUT, '>', $listen_out or POSIX::_exit(1);
    open STDERR, '>&', \*STDOUT;
    # separate statements: LISTEN takes effect when its own one commits
    exec('psql', '-X', '-q', '-d', $t->pg_dsn . ' application_name=listener',
         '-c', 'LISTEN webhook_events', '-c', 'SELECT pg_sleep(1.5)')
        or POSIX::_exit(127);
}
ok($t->wait_until(sub {
       $t->psql("SELECT count(*) FROM pg_stat_activity"
                . " WHERE application_name = 'listener'"
                . " AND query LIKE '%pg_sleep%'") > 0 }, 10),
   'a psql client LISTENs on webhook_events');

### a new event on the apiKey source route

my $body = qq({ "id" : "evt_1",\n  "type":"payment.succeeded",)
           . qq( "amount" : 1.50, "note":"caf\xc3\xa9 \\u00e9" }\n);
my $r = post($src_a, $body, key => $key_a,
             headers => { 'User-Agent' => 'sender/1.0',
                          'X-Trace' => 'abc',
                          'X-Request-Id' => 'req-37-1',
                          'Cookie' => 'sid=secret' });
my $id = ok_new($r, 'a new event');
is($r->{headers}{'x-request-id'}, 'req-37-1', 'X-Request-Id');
like($r->{headers}{'content-type'}, qr{^application/json}, 'JSON answer');

my $row = $t->psql("SELECT tenant_id, kind, name, event_key, signed,"
                   . " encode(body, 'hex'),"
                   . " received_at > now() - interval '1 minute'"
                   . " FROM webhook_events WHERE id = $id");
is($row, join('|', 'tenant-a', 'source', 'source-a', 'evt_1', 'f',
              unpack('H*', $body), 't'),
   'stored: the key\'s tenant, kind, name, event key, the body byte for '
   . 'byte, the time');

my $headers = $json->decode($t->psql(
    "SELECT headers::text FROM webhook_events WHERE id = $id"));
is($headers->{'user-agent'}, 'sender/1.0', 'headers: user-agent');
is($headers->{'x-trace'}, 'abc', 'headers: the sender\'s own');
is($headers->{'content-type'}, 'application/json', 'headers: content-type');
is($headers->{'x-request-id'}, 'req-37-1', 'headers: the request id');
ok(!exists $headers->{apikey}, 'headers: not the apiKey');
ok(!exists $headers->{cookie}, 'headers: not the cookie');
ok(!exists $headers->{'content-length'}, 'headers: not content-length');
ok(!grep({ $_ ne lc $_ } keys %$headers), 'headers: names in lower case');

is($t->redis('GET', 'webhook:source:source-a:tenant-a:evt_1'), 'stored',
   'Redis: the key is marked stored');
my $ttl = $t->redis('TTL', 'webhook:source:source-a:tenant-a:evt_1');
ok($ttl > 86000 && $ttl <= 86400, "Redis: for 24 h ($ttl s)");

# the notification: the new row's id, kind, name, tenant and key, no body

waitpid($listener, 0);
my $note = Platform::Test::_slurp($listen_out) // '';
my ($payload) = $note =~ /notification "webhook_events" with payload "(.*)"/;
ok(defined $payload, 'the LISTEN client received a notification')
    or diag($note);
is_deeply(eval { $json->decode($payload // '') }, {
    id => $id, kind => 'source', name => 'source-a',
    tenantId => 'tenant-a', key => 'evt_1',
}, 'its payload: id, kind, name, tenantId, key');

### duplicates

ok_duplicate(post($src_a, $body, key => $key_a), 'the same body again');
ok_duplicate(post($src_a, { id => 'evt_1', other => 'content' },
                  key => $key_a),
             'another body with the same id');
is(rows("event_key = 'evt_1'"), 1, 'one row for evt_1');

# a duplicate answered by PostgreSQL: Redis forgot the key
$t->redis('DEL', 'webhook:source:source-a:tenant-a:evt_1');
ok_duplicate(post($src_a, $body, key => $key_a), 'Redis forgot: duplicate');
is(rows("event_key = 'evt_1'"), 1, 'still one row');
is($t->redis('GET', 'webhook:source:source-a:tenant-a:evt_1'), 'stored',
   'and the key is marked stored again');

# keys are scoped by tenant, kind and name
ok_new(post($src_a, $body, key => $key_b), 'the same key, another tenant');
ok_new(post('/api/v1/webhooks/public/Source.A_2/events', $body,
            key => $key_a), 'the same key, another source');
ok_new(post($card, $body, key => $key_a), 'the same key, a payment method');
ok_new(post($src_b, $body), 'the same key, no tenant');
ok_duplicate(post($src_b, $body), 'no tenant, again');
is(rows("event_key = 'evt_1'"), 5, 'five rows for evt_1');

### the event key

sub stored_key {
    my ($r) = @_;
    my $i = $r->{json}{data}{id} // return '(none)';
    return $t->psql("SELECT event_key FROM webhook_events WHERE id = $i");
}

my @keys = (
    [ 'Idempotency-Key first', { 'Idempotency-Key' => 'idem-1',
                                 'webhook-id' => 'msg-1' },
      { id => 'b-1', eventId => 'e-1' }, 'idem-1' ],
    [ 'then webhook-id', { 'webhook-id' => 'msg-2' },
      { id => 'b-2', eventId => 'e-2' }, 'msg-2' ],
    [ 'then the body\'s id', {}, { id => 'b-3', eventId => 'e-3' }, 'b-3' ],
    [ 'then eventId', {}, { eventId => 'e-4', x => 1 }, 'e-4' ],
    [ 'an integer id', {}, { id => 12345678901 }, '12345678901' ],
    [ 'an integer eventId', {}, { id => undef, eventId => -7 }, '-7' ],
    [ 'a number with a fraction', {}, { id => 2.5 }, '2.5' ],
    [ 'an empty id is none', {}, { id => '', eventId => 'e-8' }, 'e-8' ],
    [ 'an id that is an object is none', {},
      { id => { a => 1 }, eventId => 'e-9' }, 'e-9' ],
);
for my $k (@keys) {
    my ($name, $h, $b, $want) = @$k;
    my $res = post($src_a, $b, key => $key_a, headers => $h);
    is($res->{status}, 200, "key: $name: 200") or diag($res->{content});
    is(stored_key($res), $want, "key: $name");
}

my $plain = '{"type":"no.id","n":1}';
is(stored_key(post($src_a, $plain, key => $key_a)), sha256_hex($plain),
   'key: no id: the hex SHA-256 of the raw body');
ok_duplicate(post($src_a, $plain, key => $key_a),
             'key: the same body without an id');
isnt(post($src_a, '{"type":"no.id", "n":1}', key => $key_a)
     ->{json}{data}{duplicate}, JSON::PP::true,
     'key: another byte of the body: another event');

my $long = 'L' x 201;
is(stored_key(post($src_a, { id => $long }, key => $key_a)),
   'sha256:' . sha256_hex($long), 'key: over 200 characters: hashed');
is(stored_key(post($src_a, { id => 'x' x 200 }, key => $key_a)), 'x' x 200,
   'key: 200 characters: as it is');
is(stored_key(post($src_a, qq({"id":"\xc3\xa9t\xc3\xa9"}), key => $key_a)),
   'sha256:' . sha256_hex("\xc3\xa9t\xc3\xa9"),
   'key: not ASCII: hashed');
is(stored_key(post($src_a, {}, key => $key_a,
                   headers => { 'Idempotency-Key' => 'with space:x' })),
   'with space:x', 'key: printable ASCII with a space and a colon');

### the tenant: only from a credential

$r = post($src_b, { id => 'pub-1' }, headers => { tenantId => 'tenant-x' });
ok_new($r, 'public route with a tenantId header');
is($t->psql("SELECT coalesce(tenant_id, 'NULL') FROM webhook_events"
            . " WHERE event_key = 'pub-1'"), 'NULL',
   'a bare tenantId header is not stored as the tenant');

### header bytes that are not UTF-8: kept, each such byte as \xHH

# raw_post(PATH, HEADER LINES, BODY, %opts): bytes as they are
sub raw_post {
    my ($path, $head, $body, %o) = @_;
    return $t->parse_response($t->raw_request(
        "POST $path HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
        . "Content-Type: application/json\r\n$head"
        . 'Content-Length: ' . length($body) . "\r\n\r\n$body", %o));
}

# a stored header's value, as the hex of its UTF-8 bytes
sub stored_header {
    my ($id, $name) = @_;
    return $t->psql("SELECT encode(convert_to(headers->>'$name', 'UTF8'),"
                    . " 'hex') FROM webhook_events WHERE id = $id");
}

my @bytes = (
    [ 'x-twice', "a\xc3\xc3b", 'a\\xC3\\xC3b', 'C3 C3' ],
    [ 'x-lone', "\xff", '\\xFF', 'a lone FF' ],
    [ 'x-overlong', "\xc0\x80", '\\xC0\\x80', 'an overlong C0 80' ],
    [ 'x-surrogate', "\xed\xa0\x80", '\\xED\\xA0\\x80',
      'a surrogate ED A0 80' ],
    [ 'x-cut', "caf\xc3\xa9 \xe2\x82", "caf\xc3\xa9 \\xE2\\x82",
      'valid UTF-8 as it is, then a cut sequence' ],
);
$r = raw_post($src_b, join('', map { "$_->[0]: $_->[1]\r\n" } @bytes),
              '{"id":"bytes-1"}');
$id = ok_new($r, 'headers that are not UTF-8');
for my $b (@bytes) {
    is(stored_header($id // 0, $b->[0]), unpack('H*', $b->[2]),
       "stored header: $b->[3]");
}

$r = raw_post('/api/webhooks/public/outer/events', "X-N\xe9me: v\r\n",
              '{"id":"bytes-2"}', port => $t->port(2));
$id = ok_new($r, 'a header name that is not UTF-8');
is($t->psql("SELECT encode(convert_to(k, 'UTF8'), 'hex')"
            . " FROM webhook_events, jsonb_object_keys(headers) k"
            . " WHERE id = " . ($id // 0) . " AND k LIKE 'x-n%'"),
   unpack('H*', 'x-n\\xE9me'), 'stored header name: in lower case, '
   . 'the byte as \\xE9');

# random bytes: a header, and another one sent twice (joined with ", ")

my $seed = $ENV{PLATFORM_TEST_SEED} // int(rand(2**31));
srand($seed);
diag("PLATFORM_TEST_SEED=$seed");

my $utf8 = qr/[\x00-\x7f] | [\xc2-\xdf][\x80-\xbf]
              | \xe0[\xa0-\xbf][\x80-\xbf] | \xed[\x80-\x9f][\x80-\xbf]
              | [\xe1-\xec\xee\xef][\x80-\xbf]{2}
              | \xf0[\x90-\xbf][\x80-\xbf]{2} | [\xf1-\xf3][\x80-\xbf]{3}
              | \xf4[\x80-\x8f][\x80-\xbf]{2}/x;

sub escaped {
    my ($bytes) = @_;
    $bytes =~ s/\G(?:($utf8)|(.))/
        defined $1 ? $1 : sprintf('\\x%02X', ord $2)/gse;
    return $bytes;
}

# bytes of a header value (no CR, LF, NUL or control characters), mixing
# single bytes, whole UTF-8 sequences and cut ones
sub random_value {
    my $v = '';
    for (1 .. 1 + int rand 12) {
        my $c = int rand 0x110000;
        $c = 0xe9 if $c >= 0xd800 && $c <= 0xdfff;
        my $seq = $c < 0x80 ? chr(0x20 + int rand 0x5f)
                            : Encode::encode('UTF-8', chr $c);
        my $pick = int rand 3;
        $v .= $pick == 0 ? chr(0x80 + int rand 0x80)
            : $pick == 1 ? $seq
            : substr($seq, 0, 1 + int rand length $seq);
    }
    $v =~ s/^[ \t]+|[ \t]+$//g;
    return length $v ? $v : 'x';
}

for my $n (1 .. 40) {
    my @v = map { random_value() } 1 .. 3;
    my $res = raw_post($src_b, "X-Fuzz-A: $v[0]\r\nX-Fuzz-B: $v[1]\r\n"
                               . "X-Fuzz-B: $v[2]\r\n",
                       qq({"id":"fuzz-$n"}));
    my $hex = join ' ', map { unpack('H*', $_) } @v;
    ok($res->{status} < 500, "random header bytes $n: no 5xx")
        or diag("$res->{status}: $hex");
    is($res->{status}, 200, "random header bytes $n: 200")
        or diag($hex);
    my $i = $res->{json}{data}{id} // 0;
    is(stored_header($i, 'x-fuzz-a') . ' ' . stored_header($i, 'x-fuzz-b'),
       unpack('H*', escaped($v[0])) . ' '
       . unpack('H*', escaped("$v[1], $v[2]")),
       "random header bytes $n: stored escaped") or diag($hex);
}

### credentials

error_b(post($src_a, { id => 'k1' }), 401, 'Authentication required.',
        undef, 'source route without apiKey');
error_b(post($card, { id => 'k1' }), 401, 'Authentication required.',
        undef, 'payment route without apiKey');
error_b(post($card, { id => 'k1' }, key => 'plk_00000000000000ff.'
                                          . ('x' x 43)),
        401, undef, undef, 'an unknown key');
ok_new(post($card, { id => 'k1' }, key => $key_a), 'payment route with it');
is(rows("event_key = 'k1'"), 1, 'only the authenticated call stored');

### unknown sources and payment methods, paths, methods

my $count = rows();

error_b(post('/api/v1/webhooks/public/nope/events', { id => 1 },
             key => $key_a),
        404, 'Unknown webhook source.', 'No such source is configured.',
        'unknown source (apiKey route)');
error_b(post('/api/webhooks/public/source-a/events', { id => 1 }),
        404, 'Unknown webhook source.', undef,
        'a source of another location');
error_b(post('/api/v1/webhooks/public/SOURCE-A/events', { id => 1 },
             key => $key_a),
        404, 'Unknown webhook source.', undef, 'names are case-sensitive');
error_b(post('/webhooks/cash', { id => 1 }, key => $key_a),
        404, 'Unknown payment method.',
        'No such payment method is configured.', 'unknown payment method');
error_b(post('/webhooks/card/extra', { id => 1 }, key => $key_a),
        404, 'Resource not found.', undef, 'unknown path');
error_b(post($src_b, undef, method => 'GET'), 405, 'Method not allowed.',
        undef, 'GET');
is(rows(), $count, 'nothing stored by those');

### names inherited from the server level, or replaced

sub post2 {
    my ($path) = @_;
    return $t->request('POST', $path, port => $t->port(2),
                       headers => { 'Content-Type' => 'application/json' },
                       body => '{"id":"levels"}');
}
is(post2('/api/webhooks/public/outer/events')->{status}, 200,
   'a source of the server level, in a location without names');
is(post2('/api/v1/webhooks/public/inner/events')->{status}, 200,
   'a location\'s own source');
is(post2('/api/v1/webhooks/public/outer/events')->{status}, 404,
   'a location that names sources does not inherit the server\'s');

### bodies refused

my $before = rows();

my @bad = (
    [ '[{"id":"a"}]', 'The request body must be a JSON object.', 'an array' ],
    [ '42', 'The request body must be a JSON object.', 'a number' ],
    [ '"evt"', 'The request body must be a JSON object.', 'a string' ],
    [ 'null', 'The request body must be a JSON object.', 'null' ],
    [ '{"id":"a",', 'The request body is not valid JSON.', 'malformed' ],
    [ '{"id":"a","id":"b"}', 'The request body is not valid JSON.',
      'a duplicate member' ],
    [ '', 'The request body is not valid JSON.', 'empty' ],
    [ '{"a":' x 65 . '1' . '}' x 65,
      'The request body nests too deeply.', '65 levels' ],
    [ '{"a":' . '[' x 64 . ']' x 64 . '}',
      'The request body nests too deeply.', '65 levels of arrays' ],
    [ '{"a":[' . join(',', (1) x 10000) . ']}',
      'The request body has too many members.',
      '10,001 members (array elements count)' ],
    [ '{' . join(',', map { qq("k$_":$_) } 1 .. 10001) . '}',
      'The request body has too many members.', '10,001 object members' ],
);
for my $b (@bad) {
    my ($text, $message, $name) = @$b;
    error_b(post($src_b, $text), 400, $message, undef, "body: $name");
}
like(post($src_b, '{"a":' x 65 . '1' . '}' x 65)->{json}{errors}[0]
     {descriptiveMessage} // '', qr/64 levels/, 'the limit is named');
like(post($src_b, '{"a":[' . join(',', (1) x 10000) . ']}')->{json}
     {errors}[0]{descriptiveMessage} // '', qr/10000 members/,
     'the limit is named');
is(rows(), $before, 'none stored');

# at the limits, and brackets inside strings do not count
ok_new(post($src_b, '{"a":' x 63 . '{"id":"deep"}' . '}' x 63),
       '64 levels');
ok_new(post($src_b, '{"id":"wide","a":[' . join(',', (1) x 9998) . ']}'),
       '10,000 members');
ok_new(post($src_b, '{"id":"str","s":"' . ('[{' x 100) . '\\"[' . '"}'),
       'brackets inside strings');

error_b(post($src_b, '{"id":"t"}', headers => {
            'Content-Type' => 'application/xml' }),
        415, 'Unsupported media type.', undef, 'another content type');
# HTTP::Tiny adds a type of its own: by hand
$r = $t->parse_response($t->raw_request(
    "POST $src_b HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
    . "Content-Length: 16\r\n\r\n" . '{"id":"no-type"}'));
ok_new($r, 'no content type');

# the limits hold in an Envelope A family too
$r = $t->request('PUT', '/api/v1/PersonDocuments/update',
                 headers => { tenantId => 'tenant-a',
                              'Content-Type' => 'application/json' },
                 body => '{"a":' x 65 . '1' . '}' x 65);
is($r->{status}, 400, 'persons: too deep: 400');
is($r->{json}{succeeded}, JSON::PP::false, 'persons: in Envelope A');
is($r->{json}{message}, 'The request body nests too deeply.',
   'persons: names the limit');
$r = $t->request('PUT', '/api/v1/PersonDocuments/update',
                 headers => { tenantId => 'tenant-a', 'Accept-Language' => 'fr',
                              'Content-Type' => 'application/json' },
                 body => '[' . join(',', (1) x 10_001) . ']');
is($r->{status}, 400, 'persons, fr: too many members: 400');
is($r->{json}{message}, 'Le corps de la requête a trop de membres.',
   'persons, fr: the limit in French');
is_deeply($r->{json}{errors},
          [ 'Un corps JSON compte au plus 10000 membres '
            . "(membres d'objets et éléments de tableaux)." ],
          'persons, fr: its detail in French');

$t->done;
done_testing;
