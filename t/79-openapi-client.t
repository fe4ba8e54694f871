#!/usr/bin/perl

# A client generated from the served OpenAPI document the way a consumer
# makes one: openapi-typescript, with its default options, writes the
# types; openapi-fetch calls. t/openapi/client.ts, a program that calls
# every operation of the document on the demo data and checks the typed
# fields it reads, compiles with tsc --strict (a body that cannot be
# sent, a key left optional, a null left out is a type error) and, built
# to JavaScript, runs with node against the module: every operation
# answers 200 as its types say. redocly lint with its recommended rules
# finds neither error nor warning. The npm packages are those of
# t/openapi/package-lock.json, installed under .dev/ by t/openapi/install;
# skipped only without node and npm.

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use JSON::PP;
use File::Copy qw(copy);
use Platform::Test;
use Platform::JWT;

my $top = $ENV{PLATFORM_TEST_TOP} // '.';

for my $tool (qw(node npm)) {
    plan skip_all => "$tool is not installed"
        if system("command -v $tool >/dev/null 2>&1") != 0;
}

my $t = Platform::Test->new(workers => 1);
my $k = Platform::JWT::keys($t->testdir . '/keys');

$t->psql(Platform::Test::demo_data(qr/.+/s));

# API keys of tenant-demo: the webhook locations take scope "webhooks"
my @c = ('A' .. 'Z', 'a' .. 'z', '0' .. '9', '-', '_');
my %apikey;
for my $scope (qw(trades webhooks)) {
    my $id = $scope eq 'trades' ? '000000000000790a' : '000000000000790b';
    $apikey{$scope} = "plk_$id." . join('', map { $c[rand @c] } 1 .. 43);
    $t->psql("INSERT INTO api_keys (id, tenant_id, scope, key_digest)"
             . " VALUES ('$id', 'tenant-demo', '$scope',"
             . " sha256(convert_to('$apikey{$scope}', 'UTF8')))");
}

# the OTP code the program validates: one of its own, since the suite's
# files share a Redis and another may validate the demo's code meanwhile
my $otp = 200000 + int(rand(700000));   # never the demo's 123456
$t->redis('SET', "otp:tenant-demo:NG:$otp", 1, 'EX', 600);

# conf/platform.conf, with the sources and the bureau of the demo
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
    }

    server {
        listen 127.0.0.1:%%PORT_2%%;
        default_type application/json;

        location = /bureau {
            return 200 '{"companyName":"Demo Foods Limited","address":"14 Adeola Odeku Street, Victoria Island, Lagos"}';
        }
    }
EOF

my $r = $t->request('GET', '/openapi.json');
is($r->{status}, 200, 'the document') or BAIL_OUT($r->{content});
my $doc = $r->{json};

my $work = $t->testdir . '/client';
mkdir $work or die "$work: $!";

sub spew {
    my ($file, $text) = @_;
    open my $fh, '>:raw', $file or die "$file: $!";
    print $fh $text;
    close $fh or die "$file: $!";
}

spew("$work/openapi.json", $r->{content});

### the tools, from the lock file

my $dir = "$top/.dev/openapi-tools";
my $out = `'$top/t/openapi/install' '$dir' 2>&1`;
is($?, 0, 'the npm packages installed') or BAIL_OUT($out);

# an ES module program, beside the packages
symlink("$dir/node_modules", "$work/node_modules") or die $!;
spew("$work/package.json", qq({"type":"module","private":true}\n));
copy("$top/t/openapi/client.ts", "$work/client.ts") or die $!;

my $bin = "$work/node_modules/.bin";

# no telemetry, no update check: nothing leaves the machine
local $ENV{REDOCLY_TELEMETRY} = 'off';
local $ENV{REDOCLY_SUPPRESS_UPDATE_NOTICE} = 'true';

# (success, output); stderr with the output unless the command says
sub run_in_work {
    my ($cmd) = @_;
    $cmd .= ' 2>&1' unless $cmd =~ /2>/;
    my $output = `cd '$work' && $cmd`;
    return ($? == 0, $output);
}

### redocly lint, the recommended rules

my ($ok, $lint) = run_in_work("'$bin/redocly' lint openapi.json"
                              . " --extends=recommended --format=json"
                              . " 2>'$work/lint.err'");
my $report = eval { decode_json($lint) } // {};
ok($ok, 'redocly lint: passes')
    or diag($lint, `cat '$work/lint.err'`);
is($report->{totals}{errors}, 0, 'redocly lint: no error');
is($report->{totals}{warnings}, 0, 'redocly lint: no warning');
for my $p (@{ $report->{problems} // [] }) {
    diag("$p->{severity} $p->{ruleId}: $p->{message} at "
         . join(' ', map { $_->{pointer} // '' } @{ $p->{location} // [] }));
}

### the client: generated, compiled strictly, run

($ok, $out) = run_in_work("'$bin/openapi-typescript' openapi.json"
                          . " --output api.d.ts");
ok($ok && -s "$work/api.d.ts", 'openapi-typescript: the types')
    or diag($out);

my $tsc = "'$bin/tsc' --strict --target es2022 --module nodenext"
          . " --moduleResolution nodenext";

($ok, $out) = run_in_work("$tsc --noEmit client.ts");
ok($ok, 'tsc --strict --noEmit: the program compiles') or diag($out);

($ok, $out) = run_in_work("$tsc --outDir js client.ts");
ok($ok && -s "$work/js/client.js", 'tsc: built to JavaScript')
    or diag($out);

my $token = Platform::JWT::hs256($k, tenantId => 'tenant-demo',
    sub => 'user-demo-1',
    merchantId => '91000000-0000-4000-8000-000000000001');

local $ENV{PLATFORM_CLIENT} = encode_json({
    baseUrl => 'http://127.0.0.1:' . $t->port,
    token => $token,
    apiKey => $apikey{trades},
    webhookKey => $apikey{webhooks},
    otpCode => $otp,
});

($ok, $out) = run_in_work('node js/client.js');
ok($ok, 'the program runs: every check passes') or diag($out);

my (%called, $checks);
for my $line (split /\n/, $out) {
    if ($line =~ /^call (\S+) (\S+) (\d+)$/) {
        $called{lc($1) . " $2"} = 1;
    } elsif ($line =~ /^(not )?ok - (.*)$/) {
        $checks++;
        ok(!$1, "client: $2");
    }
}
ok($checks > 100, "$checks checks of the program");

# every operation of the document, called
my @ops = map { my $path = $_;
                map { "$_ $path" }
                grep { /^(get|head|post|put|patch|delete)$/ }
                keys %{ $doc->{paths}{$path} } }
          keys %{ $doc->{paths} };
is_deeply([ sort grep { !$called{$_} } @ops ], [],
          scalar(@ops) . ' operations, each called');

$t->done;
done_testing;
