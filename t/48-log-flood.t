#!/usr/bin/perl

# Logs that a flood cannot fill: the lines a client can make the module
# repeat (refused API keys, refused tokens, a full pool) are written at
# most ten a second per worker and kind, then one line counts the ones
# left out; a conflict a client's change runs into (SQLSTATE class 23) is
# logged at info, as the client's outcome, not as an error.

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Time::HiRes qw(sleep);
use Platform::Test;
use Platform::JWT;

my $t = Platform::Test->new(workers => 1);
my $k = Platform::JWT::keys($t->testdir . '/keys');

$t->run(<<'EOF');
    server {
        listen 127.0.0.1:%%PORT%%;
        platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;

        location /api/v1/trades/ { platform_trades; platform_auth apikey; }
        location ~ ^/api/v[^/]+/Counterparties/ { platform_counterparties; }
        location /api/ { platform_persons; }
    }
EOF

# the error log's lines matching $re, counted by second
sub per_second {
    my ($re) = @_;
    my %n;
    for (split /\n/, $t->error_log) {
        $n{$1}++ if /^(\S+ \S+) .*$re/;
    }
    return \%n;
}

sub flood {
    my ($n, $path, %h) = @_;
    return $t->burst([ map { [ 'GET', $path, headers => \%h ] } 1 .. $n ]);
}

### refused API keys

my $answers = flood(400, '/api/v1/trades/process-flows',
                    apiKey => 'not-a-key');
is(scalar(grep { $_->{status} == 401 } @$answers), 400,
   '400 malformed keys: each refused');

my $keys = per_second(qr/API key refused/);
my $written = 0;
$written += $_ for values %$keys;
ok($written >= 10, "the first lines are written ($written)");
ok($written < 400, "not one line per request ($written of 400)");
ok(!grep({ $_ > 10 } values %$keys), 'at most ten a second')
    or diag(explain $keys);

# a refusal in a later second says how many were left out before it
sleep 1.1;
flood(1, '/api/v1/trades/process-flows', apiKey => 'not-a-key');
like($t->error_log,
     qr/platform: (\d+) more lines of API key refusal left out of the log/,
     'then one line counts the ones left out');
my $left = 0;
$left += $_ for $t->error_log =~ /(\d+) more lines of API key refusal/g;
$written = 0;
$written += $_ for values %{per_second(qr/API key refused/)};
is($written + $left, 401, 'written and left out make the 401 refusals');

### refused tokens

flood(300, '/api/v1/PersonAccounts/c0000000-0000-4000-8000-000000000001/get',
      Authorization => 'Bearer not.a.token');
my $tokens = per_second(qr/bearer token refused/);
ok(!grep({ $_ > 10 } values %$tokens), 'refused tokens: at most ten a second')
    or diag(explain $tokens);

### a conflict is the client's outcome: info, not error

my $M = '91000000-0000-4000-8000-000000000048';
my $token = Platform::JWT::hs256($k, merchantId => $M);
for (1 .. 2) {
    $t->request('POST', '/api/v1/Counterparties/groups',
                headers => { Authorization => "Bearer $token",
                             'Content-Type' => 'application/json' },
                body => '{"name":"Log flood group"}');
}
my ($conflict) = grep { /SQLSTATE 23505/ } split /\n/, $t->error_log;
ok(defined $conflict, 'the conflict is logged');
like($conflict // '', qr/\[info\]/, 'at info') or diag($conflict);

$t->done;
done_testing;
