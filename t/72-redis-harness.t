#!/usr/bin/perl

# The harness's own Redis deployments, without nginx: a Redis Cluster of
# three masters with a replica each (slots computed here as the Redis
# Cluster specification says, a slot moved with its key, a slot left in
# migration answering -ASK, a master killed and its replica promoted) and a
# master with a replica and three sentinels (a master killed and replaced,
# the old one back as a replica, a manual failover, passwords). Each
# failover must complete within 10 s.

# platform-test: serial (two failovers, time bounds)

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Platform::Test;

my $t = Platform::Test->new(db => 0);

### Redis Cluster

my $cl = $t->start_redis_cluster;

is(scalar $cl->nodes, 6, 'cluster: six nodes');
is(scalar $cl->seeds, 3, 'cluster: three seeds');
is_deeply([ sort $cl->masters ], [ sort $cl->seeds ],
          'cluster: the seeds are the masters');
like($cl->redis_at($_, 'CLUSTER', 'INFO'), qr/^cluster_state:ok/m,
     "cluster: $_ is ok") for $cl->nodes;

# slots, as the specification's examples and redis-server compute them
# (of the bytes redis-cli is given: a character string's UTF-8)
is($cl->slot_of('foo'), 12182, 'slot of foo');
is($cl->slot_of('123456789'), 12739, 'slot of 123456789');
is($cl->slot_of('{user1000}.following'), $cl->slot_of('{user1000}.followers'),
   'one hash tag, one slot');
is($cl->slot_of('{user1000}.following'), $cl->slot_of('user1000'),
   'the hash tag alone counts');
is(Platform::Test::RedisCluster->slot_of('foo'), 12182, 'a class method');

my @keys = ('foo', '{}', 'a{}b', 'foo{}{bar}', 'foo{{bar}}zap',
            'foo{bar}{zap}', '{', '}{x}', "caf\x{e9}", "{\x{263a}}:otp",
            'otp:{tenant-a}:NG:123456', 'webhook:source:{src:}:ev-1',
            map { "key:$_" } 1 .. 4);
is_deeply([ map { $cl->slot_of($_) } @keys ],
          [ map { $cl->redis('CLUSTER', 'KEYSLOT', $_) + 0 } @keys ],
          'slot_of agrees with CLUSTER KEYSLOT');

# the slots are shared among the three masters
my %owners = map { ($cl->master_of_slot($_) // 'none') => 1 } 0, 8191, 16383;
is_deeply([ sort keys %owners ], [ sort $cl->masters ],
          'the slots are spread over the masters');

# a slot moved with its key
is($cl->redis('SET', 'foo', 'bar'), 'OK', 'cluster: a key');
my $slot = $cl->slot_of('foo');
my $from = $cl->master_of_slot($slot);
my ($to) = grep { $_ ne $from } $cl->masters;
$cl->move_slot($slot, $to);
is($cl->master_of_slot($slot), $to, 'moved: the slot has a new master');
is($cl->redis_at($to, 'GET', 'foo'), 'bar', 'moved: the key with it');
like($cl->redis_at($from, 'GET', 'foo'), qr/^MOVED $slot \Q$to\E$/,
     'moved: the old master redirects');
is($cl->master_of_slot($slot, $_), $to, "moved: $_ knows")
    for $cl->nodes;

# a slot left in migration: -ASK for a key the old owner lacks
my $ask = 'ask-me';
my $aslot = $cl->slot_of($ask);
my $afrom = $cl->master_of_slot($aslot);
my ($ato) = grep { $_ ne $afrom } $cl->masters;
is($cl->move_slot_begin($aslot, $ato), $afrom, 'migration: begun');
like($cl->redis_at($afrom, 'SET', $ask, 1), qr/^ASK $aslot \Q$ato\E$/,
     'migration: -ASK for a new key');
$cl->move_slot_finish($aslot, $ato, $afrom);
is($cl->master_of_slot($aslot), $ato, 'migration: finished');
is($cl->redis('SET', $ask, 1), 'OK', 'migration: the key is written');

# a master killed: its replica takes over
my $victim = $cl->master_of_slot($slot);
$cl->redis_at($victim, 'WAIT', 1, 2000);
is($cl->kill_master($victim), $victim, 'cluster: a master killed');
my $took = $cl->wait_failover($victim, 10);
ok(defined $took, 'cluster: failover within 10 s')
    and diag(sprintf 'cluster failover: %.1f s after the kill', $took);
my $new = $cl->master_of_slot($slot);
ok($new && $new ne $victim, 'cluster: the slot has a new master');
is($cl->redis('GET', 'foo'), 'bar', 'cluster: the key on the new master');
ok(!grep({ $_ eq $victim } $cl->masters), 'cluster: the old master is gone');
my ($vnode) = grep { $cl->addr_of($_) eq $victim } @{$cl->{nodes}};
ok(!-e "$vnode->{dir}/redis.pid", 'cluster: no pid file left to clean up');

### Redis Sentinel

my $s = $t->start_redis_sentinel;

is($s->master_name, 'platform', 'sentinel: the default master name');
is(scalar $s->sentinels, 3, 'sentinel: three sentinels');
my $master = $s->master;
like($master, qr/^127\.0\.0\.1:\d+$/, 'sentinel: a master reported');
is($s->master_port, ($master =~ /(\d+)$/)[0], 'sentinel: its port');
like($s->redis_at($master, 'ROLE'), qr/\Amaster\n/, 'sentinel: it is one');
my ($replica) = $s->replicas;
like($s->redis_at($replica, 'INFO', 'replication'),
     qr/^master_link_status:up/m, 'sentinel: the replica is in sync');
like($s->redis_at(($s->sentinels)[0], 'SENTINEL', 'MASTER', 'platform'),
     qr/^num-other-sentinels\n2$/m, 'sentinel: the sentinels know each other');

is($s->redis('SET', 'k', 'v'), 'OK', 'sentinel: a key');
is($s->redis('WAIT', 1, 2000), 1, 'sentinel: on the replica');

my $old = $s->kill_master;
is($old, $master, 'sentinel: the master killed');
$took = $s->wait_failover($old, 10);
ok(defined $took, 'sentinel: failover within 10 s')
    and diag(sprintf 'sentinel failover: %.1f s after the kill', $took);
is($s->master, $replica, 'sentinel: the replica is the master');
is($s->redis('GET', 'k'), 'v', 'sentinel: with the key');
like($s->redis_at($old, 'PING'), qr/Could not connect/,
     'sentinel: the old master is dead');

$s->revive($old);
like($s->redis_at($old, 'ROLE'), qr/\Aslave\n/,
     'sentinel: the old master back as a replica');

$took = $s->failover(10);
ok(defined $took, 'sentinel: a manual failover');
is($s->master, $old, 'sentinel: the old master is the master again');
like($s->redis_at($replica, 'SET', 'k', 'w'), qr/^READONLY/,
     'sentinel: the other one is a replica');

### Sentinel with passwords

my $p = $t->start_redis_sentinel(master_name => 'other', password => 'pw-1',
                                 sentinel_password => 'pw-2');
is($p->master_name, 'other', 'passwords: the master name');
is($p->redis('SET', 'k', 'v'), 'OK', 'passwords: the harness authenticates');
my ($mport) = $p->master =~ /(\d+)$/;
my ($sport) = ($p->sentinels)[0] =~ /(\d+)$/;
like(Platform::Test::_redis_cli($mport, 'GET', 'k'), qr/^NOAUTH/,
     'passwords: the master wants one');
like(Platform::Test::_redis_cli($sport, 'PING'), qr/^NOAUTH/,
     'passwords: the sentinels want one');
$p->stop;

$t->done;
done_testing;
