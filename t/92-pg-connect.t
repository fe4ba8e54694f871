#!/usr/bin/perl

# A connect that moves to another socket inside libpq: a multi-host
# conninfo whose first host refuses, or is a hot standby when the session
# must be read-write. libpq closes the first socket and opens the next,
# which usually gets the same number; the worker must watch the new one.
# Requests succeed, again and again, also after the idle pool drained and
# new connections were made.

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Time::HiRes qw(sleep);
use Platform::Test;

my $order = 'a0000000-0000-4000-8000-000000000001';
my %h = (tenantId => 'tenant-a', countryCode => 'NG');

my $snippet = <<'EOF';
    platform_pg "DSN";
    platform_pg_connect_timeout 2s;
    platform_pg_idle_timeout 200ms;

    server {
        listen 127.0.0.1:%%PORT%%;
        location /tms/ { platform_tms; platform_auth tenant; }
    }
EOF

sub order {
    my ($t) = @_;
    return $t->request('GET', "/tms/delivery-orders/$order", headers => \%h,
                       timeout => 5);
}

# rounds of requests, the pool drained between them: every one is answered
# from PostgreSQL (404: no such order), none is refused or times out

sub rounds {
    my ($t, $name) = @_;
    my @bad;
    for my $round (1 .. 3) {
        for (1 .. 3) {
            my $r = order($t);
            push @bad, "round $round: $r->{status}" if $r->{status} != 404;
        }
        sleep 0.4;              # past platform_pg_idle_timeout
    }
    is("@bad", '', "$name: every request answered, also on new connections");
}

# the first host refuses: a loopback port nobody listens on

{
    my $t = Platform::Test->new(workers => 1);

    my $closed = Platform::Test::closed_port();
    my $dsn = sprintf('host=127.0.0.1,%s port=%s,%s dbname=%s user=%s',
                      $t->{pg_host}, $closed, $t->{pg_port}, $t->db,
                      $t->{pg_user});

    $t->run($snippet =~ s/DSN/$dsn/r);

    rounds($t, 'first host refuses');

    $t->done;
}

# the first host is a hot standby, the session must be read-write

{
    my $t = Platform::Test->new(workers => 1, db => 0);

    my $primary = $t->start_private_pg;
    my $standby = standby($t, $primary);

    ok($t->wait_until(sub {
           ($standby->_psql('platform', 'SELECT pg_is_in_recovery()'))[1]
               =~ /^t/ }, 10),
       'the standby runs');

    my $dsn = sprintf('host=127.0.0.1,127.0.0.1 port=%s,%s dbname=platform'
                      . ' user=postgres target_session_attrs=read-write',
                      $standby->port, $primary->port);

    $t->run($snippet =~ s/DSN/$dsn/r);

    rounds($t, 'first host is a standby');

    $t->done;
}

done_testing;


# a streaming replica of the primary (wal_level replica, the default), on
# its own port; stopped with the test's private servers

sub standby {
    my ($t, $primary) = @_;

    my $dir = $t->testdir . '/standby';
    mkdir $dir or die "mkdir $dir: $!\n";
    mkdir "$dir/run";
    if ($> == 0) {
        my (undef, undef, $uid, $gid) = getpwnam('postgres')
            or die "no postgres user\n";
        chown $uid, $gid, $dir, "$dir/run";
    }

    my ($ok, $out, $err) = Platform::Test::_capture(
        Platform::Test::_as_pg_user(Platform::Test::_pg_bin('pg_basebackup'),
            '-h', '127.0.0.1', '-p', $primary->port, '-U', 'postgres',
            '-D', "$dir/data", '-R', '--no-sync', '--checkpoint=fast'));
    die "pg_basebackup: $err$out\n" unless $ok;

    my $pg = bless { dir => $dir, data => "$dir/data",
                     port => Platform::Test::free_port() },
        'Platform::Test::PG';
    push @{$t->{private}}, $pg;

    return $pg->start;
}
