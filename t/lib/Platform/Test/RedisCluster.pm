package Platform::Test::RedisCluster;

=head1 NAME

Platform::Test::RedisCluster - a real Redis Cluster for a test

=head1 SYNOPSIS

    my $cl = $t->start_redis_cluster;            # 3 masters, 1 replica each
    my @seeds = $cl->seeds;                      # "127.0.0.1:PORT", masters
    my $m = $cl->master_of_slot($cl->slot_of('{tenant-a}'));
    $cl->move_slot($slot, $other_master);
    my $old = $cl->kill_master($m);
    my $took = $cl->wait_failover($old, 10);

=head1 DESCRIPTION

Six redis-server nodes with C<cluster-enabled yes> and a
C<cluster-node-timeout> of 1 s on free loopback ports (each port and its
bus port, +10000, free), joined with C<redis-cli --cluster create
--cluster-replicas 1>. The constructor returns once every node says
C<cluster_state:ok> with all 16384 slots served, knows every other node,
and its replica is in sync. Each node's pid file is F<DIR/redisN/redis.pid>,
which the suite's cleanup finds if the test is interrupted; a killed
node's is removed.

=cut

use strict;
use warnings;

use IO::Socket::INET;
use Time::HiRes qw(sleep time);

sub new {
    my ($class, $dir, %o) = @_;
    my $masters = $o{masters} // 3;
    my $replicas = $o{replicas} // 1;
    mkdir $dir or die "mkdir $dir: $!\n";

    my $self = bless { dir => $dir, nodes => [], owner => $$, killed => {} },
        $class;

    for my $i (1 .. $masters * (1 + $replicas)) {
        my $port = _cluster_port();
        my $d = "$dir/redis$i";
        mkdir $d or die "mkdir $d: $!\n";
        my ($ok, $out, $err) = Platform::Test::_capture('redis-server',
            '--port', $port, '--bind', '127.0.0.1', '--daemonize', 'yes',
            '--dir', $d, '--pidfile', "$d/redis.pid",
            '--logfile', "$d/redis.log", '--save', '', '--appendonly', 'no',
            '--cluster-enabled', 'yes',
            '--cluster-config-file', "$d/nodes.conf",
            '--cluster-node-timeout', $o{node_timeout} // 1000,
            # replicas in sync at once, and a replica may always take over
            '--repl-diskless-sync-delay', 0,
            '--cluster-replica-validity-factor', 0,
            '--maxmemory', '256mb', '--maxmemory-policy', 'volatile-lru');
        die "redis-server: $err$out\n" unless $ok;
        push @{$self->{nodes}}, { port => $port, dir => $d };
    }

    # a daemon listens before it writes its pid file
    for my $n (@{$self->{nodes}}) {
        Platform::Test::_wait(sub {
            Platform::Test::_port_open($n->{port})
            && ($n->{pid} = Platform::Test::_read_pid("$n->{dir}/redis.pid"))
        }, 10) or die "redis-server on $n->{port} did not start\n";
    }

    my ($ok, $out, $err) = Platform::Test::_capture('redis-cli',
        '--cluster', 'create', (map { "127.0.0.1:$_->{port}" }
                                @{$self->{nodes}}),
        '--cluster-replicas', $replicas, '--cluster-yes');
    die "redis-cli --cluster create: $err$out\n" unless $ok;

    # every node ok, with every slot served, and every node's view of the
    # others complete: the masters with slots, the replicas with a master
    my $all = @{$self->{nodes}};
    Platform::Test::_wait(sub {
        for my $n (@{$self->{nodes}}) {
            my $addr = $self->addr_of($n);
            my $info = $self->redis_at($addr, 'CLUSTER', 'INFO');
            return 0 unless $info =~ /^cluster_state:ok/m
                && $info =~ /^cluster_slots_ok:16384/m
                && $info =~ /^cluster_known_nodes:$all\b/m;
            my @rows = $self->_table($addr);
            my $m = grep { $_->{flags} =~ /master/ && @{$_->{ranges}} }
                @rows;
            my $r = grep { $_->{flags} =~ /slave/ && $_->{master} ne '-' }
                @rows;
            return 0 unless $m == $masters && $r == $all - $masters;
        }
        return 1;
    }, 20) or die "the cluster is not ok\n";

    # a failover needs replicas that have their master's data
    Platform::Test::_wait(sub {
        for my $n (@{$self->{nodes}}) {
            my $info = $self->redis_at("127.0.0.1:$n->{port}", 'INFO',
                                       'replication');
            return 0 if $info =~ /^role:slave/m
                        && $info !~ /^master_link_status:up/m;
        }
        return 1;
    }, 20) or die "the cluster's replicas are not in sync\n";

    return $self;
}

# A free port whose bus port (+10000) is free too, and below both 55535
# and the kernel's ephemeral range, where an outgoing connection could
# take it meanwhile
sub _cluster_port {
    my ($low) = split ' ', Platform::Test::_slurp(
        '/proc/sys/net/ipv4/ip_local_port_range') // '32768';
    $low = 32768 if !$low || $low > 55535;
    for (1 .. 200) {
        my $port = Platform::Test::free_port();
        next if $port + 10000 >= $low;
        my $bus = IO::Socket::INET->new(LocalAddr => '127.0.0.1',
                                        LocalPort => $port + 10000,
                                        Listen => 1, ReuseAddr => 1)
            or next;
        close $bus;
        return $port;
    }
    die "no free port for a cluster node\n";
}

sub _alive_nodes {
    my ($self) = @_;
    return grep { $_->{pid} && Platform::Test::_alive($_->{pid}) }
        @{$self->{nodes}};
}

sub addr_of { "127.0.0.1:$_[1]{port}" }

=head2 Methods

=over

=item seeds, nodes, masters

The masters at creation (C<127.0.0.1:PORT>, a configuration's seeds);
every node's address, live or not; the live masters now, as a live node
sees them.

=item slot_of($key)

The key's slot, computed here as the Redis Cluster specification says:
CRC16-XMODEM of the key's bytes, or of its hash tag (what is between the
first C<{> and the first C<}> after it, when not empty), modulo 16384.
Also a class method; C<crc16($bytes)> is the checksum alone.

=item master_of_slot($slot [, $seen_from])

The master serving the slot, as a live node (or the node given) sees it.

=item node_id($addr), redis_at($addr, @cmd), redis(@cmd)

A node's id; redis-cli on one node; redis-cli C<-c> on a live node,
following redirections. Both return the output without its last newline
(errors such as C<MOVED ...> included).

=item move_slot($slot, $to)

Moves the slot and its keys to the master C<$to>: C<CLUSTER SETSLOT
IMPORTING> on it, C<MIGRATING> on the owner, C<MIGRATE> of the keys
C<GETKEYSINSLOT> finds, 100 at a time, then C<SETSLOT NODE> on the new
owner, the old one and the other masters. Returns once every live node
has the slot on C<$to>.

=item move_slot_begin($slot, $to), move_slot_finish($slot, $to [, $from])

The two halves of C<move_slot> (C<begin> returns the old owner): between
them the slot is in migration, and a key the old owner lacks is answered
with C<-ASK>.

=item kill_master($addr)

SIGKILLs the node and returns its address.

=item wait_failover($old_addr, $seconds)

Waits until one of the killed master's replicas is a master (C<ROLE> and
the cluster's view), the old one holds no slot, and every live node says
C<cluster_state:ok>. Returns the seconds it took, counted from the
C<kill_master> of C<$old_addr> (else from the call), or undef after
C<$seconds> (default 10).

=item wait_ok($seconds), stop

Waits until every live node says C<cluster_state:ok>; stops every node
(C<DESTROY> does it too).

=back

=cut

sub seeds {
    my ($self) = @_;
    return @{$self->{seeds} //= [ $self->masters ]};
}

sub nodes { map { "127.0.0.1:$_->{port}" } @{$_[0]{nodes}} }

sub redis_at {
    my ($self, $addr, @cmd) = @_;
    my ($port) = $addr =~ /:(\d+)$/;
    my ($ok, $out) = Platform::Test::_capture('redis-cli', '-h', '127.0.0.1',
                                              '-p', $port, @cmd);
    $out //= '';
    chomp $out;
    return $out;
}

sub redis {
    my ($self, @cmd) = @_;
    my ($n) = $self->_alive_nodes or die "no live cluster node\n";
    my ($ok, $out) = Platform::Test::_capture('redis-cli', '-c',
        '-h', '127.0.0.1', '-p', $n->{port}, @cmd);
    $out //= '';
    chomp $out;
    return $out;
}

# CRC16-XMODEM (polynomial 0x1021, initial 0) of the key's bytes, or of
# its hash tag: what is between its first '{' and the first '}' after it,
# when that is not empty (the Redis Cluster specification)
sub slot_of {
    my ($self, $key) = @_;
    utf8::encode($key) if utf8::is_utf8($key);
    my $open = index $key, '{';
    if ($open >= 0) {
        my $close = index $key, '}', $open + 1;
        $key = substr $key, $open + 1, $close - $open - 1
            if $close > $open + 1;
    }
    return crc16($key) % 16384;
}

sub crc16 {
    my ($bytes) = @_;
    my $crc = 0;
    for my $c (unpack 'C*', $bytes) {
        $crc ^= $c << 8;
        for (1 .. 8) {
            $crc = $crc & 0x8000 ? (($crc << 1) ^ 0x1021) & 0xffff
                                 : ($crc << 1) & 0xffff;
        }
    }
    return $crc;
}

# CLUSTER NODES seen from a node (a live one unless given):
# { addr, id, flags, master (its master's id, '-' for a master), link,
#   ranges => [[first, last], ...] }; importing and migrating marks are
# left out of the ranges
sub _table {
    my ($self, $from) = @_;
    if (!$from) {
        my ($n) = $self->_alive_nodes or return ();
        $from = "127.0.0.1:$n->{port}";
    }
    my @rows;
    for my $line (split /\n/, $self->redis_at($from, 'CLUSTER', 'NODES')) {
        my ($id, $addr, $flags, $master, $ps, $pr, $epoch, $link, @slots)
            = split ' ', $line;
        next unless $addr && $addr =~ /^[\d.]+:\d+/;
        $addr =~ s/@.*//;
        push @rows, { id => $id, addr => $addr, flags => $flags,
                      master => $master, link => $link,
                      ranges => [ map { /^(\d+)(?:-(\d+))?$/
                                        ? [$1, $2 // $1] : () } @slots ] };
    }
    return @rows;
}

sub masters {
    my ($self) = @_;
    return map { $_->{addr} }
        grep { $_->{flags} =~ /master/ && $_->{flags} !~ /fail/ }
        $self->_table;
}

sub master_of_slot {
    my ($self, $slot, $seen_from) = @_;
    for my $row ($self->_table($seen_from)) {
        next unless $row->{flags} =~ /master/;
        for my $r (@{$row->{ranges}}) {
            return $row->{addr} if $slot >= $r->[0] && $slot <= $r->[1];
        }
    }
    return undef;
}

sub node_id {
    my ($self, $addr) = @_;
    return $self->redis_at($addr, 'CLUSTER', 'MYID');
}

sub move_slot_begin {
    my ($self, $slot, $to) = @_;
    my $from = $self->master_of_slot($slot);
    $self->redis_at($to, 'CLUSTER', 'SETSLOT', $slot, 'IMPORTING',
                    $self->node_id($from));
    $self->redis_at($from, 'CLUSTER', 'SETSLOT', $slot, 'MIGRATING',
                    $self->node_id($to));
    return $from;
}

sub move_slot_finish {
    my ($self, $slot, $to, $from) = @_;
    $from //= $self->master_of_slot($slot);
    my ($host, $port) = split /:/, $to;
    for (1 .. 1000) {
        my @keys = grep { length }
            split /\n/, $self->redis_at($from, 'CLUSTER', 'GETKEYSINSLOT',
                                        $slot, 100);
        last unless @keys;
        $self->redis_at($from, 'MIGRATE', $host, $port, '', 0, 5000,
                        'KEYS', @keys);
    }
    my $id = $self->node_id($to);
    # the new owner first, then the old one, then the others
    $self->redis_at($to, 'CLUSTER', 'SETSLOT', $slot, 'NODE', $id);
    $self->redis_at($from, 'CLUSTER', 'SETSLOT', $slot, 'NODE', $id);
    for my $m ($self->masters) {
        next if $m eq $to || $m eq $from;
        $self->redis_at($m, 'CLUSTER', 'SETSLOT', $slot, 'NODE', $id);
    }

    # done when every live node, replicas too, has the slot on its new owner
    Platform::Test::_wait(sub {
        for my $n ($self->_alive_nodes) {
            my $owner = $self->master_of_slot($slot, $self->addr_of($n));
            return 0 unless $owner && $owner eq $to;
        }
        return 1;
    }, 10) or die "slot $slot: not every node has it on $to\n";
    return $self;
}

sub move_slot {
    my ($self, $slot, $to) = @_;
    return $self if ($self->master_of_slot($slot) // '') eq $to;
    my $from = $self->move_slot_begin($slot, $to);
    return $self->move_slot_finish($slot, $to, $from);
}

sub kill_master {
    my ($self, $addr) = @_;
    my ($port) = $addr =~ /:(\d+)$/;
    my ($n) = grep { $_->{port} == $port } @{$self->{nodes}};
    die "no node $addr\n" unless $n && $n->{pid};
    # its replicas, to see one of them promoted
    my ($row) = grep { $_->{addr} eq $addr } $self->_table;
    $self->{replicas_of}{$addr} = [ map { $_->{addr} }
        grep { $row && $_->{master} eq $row->{id} } $self->_table ];
    my $pid = delete $n->{pid};
    kill 'KILL', $pid;
    $self->{killed}{$addr} = time;
    Platform::Test::_wait(sub { !Platform::Test::_alive($pid) }, 5);
    unlink "$n->{dir}/redis.pid";
    return $addr;
}

sub wait_ok {
    my ($self, $seconds) = @_;
    return Platform::Test::_wait(sub { $self->_all_ok }, $seconds // 10);
}

# every live node says ok
sub _all_ok {
    my ($self) = @_;
    for my $n ($self->_alive_nodes) {
        return 0 unless $self->redis_at($self->addr_of($n), 'CLUSTER',
                                        'INFO') =~ /^cluster_state:ok/m;
    }
    return 1;
}

sub wait_failover {
    my ($self, $old, $seconds) = @_;
    my $start = delete $self->{killed}{$old} // time;
    my %replica = map { $_ => 1 } @{$self->{replicas_of}{$old} // []};
    my $ok = Platform::Test::_wait(sub {
        # one of its replicas a master now, in its own eyes and the others'
        my @new = grep { %replica ? $replica{$_} : $_ ne $old }
            $self->masters or return 0;
        return 0 unless grep {
            $self->redis_at($_, 'ROLE') =~ /\Amaster\n/
        } @new;
        # serving the old master's slots: it holds none any more
        return 0 if grep { $_->{addr} eq $old && @{$_->{ranges}} }
                        $self->_table;
        return $self->_all_ok;
    }, $seconds // 10);
    return $ok ? time - $start : undef;
}

sub stop {
    my ($self) = @_;
    for my $n (@{$self->{nodes}}) {
        my $pid = delete $n->{pid} or next;
        kill 'TERM', $pid;
        Platform::Test::_wait(sub { !Platform::Test::_alive($pid) }, 10)
            or kill 'KILL', $pid;
    }
    return $self;
}

sub DESTROY {
    my ($self) = @_;
    local ($@, $!, $?);
    eval { $self->stop } if $$ == $self->{owner};
}

1;
