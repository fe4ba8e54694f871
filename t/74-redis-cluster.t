#!/usr/bin/perl

# platform_redis_cluster against a real Redis Cluster of three masters with
# a replica each, started by the test: OTP codes, webhook claims and rate
# limits of tenants whose keys live on different masters, each key on the
# master its hash tag names; the map learned from one seed; a slot moved
# under load (-MOVED followed) and a slot in migration under load (-ASK
# followed); a master killed under load: nothing but 503 for its slots
# while the cluster promotes its replica, served again within 5 s of the
# promotion, no OTP code validated twice, no webhook event stored twice;
# the other masters' tenants served throughout when the cluster allows it;
# a lost master's slots learned again with no request asking for them;
# a password for every node; nginx -t.

# platform-test: serial (failovers, time bounds)

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Platform::Test;
use POSIX ();
use Time::HiRes qw(sleep time);

my $t = Platform::Test->new(workers => 2);

### nginx -t

my $seed_conf = <<'EOF';
    server {
        listen 127.0.0.1:%%PORT%%;
        location /validate-otp/ { platform_otp; }
    }
EOF

$t->write_config("    platform_redis 127.0.0.1:6379;\n"
                 . "    platform_redis_cluster 127.0.0.1:7000;\n$seed_conf");
like($t->check_config->{output}, qr/"platform_redis" and "platform_redis_cluster" both/,
     'nginx -t: platform_redis and platform_redis_cluster');

$t->write_config("    platform_redis_sentinel m 127.0.0.1:26379;\n"
                 . "    platform_redis_cluster 127.0.0.1:7000;\n$seed_conf");
like($t->check_config->{output},
     qr/"platform_redis_cluster" directive is duplicate, or set with "platform_redis_sentinel"/,
     'nginx -t: platform_redis_sentinel and platform_redis_cluster');

$t->write_config("    platform_redis_cluster 127.0.0.1:7000;\n"
                 . "    platform_redis_cluster 127.0.0.1:7001;\n$seed_conf");
like($t->check_config->{output}, qr/is duplicate/, 'nginx -t: twice');

$t->write_config("    platform_redis_cluster redis.example:7000;\n$seed_conf");
like($t->check_config->{output}, qr/seed "redis.example:7000": an IP address and a port/,
     'nginx -t: a seed is an address');

$t->write_config("    platform_redis_cluster 127.0.0.1;\n$seed_conf");
like($t->check_config->{output}, qr/seed "127.0.0.1": an IP address and a port/,
     'nginx -t: a seed has a port');

my $pass_file = $t->testdir . '/redis.pass';
open my $pf, '>', $pass_file or die;
print $pf "secret\n";
close $pf;
$t->write_config("    platform_redis_cluster password=$pass_file;\n"
                 . $seed_conf);
like($t->check_config->{output}, qr/names no seed node/,
     'nginx -t: a seed at least');

$t->write_config("    platform_redis_cluster 127.0.0.1:7000;\n"
                 . "    platform_redis_db 2;\n$seed_conf");
like($t->check_config->{output}, qr/has only the database 0/, 'nginx -t: a database');

### the cluster

my $cl = $t->start_redis_cluster;
my ($seed) = $cl->seeds;

# one seed is enough: the map names the others
my $conf = Platform::Test::redis_routes_config(<<"EOF", <<"EOF");
    platform_redis_cluster $seed;
    platform_redis_timeout 500ms;
EOF
        location /limited/ {
            platform_rate_limit tenant 1r/m burst=2;
            rewrite ^/limited(/validate-otp/.*)\$ \$1 break;
            platform_otp;
        }

        location /wide/ {
            platform_rate_limit tenant 1000r/s burst=1000;
            rewrite ^/wide(/validate-otp/.*)\$ \$1 break;
            platform_otp;
        }

        location = /metrics { platform_metrics; }
EOF
$t->run($conf);

$t->ignore_redis_failover;

# every worker has a connected master for every slot
sub all_connected {
    my $m = $t->request('GET', '/metrics')->{content} // '';
    my @w = $m =~ /^platform_redis_connected\{worker="\d+"\} (\d)/mg;
    return @w == $t->workers && !grep { !$_ } @w;
}

ok($t->wait_until(\&all_connected, 10),
   'every worker has every slot\'s master connected');
is($t->request('GET', '/health')->{status}, 200, 'health');

# the master that holds a key now
sub holder { $cl->master_of_slot($cl->slot_of($_[0])) }

# a tenant whose keys are on the master given: its OTP keys, and those of
# the other key forms given
sub tenant_on {
    my ($master, $prefix, @forms) = @_;
    for my $i (1 .. 5000) {
        my $tenant = ($prefix // 'tenant-') . $i;
        return $tenant
            unless grep { holder(sprintf $_, $tenant) ne $master }
                        '{%s}', @forms;
    }
    die "no tenant on $master\n";
}

my @tenants;
push @tenants, tenant_on($_) for $cl->masters;
is(scalar @tenants, 3, 'three tenants on three masters');

sub otp {
    my ($tenant, $code, $prefix) = @_;
    return $t->request('GET', ($prefix // '') . "/validate-otp/$code",
                       headers => { tenantId => $tenant,
                                    countryCode => 'NG' })->{status};
}

sub store_code {
    my ($tenant, $code) = @_;
    $cl->redis('SET', "otp:{$tenant}:NG:$code", 1, 'EX', 300);
}

for my $tenant (@tenants) {
    my $m = holder("{$tenant}");

    store_code($tenant, '246810');
    is($cl->redis_at($m, 'EXISTS', "otp:{$tenant}:NG:246810"), 1,
       "$tenant: the code written with its tag is on the tenant's master");
    is(otp($tenant, '246810'), 200, "$tenant: the code validates");
    is(otp($tenant, '246810'), 404, "$tenant: once");
    is($cl->redis_at($m, 'EXISTS', "otp:attempts:{$tenant}:127.0.0.1"), 1,
       "$tenant: the attempts counter is on the tenant's master");
    is($cl->redis_at($m, 'CLUSTER', 'KEYSLOT',
                     "otp:attempts:{$tenant}:127.0.0.1"),
       $cl->slot_of("{$tenant}"), "$tenant: the slot of its tag");
}

# a key without the tag is not found: the module asks for the tagged one
$cl->redis('SET', "otp:$tenants[0]:NG:135791", 1, 'EX', 300);
is(otp($tenants[0], '135791'), 404, 'a code written without the tag: 404');

# webhooks: the claim key carries the name and tenant as its tag
sub deliver {
    my ($id) = @_;
    return $t->request('POST', '/api/webhooks/public/src/events',
                       headers => { 'Content-Type' => 'application/json' },
                       body => qq({"id":"$id"}));
}

sub rows {
    my ($like) = @_;
    return $t->psql("SELECT count(*) FROM webhook_events"
                    . " WHERE event_key LIKE '$like'") + 0;
}

my $r = deliver('ev-1');
is($r->{status}, 200, 'webhook: stored');
is(deliver('ev-1')->{json}{data}{duplicate}, JSON::PP::true(),
   'webhook: the duplicate answered');
is($cl->redis_at(holder('{src:}'), 'GET', 'webhook:source:{src:}:ev-1'),
   'stored', 'webhook: the claim key is on the master of its tag');

# rate limits of two tenants on two masters, each its own budget
my ($ta, $tb) = @tenants;
is(join(',', map { otp($ta, '000000', '/limited') } 1 .. 4),
   '404,404,404,429', "rate limit: $ta has burst + 1");
is(otp($tb, '000000', '/limited'), 404, "rate limit: $tb is not limited");
for my $tenant ($ta, $tb) {
    my @keys = split /\n/, $cl->redis_at(holder("{tenant:$tenant}"), 'KEYS',
                                         "platform:rl:{tenant:$tenant}*");
    is(scalar @keys, 1, "rate limit: $tenant\'s key is on its tag's master");
}

### load: requests in a loop in children until stopped

# each request [label, method, path, %opts]; a line per answer:
# "time label status seconds"
sub load {
    my ($name, @reqs) = @_;
    my $file = $t->testdir . "/load-$name";
    unlink $file, "$file.stop";
    my $pid = fork // die "fork: $!\n";
    if ($pid == 0) {
        open my $fh, '>', $file or POSIX::_exit(1);
        $fh->autoflush(1);
        my $n = 0;
        while (!-e "$file.stop") {
            my ($label, @req) = @{$reqs[$n++ % @reqs]};
            my $res = $t->request(@req, timeout => 5);
            printf $fh "%.3f %s %d %.3f\n", time, $label, $res->{status},
                $res->{time};
        }
        POSIX::_exit(0);
    }
    return { pid => $pid, file => $file };
}

sub stop_load {
    my (@loads) = @_;
    my @rows;
    for my $l (@loads) {
        open my $fh, '>', "$l->{file}.stop" or die;
        close $fh;
    }
    for my $l (@loads) {
        waitpid $l->{pid}, 0;
        open my $fh, '<', $l->{file} or die "$l->{file}: $!\n";
        my @mine = map { [split] } <$fh>;
        die "$l->{file}: no answers\n" unless @mine;
        push @rows, @mine;
        unlink $l->{file}, "$l->{file}.stop";
    }
    return sort { $a->[0] <=> $b->[0] } @rows;
}

sub otp_req {
    my ($label, $tenant, $code, $prefix) = @_;
    return [$label, 'GET', ($prefix // '') . "/validate-otp/$code",
            headers => { tenantId => $tenant, countryCode => 'NG' }];
}

sub statuses { join ' ', map { $_->[2] } @_ }

### a slot moved under load: -MOVED

my $moved = $tenants[0];
my $slot = $cl->slot_of("{$moved}");
my $from = $cl->master_of_slot($slot);
my ($to) = grep { $_ ne $from } $cl->masters;

store_code($moved, '111111');

my @loads = map { load("moved-$_", otp_req('m', $moved, "99999$_")) } 0 .. 2;
sleep 0.3;
my $t0 = time;
$cl->move_slot($slot, $to);
my $move_took = time - $t0;
sleep 0.3;
my @rows = stop_load(@loads);
my @after = grep { $_->[0] > $t0 } @rows;

cmp_ok(scalar @after, '>', 10, 'moved: requests during and after the move');
is(statuses(grep { $_->[2] != 404 } @rows), '',
   'moved: no answer but 404 under load');
my ($slowest) = sort { $b <=> $a } map { $_->[3] } @rows;
diag(sprintf 'slot moved in %.2f s under load: %d answers, the slowest '
     . 'in %d ms', $move_took, scalar @rows, $slowest * 1000);
is($cl->master_of_slot($slot), $to, 'moved: the slot is on another master');
is(otp($moved, '111111'), 200, 'moved: the code moved with its slot');
is(otp($moved, '111111'), 404, 'moved: once');

### a slot in migration under load: -ASK for keys not on the old owner

my $eslot = $cl->slot_of('{src:}');
my $efrom = $cl->master_of_slot($eslot);
my ($eto) = grep { $_ ne $efrom } $cl->masters;
$cl->move_slot_begin($eslot, $eto);

# new events, each once: their claims go to the importing master
@loads = map {
    my $w = $_;
    load("ask-$w", map {
        my $id = "ev-ask-$w-$_";
        [$id, 'POST', '/api/webhooks/public/src/events',
         headers => { 'Content-Type' => 'application/json' },
         body => qq({"id":"$id"})]
    } 1 .. 1000)
} 1 .. 2;
sleep 1;
@rows = stop_load(@loads);
my %seen;
is(scalar(grep { $seen{$_->[1]}++ } @rows), 0, 'ask: each event once');

is(statuses(grep { $_->[2] != 200 } @rows), '', 'ask: every event stored');
my $claims = $cl->redis_at($eto, 'CLUSTER', 'COUNTKEYSINSLOT', $eslot);
is($claims, scalar @rows, 'ask: their claims were written on the importing '
   . 'master') or diag(scalar(@rows) . " events");
is($cl->redis_at($efrom, 'EXISTS', 'webhook:source:{src:}:ev-1'), 1,
   'ask: an older claim is still on the old owner');
is(deliver('ev-1')->{json}{data}{duplicate}, JSON::PP::true(),
   'ask: an older claim answers the duplicate from the old owner');
$cl->move_slot_finish($eslot, $eto, $efrom);
is(deliver('ev-ask-1-1')->{json}{data}{duplicate}, JSON::PP::true(),
   'ask: a duplicate answered from the claim once the slot moved');
is(rows('ev-ask-%'), scalar @rows, 'ask: one row each');

### a slot left in migration: a script of split keys waits, up to its deadline

# the tenant's attempts counter moved to the importing master, its code
# nowhere: the old owner answers -ASK, the importing one -TRYAGAIN until
# it owns the slot
my $stuck = tenant_on(($cl->masters)[0], 'mig-');
is(otp($stuck, '000000'), 404, 'migration: an attempt counted');
my $mslot = $cl->slot_of("{$stuck}");
my $mfrom = $cl->master_of_slot($mslot);
my ($mto) = grep { $_ ne $mfrom } $cl->masters;
my $mid = $cl->node_id($mto);
$cl->move_slot_begin($mslot, $mto);
$cl->redis_at($mfrom, 'MIGRATE', split(/:/, $mto), '', 0, 5000, 'KEYS',
              "otp:attempts:{$stuck}:127.0.0.1");
my $res = $t->request('GET', '/validate-otp/000000',
                      headers => { tenantId => $stuck, countryCode => 'NG' });
is($res->{status}, 503, 'migration: 503 at the deadline');
cmp_ok($res->{time}, '<', 1.5, 'migration: not later')
    or diag("$res->{time} s");
my $async = $t->request_async('GET', '/validate-otp/000000',
                              headers => { tenantId => $stuck,
                                           countryCode => 'NG' });
sleep 0.05;
$cl->redis_at($mto, 'CLUSTER', 'SETSLOT', $mslot, 'NODE', $mid);
is($async->wait->{status}, 404, 'migration: answered once it is over');
$cl->move_slot_finish($mslot, $mto, $mfrom);

### a master killed under load

# Redis's default, cluster-require-full-coverage yes: once the master is
# marked failed every node refuses every command (-CLUSTERDOWN) until its
# replica is promoted, so all tenants see 503 meanwhile. Its own slots
# answer 503 at once from the kill.

my ($victim) = grep { $_ ne $moved } @tenants;
my $vmaster = holder("{$victim}");
my $other = tenant_on((grep { $_ ne $vmaster } $cl->masters)[0]);

# codes 5W0001 ... for the load's children W, each its own, each code asked
# once: consumed all along, right up to the kill and from the promotion
$cl->redis_at($vmaster, 'EVAL', <<'EOS', 1, "otp:{$victim}:NG:0", $victim);
for w = 0, 2 do
    for i = 1, 4000 do
        redis.call('SET', 'otp:{' .. ARGV[1] .. '}:NG:'
                   .. string.format('5%d%04d', w, i), 1, 'EX', 300)
    end
end
EOS
$cl->redis_at($vmaster, 'WAIT', 1, 2000);

@loads = ((map { my $w = $_;
                 load("v-$w", map { otp_req(sprintf('5%d%04d', $w, $_),
                                            $victim,
                                            sprintf('5%d%04d', $w, $_)) }
                                  1 .. 4000) } 0 .. 2),
          load('o', otp_req('o', $other, '000000', '/wide')),
          load('w', ['w', 'POST', '/api/webhooks/public/src/events',
                     headers => { 'Content-Type' => 'application/json' },
                     body => '{"id":"ev-failover"}']));
sleep 0.5;
my $killed_at = time;
$cl->kill_master($vmaster);
my $took = $cl->wait_failover($vmaster, 15);
my $promoted_at = time;
ok(defined $took, 'failover: the cluster promoted the replica')
    or diag(map { "$_: " . $cl->redis_at($_, 'CLUSTER', 'NODES') . "\n" }
            grep { $_ ne $vmaster } $cl->nodes);
sleep 5.5;
@rows = stop_load(@loads);

my @v = grep { $_->[1] =~ /^\d+$/ } @rows;
my @o = grep { $_->[1] eq 'o' } @rows;
my @w = grep { $_->[1] eq 'w' } @rows;
my %ok;
$ok{$_->[1]}++ for grep { $_->[2] == 200 } @v;

is(statuses(grep { $_->[2] != 200 && $_->[2] != 404 && $_->[2] != 503 } @v),
   '', 'failover: OTP answers only 200, 404 and 503');
is(statuses(grep { $_->[2] == 503 && $_->[0] < $killed_at } @v, @o), '',
   'failover: no 503 before the kill');
cmp_ok(scalar(grep { $_->[2] == 200 && $_->[0] < $killed_at } @v), '>', 10,
       'failover: codes validated before the kill');
cmp_ok(scalar(grep { $_->[2] == 200 && $_->[0] > $promoted_at } @v), '>', 10,
       'failover: and after the promotion');

# a code validated on the old master is not back on the new one
my @validated = map { "otp:{$victim}:NG:$_" } sort keys %ok;
my $back_keys = 0;
while (my @batch = splice @validated, 0, 500) {
    $back_keys += $cl->redis('EXISTS', @batch);
}
is($back_keys, 0, 'failover: no code validated is valid again '
   . '(' . scalar(keys %ok) . ' validated)');
is(statuses(grep { $_->[2] != 200 } @w), '',
   'failover: webhook deliveries answered 200 (Redis or not)');
is(rows('ev-failover'), 1, 'failover: one row for the event, delivered '
   . scalar(@w) . ' times');

my ($last_503) = reverse map { $_->[0] } grep { $_->[2] == 503 } @v;
my ($back) = map { $_->[0] } grep { $_->[0] > $promoted_at
                                    && $_->[2] != 503 } @v;
ok($back && (!$last_503 || $last_503 < $promoted_at + 5),
   'failover: served again within 5 s of the promotion')
    or diag(sprintf 'last 503 %.1f s after the promotion',
            ($last_503 // 0) - $promoted_at);
my @o503 = map { $_->[0] - $killed_at } grep { $_->[2] == 503 } @o;
diag(sprintf "failover: promoted %.2f s after the kill (as polled); the "
     . "killed master's tenant answered 503 from the kill for %.2f s, "
     . "until %.2f s %s the promotion was seen; another master's tenant "
     . "%d times 503 (-CLUSTERDOWN), from %.2f s to %.2f s after the kill",
     $took // -1, ($last_503 // $killed_at) - $killed_at,
     abs(($last_503 // 0) - $promoted_at),
     ($last_503 // 0) < $promoted_at ? 'before' : 'after',
     scalar @o503, $o503[0] // 0, $o503[-1] // 0);

is(statuses(grep { $_->[2] != 404 && $_->[2] != 503 } @o), '',
   'failover: another master\'s tenant answered 404 or 503');
my ($o_503) = reverse map { $_->[0] } grep { $_->[2] == 503 } @o;
ok(!$o_503 || $o_503 < $promoted_at + 5,
   'failover: another master\'s tenant served again as soon');
is(otp($victim, '000001'), 404, 'failover: the new master answers');

### the next master killed, the cluster serving on without it

# cluster-require-full-coverage no: the other masters serve on; a lost
# master's slots are learned again with no request asking for them

$cl->redis_at($_, 'CONFIG', 'SET', 'cluster-require-full-coverage', 'no')
    for grep { $_ ne $vmaster } $cl->nodes;

# not the master just promoted: it has no replica
my $promoted = holder("{$victim}");
my ($v2master, $o2master) = grep { $_ ne $promoted } $cl->masters;
my $v2 = tenant_on($v2master);
# its OTP keys and its rate limit's key on a master that stays
my $o2 = tenant_on($o2master, undef, 'platform:rl:{tenant:%s}');
store_code($v2, '222222');
$cl->redis_at($v2master, 'WAIT', 1, 2000);

sub local_limits {
    my $m = $t->request('GET', '/metrics')->{content} // '';
    my $n = 0;
    $n += $1 while $m =~ /^platform_rate_limit_local_total(?:\{[^}]*\})? (\d+)/mg;
    return $n;
}
my $local = local_limits();

@loads = (load('o', otp_req('o', $o2, '000000', '/wide')),
          load('p', otp_req('p', $o2, '000000')));
sleep 0.5;
$killed_at = time;
$cl->kill_master($v2master);
$took = $cl->wait_failover($v2master, 15);
$promoted_at = time;
ok(defined $took, 'second failover: promoted');
ok($t->wait_until(\&all_connected, 4),
   'second failover: every worker has every slot\'s master again, '
   . 'unasked');
my $learned = time - $promoted_at;
@rows = stop_load(@loads);

is(statuses(grep { $_->[2] != 404 } @rows), '',
   'second failover: another master\'s tenant served throughout, '
   . 'rate limited too');
is(local_limits(), $local, 'second failover: its rate limit counted in '
   . 'Redis throughout, not by each worker alone');
is(otp($v2, '222222'), 200, 'second failover: the code on the new master');
diag(sprintf 'second failover: promoted %.2f s after the kill (as polled), '
     . 'every worker\'s map complete %.2f s after that, unasked (a gauge '
     . 'written every second)', $took // -1, $learned);

### a password for every node

my $pass = 'pw-' . join '', map { ('a' .. 'z')[rand 26] } 1 .. 16;
my @live = grep { $_ ne $vmaster && $_ ne $v2master } $cl->nodes;
my @masters = $cl->masters;
my @pt = map { tenant_on($_, 'pw-') } @masters;
for my $node (@live) {
    $cl->redis_at($node, 'CONFIG', 'SET', 'masterauth', $pass);
    $cl->redis_at($node, 'CONFIG', 'SET', 'requirepass', $pass);
}
open my $fh, '>', $t->testdir . '/redis.pass' or die;
print $fh "$pass\n";
close $fh;

for my $i (0 .. $#pt) {
    $cl->redis_at($masters[$i], '-a', $pass, '--no-auth-warning', 'SET',
                  "otp:{$pt[$i]}:NG:864200", 1);
}

my $t2 = Platform::Test->new(workers => 1, db => 0);
my $dsn = $t->pg_dsn;
my $dir = $t->testdir;
$t2->run(<<"EOF");
    platform_pg "$dsn";
    platform_redis_cluster $masters[0] password=$dir/redis.pass;

    server {
        listen 127.0.0.1:%%PORT%%;
        location /validate-otp/ { platform_otp; }
        location = /health { platform_health; }
    }
EOF
ok($t2->wait_until(sub { $t2->request('GET', '/health')->{status} == 200 }),
   'password: connected');
is(join(',', map {
       $t2->request('GET', '/validate-otp/864200',
                    headers => { tenantId => $_, countryCode => 'NG' })
          ->{status}
   } @pt), join(',', map { 200 } @pt),
   'password: a code on each master validates');
unlike($t2->error_log, qr/\Q$pass\E/, 'password: never in the log');
$t2->done;

$t->done;
done_testing;
