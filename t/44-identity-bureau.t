#!/usr/bin/perl

# Identity verification and the bureau: repeats answered from the record
# within platform_identity_cache_time (per tenant; failures never reused;
# 0: always ask), one bureau call for concurrent misses of a worker, a
# slow bureau not delaying the worker's other requests, and clients that
# leave while the bureau is asked (the one asking, or one waiting).

# platform-test: serial (time bounds)

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Platform::Test;
use Platform::JWT;
use IO::Socket::INET;
use JSON::PP;
use Time::HiRes qw(time sleep);

my $t = Platform::Test->new(workers => 1);
my $k = Platform::JWT::keys($t->testdir . '/keys');
my $calls = $t->testdir . '/slow.log';

# the bureau: nginx answers RC1001, RC404 and RC500 at once; the rest goes
# to a Perl server that logs each call and answers after 1.5 s

$t->run(<<'EOF');
    log_format bureau '$arg_rc_number';

    map $arg_rc_number $bureau_addr {
        ~^SLOW   127.0.0.1:%%PORT_3%%;
        default  127.0.0.1:%%PORT_2%%;
    }

    server {
        listen 127.0.0.1:%%PORT%%;

        location /api/ {
            platform_identity;
            platform_identity_bureau /_bureau;
            platform_identity_cache_time 1h;
            platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;

            location /api/v1.0/ {
                # always ask
                platform_identity_cache_time 0;
            }
        }

        location = /_bureau {
            internal;
            proxy_pass http://$bureau_addr/bureau$is_args$args;
            proxy_read_timeout 10s;
        }
    }

    server {
        listen 127.0.0.1:%%PORT_2%%;
        access_log %%TESTDIR%%/bureau.log bureau;
        default_type application/json;

        location = /bureau {
            rewrite ^ /co/$arg_rc_number last;
        }
        location = /co/RC1001 {
            return 200 '{"companyName":"Acme Trading Limited","address":"12 Marina, Lagos"}';
        }
        location = /co/RC500 { return 500 '{"error":"boom"}'; }
        location /co/ { return 404 '{"error":"unknown company"}'; }
    }
EOF

my $listen = IO::Socket::INET->new(LocalAddr => '127.0.0.1',
                                   LocalPort => $t->port(3), Listen => 64,
                                   ReuseAddr => 1) or die "listen: $!";
my $slow_pid = fork // die "fork: $!";
if (!$slow_pid) {
    $SIG{CHLD} = 'IGNORE';
    while (my $c = $listen->accept) {
        if (fork) {
            close $c;
            next;
        }
        my $line = <$c> // '';
        my ($rc) = $line =~ /rc_number=([^ &]*)/;
        open(my $log, '>>', $calls) or die;
        syswrite $log, "$rc\n";
        close $log;
        sleep 1.5;
        my $body = qq({"companyName":"Slow Company Limited",)
                   . qq("address":"1 Waiting Street"});
        print $c "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                 . "Content-Length: " . length($body) . "\r\n"
                 . "Connection: close\r\n\r\n$body";
        close $c;
        exit 0;
    }
    exit 0;
}
close $listen;

my $path = '/api/v1/Identity/verification/business-credit-bureau';

sub body {
    my (%o) = @_;
    my $json = JSON::PP->new->canonical->encode({ rc_number => $o{rc},
        ($o{name} ? (customer_name => $o{name}) : ()) });
    my $token = Platform::JWT::hs256($k, tenantId => $o{tenant} // 'tenant-a');
    return ($json, $token);
}

sub verify {
    my (%o) = @_;
    my ($json, $token) = body(%o);
    return $t->request('POST', $o{path} // $path, body => $json,
                       headers => { Authorization => "Bearer $token",
                                    'Content-Type' => 'application/json' });
}

sub verify_async {
    my (%o) = @_;
    my ($json, $token) = body(%o);
    return $t->request_async('POST', $path, body => $json,
                             headers => { Authorization => "Bearer $token",
                                          'Content-Type' =>
                                              'application/json' });
}

# a client that sends its request and leaves when told
sub leaving {
    my (%o) = @_;
    my ($json, $token) = body(%o);
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
                                  PeerPort => $t->port) or die "$!";
    print $s "POST $path HTTP/1.1\r\nHost: localhost\r\n"
             . "Authorization: Bearer $token\r\n"
             . "Content-Type: application/json\r\n"
             . "Content-Length: " . length($json) . "\r\n\r\n$json";
    return $s;
}

# shutdown: the forked clients hold copies of the socket, close would not do
sub leave {
    my ($s) = @_;
    shutdown($s, 2);
    close $s;
}

sub bureau_calls {
    my ($rc) = @_;
    my $n = 0;
    for my $f ($t->testdir . '/bureau.log', $calls) {
        open(my $fh, '<', $f) or next;
        $n += grep { /^\Q$rc\E$/ } <$fh>;
    }
    return $n;
}

sub status_of {
    my ($r) = @_;
    return "$r->{status} " . ($r->{json}{data}{verificationStatus} // '');
}

### the cache

my $r1 = verify(rc => 'RC1001', name => 'Acme Trading Limited');
is(status_of($r1), '200 VERIFIED', 'first: asked the bureau');
my $r2 = verify(rc => 'RC1001', name => 'ACME trading  limited');
is(status_of($r2), '200 VERIFIED', 'repeat: answered');
is_deeply($r2->{json}{data}, $r1->{json}{data}, 'the same answer');
is(bureau_calls('RC1001'), 1, 'the repeat did not call the bureau');
is(status_of(verify(rc => 'RC1001', name => 'Acme Ltd')), '200 NAME_MISMATCH',
   'repeat with another name: compared with the recorded answer');
is(bureau_calls('RC1001'), 1, 'still one call');
is(status_of(verify(rc => 'RC1001', tenant => 'tenant-b')), '200 VERIFIED',
   'another tenant');
is(bureau_calls('RC1001'), 2, 'the cache is per tenant: the bureau asked');
is($t->psql(q{SELECT string_agg(concat_ws('|', tenant_id, status,
                  cached_from IS NOT NULL), ';' ORDER BY id)
              FROM identity_verifications WHERE rc_number = 'RC1001'}),
   'tenant-a|VERIFIED|f;tenant-a|VERIFIED|t;tenant-a|NAME_MISMATCH|t;'
   . 'tenant-b|VERIFIED|f', 'reuses are recorded, pointing at the answer');
is($t->psql(q{SELECT count(*) FROM identity_verifications r
              JOIN identity_verifications a ON a.id = r.cached_from
              WHERE r.rc_number = 'RC1001' AND a.cached_from IS NULL
              AND a.bureau = r.bureau}), 2,
   'a reuse points at the row that asked the bureau, with its answer');

is(verify(rc => 'RC404')->{status}, 404, 'unknown company');
is(verify(rc => 'RC404')->{status}, 404, 'unknown company, again');
is(bureau_calls('RC404'), 1, 'a 404 is reused');

is(verify(rc => 'RC500')->{status}, 502, 'bureau error');
is(verify(rc => 'RC500')->{status}, 502, 'bureau error, again');
is(bureau_calls('RC500'), 2, 'a failure is never reused');

my $v10 = '/api/v1.0/Identity/verification/business-credit-bureau';
is(status_of(verify(rc => 'RC1001', path => $v10)), '200 VERIFIED',
   'cache time 0');
is(status_of(verify(rc => 'RC1001', path => $v10)), '200 VERIFIED',
   'cache time 0, again');
is(bureau_calls('RC1001'), 4, 'cache time 0: the bureau asked each time');

$t->psql(q{UPDATE identity_verifications SET created_at = now() - interval '2 hours'
           WHERE rc_number = 'RC404'});
is(verify(rc => 'RC404')->{status}, 404, 'an answer past the cache time');
is(bureau_calls('RC404'), 2, 'past the cache time: the bureau asked again');

### concurrent misses: one call

my @h = map { verify_async(rc => 'SLOW1', name => $_ % 2 ? 'x' : undef) }
        1 .. 6;
my @r = map { $_->wait } @h;
is_deeply([ sort map { status_of($_) } @r ],
          [ ('200 NAME_MISMATCH') x 3, ('200 VERIFIED') x 3 ],
          'six concurrent misses answered, each with its own name');
is(bureau_calls('SLOW1'), 1, 'one bureau call for six misses');
is($t->psql(q{SELECT count(*) FROM identity_verifications
              WHERE rc_number = 'SLOW1'}), 6, 'six verifications recorded');

### a slow bureau does not delay the worker's other requests

my $slow = verify_async(rc => 'SLOW2');
$t->wait_until(sub { bureau_calls('SLOW2') == 1 }, 5);
my $quick_max = 0;
for (1 .. 5) {
    my $q = verify(rc => 'RC1001');
    is($q->{status}, 200, 'a cached verification meanwhile');
    $quick_max = $q->{time} if $q->{time} > $quick_max;
}
my $s = $slow->wait;
is(status_of($s), '200 VERIFIED', 'the slow one answered');
cmp_ok($s->{time}, '>', 1.2, 'the slow one took the bureau\'s time');
cmp_ok($quick_max, '<', 0.8, 'the others did not wait for it');

### the client asking the bureau leaves: a waiter asks in its place

my $leader = leaving(rc => 'SLOW3');
$t->wait_until(sub { bureau_calls('SLOW3') == 1 }, 5);
my @w = map { verify_async(rc => 'SLOW3') } 1 .. 2;
sleep 0.3;
leave($leader);
@r = map { $_->wait } @w;
is_deeply([ map { status_of($_) } @r ], [ ('200 VERIFIED') x 2 ],
          'the waiters answered after the asking client left');
is(bureau_calls('SLOW3'), 2, 'the bureau asked again by a waiter')
    or diag(join '', grep { /SLOW3|prematurely|identity/ } split /^/, $t->error_log);

### a waiter leaves: the others are answered

my $first = verify_async(rc => 'SLOW4');
$t->wait_until(sub { bureau_calls('SLOW4') == 1 }, 5);
my $gone = leaving(rc => 'SLOW4');
my $other = verify_async(rc => 'SLOW4');
sleep 0.3;
leave($gone);
is(status_of($first->wait), '200 VERIFIED', 'the asking client answered');
is(status_of($other->wait), '200 VERIFIED', 'the other waiter answered');
is(bureau_calls('SLOW4'), 1, 'one call');

### all leave: nothing is left behind

# Each client that leaves while it asks hands the call to the next one:
# how many of those are still there depends on which closes the worker
# has seen when it hands over, so the count is at most one call each.
my @all = map { leaving(rc => 'SLOW5') } 1 .. 3;
$t->wait_until(sub { bureau_calls('SLOW5') == 1 }, 5);
sleep 0.3;
leave($_) for @all;
sleep 0.3;
my $left = bureau_calls('SLOW5');
cmp_ok($left, '<=', scalar @all, 'at most one call per client once all left');
is(status_of(verify(rc => 'SLOW5')), '200 VERIFIED',
   'a new request for it is answered');
is(bureau_calls('SLOW5'), $left + 1, 'by a call of its own');
is($t->psql(q{SELECT count(*) FROM identity_verifications
              WHERE rc_number = 'SLOW5'}), 1, 'only it recorded');

$t->ignore_log(qr/identity: the bureau/);

kill 'TERM', $slow_pid;
waitpid $slow_pid, 0;

$t->done;
done_testing;
