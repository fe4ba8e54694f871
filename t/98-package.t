#!/usr/bin/perl

# The Debian package ("make deb") in Debian's own nginx: lintian finds no
# error in it; apt-get installs it beside nginx-core; its files are where
# they belong and it is enabled in /etc/nginx/modules-enabled, as Debian's
# libnginx-mod-* packages are; its migrate script migrates a new database
# and its apikey script makes a key; the system's nginx, with a
# configuration of the test's own that includes modules-enabled, loads the
# packaged module and serves a health check and an endpoint behind that
# key; "apt-get remove" leaves the system's nginx -t passing and no module.
#
# dpkg takes one installer at a time: the test holds dpkg's lock while it
# installs, and asserts no time bound, so it runs beside other files. The
# machine is left as the test found it: the package, and whatever apt-get
# installed with it, is purged at the end. Needs root (or sudo without a
# password). Runs in the plain run only: the package is built by Debian's
# rules, not from the AddressSanitizer build.

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Platform::Test;
use Fcntl qw(:flock);
use POSIX ();

my $pkg = 'libnginx-mod-http-platform';
my $share = "/usr/share/$pkg";
my $so = '/usr/lib/nginx/modules/ngx_platform_module.so';
my $available = '/usr/share/nginx/modules-available/mod-http-platform.conf';
my $enabled = '/etc/nginx/modules-enabled/50-mod-http-platform.conf';
my $nginx = '/usr/sbin/nginx';
my $top = $ENV{PLATFORM_TEST_TOP} // '.';

plan(skip_all => 'PLATFORM_TEST_MODULE is not set: run it with "make test"')
    unless $ENV{PLATFORM_TEST_MODULE};
plan(skip_all => 'the package is tested in the plain run')
    if $ENV{PLATFORM_TEST_PRELOAD};
plan(skip_all => 'needs dpkg and apt-get (Debian)')
    unless -x '/usr/bin/dpkg' && -x '/usr/bin/apt-get';

my @sudo = $> == 0 ? () : ('sudo', '-n');
plan(skip_all => 'needs root or sudo without a password')
    if @sudo && system('sudo -n true >/dev/null 2>&1') != 0;

# Another run of this file on the machine (another checkout) installs and
# removes the same package: one at a time, with a flock on dpkg's
# directory (dpkg's own locks are fcntl locks on files, which this does
# not touch; and no lock file is left behind).
open(my $lock, '<', '/var/lib/dpkg') or die "/var/lib/dpkg: $!\n";
flock($lock, LOCK_EX) or die "lock: $!\n";

sub installed {
    my %st;
    for (split /\n/, `dpkg-query -W -f '\${Package}\\t\${db:Status-Status}\\n'`) {
        my ($p, $s) = split /\t/;
        $st{$p} = 1 if ($s // '') eq 'installed';
    }
    return \%st;
}

sub status {
    my $s = `dpkg-query -W -f '\${db:Status-Status}' $_[0] 2>/dev/null`;
    return $s eq '' ? 'not-installed' : $s;
}

# run a command, output and error together; ($ok, $output)
sub cmd {
    my (@c) = @_;
    my $pid = open(my $fh, '-|') // die "fork: $!\n";
    if (!$pid) {
        open STDERR, '>&', \*STDOUT;
        open STDIN, '<', '/dev/null';
        exec(@c) or POSIX::_exit(127);
    }
    local $/;
    my $out = <$fh> // '';
    close $fh;
    return ($? == 0, $out);
}

sub apt {
    my (@args) = @_;
    return cmd(@sudo, 'env', 'DEBIAN_FRONTEND=noninteractive', 'apt-get',
               '-y', '-q', '-o', 'DPkg::Lock::Timeout=120', @args);
}

if (status($pkg) ne 'not-installed') {
    plan(skip_all => "$pkg is on this machine already ("
         . status($pkg) . '): the test would replace it');
}

my ($ok, $out) = cmd($nginx, '-t', '-q');
plan(skip_all => "the system's nginx -t fails before the test:\n$out")
    unless $ok;

my $t = Platform::Test->new(db => 0);
my $d = $t->testdir;

### build: "make deb" rebuilds the package when a source is newer

($ok, $out) = cmd('make', '-s', '-C', $top, '--no-print-directory', 'deb');
ok($ok, 'make deb') or diag($out);
chomp(my $version = `cd $top && dpkg-parsechangelog -S Version`);
chomp(my $arch = `dpkg --print-architecture`);
my $deb = "$top/build/deb/${pkg}_${version}_$arch.deb";
ok(-f $deb, "the package is ${pkg}_${version}_$arch.deb")
    or BAIL_OUT("no package to test");

($ok, $out) = cmd('lintian', '--fail-on', 'error', $deb);
ok($ok && $out !~ /^E: /m, 'lintian: no error') or diag($out);

my %fields = map { /^(\S+): (.*)$/ ? ($1, $2) : () }
    split /\n/, `dpkg-deb -f $deb`;
chomp(my $abi = `dpkg-query -W -f '\${Provides}' nginx`);
($abi) = $abi =~ /(nginx-abi-[^\s,]+)/;
ok($abi, "Debian's nginx provides an nginx-abi ($abi)");
like($fields{Depends} // '', qr/(^|, )\Q$abi\E(,|$)/,
     'Depends on the nginx-abi of the nginx it was built for');
like($fields{Depends} // '', qr/libpq5 \(>= [^)]+\)/, 'Depends on libpq5');
like($fields{Depends} // '', qr/libjansson4 \(>= [^)]+\)/,
     'Depends on libjansson4');
like($fields{Depends} // '', qr/libhiredis[\d.]+ \(>= [^)]+\)/,
     'Depends on libhiredis');

### install, with nginx-core when it is missing

my $before = installed();
my @install = ('--no-install-recommends', 'install', $deb);
push @install, 'nginx-core' unless $before->{'nginx-core'};

# what apt-get would install, so that the end purges exactly that (and
# never what someone else installs meanwhile)
($ok, $out) = apt('-s', @install);
my @new = grep { !$before->{$_} } $out =~ /^Inst (\S+)/mg;
ok($ok && grep({ $_ eq $pkg } @new), "apt-get would install $pkg")
    or diag($out);

# nginx-core installed here must not start an nginx on port 80
my $policy = '/usr/sbin/policy-rc.d';
my $made_policy = 0;
if (!-e $policy && !$before->{'nginx-core'}) {
    cmd(@sudo, 'sh', '-c', "printf '#!/bin/sh\\nexit 101\\n' >$policy"
                         . " && chmod 755 $policy");
    $made_policy = 1;
}

my $cleaned = 0;
sub cleanup {
    return if $cleaned++;
    my $now = installed();
    my @purge = grep { $now->{$_} || status($_) ne 'not-installed' } @new;
    if (@purge) {
        my ($ok, $out) = apt('purge', @purge);
        diag("purging @purge: $out") unless $ok;
    }
    cmd(@sudo, 'rm', '-f', $policy) if $made_policy;
}
END { cleanup() }

($ok, $out) = apt(@install);
ok($ok, "apt-get install ./$pkg.deb") or diag($out);
is(status($pkg), 'installed', 'dpkg: installed');
chomp(my $got = `dpkg-query -W -f '\${Version}' $pkg`);
is($got, $version, "version $version, debian/changelog's");
is(status('nginx-core'), 'installed', 'beside nginx-core');

### the files

ok(-f $so, "the module: $so");
is(Platform::Test::_slurp($available),
   "load_module modules/ngx_platform_module.so;\n",
   "$available loads it");
is(readlink($enabled), $available,
   "enabled: $enabled links to it, as Debian's modules are");
opendir(my $dh, "$top/migrations") or die "migrations: $!\n";
my @migrations = sort grep { /^\d{4}_\w+\.sql$/ } readdir $dh;
closedir $dh;
ok(@migrations >= 1, 'the repository has migrations');
my @shipped = map { s{.*/}{}r } sort glob("$share/migrations/*.sql");
is_deeply(\@shipped, \@migrations, "every migration in $share/migrations");
for my $s (qw(migrate apikey)) {
    ok(-x "$share/scripts/$s", "$share/scripts/$s, executable");
}
my $example = "/usr/share/doc/$pkg/examples/platform.conf";
is(Platform::Test::_slurp($example),
   Platform::Test::_slurp("$top/conf/platform.conf"),
   "conf/platform.conf as $example");
ok(-f "/usr/share/doc/$pkg/copyright", 'a copyright file');

### the installed scripts: migrate a new database, make a key

my $db = 't_pkg_' . join('', map { ('a' .. 'z')[rand 26] } 1 .. 10);
my $dsn = "host=$t->{pg_host} port=$t->{pg_port} dbname=$db"
    . " user=$t->{pg_user}";
my $admin = "host=$t->{pg_host} port=$t->{pg_port} dbname=postgres"
    . " user=$t->{pg_user}";
my $db_made = 0;

sub psql {
    my ($conninfo, $sql) = @_;
    my ($ok, $out) = cmd('psql', '-XAtq', '-v', 'ON_ERROR_STOP=1',
                         '-d', $conninfo, '-c', $sql);
    die "psql: $out" unless $ok;
    chomp $out;
    return $out;
}

psql($admin, "CREATE DATABASE $db");
$db_made = 1;
END { psql($admin, "DROP DATABASE IF EXISTS $db WITH (FORCE)") if $db_made }

($ok, $out) = cmd("$share/scripts/migrate", '--dsn', $dsn);
ok($ok, "the installed migrate") or diag($out);
is(psql($dsn, 'SELECT count(*) FROM schema_migrations'),
   scalar @migrations, 'it applied every migration it ships');

{
    local $ENV{PLATFORM_PG} = $dsn;
    ($ok, $out) = cmd("$share/scripts/apikey", 'create',
                      '--tenant', 'tenant-pkg', '--scope', 'pkg');
}
my ($key) = $out =~ /^key: (plk_\S+)$/m;
ok($ok && $key, 'the installed apikey makes a key') or diag($out);

{
    delete local $ENV{PLATFORM_PG};
    ($ok, $out) = cmd("$share/scripts/apikey", 'list');
}
ok(!$ok && $out =~ /PLATFORM_PG is not set/,
   'without PLATFORM_PG the installed apikey says what it needs')
    or diag($out);

psql($dsn, q{INSERT INTO product_classifications (group_name, tags, position)
             VALUES ('Packaged', '{deb}', 1)});

### the system's nginx loads the packaged module

($ok, $out) = cmd($nginx, '-T', '-q');
ok($ok, "the system's nginx -t passes with the module enabled")
    or diag($out);
like($out, qr/^load_module modules\/ngx_platform_module\.so;$/m,
     "the system's configuration loads it (modules-enabled)");

# a configuration of the test's own, in its own prefix, that includes the
# system's modules-enabled: load_module paths there are relative to the
# prefix, as they are to Debian's (/usr/share/nginx/modules)
symlink('/usr/lib/nginx/modules', "$d/modules") or die "symlink: $!\n";
my $port = $t->port;
my $redis = $t->redis_addr;
Platform::Test::_spew("$d/nginx.conf", <<"EOF");
worker_processes 1;
daemon on;
master_process on;
pid $d/nginx.pid;
error_log $d/error.log info;

include /etc/nginx/modules-enabled/*.conf;

events {
    worker_connections 64;
}

http {
    access_log off;
    client_body_temp_path $d/temp/client_body;
    proxy_temp_path $d/temp/proxy;
    fastcgi_temp_path $d/temp/fastcgi;
    uwsgi_temp_path $d/temp/uwsgi;
    scgi_temp_path $d/temp/scgi;

    platform_pg "$dsn";
    platform_redis $redis;

    server {
        listen 127.0.0.1:$port;

        location = /health { platform_health; }

        location /api/v1/products/ {
            platform_products;
            platform_auth apikey;
            platform_apikey_scope pkg;
        }
    }
}
EOF
ok($t->try_run, "the system's nginx starts with it")
    or diag($t->startup_error);

my ($worker) = $t->workers;
my $maps = $worker ? Platform::Test::_slurp("/proc/$worker/maps") // '' : '';
like($maps, qr/ \Q$so\E$/m, "the worker runs the packaged $so");
unlike($maps, qr/ \Q$ENV{PLATFORM_TEST_MODULE}\E$/m,
       'not the build directory\'s module');

my $r = $t->request('GET', '/health');
is($r->{status}, 200, 'health: 200');
is_deeply($r->{json}, { status => 'up', postgres => { status => 'up' },
                        redis => { status => 'up' } },
          'health: PostgreSQL and Redis up') or diag($r->{content});

$r = $t->request('GET', '/api/v1/products/classifications',
                 headers => { apiKey => $key // '' });
is($r->{status}, 200, 'products with the installed apikey\'s key: 200')
    or diag($r->{content});
is_deeply($r->{json}, { classifications => [
              { group => 'Packaged', tags => [ 'deb' ] } ] },
          'products: the row of the database the package migrated')
    or diag($r->{content});

$r = $t->request('GET', '/api/v1/products/classifications');
is($r->{status}, 401, 'products without a key: 401');

$t->stop;

### apt-get remove leaves nginx working

($ok, $out) = apt('remove', $pkg);
ok($ok, "apt-get remove $pkg") or diag($out);
ok(!-e $so, 'the module file is gone');
ok(!-e $available, "$available is gone");
ok(!-l $enabled && !-e $enabled, "$enabled is gone");
ok(!-e "$share/scripts/migrate", "$share is gone");

($ok, $out) = cmd($nginx, '-t', '-q');
ok($ok, "the system's nginx -t still passes") or diag($out);

cleanup();
is(status($pkg), 'not-installed', 'purged: nothing of the package left');
my @left = glob('/etc/nginx/modules-enabled/*platform*');
is_deeply(\@left, [], 'nothing of it in modules-enabled');

$t->done;
done_testing;
