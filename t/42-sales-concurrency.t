#!/usr/bin/perl

# PATCH /sales/transactions at once: twenty distinct payments of one sale
# that together reach its total all count (no lost update) and end PAID
# with the exact sum; twenty replays of one new reference record one
# payment and all answer the same body; one new reference on two sales at
# once is paid once. A transaction of the test holds the sale's row while
# the requests queue on it, so that they race when it is let go.

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Platform::Test;
use Platform::JWT;

my $t = Platform::Test->new(workers => 2);
my $k = Platform::JWT::keys($t->testdir . '/keys');

$t->run(<<'EOF');
    # the races below keep payments queued for a connection for seconds
    platform_pg_queue_timeout 10s;
    # and on the sale's row, behind one another: not the lock timeout's 503
    platform_pg_lock_timeout 10s;

    server {
        listen 127.0.0.1:%%PORT%%;
        location /sales/ {
            platform_sales;
            platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;
        }
    }
EOF

$t->psql(Platform::Test::demo_data(
    qr/--\ Sales\ \(migration\ 0012 .*?
       DROP\ TABLE\ demo_sale_lines,\ demo_sales;/sx));

my %S = map { $_ => sprintf('aa100000-0000-4000-8000-%012d', $_) } 1 .. 3;
my $token = Platform::JWT::hs256($k, tenantId => 'tenant-demo');

sub pay_async {
    my ($sale, $ref, $amount, $method) = @_;
    return $t->request_async('PATCH', '/sales/transactions',
        headers => { Authorization => "Bearer $token",
                     'Content-Type' => 'application/json' },
        body => '{"saleId":"' . $sale . '","transactionReference":"' . $ref
                . '","amount":' . $amount . ',"paymentMethod":"'
                . ($method // 'QR') . '"}',
        timeout => 20);
}

sub race {
    my ($sale, @requests) = @_;
    my $hold = $t->hold_rows('sales', [ $sale ], waiters => 4);
    my @h = map { pay_async($sale, @$_) } @requests;
    my @r = map { $_->wait(timeout => 30) } @h;
    $hold->wait;
    return @r;
}

### twenty distinct payments that together reach the total

# 1.11, 2.22, ... 22.20: 233.10 in all; in binary floating point the sum
# of these is not 233.1
my @amounts = map { sprintf('%.2f', 1.11 * $_) } 1 .. 20;
$t->psql("UPDATE sales SET total_amount = 233.10 WHERE id = '$S{2}'");

my @r = race($S{2}, map { [ "D-$_", $amounts[$_ - 1], 'CARD' ] } 1 .. 20);
my %n;
$n{$_->{status}}++ for @r;
is($n{200}, 20, 'twenty distinct payments: all 200') or diag(explain \%n);
is($t->psql("SELECT amount_paid || ' ' || payment_status || ' '"
            . " || payment_count FROM sales WHERE id = '$S{2}'"),
   '233.10 PAID 20', 'the sale: the exact sum, PAID, twenty payments');
is($t->psql("SELECT count(*) || ' ' || sum(amount) FROM sale_payments"
            . " WHERE sale_id = '$S{2}'"), '20 233.10',
   'twenty payment rows');
my @paid = sort { $a <=> $b }
           map { $_->{json}{data}{sale}{amountPaid} // -1 } @r;
is(scalar(grep { ($_->{json}{data}{paymentStatus} // '') eq 'PAID' } @r), 1,
   'exactly one answer is PAID: the last');
is(scalar(keys %{{ map { $_ => 1 } @paid }}), 20,
   'each answer saw a different amountPaid: applied one after the other');
like((grep { ($_->{json}{data}{paymentStatus} // '') eq 'PAID' } @r)[0]
         ->{content} // '', qr/"amountPaid":233\.10[,}]/,
     'the PAID answer: amountPaid 233.10');
is($t->psql("SELECT count(*) FROM sales_tracking WHERE sale_id = '$S{2}'"),
   1, 'one tracking row opened');

### twenty replays of one new reference

my $before = $t->psql("SELECT amount_paid FROM sales WHERE id = '$S{1}'");
@r = race($S{1}, map { [ 'R-1', '250.25' ] } 1 .. 20);
%n = ();
$n{$_->{status}}++ for @r;
is($n{200}, 20, 'twenty replays: all 200') or diag(explain \%n);
is(scalar(keys %{{ map { $_->{content} => 1 } @r }}), 1,
   'twenty replays: one body, byte for byte');
is($t->psql("SELECT count(*) FROM sale_payments WHERE reference = 'R-1'"),
   1, 'one payment recorded');
is($t->psql("SELECT amount_paid || ' ' || payment_count FROM sales"
            . " WHERE id = '$S{1}'"), '250.25 1',
   'the sale counted it once');

### one new reference on two sales at once

$t->psql("UPDATE sales SET total_amount = 1000 WHERE id = '$S{3}'");
my @h = map { pay_async($_ % 2 ? $S{1} : $S{3}, 'R-2', '5.00') } 1 .. 10;
@r = map { $_->wait(timeout => 30) } @h;
my %by;
$by{($_ % 2 ? 'one' : 'three') . ' ' . $r[$_ - 1]{status}}++ for 1 .. 10;
ok(($by{'one 200'} // 0) == 5 && ($by{'three 409'} // 0) == 5
   || ($by{'three 200'} // 0) == 5 && ($by{'one 409'} // 0) == 5,
   'one reference, two sales: one sale takes it, the other is 409')
    or diag(explain \%by);
is($t->psql("SELECT count(*) FROM sale_payments WHERE reference = 'R-2'"),
   1, 'one payment recorded');
is($t->psql("SELECT sum(amount_paid) FROM sales"
            . " WHERE id IN ('$S{1}', '$S{3}')"), '255.25',
   'paid once: 250.25 + 5.00');

$t->done;
done_testing;
