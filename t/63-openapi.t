#!/usr/bin/perl

# platform_openapi: the OpenAPI 3.1 document, fetched from nginx with the
# locations of conf/platform.conf. It validates with a real OpenAPI 3.1
# validator (@seriousme/openapi-schema-validator, from npm, installed
# under .dev/ by t/openapi/install); every route of the module's endpoint tables (read
# from src/*.c) is in it and nothing else; every operation in it, run with
# its own examples on the demo data, answers its documented success, and
# that answer's body validates strictly against the documented schema
# (every key required, no other, null only where the type allows it).
# The statuses each operation documents, derived from its row; a summary
# on each; tags, license, no unused component. GET, HEAD, other methods
# 405; servers from platform_openapi_server, never from the Host, and
# nginx -t refusing bad values; built when the configuration loads, again
# on a reload.

use strict;
use warnings;
use utf8;

use lib 't/lib';
use Test::More;
use JSON::PP;
use File::Copy qw(copy);
use Platform::Test;
use Platform::JWT;

my $top = $ENV{PLATFORM_TEST_TOP} // '.';

my $t = Platform::Test->new(workers => 1);
my $k = Platform::JWT::keys($t->testdir . '/keys');

$t->psql(Platform::Test::demo_data(qr/.+/s));

# API keys of tenant-demo: the webhook locations take scope "webhooks"
my @c = ('A' .. 'Z', 'a' .. 'z', '0' .. '9', '-', '_');
my %apikey;
for my $scope (qw(trades webhooks)) {
    my $id = $scope eq 'trades' ? '00000000000063aa' : '00000000000063bb';
    $apikey{$scope} = "plk_$id." . join('', map { $c[rand @c] } 1 .. 43);
    $t->psql("INSERT INTO api_keys (id, tenant_id, scope, key_digest)"
             . " VALUES ('$id', 'tenant-demo', '$scope',"
             . " sha256(convert_to('$apikey{$scope}', 'UTF8')))");
}

# the OTP code of the example (scripts/dev start sets the same)
$t->redis(qw(SET otp:tenant-demo:NG:123456 1 EX 600));

# the sources of the examples in locations of their own routes, as the
# dev configuration declares them (at this level both {source} locations
# of platform.conf would serve them, which nginx -t refuses)
$t->run(<<"EOF");
    platform_webhook_payment_method card;

    server {
        listen 127.0.0.1:%%PORT%%;

        platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;
        platform_apikey_cache_time 0;
        platform_identity_bureau /_bureau;

        include $top/conf/platform.conf;

        location ^~ /api/v1/webhooks/public/ {
            platform_webhooks;
            platform_apikey_scope webhooks;
            platform_webhook_source source-a;
        }

        location ^~ /api/webhooks/public/ {
            platform_webhooks;
            platform_webhook_source source-b;
        }

        location = /_bureau {
            internal;
            proxy_pass http://127.0.0.1:%%PORT_2%%/bureau;
        }

        location = /health { platform_health; }

        location = /behind-proxy/openapi.json {
            platform_openapi;
            platform_openapi_server https://api.example.com/platform/;
        }
    }

    server {
        listen 127.0.0.1:%%PORT_2%%;
        default_type application/json;

        location = /bureau {
            return 200 '{"companyName":"Demo Foods Limited","address":"14 Adeola Odeku Street, Victoria Island, Lagos"}';
        }
    }
EOF

my $conf = $t->check_config;
ok($conf->{ok}, 'nginx -t');
unlike($conf->{output}, qr/\[(?:warn|emerg|alert)\]/, 'nginx -t: no warning')
    or diag($conf->{output});

### the document over HTTP

my $r = $t->request('GET', '/openapi.json');
is($r->{status}, 200, 'GET: 200');
is($r->{headers}{'content-type'}, 'application/json; charset=utf-8',
   'GET: JSON');
ok($r->{headers}{'x-request-id'}, 'GET: X-Request-Id');
is(Platform::Test::loose_json($r->{content}), '', 'GET: compact');

my $doc = $r->{json};
ok($doc, 'GET: a JSON document') or BAIL_OUT('no document: '
                                             . substr($r->{content}, 0, 300));
is($doc->{openapi}, '3.1.0', 'openapi 3.1.0');
is_deeply($doc->{servers}, [ { url => '/' } ],
          'servers: relative by default, the host the document came from');

# the Host header is the client's: never written into the document
my $again = $t->parse_response($t->raw_request(
    "GET /openapi.json HTTP/1.0\r\nHost: evil.example.net:8443\r\n\r\n"));
is($again->{content}, $r->{content}, 'another Host: the same document');

my $raw = $t->parse_response($t->raw_request(
    "GET /openapi.json HTTP/1.0\r\n\r\n"));
is($raw->{content}, $r->{content}, 'no Host: the same document');

my $proxied = $t->request('GET', '/behind-proxy/openapi.json');
is_deeply($proxied->{json}{servers},
          [ { url => 'https://api.example.com/platform' } ],
          'platform_openapi_server: its URL, the trailing slash dropped');
my %rest = %{ $proxied->{json} };
delete $rest{servers};
my %first = %$doc;
delete $first{servers};
is_deeply(\%rest, \%first, 'the same document otherwise');

$r = $t->request('HEAD', '/openapi.json');
is($r->{status}, 200, 'HEAD: 200');
is($r->{content}, '', 'HEAD: no body');
is($r->{headers}{'content-length'}, length($again->{content}),
   'HEAD: the GET\'s length');

for my $method (qw(POST PUT DELETE PATCH)) {
    $r = $t->request($method, '/openapi.json', body => '{}');
    Platform::Test::is_envelope_b_error($r, 405, 'Method not allowed.',
                                        'This endpoint accepts GET, HEAD.',
                                        "$method");
    is($r->{headers}{allow}, 'GET, HEAD', "$method: Allow");
}

# built when the configuration loads, in its memory: a reload builds the
# new configuration's, which the new workers serve
ok($t->reload, 'reload');
my $reloaded = $t->parse_response($t->raw_request(
    "GET /openapi.json HTTP/1.0\r\nHost: api.example.com:8443\r\n\r\n"));
is($reloaded->{content}, $again->{content}, 'the same document after a reload');

### a real OpenAPI 3.1 validator

# installed once under .dev/ from the committed lock file, again when the
# lock changes (t/openapi/install; t/79-openapi-client.t shares it)
my $dir = "$top/.dev/openapi-tools";

sub slurp {
    my ($file) = @_;
    open my $fh, '<:raw', $file or return undef;
    local $/;
    return <$fh>;
}

my $out = `'$top/t/openapi/install' '$dir' 2>&1`;
is($?, 0, 'the npm packages installed') or diag($out);

# run from the test's directory, the packages linked there
copy("$top/t/openapi/validate.mjs", $t->testdir . '/validate.mjs') or die $!;
symlink("$dir/node_modules", $t->testdir . '/node_modules') or die $!;

my $docfile = $t->testdir . '/openapi.json';
open my $fh, '>:raw', $docfile or die $!;
print $fh $again->{content};
close $fh;

sub validate {
    my ($file, $answers) = @_;
    my $args = "'$file'";
    if ($answers) {
        my $afile = $t->testdir . '/answers.json';
        open my $a, '>:raw', $afile or die $!;
        print $a encode_json($answers);
        close $a;
        $args .= " '$afile'";
    }
    my $out = `node '${\ $t->testdir}/validate.mjs' $args 2>&1`;
    my $report = eval { decode_json($out) };
    diag($out) unless $report;
    return $report // { valid => 0, errors => [ $out ], answers => [] };
}

my $report = validate($docfile);
ok($report->{valid}, "valid OpenAPI $report->{version}")
    or diag(explain($report->{errors}));

# what the schema cannot say: each path template's names are path
# parameters of each of its operations, and operationIds are unique

my @methods = qw(get head post put patch delete);
my (%ids, @ops);

for my $path (sort keys %{ $doc->{paths} }) {
    my @names = $path =~ /\{([^}]+)\}/g;
    for my $m (@methods) {
        my $op = $doc->{paths}{$path}{$m} or next;
        push @ops, [ $m, $path, $op ];
        my %in = map { $_->{name} => 1 }
                 grep { ($_->{in} // '') eq 'path' } @{ $op->{parameters} };
        is_deeply(\%in, { map { $_ => 1 } @names },
                  "$m $path: its path parameters");
        ok(!$ids{ $op->{operationId} }++, "$m $path: operationId unique");
    }
}

### every route of the module is in the document, and only those

# the endpoint tables, read from the sources: { METHOD, "pattern" ...
my %module;
for my $file (glob("$top/src/*.c")) {
    my $src = slurp($file);
    while ($src =~ /\{\s*NGX_HTTP_(GET|POST|PUT|PATCH|DELETE),
                    \s*((?:"[^"]*"\s*)+),/gx)
    {
        my ($m, $lits) = (lc $1, $2);
        my $pattern = join '', $lits =~ /"([^"]*)"/g;
        next if $pattern eq '*';
        (my $path = $pattern)
            =~ s/\{(?:uuid|string)(?::([^}]+))?\}/'{' . ($1 \/\/ 'id') . '}'/ge;
        $module{"$m $path"} = 1;
    }
}
ok(scalar keys %module >= 20, scalar(keys %module) . ' routes in src/*.c');

my %documented = map { ("$_->[0] $_->[1]" => 1) }
                 grep { $_->[0] ne 'head' } @ops;
is_deeply([ sort keys %documented ], [ sort keys %module ],
          'the document has every route of the endpoint tables, no other');

### every operation, run with its examples on the demo data

my $canon = JSON::PP->new->canonical;

my $token = Platform::JWT::hs256($k, tenantId => 'tenant-demo',
    sub => 'user-demo-1',
    merchantId => '91000000-0000-4000-8000-000000000001');

sub resolve {
    my ($node) = @_;
    while (ref $node eq 'HASH' && $node->{'$ref'}) {
        my @parts = split m{/}, substr($node->{'$ref'}, 2);
        $node = $doc;
        $node = $node->{$_} for @parts;
    }
    return $node;
}

sub pointer {
    my @parts = map {
        (my $p = $_) =~ s/~/~0/g;
        $p =~ s{/}{~1}g;
        $p =~ s/([^A-Za-z0-9~._-])/sprintf('%%%02X', ord $1)/ge;
        $p;
    } @_;
    return join '', map { "/$_" } @parts;
}

my (@answers, %headed);

for my $o (@ops) {
    my ($m, $path, $op) = @$o;
    my $name = "$m $path";
    my (%headers, @query);

    (my $url = $path) =~ s/\{([^}]+)\}/
        my $n = $1;
        my ($p) = grep { $_->{name} eq $n && $_->{in} eq 'path' }
                  map { resolve($_) } @{ $op->{parameters} };
        defined $p->{example} ? $p->{example} : 'none'
    /ge;

    for my $p (map { resolve($_) } @{ $op->{parameters} }) {
        next unless defined $p->{example};
        if ($p->{in} eq 'query') {
            push @query, "$p->{name}=$p->{example}";
        } elsif ($p->{in} eq 'header' && $p->{required}) {
            $headers{$p->{name}} = $p->{example};
        }
    }

    for my $req (@{ $op->{security} }) {
        $headers{Authorization} = "Bearer $token" if exists $req->{bearerAuth};
        $headers{apiKey} = $path =~ /webhooks/ ? $apikey{webhooks}
                                                : $apikey{trades}
            if exists $req->{apiKey};
    }

    my %opts = (headers => \%headers);
    my $content = $op->{requestBody}{content}{'application/json'};
    $opts{json} = $content->{example} if $content;
    $url .= '?' . join('&', @query) if @query;

    $r = $t->request(uc $m, $url, %opts);
    is($r->{status}, 200, "$name: its examples on the demo data: 200")
        or diag("$url: $r->{content}");

    ok($op->{responses}{200}, "$name: 200 documented");

    my $schema = $op->{responses}{200}{content}{'application/json'};
    if ($m ne 'head' && $schema && $r->{status} == 200) {
        push @answers, { name => $name, body => $r->{json},
                         pointer => pointer('paths', $path, $m, 'responses',
                                            '200', 'content',
                                            'application/json', 'schema') };
    }

    # 401 where a credential is documented: the document says so
    if (@{ $op->{security} }) {
        my %bare = %headers;
        delete @bare{qw(Authorization apiKey)};
        $r = $t->request(uc $m, $url, %opts, headers => \%bare);
        is($r->{status}, 401, "$name: 401 without its credentials");
        my $ex = $op->{responses}{401}{content}{'application/json'}{examples};
        if ($m eq 'head') {
            ok($op->{responses}{401}, "$name: 401 documented");
        } else {
            ok((grep { $canon->encode($_->{value})
                       eq $canon->encode($r->{json} // []) } values %$ex),
               "$name: that 401 is one of its documented examples")
                or diag($r->{content});
        }
    }

    $headed{$path} = 1 if $m eq 'head';
}

# a GET of the module answers HEAD exactly when the document has it
for my $route (sort grep { /^get / } keys %module) {
    (my $path = $route) =~ s/^get //;
    my ($op) = map { $_->[2] } grep { $_->[0] eq 'get' && $_->[1] eq $path }
               @ops;
    (my $url = $path) =~ s/\{([^}]+)\}/
        my $n = $1;
        my ($p) = grep { $_->{name} eq $n } map { resolve($_) }
                  @{ $op->{parameters} };
        $p->{example} \/\/ 'none'
    /ge;
    my %h = (tenantId => 'tenant-demo', countryCode => 'NG',
             Authorization => "Bearer $token", apiKey => $apikey{trades});
    $r = $t->request('HEAD', $url, headers => \%h);
    is($r->{status} != 405 ? 1 : 0, $headed{$path} ? 1 : 0,
       "HEAD $path: served as documented ($r->{status})");
}

# the success answers validate against their documented schemas

$report = validate($docfile, \@answers);
is(scalar @{ $report->{answers} }, scalar @answers,
   scalar(@answers) . ' answers checked');
for my $a (@{ $report->{answers} }) {
    ok($a->{valid}, "$a->{name}: the answer matches its schema")
        or diag(explain($a->{errors}));
}

# the check is strict: a key missing, a null where the type has none, a
# member the document does not describe, each fails, at any depth

sub broken {
    my ($name, $change) = @_;
    my ($a) = grep { $_->{name} eq $name } @answers;
    return () unless $a;
    my $body = decode_json(encode_json($a->{body}));
    my $what = $change->($body);
    return { %$a, name => "$name, $what", body => $body };
}

my $order = 'get /tms/delivery-orders/{deliveryOrderUuid}';
my $sale = 'patch /sales/transactions';
my @broken = (
    broken($order, sub { delete $_[0]{data}{orderNumber};
                         'data.orderNumber missing' }),
    broken($order, sub { $_[0]{data}{createdAt} = undef;
                         'data.createdAt null' }),
    broken($order, sub { $_[0]{data}{colour} = 'red';
                         'data.colour, a member not described' }),
    broken($order, sub { delete $_[0]{data}{pickupAddress}{city};
                         'data.pickupAddress.city missing' }),
    broken($order, sub { delete $_[0]{errors}; 'errors missing' }),
    broken($sale, sub { delete $_[0]{data}{sale}{saleTransaction}{amount};
                        'data.sale.saleTransaction.amount missing' }),
    broken($sale, sub { $_[0]{data}{sale}{tenantId} = undef;
                        'data.sale.tenantId null' }),
    broken($sale, sub { $_[0]{data}{seller}{wallet}{pin} = '0000';
                        'data.seller.wallet.pin, a member not described' }),
);
is(scalar @broken, 8, 'answers broken on purpose');

$report = validate($docfile, \@broken);
is(scalar @{ $report->{answers} }, scalar @broken, 'broken answers checked');
for my $a (@{ $report->{answers} }) {
    ok(!$a->{valid}, "$a->{name}: refused");
}

### what each operation documents

my %envelope = (map({ $_ => 'EnvelopeAError' }
                    qw(persons transfers invoices counterparties identity)),
                sales => 'SalesError');

for my $o (grep { $_->[0] ne 'head' } @ops) {
    my ($m, $path, $op) = @$o;
    my $name = "$m $path";
    my $res = $op->{responses};

    ok(length($op->{summary} // ''), "$name: a summary");

    # derived from the row: any location may be rate limited; every
    # family here has a backend; credentials, bodies, versions
    my @expected = (200, 429, 500, 503);
    push @expected, 401 if @{ $op->{security} };
    push @expected, 400, 413, 415
        if $op->{requestBody}{content}{'application/json'}{schema};
    push @expected, 404 if $path =~ /\{version\}/;
    for my $status (@expected) {
        ok($res->{$status}, "$name: $status documented");
    }

    my $error = $envelope{ $op->{tags}[0] } // 'EnvelopeBError';
    my @refs = map { $res->{$_}{content}{'application/json'}{schema}{'$ref'}
                     // '(none)' }
               grep { $_ >= 400 } sort keys %$res;
    is_deeply([ grep { $_ ne "#/components/schemas/$error" } @refs ], [],
              "$name: every error in $error");

    my $body = $op->{requestBody}{content}{'application/json'}{schema};
    if ($body && !$body->{properties}) {
        ok($body->{additionalProperties}, "$name: a body of any members");
    }
}

ok($doc->{info}{license}{name} && $doc->{info}{license}{identifier},
   'info.license');

my %tags = map { $_->{name} => 1 } @{ $doc->{tags} };
is_deeply([ grep { !$tags{ $_->[2]{tags}[0] } } @ops ], [],
          'every tag declared');

# no unused components: those the operations refer to, and so on
my (%used, @pending);
my $refs;
$refs = sub {
    my ($node) = @_;
    if (ref $node eq 'HASH') {
        push @pending, $node->{'$ref'} if defined $node->{'$ref'};
        $refs->($_) for values %$node;
    } elsif (ref $node eq 'ARRAY') {
        $refs->($_) for @$node;
    }
};
$refs->($doc->{paths});
while (defined(my $ref = shift @pending)) {
    next if $used{$ref}++;
    $refs->(resolve({ '$ref' => $ref }));
}
my @components = map { my $kind = $_;
                       map { "#/components/$kind/$_" }
                       keys %{ $doc->{components}{$kind} } }
                 qw(schemas parameters headers);
is_deeply([ sort grep { !$used{$_} } @components ], [],
          'no unused component');
is_deeply([ sort grep { !resolve({ '$ref' => $_ }) } keys %used ], [],
          'no reference to nothing');

### error answers: examples as the module writes them

my %tms = (tenantId => 'tenant-demo', countryCode => 'NG');

$r = $t->request('GET', '/tms/delivery-orders/nope', headers => \%tms);
my $get = $doc->{paths}{'/tms/delivery-orders/{deliveryOrderUuid}'}{get};
my $examples = $get->{responses}{400}{content}{'application/json'}{examples};
ok((grep { $canon->encode($_->{value}) eq $canon->encode($r->{json}) }
    values %$examples),
   'a 400 example is the module\'s own answer');

$r = $t->request('PATCH', '/tms/delivery-orders/'
                 . 'a1000000-0000-4000-8000-000000000004/assign/'
                 . 'd1000000-0000-4000-8000-000000000002',
                 headers => \%tms);
my $assign = $doc->{paths}{'/tms/delivery-orders/{deliveryOrderUuid}/assign/'
                           . '{driverId}'}{patch};
$examples = $assign->{responses}{409}{content}{'application/json'}{examples};
ok((grep { $canon->encode($_->{value}) eq $canon->encode($r->{json}) }
    values %$examples),
   'a 409 of the statement\'s outcomes is documented as answered')
    or diag($r->{content});

### platform_openapi_server: what nginx -t accepts, refuses, and why

sub server_conf {
    my ($url) = @_;
    return <<"EOF";
    server {
        listen 127.0.0.1:%%PORT%%;
        location = /openapi.json {
            platform_openapi;
            platform_openapi_server $url;
        }
    }
EOF
}

for my $url ('/', '/platform', 'http://127.0.0.1:8080',
             'https://api.example.com/v%C3%A9/', '"https://[::1]:8443"')
{
    ok($t->check_config(server_conf($url))->{ok}, "server $url: accepted");
}

for my $case (
    [ '""', qr/platform_openapi_server "" is empty/ ],
    [ 'api.example.com', qr/is neither a path beginning with "\/" nor an/ ],
    [ 'ftp://api.example.com', qr/nor an http:\/\/ or https:\/\/ URL/ ],
    [ '//api.example.com', qr/begins with "\/\/": write the scheme/ ],
    [ 'https://', qr/"https:\/\/" has no host/ ],
    [ 'https:///platform', qr/has no host/ ],
    [ '"https://api.example.com/a b"', qr/a space, .*percent-encode it/ ],
    [ '"https://api.example.com/\\"x"', qr/percent-encode it/ ],
    [ "\"https://api.example.com/v\xc3\xa9\"", qr/non-ASCII .*percent-encode/ ],
    [ 'https://api.example.com/?v=1', qr/has a query or a fragment/ ],
    [ '"https://api.example.com/#top"', qr/has a query or a fragment/ ],
    [ '"https://{host}"', qr/names a server variable/ ],
    [ 'https://api.example.com/%zz', qr/not followed by two hexadecimal/ ],
) {
    $t->config_refused(server_conf($case->[0]), $case->[1],
                       "server $case->[0]");
}

$t->config_refused(<<'EOF', qr/"platform_openapi_server" directive is duplicate/,
    server {
        listen 127.0.0.1:%%PORT%%;
        location = /openapi.json {
            platform_openapi;
            platform_openapi_server /a;
            platform_openapi_server /b;
        }
    }
EOF
                   'server given twice');

$t->done;
done_testing;
