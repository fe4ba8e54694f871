#!/usr/bin/perl

# Reads that meet in one pass of the event loop share one sync point
# (platform_pg_coalesce): requests sent in one write on one HTTP/2
# connection reach the worker in one pass. Two tenants in one segment,
# row-level security on and the statement's own tenant condition taken
# away, each see only their rows; a failing statement fails only its
# request, the reads behind it in the segment sent again alone; a write
# closes the segment before it; clients that leave while their segment
# waits, and a connection lost under a segment, leave the pool in good
# order; platform_pg_prepare off shares too; a lone request's latency is
# not increased (no wait for a batch); off, every read has its own sync
# point.

# platform-test: serial (time bounds)

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use IO::Socket::INET;
use IO::Select;
use JSON::PP ();
use POSIX ();
use Time::HiRes qw(sleep time);
use Platform::Test;

my $t = Platform::Test->new(workers => 1, log_level => 'debug');

my %A = map { $_ => sprintf('a8200000-0000-4000-8000-%012d', $_) } 1 .. 4;
my %B = map { $_ => sprintf('b8200000-0000-4000-8000-%012d', $_) } 1 .. 4;
my $boom = 'c8200000-0000-4000-8000-000000000001';
my $pending = 'd8200000-0000-4000-8000-000000000001';
my $driver = 'e8200000-0000-4000-8000-000000000001';

$t->psql(join('', map { <<"SQL" } 1 .. 4) . <<"SQL");
INSERT INTO delivery_orders (id, tenant_id, country_code, order_number,
                             status, pickup_address, dropoff_address)
VALUES ('$A{$_}', 'tenant-a', 'NG', 'DO-A$_', 'PENDING', '{}', '{}'),
       ('$B{$_}', 'tenant-b', 'NG', 'DO-B$_', 'PENDING', '{}', '{}');
SQL
INSERT INTO delivery_orders (id, tenant_id, country_code, order_number,
                             status, pickup_address, dropoff_address)
VALUES ('$boom', 'tenant-boom', 'NG', 'DO-X', 'PENDING', '{}', '{}'),
       ('$pending', 'tenant-a', 'NG', 'DO-P', 'PENDING', '{}', '{}');
INSERT INTO drivers (id, tenant_id, country_code, user_id, name, phone,
                     vehicle_type, status)
VALUES ('$driver', 'tenant-a', 'NG', 'u-82', 'Driver', '+2348060000082',
        'VAN', 'AVAILABLE');
SQL

# Every statement of tenant-boom's scope fails (a one-time filter: the
# function reads no row); the statement's tenant condition is taken away
# (a view whose tenant_id is always the caller's scope), so that only
# row-level security, under each statement's own scope, tells the
# tenants apart.
$t->psql(<<'SQL');
CREATE FUNCTION t82_boom() RETURNS boolean STABLE LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('app.tenant_id', true) = 'tenant-boom' THEN
        RAISE EXCEPTION 'boom';
    END IF;
    RETURN true;
END
$$;
CREATE POLICY t82_boom ON delivery_orders AS RESTRICTIVE FOR SELECT
    USING (t82_boom());
SQL
$t->psql(Platform::Test::tenant_blind_view('delivery_orders')
         . 'GRANT SELECT, UPDATE ON delivery_orders TO platform_module;');

$t->ignore_log(qr/statement "platform_tms_delivery_order" failed: .*boom/);
$t->ignore_log(qr/PostgreSQL connection lost/);

sub conf {
    my ($extra) = @_;
    $extra //= '';
    return <<"EOF";
    platform_cache_time 0;
    platform_pg_tenant_share 100;
    platform_pg_pool_size 1;
    platform_pg_pipeline_depth 16;
$extra
    server {
        listen 127.0.0.1:%%PORT%%;
        listen 127.0.0.1:%%PORT_2%% http2;
        location /tms/ { platform_tms; platform_auth tenant; }
    }
EOF
}

$t->run(conf());

# the segments' sizes are read in the debug log
my $debug = $t->error_log =~ /\[debug\]/;

### HTTP/2 in clear text (prior knowledge), by hand: every request of a
### burst leaves in one write, which the worker reads in one pass

sub h2_frame {
    my ($type, $flags, $id, $payload) = @_;
    my $len = length $payload;
    return pack('CnCCN', $len >> 16, $len & 0xffff, $type, $flags, $id)
           . $payload;
}

# an HPACK string, literal, short
sub hpack_str {
    my ($s) = @_;
    die "hpack_str: too long\n" if length $s > 126;
    return chr(length $s) . $s;
}

sub h2_block {
    my ($method, $path, %h) = @_;
    my $b = $method eq 'GET' ? "\x82" : "\x02" . hpack_str($method);
    $b .= "\x86" . "\x04" . hpack_str($path) . "\x01" . hpack_str('localhost');
    $b .= "\x00" . hpack_str(lc $_) . hpack_str($h{$_}) for sort keys %h;
    return $b;
}

# the :status nginx writes first: indexed (the static table's) or literal
my %indexed = (8 => 200, 9 => 204, 10 => 206, 11 => 304, 12 => 400,
               13 => 404, 14 => 500);

sub h2_status {
    my ($block) = @_;
    my $b = ord $block;
    return $indexed{$b & 0x7f} // -1 if $b & 0x80;
    return substr($block, 2, ord(substr($block, 1, 1)) & 0x7f);
}

# [[method, path, headers...], ...] in one write; [{status, content}] in
# order (599: no answer in time); close => $s: the client leaves after $s
# seconds, unanswered
sub h2_burst {
    my ($reqs, %o) = @_;

    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
                                  PeerPort => $t->port(2), Proto => 'tcp')
        or die "connect: $!\n";

    my $out = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" . h2_frame(4, 0, 0, '');
    my $id = 1;
    for my $r (@$reqs) {
        $out .= h2_frame(1, 0x5, $id, h2_block(@$r));
        $id += 2;
    }
    syswrite($s, $out) == length $out or die "write: $!\n";

    if ($o{close}) {
        # once the worker has read them
        sleep $o{close};
        close $s;
        return [];
    }

    my (%res, $buf);
    my $open = @$reqs;
    my $sel = IO::Select->new($s);
    my $deadline = time + ($o{timeout} // 10);
    $buf = '';

    while ($open > 0 && time < $deadline) {
        last unless $sel->can_read($deadline - time);
        last unless sysread($s, $buf, 65536, length $buf);

        while (length $buf >= 9) {
            my ($l1, $l2, $type, $flags, $sid) = unpack('CnCCN', $buf);
            my $len = ($l1 << 16) | $l2;
            last if length $buf < 9 + $len;
            my $payload = substr($buf, 9, $len);
            substr($buf, 0, 9 + $len) = '';
            $sid &= 0x7fffffff;

            syswrite($s, h2_frame(4, 1, 0, '')) if $type == 4 && !($flags & 1);
            next unless $sid;

            my $r = $res{$sid} //= { status => 0, content => '' };
            if ($type == 1) {
                $r->{status} = h2_status($payload);
            } elsif ($type == 0) {
                $r->{content} .= $payload;
            } elsif ($type == 3) {
                $r->{status} ||= 'reset';
                $open--;
                next;
            }
            $open-- if $flags & 1 && ($type == 0 || $type == 1);
        }
    }
    close $s;

    $id = -1;
    return [ map { $id += 2; $res{$id} // { status => 599, content => '' } }
             @$reqs ];
}

my $h2_async = 0;

sub h2_burst_async {
    my ($reqs) = @_;
    my $file = $t->testdir . "/h2-$$-" . ++$h2_async . '.json';
    my $pid = fork // die "fork: $!\n";
    if ($pid == 0) {
        my $res = h2_burst($reqs);
        open(my $fh, '>', "$file.tmp") or POSIX::_exit(1);
        print $fh JSON::PP->new->latin1->encode($res);
        close $fh;
        rename "$file.tmp", $file;
        POSIX::_exit(0);
    }
    return Platform::Test::Async->new($pid, sub {
        open(my $fh, '<', $file) or die "h2_burst_async: no result\n";
        local $/;
        my $res = JSON::PP->new->latin1->decode(<$fh>);
        close $fh;
        unlink $file;
        return $res;
    });
}

sub order {
    my ($tenant, $id) = @_;
    return [ 'GET', "/tms/delivery-orders/$id",
             tenantId => $tenant, countryCode => 'NG' ];
}

sub assign {
    return [ 'PATCH', "/tms/delivery-orders/$pending/assign/$driver",
             tenantId => 'tenant-a', countryCode => 'NG' ];
}

# what one answer shows: "200 DO-A1", "404", "500"
sub shown {
    my ($r) = @_;
    return $r->{status} unless $r->{status} eq '200'
                               && $r->{content} =~ /"orderNumber":"([^"]+)"/;
    return "200 $1";
}

sub shown_all { join ' ', map { shown($_) } @{$_[0]} }

# the sizes of the segments of reads closed since the log had $from bytes
sub syncs {
    my ($from) = @_;
    my $log = substr($t->error_log, $from);
    return join ' ', $log =~ /platform pg primary sync after (\d+) reads/g;
}

sub log_size { length $t->error_log }

# a test on the debug log, skipped without one
sub in_log {
    my ($test, @args) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    SKIP: {
        skip('nginx is built without --with-debug', 1) unless $debug;
        $test->(@args);
    }
}

sub backends {
    return $t->psql("SELECT coalesce(string_agg(pid::text, ','), '')"
                    . " FROM pg_stat_activity"
                    . " WHERE application_name = 'ngx_platform'"
                    . " AND datname = current_database()");
}

# the statements (the scope's, the order's) prepared on the one connection
is(shown($t->request('GET', "/tms/delivery-orders/$A{1}",
                     headers => { tenantId => 'tenant-a',
                                  countryCode => 'NG' })),
   '200 DO-A1', 'HTTP/1.1: an order of tenant-a');
is(shown(h2_burst([ order('tenant-b', $B{1}) ])->[0]), '200 DO-B1',
   'HTTP/2: an order of tenant-b');

### two tenants in one segment, each under its own scope

# a read sets its scope unless the read before it in the segment set the
# same (the setting lasts until the sync point)
my @turns = (['a', 1], ['a', 2], ['b', 1], ['b', 2], ['a', 3], ['b', 3],
             ['b', 4], ['a', 4]);

sub turn {
    my ($tenant, $n) = @{$_[0]};
    return order("tenant-$tenant", $tenant eq 'a' ? $A{$n} : $B{$n});
}

my $turns = '200 DO-A1 200 DO-A2 200 DO-B1 200 DO-B2 200 DO-A3 200 DO-B3'
            . ' 200 DO-B4 200 DO-A4';

my $from = log_size();
my @r = map { turn($_) } @turns;
push @r, order('tenant-a', $B{1}), order('tenant-a', $B{2}),
         order('tenant-b', $A{1});

is(shown_all(h2_burst(\@r)), "$turns 404 404 404",
   'two tenants in one segment: each its own orders, not the other\'s');
in_log(\&is, syncs($from), '11', 'one sync point for the eleven reads');

### a failing statement fails only its own request

$from = log_size();
@r = (order('tenant-a', $A{1}), order('tenant-a', $A{2}),
      order('tenant-boom', $boom), order('tenant-b', $B{1}),
      order('tenant-b', $B{2}), order('tenant-boom', $boom),
      order('tenant-a', $A{3}), order('tenant-a', $A{4}));

is(shown_all(h2_burst(\@r)),
   '200 DO-A1 200 DO-A2 500 200 DO-B1 200 DO-B2 500 200 DO-A3 200 DO-A4',
   'the failing statements fail their requests only');
my $log = substr($t->error_log, $from);
in_log(\&is, syncs($from), '8', 'the eight reads shared one sync point');
in_log(\&is, scalar(() = $log =~ /"platform_tms_delivery_order" sent again/g),
       5, 'the five aborted behind the first failure were sent again alone');

### a write closes the segment before it

is(h2_burst([ assign() ])->[0]{status}, 200, 'a write alone (prepared)');

$from = log_size();
@r = (order('tenant-a', $A{1}), order('tenant-b', $B{1}), assign(),
      order('tenant-a', $A{2}), order('tenant-b', $B{2}),
      order('tenant-b', $B{3}));
my $res = h2_burst(\@r);
is(join(' ', map { $_->{status} } @$res), '200 200 200 200 200 200',
   'reads and a write in one pass: all served');
in_log(\&is, syncs($from), '2 3', 'the write had a sync point of its own');

### clients that leave while their segment waits; a connection lost

my $pid = backends();
like($pid, qr/^\d+$/, 'one connection');

my $lock = $t->hold_lock('delivery_orders_guarded', 0.5);
h2_burst([ map { (order('tenant-a', $A{$_}), order('tenant-boom', $boom)) }
           1 .. 3 ], close => 0.1);
$lock->wait;

ok($t->wait_until(sub {
    shown(h2_burst([ order('tenant-b', $B{4}) ])->[0]) eq '200 DO-B4'
}, 3), 'clients gone from a failed segment: its results dropped, served');
is(backends(), $pid, 'on the same connection');

$lock = $t->hold_lock('delivery_orders_guarded', 1);
my $h = $t->request_async('GET', "/tms/delivery-orders/$A{1}",
                          headers => { tenantId => 'tenant-a',
                                       countryCode => 'NG' });
sleep 0.2;
my $w = h2_burst_async([ map { order('tenant-b', $B{$_}) } 1 .. 4 ]);
sleep 0.3;
$t->psql("SELECT pg_terminate_backend($pid)");
is($h->wait->{status}, 503, 'a connection lost: the read before, 503');
is(join(' ', map { $_->{status} } @{$w->wait}), '503 503 503 503',
   'the segment, 503');
$lock->wait;
is(shown(h2_burst([ order('tenant-a', $A{1}) ])->[0]), '200 DO-A1',
   'then served on a new connection');

### platform_pg_prepare off: unnamed statements share too

ok($t->reload(conf('    platform_pg_prepare off;')), 'reload: prepare off');
ok($t->wait_until(sub { backends() eq '' }, 10), 'the old connection gone');

$from = log_size();
@r = map { turn($_) } @turns;
push @r, order('tenant-boom', $boom), order('tenant-a', $A{1});
is(shown_all(h2_burst(\@r)), "$turns 500 200 DO-A1",
   'prepare off: two tenants and a failure in one segment');
in_log(\&like, syncs($from), qr/^10$|^1 9$/,
       'one sync point (after the connect)');

### a lone request waits for no batch; off, no read shares

sub lone {
    my @t;
    for (1 .. 20) {
        my $r = $t->request('GET', "/tms/delivery-orders/$A{1}",
                            headers => { tenantId => 'tenant-a',
                                         countryCode => 'NG' });
        return -1 unless $r->{status} == 200;
        push @t, $r->{time};
    }
    @t = sort { $a <=> $b } @t;
    return $t[10];
}

my $on = lone();

ok($t->reload(conf('    platform_pg_coalesce off;')), 'reload: off');
my $off = lone();

cmp_ok($on, '>', 0, 'lone requests served');
cmp_ok($on, '<', 0.05, "a lone request's median time, well under 50 ms")
    or diag("on $on s, off $off s");
cmp_ok($on, '<', 3 * $off + 0.01, 'and not above the time without sharing')
    or diag("on $on s, off $off s");

$from = log_size();
is(shown_all(h2_burst([ map { order('tenant-a', $A{$_}) } 1 .. 4 ])),
   '200 DO-A1 200 DO-A2 200 DO-A3 200 DO-A4', 'off: served');
in_log(\&is, syncs($from), '', 'off: no read shares a sync point');

$t->config_refused(conf('    platform_pg_coalesce maybe;'),
                   qr/invalid value "maybe".*platform_pg_coalesce/,
                   'platform_pg_coalesce maybe');

$t->done;
done_testing;
