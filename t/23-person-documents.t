#!/usr/bin/perl

# PUT /api/v{version}/PersonDocuments/update and DELETE
# /api/v{version}/PersonDocuments/{id}/delete: the document of spec 2.5
# with its JSON types, what a PUT replaces, the content, its SHA-256 and
# size as PostgreSQL stores them, approved reset by new content only,
# base64 edge cases, fileName rules, platform_document_max_size (413),
# 415, malformed JSON, field types, 404 for unknown, foreign and
# mismatched documents, the delete, French, 401, 405. The demo data's
# documents.

use strict;
use warnings;
use utf8;

use lib 't/lib';
use Test::More;
use Platform::Test;
use Platform::JWT;
use Digest::SHA qw(sha256_hex);
use MIME::Base64 qw(encode_base64);
use JSON::PP ();

my $t = Platform::Test->new();
my $k = Platform::JWT::keys($t->testdir . '/keys');

$t->run(<<'EOF');
    server {
        listen 127.0.0.1:%%PORT%%;
        platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;

        location /api/ {
            platform_persons;
        }

        location ~ ^/api/v[^/]+/PersonDocuments/ {
            platform_persons;
            platform_document_max_size 1k;
        }
    }
EOF

my $p1 = 'c0000000-0000-4000-8000-000000000001';
my $p2 = 'c0000000-0000-4000-8000-000000000002';
my $pb = 'c0000000-0000-4000-8000-0000000000b1';

my $doc = '73000000-0000-4000-8000-000000000001';     # tenant-a, $p1
my $doc2 = '73000000-0000-4000-8000-000000000002';    # tenant-a, $p2
my $foreign = '74000000-0000-4000-8000-000000000001'; # tenant-b, $pb
my $unknown = '73000000-0000-4000-8000-000000000099';
my @gone = map { sprintf('73000000-0000-4000-8000-0000000000%02d', $_) }
           11 .. 13;                                  # tenant-a, deleted

my $rows = join(",\n", map {
    "('$_', 'tenant-a', '$p1', 5, 'x.txt', '', false,"
    . " convert_to('$_', 'UTF8'), sha256(convert_to('$_', 'UTF8')),"
    . " octet_length(convert_to('$_', 'UTF8')))"
} @gone);

$t->psql(<<"SQL");
INSERT INTO person_documents (id, tenant_id, person_id, type, file_name,
    document_number, approved, content, content_sha256, content_size)
VALUES ('$doc', 'tenant-a', '$p1', 1, 'id-card.png', 'NIN-0001', true,
        '\\x0102', sha256('\\x0102'), 2),
       ('$doc2', 'tenant-a', '$p2', 2, 'passport.pdf', 'A0001', true,
        '\\x03', sha256('\\x03'), 1),
       ('$foreign', 'tenant-b', '$pb', 3, 'licence.pdf', 'LIC-9', true,
        '\\x09', sha256('\\x09'), 1),
$rows;
SQL

my $json = JSON::PP->new->utf8->canonical;

sub token {
    my ($tenant) = @_;
    return Platform::JWT::hs256($k, tenantId => $tenant // 'tenant-a');
}

# a PUT: $body a Perl structure (sent as UTF-8 JSON) or bytes
sub put {
    my ($body, %o) = @_;
    my %h = (Authorization => 'Bearer ' . token($o{tenant}),
             'Content-Type' => 'application/json',
             %{$o{headers} // {}});
    delete $h{Authorization} if $o{anonymous};
    $h{'Accept-Language'} = 'fr' if $o{fr};
    my $v = $o{version} // '1';
    return $t->request($o{method} // 'PUT',
                       "/api/v$v/PersonDocuments/update", headers => \%h,
                       body => ref $body ? $json->encode($body) : $body);
}

sub del {
    my ($id, %o) = @_;
    my %h = (Authorization => 'Bearer ' . token($o{tenant}));
    $h{'Accept-Language'} = 'fr' if $o{fr};
    return $t->request($o{method} // 'DELETE',
                       "/api/v1/PersonDocuments/$id/delete", headers => \%h);
}

sub envelope_error {
    my ($r, $status, $message, $detail, $name) = @_;
    is($r->{status}, $status, "$name: $status");
    is_deeply($r->{json}, {
        succeeded => JSON::PP::false, message => $message,
        errors => [ $detail ], data => undef,
    }, "$name: Envelope A") or diag($r->{content});
}

# the row as PostgreSQL has it
sub stored {
    my ($id) = @_;
    my ($type, $name, $approved, $hex, $sha, $size, $digest) = split /\|/,
        $t->psql("SELECT type, file_name, approved, encode(content, 'hex'),"
                 . " encode(content_sha256, 'hex'), content_size,"
                 . " encode(sha256(content), 'hex')"
                 . " FROM person_documents WHERE id = '$id'");
    return undef unless defined $type;
    utf8::decode($name);
    return { type => $type, fileName => $name, approved => $approved,
             content => pack('H*', $hex), sha256 => $sha, size => $size,
             digest => $digest };
}

sub set_approved {
    $t->psql("UPDATE person_documents SET approved = true WHERE id = '$_[0]'");
}

# the content is stored as sent, with its digest and size
sub content_ok {
    my ($id, $bytes, $name) = @_;
    my $s = stored($id);
    is($s->{content}, $bytes, "$name: content stored byte for byte");
    is($s->{sha256}, sha256_hex($bytes), "$name: content_sha256");
    is($s->{digest}, $s->{sha256}, "$name: the digest is the content's");
    is($s->{size}, length $bytes, "$name: content_size");
}

sub ids { (documentId => $_[0] // $doc, personId => $_[1] // $p1) }

### an update of every field

my $bytes = join '', map { chr } 0 .. 255;
my $r = put({ ids(), type => 2, fileName => 'scan é.pdf',
              base64 => encode_base64($bytes, '') });
is($r->{status}, 200, 'update: 200') or diag($r->{content});
is($r->{headers}{'content-type'}, 'application/json; charset=utf-8',
   'content type');
is($r->{headers}{'content-language'}, 'en', 'Content-Language en');
is($r->{json}{succeeded}, JSON::PP::true, 'succeeded true');
is($r->{json}{message}, 'Person document updated.', 'message');
is_deeply($r->{json}{errors}, [], 'errors []');
is(Platform::Test::loose_json($r->{content}), '', 'compact JSON');

my $d = $r->{json}{data};
my %types = map { $_ => Platform::Test::json_type($d->{$_}) } keys %$d;
is_deeply(\%types, {
    id => 'string', personId => 'string', type => 'number',
    path => 'string', fileName => 'string', documentNumber => 'string',
    approved => 'bool',
}, 'every field of spec 2.5, with its JSON type');
is_deeply($d, {
    id => $doc, personId => $p1, type => 2,
    path => "persons/$p1/documents/$doc/scan é.pdf",
    fileName => 'scan é.pdf', documentNumber => 'NIN-0001',
    approved => JSON::PP::false,
}, 'the updated document; new content reset approved');
content_ok($doc, $bytes, 'all 256 byte values');

$r = put({ ids(), type => 3 }, fr => 1);
is($r->{status}, 200, 'French: 200');
is($r->{json}{message}, 'Document de personne mis à jour.', 'French message');
is($r->{headers}{'content-language'}, 'fr', 'Content-Language fr');

### fields present replace, absent keep

set_approved($doc);

$r = put({ ids(), type => 4 });
is($r->{json}{data}{type}, 4, 'type alone: replaced');
is($r->{json}{data}{fileName}, 'scan é.pdf', 'type alone: fileName kept');
is($r->{json}{data}{approved}, JSON::PP::true,
   'type alone: approved kept');
content_ok($doc, $bytes, 'type alone: content kept');

$r = put({ ids(), fileName => 'renamed.pdf' });
is($r->{json}{data}{fileName}, 'renamed.pdf', 'fileName alone: replaced');
is($r->{json}{data}{path}, "persons/$p1/documents/$doc/renamed.pdf",
   'fileName alone: the path follows');
is($r->{json}{data}{type}, 4, 'fileName alone: type kept');
is($r->{json}{data}{approved}, JSON::PP::true,
   'fileName alone: approved kept');

$r = put({ ids() });
is($r->{status}, 200, 'only the ids: 200');
is_deeply($r->{json}{data}, {
    id => $doc, personId => $p1, type => 4,
    path => "persons/$p1/documents/$doc/renamed.pdf",
    fileName => 'renamed.pdf', documentNumber => 'NIN-0001',
    approved => JSON::PP::true,
}, 'only the ids: the document unchanged');
content_ok($doc, $bytes, 'only the ids: content kept');

$r = put({ ids(), base64 => encode_base64($bytes, ''), unknown => [1] });
is($r->{json}{data}{approved}, JSON::PP::true,
   'the same content again: approved kept');
is(stored($doc)->{approved}, 't', 'the same content again: stored so');

$r = put({ ids(), base64 => encode_base64("other", '') });
is($r->{json}{data}{approved}, JSON::PP::false,
   'other content: approved reset');
content_ok($doc, 'other', 'other content');

# another document is untouched by all of that
is_deeply(stored($doc2), {
    type => 2, fileName => 'passport.pdf', approved => 't', content => "\x03",
    sha256 => sha256_hex("\x03"), size => 1, digest => sha256_hex("\x03"),
}, 'the other document of the tenant is unchanged');

### base64

my $text = 'The quick brown fox jumps over the lazy dog. ' x 12;   # 540
my $b64 = encode_base64($text);                  # "\n" every 76 characters
like($b64, qr/\n./, 'the MIME encoding has line breaks');
$r = put({ ids(), base64 => $b64 });
is($r->{status}, 200, 'LF line breaks accepted') or diag($r->{content});
content_ok($doc, $text, 'LF line breaks');

(my $crlf = $b64) =~ s/\n/\r\n/g;
$r = put({ ids(), base64 => "\r\n$crlf\n\n" });
is($r->{status}, 200, 'CRLF and extra line breaks accepted');
content_ok($doc, $text, 'CRLF line breaks');

my %decoded = ('QQ==' => 'A', 'QUI=' => 'AB', 'QUJD' => 'ABC',
               "Q\nU\r\nI\n=" => 'AB', '+/+/' => "\xfb\xff\xbf");
for my $in (sort keys %decoded) {
    $r = put({ ids(), base64 => $in });
    (my $name = $in) =~ s/\r/\\r/g;
    $name =~ s/\n/\\n/g;
    is($r->{status}, 200, "base64 \"$name\": 200") or diag($r->{content});
    is(stored($doc)->{content}, $decoded{$in}, "base64 \"$name\": decoded");
}

my $before = stored($doc);

my @bad = (
    # [ base64, detail in English, detail in French ]
    [ '', 'base64 is empty.', 'base64 est vide.' ],
    [ "\r\n\n", 'base64 is empty.', 'base64 est vide.' ],
    [ 'QUJD RA==', 'base64 has an invalid character at position 5.',
      'base64 contient un caractère invalide à la position 5.' ],
    [ " QUJD", 'base64 has an invalid character at position 1.' ],
    [ "QUJD\tRA==", 'base64 has an invalid character at position 5.' ],
    [ "QUJD\r\nR A=", 'base64 has an invalid character at position 8.' ],
    [ 'QUJD-_==', 'base64 has an invalid character at position 5.' ],
    [ 'QUJDé', 'base64 has an invalid character at position 5.' ],
    [ 'QU.D', 'base64 has an invalid character at position 3.' ],
    [ 'QUJ', 'base64 has bad padding: its length without line breaks '
             . 'is not a multiple of 4.',
      'base64 a un remplissage incorrect : sa longueur sans les sauts de '
      . 'ligne n\'est pas un multiple de 4.' ],
    [ 'QQ', 'base64 has bad padding: its length without line breaks '
            . 'is not a multiple of 4.' ],
    [ "QUJDR\nA=", 'base64 has bad padding: its length without line breaks '
                   . 'is not a multiple of 4.' ],
    [ 'QQ=A', "base64 has bad padding: '=' at position 3.",
      "base64 a un remplissage incorrect : '=' à la position 3." ],
    [ 'Q===', "base64 has bad padding: '=' at position 2." ],
    [ 'QUJD====', "base64 has bad padding: '=' at position 5." ],
    [ 'QQ==QUJD', "base64 has bad padding: '=' at position 3." ],
    [ '====', "base64 has bad padding: '=' at position 1." ],
    [ 'QR==', 'base64 has bad padding: the unused bits of its last '
              . 'character are not zero.',
      'base64 a un remplissage incorrect : les bits inutilisés de son '
      . 'dernier caractère ne sont pas nuls.' ],
    [ 'QUJ=', 'base64 has bad padding: the unused bits of its last '
              . 'character are not zero.' ],
);

for my $case (@bad) {
    my ($in, $en, $fr) = @$case;
    (my $name = $in) =~ s/\r/\\r/g;
    $name =~ s/\n/\\n/g;
    $name =~ s/\t/\\t/g;
    envelope_error(put({ ids(), base64 => $in }), 400, 'Bad request.', $en,
                   "base64 \"$name\"");
    next unless $fr;
    envelope_error(put({ ids(), base64 => $in }, fr => 1), 400,
                   'Requête invalide.', $fr, "base64 \"$name\", French");
}

is_deeply(stored($doc), $before, 'refused updates changed nothing');

envelope_error(put({ ids(), base64 => 'QQ==', type => 1,
                     fileName => '.x' }),
               400, 'Bad request.', 'fileName must not begin with a dot.',
               'fileName refused before the content is looked at');
is_deeply(stored($doc), $before, 'and nothing of it was stored');

### platform_document_max_size 1k

my $kib = join '', map { chr(($_ * 7) % 256) } 1 .. 1024;
$r = put({ ids(), base64 => encode_base64($kib, '') });
is($r->{status}, 200, '1024 bytes decoded: 200') or diag($r->{content});
content_ok($doc, $kib, 'exactly the limit');

# 1368 characters of base64, one line break every 4: the text is longer
# than 1k would need, the content is not
(my $spread = encode_base64($kib, '')) =~ s/(.{4})/$1\r\n/g;
cmp_ok(length($spread) / 4 * 3, '>', 1024, 'line breaks make the text long');
$r = put({ ids(), base64 => $spread });
is($r->{status}, 200, 'a long text of 1024 bytes: 200') or diag($r->{content});
content_ok($doc, $kib, 'the limit, spread over many lines');

$before = stored($doc);

$r = put({ ids(), base64 => encode_base64("$kib!", '') });
envelope_error($r, 413, 'Document too large.',
               'The document must be at most 1024 bytes once decoded.',
               '1025 bytes decoded');
is($r->{headers}{'content-language'}, 'en', '413: Content-Language');
envelope_error(put({ ids(), base64 => encode_base64("$kib!", '') }, fr => 1),
               413, 'Document trop volumineux.',
               'Le document doit faire au plus 1024 octets une fois décodé.',
               '1025 bytes decoded, French');
envelope_error(put({ ids(), base64 => encode_base64($kib x 40, '') }), 413,
               'Document too large.',
               'The document must be at most 1024 bytes once decoded.',
               '40 KiB decoded');
my $long = encode_base64($kib x 42, '') . '*';
envelope_error(put({ ids(), base64 => $long }), 400, 'Bad request.',
               'base64 has an invalid character at position '
               . length($long) . '.',
               'too large and invalid: 400, the character named');
is_deeply(stored($doc), $before, 'refused documents changed nothing');

### fileName

for my $case ([ 'a', 'one character' ], [ 'é' x 255, '255 characters' ],
              [ 'a.b.c', 'inner dots' ], [ 'name.', 'a trailing dot' ],
              [ 'Scan 2024 (1).pdf', 'spaces and parentheses' ])
{
    my ($name, $what) = @$case;
    $r = put({ ids(), fileName => $name });
    is($r->{status}, 200, "fileName, $what: 200") or diag($r->{content});
    is($r->{json}{data}{fileName}, $name, "fileName, $what: stored");
    is(stored($doc)->{fileName}, $name, "fileName, $what: in the row");
}

my $bad_char = "fileName must not contain '/', '\\', control characters or "
               . 'bidirectional formatting characters.';

my @names = (
    [ '', 'fileName must be at least 1 character long.',
      'fileName doit compter au moins 1 caractère.' ],
    [ 'a' x 256, 'fileName must be at most 255 characters long.',
      'fileName doit compter au plus 255 caractères.' ],
    [ 'é' x 256, 'fileName must be at most 255 characters long.' ],
    [ 'a/b', $bad_char,
      "fileName ne doit contenir ni '/', ni '\\', ni caractère de contrôle, "
      . 'ni caractère de mise en forme bidirectionnelle.' ],
    [ '../etc', 'fileName must not begin with a dot.',
      'fileName ne doit pas commencer par un point.' ],
    [ '.hidden', 'fileName must not begin with a dot.' ],
    [ '.', 'fileName must not begin with a dot.' ],
    [ 'a\\b', $bad_char ],
    [ 'dir/', $bad_char ],
    [ "scan\n.pdf", $bad_char ],
    [ "scan\t.pdf", $bad_char ],
    [ "scan\r", $bad_char ],
    [ "a\x7fb", $bad_char ],
    [ "a\x{85}b", $bad_char ],
    [ "invoice\x{202E}fdp.exe", $bad_char ],
    [ "invoice\x{202D}x", $bad_char ],
    [ "a\x{2066}b\x{2069}", $bad_char ],
    [ "a\x{200F}b", $bad_char ],
    [ "a\x{61C}b", $bad_char ],
);

for my $case (@names) {
    my ($name, $en, $fr) = @$case;
    my $short = length $name > 12 ? substr($name, 0, 8) . '...' : $name;
    $short =~ s/([^\x20-\x7e\x{a0}-\x{ff}])/sprintf('\\x{%X}', ord $1)/ge;
    envelope_error(put({ ids(), fileName => $name }), 400, 'Bad request.',
                   $en, "fileName \"$short\"");
    next unless $fr;
    envelope_error(put({ ids(), fileName => $name }, fr => 1), 400,
                   'Requête invalide.', $fr, "fileName \"$short\", French");
}

# a NUL cannot even reach the module: Jansson refuses \u0000
$r = put(qq({"documentId":"$doc","personId":"$p1","fileName":"a\\u0000b"}));
is($r->{status}, 400, 'fileName with NUL: 400');
is($r->{json}{message}, 'The request body is not valid JSON.',
   'fileName with NUL: not valid JSON');
like($r->{json}{errors}[0], qr/\\u0000 is not allowed/,
     'fileName with NUL: says so');

### field types and required fields

my @fields = (
    [ { personId => $p1 }, 'documentId is required.',
      'documentId est requis.' ],
    [ { documentId => $doc }, 'personId is required.' ],
    [ { ids(), documentId => 'x' }, 'documentId must be a uuid.',
      'documentId doit être un uuid.' ],
    [ { ids(), documentId => 7 }, 'documentId must be a uuid.' ],
    [ { ids(), personId => "$p1 " }, 'personId must be a uuid.' ],
    [ { ids(), documentId => undef }, 'documentId is required.' ],
    [ { ids(), type => '1' }, 'type must be an integer.',
      'type doit être un entier.' ],
    [ { ids(), type => 1.5 }, 'type must be an integer.' ],
    [ { ids(), type => 0 }, 'type must be at least 1.',
      'type doit valoir au moins 1.' ],
    [ { ids(), type => 6 }, 'type must be at most 5.' ],
    [ { ids(), type => undef }, 'type must not be null.',
      'type ne doit pas être null.' ],
    [ { ids(), base64 => 12 }, 'base64 must be a string.',
      'base64 doit être une chaîne de caractères.' ],
    [ { ids(), base64 => [ 'QQ==' ] }, 'base64 must be a string.' ],
    [ { ids(), base64 => undef }, 'base64 must not be null.' ],
    [ { ids(), fileName => JSON::PP::true }, 'fileName must be a string.' ],
    [ { ids(), fileName => undef }, 'fileName must not be null.' ],
);

for my $case (@fields) {
    my ($body, $en, $fr) = @$case;
    envelope_error(put($body), 400, 'Bad request.', $en, $en);
    next unless $fr;
    envelope_error(put($body, fr => 1), 400, 'Requête invalide.', $fr, $fr);
}

### body errors

$r = put({ ids() }, headers => { 'Content-Type' => 'application/xml' });
envelope_error($r, 415, 'Unsupported media type.',
               'Send the body as application/json.', 'XML body');
envelope_error(put({ ids() }, fr => 1,
                   headers => { 'Content-Type' => 'image/png' }),
               415, 'Type de contenu non pris en charge.',
               'Envoyez le corps au format application/json.',
               'PNG body, French');

for my $type ('text/json', 'text/plain; charset=utf-8') {
    is(put({ ids() }, headers => { 'Content-Type' => $type })->{status},
       200, "Content-Type $type: parsed as JSON");
}

$r = put(qq({\n  "documentId": "$doc",\n  "personId": }));
envelope_error($r, 400, 'The request body is not valid JSON.',
               $r->{json}{errors}[0], 'malformed JSON');
like($r->{json}{errors}[0], qr/^Malformed JSON at line 3, column \d+: /,
     'malformed JSON: line and column');
$r = put('{"documentId": "x",}', fr => 1);
is($r->{json}{message}, "Le corps de la requête n'est pas un JSON valide.",
   'malformed JSON, French');
$r = put('');
is($r->{status}, 400, 'empty body: 400');
like($r->{json}{errors}[0], qr/^Malformed JSON at line 1, column 0: /,
     'empty body: malformed JSON');
envelope_error(put('[]'), 400, 'The request body must be a JSON object.',
               'Expected a JSON object.', 'an array body');
$r = put(qq({"documentId":"$doc","documentId":"$doc","personId":"$p1"}));
is($r->{status}, 400, 'a field given twice: 400');
like($r->{json}{errors}[0], qr/duplicate object key/,
     'a field given twice: says so');

### 404: unknown, foreign, another person's

my @missing = (
    [ { ids($unknown) }, 'unknown documentId' ],
    [ { ids($foreign, $pb) }, "another tenant's document" ],
    [ { ids($foreign, $pb), base64 => 'QQ==', type => 1 },
      "another tenant's document, with content" ],
    [ { ids($doc, $p2) }, "a personId that is not the document's" ],
    [ { ids($doc2, $p1), fileName => 'x.pdf' },
      "the document of another person of the tenant" ],
);

for my $case (@missing) {
    my ($body, $name) = @$case;
    envelope_error(put($body), 404, 'Person document not found.',
                   'No document with this documentId belongs to this '
                   . 'personId.', $name);
}

envelope_error(put({ ids($foreign, $pb) }, fr => 1), 404,
               'Document de personne introuvable.',
               "Aucun document portant ce documentId n'appartient à ce "
               . 'personId.', "another tenant's document, French");

is_deeply(stored($foreign), {
    type => 3, fileName => 'licence.pdf', approved => 't', content => "\x09",
    sha256 => sha256_hex("\x09"), size => 1, digest => sha256_hex("\x09"),
}, "another tenant's document is unchanged");
is(stored($doc2)->{fileName}, 'passport.pdf',
   "another person's document is unchanged");

$r = put({ ids($foreign, $pb), fileName => 'mine.pdf' }, tenant => 'tenant-b');
is($r->{status}, 200, 'its own tenant updates it');
is($r->{json}{data}{fileName}, 'mine.pdf', "with tenant-b's token");

### authentication, methods, versions

$r = put({ ids() }, anonymous => 1);
envelope_error($r, 401, 'Authentication required.',
               'A bearer token is required.', 'no token');
is($r->{headers}{'www-authenticate'}, 'Bearer', 'no token: challenge');

$r = put({ ids() }, headers => { tenantId => 'tenant-b' });
envelope_error($r, 403, 'Access denied.',
               'The tenantId header does not match the credentials.',
               'tenantId header of another tenant');

$r = put({ ids() }, method => 'POST');
envelope_error($r, 405, 'Method not allowed.', 'This endpoint accepts PUT.',
               'POST');
is($r->{headers}{allow}, 'PUT', 'POST: Allow PUT');

$r = put({ ids() }, version => '2');
envelope_error($r, 404, 'API version not supported.',
               'Supported versions: 1, 1.0.', 'version 2');
is(put({ ids() }, version => '1.0')->{status}, 200, 'version 1.0');

### DELETE

$r = del($gone[0]);
is($r->{status}, 200, 'delete: 200') or diag($r->{content});
is_deeply($r->{json}, {
    succeeded => JSON::PP::true, message => 'Person document deleted.',
    errors => [], data => $gone[0],
}, 'delete: data is the deleted id');
is(Platform::Test::json_type($r->{json}{data}), 'string',
   'delete: data a JSON string');
is(Platform::Test::loose_json($r->{content}), '', 'delete: compact JSON');
is($t->psql("SELECT count(*) FROM person_documents WHERE id = '$gone[0]'"),
   0, 'delete: the row is gone');

envelope_error(del($gone[0]), 404, 'Person document not found.',
               'No person document with this id exists.',
               'delete: a second time');
envelope_error(del($gone[0], fr => 1), 404,
               'Document de personne introuvable.',
               'Aucun document de personne ne porte cet identifiant.',
               'delete: a second time, French');

$r = del($gone[1], fr => 1);
is($r->{json}{message}, 'Document de personne supprimé.', 'delete: French');
is($r->{json}{data}, $gone[1], 'delete: French, the id');

envelope_error(del($unknown), 404, 'Person document not found.',
               'No person document with this id exists.',
               'delete: unknown id');
envelope_error(del($foreign), 404, 'Person document not found.',
               'No person document with this id exists.',
               "delete: another tenant's document");
is($t->psql("SELECT count(*) FROM person_documents WHERE id = '$foreign'"),
   1, "delete: another tenant's document is still there");

envelope_error(del('not-a-uuid'), 400, 'Invalid person document id.',
               'The id must be a uuid.', 'delete: not a uuid');
envelope_error(del("$gone[2]x", fr => 1), 400,
               'Identifiant de document de personne invalide.',
               "L'identifiant doit être un uuid.",
               'delete: not a uuid, French');

$r = del($gone[2], method => 'GET');
is($r->{status}, 405, 'delete path: GET is 405');
is($r->{headers}{allow}, 'DELETE', 'delete path: Allow DELETE');
$r = $t->request('DELETE', "/api/v1/PersonDocuments/$gone[2]/delete");
is($r->{status}, 401, 'delete: no token');
is($t->psql("SELECT count(*) FROM person_documents WHERE id = '$gone[2]'"),
   1, 'delete: refused deletes leave the row');

### the demo data

$t->psql(Platform::Test::demo_data(qr/.+/s));
is($t->psql(q{SELECT string_agg(id || ' ' || tenant_id || ' ' || person_id,
                                ',' ORDER BY id)
              FROM person_documents
              WHERE tenant_id IN ('tenant-demo', 'tenant-other')}),
   join(',', map { "$_->[0] $_->[1] $_->[2]" }
        [ '71000000-0000-4000-8000-000000000001', 'tenant-demo',
          'c1000000-0000-4000-8000-000000000001' ],
        [ '71000000-0000-4000-8000-000000000002', 'tenant-demo',
          'c1000000-0000-4000-8000-000000000001' ],
        [ '71000000-0000-4000-8000-000000000003', 'tenant-demo',
          'c1000000-0000-4000-8000-000000000002' ],
        [ '72000000-0000-4000-8000-000000000001', 'tenant-other',
          'c2000000-0000-4000-8000-000000000001' ]),
   'demo documents of both tenants, as the header lists them');
is($t->psql(q{SELECT count(*) FROM person_documents
              WHERE tenant_id IN ('tenant-demo', 'tenant-other')
                AND (content_sha256 <> sha256(content)
                     OR content_size <> octet_length(content)
                     OR content_size = 0)}),
   0, 'demo documents: digests and sizes of their contents');

$t->done;
done_testing;
