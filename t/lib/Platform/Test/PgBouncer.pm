package Platform::Test::PgBouncer;

=head1 NAME

Platform::Test::PgBouncer - a real PgBouncer in front of a PostgreSQL

=head1 SYNOPSIS

    my $pgb = $t->start_pgbouncer;               # the suite's PostgreSQL
    my $pgb = $t->start_pgbouncer(port => $pg->port, pool_size => 2);
    my $dsn = $pgb->dsn($t->db, 'platform_module');

=head1 DESCRIPTION

Debian's pgbouncer in C<pool_mode = transaction> on a free loopback port,
every database of the server behind it (C<* = host=... port=...>),
C<auth_type = trust> for the suite's roles, C<default_pool_size> server
connections per database and user (C<pool_size>, default 4). Run as the
postgres user when the test runs as root (PgBouncer refuses root). Its pid
file is F<DIR/pgbouncer.pid>, which the suite's cleanup finds.

Methods: C<port>, C<dsn($db, $user)>, C<log>, C<admin($command)> (psql on
its admin console: C<SHOW POOLS> and so on), C<stop>.

=cut

use strict;
use warnings;

sub new {
    my ($class, $dir, %o) = @_;
    mkdir $dir or die "mkdir $dir: $!\n";
    my $port = Platform::Test::free_port();
    my $self = bless { dir => $dir, port => $port }, $class;

    my $pg_host = $o{host} // $ENV{PLATFORM_TEST_PG_HOST} // '127.0.0.1';
    my $pg_port = $o{pg_port} // $ENV{PLATFORM_TEST_PG_PORT} // 5432;

    Platform::Test::_spew("$dir/userlist.txt",
        join '', map { qq("$_" ""\n) } qw(postgres platform_module));
    Platform::Test::_spew("$dir/pgbouncer.ini", <<"EOF");
[databases]
* = host=$pg_host port=$pg_port

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
admin_users = postgres
pool_mode = transaction
default_pool_size = @{[ $o{pool_size} // 4 ]}
max_client_conn = 500
pidfile = $dir/pgbouncer.pid
logfile = $dir/pgbouncer.log
ignore_startup_parameters = extra_float_digits
server_reset_query =
EOF

    if ($> == 0) {
        my ($ok) = Platform::Test::_capture('chown', '-R', 'postgres:',
                                            $dir);
    }

    my ($ok, $out, $err) = Platform::Test::_capture(
        $> == 0 ? ('pgbouncer', '-d', '-u', 'postgres')
                : ('pgbouncer', '-d'),
        "$dir/pgbouncer.ini");
    die "pgbouncer: $err$out\n" unless $ok;

    Platform::Test::_wait(sub { Platform::Test::_port_open($port) }, 10)
        or die "pgbouncer did not start: "
               . (Platform::Test::_slurp("$dir/pgbouncer.log") // '') . "\n";
    Platform::Test::_wait(sub { -s "$dir/pgbouncer.pid" }, 5);
    $self->{pid} = Platform::Test::_read_pid("$dir/pgbouncer.pid");
    return $self;
}

sub port { $_[0]{port} }

sub dsn {
    my ($self, $db, $user) = @_;
    return "host=127.0.0.1 port=$self->{port} dbname=$db user="
           . ($user // 'platform_module');
}

sub log { Platform::Test::_slurp("$_[0]{dir}/pgbouncer.log") // '' }

sub admin {
    my ($self, $command) = @_;
    my ($ok, $out) = Platform::Test::_capture('psql', '-X', '-q', '-A',
        '-h', '127.0.0.1', '-p', $self->{port}, '-U', 'postgres',
        '-d', 'pgbouncer', '-c', $command);
    return $out // '';
}

sub stop {
    my ($self) = @_;
    my $pid = delete $self->{pid} or return $self;
    kill 'TERM', $pid;
    Platform::Test::_wait(sub { !Platform::Test::_alive($pid) }, 10)
        or kill 'KILL', $pid;
    return $self;
}

sub DESTROY {
    my ($self) = @_;
    local ($@, $!, $?);
    eval { $self->stop };
}

1;
