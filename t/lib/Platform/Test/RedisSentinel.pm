package Platform::Test::RedisSentinel;

=head1 NAME

Platform::Test::RedisSentinel - a real master, replica and three sentinels

=head1 SYNOPSIS

    my $s = $t->start_redis_sentinel;          # master name "platform"
    my @sentinels = $s->sentinels;             # "127.0.0.1:PORT" each
    my $old = $s->kill_master;                 # SIGKILL, its address
    my $took = $s->wait_failover($old, 15);    # seconds, or undef

=head1 DESCRIPTION

A master and a replica (redis-server) and three sentinels
(C<redis-server --sentinel>) watching the master with a quorum of 2,
C<down-after-milliseconds> 1000 and C<failover-timeout> 5000, on free
loopback ports. The constructor returns once the replica is in sync and
each sentinel knows the replica and the two other sentinels. Pid files
are F<DIR/redisN/redis.pid>, which the suite's cleanup finds.

Methods: C<master_name>, C<sentinels>, C<master> (the master's address as
the sentinels name it), C<nodes> (master and replica), C<redis_at($addr,
@cmd)>, C<redis(@cmd)> (on the master now), C<kill_master>,
C<wait_failover($old, $seconds)>, C<revive($addr)> (a killed server
started again as the master's replica), C<failover> (SENTINEL FAILOVER,
then the wait; returns the seconds), C<stop>.

=cut

use strict;
use warnings;

use Time::HiRes qw(sleep time);

sub new {
    my ($class, $dir, %o) = @_;
    mkdir $dir or die "mkdir $dir: $!\n";
    my $self = bless { dir => $dir, name => $o{name} // 'platform',
                       servers => [], n => 0 }, $class;

    my $master = $self->_server();
    $self->_server('--replicaof', '127.0.0.1', $master->{port});

    for (1 .. 3) {
        my $port = Platform::Test::free_port();
        my $d = $self->_dir;
        Platform::Test::_spew("$d/sentinel.conf", join "\n",
            "port $port", 'bind 127.0.0.1', 'daemonize yes',
            "pidfile $d/redis.pid", "logfile $d/redis.log", "dir $d",
            'sentinel resolve-hostnames no',
            "sentinel monitor $self->{name} 127.0.0.1 $master->{port} 2",
            "sentinel down-after-milliseconds $self->{name} 1000",
            "sentinel failover-timeout $self->{name} 5000",
            "sentinel parallel-syncs $self->{name} 1", '');
        my ($ok, $out, $err) = Platform::Test::_capture('redis-server',
            "$d/sentinel.conf", '--sentinel');
        die "redis-sentinel: $err$out\n" unless $ok;
        push @{$self->{sentinels}}, $self->_started($port, $d);
    }

    Platform::Test::_wait(sub {
        $self->redis_at("127.0.0.1:$self->{servers}[1]{port}", 'INFO',
                        'replication') =~ /master_link_status:up/
    }, 20) or die "the replica is not in sync\n";

    Platform::Test::_wait(sub {
        for my $s ($self->sentinels) {
            my $info = $self->redis_at($s, 'SENTINEL', 'MASTER',
                                       $self->{name});
            return 0 unless $info =~ /num-slaves\n1\n/
                         && $info =~ /num-other-sentinels\n2\n/;
        }
        return 1;
    }, 20) or die "the sentinels do not know each other\n";

    return $self;
}

sub _dir {
    my ($self) = @_;
    my $d = "$self->{dir}/redis" . ++$self->{n};
    mkdir $d or die "mkdir $d: $!\n";
    return $d;
}

sub _server {
    my ($self, @args) = @_;
    my $port = Platform::Test::free_port();
    my $d = $self->_dir;
    my ($ok, $out, $err) = Platform::Test::_capture('redis-server',
        '--port', $port, '--bind', '127.0.0.1', '--daemonize', 'yes',
        '--dir', $d, '--pidfile', "$d/redis.pid", '--logfile',
        "$d/redis.log", '--save', '', '--appendonly', 'no',
        '--repl-diskless-sync-delay', 0,
        '--maxmemory', '256mb', '--maxmemory-policy', 'volatile-lru', @args);
    die "redis-server: $err$out\n" unless $ok;
    my $s = $self->_started($port, $d);
    push @{$self->{servers}}, $s;
    return $s;
}

sub _started {
    my ($self, $port, $d) = @_;
    Platform::Test::_wait(sub { Platform::Test::_port_open($port) }, 10)
        or die "redis on $port did not start\n";
    Platform::Test::_wait(sub { -s "$d/redis.pid" }, 5);
    return { port => $port, dir => $d,
             pid => Platform::Test::_read_pid("$d/redis.pid") };
}

sub master_name { $_[0]{name} }
sub sentinels { map { "127.0.0.1:$_->{port}" } @{$_[0]{sentinels}} }
sub nodes { map { "127.0.0.1:$_->{port}" } @{$_[0]{servers}} }

sub redis_at {
    my ($self, $addr, @cmd) = @_;
    my ($port) = $addr =~ /:(\d+)$/;
    my ($ok, $out) = Platform::Test::_capture('redis-cli', '-h', '127.0.0.1',
                                              '-p', $port, @cmd);
    $out //= '';
    chomp $out;
    return $out;
}

sub master {
    my ($self) = @_;
    for my $s ($self->sentinels) {
        my $out = $self->redis_at($s, 'SENTINEL',
                                  'get-master-addr-by-name', $self->{name});
        my ($host, $port) = split /\n/, $out;
        return "$host:$port" if $port && $port =~ /^\d+$/;
    }
    return undef;
}

sub master_port { (split /:/, $_[0]->master)[1] }

sub redis {
    my ($self, @cmd) = @_;
    return $self->redis_at($self->master, @cmd);
}

sub kill_master {
    my ($self) = @_;
    my $addr = $self->master;
    my ($port) = $addr =~ /:(\d+)$/;
    my ($s) = grep { $_->{port} == $port } @{$self->{servers}};
    kill 'KILL', $s->{pid};
    Platform::Test::_wait(sub { !Platform::Test::_alive($s->{pid}) }, 5);
    delete $s->{pid};
    return $addr;
}

# the killed server started again on its port, as the master's replica
sub revive {
    my ($self, $addr) = @_;
    my ($port) = $addr =~ /:(\d+)$/;
    my ($s) = grep { $_->{port} == $port } @{$self->{servers}};
    my ($mhost, $mport) = split /:/, $self->master;
    my ($ok, $out, $err) = Platform::Test::_capture('redis-server',
        '--port', $port, '--bind', '127.0.0.1', '--daemonize', 'yes',
        '--dir', $s->{dir}, '--pidfile', "$s->{dir}/redis.pid",
        '--logfile', "$s->{dir}/redis.log", '--save', '',
        '--appendonly', 'no', '--repl-diskless-sync-delay', 0,
        '--maxmemory', '256mb', '--maxmemory-policy', 'volatile-lru',
        '--replicaof', $mhost, $mport);
    die "redis-server: $err$out\n" unless $ok;
    my $new = $self->_started($port, $s->{dir});
    $s->{pid} = $new->{pid};
    Platform::Test::_wait(sub {
        $self->redis_at($addr, 'INFO', 'replication')
            =~ /master_link_status:up/
    }, 20) or die "the revived replica is not in sync\n";
    # the sentinels see it as a replica again
    Platform::Test::_wait(sub {
        for my $sn ($self->sentinels) {
            return 0 unless $self->redis_at($sn, 'SENTINEL', 'MASTER',
                $self->{name}) =~ /num-slaves\n[1-9]/;
        }
        return 1;
    }, 20);
    return $self;
}

sub wait_failover {
    my ($self, $old, $seconds) = @_;
    my $start = time;
    my $ok = Platform::Test::_wait(sub {
        my $m = $self->master;
        return $m && $m ne $old
               && $self->redis_at($m, 'ROLE') =~ /^master/;
    }, $seconds // 15);
    return $ok ? time - $start : undef;
}

sub failover {
    my ($self, $seconds) = @_;
    my $old = $self->master;
    my ($s) = $self->sentinels;
    $self->redis_at($s, 'SENTINEL', 'FAILOVER', $self->{name});
    return $self->wait_failover($old, $seconds);
}

sub stop {
    my ($self) = @_;
    for my $s (@{$self->{sentinels}}, @{$self->{servers}}) {
        my $pid = delete $s->{pid} or next;
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
