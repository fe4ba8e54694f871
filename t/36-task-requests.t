#!/usr/bin/perl

# PATCH /api/v1/task-requests/{id}/assign-sampler and
# /api/v1/task-requests/{id}/toggle-accept-reject: the answers of the
# specification exactly, every error in Envelope B, the tenancy headers
# (countryCode optional and narrowing), the body checks, dueDate in the
# past or beyond PostgreSQL, the states a task may be assigned from, the
# sampler or laboratory that may toggle, tenant isolation, methods, and
# the history row of each change. Concurrency: t/35-task-history.t.

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Platform::Test;

my $t = Platform::Test->new();

$t->run(<<'EOF');
    server {
        listen 127.0.0.1:%%PORT%%;
        location /api/v1/task-requests/ { platform_task_requests; }
        location = /metrics { platform_metrics; }
    }
EOF

my $json = JSON::PP->new->canonical;

my %L = (a1 => '41000000-0000-4000-8000-0000000000a1',
         a2 => '41000000-0000-4000-8000-0000000000a2',
         b1 => '42000000-0000-4000-8000-0000000000b1');
my %S = (a1 => '51000000-0000-4000-8000-0000000000a1',
         a2 => '51000000-0000-4000-8000-0000000000a2',
         b1 => '52000000-0000-4000-8000-0000000000b1');
my %T = map { $_ => sprintf('61000000-0000-4000-8000-%012d', $_) } 1 .. 20;
my $TB = '62000000-0000-4000-8000-000000000001';
my $unknown = '69000000-0000-4000-8000-000000000009';

# tasks of tenant-a in NG unless said: 1 PENDING, 2 ASSIGNED to sampler
# a1, 3 REJECTED (sampler a2), 4 PENDING in GH, 5 ACCEPTED (sampler a1),
# 6 PENDING (no sampler), 7 .. 20 PENDING, each for one part below; TB
# of tenant-b, ASSIGNED to its sampler
$t->psql(<<"SQL");
INSERT INTO laboratories (id, tenant_id, country_code, name) VALUES
    ('$L{a1}', 'tenant-a', 'NG', 'Lab A1'),
    ('$L{a2}', 'tenant-a', 'GH', 'Lab A2'),
    ('$L{b1}', 'tenant-b', 'NG', 'Lab B1');
INSERT INTO samplers (id, tenant_id, name) VALUES
    ('$S{a1}', 'tenant-a', 'Sampler A1'),
    ('$S{a2}', 'tenant-a', 'Sampler A2'),
    ('$S{b1}', 'tenant-b', 'Sampler B1');
INSERT INTO task_requests (id, tenant_id, country_code, laboratory_id,
                           sampler_id, status, priority, due_at,
                           description, pickup_address)
SELECT ('61000000-0000-4000-8000-' || lpad(n::text, 12, '0'))::uuid,
       'tenant-a', CASE WHEN n = 4 THEN 'GH' ELSE 'NG' END,
       CASE WHEN n = 4 THEN '$L{a2}' ELSE '$L{a1}' END::uuid,
       CASE n WHEN 2 THEN '$S{a1}' WHEN 3 THEN '$S{a2}'
              WHEN 5 THEN '$S{a1}' END::uuid,
       CASE n WHEN 2 THEN 'ASSIGNED' WHEN 3 THEN 'REJECTED'
              WHEN 5 THEN 'ACCEPTED' ELSE 'PENDING' END,
       CASE WHEN n IN (2, 3, 5) THEN 'LOW' END,
       CASE WHEN n IN (2, 3, 5) THEN now() + interval '1 day' END,
       'task ' || n, 'address ' || n
FROM generate_series(1, 20) AS n;
INSERT INTO task_requests (id, tenant_id, country_code, laboratory_id,
                           sampler_id, status, priority, due_at)
VALUES ('$TB', 'tenant-b', 'NG', '$L{b1}', '$S{b1}', 'ASSIGNED', 'HIGH',
        now() + interval '1 day');
SQL

# dates relative to now, as PostgreSQL (the judge of "past") sees them
my ($today, $yesterday, $tomorrow, $hour_ago, $hour_ahead) = split /\|/,
    $t->psql(q{SELECT concat_ws('|',
        to_char(d, 'YYYY-MM-DD'), to_char(d - 1, 'YYYY-MM-DD'),
        to_char(d + 1, 'YYYY-MM-DD'),
        to_char(n - interval '1 hour', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
        to_char(n + interval '1 hour', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'))
        FROM (SELECT now() AT TIME ZONE 'UTC' AS n,
                     (now() AT TIME ZONE 'UTC')::date AS d) x});

my %A = (tenantId => 'tenant-a', userId => 'user-1',
         'Content-Type' => 'application/json');

# a PATCH; headers: changes to %A (undef removes one); body: a Perl
# structure, or raw with raw => 1
sub call {
    my ($op, $id, $body, %o) = @_;
    my %h = (%A, %{$o{headers} // {}});
    delete $h{$_} for grep { !defined $h{$_} } keys %h;
    return $t->request($o{method} // 'PATCH',
                       "/api/v1/task-requests/$id/$op",
                       headers => \%h,
                       (defined $body
                        ? (body => ref $body ? $json->encode($body) : $body)
                        : ()));
}

sub assign { call('assign-sampler', @_) }
sub toggle { call('toggle-accept-reject', @_) }

sub good_assign {
    my (%f) = @_;
    return { samplerId => $S{a1}, priority => 'HIGH', dueDate => $tomorrow,
             %f };
}

sub row {
    my ($id) = @_;
    return $t->psql("SELECT row_to_json(r) FROM (SELECT status, sampler_id,"
                    . " priority, due_at, due_all_day, description,"
                    . " pickup_address, updated_at FROM task_requests"
                    . " WHERE id = '$id') r");
}

sub field {
    my ($id, $expr) = @_;
    return $t->psql("SELECT $expr FROM task_requests WHERE id = '$id'");
}

sub history {
    my ($id) = @_;
    return $t->psql("SELECT coalesce(string_agg(changed_by || ':'"
                    . " || from_status || '>' || to_status, ' '"
                    . " ORDER BY id), '') FROM task_request_history"
                    . " WHERE task_id = '$id'");
}

sub error_is { goto &Platform::Test::is_envelope_b_error }

sub bad {
    my ($r, $detail, $name) = @_;
    error_is($r, 400, 'Bad request.', $detail, $name);
}

my $not_found = ['Task request not found.',
                 'No task request with this id exists.'];

### assign-sampler: 200, exactly the specification's answer

my $r = assign($T{1}, good_assign(description => 'Maize, aflatoxin',
                                  pickupAddress => '12 Ikorodu Road'),
               headers => { 'X-Request-Id' => 'req-36.1' });
is($r->{status}, 200, 'assign: 200') or diag($r->{content});
is($r->{headers}{'content-type'}, 'application/json; charset=utf-8',
   'assign: content type');
is($r->{headers}{'x-request-id'}, 'req-36.1', 'assign: X-Request-Id');
is($r->{content},
   '{"message":"Sampler assigned to the task request.",'
   . qq|"taskId":"$T{1}","samplerId":"$S{a1}","status":"ASSIGNED"}|,
   'assign: the body is {message, taskId, samplerId, status}, no envelope');
is(field($T{1}, "concat_ws('|', status, sampler_id, priority, description,"
                . " pickup_address, due_all_day,"
                . " due_at = '$tomorrow'::date::timestamp"
                . " AT TIME ZONE 'UTC')"),
   "ASSIGNED|$S{a1}|HIGH|Maize, aflatoxin|12 Ikorodu Road|t|t",
   'assign: status, sampler, priority, texts and the due day stored');
is(history($T{1}), 'user-1:PENDING>ASSIGNED', 'assign: one history row');
is($t->psql("SELECT count(*) FROM task_request_history h"
            . " JOIN task_requests r ON r.id = h.task_id"
            . " WHERE h.task_id = '$T{1}' AND h.tenant_id = 'tenant-a'"
            . " AND h.changed_at = r.updated_at"
            . " AND h.changed_at > now() - interval '1 minute'"),
   1, 'assign: the history row is of the tenant, at the time of the change');

# again, another sampler, ids in upper case: the same status, no history;
# absent texts are kept, null clears one
$r = assign(uc $T{1}, good_assign(samplerId => uc $S{a2}, priority => 'LOW',
                                  description => undef));
is($r->{status}, 200, 'reassign: 200') or diag($r->{content});
is_deeply($r->{json}, { message => 'Sampler assigned to the task request.',
                        taskId => $T{1}, samplerId => $S{a2},
                        status => 'ASSIGNED' },
          'reassign: ids answered as stored, in lower case');
is(field($T{1}, "concat_ws('|', sampler_id, priority,"
                . " coalesce(description, 'NULL'), pickup_address)"),
   "$S{a2}|LOW|NULL|12 Ikorodu Road",
   'reassign: new sampler and priority, description cleared, address kept');
is(history($T{1}), 'user-1:PENDING>ASSIGNED',
   'reassign: ASSIGNED to ASSIGNED writes no history');

# from ACCEPTED: assigned again (reassigning a task someone accepted)
$r = assign($T{5}, good_assign(), headers => { userId => 'admin-2' });
is($r->{status}, 200, 'assign an ACCEPTED task: 200');
is(history($T{5}), 'admin-2:ACCEPTED>ASSIGNED',
   'assign an ACCEPTED task: history ACCEPTED to ASSIGNED');

# a REJECTED task: 409, unchanged
my $before = row($T{3});
error_is(assign($T{3}, good_assign()), 409, 'Task request rejected.',
         'A rejected task request cannot be assigned; set it to PENDING or '
         . 'ACCEPTED first.', 'assign a REJECTED task');
is(row($T{3}), $before, 'REJECTED: unchanged');
is(history($T{3}), '', 'REJECTED: no history');

### dueDate

$r = assign($T{6}, good_assign(dueDate => $today));
is($r->{status}, 200, "dueDate today ($today): 200") or diag($r->{content});
$r = assign($T{6}, good_assign(dueDate => $hour_ahead));
is($r->{status}, 200, 'dueDate in an hour: 200') or diag($r->{content});
is(field($T{6}, "concat_ws('|', due_all_day,"
                . " due_at = '$hour_ahead'::timestamptz)"),
   'f|t', 'a date-time is stored as that time');
$r = assign($T{6}, good_assign(dueDate => '2999-01-02T03:04:05.123456789+01:30'));
is($r->{status}, 200, 'dueDate with a fraction and an offset: 200');
is(field($T{6}, "due_at = '2999-01-02T01:34:05.123457Z'"), 't',
   'the offset is applied');
$r = assign($T{6}, good_assign(dueDate => '2999-01-02T03:04'));
is($r->{status}, 200, 'dueDate without seconds or offset: 200');
is(field($T{6}, "due_at = '2999-01-02T03:04:00Z'"), 't',
   'without an offset: UTC');

$before = row($T{7});
for my $due ($yesterday, $hour_ago, '2001-01-01', '2001-01-01T00:00:00Z') {
    bad(assign($T{7}, good_assign(dueDate => $due)),
        'dueDate must not be in the past.', "dueDate $due");
}

# beyond what PostgreSQL's timestamptz reads: 400 (the module's check)
for my $due ('2999-01-01T10:00+99:00', '2999-01-01T10:00-16:00',
             '2999-01-01T23:59:60.5',
             '2999-01-01T10:00:00.' . ('0' x 300) . '1')
{
    bad(assign($T{7}, good_assign(dueDate => $due)),
        'dueDate must be an ISO 8601 date or date-time.',
        'dueDate ' . substr($due, 0, 30));
}

for my $due ('', 'tomorrow', '30/11/2999', '2999-02-30', '29990101',
             '2999-01-01T25:00', '2999-01-01T10:00 UTC', 20990101,
             JSON::PP::true, [], {})
{
    bad(assign($T{7}, good_assign(dueDate => $due)),
        'dueDate must be an ISO 8601 date or date-time.',
        'dueDate ' . (ref $due ? ref $due : "'$due'"));
}
bad(assign($T{7}, good_assign(dueDate => undef)), 'dueDate is required.',
    'dueDate null');
is(row($T{7}), $before, 'dueDate refused: unchanged');
is(history($T{7}), '', 'dueDate refused: no history');

### the other fields

my $g = good_assign();
for my $f (qw(samplerId priority dueDate)) {
    my %b = %$g;
    delete $b{$f};
    bad(assign($T{7}, \%b), "$f is required.", "$f missing");
}

for my $v ('', 'sampler-1', substr($S{a1}, 0, 35), "$S{a1}0", 42, undef) {
    bad(assign($T{7}, good_assign(samplerId => $v)),
        defined $v ? 'samplerId must be a uuid.' : 'samplerId is required.',
        'samplerId ' . ($v // 'null'));
}

for my $v ('', 'high', 'URGENT', 'LOW ', 1, undef) {
    bad(assign($T{7}, good_assign(priority => $v)),
        defined $v ? 'priority must be one of: LOW, MEDIUM, HIGH.'
                   : 'priority is required.',
        'priority ' . ($v // 'null'));
}

bad(assign($T{7}, good_assign(description => 'x' x 2001)),
    'description must be at most 2000 characters long.',
    'description of 2001 characters');
bad(assign($T{7}, good_assign(description => 7)),
    'description must be a string.', 'description a number');
bad(assign($T{7}, good_assign(pickupAddress => 'é' x 501)),
    'pickupAddress must be at most 500 characters long.',
    'pickupAddress of 501 characters');
bad(assign($T{7}, good_assign(pickupAddress => {})),
    'pickupAddress must be a string.', 'pickupAddress an object');

for my $s ('51000000-0000-4000-8000-000000000999', $S{b1}) {
    error_is(assign($T{7}, good_assign(samplerId => $s)), 400,
             'Invalid reference.', 'samplerId is not a sampler of the tenant.',
             "samplerId $s");
}

error_is(assign($T{7}, '{"samplerId": '), 400,
         'The request body is not valid JSON.',
         'Malformed JSON at line 1, column 14: unexpected token near end of '
         . 'file', 'malformed JSON');
error_is(assign($T{7}, '[]'), 400, 'The request body must be a JSON object.',
         'Expected a JSON object.', 'a body that is not an object');
$r = assign($T{7}, undef);
error_is($r, 400, 'The request body is not valid JSON.',
         "Malformed JSON at line 1, column 0: unexpected token near end "
         . "of file", 'no body');
error_is(assign($T{7}, good_assign(),
                headers => { 'Content-Type' => 'application/xml' }),
         415, 'Unsupported media type.', 'Send the body as application/json.',
         'assign as XML');
$r = assign($T{7}, good_assign(), headers => { 'Content-Type' => 'text/plain' });
is($r->{status}, 200, 'text/plain is JSON too') or diag($r->{content});
is(history($T{7}), 'user-1:PENDING>ASSIGNED', 'only the last one changed it');

### toggle-accept-reject: 200, exactly

$r = toggle($T{2}, { status => 'ACCEPTED', samplerOrLaboratoryId => $S{a1} },
            headers => { userId => 'sampler-a1' });
is($r->{status}, 200, 'toggle by the sampler: 200') or diag($r->{content});
is($r->{headers}{'content-type'}, 'application/json; charset=utf-8',
   'toggle: content type');
is($r->{content},
   qq|{"message":"Task request status updated.","taskId":"$T{2}",|
   . qq|"status":"ACCEPTED","samplerOrLaboratoryId":"$S{a1}"}|,
   'toggle: the body is {message, taskId, status, samplerOrLaboratoryId}');
is(field($T{2}, 'status'), 'ACCEPTED', 'toggle: stored');
is(history($T{2}), 'sampler-a1:ASSIGNED>ACCEPTED', 'toggle: history');

$r = toggle(uc $T{2}, { status => 'REJECTED',
                        samplerOrLaboratoryId => uc $L{a1} },
            headers => { userId => 'lab-a1' });
is_deeply($r->{json}, { message => 'Task request status updated.',
                        taskId => $T{2}, status => 'REJECTED',
                        samplerOrLaboratoryId => $L{a1} },
          'toggle by the laboratory, ids in upper case: answered as stored');
$r = toggle($T{2}, { status => 'REJECTED', samplerOrLaboratoryId => $L{a1} },
            headers => { userId => 'lab-a1' });
is($r->{status}, 200, 'the same status again: 200');
is($r->{json}{status}, 'REJECTED', 'the same status again: answered');
$r = toggle($T{2}, { status => 'PENDING', samplerOrLaboratoryId => $L{a1} },
            headers => { userId => 'lab-a2' });
is($r->{json}{status}, 'PENDING', 'reopened: PENDING');
is(history($T{2}), 'sampler-a1:ASSIGNED>ACCEPTED lab-a1:ACCEPTED>REJECTED'
                   . ' lab-a2:REJECTED>PENDING',
   'history: one row per change, none for the same status again');
is(field($T{2}, 'sampler_id'), $S{a1}, 'the task keeps its sampler');

# a REJECTED task reopened can be assigned again
toggle($T{3}, { status => 'ACCEPTED', samplerOrLaboratoryId => $L{a1} });
$r = assign($T{3}, good_assign());
is($r->{status}, 200, 'a rejected task accepted again: assigned');
is(history($T{3}), 'user-1:REJECTED>ACCEPTED user-1:ACCEPTED>ASSIGNED',
   'its history');

# who may toggle: the task's sampler or laboratory, nobody else
$before = row($T{8});
for my $p ($S{a1}, $S{a2}, $L{a2}, $L{b1}, $S{b1}, $unknown) {
    error_is(toggle($T{8}, { status => 'ACCEPTED',
                             samplerOrLaboratoryId => $p }),
             403, 'Access denied.',
             'samplerOrLaboratoryId is neither the sampler nor the '
             . 'laboratory of this task request.',
             "toggle by $p, no party to a task without a sampler");
}
is(row($T{8}), $before, '403: unchanged');
is(history($T{8}), '', '403: no history');
error_is(toggle($T{5}, { status => 'PENDING',
                         samplerOrLaboratoryId => $S{a2} }),
         403, 'Access denied.',
         'samplerOrLaboratoryId is neither the sampler nor the '
         . 'laboratory of this task request.', 'another sampler');

for my $b ({ samplerOrLaboratoryId => $L{a1} },
           { status => 'ASSIGNED', samplerOrLaboratoryId => $L{a1} },
           { status => 'accepted', samplerOrLaboratoryId => $L{a1} },
           { status => '', samplerOrLaboratoryId => $L{a1} },
           { status => undef, samplerOrLaboratoryId => $L{a1} },
           { status => 1, samplerOrLaboratoryId => $L{a1} })
{
    my $want = !defined $b->{status}
               ? 'status is required.'
               : 'status must be one of: ACCEPTED, REJECTED, PENDING.';
    bad(toggle($T{8}, $b), $want,
        'status ' . ($json->encode($b->{status}) // 'missing'));
}
for my $v (undef, 'lab-1', '', 5) {
    my $b = { status => 'ACCEPTED' };
    $b->{samplerOrLaboratoryId} = $v if defined $v;
    bad(toggle($T{8}, $b),
        defined $v ? 'samplerOrLaboratoryId must be a uuid.'
                   : 'samplerOrLaboratoryId is required.',
        'samplerOrLaboratoryId ' . ($v // 'missing'));
}
is(row($T{8}), $before, '400: unchanged');

### unknown tasks, other tenants, countries

for my $op (\&assign, \&toggle) {
    my $body = $op == \&assign
               ? good_assign()
               : { status => 'REJECTED', samplerOrLaboratoryId => $L{a1} };
    my $name = $op == \&assign ? 'assign' : 'toggle';

    my $u = $op->($unknown, $body);
    error_is($u, 404, @$not_found, "$name: unknown task");

    my $b_before = row($TB);
    my %b = $op == \&assign
            ? (%$body, samplerId => $S{b1})
            : (%$body, samplerOrLaboratoryId => $S{b1});
    $r = $op->($TB, \%b);
    error_is($r, 404, @$not_found, "$name: another tenant's task");
    is($r->{content}, $u->{content}, "$name: the same body as unknown");
    is(row($TB), $b_before, "$name: another tenant's task unchanged");
    $r = $op->($TB, \%b, headers => { tenantId => 'tenant-b' });
    is($r->{status}, 200, "$name: tenant-b's own task: 200");

    # task 4 is in GH
    my $id = $T{4};
    my %c = $op == \&assign ? %$body : (%$body, samplerOrLaboratoryId => $L{a2});
    error_is($op->($id, \%c, headers => { countryCode => 'NG' }), 404,
             @$not_found, "$name: a GH task with countryCode NG");
    $r = $op->($id, \%c, headers => { countryCode => 'GH' });
    is($r->{status}, 200, "$name: with countryCode GH: 200")
        or diag($r->{content});
    $r = $op->($id, \%c, headers => { countryCode => '' });
    is($r->{status}, 200, "$name: an empty countryCode is none: 200");
    $r = $op->($id, \%c);
    is($r->{status}, 200, "$name: without countryCode: 200");
    error_is($op->($id, \%c, headers => { countryCode => 'N G' }), 400,
             'countryCode header is invalid.',
             'countryCode header is invalid.', "$name: countryCode 'N G'");
    error_is($op->($id, { status => [] },
                   headers => { countryCode => 'N G' }), 400,
             'countryCode header is invalid.',
             'countryCode header is invalid.',
             "$name: the header is checked before the body");

    # an unknown task is 404 whatever the body names
    error_is($op->($unknown, $op == \&assign
                              ? good_assign(samplerId => $S{b1})
                              : { %$body, samplerOrLaboratoryId => $S{b1} }),
             404, @$not_found, "$name: unknown task, a foreign party");
}

### headers

for my $op ('assign-sampler', 'toggle-accept-reject') {
    my $body = $op eq 'assign-sampler'
               ? good_assign()
               : { status => 'PENDING', samplerOrLaboratoryId => $L{a1} };
    my $before = row($T{9});
    for my $c ([ { tenantId => undef }, 'tenantId header is required.' ],
               [ { tenantId => '' }, 'tenantId header is required.' ],
               [ { tenantId => 'a:b' }, 'tenantId header is invalid.' ],
               [ { userId => undef }, 'userId header is required.' ],
               [ { userId => '' }, 'userId header is required.' ],
               [ { userId => 'user 1' }, 'userId header is invalid.' ],
               [ { userId => 'u' x 129 }, 'userId header is invalid.' ],
               [ { tenantId => undef, userId => undef },
                 'tenantId header is required.' ])
    {
        error_is(call($op, $T{9}, $body, headers => $c->[0]), 400,
                 $c->[1], $c->[1], "$op: " . $json->encode($c->[0]));
    }
    is(row($T{9}), $before, "$op: header refusals change nothing");
}

### ids, methods, paths

for my $id ('nope', '61000000000040008000000000000009', "$T{9}0",
            '61000000-0000-4000-8000-00000000000g', '%27%3B')
{
    for my $op ('assign-sampler', 'toggle-accept-reject') {
        error_is(call($op, $id, {}), 400, 'Invalid task request id.',
                 'The task request id must be a uuid.', "$op: id '$id'");
    }
}

$before = row($T{9});
for my $m ('GET', 'POST', 'PUT', 'DELETE', 'HEAD') {
    for my $op ('assign-sampler', 'toggle-accept-reject') {
        $r = call($op, $T{9}, good_assign(), method => $m);
        is($r->{status}, 405, "$m $op: 405");
        is($r->{headers}{allow}, 'PATCH', "$m $op: Allow: PATCH");
        if ($m eq 'HEAD') {
            is($r->{content}, '', "HEAD $op: no body");
        } else {
            error_is($r, 405, 'Method not allowed.',
                     'This endpoint accepts PATCH.', "$m $op");
        }
    }
}
is(row($T{9}), $before, 'no other method changes anything');

for my $p ("/api/v1/task-requests/$T{9}", "/api/v1/task-requests/$T{9}/assign",
           '/api/v1/task-requests/', "/api/v1/task-requests/$T{9}/"
           . 'assign-sampler/x')
{
    $r = $t->request('PATCH', $p, headers => \%A, body => '{}');
    error_is($r, 404, 'Resource not found.', 'No such endpoint.', $p);
}
$r = $t->request('PATCH', "/api/v1/task-requests/$T{9}/assign-sampler/",
                 headers => \%A, body => $json->encode(good_assign()));
is($r->{status}, 200, 'one trailing slash is tolerated');

### metrics

my $m = $t->request('GET', '/metrics')->{content} // '';
for my $status (200, 400, 403, 404, 405, 409, 415) {
    like($m, qr/^platform_requests_total\{family="task_requests",
                status="$status"\}\ [1-9]/mx,
         "metrics: task_requests $status");
}

$t->done;
done_testing;
