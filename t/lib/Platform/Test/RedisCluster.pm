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
C<cluster_state:ok>. Each node's pid file is F<DIR/redisN/redis.pid>,
which the suite's cleanup finds if the test is interrupted.

=cut

use strict;
use warnings;

use Time::HiRes qw(sleep time);

sub new {
    my ($class, $dir, %o) = @_;
    my $masters = $o{masters} // 3;
    my $replicas = $o{replicas} // 1;
    mkdir $dir or die "mkdir $dir: $!\n";

    my $self = bless { dir => $dir, nodes => [] }, $class;

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

    for my $n (@{$self->{nodes}}) {
        Platform::Test::_wait(sub {
            Platform::Test::_port_open($n->{port})
        }, 10) or die "redis-server on $n->{port} did not start\n";
        $n->{pid} = Platform::Test::_read_pid("$n->{dir}/redis.pid");
    }

    my ($ok, $out, $err) = Platform::Test::_capture('redis-cli',
        '--cluster', 'create', (map { "127.0.0.1:$_->{port}" }
                                @{$self->{nodes}}),
        '--cluster-replicas', $replicas, '--cluster-yes');
    die "redis-cli --cluster create: $err$out\n" unless $ok;

    $self->wait_ok(20) or die "the cluster is not ok\n";

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

# a port below 55535 whose bus port is free too
sub _cluster_port {
    for (1 .. 100) {
        my $port = Platform::Test::free_port();
        next if $port >= 55535;
        next if Platform::Test::_port_open($port + 10000);
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

C<seeds> (the masters at creation), C<nodes> (every node's address),
C<redis_at($addr, @cmd)> (redis-cli on one node, its output),
C<redis(@cmd)> (redis-cli -c on a live node, following redirections),
C<slot_of($key)>, C<masters> (the live masters now),
C<master_of_slot($slot)>, C<node_id($addr)>, C<move_slot($slot, $to)>,
C<move_slot_begin($slot, $to)> and C<move_slot_finish($slot, $to)> (a slot
left in migration between the two: -ASK), C<kill_master($addr)>
(SIGKILL, returns the address), C<wait_failover($old, $seconds)> (until
the old master's slots are served by another master and every live node
says ok; returns the seconds it took, or undef), C<wait_ok($seconds)>,
C<stop>.

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

sub slot_of {
    my ($self, $key) = @_;
    return $self->redis('CLUSTER', 'KEYSLOT', $key) + 0;
}

# CLUSTER NODES seen from a live node: [addr, id, flags, [ranges]]
sub _table {
    my ($self) = @_;
    my ($n) = $self->_alive_nodes or return ();
    my @rows;
    for my $line (split /\n/, $self->redis_at("127.0.0.1:$n->{port}",
                                              'CLUSTER', 'NODES')) {
        my ($id, $addr, $flags, $master, $ps, $pr, $epoch, $link, @slots)
            = split ' ', $line;
        next unless $addr;
        $addr =~ s/@.*//;
        push @rows, { id => $id, addr => $addr, flags => $flags,
                      link => $link,
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
    my ($self, $slot) = @_;
    for my $row ($self->_table) {
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
    return $self;
}

sub move_slot {
    my ($self, $slot, $to) = @_;
    my $from = $self->move_slot_begin($slot, $to);
    return $self->move_slot_finish($slot, $to, $from);
}

sub kill_master {
    my ($self, $addr) = @_;
    my ($port) = $addr =~ /:(\d+)$/;
    my ($n) = grep { $_->{port} == $port } @{$self->{nodes}};
    die "no node $addr\n" unless $n && $n->{pid};
    kill 'KILL', $n->{pid};
    Platform::Test::_wait(sub { !Platform::Test::_alive($n->{pid}) }, 5);
    delete $n->{pid};
    return $addr;
}

sub wait_ok {
    my ($self, $seconds) = @_;
    return Platform::Test::_wait(sub {
        for my $n ($self->_alive_nodes) {
            return 0 unless $self->redis_at("127.0.0.1:$n->{port}",
                'CLUSTER', 'INFO') =~ /^cluster_state:ok/m;
        }
        return 1;
    }, $seconds // 10);
}

sub wait_failover {
    my ($self, $old, $seconds) = @_;
    my $start = time;
    my $ok = Platform::Test::_wait(sub {
        my @rows = $self->_table;
        # a live master serving slots, other than the old one
        my $promoted = grep {
            $_->{addr} ne $old && $_->{flags} =~ /master/
            && $_->{flags} !~ /fail/ && @{$_->{ranges}}
        } @rows;
        my $holds = grep { $_->{addr} eq $old && @{$_->{ranges}} } @rows;
        return !$holds && $promoted >= 3 && $self->wait_ok(0.2);
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
    eval { $self->stop };
}

1;
