#!/usr/bin/perl

# A document's base64 is read outside Jansson (a raw field): its JSON
# escapes are undone where it is. Escaped '/', '+' and letters, "\r\n"
# line breaks and an escaped key store the right bytes, in a small body
# and in one parsed in the thread pool; positions of a bad character
# count the string's characters. A string Jansson would refuse (a bad
# escape, a lone surrogate, \u0000, a control character, a byte that is
# not UTF-8) and a body malformed after the string get exactly the
# answer they get in a field Jansson reads (fileName, placed alike); a
# base64 that is not a string is 400; a "base64" below the top level is
# not the document.

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Platform::Test;
use Platform::JWT;
use MIME::Base64 qw(encode_base64);
use JSON::PP ();

my $t = Platform::Test->new();
my $k = Platform::JWT::keys($t->testdir . '/keys');

$t->run(<<'EOF');
    server {
        listen 127.0.0.1:%%PORT%%;
        platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;

        location ~ ^/api/v[^/]+/PersonDocuments/ {
            platform_persons;
            client_body_buffer_size 1m;
        }
    }
EOF

my $p1 = 'c0000000-0000-4000-8000-000000000001';
my $doc = '73000000-0000-4000-8000-000000000046';

$t->psql(<<"SQL");
INSERT INTO person_documents (id, tenant_id, person_id, type, file_name,
    document_number, approved, content, content_sha256, content_size)
VALUES ('$doc', 'tenant-a', '$p1', 1, 'a.pdf', 'N-46', true,
        '\\x01', sha256('\\x01'), 1);
SQL

my $token = Platform::JWT::hs256($k, tenantId => 'tenant-a');

sub put {
    return $t->request('PUT', '/api/v1/PersonDocuments/update',
                       headers => { Authorization => "Bearer $token",
                                    'Content-Type' => 'application/json' },
                       body => $_[0]);
}

sub stored {
    return pack('H*', $t->psql("SELECT encode(content, 'hex')"
                               . " FROM person_documents WHERE id = '$doc'"));
}

my $ids = qq("documentId":"$doc","personId":"$p1");

# base64 in MIME lines as a JSON writer may escape it: '/' as "\/", '+'
# and 'A' as \u escapes, line breaks as "\r\n"
sub escaped {
    my ($b64) = @_;
    $b64 =~ s{/}{\\/}g;
    $b64 =~ s{\+}{\\u002B}g;
    $b64 =~ s{A}{\\u0041}g;
    $b64 =~ s{\n}{\\r\\n}g;
    return $b64;
}

### escapes undone

for my $size (300, 200_000) {
    my $bytes = join '', map { chr(($_ * 7 + $size) % 256) } 1 .. $size;
    my $b64 = encode_base64($bytes);
    my $e = escaped($b64);
    like($e, qr{\\/.*\\u002B.*\\u0041.*\\r\\n}s,
         "$size bytes: the base64 has every escape");

    my $r = put(qq({$ids,"base64":"$e"}));
    is($r->{status}, 200, "$size bytes, escaped: 200") or diag($r->{content});
    ok(stored() eq $bytes, "$size bytes, escaped: stored byte for byte");
}

my $r = put(qq({$ids,"base\\u0036\\u0034":"QUJD"}));
is($r->{status}, 200, 'an escaped key: 200') or diag($r->{content});
is(stored(), 'ABC', 'an escaped key: the document');

$r = put(qq({$ids,"x":{"base64":"!!","y":["base64"]},"base64":"\\u0051Q=="}));
is($r->{status}, 200, 'nested "base64" members: 200') or diag($r->{content});
is(stored(), 'A', 'nested "base64" members: the top-level one is stored');

$r = put(qq({$ids,"x":{"base64":"QUJD"}}));
is($r->{status}, 200, 'only a nested "base64": 200') or diag($r->{content});
is(stored(), 'A', 'only a nested "base64": no content given');

# positions count the string's characters, not its escapes
for my $case ([ 'QUJD\r\nR\u0020A=', 8 ], [ '\u0051UJD\u00e9', 5 ],
              [ '\/\/\/\/\/\/QU.D', 9 ])
{
    my ($in, $at) = @$case;
    $r = put(qq({$ids,"base64":"$in"}));
    is($r->{status}, 400, "base64 \"$in\": 400");
    is($r->{json}{errors}[0] // '',
       "base64 has an invalid character at position $at.",
       "base64 \"$in\": position $at");
}

### refused as Jansson refuses them

my $long = 'QUJD' x 10;
my $big = 'QUJD' x 20_000;

my @strings = (
    [ 'QUJD\x', 'a bad escape' ],
    [ "$long\\x$long", 'a bad escape in a long string' ],
    [ "$big\\q", 'a bad escape after 80 KB' ],
    [ 'QUJD\u00G1', 'a bad \u escape' ],
    [ 'QQ\u12', 'a short \u escape' ],
    [ '\uD800', 'a lone high surrogate' ],
    [ "$long\\uD800QQ==", 'a lone high surrogate in a long string' ],
    [ 'QQ==\uDC00', 'a lone low surrogate' ],
    [ '\uD800\u0041', 'a high surrogate and no low one' ],
    [ '\uD83D\uDE00\uDC00', 'a pair, then a lone low surrogate' ],
    [ '\uD800\uD800x\q', 'a bad escape after a lone surrogate' ],
    [ 'QU\u0000JD', '\u0000' ],
    [ "QUJD\tRA==", 'a tab' ],
    [ "QUJD\nRA==", 'a newline' ],
    [ "QU\x01", 'a control character' ],
    [ "QUJD\xff", 'a byte that is not UTF-8' ],
    [ "QUJD\xc3(", 'a truncated UTF-8 sequence' ],
    [ "QUJD\xed\xa0\x80", 'a surrogate in UTF-8' ],
    [ "QUJD\\\xc3\xa9", 'an escaped UTF-8 character' ],
    [ "$big\xc0\x80", 'an overlong sequence after 80 KB' ],
);

# the same string in fileName, where Jansson reads it: the same place
for my $case (@strings) {
    my ($s, $name) = @$case;
    my $raw = put(qq({$ids,\n"base64":\n"$s"}));
    my $jansson = put(qq({$ids,\n"fileName":\n"$s"}));

    # compared as text: Jansson's context may cut a UTF-8 character
    is($raw->{status}, 400, "$name: 400");
    like($jansson->{content},
         qr/JSON\.","errors":\["Malformed JSON at line 3, column \d+: /,
         "$name: Jansson's own refusal");
    is($raw->{content}, $jansson->{content},
       "$name: Jansson's words and place");
}

# malformed after the string, on its line or a later one
for my $case ([ '"QUJD" x}', 'a bad token after it' ],
              [ "\"$big\", \"a\": tru}", 'a bad token after 80 KB' ],
              [ "\"QU\\/JD\",\n\"a\":\n[1,}", 'a bad token lines after' ],
              [ "\"QUJD\"", 'the end of the body' ],
              [ "\"\\u0051\\u0051==\"} {}", 'a second value' ])
{
    my ($rest, $name) = @$case;
    my $raw = put(qq({$ids,\n"base64":\n$rest));
    my $jansson = put(qq({$ids,\n"fileName":\n$rest));

    is($raw->{status}, 400, "$name: 400");
    like($jansson->{json}{errors}[0] // '', qr/^Malformed JSON at line [3-5]/,
         "$name: Jansson's own refusal");
    is($raw->{json}{errors}[0] // '', $jansson->{json}{errors}[0] // '',
       "$name: Jansson's words and place");
}

# malformed before it: Jansson's refusal stands
$r = put(qq({$ids,"type":tru,"base64":"\\x"}));
like($r->{json}{errors}[0] // '',
     qr/^Malformed JSON at line 1, column \d+: invalid token near 'tru'/,
     'malformed before the string');

# given twice: refused as any field given twice
$r = put(qq({$ids,\n"base64":\n"QUJD",\n"base64":"QQ=="}));
is($r->{status}, 400, 'base64 given twice: 400');
is($r->{json}{errors}[0] // '', 'Malformed JSON at line 4, column 8: '
   . q(duplicate object key near '"base64"'), 'base64 given twice: says so');

### not a string

for my $v ('12', '[ "QQ==" ]', '{"a":"QQ=="}', 'true') {
    $r = put(qq({$ids,"base64":$v}));
    is($r->{status}, 400, "base64 $v: 400");
    is($r->{json}{errors}[0] // '', 'base64 must be a string.',
       "base64 $v: must be a string");
}

$r = put(qq({$ids,"base64":null}));
is($r->{json}{errors}[0] // '', 'base64 must not be null.', 'base64 null');

is(stored(), 'A', 'nothing refused was stored');

$t->done;
done_testing;
