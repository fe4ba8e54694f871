#!/usr/bin/perl

# PATCH /sales/transactions: the sales envelope, the whole sale document of
# spec 2.12 with every field and its JSON type, payments that add up
# exactly (0.1 + 0.2), PARTIALLY_PAID then PAID, the replay answered byte
# for byte as the first time, the mismatched replay and the overpayment
# (409), each field's 400, 401, 404 (unknown and another tenant's sale),
# 405, 415 and an unknown path. The demo sales of scripts/demo-data.sql
# are the data.

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use B ();
use Platform::Test;
use Platform::JWT;

my $t = Platform::Test->new();
my $k = Platform::JWT::keys($t->testdir . '/keys');

$t->run(<<'EOF');
    server {
        listen 127.0.0.1:%%PORT%%;
        location /sales/ {
            platform_sales;
            platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;
        }
    }
EOF

# the sales section of the demo data
$t->psql(Platform::Test::demo_data(
    qr/--\ Sales\ \(migration\ 0012 .*?
       DROP\ TABLE\ demo_sale_lines,\ demo_sales;/sx));

my %S = map { $_ => sprintf('aa100000-0000-4000-8000-%012d', $_) } 1 .. 3;
my $other = 'aa200000-0000-4000-8000-000000000001';
my $unknown = 'aa100000-0000-4000-8000-000000000999';

sub token {
    my ($tenant) = @_;
    return Platform::JWT::hs256($k, tenantId => $tenant // 'tenant-demo');
}

sub pay {
    my (%o) = @_;
    my %h = (Authorization => 'Bearer ' . token($o{tenant}),
             'Content-Type' => 'application/json', %{$o{headers} // {}});
    delete $h{Authorization} if $o{anonymous};
    my $body = $o{body} // JSON::PP->new->canonical->encode({
        saleId => $o{sale} // $S{1},
        transactionReference => $o{ref} // 'T-1',
        amount => $o{amount} // 1,
        paymentMethod => $o{method} // 'QR',
    });
    return $t->request($o{verb} // 'PATCH', $o{path} // '/sales/transactions',
                       headers => \%h, body => $body);
}

sub is_error {
    my ($r, $status, $message, $detail, $name) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    is($r->{status}, $status, "$name: $status") or diag($r->{content});
    is($r->{headers}{'content-type'}, 'application/json; charset=utf-8',
       "$name: content type");
    if (ref $detail) {
        is($r->{json}{message}, $message, "$name: message");
        like($r->{json}{errors}[0] // '', $detail, "$name: detail");
        is_deeply([ sort keys %{$r->{json} // {}} ],
                  [ qw(data errors message) ], "$name: sales envelope");
        return;
    }
    is_deeply($r->{json}, { message => $message, data => undef,
                            errors => [ $detail ] },
              "$name: sales envelope") or diag($r->{content});
}

sub sale_row {
    my ($id) = @_;
    return $t->psql("SELECT concat_ws(' ', amount_paid, payment_status,"
                    . " transaction_reference, payment_count, updated_at)"
                    . " FROM sales WHERE id = '$id'");
}

sub payments {
    return $t->psql("SELECT count(*) FROM sale_payments");
}

### the document of spec 2.12, with its JSON types

# types: string, number, integer, bool, datetime; a hash is an object of
# those fields, [ $type ] an array of them; 'object' any object
my $wallet = { map { $_ => 'string' } qw(userId virtualBankCode
    floatAccountId floatAccountUuid floatAccountNumber commissionAccountId) };
my $country = { code => 'string', name => 'string', currency => 'string' };
my $place = { code => 'string', name => 'string' };
my $address = { country => 'string', lga => 'string', name => 'string',
                state => 'string', latitude => 'number',
                longitude => 'number' };
my $location = { coordinates => [ 'number' ], type => 'string' };
my $margin = { type => 'string', source => 'string', value => 'number',
               enabled => 'bool' };
my $price = { price => 'number', unitQuantity => 'number',
              unitPrice => 'number' };
my $payloads = { map { $_ => 'string' } qw(ussdString bankCode
    accountNumber paymentLink navigatingUrl qrCode) };
my $owner = { profileTenant => 'string', city => $place,
              country => $country, firstName => 'string',
              lastName => 'string', phone => 'string', photo => 'string',
              state => $place, username => 'string', wallet => $wallet,
              id => 'string', fullName => 'string' };
my $business = {
    get_id => 'string', name => 'string', email => 'string',
    photo => 'string', wallet => $wallet, address => $address,
    location => $location, user => 'string', owner => $owner,
    businessHandle => 'string', phone => 'string', category => 'string',
    shippingFee => 'number', extraLocationPrice => 'number',
    distance => 'number', active => 'bool', acceptingOrder => 'bool',
    isDistributor => 'bool', isManufacturer => 'bool', isHead => 'bool',
    kycDetails => 'object',
    pickUpAddresses => [ { %$address, location => $location } ],
    priceMargin => $margin,
};
my $party = {
    country => $country, firstName => 'string', lastName => 'string',
    wallet => $wallet, city => $place, phone => 'string',
    profileTenant => 'string', photo => 'string', get_id => 'string',
    state => $place, username => 'string', status => 'string',
    profileOwners => [ 'string' ], businesses => [ $business ],
    address => 'string', fullName => 'string',
};
my $promotion = {
    id => 'integer', uuid => 'string', createdAt => 'datetime',
    updatedAt => 'datetime', tenantId => 'string', merchantId => 'string',
    name => 'string', description => 'string', discountType => 'string',
    amount => 'number', percentage => 'number', endDate => 'datetime',
    isActive => 'bool',
};
my $product = {
    id => 'integer',
    (map { $_ => 'string' } qw(uuid tenantId merchantId businessId name
        description sku category subCategories brand countryCode
        productPublicId unit stockLevel)),
    createdAt => 'datetime', updatedAt => 'datetime',
    (map { $_ => 'number' } qw(minimumOrderQuantity quantityOnHand
        reorderLevel weight)),
    costPrice => $price, sellingPrice => $price, priceMargin => $margin,
    promotion => $promotion, visibility => 'bool', images => [ 'string' ],
    clusters => [ 'integer' ],
};
my $detail = {
    id => 'integer', createdAt => 'datetime', updatedAt => 'datetime',
    (map { $_ => 'string' } qw(uuid tenantId merchantId businessId
        countryCode sale parentSale)),
    product => $product,
    (map { $_ => 'number' } qw(quantity amount vat vatRatio
        promotionDiscount costPrice totalCostPrice profit
        quantityRemaining)),
    sellingPrice => $price,
};
my $transaction = {
    createdAt => 'datetime', updatedAt => 'datetime', nextRetry => 'datetime',
    (map { $_ => 'number' } qw(amount totalShippingFee baseFare
        totalOrderAmount totalVat totalVatRatio)),
    shippingFeeDetail => { totalDistanceCovered => 'number',
                           baseFare => 'number', unitPrice => 'number',
                           totalShippingFee => 'number',
                           unitOfMeasurement => 'string' },
    sales => [ 'string' ],
    (map { $_ => 'string' } qw(tenantId countryCode transactionReference
        globalOrderNumber eftAttachment paymentResponseMessage paymentStatus
        paymentMethod paymentMode)),
    isEFT => 'bool', isInStore => 'bool', settled => 'bool',
    totalSaleCount => 'integer', totalDeliveredSaleCount => 'integer',
    reQueryCount => 'integer', extraPayloads => $payloads,
};
my $tracking = {
    id => 'integer', createdAt => 'datetime', updatedAt => 'datetime',
    (map { $_ => 'string' } qw(uuid sale merchantId businessId tenantId
        deliveryStatus)),
    isDelayed => 'bool',
};
my $sale = {
    createdAt => 'datetime', updatedAt => 'datetime',
    settlementAttemptNextRetry => 'datetime',
    (map { $_ => 'string' } qw(tenantId agentId merchantId businessId
        customerId customerBusinessId requestId transactionReference
        paymentReference countryCode deliveryNote orderNumber
        globalOrderNumber deliveryAddress settlementReference
        logisticsRequestId logisticsProvider parentSale discountType
        paymentMethod paymentMode paymentStatus deliveryMode deliveryStatus
        settlementStatus)),
    deliveryAddressId => {
        id => 'integer', createdAt => 'datetime', updatedAt => 'datetime',
        (map { $_ => 'string' } qw(uuid state city address customerId
            tenantId postalCode deliveryMode customerPhoneNumber)),
        latitude => 'number', longitude => 'number',
    },
    totalQuantity => 'integer', settlementAttempt => 'integer',
    (map { $_ => 'bool' } qw(isPartialParent isPartial isUpdated isInStore
        eft)),
    (map { $_ => 'number' } qw(shippingFee orderAmount totalAmount discount
        totalPromotionDiscount totalVat totalVatRatio amountPaid)),
    shippingFeeDetail => { shippingFee => 'number',
                           distanceCovered => 'number',
                           requestId => 'string',
                           dropOffUserId => 'string' },
    saleDetails => [ $detail ],
    saleTransaction => $transaction,
    salesTracking => [ $tracking ],
};
my $document = {
    (map { $_ => 'string' } qw(id requestId merchantId orderNumber
        deliveryAddress paymentMethod paymentMode paymentStatus deliveryMode
        deliveryStatus)),
    (map { $_ => 'number' } qw(totalAmount discount shippingFee orderAmount
        totalVat totalVatRatio)),
    totalQuantity => 'integer',
    customer => $party, agent => $party, seller => $business,
    products => [ { productId => 'string', productName => 'string',
                    images => [ 'string' ], quantity => 'number' } ],
    extraPayloads => $payloads,
    sale => $sale,
};

# the mismatches of a value against its type, as "path: why"
sub mismatches {
    my ($v, $type, $path) = @_;
    my $got = Platform::Test::json_type($v);

    if (ref $type eq 'HASH') {
        return ("$path: $got, not an object") if $got ne 'HASH';
        my @m;
        for my $f (sort keys %$type) {
            if (!exists $v->{$f}) {
                push @m, "$path.$f: missing";
                next;
            }
            push @m, mismatches($v->{$f}, $type->{$f}, "$path.$f");
        }
        return @m;
    }
    if (ref $type eq 'ARRAY') {
        return ("$path: $got, not an array") if $got ne 'ARRAY';
        return ("$path: empty, its items unchecked") unless @$v;
        return map { mismatches($v->[$_], $type->[0], "$path\[$_\]") }
               0 .. $#$v;
    }
    return ("$path: $got, not an object") if $type eq 'object'
                                             && $got ne 'HASH';
    return () if $type eq 'object';
    return ("$path: $got, not a boolean") if $type eq 'bool'
                                            && $got ne 'bool';
    return ("$path: $got, not a number") if $type =~ /^(number|integer)$/
                                           && $got ne 'number';
    if ($type eq 'integer' && $got eq 'number') {
        my $f = B::svref_2object(\$v)->FLAGS;
        return ("$path: $v, not an integer")
            unless ($f & B::SVp_IOK) && !($f & B::SVp_NOK);
    }
    return ("$path: $got, not a string") if $type =~ /^(string|datetime)$/
                                           && $got ne 'string';
    return ("$path: '$v', not an ISO 8601 date-time")
        if $type eq 'datetime'
           && $v !~ /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/;
    return ();
}

# every date-time of the test sale set, for their types to show
$t->psql(<<"SQL");
UPDATE sales SET settlement_attempt_next_retry = '2024-07-01T08:00:00Z',
                 transaction_next_retry = '2024-07-01T09:00:00Z'
 WHERE id IN ('$S{1}', '$S{2}');
INSERT INTO sales_tracking (sale_id, tenant_id, merchant_id, business_id)
SELECT id, tenant_id, merchant_id, business_id FROM sales WHERE id = '$S{2}';
SQL

my $before = payments();
my $r = pay(body => '{"saleId":"' . $S{1} . '","transactionReference":"T-1",'
                 . '"amount":1000.50,"paymentMethod":"QR"}');
is($r->{status}, 200, 'a payment') or diag($r->{content});
my $original = $r;
is($r->{headers}{'content-type'}, 'application/json; charset=utf-8',
   'content type');
like($r->{headers}{'x-request-id'}, qr/^[0-9a-f]{32}$/, 'X-Request-Id');
is(Platform::Test::loose_json($r->{content}), '', 'compact JSON');
is_deeply([ sort keys %{$r->{json}} ], [ qw(data message meta) ],
          'the sales envelope: message, data, meta');
is($r->{json}{message}, 'Sale transaction updated.', 'message');
is_deeply($r->{json}{meta}, { currentPage => 1, from => 1, to => 1,
                              perPage => 1, total => 1, lastPage => 1 },
          'meta: one page of one item');
is(join(',', map { Platform::Test::json_type($r->{json}{meta}{$_}) }
                 sort keys %{$r->{json}{meta}}),
   join(',', ('number') x 6), 'meta: integers');

my $d = $r->{json}{data};
# no tracking before PAID: its items are checked below, once PAID
my @m = grep { $_ ne 'data.sale.salesTracking: empty, its items unchecked' }
        mismatches($d, $document, 'data');
is_deeply(\@m, [], 'every field of spec 2.12 present, with its JSON type')
    or diag(join("\n", @m));

is($d->{id}, $S{1}, 'data.id');
is($d->{paymentStatus}, 'PARTIALLY_PAID', 'paymentStatus PARTIALLY_PAID');
is($d->{paymentMethod}, 'QR', 'paymentMethod');
cmp_ok($d->{totalAmount}, '==', 12825, 'totalAmount');
cmp_ok($d->{sale}{amountPaid}, '==', 1000.5, 'sale.amountPaid');
like($r->{content}, qr/"amountPaid":1000\.50[,}]/,
     'amountPaid: the exact numeric');
is($d->{sale}{paymentStatus}, 'PARTIALLY_PAID', 'sale.paymentStatus');
is($d->{sale}{transactionReference}, 'T-1', 'sale.transactionReference');
is(scalar @{$d->{sale}{saleDetails}}, 2, 'two sale details');
is(scalar @{$d->{products}}, 2, 'two products');
is($d->{products}[0]{productName}, 'Parboiled rice 50kg', 'product name');
cmp_ok($d->{products}[0]{quantity}, '==', 2, 'product quantity');
my $tx = $d->{sale}{saleTransaction};
is($tx->{transactionReference}, 'T-1', 'saleTransaction reference');
cmp_ok($tx->{amount}, '==', 1000.5, 'saleTransaction amount: this payment');
is($tx->{paymentStatus}, 'PARTIALLY_PAID', 'saleTransaction status');
is($tx->{paymentResponseMessage}, 'Partial payment received.',
   'saleTransaction message');
is_deeply($tx->{sales}, [ $S{1} ], 'saleTransaction sales');
is($d->{sale}{updatedAt}, $tx->{updatedAt}, 'updatedAt: the payment time');
is($d->{customer}{fullName}, 'Amaka Nwankwo', 'customer');
is($d->{agent}{fullName}, 'Tunde Bakare', 'agent');
is($d->{seller}{owner}{fullName}, 'Adaeze Okeke', 'seller owner');
is_deeply($d->{sale}{salesTracking}, [], 'no tracking before PAID');
is(payments(), $before + 1, 'one payment row');
like(sale_row($S{1}), qr/^1000\.50 PARTIALLY_PAID T-1 1 /, 'the sale row');

# the document's other sale (details with 3 lines, one tracking row)
$r = pay(sale => $S{2}, ref => 'T-2', amount => 10);
is($r->{status}, 200, 'a payment of sale 2') or diag($r->{content});
@m = mismatches($r->{json}{data}, $document, 'data');
is_deeply(\@m, [], 'sale 2: every field with its type')
    or diag(join("\n", @m));
is(scalar @{$r->{json}{data}{sale}{saleDetails}}, 3, 'sale 2: 3 details');

### the replay: the first answer, byte for byte, nothing changed

my $row = sale_row($S{1});
my $n = payments();
$r = pay(body => '{"saleId":"' . $S{1} . '","transactionReference":"T-1",'
                 . '"amount":1000.50,"paymentMethod":"QR"}');
is($r->{status}, 200, 'replay: 200');
is($r->{content}, $original->{content},
   'replay: the first answer, byte for byte');
$r = pay(ref => 'T-1', amount => 1000.5);
is($r->{content}, $original->{content}, 'replay: 1000.5 = 1000.50');
$r = pay(body => '{"saleId":"'
         . $S{1} . '","transactionReference":"  T-1\t","amount":1000.500,'
         . '"paymentMethod":"QR"}');
is($r->{content}, $original->{content},
   'replay: reference trimmed, 1000.500 = 1000.50');
is(sale_row($S{1}), $row, 'replay: the sale unchanged');
is(payments(), $n, 'replay: no payment row');

### the mismatched replay: 409

for my $c ([ 'another amount', amount => 1000.51 ],
           [ 'another sale', sale => $S{2} ],
           [ 'another method', method => 'CASH' ])
{
    my ($name, @o) = @$c;
    $r = pay(ref => 'T-1', amount => 1000.5, @o);
    is_error($r, 409, 'Transaction reference already used.',
             'transactionReference was recorded with another sale, amount '
             . 'or payment method.', "replay with $name");
}
is(sale_row($S{1}), $row, 'mismatched replays: the sale unchanged');
is(payments(), $n, 'mismatched replays: no payment row');

### overpayment, then PAID

$r = pay(body => '{"saleId":"'
         . $S{1} . '","transactionReference":"T-over","amount":11824.51,'
         . '"paymentMethod":"CARD"}');
is_error($r, 409, 'Payment exceeds the amount due.',
         "amountPaid plus amount would exceed the sale's totalAmount.",
         'a cent too much');
is(sale_row($S{1}), $row, 'overpayment: the sale unchanged');

$r = pay(body => '{"saleId":"' . $S{1} . '","transactionReference":"T-rest",'
                 . '"amount":11824.50,"paymentMethod":"CARD"}');
is($r->{status}, 200, 'the rest') or diag($r->{content});
$d = $r->{json}{data};
is($d->{paymentStatus}, 'PAID', 'PAID');
is($d->{sale}{paymentStatus}, 'PAID', 'sale PAID');
like($r->{content}, qr/"amountPaid":12825\.00[,}]/, 'amountPaid = totalAmount');
is($d->{paymentMethod}, 'CARD', 'paymentMethod: the latest payment\'s');
is($d->{sale}{saleTransaction}{paymentResponseMessage}, 'Payment completed.',
   'saleTransaction message');
is(scalar @{$d->{sale}{salesTracking}}, 1, 'PAID opens the tracking');
is($d->{sale}{salesTracking}[0]{deliveryStatus}, 'PENDING',
   'tracking PENDING');
@m = mismatches($d, $document, 'data');
is_deeply(\@m, [], 'PAID: every field with its type')
    or diag(join("\n", @m));
is($t->psql("SELECT payment_status || ' ' || amount_paid FROM sales"
            . " WHERE id = '$S{1}'"), 'PAID 12825.00', 'stored PAID');

$r = pay(body => '{"saleId":"' . $S{1}
         . '","transactionReference":"T-more","amount":0.01,'
         . '"paymentMethod":"CASH"}');
is_error($r, 409, 'Payment exceeds the amount due.',
         "amountPaid plus amount would exceed the sale's totalAmount.",
         'a paid sale');

### exact money: 0.1 + 0.2 is 0.30

$t->psql("UPDATE sales SET total_amount = 0.30 WHERE id = '$S{3}'");
for my $c ([ 'T-a', '0.1' ], [ 'T-b', '0.2' ]) {
    $r = pay(body => '{"saleId":"' . $S{3} . '","transactionReference":"'
                     . $c->[0] . '","amount":' . $c->[1]
                     . ',"paymentMethod":"USSD"}');
    is($r->{status}, 200, "pay $c->[1]") or diag($r->{content});
}
is($r->{json}{data}{paymentStatus}, 'PAID', '0.1 + 0.2 reaches 0.30: PAID');
like($r->{content}, qr/"amountPaid":0\.30[,}]/, 'amountPaid 0.30 exactly');
is($t->psql("SELECT amount_paid FROM sales WHERE id = '$S{3}'"), '0.30',
   'stored 0.30');

### 400: each field

my $good = { saleId => $S{2}, transactionReference => 'T-x', amount => 1,
             paymentMethod => 'QR' };
my @bad = (
    [ 'saleId missing', { saleId => undef }, qr/saleId/ ],
    [ 'saleId not a uuid', { saleId => 'sale-1' }, qr/saleId/ ],
    [ 'saleId a number', { saleId => 12 }, qr/saleId/ ],
    [ 'transactionReference missing', { transactionReference => undef },
      qr/transactionReference/ ],
    [ 'transactionReference blank', { transactionReference => " \t " },
      qr/transactionReference/ ],
    [ 'transactionReference too long',
      { transactionReference => 'x' x 129 }, qr/transactionReference/ ],
    [ 'transactionReference a number', { transactionReference => 7 },
      qr/transactionReference/ ],
    [ 'amount missing', { amount => undef }, qr/amount/ ],
    [ 'amount a string', { amount => '10' }, qr/amount/ ],
    [ 'amount 0', { amount => 0 }, qr/amount/ ],
    [ 'amount negative', { amount => -5 }, qr/amount/ ],
    [ 'amount too large', { amount => 1e15 }, qr/amount/ ],
    [ 'paymentMethod missing', { paymentMethod => undef },
      qr/paymentMethod/ ],
    [ 'paymentMethod unknown', { paymentMethod => 'BITCOIN' },
      qr/paymentMethod/ ],
    [ 'paymentMethod lower case', { paymentMethod => 'qr' },
      qr/paymentMethod/ ],
);
$row = sale_row($S{2});
for my $c (@bad) {
    my ($name, $change, $re) = @$c;
    my %b = (%$good, %$change);
    delete $b{$_} for grep { !defined $b{$_} } keys %b;
    $r = pay(body => JSON::PP->new->encode(\%b));
    is_error($r, 400, 'Bad request.', $re, $name);
}
$r = pay(body => '{"saleId":"' . $S{2} . '","transactionReference":"T-x",'
                 . '"amount":1.005,"paymentMethod":"QR"}');
is_error($r, 400, 'Bad request.',
         'amount must have at most two decimal places.',
         'amount with three decimal places');
$r = pay(body => '{"saleId":"' . $S{2} . '","transactionReference":"T-x",'
                 . '"amount":1e-3,"paymentMethod":"QR"}');
is($r->{status}, 400, 'amount 1e-3: 400');
$r = pay(body => '{"saleId": ');
is($r->{status}, 400, 'malformed JSON: 400');
is($r->{json}{data}, undef, 'malformed JSON: data null');
$r = pay(body => '[1]');
is($r->{status}, 400, 'an array body: 400');
is(sale_row($S{2}), $row, '400s: the sale unchanged');

### 401, 404, 405, 415

$r = pay(anonymous => 1, ref => 'T-anon');
is($r->{status}, 401, 'no token: 401');
like($r->{headers}{'www-authenticate'} // '', qr/^Bearer/,
     'WWW-Authenticate: Bearer');
is($r->{json}{data}, undef, 'no token: the sales envelope');
is_deeply([ sort keys %{$r->{json} // {}} ], [ qw(data errors message) ],
          'no token: message, data, errors');
$r = pay(headers => { Authorization => 'Bearer abc.def.ghi' },
         ref => 'T-bad');
is($r->{status}, 401, 'a bad token: 401');

$r = pay(sale => $unknown, ref => 'T-u');
is_error($r, 404, 'Sale not found.', 'No sale with this id exists.',
         'unknown sale');
$r = pay(sale => $other, ref => 'T-o');
is_error($r, 404, 'Sale not found.', 'No sale with this id exists.',
         "another tenant's sale");
$r = pay(sale => $S{2}, ref => 'T-o2', tenant => 'tenant-other');
is_error($r, 404, 'Sale not found.', 'No sale with this id exists.',
         "tenant-other paying tenant-demo's sale");
$r = pay(sale => $other, ref => 'T-own', tenant => 'tenant-other',
         amount => 5);
is($r->{status}, 200, 'tenant-other pays its own sale');
$r = pay(sale => $S{2}, ref => 'T-own', amount => 5);
is($r->{status}, 200,
   'references are per tenant: tenant-demo may use the same one')
    or diag($r->{content});

for my $m (qw(GET POST PUT DELETE HEAD)) {
    $r = pay(verb => $m, ref => "T-$m");
    is($r->{status}, 405, "$m: 405");
    like($r->{headers}{allow} // '', qr/PATCH/, "$m: Allow PATCH");
}
$r = pay(verb => 'GET');
is_deeply([ sort keys %{$r->{json} // {}} ], [ qw(data errors message) ],
          '405: the sales envelope');
$r = pay(path => '/sales/elsewhere', ref => 'T-path');
is($r->{status}, 404, 'unknown path: 404');
is($r->{json}{data}, undef, 'unknown path: the sales envelope');

$r = pay(headers => { 'Content-Type' => 'text/html' }, ref => 'T-html');
is($r->{status}, 415, 'text/html: 415');
is($r->{json}{data}, undef, '415: the sales envelope');
for my $ct ('text/plain', 'text/json') {
    $r = pay(headers => { 'Content-Type' => $ct }, ref => "T-$ct",
             sale => $S{2}, amount => 1);
    is($r->{status}, 200, "$ct is JSON: 200") or diag($r->{content});
}

$t->done;
done_testing;
