package Platform::Test::RedisSentinel;

=head1 NAME

Platform::Test::RedisSentinel - a real Redis master, replica and three
sentinels for a test

=head1 SYNOPSIS

    my $s = $t->start_redis_sentinel;            # master name "platform"
    my @sentinels = $s->sentinels;               # "127.0.0.1:PORT" x 3
    my $name = $s->master_name;
    $s->redis('SET', 'otp:tenant-a:NG:123456', 1);
    my $old = $s->kill_master;                   # SIGKILL
    my $took = $s->wait_failover($old, 10);      # seconds since the kill
    $s->failover;                                # SENTINEL FAILOVER, waited

=head1 DESCRIPTION

Two redis-server nodes, a master and a replica of it, and three sentinels
(C<redis-sentinel>, else C<redis-server --sentinel>) monitoring the master,
on free loopback ports in the directory given. The sentinels run with
C<down-after-milliseconds> 1000, C<failover-timeout> 5000, quorum 2,
C<parallel-syncs> 1 and C<resolve-hostnames no>, and their ping, INFO and
hello periods shortened to 250 ms, 1 s and 500 ms (C<SENTINEL DEBUG>,
Redis 7): a killed master is replaced within about 2.5 s, and a node that
comes back, or the old master of a manual failover, is made a replica
within seconds.

The constructor returns once the replica is in sync
(C<master_link_status:up>) and every sentinel knows the replica and the two
other sentinels and reaches its quorum (C<SENTINEL CKQUORUM>), so that a
failover works at once.

Each node's pid file is F<DIR/redisN/redis.pid> or F<DIR/sentinelN/redis.pid>,
which the suite's cleanup finds when the directory's name starts with
C<redis> and the test is interrupted; a killed node's pid file is removed.

Options of C<new($dir, %opts)>: C<master_name> (or C<name>; default
C<platform>),
C<password> (C<requirepass> and C<masterauth> on both nodes,
C<sentinel auth-pass> on the sentinels), C<sentinel_password>
(C<requirepass> of the sentinels themselves), C<down_after> (ms, 1000),
C<failover_timeout> (ms, 5000), C<quorum> (2).

=head2 Methods

=over

=item master_name, sentinels, nodes

The master name; the sentinels' addresses (C<127.0.0.1:PORT>); the two
redis-server nodes' addresses, live or not.

=item master, master_port

The current master as most live sentinels report it
(C<SENTINEL get-master-addr-by-name>), C<127.0.0.1:PORT> (undef when none
answers); its port.

=item replicas

The live redis-server nodes other than the current master.

=item redis_at($addr, @cmd), redis(@cmd)

redis-cli on one node (a sentinel or a redis-server, with its password),
or on the current master; returns the output without its last newline
(errors such as C<READONLY ...> are output too; a node that does not
answer gives C<Could not connect ...>).

=item wait_ready([$seconds])

Waits until every live sentinel sees the master up, knows the other live
sentinels, reaches its quorum (C<SENTINEL CKQUORUM>) and knows a replica
it reaches whose link to the master is up: a failover can start at once.
True then, false after C<$seconds> (default 10). The constructor,
C<kill_master> and C<failover> wait for it.

=item subscribers

The client connections subscribed to a channel on the live sentinels of
the set (C<Platform::Test::redis_subscribers>). A
worker subscribes to C<+switch-master> on the sentinel that named its
master once that master answered C<ROLE>: a test waits for one per worker
before it counts on every worker having found the master.

=item kill_master

SIGKILLs the current master and returns its address.

=item wait_failover($old_addr, $seconds)

Waits until every live sentinel reports a master other than C<$old_addr>
and that node answers C<ROLE> as a master. Returns the seconds it took,
counted from the C<kill_master> of C<$old_addr> (else from the call), or
undef after C<$seconds> (default 10).

=item failover([$seconds])

C<SENTINEL FAILOVER> on a sentinel, then C<wait_failover>; returns its
result once the old master, which does not die, is a replica of the new
one too (the sentinels make it one: writes there answer C<-READONLY>), or
undef after C<$seconds> (default 10) in all.

=item revive($addr)

Starts a killed redis-server node again on its port, as a replica of the
current master (as the sentinels would make it, at their next C<INFO>),
and returns once it is in sync and the sentinels see it (C<wait_ready>).

=item stop

Stops everything (the sentinels first); C<DESTROY> does it too.

=back

=cut

use strict;
use warnings;

use Time::HiRes qw(sleep time);

sub new {
    my ($class, $dir, %o) = @_;
    mkdir $dir or die "mkdir $dir: $!\n";

    my $self = bless {
        dir               => $dir,
        name              => $o{master_name} // $o{name} // 'platform',
        password          => $o{password},
        sentinel_password => $o{sentinel_password},
        down_after        => $o{down_after} // 1000,
        failover_timeout  => $o{failover_timeout} // 5000,
        quorum            => $o{quorum} // 2,
        owner             => $$,
        redis             => [],
        sentinel          => [],
        killed            => {},
    }, $class;

    my $master = $self->_add_redis(1);
    my $replica = $self->_add_redis(2, $master->{port});

    # the sentinels find the replica in their first INFO of the master
    Platform::Test::_wait(sub {
        $self->_cli($replica, 'INFO', 'replication')
            =~ /^master_link_status:up/m
    }, 20) or die "the replica of $master->{port} is not in sync\n";

    $self->_add_sentinel($_, $master->{port}) for 1 .. 3;

    $self->wait_ready(30)
        or die "the sentinels do not know each other and the replica:\n"
               . join('', map { $self->_cli($_, 'SENTINEL', 'CKQUORUM',
                                            $self->{name}) . "\n" }
                          @{$self->{sentinel}});

    return $self;
}

sub _add_redis {
    my ($self, $i, $master_port) = @_;
    my $d = "$self->{dir}/redis$i";
    mkdir $d or die "mkdir $d: $!\n";
    my $pw = $self->{password};
    my $n = { kind => 'redis', dir => $d, port => Platform::Test::free_port(),
              password => $pw };
    $n->{args} = [
        '--port', $n->{port}, '--bind', '127.0.0.1', '--daemonize', 'yes',
        '--dir', $d, '--pidfile', "$d/redis.pid",
        '--logfile', "$d/redis.log", '--save', '', '--appendonly', 'no',
        # a replica in sync at once
        '--repl-diskless-sync', 'yes', '--repl-diskless-sync-delay', 0,
        '--maxmemory', '256mb', '--maxmemory-policy', 'volatile-lru',
        (defined $pw ? ('--requirepass', $pw, '--masterauth', $pw) : ()),
    ];
    push @{$self->{redis}}, $n;
    $self->_start($n, $master_port
                      ? ('--replicaof', '127.0.0.1', $master_port) : ());
    return $n;
}

sub _add_sentinel {
    my ($self, $i, $master_port) = @_;
    my $d = "$self->{dir}/sentinel$i";
    mkdir $d or die "mkdir $d: $!\n";
    my ($name, $pw, $spw) = @$self{qw(name password sentinel_password)};
    my $n = { kind => 'sentinel', dir => $d,
              port => Platform::Test::free_port(), password => $spw };

    # sentinels rewrite their file: it is theirs, in their directory
    Platform::Test::_spew("$d/sentinel.conf", join '', map { "$_\n" }
        "port $n->{port}",
        'bind 127.0.0.1',
        'daemonize yes',
        "dir $d",
        "pidfile $d/redis.pid",
        "logfile $d/redis.log",
        'sentinel resolve-hostnames no',
        'sentinel announce-hostnames no',
        "sentinel monitor $name 127.0.0.1 $master_port $self->{quorum}",
        "sentinel down-after-milliseconds $name $self->{down_after}",
        "sentinel failover-timeout $name $self->{failover_timeout}",
        "sentinel parallel-syncs $name 1",
        (defined $pw ? "sentinel auth-pass $name $pw" : ()),
        (defined $spw ? ("requirepass $spw", "sentinel sentinel-pass $spw")
                      : ()));

    $n->{cmd} = _has('redis-sentinel')
        ? [ 'redis-sentinel', "$d/sentinel.conf" ]
        : [ 'redis-server', "$d/sentinel.conf", '--sentinel' ];
    push @{$self->{sentinel}}, $n;
    $self->_start($n);

    # Shorter periods than production's (Redis 7 sentinels; older ones
    # refuse, harmlessly). Ping: a sentinel reconnects to a new master at
    # most once per ping period (1 s) and counts it down from the switch:
    # with down-after 1 s, it may see the master it just switched to down,
    # fail it over again, and hold back the next failover for twice
    # failover-timeout. Info and publish (10 s, 2 s): a master that comes
    # back after a failover (or the old one of a manual failover) is made
    # a replica after four publish periods, seen at an INFO; and the
    # sentinels find each other sooner.
    $self->_cli($n, 'SENTINEL', 'DEBUG', 'ping-period', 250,
                'info-period', 1000, 'publish-period', 500);

    return $n;
}

sub _has {
    my ($cmd) = @_;
    return grep { -x "$_/$cmd" } split /:/, $ENV{PATH} // '';
}

sub _start {
    my ($self, $n, @more) = @_;
    my @cmd = $n->{cmd} ? @{$n->{cmd}}
                        : ('redis-server', @{$n->{args}}, @more);
    my ($ok, $out, $err) = Platform::Test::_capture(@cmd);
    die "$cmd[0] on $n->{port}: $err$out\n" unless $ok;
    # a daemon listens before it writes its pid file
    Platform::Test::_wait(sub {
        Platform::Test::_port_open($n->{port})
            && $self->_cli($n, 'PING') eq 'PONG'
            && ($n->{pid} = Platform::Test::_read_pid("$n->{dir}/redis.pid"))
    }, 10) or die "$cmd[0] on $n->{port} did not start\n";
    return $n;
}

# SENTINEL MASTER's fields, or {} when the sentinel does not answer
sub _master_info {
    my ($self, $s) = @_;
    my @l = split /\n/, $self->_cli($s, 'SENTINEL', 'MASTER', $self->{name});
    return @l % 2 ? {} : { @l };
}

# SENTINEL REPLICAS: one hash of fields per replica (each starts with
# its "name" field in redis-cli's flat output)
sub _replicas_seen {
    my ($self, $s) = @_;
    my $out = $self->_cli($s, 'SENTINEL', 'REPLICAS', $self->{name});
    return map { my @l = split /\n/; @l % 2 ? { name => @l } : () }
        grep { length } split /^name\n/m, $out;
}

sub wait_ready {
    my ($self, $seconds) = @_;
    return Platform::Test::_wait(sub {
        for my $s ($self->_live('sentinel')) {
            my $m = $self->_master_info($s);
            return 0 unless ($m->{flags} // '') eq 'master'
                && ($m->{'num-other-sentinels'} // 0)
                   >= $self->_live('sentinel') - 1;
            # a replica it reaches, in sync: one it can promote
            return 0 unless grep {
                $_->{flags} eq 'slave'
                && ($_->{'master-link-status'} // '') eq 'ok'
            } $self->_replicas_seen($s);
            return 0 unless $self->_cli($s, 'SENTINEL', 'CKQUORUM',
                                        $self->{name}) =~ /^OK/;
        }
        return 1;
    }, $seconds // 10);
}

sub _cli {
    my ($self, $n, @cmd) = @_;
    my ($ok, $out, $err) = Platform::Test::_capture('redis-cli',
        '-h', '127.0.0.1', '-p', $n->{port},
        (defined $n->{password}
         ? ('-a', $n->{password}, '--no-auth-warning') : ()),
        @cmd);
    $out = "$out$err" if $out eq '';
    chomp $out;
    return $out;
}

sub _node {
    my ($self, $addr) = @_;
    my ($port) = ($addr // '') =~ /(\d+)$/;
    my ($n) = grep { $_->{port} == ($port // 0) }
        @{$self->{redis}}, @{$self->{sentinel}};
    die "no node $addr here\n" unless $n;
    return $n;
}

sub _live {
    my ($self, $kind) = @_;
    return grep { $_->{pid} && Platform::Test::_alive($_->{pid}) }
        @{$self->{$kind}};
}

sub _addr { "127.0.0.1:$_[0]{port}" }

sub master_name { $_[0]{name} }
sub sentinels { map { _addr($_) } @{$_[0]{sentinel}} }
sub nodes { map { _addr($_) } @{$_[0]{redis}} }

# what each live sentinel says the master is
sub _reported {
    my ($self) = @_;
    my @said;
    for my $s ($self->_live('sentinel')) {
        my ($host, $port) = split /\n/, $self->_cli($s, 'SENTINEL',
            'GET-MASTER-ADDR-BY-NAME', $self->{name});
        push @said, defined $port && $port =~ /^\d+$/ ? "$host:$port" : '';
    }
    return @said;
}

sub master {
    my ($self) = @_;
    my %votes;
    $votes{$_}++ for grep { length } $self->_reported;
    my ($best) = sort { $votes{$b} <=> $votes{$a} || $a cmp $b } keys %votes;
    return $best;
}

sub master_port {
    my ($self) = @_;
    my ($port) = ($self->master // '') =~ /:(\d+)$/;
    return $port;
}

sub replicas {
    my ($self) = @_;
    my $m = $self->master // '';
    return grep { $_ ne $m } map { _addr($_) } $self->_live('redis');
}

sub redis_at {
    my ($self, $addr, @cmd) = @_;
    return $self->_cli($self->_node($addr), @cmd);
}

sub redis {
    my ($self, @cmd) = @_;
    my $m = $self->master // die "no sentinel reports a master\n";
    return $self->redis_at($m, @cmd);
}

sub subscribers {
    my ($self) = @_;
    my $n = 0;
    $n += Platform::Test::redis_subscribers(_addr($_), $_->{password})
        for $self->_live('sentinel');
    return $n;
}

sub kill_master {
    my ($self) = @_;
    my $addr = $self->master // die "no sentinel reports a master\n";
    # the sentinels settled after a restart or an earlier failover, so
    # that this failover starts at once (unless no replica is left)
    $self->wait_ready(10) if $self->replicas;
    my $n = $self->_node($addr);
    my $pid = delete $n->{pid} or die "the master $addr is not running\n";
    kill 'KILL', $pid;
    $self->{killed}{$addr} = time;
    Platform::Test::_wait(sub { !Platform::Test::_alive($pid) }, 5);
    unlink "$n->{dir}/redis.pid";
    return $addr;
}

sub wait_failover {
    my ($self, $old, $seconds) = @_;
    my $start = delete $self->{killed}{$old} // time;
    my $ok = Platform::Test::_wait(sub {
        my %said = map { $_ => 1 } $self->_reported;
        return 0 unless keys %said == 1;
        my ($new) = keys %said;
        return 0 if $new eq '' || $new eq $old;
        my ($n) = eval { $self->_node($new) } or return 0;
        return $self->_cli($n, 'ROLE') =~ /\Amaster\n/;
    }, $seconds // 10);
    return $ok ? time - $start : undef;
}

sub failover {
    my ($self, $seconds) = @_;
    my $old = $self->master // die "no sentinel reports a master\n";
    $self->wait_ready(10) or die "the sentinels have no replica to promote\n";
    my ($s) = $self->_live('sentinel');
    my $r = $self->_cli($s, 'SENTINEL', 'FAILOVER', $self->{name});
    die "SENTINEL FAILOVER: $r\n" unless $r eq 'OK';
    my $start = time;
    my $took = $self->wait_failover($old, $seconds) // return undef;
    # the old master made a replica by the sentinels
    Platform::Test::_wait(sub {
        $self->redis_at($old, 'ROLE') =~ /\Aslave\n/
    }, ($seconds // 10) - (time - $start)) or return undef;
    return $took;
}

sub revive {
    my ($self, $addr) = @_;
    my $n = $self->_node($addr);
    die "$addr is running\n" if $n->{pid} && Platform::Test::_alive($n->{pid});
    my ($port) = ($self->master // '') =~ /:(\d+)$/;
    # a replica of the master at once, as the sentinels would make it
    $self->_start($n, $port && $port != $n->{port}
                      ? ('--replicaof', '127.0.0.1', $port) : ());
    Platform::Test::_wait(sub {
        $self->_cli($n, 'INFO', 'replication') =~ /^master_link_status:up/m
    }, 20) or die "the revived $addr is not in sync\n";
    $self->wait_ready(20) or die "the sentinels do not see $addr again\n";
    return $self;
}

sub stop {
    my ($self) = @_;
    # the sentinels first: no failover while the nodes stop
    for my $n (@{$self->{sentinel}}, @{$self->{redis}}) {
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
