package Platform::Test;

=head1 NAME

Platform::Test - run nginx with ngx_platform_module against real servers

=head1 SYNOPSIS

    use lib 't/lib';
    use Test::More;
    use Platform::Test;

    my $t = Platform::Test->new(workers => 1);
    $t->run(<<'EOF');
        server {
            listen 127.0.0.1:%%PORT%%;
            location /tms/ { platform_tms; }
        }
    EOF

    $t->psql(q{INSERT INTO drivers (id, tenant_id, country_code, name)
               VALUES ('d1000000-0000-4000-8000-000000000001',
                       'tenant-a', 'NG', 'Ada')});

    my $r = $t->request('GET', '/tms/drivers/available',
                        headers => { tenantId => 'tenant-a',
                                     countryCode => 'NG' });
    is($r->{status}, 200, 'drivers');
    is($r->{json}{status}, JSON::PP::true, 'envelope');

    $t->done;
    done_testing;

=head1 DESCRIPTION

In the manner of nginx's own test suite (nginx-tests, lib/Test/Nginx.pm):
each test file writes an nginx.conf, starts nginx on a free port, sends real
HTTP and checks the answers. Core Perl only.

C<scripts/test> (C<make test>) starts one PostgreSQL and one redis-server
for the whole run and passes them in the environment:
PLATFORM_TEST_PG_HOST, PLATFORM_TEST_PG_PORT, PLATFORM_TEST_PG_USER,
PLATFORM_TEST_PG_TEMPLATE (a migrated database without data),
PLATFORM_TEST_PG_BINDIR, PLATFORM_TEST_PG_PRISTINE (an initdb'ed cluster to
copy for private servers), PLATFORM_TEST_REDIS_PORT, PLATFORM_TEST_MODULE
(the .so), PLATFORM_TEST_NGINX (the nginx binary), PLATFORM_TEST_PRELOAD
(libasan for PLATFORM_ASAN=1 runs), PLATFORM_TEST_TOP (the repository's
top directory, to run its scripts). Without PLATFORM_TEST_MODULE a test file
skips everything.

Set PLATFORM_TEST_KEEP=1 to keep each test's directory (nginx.conf, error
log) after the run.

Set PLATFORM_TEST_DEBUG=1 to run every nginx with debug logging on in the
main context (nginx must be built --with-debug, as Debian's is): a second
C<error_log> at level C<debug> goes to F<debug.log> in the test's
directory, so that every debug log line of nginx and the module is
formatted, while F<error.log>, which tests read, keeps its level. Alerts
and crashes are written to both. C<scripts/test> sets it for the plain
run.

=head1 METHODS

=over

=item Platform::Test->new(%opts)

Creates a temp directory and the test's own database, cloned from the
template (C<CREATE DATABASE t_... TEMPLATE platform_template>), and picks a
free port. Options: C<workers> (worker_processes, default 1),
C<log_level> (error_log level, default C<info>), C<main> (extra text for
the main context), C<events> (extra text for the events block, e.g.
C<use poll;>), C<db> (0: no database of its own).

=item $t->write_config($http_snippet, %opts)

Writes nginx.conf: C<load_module>, worker_processes, daemon on, error_log,
pid, events, and an http block with access_log off, temp paths in the test
directory, default C<platform_pg> (the test's database) and
C<platform_redis> (the suite's Redis) unless the snippet sets them itself,
then the snippet. Placeholders in the snippet: C<%%PORT%%> (the listen
port), C<%%PORT_2%%> ... (more free ports, see C<port>), C<%%PG%%> (the
test's conninfo), C<%%REDIS%%> (C<127.0.0.1:port> of the suite's Redis),
C<%%TESTDIR%%>. C<%opts> as for C<new> (workers, log_level, main, events).

=item $t->run([$http_snippet, %opts])

Writes the config (when a snippet is given), starts nginx and waits until it
accepts on the port. Dies when nginx does not start (see C<try_run>).

=item $t->try_run([$http_snippet, %opts])

Like C<run> but returns false, with the reason in C<< $t->startup_error >>,
instead of dying.

=item $t->check_config([$http_snippet, %opts])

Runs C<nginx -t> on the config; returns C<{ ok => 0|1, output => $text }>.

=item $t->config_refused($http_snippet, qr/reason/, $name)

Two tests: C<nginx -t> fails on the config, and its output matches the
pattern (says why).

=item $t->reload([$http_snippet, %opts])

Rewrites the config when a snippet is given, sends SIGHUP (what C<nginx -s
reload> does) and waits until a full set of new workers runs; returns true
then, false after 10 s.

=item $t->stop

Graceful stop (SIGQUIT), bounded wait, then SIGTERM and SIGKILL.

=item $t->request($method, $path, %opts)

One HTTP/1.1 request (HTTP::Tiny, no keep-alive, timeout 10 s unless
C<timeout> is given). Options: C<headers> (hashref, or arrayref of pairs),
C<body> (bytes), C<json> (a Perl structure sent as JSON, with
C<Content-Type: application/json> unless given), C<port>. Returns
C<{ status, reason, headers, content, json, time }>: C<headers> has lower
case names (a repeated header is an arrayref), C<json> is the decoded body
when it is JSON (else undef), C<time> the seconds elapsed. Connection
failures are status 599 with the reason in C<content>.

=item $t->request_async($method, $path, %opts)

Forks a child that makes the request; returns a handle whose C<< ->wait >>
returns the same hashref as C<request> (C<< ->wait(timeout => $s) >>,
default 30). For "while one request waits, another one answers".

=item $t->raw_request($bytes | [$chunk, ...], %opts)

Sends bytes on a fresh TCP connection and returns everything read until the
server closes (or C<timeout>, default 10 s). Chunks are sent with
C<delay> seconds (default 0.05) between them. C<parse_response($raw)>
turns the answer into the same hashref as C<request>.

=item $t->burst([[$method, $path, %opts], ...], %opts)

Opens one TCP connection per request, sends every request (C<headers>,
C<body>, C<json> as for C<request>, with C<Connection: close>) before it
reads any answer, then reads all answers at once: requests that are in the
server at the same time, without a process each. Returns an arrayref of
hashrefs as C<request> returns, in the order of the requests, C<time>
counted from each one's send. Answers not complete within C<timeout>
(default 10 s) are status 599: their connections are closed then, as a
client that gives up does.

=item $t->psql($sql)

Runs psql -XAt -v ON_ERROR_STOP=1 with the SQL on the test's database;
returns the output without the final newline; dies on error.

=item $t->psql_async($sql)

The same in the background (for instance to hold a lock); the handle's
C<< ->wait >> returns the output, C<< ->kill >> ends it.

=item $t->hold_lock($table, $seconds)

Takes C<ACCESS EXCLUSIVE> on the table in a background transaction that
sleeps C<$seconds> and commits; returns once the lock is granted, with the
C<psql_async> handle. Statements on the table wait meanwhile: the way to
make a request slow inside PostgreSQL.

=item $t->hold_rows($table, \@ids, seconds => $s | waiters => $n)

Locks the rows of C<$table> whose C<id> is in C<@ids> (C<FOR UPDATE>) in a
background transaction, and returns once they are locked, with the
C<psql_async> handle. The transaction commits after C<$s> seconds, or once
C<$n> of the module's connections wait for a lock (at most 5 s): the way
to make requests on those rows queue up and then race.

=item $t->redis(@args)

Runs redis-cli against the suite's Redis; returns its output.

=item $t->pg_dsn, $t->pg_admin_dsn, $t->db, $t->port([$n]), $t->testdir, $t->error_log, $t->workers

The test's conninfo, as the module connects: as the module's role
(C<platform_module>, created by scripts/migrate), under row-level security;
the same as the suite's superuser, who owns the tables and passes row-level
security; the database name; the listen port (C<port(2)> etc.: more free
ports); the temp directory; the error log's content; the pids of the
running workers.

=item $t->start_private_pg

A separate PostgreSQL (copied from the pristine cluster or initdb'ed, run as
the postgres user when root, migrated), for tests that stop and restart it.
Returns a handle with C<stop> (C<< stop(mode => 'immediate') >> for a crash),
C<start>, C<dsn> (database C<platform>), C<port>, C<psql($sql)>,
C<psql_async($sql)> (as C<< $t->psql_async >>), C<log>.

=item $t->start_private_replica($primary)

A streaming replica (a hot standby) of a private PostgreSQL of the test
(C<start_private_pg>): C<pg_basebackup -R -X stream> from it (the copied
cluster allows replication connections from 127.0.0.1 and has
C<wal_level> C<replica>), on a port and socket directory of its own in the
test's directory, run as the postgres user when root. Returns once it is
in recovery and its WAL receiver streams. The handle has what the
primary's has (C<stop>, C<start>, which waits for streaming again,
C<dsn>, C<port>, C<psql($sql)>, read-only, C<log>), and:
C<pause_replay> (C<pg_wal_replay_pause()>: what the primary commits
afterwards is received but not applied, so reads on the replica see the
rows as they were), C<resume_replay>, and C<wait_replayed([$seconds])>,
true once the replica has replayed the primary's current WAL position
(C<pg_current_wal_lsn()>), false after C<$seconds> (default 10).
Needs PostgreSQL 14 or newer. Stopped before its primary at the end.

=item $t->start_private_redis

A separate redis-server; handle with C<stop>, C<start>, C<port>, C<addr>
(C<127.0.0.1:port>), C<redis(@args)>. Like the suite's (C<redis_start> of
F<scripts/lib.sh>), it runs with C<maxmemory 256mb> and
C<maxmemory-policy volatile-lru>, as the operator's guide advises.

=item $t->start_pgbouncer(%opts)

A PgBouncer of its own in transaction mode before the suite's PostgreSQL,
or the one at C<pg_port> (and C<host>); C<pool_size> server connections
per database and user (default 4). See L<Platform::Test::PgBouncer>.
Stopped at the end.

=item $t->start_redis_sentinel(%opts)

A Redis master, a replica of it and three sentinels monitoring it, on
free loopback ports, ready for a failover (C<master_name> or C<name>,
default C<platform>; C<password>; C<sentinel_password>; C<down_after> and
C<failover_timeout> in ms), see L<Platform::Test::RedisSentinel>. Stopped
at the end.

=item $t->start_redis_cluster(%opts)

A Redis Cluster of its own: three masters with a replica each
(C<masters>, C<replicas>, C<node_timeout> in ms), see
L<Platform::Test::RedisCluster>. Stopped at the end.

=item $t->ignore_log(qr/.../)

Lines of the error log matching the pattern do not count in the final check.

=item $t->wait_until(sub { ... }, $seconds)

Polls the sub every 20 ms until it returns true; returns its value, or false
after C<$seconds> (default 5).

=item Platform::Test::loose_json($text)

Where a JSON text has white space outside its strings: twenty characters
around the first, or '' for a compact body.

=item Platform::Test::json_type($value)

What JSON::PP decoded a value from: 'number', 'string', 'bool', 'null' or
a reference type.

=item Platform::Test::demo_data(qr/section/)

The part of C<scripts/demo-data.sql> that the pattern matches (its first
capture, else the whole match), to load a family's demo rows into a
test's database with C<psql>. Dies when nothing matches.

=item Platform::Test::demo_config([$locations])

The demo's configuration for C<run>: C<conf/platform.conf> in a server
with the demo's webhook sources and identity bureau (answered by a second
server, C<port(2)>), as the dev configuration declares them, and
C<$locations> in the same server.

=item Platform::Test::redis_routes_config($redis_directives[, $locations])

The configuration of a test of a Redis deployment for C<run>: its
directives, then a server with OTP (attempt limits lifted), the webhooks
of source C<src>, C<location = /health> and C<$locations>.

=item Platform::Test::redis_subscribers($addr[, $password])

The client connections subscribed to a channel (C<CLIENT LIST>, C<sub=>)
on the Redis server or sentinel at C<$addr> (C<127.0.0.1:PORT>).

=item $t->ignore_redis_failover

Marks as expected the error log lines of a Redis deployment failing over
(lost connections, C<-READONLY> and the like).

=item $t->demo_api_keys($tag)

Stores an API key of tenant-demo of each scope, C<trades> and
C<webhooks>, with ids of their own (C<$tag>, four hex digits), and
returns them by scope.

=item Platform::Test::tenant_blind_view($table)

SQL that renames C<$table> to C<${table}_guarded> and puts in its place a
view whose C<tenant_id> is always the caller's scope, so that the
statements' own tenant conditions no longer tell tenants apart and only
row-level security does.

=item Platform::Test::is_envelope_b_error($r, $status, $message, $detail, $name)

Three tests: a response C<$r> of C<request> has C<$status>, the JSON
content type, and exactly the Envelope B error body of decisions.md
(C<status> false, C<statusCode> C<$status>, C<data> {}, one error whose
C<message> is C<$message> and C<descriptiveMessage> C<$detail>).

=item $t->done

Call before done_testing. Stops nginx and the private servers, adds the test
"no alerts in error log": it fails on C<[alert]>, C<[crit]>, C<[emerg]> or
a sanitizer report, printing the lines. Drops the test's database. If a test
file forgets it, the same happens at exit, adding a failing test only when
there are alerts.

=back

=cut

use strict;
use warnings;

use Test::More ();
use File::Temp ();
use File::Path qw(rmtree);
use File::Basename qw(dirname);
use File::Spec;
use IO::Socket::INET;
use HTTP::Tiny;
use B ();
use JSON::PP ();
use POSIX ();
use Scalar::Util ();
use Time::HiRes qw(sleep time);

my %live;
my $json = JSON::PP->new->canonical->allow_nonref;
my $top = File::Spec->rel2abs(dirname(__FILE__) . '/../../..');
my $is_root = $> == 0;

sub new {
    my ($class, %opts) = @_;

    if (!$ENV{PLATFORM_TEST_MODULE}) {
        Test::More::plan(skip_all =>
            'PLATFORM_TEST_MODULE is not set: run the suite with "make test"');
    }

    my $base = $ENV{PLATFORM_TEST_TMPDIR} || File::Spec->tmpdir;
    my $dir = File::Temp::tempdir('platform-t-XXXXXXXX', DIR => $base,
                                  CLEANUP => 0);
    # the workers (user nobody when nginx runs as root) must reach the temp
    # paths inside
    chmod 0755, $dir;
    mkdir "$dir/temp";

    my $self = bless {
        testdir   => $dir,
        workers   => $opts{workers} // 1,
        log_level => $opts{log_level} // 'info',
        main      => $opts{main} // '',
        events    => $opts{events} // '',
        ports     => [],
        private   => [],
        ignore    => [],
        owner     => $$,
        pg_host   => $ENV{PLATFORM_TEST_PG_HOST} // '127.0.0.1',
        pg_port   => $ENV{PLATFORM_TEST_PG_PORT} // 5432,
        pg_user   => $ENV{PLATFORM_TEST_PG_USER} // 'postgres',
        pg_role   => 'platform_module',
        redis_port => $ENV{PLATFORM_TEST_REDIS_PORT} // 6379,
        nginx     => $ENV{PLATFORM_TEST_NGINX} || '/usr/sbin/nginx',
        module    => $ENV{PLATFORM_TEST_MODULE},
        async_n   => 0,
    }, $class;

    $self->{ports}[1] = free_port();

    if ($opts{db} // 1) {
        my $db = 't_' . join('', map { ('a' .. 'z', 0 .. 9)[int rand 36] }
                                 1 .. 12);
        my $template = $ENV{PLATFORM_TEST_PG_TEMPLATE} // 'platform_template';
        for my $try (1 .. 50) {
            my ($ok, $out, $err) = $self->_psql_run('postgres',
                "CREATE DATABASE $db TEMPLATE $template"
                . " OWNER \"$self->{pg_user}\"");
            if ($ok) {
                $self->{db} = $db;
                last;
            }
            # another connection may be reading the template right now
            die "create database: $err" if $try == 50
                || $err !~ /being accessed by other users/;
            sleep 0.1;
        }
    }

    # an interrupted test still stops its nginx and servers (END below)
    for my $sig (qw(INT TERM HUP)) {
        $SIG{$sig} = sub { exit 130 }
            if !defined $SIG{$sig} || $SIG{$sig} eq 'DEFAULT';
    }

    $live{"$self"} = $self;
    Scalar::Util::weaken($live{"$self"});
    return $self;
}

### JSON bodies

sub loose_json {
    my ($text) = @_;
    my $in = 0;
    for (my $i = 0; $i < length $text; $i++) {
        my $c = substr($text, $i, 1);
        if ($in) {
            if ($c eq '\\') { $i++; next; }
            $in = 0 if $c eq '"';
        } elsif ($c eq '"') {
            $in = 1;
        } elsif ($c =~ /\s/) {
            return substr($text, $i > 10 ? $i - 10 : 0, 20);
        }
    }
    return '';
}

sub demo_data {
    my ($pattern) = @_;
    my $file = ($ENV{PLATFORM_TEST_TOP} // '.') . '/scripts/demo-data.sql';
    my $demo = _slurp($file) // die "demo_data: $file: $!\n";
    $demo =~ $pattern or die "demo_data: no match for $pattern in $file\n";
    return defined $1 ? $1 : $&;
}

# nginx.conf for the demo: conf/platform.conf in one server with the
# demo's webhook sources, each in a location of its own routes as the dev
# configuration declares them (at this level both {source} locations of
# platform.conf would serve them, which nginx -t refuses), and its identity
# bureau, answered by a second server; $extra goes in the first server.
sub demo_config {
    my ($extra) = @_;
    my $top = $ENV{PLATFORM_TEST_TOP} // '.';
    $extra //= '';

    return <<"EOF";
    platform_webhook_payment_method card;

    server {
        listen 127.0.0.1:%%PORT%%;

        platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;
        platform_apikey_cache_time 0;
        platform_identity_bureau /_bureau;

        include $top/conf/platform.conf;

        location ^~ /api/v1/webhooks/public/ {
            platform_webhooks;
            platform_apikey_scope webhooks;
            platform_webhook_source source-a;
        }

        location ^~ /api/webhooks/public/ {
            platform_webhooks;
            platform_webhook_source source-b;
        }

        location = /_bureau {
            internal;
            proxy_pass http://127.0.0.1:%%PORT_2%%/bureau;
        }
$extra    }

    server {
        listen 127.0.0.1:%%PORT_2%%;
        default_type application/json;

        location = /bureau {
            return 200 '{"companyName":"Demo Foods Limited","address":"14 Adeola Odeku Street, Victoria Island, Lagos"}';
        }
    }
EOF
}

# API keys of tenant-demo, of scopes trades and webhooks (the webhook
# locations of demo_config take the latter), with ids of their own: $tag,
# four hex digits, tells one file's keys from another's
sub demo_api_keys {
    my ($self, $tag) = @_;
    my @c = ('A' .. 'Z', 'a' .. 'z', '0' .. '9', '-', '_');
    my %apikey;

    for my $scope (qw(trades webhooks)) {
        my $id = '0000000000' . $tag . ($scope eq 'trades' ? 'aa' : 'bb');
        $apikey{$scope} = "plk_$id." . join('', map { $c[rand @c] } 1 .. 43);
        $self->psql("INSERT INTO api_keys (id, tenant_id, scope, key_digest)"
                    . " VALUES ('$id', 'tenant-demo', '$scope',"
                    . " sha256(convert_to('$apikey{$scope}', 'UTF8')))");
    }

    return \%apikey;
}

# nginx.conf for a test of a Redis deployment: $redis, its directives, and
# one server with the Redis-backed routes (OTP without attempt limits to
# speak of, the webhooks of source "src") and health; $locations goes in
# the same server
sub redis_routes_config {
    my ($redis, $locations) = @_;
    $locations //= '';

    return <<"EOF";
$redis
    platform_otp_attempts 100000 5m;
    platform_otp_tenant_attempts off;

    server {
        listen 127.0.0.1:%%PORT%%;

        location /validate-otp/ { platform_otp; }

        location ^~ /api/webhooks/ {
            platform_webhooks;
            platform_webhook_source src;
        }

        location = /health { platform_health; }
$locations    }
EOF
}

# the connections subscribed to a channel on the server at $addr
sub redis_subscribers {
    my ($addr, $password) = @_;
    my ($port) = $addr =~ /:(\d+)$/;
    my (undef, $list) = _capture('redis-cli', '-h', '127.0.0.1', '-p', $port,
        (defined $password ? ('-a', $password, '--no-auth-warning') : ()),
        'CLIENT', 'LIST');
    return scalar(() = $list =~ /\bsub=[1-9]/g);
}

# what a worker logs while a Redis deployment fails over, expected there
sub ignore_redis_failover {
    my ($self) = @_;
    $self->ignore_log(qr/redis: /);
    $self->ignore_log(qr/platform: Redis (?:answered|error|cannot|answers)/);
    $self->ignore_log(qr/webhooks: Redis/);
}

# SQL that takes the tenant condition away from the module's statements
# on $table: the table is renamed ${table}_guarded, and a view of its
# name, run with the caller's rights, reads tenant_id as the caller's
# scope. Only row-level security then tells tenants apart.
sub tenant_blind_view {
    my ($table) = @_;

    return <<"SQL";
ALTER TABLE $table RENAME TO ${table}_guarded;
DO \$\$
BEGIN
    EXECUTE format('CREATE VIEW $table WITH (security_invoker = true)'
                   ' AS SELECT %s FROM ${table}_guarded',
        (SELECT string_agg(CASE a.attname WHEN 'tenant_id'
                           THEN 'current_setting(''app.tenant_id'', true)'
                                ' AS tenant_id'
                           ELSE quote_ident(a.attname) END, ', '
                           ORDER BY a.attnum)
           FROM pg_attribute a
          WHERE a.attrelid = '${table}_guarded'::regclass
            AND a.attnum > 0 AND NOT a.attisdropped));
END
\$\$;
SQL
}

sub is_envelope_b_error {
    my ($r, $status, $message, $detail, $name) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    Test::More::is($r->{status}, $status, "$name: $status")
        or Test::More::diag($r->{content});
    Test::More::is($r->{headers}{'content-type'},
                   'application/json; charset=utf-8', "$name: content type");
    Test::More::is_deeply($r->{json}, {
        status => JSON::PP::false, statusCode => $status,
        message => $message, data => {},
        errors => [ { message => $message, descriptiveMessage => $detail } ],
    }, "$name: Envelope B") or Test::More::diag($r->{content});
}

sub json_type {
    my ($v) = @_;
    return 'null' unless defined $v;
    return 'bool' if JSON::PP::is_bool($v);
    return ref $v if ref $v;
    my $f = B::svref_2object(\$v)->FLAGS;
    return ($f & (B::SVp_IOK | B::SVp_NOK)) && !($f & B::SVp_POK)
        ? 'number' : 'string';
}


sub testdir { $_[0]{testdir} }
sub db { $_[0]{db} }

sub port {
    my ($self, $n) = @_;
    $n //= 1;
    $self->{ports}[$n] //= free_port();
    return $self->{ports}[$n];
}

sub pg_dsn {
    my ($self) = @_;
    return "host=$self->{pg_host} port=$self->{pg_port} dbname=$self->{db}"
        . " user=$self->{pg_role}";
}

sub pg_admin_dsn {
    my ($self) = @_;
    return "host=$self->{pg_host} port=$self->{pg_port} dbname=$self->{db}"
        . " user=$self->{pg_user}";
}

sub redis_addr { "127.0.0.1:$_[0]{redis_port}" }

sub error_log {
    my ($self) = @_;
    return _slurp("$self->{testdir}/error.log");
}

sub startup_error { $_[0]{startup_error} }

sub ignore_log {
    my ($self, $re) = @_;
    push @{$self->{ignore}}, $re;
    return $self;
}

### configuration

sub write_config {
    my ($self, $snippet, %opts) = @_;
    my $d = $self->{testdir};

    $self->{$_} = $opts{$_} for grep { exists $opts{$_} }
        qw(workers log_level main events);

    $snippet //= '';
    $snippet =~ s/%%PORT%%/$self->port(1)/ge;
    $snippet =~ s/%%PORT_(\d+)%%/$self->port($1)/ge;
    $snippet =~ s/%%PG%%/$self->{db} ? $self->pg_dsn : ''/ge;
    $snippet =~ s/%%REDIS%%/$self->redis_addr/ge;
    $snippet =~ s/%%TESTDIR%%/$d/g;

    my $defaults = '';
    if ($snippet !~ /^\s*platform_pg\s/m && $self->{db}) {
        $defaults .= '    platform_pg "' . $self->pg_dsn . "\";\n";
    }
    # platform_redis_sentinel and platform_redis_cluster replace it too
    if ($snippet !~ /^\s*platform_redis(?:_sentinel|_cluster)?\s/m) {
        $defaults .= '    platform_redis ' . $self->redis_addr . ";\n";
    }

    # the same code runs as with "error_log ... debug": every debug line
    # is formatted (see PLATFORM_TEST_DEBUG above)
    my $debug_log = $ENV{PLATFORM_TEST_DEBUG} && $self->{log_level} ne 'debug'
        ? "error_log $d/debug.log debug;" : '';

    my $conf = <<"EOF";
# generated by Platform::Test
worker_processes $self->{workers};
daemon on;
master_process on;
pid $d/nginx.pid;
error_log $d/error.log $self->{log_level};
$debug_log

load_module $self->{module};

$self->{main}

events {
    worker_connections 1024;
$self->{events}
}

http {
    access_log off;
    default_type application/octet-stream;

    client_body_temp_path $d/temp/client_body;
    proxy_temp_path $d/temp/proxy;
    fastcgi_temp_path $d/temp/fastcgi;
    uwsgi_temp_path $d/temp/uwsgi;
    scgi_temp_path $d/temp/scgi;

$defaults
$snippet
}
EOF

    _spew("$d/nginx.conf", $conf);
    return $self;
}

sub _nginx_env {
    my ($self) = @_;
    my %env;
    if ($ENV{PLATFORM_TEST_PRELOAD}) {
        $env{LD_PRELOAD} = $ENV{PLATFORM_TEST_PRELOAD};
        $env{ASAN_OPTIONS} = $ENV{ASAN_OPTIONS} // 'detect_leaks=0';
    }
    return %env;
}

sub _nginx_cmd {
    my ($self, @args) = @_;
    my $d = $self->{testdir};
    my $log = $self->{startup_log} // "$d/error.log";
    return ($self->{nginx}, '-p', "$d/", '-c', "$d/nginx.conf",
            '-e', $log, @args);
}

sub config_refused {
    my ($self, $snippet, $reason, $name) = @_;
    my $r = $self->check_config($snippet);
    Test::More::ok(!$r->{ok}, "$name: nginx -t fails");
    Test::More::like($r->{output}, $reason, "$name: says why");
    return $r;
}

sub check_config {
    my ($self, $snippet, %opts) = @_;
    my $d = $self->{testdir};
    $self->write_config($snippet, %opts) if defined $snippet;
    my %env = $self->_nginx_env;
    local @ENV{keys %env} = values %env;
    # messages of a failing test go to a log of their own, so that they do
    # not count as alerts of the test
    local $self->{startup_log} = "$d/check_config.log";
    unlink "$d/check_config.log";
    my ($ok, $out, $err) = _capture($self->_nginx_cmd('-t', '-q'));
    my $log = _slurp("$d/check_config.log") // '';
    return { ok => $ok ? 1 : 0, output => "$err$out$log" };
}

sub try_run {
    my ($self, $snippet, %opts) = @_;
    my $d = $self->{testdir};

    $self->write_config($snippet, %opts)
        if defined $snippet || !-f "$d/nginx.conf";

    die "nginx already running\n" if $self->_master_alive;
    unlink "$d/nginx.pid";
    delete $self->{startup_error};

    {
        my %env = $self->_nginx_env;
        local @ENV{keys %env} = values %env;
        my ($ok, $out, $err) = _capture($self->_nginx_cmd);
        _append("$d/stderr.log", $err) if $err ne '';
        if (!$ok) {
            $self->{startup_error} = "nginx failed to start: $err$out";
            return 0;
        }
    }

    my $limit = $ENV{PLATFORM_TEST_PRELOAD} ? 30 : 10;
    my $up = _wait(sub {
        -s "$d/nginx.pid" && _port_open($self->port(1))
    }, $limit);
    $self->{master} = _read_pid("$d/nginx.pid");

    if (!$up) {
        $self->{startup_error} = "nginx does not accept on port "
            . $self->port(1) . " after ${limit}s; error log:\n"
            . _tail($self->error_log, 20);
        $self->stop;
        return 0;
    }

    # all workers up, so that tests see a steady state
    _wait(sub { scalar($self->workers) >= $self->{workers} }, $limit);
    return 1;
}

sub run {
    my ($self, @args) = @_;
    $self->try_run(@args) or die $self->{startup_error} . "\n";
    return $self;
}

sub workers {
    my ($self) = @_;
    my $master = $self->{master} or return;
    my @pids;
    opendir(my $dh, '/proc') or return;
    for my $pid (grep { /^\d+$/ } readdir $dh) {
        my $stat = _slurp("/proc/$pid/stat") // next;
        # pid (comm) state ppid ...
        my ($state, $ppid) = $stat =~ /\)\s+(\S)\s+(\d+)/ or next;
        next if $ppid != $master || $state eq 'Z';
        my $cmd = _slurp("/proc/$pid/cmdline") // '';
        next unless $cmd =~ /worker process/;
        next if $cmd =~ /shutting down/;
        push @pids, $pid;
    }
    closedir $dh;
    my @sorted = sort { $a <=> $b } @pids;
    return @sorted;
}

sub reload {
    my ($self, $snippet, %opts) = @_;
    $self->write_config($snippet, %opts) if defined $snippet;
    my $master = $self->{master} or die "nginx is not running\n";
    my %old = map { $_ => 1 } $self->workers;
    kill 'HUP', $master or die "reload: $!\n";
    my $limit = $ENV{PLATFORM_TEST_PRELOAD} ? 30 : 10;
    return _wait(sub {
        # old workers close their listening sockets when they go "shutting
        # down"; wait until only new ones are left
        my @w = $self->workers;
        @w >= $self->{workers} && !grep { $old{$_} } @w;
    }, $limit) ? 1 : 0;
}

sub _master_alive {
    my ($self) = @_;
    return $self->{master} && _alive($self->{master});
}

sub stop {
    my ($self) = @_;
    my $master = $self->{master} or return $self;
    if (_alive($master)) {
        kill 'QUIT', $master;
        if (!_wait(sub { !_alive($master) }, 10)) {
            kill 'TERM', $master;
            if (!_wait(sub { !_alive($master) }, 5)) {
                kill 'KILL', $master;
                _wait(sub { !_alive($master) }, 5);
            }
        }
    }
    delete $self->{master};
    return $self;
}

### HTTP

sub request {
    my ($self, $method, $path, %opts) = @_;

    my %headers;
    my $h = $opts{headers} // {};
    my @pairs = ref $h eq 'ARRAY' ? @$h : %$h;
    while (my ($k, $v) = splice @pairs, 0, 2) {
        if (exists $headers{$k}) {
            $headers{$k} = [ ref $headers{$k} ? @{$headers{$k}}
                                              : $headers{$k}, $v ];
        } else {
            $headers{$k} = $v;
        }
    }

    my $body = $opts{body};
    if (exists $opts{json}) {
        $body = $json->encode($opts{json});
        $headers{'Content-Type'} = 'application/json'
            unless grep { lc $_ eq 'content-type' } keys %headers;
    }

    my $http = HTTP::Tiny->new(keep_alive => 0, max_redirect => 0,
                               timeout => $opts{timeout} // 10,
                               agent => 'platform-test');
    my $port = $opts{port} // $self->port(1);
    my $url = "http://127.0.0.1:$port$path";

    my $start = time;
    my $res = $http->request($method, $url, {
        headers => \%headers,
        (defined $body ? (content => $body) : ()),
    });
    my $elapsed = time - $start;

    return _result($res->{status}, $res->{reason}, $res->{headers},
                   $res->{content}, $elapsed);
}

sub _result {
    my ($status, $reason, $headers, $content, $time) = @_;
    my %h;
    for my $k (keys %{$headers // {}}) {
        $h{lc $k} = $headers->{$k};
    }
    my $r = {
        status  => $status,
        reason  => $reason,
        headers => \%h,
        content => $content // '',
        time    => $time,
        json    => undef,
    };
    my $ct = ref $h{'content-type'} ? $h{'content-type'}[0]
                                    : $h{'content-type'} // '';
    if ($ct =~ /json/i || $r->{content} =~ /^\s*[\[{]/) {
        $r->{json} = eval { JSON::PP->new->utf8->allow_nonref
                                ->decode($r->{content}) };
    }
    return $r;
}

sub request_async {
    my ($self, $method, $path, %opts) = @_;
    my $file = sprintf('%s/async-%d-%d.json', $self->{testdir}, $$,
                       ++$self->{async_n});
    my $pid = fork // die "fork: $!\n";
    if ($pid == 0) {
        my $code = 0;
        eval {
            my $r = $self->request($method, $path, %opts);
            delete $r->{json};
            _spew("$file.tmp", JSON::PP->new->latin1->encode($r));
            rename "$file.tmp", $file or die "rename: $!";
            1;
        } or do { print STDERR "request_async: $@"; $code = 1 };
        POSIX::_exit($code);
    }
    return Platform::Test::Async->new($pid, sub {
        my $data = _slurp($file);
        die "request_async: the child wrote no result\n"
            unless defined $data;
        unlink $file;
        my $r = JSON::PP->new->latin1->decode($data);
        return _result(@$r{qw(status reason headers content time)});
    });
}

sub raw_request {
    my ($self, $bytes, %opts) = @_;
    my $timeout = $opts{timeout} // 10;
    my $s = IO::Socket::INET->new(
        PeerAddr => '127.0.0.1',
        PeerPort => $opts{port} // $self->port(1),
        Proto    => 'tcp',
        Timeout  => $timeout,
    ) or die "connect: $!\n";
    $s->autoflush(1);

    my @chunks = ref $bytes ? @$bytes : ($bytes);
    for my $i (0 .. $#chunks) {
        sleep($opts{delay} // 0.05) if $i > 0;
        local $SIG{PIPE} = 'IGNORE';
        $s->syswrite($chunks[$i]) // last;
    }

    my $reply = '';
    my $deadline = time + $timeout;
    my $sel = '';
    vec($sel, fileno($s), 1) = 1;
    while ((my $left = $deadline - time) > 0) {
        my $rin = $sel;
        my $n = select($rin, undef, undef, $left);
        last if $n <= 0;
        my $got = $s->sysread(my $buf, 65536);
        last if !$got;
        $reply .= $buf;
    }
    close $s;
    return $reply;
}

# the bytes of one request, for burst
sub _request_bytes {
    my ($self, $method, $path, %opts) = @_;

    my $h = $opts{headers} // {};
    my @pairs = ref $h eq 'ARRAY' ? @$h : %$h;
    my $body = $opts{body};

    if (exists $opts{json}) {
        $body = $json->encode($opts{json});
        push @pairs, 'Content-Type', 'application/json'
            unless grep { lc $_ eq 'content-type' }
                   @pairs[grep { $_ % 2 == 0 } 0 .. $#pairs];
    }

    my $head = "$method $path HTTP/1.1\r\nHost: localhost\r\n"
               . "Connection: close\r\n";
    while (my ($k, $v) = splice @pairs, 0, 2) {
        $head .= "$k: $v\r\n";
    }
    $head .= 'Content-Length: ' . length($body) . "\r\n" if defined $body;

    return "$head\r\n" . ($body // '');
}

sub burst {
    my ($self, $requests, %opts) = @_;
    my $timeout = $opts{timeout} // 10;

    my @c;
    local $SIG{PIPE} = 'IGNORE';

    for my $req (@$requests) {
        my ($method, $path, %o) = @$req;
        my $s = IO::Socket::INET->new(
            PeerAddr => '127.0.0.1',
            PeerPort => $o{port} // $self->port(1),
            Proto    => 'tcp',
            Timeout  => $timeout,
        ) or die "burst: connect: $!\n";
        my $bytes = $self->_request_bytes($method, $path, %o);
        my $start = time;
        while (length $bytes) {
            my $n = $s->syswrite($bytes) // last;
            substr($bytes, 0, $n) = '';
        }
        push @c, { s => $s, reply => '', start => $start };
    }

    my $deadline = time + $timeout;
    my %open = map { $_ => 1 } 0 .. $#c;

    while (%open && (my $left = $deadline - time) > 0) {
        my $rin = '';
        vec($rin, fileno($c[$_]{s}), 1) = 1 for keys %open;
        my $n = select(my $rout = $rin, undef, undef, $left);
        next if $n < 0 && $!{EINTR};
        last if $n <= 0;
        for my $i (keys %open) {
            next unless vec($rout, fileno($c[$i]{s}), 1);
            my $got = $c[$i]{s}->sysread(my $buf, 65536);
            if ($got) {
                $c[$i]{reply} .= $buf;
                next;
            }
            $c[$i]{time} = time - $c[$i]{start};
            close $c[$i]{s};
            delete $open{$i};
        }
    }

    close $c[$_]{s} for keys %open;

    return [ map {
        my $c = $_;
        if (defined $c->{time}) {
            my $r = $self->parse_response($c->{reply});
            $r->{time} = $c->{time};
            $r;
        } else {
            _result(599, 'Timeout', {}, "burst: no answer in ${timeout}s",
                    $timeout);
        }
    } @c ];
}

sub parse_response {
    my ($self, $raw) = @_;
    my ($head, $body) = split /\r\n\r\n/, $raw, 2;
    my ($status_line, @lines) = split /\r\n/, $head // '';
    my ($status, $reason) = ($status_line // '') =~ m{^HTTP/\S+\s+(\d+)\s*(.*)};
    my %h;
    for (@lines) {
        my ($k, $v) = /^([^:]+):\s*(.*)$/ or next;
        $k = lc $k;
        $h{$k} = exists $h{$k}
            ? [ ref $h{$k} ? @{$h{$k}} : $h{$k}, $v ] : $v;
    }
    return _result($status, $reason, \%h, $body, undef);
}

### PostgreSQL and Redis

sub _psql_bin {
    my $bindir = $ENV{PLATFORM_TEST_PG_BINDIR};
    return $bindir && -x "$bindir/psql" ? "$bindir/psql" : 'psql';
}

sub _pg_bin {
    my ($name) = @_;
    my $bindir = $ENV{PLATFORM_TEST_PG_BINDIR};
    if (!$bindir) {
        ($bindir) = reverse sort glob('/usr/lib/postgresql/*/bin');
    }
    return "$bindir/$name";
}

sub _psql_cmd {
    my ($host, $port, $user, $db, $sql) = @_;
    return (_psql_bin(), '-X', '-A', '-t', '-q', '-v', 'ON_ERROR_STOP=1',
            '-h', $host, '-p', $port, '-U', $user, '-d', $db, '-c', $sql);
}

sub _psql_run {
    my ($self, $db, $sql) = @_;
    local $ENV{PGOPTIONS} = '-c client_min_messages=warning';
    return _capture(_psql_cmd($self->{pg_host}, $self->{pg_port},
                              $self->{pg_user}, $db, $sql));
}

sub psql {
    my ($self, $sql) = @_;
    die "psql: the test has no database\n" unless $self->{db};
    my ($ok, $out, $err) = $self->_psql_run($self->{db}, $sql);
    die "psql failed: $err\n" unless $ok;
    chomp $out;
    return $out;
}

sub psql_async {
    my ($self, $sql) = @_;
    my $file = sprintf('%s/psql-%d-%d.out', $self->{testdir}, $$,
                       ++$self->{async_n});
    return _psql_spawn($file, _psql_cmd($self->{pg_host}, $self->{pg_port},
                                        $self->{pg_user}, $self->{db}, $sql));
}

# _psql_spawn($file, @cmd): psql in a child, its output to $file; the
# Async handle's wait returns the output
sub _psql_spawn {
    my ($file, @cmd) = @_;
    my $pid = fork // die "fork: $!\n";
    if ($pid == 0) {
        local $ENV{PGOPTIONS} = '-c client_min_messages=warning';
        open STDOUT, '>', $file or POSIX::_exit(1);
        open STDERR, '>', "$file.err" or POSIX::_exit(1);
        exec(@cmd) or POSIX::_exit(127);
    }
    return Platform::Test::Async->new($pid, sub {
        my ($status) = @_;
        my $out = _slurp($file) // '';
        my $err = _slurp("$file.err") // '';
        unlink $file, "$file.err";
        die "psql_async failed: $err\n" if $status != 0;
        chomp $out;
        return $out;
    });
}

sub hold_lock {
    my ($self, $table, $seconds) = @_;

    my $h = $self->psql_async(<<"SQL");
BEGIN;
LOCK TABLE $table IN ACCESS EXCLUSIVE MODE;
SELECT pg_sleep($seconds);
COMMIT;
SQL

    # the test databases are clones: the same table has the same oid in
    # another file's database
    my $granted = "SELECT count(*) FROM pg_locks"
                  . " WHERE relation = '$table'::regclass"
                  . " AND database = (SELECT oid FROM pg_database"
                  . " WHERE datname = current_database())"
                  . " AND mode = 'AccessExclusiveLock' AND granted";

    $self->wait_until(sub { $self->psql($granted) > 0 }, 5)
        or die "hold_lock: the lock on $table was not granted\n";

    return $h;
}

sub hold_rows {
    my ($self, $table, $ids, %o) = @_;

    my $list = join ', ', map { "'$_'" } @$ids;
    my $tag = sprintf('hold_rows_%d_%d', $$, ++$self->{holds});
    my $release = defined $o{waiters}
                  ? <<"SQL" : "SELECT pg_sleep($o{seconds});";
DO \$\$
BEGIN
    FOR i IN 1 .. 250 LOOP
        PERFORM pg_stat_clear_snapshot();
        EXIT WHEN (SELECT count(*) FROM pg_stat_activity
                   WHERE application_name = 'ngx_platform'
                     AND datname = current_database()
                     AND wait_event_type = 'Lock') >= $o{waiters};
        PERFORM pg_sleep(0.02);
    END LOOP;
END
\$\$;
SQL

    # the session's name changes once the rows are locked: that is waited for
    my $h = $self->psql_async(<<"SQL");
BEGIN;
SELECT 1 FROM $table WHERE id IN ($list) FOR UPDATE;
SELECT set_config('application_name', '$tag', true);
$release
COMMIT;
SQL

    $self->wait_until(sub {
        $self->psql("SELECT count(*) FROM pg_stat_activity"
                    . " WHERE application_name = '$tag'") > 0
    }, 5) or die "hold_rows: the rows of $table were not locked\n";

    return $h;
}

sub redis {
    my ($self, @args) = @_;
    return _redis_cli($self->{redis_port}, @args);
}

sub _redis_cli {
    my ($port, @args) = @_;
    my ($ok, $out, $err) = _capture('redis-cli', '-h', '127.0.0.1',
                                    '-p', $port, @args);
    die "redis-cli failed: $err$out\n" unless $ok;
    chomp $out;
    return $out;
}

sub start_private_pg {
    my ($self) = @_;
    my $n = @{$self->{private}} + 1;
    my $h = Platform::Test::PG->new("$self->{testdir}/pg$n");
    push @{$self->{private}}, $h;
    return $h;
}

sub start_private_replica {
    my ($self, $primary) = @_;
    my $n = @{$self->{private}} + 1;
    my $h = Platform::Test::Replica->new("$self->{testdir}/pg$n", $primary);
    push @{$self->{private}}, $h;
    return $h;
}

sub start_private_redis {
    my ($self) = @_;
    my $n = @{$self->{private}} + 1;
    my $h = Platform::Test::Redis->new("$self->{testdir}/redis$n");
    push @{$self->{private}}, $h;
    return $h;
}

# a PgBouncer in transaction mode (Platform::Test::PgBouncer)
sub start_pgbouncer {
    my ($self, %opts) = @_;
    require Platform::Test::PgBouncer;
    my $n = @{$self->{private}} + 1;
    my $h = Platform::Test::PgBouncer->new("$self->{testdir}/pgbouncer$n",
                                           %opts);
    push @{$self->{private}}, $h;
    return $h;
}

# a master, a replica and three sentinels (Platform::Test::RedisSentinel)
sub start_redis_sentinel {
    my ($self, %opts) = @_;
    require Platform::Test::RedisSentinel;
    my $n = @{$self->{private}} + 1;
    my $h = Platform::Test::RedisSentinel->new(
        "$self->{testdir}/redis-sentinel$n", %opts);
    push @{$self->{private}}, $h;
    return $h;
}

# a Redis Cluster of the test's own (Platform::Test::RedisCluster)
sub start_redis_cluster {
    my ($self, %opts) = @_;
    require Platform::Test::RedisCluster;
    my $n = @{$self->{private}} + 1;
    my $h = Platform::Test::RedisCluster->new(
        "$self->{testdir}/redis-cluster$n", %opts);
    push @{$self->{private}}, $h;
    return $h;
}

sub wait_until {
    my ($self, $cb, $seconds) = @_;
    return _wait($cb, $seconds // 5);
}

### teardown

sub done {
    my ($self) = @_;
    $self->_teardown(1);
    return $self;
}

sub _teardown {
    my ($self, $explicit) = @_;
    return if $self->{torn_down} || $$ != $self->{owner};
    $self->{torn_down} = 1;
    delete $live{"$self"};

    $self->stop;
    for my $p (reverse @{$self->{private}}) {
        eval { $p->stop; 1 } or Test::More::diag("stopping $p->{dir}: $@");
    }

    my $log = $self->error_log // '';
    my $stderr = _slurp("$self->{testdir}/stderr.log") // '';
    my @bad = grep {
        my $line = $_;
        /\[(?:alert|crit|emerg)\]|ERROR:\s(?:Address|Leak)Sanitizer
          |SUMMARY:\s\w+Sanitizer|runtime\serror:/x
        && !grep { $line =~ $_ } @{$self->{ignore}}
    } split /\n/, $log . "\n" . $stderr;

    my $tb = Test::More->builder;
    if ($explicit || @bad) {
        Test::More::ok(!@bad, 'no alerts in error log')
            or Test::More::diag(join "\n", @bad[0 .. ($#bad < 30 ? $#bad : 29)]);
    }
    if (!$tb->is_passing && $log ne '') {
        Test::More::diag("error log tail:\n" . _tail($log, 30));
    }

    if ($self->{db}) {
        my ($ok, $out, $err) = $self->_psql_run('postgres',
            "DROP DATABASE IF EXISTS $self->{db} WITH (FORCE)");
        Test::More::diag("drop database $self->{db}: $err") unless $ok;
    }

    if ($ENV{PLATFORM_TEST_KEEP}) {
        Test::More::diag("kept $self->{testdir}");
    } else {
        rmtree($self->{testdir});
    }
}

sub DESTROY {
    my ($self) = @_;
    local ($@, $!, $?);
    $self->_teardown(0);
}

END {
    local $?;
    for my $t (values %live) {
        $t->_teardown(0);
    }
}

### helpers

# A port free right now, below the kernel's ephemeral range: a port the
# kernel hands out (bind to 0) may be given next to an outgoing
# connection of another file running meanwhile (a client, psql, libpq),
# and the server started on it then fails to bind
my %ports_given;

# a generator of its own: the files' srand(seed) keeps its sequence
my $port_state = ($$ * 7919 + int(time)) % 4294967296;

sub free_port {
    my ($low) = split ' ', _slurp('/proc/sys/net/ipv4/ip_local_port_range')
                           // '32768';
    $low = 32768 if !$low || $low < 12000;

    for (1 .. 1000) {
        $port_state = ($port_state * 69069 + 1) % 4294967296;
        my $port = 10000 + int($port_state / 65536) % ($low - 10000);
        next if $ports_given{$port};
        my $s = IO::Socket::INET->new(LocalAddr => '127.0.0.1',
                                      LocalPort => $port, Listen => 1,
                                      ReuseAddr => 1)
            or next;
        close $s;
        $ports_given{$port} = 1;
        return $port;
    }

    die "free port: none found below $low\n";
}

# A port that refuses every connection for the rest of the run: bound, so
# that no server another test file starts meanwhile can take it, but not
# listening (free_port's port may be taken by then)
my @closed_ports;

sub closed_port {
    my $s = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0,
                                  Proto => 'tcp')
        or die "closed port: $!\n";
    push @closed_ports, $s;
    return $s->sockport;
}

sub _port_open {
    my ($port) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port,
                                  Proto => 'tcp', Timeout => 1);
    return $s ? 1 : 0;
}

sub _wait {
    my ($cb, $seconds) = @_;
    my $deadline = time + $seconds;
    while (1) {
        my $v = $cb->();
        return $v if $v;
        return 0 if time > $deadline;
        sleep 0.02;
    }
}

sub _alive {
    my ($pid) = @_;
    return 0 unless kill 0, $pid;
    # a daemon's zombie (when nothing reaps it) counts as gone
    my $stat = _slurp("/proc/$pid/stat") // return 0;
    return $stat =~ /\)\s+Z\s/ ? 0 : 1;
}

sub _read_pid {
    my $c = _slurp($_[0]) // return;
    return $c =~ /(\d+)/ ? $1 : undef;
}

sub _slurp {
    my ($file) = @_;
    open my $fh, '<', $file or return undef;
    binmode $fh;
    local $/;
    my $c = <$fh>;
    return $c // '';
}

sub _spew {
    my ($file, $data) = @_;
    open my $fh, '>', $file or die "write $file: $!\n";
    binmode $fh;
    print $fh $data;
    close $fh or die "write $file: $!\n";
}

sub _append {
    my ($file, $data) = @_;
    open my $fh, '>>', $file or die "write $file: $!\n";
    binmode $fh;
    print $fh $data;
    close $fh;
}

sub _tail {
    my ($text, $n) = @_;
    my @l = split /\n/, $text // '';
    @l = @l[-$n .. -1] if @l > $n;
    return join("\n", @l);
}

# _capture(@cmd): ($ok, $stdout, $stderr) of a command, no shell.
sub _capture {
    my (@cmd) = @_;
    my $err = File::Temp->new;
    my $pid = open(my $fh, '-|') // die "fork: $!\n";
    if ($pid == 0) {
        open STDERR, '>', $err->filename or POSIX::_exit(1);
        open STDIN, '<', '/dev/null';
        exec(@cmd) or do {
            print STDERR "exec $cmd[0]: $!\n";
            POSIX::_exit(127);
        };
    }
    binmode $fh;
    local $/;
    my $out = <$fh> // '';
    close $fh;
    my $ok = $? == 0;
    my $errout = _slurp($err->filename) // '';
    return wantarray ? ($ok, $out, $errout) : $ok;
}

sub _as_pg_user {
    my (@cmd) = @_;
    return $is_root ? ('runuser', '-u', 'postgres', '--', @cmd) : @cmd;
}

sub _top { $top }


package Platform::Test::Async;

use POSIX ();
use Time::HiRes qw(sleep time);

sub new {
    my ($class, $pid, $finish) = @_;
    return bless { pid => $pid, finish => $finish }, $class;
}

sub pid { $_[0]{pid} }

sub wait {
    my ($self, %opts) = @_;
    return $self->{result} if $self->{waited};
    my $deadline = time + ($opts{timeout} // 30);
    while (1) {
        my $r = waitpid($self->{pid}, POSIX::WNOHANG());
        if ($r == $self->{pid} || $r == -1) {
            $self->{status} = $r == -1 ? 0 : $?;
            last;
        }
        if (time > $deadline) {
            CORE::kill('KILL', $self->{pid});
            waitpid($self->{pid}, 0);
            $self->{waited} = 1;
            die "async: no result within the timeout\n";
        }
        sleep 0.01;
    }
    $self->{waited} = 1;
    $self->{result} = $self->{finish}->($self->{status});
    return $self->{result};
}

sub kill {
    my ($self) = @_;
    return if $self->{waited};
    CORE::kill('TERM', $self->{pid});
    waitpid($self->{pid}, 0);
    $self->{waited} = 1;
}

sub DESTROY {
    my ($self) = @_;
    local ($@, $!, $?);
    $self->kill unless $self->{waited};
}


package Platform::Test::PG;

use Time::HiRes qw(sleep);

sub new {
    my ($class, $dir) = @_;
    my $self = bless { dir => $dir, data => "$dir/data",
                       port => Platform::Test::free_port() }, $class;

    mkdir $dir or die "mkdir $dir: $!\n";
    mkdir "$dir/run";
    if ($is_root) {
        my (undef, undef, $uid, $gid) = getpwnam('postgres')
            or die "no postgres user\n";
        chown $uid, $gid, $dir, "$dir/run";
    }

    my $pristine = $ENV{PLATFORM_TEST_PG_PRISTINE};
    if ($pristine && -d $pristine) {
        my ($ok, $out, $err) = Platform::Test::_capture(
            'cp', '-a', $pristine, $self->{data});
        die "copy cluster: $err\n" unless $ok;
    } else {
        my ($ok, $out, $err) = Platform::Test::_capture(
            Platform::Test::_as_pg_user(Platform::Test::_pg_bin('initdb'),
                '-D', $self->{data}, '-U', 'postgres', '--auth=trust',
                '--encoding=UTF8', '--locale=C.UTF-8', '--no-sync'));
        die "initdb: $err$out\n" unless $ok;
    }

    $self->start;

    my ($ok, $out, $err) = $self->_psql('postgres',
                                        'CREATE DATABASE platform');
    die "create database: $err\n" unless $ok;
    ($ok, $out, $err) = Platform::Test::_capture(
        Platform::Test::_top() . '/scripts/migrate', '--dsn', $self->dsn);
    die "migrate: $err$out\n" unless $ok;

    return $self;
}

sub port { $_[0]{port} }
sub log { Platform::Test::_slurp("$_[0]{dir}/postgres.log") }

sub dsn {
    my ($self) = @_;
    return "host=127.0.0.1 port=$self->{port} dbname=platform user=postgres";
}

sub start {
    my ($self) = @_;
    my $d = $self->{dir};
    my ($ok, $out, $err) = Platform::Test::_capture(
        Platform::Test::_as_pg_user(Platform::Test::_pg_bin('pg_ctl'),
            '-D', $self->{data}, '-l', "$d/postgres.log", '-w', '-t', '30',
            '-s', '-o', "-c listen_addresses=127.0.0.1 -p $self->{port}"
                . " -c unix_socket_directories=$d/run -c fsync=off"
                . " -c synchronous_commit=off",
            'start'));
    die "pg_ctl start: $err$out\n" . ($self->log // '') unless $ok;
    $self->{running} = 1;
    return $self;
}

sub stop {
    my ($self, %opts) = @_;
    return $self unless $self->{running};
    my ($ok, $out, $err) = Platform::Test::_capture(
        Platform::Test::_as_pg_user(Platform::Test::_pg_bin('pg_ctl'),
            '-D', $self->{data}, '-w', '-t', '30', '-s',
            '-m', $opts{mode} // 'fast', 'stop'));
    die "pg_ctl stop: $err$out\n" unless $ok;
    $self->{running} = 0;
    return $self;
}

sub _psql {
    my ($self, $db, $sql) = @_;
    local $ENV{PGOPTIONS} = '-c client_min_messages=warning';
    return Platform::Test::_capture(Platform::Test::_psql_cmd(
        '127.0.0.1', $self->{port}, 'postgres', $db, $sql));
}

sub psql {
    my ($self, $sql) = @_;
    my ($ok, $out, $err) = $self->_psql('platform', $sql);
    die "psql failed: $err\n" unless $ok;
    chomp $out;
    return $out;
}

sub psql_async {
    my ($self, $sql) = @_;
    my $file = sprintf('%s/psql-%d-%d.out', $self->{dir}, $$,
                       ++$self->{async_n});
    return Platform::Test::_psql_spawn($file, Platform::Test::_psql_cmd(
        '127.0.0.1', $self->{port}, 'postgres', 'platform', $sql));
}

sub DESTROY {
    my ($self) = @_;
    local ($@, $!, $?);
    eval { $self->stop(mode => 'immediate') };
}


package Platform::Test::Replica;

use Time::HiRes qw(sleep);

our @ISA = ('Platform::Test::PG');

sub new {
    my ($class, $dir, $primary) = @_;
    my $self = bless { dir => $dir, data => "$dir/data", primary => $primary,
                       port => Platform::Test::free_port() }, $class;

    mkdir $dir or die "mkdir $dir: $!\n";
    mkdir "$dir/run";
    if ($is_root) {
        my (undef, undef, $uid, $gid) = getpwnam('postgres')
            or die "no postgres user\n";
        chown $uid, $gid, $dir, "$dir/run";
    }

    # -R: standby.signal and primary_conninfo, so that it starts streaming
    my ($ok, $out, $err) = Platform::Test::_capture(
        Platform::Test::_as_pg_user(Platform::Test::_pg_bin('pg_basebackup'),
            '-h', '127.0.0.1', '-p', $primary->port, '-U', 'postgres',
            '-D', $self->{data}, '-R', '-X', 'stream', '--no-sync',
            '--checkpoint=fast'));
    die "pg_basebackup: $err$out\n" unless $ok;

    return $self->start;
}

sub start {
    my ($self) = @_;
    $self->SUPER::start;
    Platform::Test::_wait(sub {
        my ($ok, $out) = $self->_psql('platform',
            'SELECT pg_is_in_recovery() AND EXISTS (SELECT 1'
            . " FROM pg_stat_wal_receiver WHERE status = 'streaming')");
        $ok && $out =~ /^t/;
    }, 15) or die "replica on port $self->{port} does not stream:\n"
                  . Platform::Test::_tail($self->log, 10) . "\n";
    return $self;
}

sub pause_replay {
    my ($self) = @_;
    $self->psql('SELECT pg_wal_replay_pause()');
    return $self;
}

sub resume_replay {
    my ($self) = @_;
    $self->psql('SELECT pg_wal_replay_resume()');
    return $self;
}

sub wait_replayed {
    my ($self, $seconds) = @_;
    my $lsn = $self->{primary}->psql('SELECT pg_current_wal_lsn()');
    return Platform::Test::_wait(sub {
        my ($ok, $out) = $self->_psql('platform',
            "SELECT pg_last_wal_replay_lsn() >= '$lsn'::pg_lsn");
        $ok && $out =~ /^t/;
    }, $seconds // 10);
}


package Platform::Test::Redis;

use Time::HiRes qw(sleep);

sub new {
    my ($class, $dir) = @_;
    mkdir $dir or die "mkdir $dir: $!\n";
    my $self = bless { dir => $dir, port => Platform::Test::free_port() },
        $class;
    return $self->start;
}

sub port { $_[0]{port} }
sub addr { "127.0.0.1:$_[0]{port}" }

sub start {
    my ($self) = @_;
    my $d = $self->{dir};
    my ($ok, $out, $err) = Platform::Test::_capture('redis-server',
        '--port', $self->{port}, '--bind', '127.0.0.1', '--daemonize', 'yes',
        '--dir', $d, '--pidfile', "$d/redis.pid", '--logfile', "$d/redis.log",
        '--save', '', '--appendonly', 'no',
        '--maxmemory', '256mb', '--maxmemory-policy', 'volatile-lru');
    die "redis-server: $err$out\n" unless $ok;
    Platform::Test::_wait(sub {
        my ($ok) = Platform::Test::_capture('redis-cli', '-h', '127.0.0.1',
                                            '-p', $self->{port}, 'ping');
        $ok && Platform::Test::_port_open($self->{port});
    }, 10) or die "redis-server did not start\n";
    $self->{pid} = Platform::Test::_read_pid("$d/redis.pid");
    return $self;
}

sub stop {
    my ($self) = @_;
    my $pid = delete $self->{pid} or return $self;
    kill 'TERM', $pid;
    Platform::Test::_wait(sub { !Platform::Test::_alive($pid) }, 10)
        or kill 'KILL', $pid;
    Platform::Test::_wait(sub { !Platform::Test::_alive($pid) }, 5);
    return $self;
}

sub redis {
    my ($self, @args) = @_;
    return Platform::Test::_redis_cli($self->{port}, @args);
}

sub DESTROY {
    my ($self) = @_;
    local ($@, $!, $?);
    eval { $self->stop };
}

1;
