#!/usr/bin/perl

# W3C Trace Context: a well-formed traceparent is kept (its trace id in
# $platform_trace_id, in traceresponse, in every error log line of a
# failing request), malformed ones start a new trace, a tracestate is
# passed on untouched with the trace it belongs to, and the identity
# bureau's subrequest carries a child traceparent: the same trace, the
# request's own span as its parent.

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use JSON::PP;
use Platform::Test;
use Platform::JWT;

my $t = Platform::Test->new(workers => 1);
my $k = Platform::JWT::keys($t->testdir . '/keys');

$t->run(<<'EOF');
    log_format traced escape=json
        '{"marker":"$http_x_marker","trace":"$platform_trace_id"}';
    log_format bureau escape=json
        '{"rc":"$arg_rc_number","traceparent":"$http_traceparent",'
        '"tracestate":"$http_tracestate",'
        '"authorization":"$http_authorization"}';

    limit_req_zone $platform_tenant zone=t77:1m rate=1r/m;

    map $arg_rc_number $bureau_addr {
        ~^DOWN   127.0.0.1:%%PORT_3%%;
        default  127.0.0.1:%%PORT_2%%;
    }

    server {
        listen 127.0.0.1:%%PORT%%;
        access_log %%TESTDIR%%/access.log traced;

        location /api/ {
            platform_identity;
            platform_identity_bureau /_bureau;
            platform_identity_cache_time 0;
            platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;
        }

        location /validate-otp/ {
            platform_otp;
            limit_req zone=t77 burst=1 nodelay;
            limit_req_status 429;
        }

        location = /_bureau {
            internal;
            proxy_pass http://$bureau_addr/bureau$is_args$args;
            proxy_connect_timeout 1s;
        }
    }

    server {
        listen 127.0.0.1:%%PORT_2%%;
        access_log %%TESTDIR%%/bureau.log bureau;
        default_type application/json;

        location = /bureau {
            return 200 '{"companyName":"Acme Trading Limited","address":"12 Marina, Lagos"}';
        }
    }
EOF

my $path = '/api/v1/Identity/verification/business-credit-bureau';
my $token = Platform::JWT::hs256($k, tenantId => 't77');
my $n = 0;

sub read_log {
    my ($file, $key, $value) = @_;
    open(my $fh, '<', $t->testdir . "/$file") or return undef;
    while (my $line = <$fh>) {
        my $e = eval { decode_json($line) } or next;
        return $e if $e->{$key} eq $value;
    }
    return undef;
}

# a verification with these headers: (response, $platform_trace_id, what
# the bureau was sent)
sub verify {
    my (%o) = @_;
    my $rc = ($o{rc} // 'RC') . ++$n;
    my $marker = "m$n";
    my $r = $t->request('POST', $path,
        headers => [ Authorization => "Bearer $token",
                     'Content-Type' => 'application/json',
                     'X-Marker' => $marker,
                     @{$o{headers} // []} ],
        body => encode_json({ rc_number => $rc }));
    my $logged = $t->wait_until(sub { read_log('access.log', marker =>
                                               $marker) }, 5);
    my $bureau = $o{rc} ? undef
        : $t->wait_until(sub { read_log('bureau.log', rc => $rc) }, 5);
    return ($r, ($logged // {})->{trace}, $bureau // {});
}

my $trace = '4bf92f3577b34da6a3ce929d0e0e4736';
my $parent = '00f067aa0ba902b7';
my $hex16 = qr/[0-9a-f]{16}/;

# --- a well-formed traceparent, with a tracestate -------------------------

my $state = 'congo=t61rcWkgMzE,rojo=00f067aa0ba902b7';

my ($r, $logged, $bureau) = verify(headers => [
    traceparent => "00-$trace-$parent-01", tracestate => $state ]);

is($r->{status}, 200, 'traced: 200');
my $response = $r->{headers}{traceresponse} // '';
like($response, qr/^00-$trace-($hex16)-01$/,
     'traced: traceresponse, the trace and its flags kept');
my ($span) = $response =~ /^00-$trace-($hex16)-01$/;
$span //= '';
isnt($span, $parent, "traced: the request's own span id");
isnt($span, '0' x 16, 'traced: a span id not all zeros');
is($r->{headers}{traceparent}, undef, 'traced: no traceparent answered');
is($logged, $trace, 'traced: $platform_trace_id');

is($bureau->{traceparent}, "00-$trace-$span-01",
   "the bureau: a child traceparent, the request's span its parent");
is($bureau->{tracestate}, $state, 'the bureau: tracestate untouched');
is($bureau->{authorization}, '', "the bureau: not the client's token");

# tracestate in two headers: passed on as one list, in order

($r, $logged, $bureau) = verify(headers => [
    traceparent => "00-$trace-$parent-00",
    tracestate => 'congo=t61rcWkgMzE', tracestate => 'rojo=00f067aa0ba902b7' ]);
is($bureau->{tracestate}, 'congo=t61rcWkgMzE, rojo=00f067aa0ba902b7',
   'two tracestate headers: one list');
like($r->{headers}{traceresponse}, qr/^00-$trace-$hex16-00$/,
     'flags 00 kept');

# --- no traceparent: a new trace ---------------------------------------

my ($r1, $l1, $b1) = verify();
my ($r2, $l2, $b2) = verify(headers => [ tracestate => $state ]);

my ($new1, $span1) = ($r1->{headers}{traceresponse} // '')
                     =~ /^00-([0-9a-f]{32})-($hex16)-00$/;
my ($new2) = ($r2->{headers}{traceresponse} // '')
             =~ /^00-([0-9a-f]{32})-$hex16-00$/;
ok($new1 && $new2, 'no traceparent: a new trace, not sampled');
isnt($new1 // '', $new2 // 'x', 'no traceparent: a trace each');
isnt($new1 // '', '0' x 32, 'no traceparent: a trace id not all zeros');
is($l1, $new1, 'no traceparent: $platform_trace_id');
is($b1->{traceparent}, "00-$new1-$span1-00",
   'no traceparent: the bureau gets the new trace');
is($b2->{tracestate}, '', 'no traceparent: a tracestate is not passed on');

# the worker draws random bytes ahead, a kilobyte at a time: 200 requests
# use several draws, and no id comes twice
my (%ids, $bad);
for my $h (map { $t->request_async('GET', '/api/nothing') } 1 .. 200) {
    my ($id, $span) = ($h->wait->{headers}{traceresponse} // '')
                      =~ /^00-([0-9a-f]{32})-($hex16)-00$/ or $bad++;
    $ids{$_}++ for grep { defined } $id, $span;
}
ok(!$bad && 400 == keys %ids,
   'no traceparent: 200 new traces and spans, each id once');

# --- malformed traceparents start a new trace -----------------------------

my %malformed = (
    'upper-case hex'        => '00-' . uc($trace) . "-$parent-01",
    'upper-case parent'     => "00-$trace-" . uc($parent) . '-01',
    'trace id all zeros'    => '00-' . '0' x 32 . "-$parent-01",
    'parent id all zeros'   => "00-$trace-" . '0' x 16 . '-01',
    'version ff'            => "ff-$trace-$parent-01",
    'another version'       => "01-$trace-$parent-01",
    'a short trace id'      => '00-' . substr($trace, 1) . "-$parent-01",
    'a long parent id'      => "00-$trace-${parent}0-01",
    'something after'       => "00-$trace-$parent-01-extra",
    'a non-hex character'   => '00-' . substr($trace, 0, 31) . "g-$parent-01",
    'flags not hex'         => "00-$trace-$parent-0x",
    'other separators'      => "00_${trace}_${parent}_01",
    'a space inside'        => "00-$trace -$parent-01",
    'empty'                 => '',
);

for my $name (sort keys %malformed) {
    ($r, $logged, $bureau) = verify(headers => [
        traceparent => $malformed{$name}, tracestate => $state ]);
    my ($id) = ($r->{headers}{traceresponse} // '')
               =~ /^00-([0-9a-f]{32})-$hex16-00$/;
    ok($id && $id ne $trace, "$name: a new trace");
    is($logged, $id, "$name: \$platform_trace_id is the new trace");
    my $want = $id // 'none';
    like($bureau->{traceparent} // '', qr/^00-$want-$hex16-00$/,
         "$name: the bureau gets the new trace");
    is($bureau->{tracestate}, '', "$name: its tracestate is dropped");
}

# two traceparent headers, each well-formed: which one? neither

($r) = verify(headers => [ traceparent => "00-$trace-$parent-01",
                           traceparent => "00-$trace-$parent-01" ]);
unlike($r->{headers}{traceresponse} // '', qr/$trace/,
       'two traceparent headers: a new trace');

# --- the error log lines of a failing request -----------------------------

$t->ignore_log(qr/connect\(\) failed/);

($r) = verify(rc => 'DOWN', headers => [
    traceparent => "00-$trace-$parent-01", 'X-Request-Id' => 'r77-down' ]);
is($r->{status}, 502, 'bureau down: 502');
like($r->{headers}{traceresponse} // '', qr/^00-$trace-/,
     'bureau down: traceresponse');

my @lines = grep { /request_id: "r77-down"/ } split /\n/, $t->error_log;
ok(scalar(grep { /\[error\]/ } @lines), 'bureau down: an error logged')
    or diag($t->error_log);
is(scalar(grep { !/trace_id: "$trace"/ } @lines), 0,
   'bureau down: every line of the request names its trace')
    or diag(join("\n", @lines));

# refused by limit_req, before the module's handler: its line too

my %otp = (tenantId => 't77-otp', countryCode => 'NG');
my @s;
for my $i (1 .. 3) {
    $r = $t->request('GET', '/validate-otp/123456', headers => {
        %otp, 'X-Request-Id' => "r77-limit-$i",
        traceparent => "00-$trace-$parent-01" });
    push @s, $r->{status};
}
is_deeply(\@s, [404, 404, 429], 'limit_req: the third refused');
like($r->{headers}{traceresponse} // '', qr/^00-$trace-$hex16-01$/,
     'limit_req: traceresponse on its refusal');

@lines = grep { /request_id: "r77-limit-3"/ } split /\n/, $t->error_log;
ok(scalar(grep { /limiting requests/ } @lines),
   'limit_req: its line names the request')
    or diag($t->error_log);
is(scalar(grep { !/trace_id: "$trace"/ } @lines), 0,
   'limit_req: and the trace');

# any answer of a module location carries traceresponse

$r = $t->request('GET', '/api/nothing', headers => {
    traceparent => "00-$trace-$parent-01" });
is($r->{status}, 404, 'not found: 404');
like($r->{headers}{traceresponse} // '', qr/^00-$trace-$hex16-01$/,
     'not found: traceresponse');

$t->done;
done_testing;
