#!/usr/bin/perl

# platform_redis with a host name: resolved on every (re)connect by nginx's
# resolver (the "resolver" of the http block), never by a blocking
# getaddrinfo() in the worker. A tiny DNS server in this file answers for
# redis.test; what it answers changes as the test goes on.

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use IO::Socket::INET;
use POSIX ();
use Time::HiRes qw(sleep time);
use Platform::Test;

my $t = Platform::Test->new(workers => 1, db => 0);

my $redis = $t->start_private_redis;
my $rport = $redis->port;
my $dir = $t->testdir;

### the DNS server

# what it answers: "a ADDR" (an A record), "nx" (NXDOMAIN), "silent"
sub dns_mode {
    my ($mode) = @_;
    open my $fh, '>', "$dir/dns.mode.tmp" or die "dns.mode: $!";
    print $fh $mode;
    close $fh;
    rename "$dir/dns.mode.tmp", "$dir/dns.mode" or die "dns.mode: $!";
}

# queries for redis.test's A record seen so far
sub dns_queries {
    open my $fh, '<', "$dir/dns.log" or return 0;
    my $n = () = do { local $/; <$fh> } =~ /^A redis\.test$/mg;
    return $n;
}

dns_mode('a 127.0.0.1');

my $dns = IO::Socket::INET->new(Proto => 'udp', LocalAddr => '127.0.0.1',
                                LocalPort => 0)
    or die "dns socket: $@";
my $dns_port = $dns->sockport;

my $dns_pid = fork // die "fork: $!";
if ($dns_pid == 0) {
    $SIG{$_} = 'DEFAULT' for qw(INT TERM HUP);
    dns_serve($dns);
    POSIX::_exit(0);
}
close $dns;

sub dns_serve {
    my ($sock) = @_;
    my $parent = getppid;
    my $rin = '';
    vec($rin, fileno $sock, 1) = 1;

    while (kill 0, $parent) {
        next unless select(my $rout = $rin, undef, undef, 0.5);
        my $peer = $sock->recv(my $query, 512) // next;
        next if length $query < 12;

        my ($id, $flags) = unpack 'n n', $query;

        # the question: labels, then type and class
        my ($off, @labels) = (12);
        while ($off < length $query) {
            my $len = ord substr $query, $off, 1;
            $off++;
            last if $len == 0;
            push @labels, lc substr $query, $off, $len;
            $off += $len;
        }
        next if $off + 4 > length $query;
        my ($qtype) = unpack 'n', substr $query, $off, 2;
        my $question = substr $query, 12, $off + 4 - 12;
        my $name = join '.', @labels;

        open my $mfh, '<', "$dir/dns.mode" or next;
        my $mode = <$mfh>;
        close $mfh;

        open my $lfh, '>>', "$dir/dns.log" or next;
        printf $lfh "%s %s\n", $qtype == 1 ? 'A' : "T$qtype", $name;
        close $lfh;

        next if $mode eq 'silent';

        my ($rcode, $answer, $count) = (0, '', 0);

        if ($name ne 'redis.test' || $mode eq 'nx') {
            $rcode = 3;

        } elsif ($qtype == 1 && $mode =~ /^a (\S+)/) {
            # a pointer to the question's name, A, IN, TTL 1, 4 bytes
            $answer = pack('n n n N n', 0xc00c, 1, 1, 1, 4)
                      . pack('C4', split /\./, $1);
            $count = 1;
        }

        # an AAAA query gets an empty answer (NOERROR, no records)

        my $reply = pack('n n n n n n', $id, 0x8180 | ($flags & 0x0100)
                         | $rcode, 1, $count, 0, 0) . $question . $answer;
        $sock->send($reply, 0, $peer);
    }
}

END {
    local $?;
    if ($dns_pid && $$ != $dns_pid) {
        kill 'TERM', $dns_pid;
        waitpid $dns_pid, 0;
    }
}

### nginx

my $why = qr/"redis\.test:$rport" names a host: it needs a "resolver"/;
$t->config_refused(<<"EOF", $why,
    platform_redis redis.test:$rport;
    server {
        listen 127.0.0.1:%%PORT%%;
        location /validate-otp/ { platform_otp; }
    }
EOF
    'a host name without a resolver');

$t->run(<<"EOF");
    resolver 127.0.0.1:$dns_port valid=1s ipv6=off;
    resolver_timeout 1s;

    platform_redis redis.test:$rport;
    platform_redis_connect_timeout 500ms;
    platform_redis_timeout 500ms;

    server {
        listen 127.0.0.1:%%PORT%%;
        location /validate-otp/ { platform_otp; }
        location /ok { return 200; }
    }
EOF

my %h = (tenantId => 'tenant', countryCode => 'NG');

sub otp {
    my ($code) = @_;
    return $t->request('GET', "/validate-otp/$code", headers => \%h);
}

sub otp_works {
    my ($r, $code) = @_;
    $r->redis('SET', "otp:tenant:NG:$code", 'x', 'EX', '60');
    return $t->wait_until(sub { otp($code)->{status} == 200 }, 15);
}

ok(otp_works($redis, '1234'), 'a host name resolved by the resolver');
ok(dns_queries() >= 1, 'asked the DNS server');
like($t->error_log,
     qr/redis: connected to "redis\.test:$rport" at 127\.0\.0\.1/,
     'connected to the resolved address');

# Redis restarts: the reconnect resolves again (the answer is valid 1 s)

$redis->stop;
is(otp('1234')->{status}, 503, 'Redis down: 503');
my $before = dns_queries();
sleep 1.5;
$redis->start;

ok(otp_works($redis, '2345'), 'reconnected after a restart');
ok(dns_queries() > $before, 'the reconnect asked the DNS server again');

# NXDOMAIN: no address, no connection

dns_mode('nx');
$redis->stop;
ok($t->wait_until(sub {
       $t->error_log =~ /"redis\.test" could not be resolved \(3: /
   }, 10), 'NXDOMAIN is logged');
$redis->start;
sleep 0.5;
is(otp('2345')->{status}, 503, 'Redis up but its name does not resolve: 503');

# another answer: the module follows the name to another server

my $other = "$dir/redis-other";
mkdir $other or die "mkdir: $!";
system('redis-server', '--port', $rport, '--bind', '127.0.0.2',
       '--daemonize', 'yes', '--dir', $other, '--pidfile',
       "$other/redis.pid", '--logfile', "$other/redis.log", '--save', '',
       '--appendonly', 'no') == 0 or die "redis-server on 127.0.0.2";
ok($t->wait_until(sub { -s "$other/redis.pid" }, 10), 'another Redis');
my $other_pid = do { open my $fh, '<', "$other/redis.pid"; <$fh> };
chomp $other_pid;

dns_mode('a 127.0.0.2');
my $set = qx{redis-cli -h 127.0.0.2 -p $rport SET otp:tenant:NG:3456 x};
die "redis-cli: $set" unless $set =~ /OK/;
ok($t->wait_until(sub { otp('3456')->{status} == 200 }, 15),
   'the new address is followed');
like($t->error_log, qr/connected to "redis\.test:$rport" at 127\.0\.0\.2/,
     'connected to the new address');

# a silent DNS server: the worker is not held up, OTP is 503

dns_mode('silent');
my $quiet = dns_queries();
kill 'TERM', $other_pid;
ok($t->wait_until(sub { !kill 0, $other_pid }, 10), 'the other Redis stops');
sleep 1.2;      # past the cached answer's validity

my @slow;
for my $i (1 .. 10) {
    my $r = $t->request('GET', '/ok');
    push @slow, $r->{time} if $r->{status} != 200 || $r->{time} > 0.5;
    $r = otp('3456');
    push @slow, "otp $r->{status}" if $r->{status} != 503;
    sleep 0.1;
}
ok(!@slow, 'requests are not held up while the DNS server is silent')
    or diag("@slow");
ok(dns_queries() > $quiet, 'the resolver was asked meanwhile');

# it answers again

dns_mode('a 127.0.0.1');
ok(otp_works($redis, '4567'), 'back once the name resolves again');

$t->done;
done_testing;
