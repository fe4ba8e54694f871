#!/usr/bin/perl

# PostgreSQL pipelining (platform_pg_pipeline_depth), with one worker:
# a connection carries up to depth statements, the rest wait in the queue
# or are refused; a hundred concurrent requests share one connection and
# each gets its own answer; a failing statement fails only its request;
# requests whose clients left are read and dropped on a connection that is
# kept; a stalled connection is passed over while another has room; the
# queue's timeout and the query timeout hold with pipelining on.

# platform-test: serial (time bounds)

use strict;
use warnings;
use utf8;

use lib 't/lib';
use Test::More;
use Time::HiRes qw(sleep time);
use Platform::Test;
use Platform::JWT;

my $t = Platform::Test->new(workers => 1);
my $k = Platform::JWT::keys($t->testdir . '/keys');

sub conf {
    my ($pool) = @_;
    return <<"EOF";
    platform_cache_time 0;
    # one tenant fills the pipelines: no share of them is kept for others
    platform_pg_tenant_share 100;
$pool
    server {
        listen 127.0.0.1:%%PORT%%;
        location /tms/ { platform_tms; platform_auth tenant; }
        location /api/ {
            platform_persons;
            platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;
        }
        location ~ ^/api/v[^/]+/Counterparties/ {
            platform_counterparties;
            platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;
        }
        location = /metrics { platform_metrics; }
    }
EOF
}

$t->run(conf(<<'EOF'));
    platform_pg_pool_size 1;
    platform_pg_pipeline_depth 4;
    platform_pg_queue_size 0;
EOF

# the demo rows (tenant-demo, NG), and four more pending orders with an
# available driver each, for the assigns of clients that leave
$t->psql(Platform::Test::demo_data(qr/.+/s));

my %O = map { $_ => sprintf('a1000000-0000-4000-8000-%012d', $_) } 1 .. 5;
my %D;

for (6 .. 9) {
    $O{$_} = sprintf('a6100000-0000-4000-8000-%012d', $_);
    $D{$_} = sprintf('d6100000-0000-4000-8000-%012d', $_);
}

$t->psql(join '', map { <<"SQL" } 6 .. 9);
INSERT INTO drivers (id, tenant_id, country_code, user_id, name, phone,
                     vehicle_type, status)
VALUES ('$D{$_}', 'tenant-demo', 'NG', 'u-61-$_', 'Driver $_', '+234806$_',
        'VAN', 'AVAILABLE');
INSERT INTO delivery_orders (id, tenant_id, country_code, order_number,
                             status, pickup_address, dropoff_address)
VALUES ('$O{$_}', 'tenant-demo', 'NG', 'DO-610$_', 'PENDING', '{}', '{}');
SQL

my $M = '91000000-0000-4000-8000-000000000001';
my $persons = 'Bearer '
    . Platform::JWT::hs256($k, tenantId => 'tenant-demo');
my $merchant = 'Bearer '
    . Platform::JWT::hs256($k, tenantId => 'tenant-demo', merchantId => $M);

# requests as [method, path, options], for request, request_async and burst

sub order {
    my ($n) = @_;
    return [ 'GET', "/tms/delivery-orders/$O{$n}",
             headers => { tenantId => 'tenant-demo', countryCode => 'NG' } ];
}

sub account {
    my ($n, $lang) = @_;
    return [ 'GET', "/api/v1/PersonAccounts/b1000000-0000-4000-8000-"
                    . sprintf('%012d', $n) . '/get',
             headers => { Authorization => $persons,
                          ($lang ? ('Accept-Language' => $lang) : ()) } ];
}

sub group {
    my ($name, $lang) = @_;
    return [ 'POST', '/api/v1/Counterparties/groups',
             headers => { Authorization => $merchant,
                          ($lang ? ('Accept-Language' => $lang) : ()) },
             json => { name => $name } ];
}

sub assign {
    my ($n) = @_;
    return [ 'PATCH', "/tms/delivery-orders/$O{$n}/assign/$D{$n}",
             headers => { tenantId => 'tenant-demo', countryCode => 'NG' } ];
}

sub req { return $t->request(@{$_[0]}) }
sub req_async { return $t->request_async(@{$_[0]}) }

# every GET's answer, read one at a time: what each concurrent one must be
my %want;
for my $r (map({ order($_) } 1 .. 5), map({ account($_) } 1 .. 3)) {
    my $res = req($r);
    is($res->{status}, 200, "alone: $r->[1]");
    $want{$r->[1]} = $res->{content};
}

# the module's server processes in the test's database: "pid,pid"
sub backends {
    return $t->psql("SELECT coalesce(string_agg(pid::text, ','"
                    . " ORDER BY pid), '') FROM pg_stat_activity"
                    . " WHERE application_name = 'ngx_platform'"
                    . " AND datname = current_database()");
}

# how many of them wait for a lock
sub lock_waits {
    return $t->psql("SELECT count(*) FROM pg_stat_activity"
                    . " WHERE application_name = 'ngx_platform'"
                    . " AND datname = current_database()"
                    . " AND wait_event_type = 'Lock'");
}

sub metric {
    my ($name) = @_;
    my $text = $t->request('GET', '/metrics')->{content};
    return $text =~ /^\Q$name\E(?:\{[^}]*pool="primary"[^}]*\})? (\d+)$/m
           ? $1 : -1;
}

sub in_flight { metric('platform_pg_in_flight') }
sub waiting { metric('platform_pg_waiting') }
sub connects { metric('platform_pg_connects_total') }

sub phase {
    my ($name, $pool) = @_;
    ok($t->reload(conf($pool)), "$name: reload");
    ok($t->wait_until(sub { backends() eq '' }, 10),
       "$name: the old worker's connections are gone");
}

# the answer a GET must have, alone or among others
sub same {
    my ($res, $r) = @_;
    return $res->{status} == 200 && $res->{content} eq $want{$r->[1]};
}

sub is_same {
    my ($res, $r, $name) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    return is($res->{status} . ' ' . $res->{content},
              '200 ' . $want{$r->[1]}, $name);
}

# of many answers, those that are not what their GETs must have
sub not_same {
    my ($res, $reqs, $name) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    my @bad = grep { !same($res->[$_], $reqs->[$_]) } 0 .. $#$reqs;
    is(scalar @bad, 0, $name)
        or diag(join "\n", map { "$reqs->[$_][1]: $res->[$_]{status}"
                                 . " $res->[$_]{content}" } @bad[0 .. 2]);
}

### 1. the depth: one connection carries that many statements, no more

sub depth {
    my ($depth) = @_;
    my $name = "depth $depth";

    is(req(order(1))->{status}, 200, "$name: connected");
    my $pid = backends();
    like($pid, qr/^\d+$/, "$name: one connection");

    my $lock = $t->hold_lock('delivery_orders', 1.5);

    my @r = map { order($_ % 5 + 1) } 0 .. 5;
    my @h = map { req_async($_) } @r;

    ok($t->wait_until(sub { in_flight() == $depth }, 1),
       "$name: in flight, $depth");
    is(waiting(), 0, "$name: none waits in the queue (its size is 0)");
    is(backends(), $pid, "$name: on the one connection");
    is(lock_waits(), 1, "$name: whose head waits for the lock");

    my @res = map { $_->wait } @h;
    $lock->wait;

    my @served = grep { $res[$_]{status} == 200 } 0 .. $#res;
    my @refused = grep { $res[$_]{status} == 503 } 0 .. $#res;

    is(scalar @served, $depth, "$name: served, $depth");
    is(scalar @refused, 6 - $depth, "$name: the others refused");
    is(scalar(grep { $res[$_]{time} >= 1 } @served), $depth,
       "$name: the served ones waited for the lock");
    not_same([ @res[@served] ], [ @r[@served] ],
             "$name: every served one has its order");
    is(scalar(grep { $res[$_]{time} < 1 } @refused), 6 - $depth,
       "$name: refused at once, while the lock was held");

    if (@refused) {
        my $res = $res[$refused[0]];
        Platform::Test::is_envelope_b_error($res, 503,
            'Service temporarily unavailable.',
            'A backend is unavailable; retry shortly.', "$name: refusal");
        is($res->{headers}{'retry-after'}, '1', "$name: Retry-After");
    }

    is(backends(), $pid, "$name: the connection is kept");
}

depth(4);

phase('depth 1', <<'EOF');
    platform_pg_pool_size 1;
    platform_pg_pipeline_depth 1;
    platform_pg_queue_size 0;
EOF

depth(1);

### 2. a hundred concurrent requests on one connection

phase('one connection', <<'EOF');
    platform_pg_pool_size 1;
    platform_pg_pipeline_depth 16;
EOF

is(req(order(1))->{status}, 200, 'one connection: connected');
my $pid = backends();
my $connects = connects();
like($pid, qr/^\d+$/, 'one connection: one server process');

my @hundred = map { $_ % 3 ? order($_ % 5 + 1) : account($_ % 4 || 1) }
              1 .. 100;

my $res = $t->burst(\@hundred);
not_same($res, \@hundred,
         'burst: 100 concurrent GETs, each 200 with its own answer');

# the same behind a lock: 16 in the pipeline, 84 in the queue, then all
my $lock = $t->hold_lock('delivery_orders', 0.8);
$res = $t->burst(\@hundred);
$lock->wait;
not_same($res, \@hundred, 'burst behind a lock: each 200 with its own answer');
cmp_ok((sort { $b <=> $a } map { $_->{time} } @$res)[0], '>=', 0.5,
       'burst behind a lock: the lock held some');

is(backends(), $pid, 'one connection: the same server process throughout');
is(connects(), $connects, 'one connection: no connection opened');

### 3. a failing statement fails only its own request

# behind a statement that waits for a lock, fifteen more in the same
# pipeline: two creates of a group that exists (a unique violation, 409)
# among reads and creates that succeed

$lock = $t->hold_lock('delivery_orders', 2);
my $head = req_async(order(1));
ok($t->wait_until(sub { lock_waits() == 1 }, 2),
   'isolation: the head waits for the lock');

my @mix = (account(1), account(2), group('Pipeline 1'), account(3),
           order(2), group('Grain suppliers'), account(1),
           group('Pipeline 2'), order(3), account(2),
           group(" grain SUPPLIERS \n", 'fr'), account(3),
           group('Pipeline 3'), account(1), order(4));
my @h = map { req_async($_) } @mix;

ok($t->wait_until(sub { in_flight() == 16 }, 1.5),
   'isolation: all sixteen in the one pipeline')
    or diag('in flight ' . in_flight() . ', waiting ' . waiting());
is(waiting(), 0, 'isolation: none in the queue');

my @mixed = map { $_->wait } @h;
is_same($head->wait, order(1), 'isolation: the head');
$lock->wait;

for my $i (0 .. $#mix) {
    my ($r, $res) = ($mix[$i], $mixed[$i]);
    (my $label = $r->[-1]{name} // '') =~ s/\s+/ /g;
    my $name = $r->[0] eq 'GET' ? "isolation: $r->[1]"
                                : "isolation: group '$label'";

    if ($r->[0] eq 'GET') {
        is_same($res, $r, $name);

    } elsif ($r->[-1]{name} =~ /grain/i) {
        my $fr = $r->[3]{'Accept-Language'};
        is($res->{status}, 409, "$name: 409");
        is_deeply($res->{json}, {
            succeeded => JSON::PP::false, data => undef,
            message => $fr ? 'Le groupe de contreparties existe déjà.'
                           : 'Counterparty group already exists.',
            errors => [ $fr ? 'Le marchand a déjà un groupe de ce nom.'
                            : 'The merchant already has a group of this'
                              . ' name.' ],
        }, "$name: Envelope A" . ($fr ? ', in French' : ''))
            or diag($res->{content});

    } else {
        is($res->{status}, 200, "$name: 200") or diag($res->{content});
        is($res->{json}{data}{name}, $r->[-1]{name}, "$name: created");
    }
}

is($t->psql("SELECT string_agg(name || ' ' || n, ', ' ORDER BY name) FROM"
            . " (SELECT name, count(*) n FROM counterparty_groups"
            . " WHERE merchant_id = '$M' GROUP BY name) g"),
   'Grain suppliers 1, Pipeline 1 1, Pipeline 2 1, Pipeline 3 1',
   'isolation: the three groups created, no second Grain suppliers');
my $conflicts = () = $t->error_log
    =~ /"platform_counterparties_group" failed: SQLSTATE 23505/g;
is($conflicts, 2,
   'isolation: the two conflicts were unique violations of PostgreSQL');
is(backends(), $pid, 'isolation: the connection is kept');
is(connects(), $connects, 'isolation: no connection opened');

### 4. clients that leave while their statements are in flight

phase('clients leave', <<'EOF');
    platform_pg_pool_size 1;
    platform_pg_pipeline_depth 8;
EOF

is(req(order(1))->{status}, 200, 'clients leave: connected');
$pid = backends();
$connects = connects();

my $log = length $t->error_log;
my $left = () = $t->error_log =~ /client prematurely closed connection/g;

$lock = $t->hold_lock('delivery_orders', 1.5);

# four assigns and two reads; their clients give up after 0.5 s
$res = $t->burst([ map({ assign($_) } 6 .. 9), order(2), account(1) ],
                 timeout => 0.5);
is(join(' ', map { $_->{status} } @$res), '599 ' x 5 . '599',
   'clients leave: no answer before they leave');

ok($t->wait_until(sub {
    (() = $t->error_log =~ /client prematurely closed connection/g)
        - $left == 6 }, 2),
   'clients leave: the worker saw the six leave');
is(in_flight(), 6, 'clients leave: their statements stay in the pipeline');
is(lock_waits(), 1, 'clients leave: behind the lock');

$lock->wait;

ok($t->wait_until(sub { in_flight() == 0 }, 2),
   'clients leave: the orphans\' results are read');
for (1 .. 3) {
    is_same(req(account(2)), account(2), "clients leave: served after, $_");
}
is_same(req(order(2)), order(2), 'clients leave: a read of the lock\'s table');
is(backends(), $pid, 'clients leave: on the same connection');
is(connects(), $connects, 'clients leave: no connection opened');
unlike(substr($t->error_log, $log),
       qr/\[(?:alert|crit|emerg)\]|connection lost|timed out/,
       'clients leave: nothing lost, no alert');

# each assign is one statement: it ran whole, though nobody read its answer
is($t->psql("SELECT string_agg(o.order_number || ' ' || o.status || ' '"
            . " || (o.driver_id = d.id) || ' ' || d.status, ', '"
            . " ORDER BY o.order_number)"
            . " FROM delivery_orders o, drivers d"
            . " WHERE d.user_id = 'u-61-' || right(o.order_number, 1)"
            . " AND o.order_number LIKE 'DO-610_'"),
   join(', ', map { "DO-610$_ ASSIGNED true ON_DELIVERY" } 6 .. 9),
   'clients leave: every assign done, order and driver together');

### 5. a stalled connection is passed over while another has room

phase('stall', <<'EOF');
    platform_pg_pool_size 2;
    platform_pg_pipeline_depth 8;
EOF

is_same(req(account(1)), account(1), 'stall: connected');

$lock = $t->hold_lock('delivery_orders', 3);
my $start = time;
my $slow = req_async(order(1));
ok($t->wait_until(sub { lock_waits() == 1 }, 2),
   'stall: one statement waits for the lock');
sleep 0.1;

my @one = map { account($_ % 3 + 1) } 1 .. 30;
$res = [ map { req($_) } @one ];
not_same($res, \@one, 'stall: thirty one at a time, all served');
is(join(' ', grep { $_ >= 1 } map { $_->{time} } @$res), '',
   'stall: one at a time, each in under a second');

for my $n (1 .. 3) {
    my @r = map { account($_ % 3 + 1) } 1 .. 8;
    my $res = $t->burst(\@r);
    not_same($res, \@r, "stall: eight at once, $n: all served");
    is(join(' ', grep { $_ >= 1 } map { $_->{time} } @$res), '',
       "stall: eight at once, $n: each in under a second");
}

cmp_ok(time - $start, '<', 2.8, 'stall: all while the lock was held');
is(scalar(split /,/, backends()), 2, 'stall: on the other connection');

my $s = $slow->wait;
is_same($s, order(1), 'stall: the slow one served once the lock goes');
cmp_ok($s->{time}, '>=', 2, 'stall: it did wait');
$lock->wait;

### 6. the queue and the query timeout with pipelining on

phase('timeouts', <<'EOF');
    platform_pg_pool_size 1;
    platform_pg_pipeline_depth 2;
    platform_pg_queue_size 2;
    platform_pg_queue_timeout 1s;
    platform_pg_query_timeout 2500ms;
EOF

is_same(req(account(1)), account(1), 'timeouts: connected');
$pid = backends();

# two in the pipeline, two in the queue until its timeout, two refused

$lock = $t->hold_lock('person_accounts', 1.6);

my @six = map { account($_ % 3 + 1, $_ % 2 ? 'fr' : undef) } 0 .. 5;
@h = map { req_async($_) } @six;

ok($t->wait_until(sub { in_flight() == 2 && waiting() == 2 }, 0.8),
   'timeouts: two in flight, two waiting');

my @six_res = map { $_->wait } @h;
$lock->wait;

my (%outcome, @wrong);
my %texts = (
    en => [ 'Service temporarily unavailable.',
            'A backend is unavailable; retry shortly.',
            'A backend did not answer in time; retry shortly.' ],
    fr => [ 'Service temporairement indisponible.',
            'Un service interne est indisponible ; réessayez bientôt.',
            'Un service interne n\'a pas répondu à temps ; réessayez'
            . ' bientôt.' ],
);

for my $i (0 .. 5) {
    my ($r, $res) = ($six[$i], $six_res[$i]);
    my $lang = $r->[-1]{'Accept-Language'} ? 'fr' : 'en';
    my ($message, $busy, $late) = @{$texts{$lang}};
    my $o;

    if ($res->{status} == 200) {
        # the account, in the request's language
        $o = $res->{json}{data}{id} eq (split m{/}, $r->[1])[4]
             && $res->{json}{message} eq ($lang eq 'fr'
                                          ? 'Compte de personne récupéré.'
                                          : 'Person account retrieved.')
             && $res->{time} >= 1.2 ? 'served' : 'wrong';

    } elsif ($res->{status} == 503) {
        my $e = $res->{json};
        my $detail = $e && !$e->{succeeded} && !defined $e->{data}
                     && $e->{message} eq $message ? $e->{errors}[0] // ''
                                                  : '';
        my $retry = ($res->{headers}{'retry-after'} // '') eq '1';

        $o = !$retry ? 'wrong'
             : $detail eq $busy && $res->{time} < 0.7 ? 'refused'
             : $detail eq $late && $res->{time} >= 0.8 && $res->{time} < 1.5
               ? 'queue timeout' : 'wrong';

    } else {
        $o = 'wrong';
    }

    $outcome{$o}++;
    push @wrong, "$lang $res->{status} $res->{time} $res->{content}"
        if $o eq 'wrong';
}

is_deeply(\%outcome, { served => 2, 'queue timeout' => 2, refused => 2 },
          'timeouts: two served after the lock, two 503 at the queue\'s'
          . ' timeout, two 503 at once, in their languages')
    or diag(join "\n", @wrong);
is_same(req(account(2)), account(2), 'timeouts: served after');
is(backends(), $pid, 'timeouts: the same connection');

# two statements in the pipeline past the query timeout: 503, then the
# pool serves again

$lock = $t->hold_lock('person_accounts', 6);
@h = map { req_async(account($_)) } 1 .. 2;
ok($t->wait_until(sub { in_flight() == 2 }, 1),
   'query timeout: two in the pipeline');

for my $res (map { $_->wait } @h) {
    is($res->{status}, 503, 'query timeout: 503');
    is_deeply($res->{json}, {
        succeeded => JSON::PP::false, data => undef,
        message => 'Service temporarily unavailable.',
        errors => [ 'A backend did not answer in time; retry shortly.' ],
    }, 'query timeout: says so') or diag($res->{content});
    cmp_ok($res->{time}, '>=', 2, 'query timeout: after the timeout');
    cmp_ok($res->{time}, '<', 4, 'query timeout: before the lock goes');
}

$lock->kill;
$t->psql('SELECT pg_terminate_backend(pid) FROM pg_stat_activity'
         . " WHERE application_name = 'psql' AND pid <> pg_backend_pid()"
         . " AND datname = current_database()");

ok($t->wait_until(sub { req(account(3))->{status} == 200 }, 5),
   'query timeout: the pool serves again');
is_same(req(account(3)), account(3), 'query timeout: with the right answer');

$t->done;
done_testing;
