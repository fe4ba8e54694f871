#!/usr/bin/perl

# The history of a task request's statuses (task_request_history): one row
# per change with who (the userId header), from, to and when, written by
# the statement that makes the change, so that a change whose history row
# fails is not made either; none for a request that leaves the status as
# it was. Concurrent toggles and assigns of one task, with and without a
# transaction of the test holding the row first, leave each task's rows a
# chain: every from_status is the previous row's to_status, the first
# starts at the status the task had, the last ends at the status it has.

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Platform::Test;

my $t = Platform::Test->new(workers => 2);

$t->run(<<'EOF');
    # the rounds below hold the rows 0.5 s: that wait, and the queue on the
    # row behind it, must not reach the lock timeout (503, t/65 covers it)
    platform_pg_lock_timeout 10s;

    server {
        listen 127.0.0.1:%%PORT%%;
        location /api/v1/task-requests/ { platform_task_requests; }
    }
EOF

my $json = JSON::PP->new->canonical;

my $lab = '41000000-0000-4000-8000-000000000001';
my $s1 = '51000000-0000-4000-8000-000000000001';
my $s2 = '51000000-0000-4000-8000-000000000002';
my %T = map { $_ => sprintf('61000000-0000-4000-8000-%012d', $_) } 1 .. 4;

$t->psql(<<"SQL");
INSERT INTO laboratories (id, tenant_id, country_code, name)
VALUES ('$lab', 'tenant-a', 'NG', 'Lab');
INSERT INTO samplers (id, tenant_id, name)
VALUES ('$s1', 'tenant-a', 'One'), ('$s2', 'tenant-a', 'Two');
INSERT INTO task_requests (id, tenant_id, country_code, laboratory_id,
                           sampler_id, status, priority, due_at)
VALUES ('$T{1}', 'tenant-a', 'NG', '$lab', NULL, 'PENDING', NULL, NULL),
       ('$T{2}', 'tenant-a', 'NG', '$lab', '$s1', 'ASSIGNED', 'LOW',
        now() + interval '1 day'),
       ('$T{3}', 'tenant-a', 'NG', '$lab', '$s2', 'ACCEPTED', 'LOW',
        now() + interval '1 day'),
       ('$T{4}', 'tenant-a', 'NG', '$lab', NULL, 'PENDING', NULL, NULL);
SQL

my $due = $t->psql(q{SELECT to_char((now() AT TIME ZONE 'UTC')::date + 3,
                                    'YYYY-MM-DD')});

sub request {
    my ($async, $op, $id, $user, $body) = @_;
    my @args = ('PATCH', "/api/v1/task-requests/$id/$op",
                headers => { tenantId => 'tenant-a', userId => $user,
                             'Content-Type' => 'application/json' },
                body => $json->encode($body));
    return $async ? $t->request_async(@args) : $t->request(@args);
}

sub toggle_body {
    my ($status, $party) = @_;
    return { status => $status, samplerOrLaboratoryId => $party // $lab };
}

sub assign_body {
    my ($sampler) = @_;
    return { samplerId => $sampler // $s1, priority => 'MEDIUM',
             dueDate => $due };
}

# [changed_by, from, to, changed_at] of a task, in id order
sub rows {
    my ($id) = @_;
    my $out = $t->psql("SELECT changed_by || '|' || from_status || '|'"
                       . " || to_status || '|' || changed_at"
                       . " FROM task_request_history"
                       . " WHERE task_id = '$id' AND tenant_id = 'tenant-a'"
                       . " ORDER BY id");
    return [ map { [ split /\|/ ] } grep { length } split /\n/, $out ];
}

sub status {
    my ($id) = @_;
    return $t->psql("SELECT status FROM task_requests WHERE id = '$id'");
}

# the chain of a task's rows from the status it had to the one it has;
# an empty string when it holds, else what is wrong
sub chain_problem {
    my ($rows, $initial, $final) = @_;
    my $at = $initial;
    for my $i (0 .. $#$rows) {
        my ($who, $from, $to) = @{$rows->[$i]};
        return "row $i: from $from, but the status was $at" if $from ne $at;
        return "row $i: from $from to itself" if $from eq $to;
        $at = $to;
    }
    return "the rows end at $at, the task is $final" if $at ne $final;
    return '';
}

### one row per change, in order, with who, from, to and when

my @steps = (
    [ 'assign-sampler', 'lab-admin', assign_body(), 'PENDING>ASSIGNED' ],
    [ 'assign-sampler', 'lab-admin', assign_body($s2), undef ],
    [ 'toggle-accept-reject', 'sampler-2', toggle_body('ACCEPTED', $s2),
      'ASSIGNED>ACCEPTED' ],
    [ 'toggle-accept-reject', 'sampler-2', toggle_body('ACCEPTED', $s2),
      undef ],
    [ 'toggle-accept-reject', 'sampler-2', toggle_body('REJECTED', $s2),
      'ACCEPTED>REJECTED' ],
    [ 'assign-sampler', 'lab-admin', assign_body(), undef ],    # 409
    [ 'toggle-accept-reject', 'lab-user', toggle_body('PENDING'),
      'REJECTED>PENDING' ],
    [ 'toggle-accept-reject', 'stranger', toggle_body('ACCEPTED', $s1),
      undef ],                                                  # 403
    [ 'assign-sampler', 'lab-admin-2', assign_body($s1),
      'PENDING>ASSIGNED' ],
);

my @want;
for my $s (@steps) {
    my ($op, $user, $body, $change) = @$s;
    my $r = request(0, $op, $T{1}, $user, $body);
    push @want, "$user:$change" if $change;
    my @got = map { "$_->[0]:$_->[1]>$_->[2]" } @{rows($T{1})};
    is("@got", "@want", "$op by $user: "
                        . ($change // "no row ($r->{status})"));
}
is_deeply([ map { $_->[0] } @{rows($T{1})} ],
          [ qw(lab-admin sampler-2 sampler-2 lab-user lab-admin-2) ],
          'changed_by is the userId of each request');

my $times = $t->psql("SELECT bool_and(changed_at > prev)"
                     . " FROM (SELECT changed_at, lag(changed_at)"
                     . " OVER (ORDER BY id) AS prev"
                     . " FROM task_request_history"
                     . " WHERE task_id = '$T{1}') x WHERE prev IS NOT NULL");
is($times, 't', 'changed_at grows with the rows');
is($t->psql("SELECT (SELECT max(changed_at) FROM task_request_history"
            . " WHERE task_id = '$T{1}') = updated_at"
            . " AND updated_at <= clock_timestamp()"
            . " AND updated_at > now() - interval '1 minute'"
            . " FROM task_requests WHERE id = '$T{1}'"), 't',
   'the last row is at the time the task was last changed');
is(chain_problem(rows($T{1}), 'PENDING', status($T{1})), '',
   'the rows are a chain from PENDING to the status');

### the change and its history row are one: a failing row undoes both

$t->psql(<<'SQL');
CREATE FUNCTION refuse_history() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.changed_by = 'refused-by-trigger' THEN
        RAISE EXCEPTION 'history refused' USING ERRCODE = 'P0001';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER refuse_history BEFORE INSERT ON task_request_history
    FOR EACH ROW EXECUTE FUNCTION refuse_history();
SQL

my $before = $t->psql("SELECT row_to_json(r) FROM task_requests r"
                      . " WHERE id = '$T{4}'");
my $r = request(0, 'assign-sampler', $T{4}, 'refused-by-trigger',
                assign_body());
is($r->{status}, 500, 'assign whose history row fails: 500');
is($r->{json}{statusCode}, 500, '500: Envelope B');
unlike($r->{content}, qr/history refused|trigger/, '500: nothing internal');
$r = request(0, 'toggle-accept-reject', $T{4}, 'refused-by-trigger',
             toggle_body('REJECTED'));
is($r->{status}, 500, 'toggle whose history row fails: 500');
is($t->psql("SELECT row_to_json(r) FROM task_requests r"
            . " WHERE id = '$T{4}'"), $before,
   'neither change was made without its history row');
is(scalar @{rows($T{4})}, 0, 'and no row was written');

$r = request(0, 'toggle-accept-reject', $T{4}, 'refused-by-trigger',
             toggle_body('PENDING'));
is($r->{status}, 200, 'the same status again writes no row: 200');
$t->psql('DROP TRIGGER refuse_history ON task_request_history');

### concurrent changes: the rows stay a chain

# a transaction of the test holds the task's row for a while, so that the
# requests pile up on the row lock

my @statuses = qw(ACCEPTED REJECTED PENDING);
my $n = 0;

for my $round (1 .. 4) {
    my @ids = ($T{2}, $T{3});
    my %initial = map { $_ => status($_) } @ids;
    my %rows_before = map { $_ => scalar @{rows($_)} } @ids;
    my $lock = $round % 2
               ? $t->hold_rows('task_requests', \@ids, seconds => 0.5)
               : undef;

    # per task: toggles by the laboratory and the sampler, to random
    # statuses, and a few assigns; each request by a user of its own
    my (%sent, @h);
    for my $i (1 .. 16) {
        my $id = $ids[$i % 2];
        my $user = sprintf('user-%d-%02d', $round, $i);
        my ($op, $body, $to);
        if ($i % 5 == 0) {
            ($op, $body, $to) = ('assign-sampler',
                                 assign_body($id eq $T{2} ? $s1 : $s2),
                                 'ASSIGNED');
        } else {
            $to = $statuses[($i * 7 + $round * 3 + $n++) % 3];
            ($op, $body) = ('toggle-accept-reject',
                            toggle_body($to, $i % 3 ? $lab
                                        : $id eq $T{2} ? $s1 : $s2));
        }
        $sent{$user} = [ $id, $op, $to ];
        push @h, [ $user, request(1, $op, $id, $user, $body) ];
    }

    my %status;
    for my $x (@h) {
        my ($user, $handle) = @$x;
        my $res = $handle->wait;
        $status{$user} = $res->{status};
        push @{$sent{$user}}, $res;
    }
    $lock->wait if $lock;

    my $name = "round $round" . ($lock ? ' (row held first)' : '');

    my @bad = grep {
        my ($id, $op, $to, $res) = @{$sent{$_}};
        !($res->{status} == 200
          || ($op eq 'assign-sampler' && $res->{status} == 409))
    } sort keys %sent;
    is(join(' ', map { "$_:$sent{$_}[3]{status}" } @bad), '',
       "$name: every toggle 200, every assign 200 or 409");

    for my $id (@ids) {
        my $all = rows($id);
        my @new = @{$all}[$rows_before{$id} .. $#$all];
        is(chain_problem(\@new, $initial{$id}, status($id)), '',
           "$name: the rows of task $id are a chain");

        # each row is one request's: its user, its status, at most once
        my %seen;
        my @wrong = grep {
            my ($who, $from, $to) = @$_;
            my $s = $sent{$who};
            !$s || $s->[0] ne $id || $s->[2] ne $to
            || $s->[3]{status} != 200 || $seen{$who}++
        } @new;
        is(scalar @wrong, 0, "$name: each row is of a request that "
                             . "answered 200, with its userId and status")
            or diag(join ' ', map { "@$_" } @wrong);
    }
}

$t->done;
done_testing;
