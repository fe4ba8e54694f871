#!/usr/bin/perl

# Large person documents: a 5 MB document in a body that nginx buffers to
# a temporary file is stored byte for byte, with its SHA-256 and size;
# an error at the end of megabytes of base64 is found. And while four
# such documents are decoded and digested, the one worker goes on
# answering other requests: each quick request answers within a generous
# bound, and most of the worker's CPU time is spent off its event loop,
# in the thread pool.
#
# PLATFORM_TEST_THREAD_POOL=off runs the same with "platform_thread_pool
# off;": decoding, digests and the parse of the bodies run on the event
# loop, which then takes all of the worker's CPU time and stalls the
# quick requests for each document (the proof that the test can fail).

# platform-test: serial (time bounds)

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Platform::Test;
use Platform::JWT;
use Digest::SHA qw(sha256_hex);
use MIME::Base64 qw(encode_base64);
use JSON::PP ();
use POSIX ();
use Time::HiRes qw(time sleep);

my $t = Platform::Test->new(workers => 1);
my $k = Platform::JWT::keys($t->testdir . '/keys');

my $pool = ($ENV{PLATFORM_TEST_THREAD_POOL} // '') eq 'off'
           ? 'platform_thread_pool off;' : '';

$t->run(<<"EOF");
    $pool

    server {
        listen 127.0.0.1:%%PORT%%;
        platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;

        location ~ ^/api/v[^/]+/PersonDocuments/ {
            platform_persons;
            client_max_body_size 14m;
            client_body_buffer_size 16k;    # megabytes go to a file
        }

        location = /static { return 200 "static"; }
    }
EOF

my $person = 'c0000000-0000-4000-8000-000000000001';
my @docs = map { sprintf('75000000-0000-4000-8000-%012d', $_) } 1 .. 9;
my $values = join(",\n", map { "('$_', 'tenant-a', '$person', 1, 'a.pdf',"
                               . " true)" } @docs);

$t->psql(<<"SQL");
INSERT INTO person_documents (id, tenant_id, person_id, type, file_name,
                              approved)
VALUES $values;
SQL

my $token = Platform::JWT::hs256($k, tenantId => 'tenant-a');

# $n bytes that do not compress, the same for a given seed
sub content {
    my ($n, $seed) = @_;
    srand($seed);
    my $s = pack('L*', map { int rand 4294967296 } 1 .. int($n / 4) + 1);
    return substr($s, 0, $n);
}

sub body {
    my ($id, $base64) = @_;
    return '{"documentId":"' . $id . '","personId":"' . $person
           . '","fileName":"big.bin","base64":"'
           . join('\r\n', split /\n/, $base64) . '"}';
}

sub put {
    my ($body, %o) = @_;
    my $method = $o{async} ? 'request_async' : 'request';
    return $t->$method('PUT', '/api/v1/PersonDocuments/update',
                       headers => { Authorization => "Bearer $token",
                                    'Content-Type' => 'application/json' },
                       body => $body, timeout => 30);
}

sub stored {
    my ($id) = @_;
    return $t->psql("SELECT encode(sha256(content), 'hex') || ' '"
                    . " || encode(content_sha256, 'hex') || ' '"
                    . " || content_size || ' ' || approved::int"
                    . " FROM person_documents WHERE id = '$_[0]'");
}

### 5 MB through a temporary file

my $big = content(5_000_000, 1);
my $body = body($docs[0], encode_base64($big));
cmp_ok(length $body, '>', 6_700_000, 'a body of some 6.7 MB');

my $r = put($body);
is($r->{status}, 200, '5 MB document: 200') or diag($r->{content});
is($r->{json}{data}{fileName}, 'big.bin', '5 MB document: the document');
is($r->{json}{data}{approved}, JSON::PP::false,
   '5 MB document: approved reset');
my $sha = sha256_hex($big);
is(stored($docs[0]), "$sha $sha 5000000 0",
   '5 MB document: the content, its SHA-256 and size, as sent');
like($t->error_log, qr/client request body is buffered to a temporary file/,
     'the body went through a temporary file');

# the content again: nothing changes, nothing is refused
$t->psql("UPDATE person_documents SET approved = true"
         . " WHERE id = '$docs[0]'");
$r = put($body);
is($r->{json}{data}{approved}, JSON::PP::true,
   '5 MB again, the same: approved kept');

# an error found late in megabytes of base64 is still found
my $bad = encode_base64($big, '') . '*';
$r = put(body($docs[0], $bad));
is($r->{status}, 400, 'invalid at the end of 6.7 MB: 400');
is($r->{json}{errors}[0], 'base64 has an invalid character at position '
                          . length($bad) . '.',
   'invalid at the end of 6.7 MB: says where');
is(stored($docs[0]), "$sha $sha 5000000 1", 'and nothing was changed');

# clients that go away while their document is read, parsed, decoded or
# stored, at times spread over the work: a thread still writing into the
# request's memory needs it to outlive the client (the sanitizer build
# checks that); the worker goes on
for my $wait (0.02, 0.05, 0.1, 0.15, 0.2, 0.3) {
    my $raw = "PUT /api/v1/PersonDocuments/update HTTP/1.1\r\n"
              . "Host: localhost\r\nAuthorization: Bearer $token\r\n"
              . "Content-Type: application/json\r\n"
              . 'Content-Length: ' . length($body) . "\r\n"
              . "Connection: close\r\n\r\n$body";
    $t->raw_request($raw, timeout => $wait);
}
is($t->request('GET', '/static')->{status}, 200,
   'clients that left: the worker goes on');
ok($t->wait_until(sub { $t->psql("SELECT count(*) FROM pg_stat_activity"
                                 . " WHERE application_name = 'ngx_platform'"
                                 . " AND datname = current_database()"
                                 . " AND state = 'active'") == 0 }, 10),
   'and nothing is left running');
is(stored($docs[0]), "$sha $sha 5000000 1",
   'the same content from clients that left: nothing changed');

### the worker is not stalled while documents are decoded

my @bodies = map { body($docs[$_], encode_base64(content(5_000_000, $_ + 1)))
                 } 1 .. 4;

# Warm up: the worker's PostgreSQL connections, the pool's threads, and
# the memory that four documents at once take in the worker (the
# transport's copy of the parameters, libpq's output buffers). The first
# touch of each page of fresh memory is a page fault, slow on some
# virtual machines (tens of milliseconds for 5 MB); a worker that has
# run a while reuses its heap, as it does from here on.
for my $h (map { (my $b = $bodies[$_]) =~ s/$docs[$_ + 1]/$docs[$_ + 5]/;
                  put($b, async => 1) } 0 .. 3)
{
    is($h->wait->{status}, 200, 'warm up');
}

# CPU seconds of the worker: its event loop (the main thread) and all of
# its threads
my ($worker) = $t->workers;
my $tick = POSIX::sysconf(POSIX::_SC_CLK_TCK()) || 100;

sub cpu {
    my ($file) = @_;
    open my $fh, '<', $file or return undef;
    my ($after) = (<$fh> // '') =~ /\)\s+(.*)/ or return undef;
    my @f = split ' ', $after;            # from field 3, the state
    return ($f[11] + $f[12]) / $tick;     # utime + stime
}

my $loop0 = cpu("/proc/$worker/task/$worker/stat");
my $all0 = cpu("/proc/$worker/stat");

my @slow = map { put($_, async => 1) } @bodies;
my %done;

my @times;
my $start = time;
while (time - $start < 20) {
    my $q = $t->request('GET', '/static');
    is($q->{status}, 200, 'quick request') if $q->{status} != 200;
    push @times, $q->{time};

    for my $h (@slow) {
        $done{$h->pid} //= 1
            if waitpid($h->pid, POSIX::WNOHANG()) == $h->pid;
    }
    last if keys %done == @slow;

    # a stream, not a flood: the machine's cores go to the documents
    sleep 0.005;
}
my $window = time - $start;
my $loop = cpu("/proc/$worker/task/$worker/stat");
my $all = cpu("/proc/$worker/stat");

for my $i (0 .. $#slow) {
    my $s = $slow[$i]->wait;
    is($s->{status}, 200, "document " . ($i + 1) . " of 4 stored")
        or diag($s->{content});
}

my $want = join ',', map { my $c = sha256_hex(content(5_000_000, $_ + 1));
                           "$c $c 5000000 0" } 1 .. 4;
is(join(',', map { stored($docs[$_]) } 1 .. 4), $want,
   'the four documents, byte for byte');

my @sorted = sort { $a <=> $b } @times;
my $max = $sorted[-1];
diag(sprintf('%d quick requests in %.2f s while 4 documents of 5 MB were '
             . 'stored: median %.1f ms, max %.1f ms',
             scalar @times, $window, 1000 * $sorted[@sorted / 2],
             1000 * $max));
cmp_ok(scalar @times, '>=', 10, 'quick requests were made meanwhile');
cmp_ok($max, '<', 0.25, 'each answered within 250 ms');

SKIP: {
    skip 'no per-thread CPU times in /proc', 1
        unless defined $loop0 && defined $loop && defined $all0
               && defined $all && $all > $all0;

    my ($on_loop, $total) = ($loop - $loop0, $all - $all0);
    diag(sprintf('worker CPU meanwhile: %.2f s, of which %.2f s on its '
                 . 'event loop', $total, $on_loop));
    cmp_ok($on_loop, '<=', $total / 2,
           'most of the work ran off the event loop');
}

$t->done;
done_testing;
