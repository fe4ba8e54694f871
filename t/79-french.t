#!/usr/bin/perl

# French wherever Envelope A speaks: every error path of every Envelope A
# operation, asked with Accept-Language: fr, answers its summary and its
# details in French. The operations, their credentials, parameters and
# body fields are read from the served OpenAPI document, so that a new
# operation or field is walked without a change here: 405, 401 (no
# credential, a malformed, expired or foreign token), 400 (each path,
# header and query parameter malformed or missing; a body malformed,
# scalar, an array, empty; each field of the wrong type, too long, too
# short, out of its values, of the wrong format, null, missing), 404, 415,
# 413, 429 (a limit on a second server) and 503 (an nginx whose
# PostgreSQL is down). Each answer is compared with the same request's
# English answer: a text that is the same in both, or that holds English
# words, fails; the French answer says Content-Language: fr. Each
# family's own refusals are walked too (a document's base64 and file
# name, IBANs and BICs, a group member, a locked account, the RC number
# rules, the bureau's budget), and every answer the document shows for
# an Envelope A operation must have been met. Then Accept-Language is
# read as RFC 9110 says, q-values and several header lines included; and
# every message in the core's sources has a French text.

use strict;
use warnings;
use utf8;

use lib 't/lib';
use Test::More;
use JSON::PP;
use Encode qw(decode_utf8);
use IO::Socket::INET;
use Platform::Test;
use Platform::JWT;

my $top = $ENV{PLATFORM_TEST_TOP} // '.';

my $t = Platform::Test->new(workers => 1);
my $k = Platform::JWT::keys($t->testdir . '/keys');

$t->psql(Platform::Test::demo_data(qr/.+/s));

my $apikey = 'plk_00000000000079aa.' . ('k' x 43);
$t->psql("INSERT INTO api_keys (id, tenant_id, scope, key_digest)"
         . " VALUES ('00000000000079aa', 'tenant-demo', 'trades',"
         . " sha256(convert_to('$apikey', 'UTF8')))");

my $keys = $t->testdir . '/keys';
my $server = sub {
    my ($port, $extra) = @_;
    return <<"EOF";
    server {
        listen 127.0.0.1:$port;

        platform_jwt_key HS256 $keys/hs256.key;
        platform_apikey_cache_time 0;
        platform_identity_bureau /_bureau;
        platform_identity_cache_time 0;
        platform_document_max_size 16;
        client_max_body_size 64k;
        large_client_header_buffers 4 16k;
        $extra

        include $top/conf/platform.conf;

        location = /_bureau {
            internal;
            proxy_pass http://127.0.0.1:%%PORT_3%%/bureau;
            proxy_read_timeout 1s;
        }
    }
EOF
};

# the second server: one request per tenant a minute, for the 429s; the
# fourth: one bureau call per tenant a minute. The bureau's RC504 waits
# on a socket that never answers.
$t->run($server->('%%PORT%%', '')
        . $server->('%%PORT_2%%', 'platform_rate_limit tenant 1r/m burst=1;')
        . $server->('%%PORT_4%%', 'platform_identity_bureau_rate 1r/m;')
        . <<'EOF');
    server {
        listen 127.0.0.1:%%PORT_3%%;
        default_type application/json;

        location = /bureau {
            if ($arg_rc_number = RC404) { return 404 '{}'; }
            if ($arg_rc_number = RC502) { return 500 '{}'; }
            if ($arg_rc_number = RC504) { rewrite ^ /hang last; }
            return 200 '{"companyName":"Demo Foods Limited","address":"14 Adeola Odeku Street, Victoria Island, Lagos"}';
        }

        location = /hang { proxy_pass http://127.0.0.1:%%PORT_5%%; }
    }
EOF

my $hang = IO::Socket::INET->new(LocalAddr => '127.0.0.1',
                                 LocalPort => $t->port(5), Listen => 16,
                                 ReuseAddr => 1) or die "listen: $!";

my $doc = $t->request('GET', '/openapi.json')->{json}
    or BAIL_OUT('no OpenAPI document');

sub resolve {
    my ($node) = @_;
    while (ref $node eq 'HASH' && $node->{'$ref'}) {
        my @parts = split m{/}, substr($node->{'$ref'}, 2);
        $node = $doc;
        $node = $node->{$_} for @parts;
    }
    return $node;
}

my $token = Platform::JWT::hs256($k, tenantId => 'tenant-demo',
    sub => 'user-demo-1',
    merchantId => '91000000-0000-4000-8000-000000000001');

### the operations, with a request built from their examples

my @methods = qw(get post put patch delete);
my @ops;

for my $path (sort keys %{ $doc->{paths} }) {
    my $item = $doc->{paths}{$path};
    for my $m (@methods) {
        my $op = $item->{$m} or next;
        my @params = map { resolve($_) } @{ $op->{parameters} // [] };
        my (%path, %query, %headers);
        for my $p (@params) {
            my $ex = $p->{example} // $p->{schema}{example};
            $path{ $p->{name} } = $ex if $p->{in} eq 'path';
            $query{ $p->{name} } = $ex if $p->{in} eq 'query' && defined $ex;
            $headers{ $p->{name} } = $ex
                if $p->{in} eq 'header' && $p->{required} && defined $ex;
        }
        my %cred;
        for my $req (@{ $op->{security} // [] }) {
            $cred{Authorization} = "Bearer $token" if exists $req->{bearerAuth};
            $cred{apiKey} = $apikey if exists $req->{apiKey};
        }
        my $body = $op->{requestBody}{content}{'application/json'};
        push @ops, {
            name => uc($m) . " $path", method => uc $m, path => $path,
            item => $item, params => \@params, pathv => \%path,
            query => \%query, headers => \%headers, cred => \%cred,
            body => $body ? $body->{example} : undef,
            schema => $body ? resolve($body->{schema}) : undef,
        };
    }
}

sub url {
    my ($op, %over) = @_;
    my %p = (%{ $op->{pathv} }, %{ $over{path} // {} });
    (my $url = $op->{path}) =~ s/\{([^}]+)\}/$p{$1} \/\/ 'none'/ge;
    my %q = (%{ $op->{query} }, %{ $over{query} // {} });
    delete @q{ grep { !defined $q{$_} } keys %q };
    $url .= '?' . join('&', map { "$_=$q{$_}" } sort keys %q) if %q;
    return $url;
}

# a request of the operation, with some of its parts replaced
sub send_op {
    my ($op, $lang, %over) = @_;
    my %h = (%{ $op->{headers} }, %{ $op->{cred} },
             %{ $over{headers} // {} });
    delete @h{ grep { !defined $h{$_} } keys %h };
    $h{'Accept-Language'} = $lang if $lang;
    my %opts = (headers => \%h, port => $over{port});
    delete $opts{port} unless $over{port};
    if (exists $over{raw}) {
        $opts{body} = $over{raw};
        $h{'Content-Type'} //= 'application/json' if defined $over{raw};
    } elsif (exists $over{json} ? defined $over{json} : defined $op->{body}) {
        $opts{json} = exists $over{json} ? $over{json} : $op->{body};
    }
    return $t->request($over{method} // $op->{method}, url($op, %over),
                       %opts);
}

# the operations that answer in Envelope A: their error answers carry
# "succeeded", as their successes do
# (asked with a method the path does not serve, which every family
# answers in its envelope and which changes nothing: the suite's files
# share a Redis, and the OTP example's code is another file's to use)
my @a = grep {
    my $op = $_;
    my ($m) = grep { !$op->{item}{lc $_} } qw(DELETE PATCH PUT POST GET);
    my $r = send_op($op, undef, method => $m);
    (ref $r->{json} eq 'HASH' && exists $r->{json}{succeeded}) ? 1 : 0
} @ops;

my %fams = map { ((split m{/}, $_->{path})[1] => 1) } @a;
ok(@a >= 9, scalar(@a) . ' Envelope A operations, under /'
             . join(', /', sort keys %fams));

### the walk

# English words that no French text holds; a field's name may be there
my $english = qr/\b(?:the|must|is|are|not|no|found|required|expected|
                    accepts?|invalid|malformed|endpoint|line|column|
                    request|body|too|large|many|retry|shortly|
                    unavailable|allowed|denied|token|key|header|at\ least|
                    at\ most|characters?|one\ of|should|has|have|does|
                    this|that|with|without|only|already|cannot|could)\b/xi;

my ($walked, %statuses, %met, @bad) = (0);

sub texts {
    my ($json) = @_;
    return () unless ref $json eq 'HASH';
    my @t = ($json->{message} // ());
    for my $e (@{ $json->{errors} // [] }) {
        push @t, ref $e eq 'HASH' ? grep { defined } values %$e : $e;
    }
    return @t;
}

sub walk {
    my ($op, $what, %over) = @_;
    my $fr = send_op($op, 'fr', %over);
    return if $fr->{status} < 400;
    my $en = send_op($op, undef, %over);
    $walked++;
    $statuses{ $fr->{status} }++;
    my $name = "$op->{name}: $what ($fr->{status})";

    unless ($fr->{json} && exists $fr->{json}{succeeded}) {
        push @bad, "$name: not Envelope A: " . substr($fr->{content}, 0, 120);
        return;
    }

    push @bad, "$name: $en->{status} in English"
        if $en->{status} != $fr->{status};
    push @bad, "$name: Content-Language "
               . ($fr->{headers}{'content-language'} // 'none')
        if ($fr->{headers}{'content-language'} // '') ne 'fr';

    my @f = texts($fr->{json});
    my @e = texts($en->{json});
    $met{ $op->{name} }{$_} = 1 for @e;
    push @bad, "$name: no text" unless @f;
    for my $i (0 .. $#f) {
        my $text = $f[$i];
        if (defined $e[$i] && $text eq $e[$i] && $text =~ /[a-z]{3}/i) {
            push @bad, "$name: the same in English: $text";
        } elsif ($text =~ s/\bRetry-After\b//gr =~ $english) {
            push @bad, "$name: English ('$&'): $text";
        }
    }
}

# an invalid value of each kind a schema may declare
sub invalid_values {
    my ($s) = @_;
    $s = resolve($s);
    my @types = ref $s->{type} ? @{ $s->{type} } : ($s->{type} // ());
    my $nullable = grep { $_ eq 'null' } @types;
    my ($type) = grep { $_ ne 'null' } @types;
    my @v;
    push @v, [ 'null', undef ] unless $nullable;
    $type //= '';
    push @v, [ 'a number', 12345 ] if $type =~ /^(?:string|boolean|array|object)$/;
    push @v, [ 'a string', 'abc' ] if $type =~ /^(?:integer|number|boolean|array|object)$/;
    push @v, [ 'a fraction', 1.5 ] if $type eq 'integer';
    push @v, [ 'an object', {} ] if $type eq 'array';
    push @v, [ 'too long', 'x' x ($s->{maxLength} + 1) ]
        if defined $s->{maxLength};
    push @v, [ 'too short', '' ] if ($s->{minLength} // 0) >= 1;
    push @v, [ 'not one of its values', 'NOT-A-VALUE' ] if $s->{enum};
    push @v, [ 'not its format', 'not-a-' . $s->{format} ] if $s->{format};
    push @v, [ 'not its pattern', '?!' ] if $s->{pattern};
    push @v, [ 'below its minimum', $s->{minimum} - 1 ]
        if defined $s->{minimum};
    push @v, [ 'above its maximum', $s->{maximum} + 1 ]
        if defined $s->{maximum};
    if ($type eq 'array' && $s->{items}) {
        push @v, map { [ "an element $_->[0]", [ $_->[1] ] ] }
                 invalid_values($s->{items});
    }
    return @v;
}

my $other = Platform::JWT::hs256($k, tenantId => 'tenant-other',
                                 sub => 'user-other');
my $expired = Platform::JWT::hs256($k, tenantId => 'tenant-demo',
                                   exp => time - 3600);

for my $op (@a) {
    # a method the path does not serve
    my ($m) = grep { !$op->{item}{lc $_} } qw(DELETE PATCH PUT POST);
    walk($op, "method $m", method => $m) if $m;

    if (%{ $op->{cred} }) {
        walk($op, 'no credential',
             headers => { Authorization => undef, apiKey => undef });
        walk($op, 'a malformed token',
             headers => { Authorization => 'Bearer abc.def' })
            if $op->{cred}{Authorization};
        walk($op, 'an expired token',
             headers => { Authorization => "Bearer $expired" })
            if $op->{cred}{Authorization};
        walk($op, 'a malformed API key', headers => { apiKey => 'plk_x' })
            if $op->{cred}{apiKey};
    }

    for my $p (@{ $op->{params} }) {
        my $n = $p->{name};
        if ($p->{in} eq 'path') {
            walk($op, "path $n malformed", path => { $n => 'nope' });
            walk($op, "path $n unknown",
                 path => { $n => $n =~ /version/i ? '9'
                                : '00000000-0000-4000-8000-000000000079' });
            walk($op, "path $n of another tenant",
                 headers => { Authorization => "Bearer $other",
                              tenantId => 'tenant-other' });
        } elsif ($p->{in} eq 'header' && $n ne 'Accept-Language') {
            walk($op, "header $n missing", headers => { $n => undef })
                if $p->{required};
            walk($op, "header $n malformed", headers => { $n => ' ' x 3 . '{' });
        } elsif ($p->{in} eq 'query') {
            walk($op, "query $n $_->[0]", query => { $n => $_->[1] // '' })
                for grep { !ref $_->[1] } invalid_values($p->{schema});
        }
    }

    next unless $op->{schema};

    walk($op, 'malformed JSON', raw => '{"a": ');
    walk($op, 'malformed JSON, late', raw => qq({"a": "b"\n  "c"}));
    walk($op, 'a NUL escape', raw => '{"a": "\u0000"}');
    walk($op, 'a duplicate member', raw => '{"a": 1, "a": 2}');
    walk($op, 'no body', raw => '');
    walk($op, 'a number', raw => '42');
    walk($op, 'a string', raw => '"x"');
    walk($op, 'null', raw => 'null');
    walk($op, 'an array', raw => '[]');
    walk($op, 'too deep', raw => '[' x 70 . ']' x 70);
    walk($op, 'too large', raw => '{"a":"' . 'x' x 70000 . '"}');
    walk($op, 'application/xml', raw => '{}',
         headers => { 'Content-Type' => 'application/xml' });

    my $props = $op->{schema}{properties} // {};
    my $example = ref $op->{body} eq 'HASH' ? $op->{body} : {};
    for my $f (sort keys %$props) {
        for my $v (invalid_values($props->{$f})) {
            walk($op, "field $f $v->[0]", json => { %$example, $f => $v->[1] });
        }
    }
    for my $f (@{ $op->{schema}{required} // [] }) {
        my %body = %$example;
        delete $body{$f};
        walk($op, "field $f missing", json => \%body);
    }

    # the bureau's answers (its stand-in knows these RC numbers)
    if (exists $props->{rc_number}) {
        walk($op, "bureau $_", json => { %$example, rc_number => "RC$_" })
            for qw(404 502 504);
    }
}

### more of each operation: each way a token is refused, each of
### Jansson's reasons, scalars, the member limit, ids not found

my $secret = Platform::JWT::secret($k->{hs256});
my %claims = (tenantId => 'tenant-demo', sub => 'user-demo-1',
              merchantId => '91000000-0000-4000-8000-000000000001',
              exp => time + 600);

sub token {
    my (%c) = (%claims, @_);
    delete @c{ grep { !defined $c{$_} } keys %c };
    return 'Bearer ' . Platform::JWT::sign(alg => 'HS256', key => $secret,
                                           claims => \%c);
}

my %refused = (
    'Basic credentials' => 'Basic dXNlcjpwYXNz',
    'alg none' => 'Bearer ' . Platform::JWT::sign(alg => 'none',
                                                  claims => \%claims),
    'another key' => 'Bearer ' . Platform::JWT::sign(alg => 'HS256',
        key => Platform::JWT::secret($k->{hs256_other}), claims => \%claims),
    'no expiry' => token(exp => undef),
    'not valid yet' => token(nbf => time + 3600),
    'no tenant' => token(tenantId => undef),
    'a token too large' => token(pad => 'x' x 9000),
);

my @jansson = (
    [ '{"a" 1}', "':' expected" ], [ '{"a":1 "b":2}', "'}' expected" ],
    [ '{"a":[1 2]}', "']' expected" ], [ '{1:2}', "string or '}' expected" ],
    [ '{"a":tru}', 'an invalid token' ], [ '{"a":1}}', 'more after the end' ],
    [ qq({"a":"x\ny"}), 'a newline in a string' ],
    [ qq({"a":"x\x01y"}), 'a control character' ],
    [ '{"a":"\\q"}', 'an invalid escape' ],
    [ '{"a":"\\uZZZZ"}', 'an invalid \\u escape' ],
    [ '{"a":"\\uD800"}', 'a lone surrogate' ],
    [ '{"a":"\\uD800\\u0041"}', 'a bad second surrogate' ],
    [ '{"a\\u0000":1}', 'a NUL in a member name' ],
    [ '{"a":123456789012345678901234567890}', 'a too big integer' ],
    [ '{"a":-123456789012345678901234567890}', 'a too big negative integer' ],
    [ '{"a":1e999}', 'a real overflow' ],
    [ "{\"a\":\"\xff\"}", 'not UTF-8' ],
    [ '   ', 'white space' ], [ 'nul', 'a word' ],
    [ 'true', 'true' ], [ '-1.5', 'a negative number' ],
    [ '{"a":[' . join(',', (1) x 10001) . ']}', '10001 members' ],
);

my $unknown = '00000000-0000-4000-8000-0000000000ff';

for my $op (@a) {
    if ($op->{cred}{Authorization}) {
        walk($op, "token: $_", headers => { Authorization => $refused{$_} })
            for sort keys %refused;
        walk($op, 'a tenantId header not the token\'s',
             headers => { Authorization => token(),
                          tenantId => 'tenant-other' });
        walk($op, 'a token without merchantId',
             headers => { Authorization => token(merchantId => undef) });
    }

    next unless $op->{schema};

    walk($op, "a body with $_->[1]", raw => $_->[0]) for @jansson;

    # each uuid field an id that names nothing
    my $props = $op->{schema}{properties} // {};
    my $example = ref $op->{body} eq 'HASH' ? $op->{body} : {};
    for my $f (sort grep { (resolve($props->{$_})->{format} // '') eq 'uuid' }
               keys %$props)
    {
        walk($op, "field $f unknown", json => { %$example, $f => $unknown });
    }

    # the fields of an array's first item
    for my $f (sort grep { ref $example->{$_} eq 'ARRAY'
                           && ref $example->{$_}[0] eq 'HASH' } keys %$props)
    {
        my $items = resolve(resolve($props->{$f})->{items} // {});
        my $item = $example->{$f}[0];
        for my $g (sort keys %{ $items->{properties} // {} }) {
            for my $v (invalid_values($items->{properties}{$g}),
                       [ 'unknown', $unknown ])
            {
                walk($op, "field $f\[0].$g $v->[0]",
                     json => { %$example, $f => [ { %$item, $g => $v->[1] } ] });
            }
        }
        walk($op, "field $f with its first item twice",
             json => { %$example, $f => [ $item, { %$item } ] });
    }
}

# a Content-Length over client_max_body_size: 413 before the body is read
for my $op (grep { $_->{schema} } @a) {
    my %h = (%{ $op->{headers} }, %{ $op->{cred} });
    my @r;
    for my $lang (undef, 'fr') {
        my $head = join '', map { "$_: $h{$_}\r\n" } sort keys %h;
        $head .= "Accept-Language: $lang\r\n" if $lang;
        push @r, $t->parse_response($t->raw_request(
            "$op->{method} " . url($op) . " HTTP/1.1\r\nHost: localhost\r\n"
            . "Connection: close\r\n$head"
            . "Content-Type: application/json\r\n"
            . "Content-Length: 100000000\r\n\r\n",
            # nginx waits for the body it will not read before closing
            timeout => 0.5));
    }
    my ($en, $fr) = @r;
    $walked++;
    $statuses{ $fr->{status} }++;
    $met{ $op->{name} }{$_} = 1 for texts($en->{json});
    is($fr->{status}, 413, "$op->{name}: a body over client_max_body_size");
    my @f = texts($fr->{json});
    my @e = texts($en->{json});
    ok(@f && !grep({ $f[$_] eq ($e[$_] // '') } 0 .. $#f),
       "$op->{name}: 413 in French") or diag($fr->{content});
}

### what each family refuses of its own

sub op_named {
    my ($method, $re) = @_;
    my ($op) = grep { $_->{method} eq $method && $_->{path} =~ $re } @a;
    ok($op, "$method $re: an Envelope A operation");
    return $op;
}

my $docs = op_named('PUT', qr{/PersonDocuments/update$});
for my $case ([ { fileName => 'a/b.txt' }, 'a slash' ],
              [ { fileName => "a\x{202e}b" }, 'a bidirectional override' ],
              [ { fileName => '.hidden' }, 'a dot first' ],
              [ { base64 => '' }, 'base64 empty' ],
              [ { base64 => 'QU$D' }, 'base64 with a bad character' ],
              [ { base64 => 'QUJ' }, 'base64 of a bad length' ],
              [ { base64 => 'Q=JD' }, "base64 with '=' inside" ],
              [ { base64 => 'QR==' }, 'base64 with bits left over' ],
              [ { base64 => 'eHh4eHh4eHh4eHh4eHh4eHh4' },
                'a document over platform_document_max_size' ])
{
    walk($docs, "document: $case->[1]", raw => JSON::PP->new->utf8
         ->encode({ %{ $docs->{body} }, %{ $case->[0] } })) if $docs;
}

my $accounts = op_named('PUT', qr{/Counterparties/accounts$});
my $account = '82000000-0000-4000-8000-000000000001';
for my $case ([ { iban => 'de89370400440532013000' }, 'an IBAN in lower case' ],
              [ { iban => 'US89370400440532013000' }, 'a country without IBANs' ],
              [ { iban => 'DE8937040044053201300' }, 'an IBAN of a wrong length' ],
              [ { iban => 'DE00370400440532013000' }, 'an IBAN failing its check' ],
              [ { swiftCode => '12345678' }, 'a BIC with digits first' ])
{
    walk($accounts, "account: $case->[1]",
         json => { id => $account, %{ $case->[0] } }) if $accounts;
}

# a row another transaction holds: the lock timeout, 503
if ($accounts) {
    my $lock = $t->hold_rows('counterparty_accounts', [ $account ],
                             seconds => 2);
    walk($accounts, 'the account locked meanwhile',
         json => { id => $account, bankName => 'Locked' });
    $lock->wait;
}

my $groups = op_named('POST', qr{/Counterparties/groups$});
walk($groups, 'a member not of the merchant',
     json => { name => 'Other', members => [ { counterpartyId => $unknown } ] })
    if $groups;

my $identity = op_named('POST', qr{/Identity/});
for my $case ([ {}, 'neither rc_number nor companyNumber' ],
              [ { rc_number => 'RC1', companyNumber => 'RC2' }, 'both, differing' ],
              [ { rc_number => 'RC#1' }, 'rc_number with a #' ],
              [ { companyNumber => 'RC 1;' }, 'companyNumber with a ;' ],
              [ { rc_number => 'RC1', customer_name => "a\x01b" },
                'customer_name with a control character' ])
{
    walk($identity, "identity: $case->[1]", json => $case->[0]) if $identity;
}

# the tenant's budget of bureau calls: one call spends it
if ($identity) {
    send_op($identity, undef, port => $t->port(4));
    walk($identity, 'the budget of bureau calls spent', port => $t->port(4),
         json => { rc_number => 'RC404' });
}

# each example twice: what the second one meets (a conflict, a resource
# already gone)
for my $op (@a) {
    walk($op, 'its example') for 1 .. 2;
}

# a second request of a tenant on the limited server
for my $op (@a) {
    send_op($op, 'fr', port => $t->port(2)) for 1 .. 2;
    walk($op, 'a rate limit', port => $t->port(2));
}

# PostgreSQL down: an nginx of its own whose platform_pg has no server
my $down = Platform::Test->new(workers => 1);
$down->run('platform_pg "host=127.0.0.1 port=' . Platform::Test::closed_port()
           . ' dbname=platform user=platform connect_timeout=2";'
           . $server->('%%PORT%%', '')
           . "server { listen 127.0.0.1:%%PORT_3%%; }");
walk($_, 'PostgreSQL down', port => $down->port) for @a;

ok($walked >= 200, "$walked error answers walked in French");
for my $status (400, 401, 404, 405, 409, 413, 415, 429, 502, 503) {
    ok($statuses{$status}, "among them $status ("
       . ($statuses{$status} // 0) . ')');
}
is(scalar @bad, 0, 'every one in French, summary and details')
    or diag(join "\n", @bad[0 .. ($#bad < 40 ? $#bad : 39)]);

### every error the document shows for these operations was met

# but for what the server's state answers (a 500; a 503 or 429 other
# than PostgreSQL down, a rate limit and the bureau's budget; a body the
# worker cannot hold: the core's texts, read in the sources below) and the group's reference outcome,
# which only a counterparty deleted while its group is inserted raises
my %not_met = map { $_ => 1 } (
    'A member is not a counterparty of the merchant.',
);
my %state = (
    413 => qr/^The body is larger than the server/,
    500 => qr/./,
    503 => qr/^(?!A backend is unavailable)/,
    429 => qr/^(?!The rate limit is reached|The tenant's budget)/,
);

for my $op (@a) {
    my $responses = $op->{item}{ lc $op->{method} }{responses} // {};
    for my $status (sort grep { $_ >= 400 } keys %$responses) {
        my $c = resolve($responses->{$status})->{content}
                {'application/json'} // {};
        my @examples = map { resolve($_)->{value} }
                       values %{ $c->{examples} // {} };
        push @examples, $c->{example} if $c->{example};
        for my $ex (grep { ref $_ eq 'HASH' } @examples) {
            next if grep { $not_met{$_} } texts($ex);
            next if $state{$status}
                    && grep { $_ =~ $state{$status} } @{ $ex->{errors} // [] };
            for my $text (grep { !/<|%s/ } texts($ex)) {
                ok($met{ $op->{name} }{$text},
                   "$op->{name}: \"$text\" ($status) met in the walk");
            }
        }
    }
}

### Accept-Language as RFC 9110 reads it

my ($dop) = grep { $_->{method} eq 'GET' && $_->{cred}{Authorization} } @a;
my %cases = (
    'fr'                      => 'fr',
    'FR-ca'                   => 'fr',
    'fr_FR'                   => 'en',
    'fr;q=0, en'              => 'en',
    'fr;q=0'                  => 'en',
    'en-GB;q=0.5, fr;q=0.9'   => 'fr',
    'en;q=0.8, fr;q=0.8'      => 'en',
    'fr;q=0.8, en;q=0.8'      => 'fr',
    'de, fr;q=0.5'            => 'fr',
    'de, en;q=0.1, fr;q=0.5'  => 'fr',
    '*'                       => 'en',
    '*;q=0.5, en;q=0.1'       => 'fr',
    'en, *;q=0.9'             => 'en',
    'fr;q=1.000, en'          => 'fr',
    'fr;q=1.5, en;q=0.5'      => 'en',
    'fr;q=0.5x, en;q=0.1'     => 'en',
    'fr ; q=0.7 , en;q=0.6'   => 'fr',
    'de'                      => 'en',
    ''                        => 'en',
);
for my $h (sort keys %cases) {
    my $r = send_op($dop, undef, headers => { Authorization => undef,
                                              'Accept-Language' => $h });
    my $lang = ($r->{json}{message} // '') eq 'Authentication required.'
               ? 'en' : 'fr';
    is($lang, $cases{$h}, "Accept-Language: '$h' is " . $cases{$h});
    is($r->{headers}{'content-language'}, $cases{$h},
       "Accept-Language: '$h': Content-Language");
}

# several header lines are one list
my $r = $t->request($dop->{method}, url($dop),
                    headers => [ 'Accept-Language' => 'en;q=0.1',
                                 'Accept-Language' => 'fr' ]);
is($r->{headers}{'content-language'}, 'fr',
   'Accept-Language in two lines: one list');

### the sources: every message of the core has a French text

sub slurp {
    my ($file) = @_;
    open my $fh, '<:utf8', $file or die "$file: $!";
    local $/;
    return <$fh>;
}

sub literal {
    my $text = join '', $_[0] =~ /"((?:[^"\\]|\\.)*)"/g;
    $text =~ s/\\(["\\'])/$1/g;
    return $text;
}

my $lit = qr/(?:"(?:[^"\\]|\\.)*"\s*)+/;
my %core;
my $core_texts = slurp("$top/src/ngx_platform_texts.c");
while ($core_texts =~ /\{\s*($lit),\s*($lit)\}/g) {
    $core{ literal($1) } = literal($2);
}
ok(keys %core > 50, scalar(keys %core) . ' core texts');
is_deeply([ grep { $core{$_} eq $_ } sort keys %core ], [],
          'no core text is its own French');

# a family's file, and a file that only a family uses, answers the
# family's texts, which nginx -t checks
my $own = join '|', map { s/s$//r }
          (slurp("$top/src/ngx_platform_families.h")
           =~ /NGX_PLATFORM_FAMILY\((\w+)\)/g),
          qw(prometheus texts schema);

for my $file (sort(glob("$top/src/*.c")), "$top/ngx_platform_module.c") {
    next if $file =~ m{/ngx_platform_(?:$own)[^/]*\.c$};
    (my $src = slurp($file)) =~ s{/\*.*?\*/}{}gs;
    $src =~ s/ngx_(?:log_error|conf_log_error|log_debug\d|platform_log_limited)
              \s*\((?:[^;"]|"(?:[^"\\]|\\.)*")*;//gsx;
    while ($src =~ /($lit)/g) {
        my $text = literal($1);
        next unless $text =~ /^(?:[A-Z]|%s )[^\n]* [^\n]*\.$/;
        ok(exists $core{$text},
           (split m{/}, $file)[-1] . ": \"$text\" has a French text");
    }
}

$down->done;
$t->done;
done_testing;
