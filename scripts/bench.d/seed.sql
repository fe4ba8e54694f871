-- Bench data for scripts/bench, loaded into the dev database "platform".
-- Idempotent: fixed ids, every insert is ON CONFLICT DO NOTHING.
--
-- Tenant tenant-bench, country NG:
--   20 drivers          ids derived from md5('bench-driver-N')
--   10,000 orders       ids derived from md5('bench-order-N'), order numbers
--                       BENCH-000001..BENCH-010000; every other order is
--                       ASSIGNED to a driver (so the driver join is exercised)
--   20 vehicles         ids derived from md5('bench-vehicle-N'), vehicle N
--                       driven by driver N: the available drivers row lists
--                       the 10 AVAILABLE drivers, each with his vehicle
-- Tenant tenant-bench, country GH (the assign row, apart from the NG rows):
--   2,000 drivers       ids from md5('bench-assign-driver-N')
--   1,000 orders        ids from md5('bench-assign-order-N'), order numbers
--                       BENCH-A-0001..BENCH-A-1000; order N is ASSIGNED to
--                       driver 2N-1 (ON_DELIVERY) and driver 2N is
--                       AVAILABLE. The assign row names one of the two at
--                       random: the other (a reassign: the driver taken,
--                       the first freed) or the one the order has (its fee
--                       replaced). Either way the pair keeps one driver on
--                       the order and one AVAILABLE, so every request is
--                       200, and this file puts each pair back as above at
--                       every run.
-- The ids are md5 digests shaped as version-4 uuids.
-- Merchant 93000000-0000-4000-8000-000000000001 of tenant-bench: 1,000
-- counterparties with a bank account each (below).

INSERT INTO drivers
    (id, tenant_id, country_code, user_id, name, phone, vehicle_type, status)
SELECT (substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-4' || substr(h, 14, 3)
        || '-8' || substr(h, 18, 3) || '-' || substr(h, 21, 12))::uuid,
       'tenant-bench', 'NG', 'user-bench-driver-' || g,
       'Bench Driver ' || g, '+23480900' || lpad(g::text, 5, '0'),
       (ARRAY['MOTORCYCLE', 'VAN', 'TRUCK'])[1 + g % 3],
       (ARRAY['AVAILABLE', 'ON_DELIVERY'])[1 + g % 2]
FROM (SELECT g, md5('bench-driver-' || g) AS h
      FROM generate_series(1, 20) AS g) AS s
ON CONFLICT DO NOTHING;

INSERT INTO delivery_orders
    (id, tenant_id, country_code, order_number, status,
     pickup_address, dropoff_address, driver_id, shipping_fee, currency,
     assigned_at)
SELECT (substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-4' || substr(h, 14, 3)
        || '-8' || substr(h, 18, 3) || '-' || substr(h, 21, 12))::uuid,
       'tenant-bench', 'NG', 'BENCH-' || lpad(g::text, 6, '0'),
       CASE WHEN g % 2 = 0 THEN 'ASSIGNED' ELSE 'PENDING' END,
       jsonb_build_object(
           'address', g || ' Warehouse Road', 'city', 'Kano', 'state', 'Kano',
           'country', 'NG', 'postalCode', '700001',
           'latitude', 12.0022, 'longitude', 8.5920,
           'contactName', 'Bench Hub', 'contactPhone', '+2348030000001'),
       jsonb_build_object(
           'address', g || ' Marina Street', 'city', 'Lagos',
           'state', 'Lagos', 'country', 'NG', 'postalCode', '101001',
           'latitude', 6.4541, 'longitude', 3.3947,
           'contactName', 'Bench Customer ' || g,
           'contactPhone', '+2348031' || lpad(g::text, 6, '0')),
       CASE WHEN g % 2 = 0 THEN
           (substr(dh, 1, 8) || '-' || substr(dh, 9, 4) || '-4'
            || substr(dh, 14, 3) || '-8' || substr(dh, 18, 3) || '-'
            || substr(dh, 21, 12))::uuid
       END,
       CASE WHEN g % 2 = 0 THEN 1000 + g % 5000 END,
       CASE WHEN g % 2 = 0 THEN 'NGN' END,
       CASE WHEN g % 2 = 0 THEN timestamptz '2024-05-01 09:00:00+01' END
FROM (SELECT g, md5('bench-order-' || g) AS h,
             md5('bench-driver-' || (1 + g % 20)) AS dh
      FROM generate_series(1, 10000) AS g) AS s
ON CONFLICT DO NOTHING;

INSERT INTO vehicles
    (id, tenant_id, country_code, driver_id, license_plate, model,
     manufacturer, type, colour, year, capacity, condition)
SELECT (substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-4' || substr(h, 14, 3)
        || '-8' || substr(h, 18, 3) || '-' || substr(h, 21, 12))::uuid,
       'tenant-bench', 'NG',
       (substr(dh, 1, 8) || '-' || substr(dh, 9, 4) || '-4'
        || substr(dh, 14, 3) || '-8' || substr(dh, 18, 3) || '-'
        || substr(dh, 21, 12))::uuid,
       'BENCH-' || lpad(g::text, 3, '0'), 'Model ' || g, 'Bench Motors',
       (ARRAY['MOTORCYCLE', 'VAN', 'TRUCK'])[1 + g % 3], 'white',
       2015 + g % 8, 100 * g, 'GOOD'
FROM (SELECT g, md5('bench-vehicle-' || g) AS h,
             md5('bench-driver-' || g) AS dh
      FROM generate_series(1, 20) AS g) AS s
ON CONFLICT (id) DO NOTHING;

-- the assign row's pairs, put back at every run (ON CONFLICT ... DO UPDATE)
INSERT INTO drivers
    (id, tenant_id, country_code, user_id, name, phone, vehicle_type, status)
SELECT (substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-4' || substr(h, 14, 3)
        || '-8' || substr(h, 18, 3) || '-' || substr(h, 21, 12))::uuid,
       'tenant-bench', 'GH', 'user-bench-assign-driver-' || g,
       'Bench Assign Driver ' || g, '+23324' || lpad(g::text, 7, '0'), 'VAN',
       CASE WHEN g % 2 = 1 THEN 'ON_DELIVERY' ELSE 'AVAILABLE' END
FROM (SELECT g, md5('bench-assign-driver-' || g) AS h
      FROM generate_series(1, 2000) AS g) AS s
ON CONFLICT (id) DO UPDATE SET status = excluded.status;

INSERT INTO delivery_orders
    (id, tenant_id, country_code, order_number, status,
     pickup_address, dropoff_address, driver_id, shipping_fee, currency,
     assigned_at)
SELECT (substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-4' || substr(h, 14, 3)
        || '-8' || substr(h, 18, 3) || '-' || substr(h, 21, 12))::uuid,
       'tenant-bench', 'GH', 'BENCH-A-' || lpad(g::text, 4, '0'), 'ASSIGNED',
       jsonb_build_object('address', g || ' Harbour Road', 'city', 'Tema',
                          'country', 'GH'),
       jsonb_build_object('address', g || ' Oxford Street', 'city', 'Accra',
                          'country', 'GH'),
       (substr(dh, 1, 8) || '-' || substr(dh, 9, 4) || '-4'
        || substr(dh, 14, 3) || '-8' || substr(dh, 18, 3) || '-'
        || substr(dh, 21, 12))::uuid,
       100, 'GHS', timestamptz '2024-05-01 09:00:00+00'
FROM (SELECT g, md5('bench-assign-order-' || g) AS h,
             md5('bench-assign-driver-' || (2 * g - 1)) AS dh
      FROM generate_series(1, 1000) AS g) AS s
ON CONFLICT (id) DO UPDATE SET status = excluded.status,
    driver_id = excluded.driver_id, shipping_fee = excluded.shipping_fee,
    assigned_at = excluded.assigned_at;

ANALYZE drivers;
ANALYZE delivery_orders;
ANALYZE vehicles;

-- Counterparties of the bench merchant 93000000-0000-4000-8000-000000000001
-- of tenant-bench (the merchantId of the bench's merchant token): 1,000
-- counterparties 88000000-0000-4000-8000-00000000NNNN, each with one bank
-- account 89000000-0000-4000-8000-00000000NNNN, N = 1..1000. The account
-- update row updates them; the group rows make groups of them, which
-- scripts/bench deletes after its runs (and before, after an interrupted
-- run), so they never pile up.
INSERT INTO counterparties (id, tenant_id, merchant_id, name)
SELECT ('88000000-0000-4000-8000-' || lpad(g::text, 12, '0'))::uuid,
       'tenant-bench', '93000000-0000-4000-8000-000000000001',
       'Bench Counterparty ' || g
FROM generate_series(1, 1000) AS g
ON CONFLICT DO NOTHING;

INSERT INTO counterparty_accounts
    (id, tenant_id, counterparty_id, account, counterparty_type,
     account_type, bank_code, bank_name, account_number, account_name, iban,
     swift_code, bank_address, routing_number)
SELECT ('89000000-0000-4000-8000-' || lpad(g::text, 12, '0'))::uuid,
       'tenant-bench',
       ('88000000-0000-4000-8000-' || lpad(g::text, 12, '0'))::uuid,
       1, 2, 1, '058', 'Guaranty Trust Bank', lpad(g::text, 10, '0'),
       'Bench Counterparty ' || g, '', 'GTBINGLA',
       'Plot 635 Akin Adesola Street, Lagos', '058152036'
FROM generate_series(1, 1000) AS g
ON CONFLICT DO NOTHING;

ANALYZE counterparties;
ANALYZE counterparty_accounts;

-- Sales of tenant-bench for the sales-patch row: 100 sales
-- b5000000-0000-4000-8000-000000000NNN, N = 1..100, each a copy of demo
-- sale aa100000-0000-4000-8000-000000000001 of tenant-demo
-- (scripts/demo-data.sql, loaded by scripts/dev start) with its documents
-- and its two details, but a totalAmount of 999999999999.99, so that the
-- payments of a run (a new reference per request, 1.00 to 99.99 each)
-- never fill one up. Put back unpaid at every run; scripts/bench deletes
-- tenant-bench's payments before and after its runs.
INSERT INTO sales (id, tenant_id, merchant_id, business_id, customer_id,
    customer_business_id, agent_id, request_id, country_code, order_number,
    global_order_number, delivery_address_text, delivery_note,
    payment_reference, settlement_reference, logistics_request_id,
    logistics_provider, parent_sale, total_quantity, order_amount,
    shipping_fee, discount, total_promotion_discount, total_vat,
    total_vat_ratio, total_amount, payment_method, payment_mode,
    delivery_mode, transaction_base_fare, customer, agent, seller,
    extra_payloads, delivery_address, shipping_fee_detail,
    transaction_shipping_fee_detail)
SELECT ('b5000000-0000-4000-8000-' || lpad(g::text, 12, '0'))::uuid,
       'tenant-bench', s.merchant_id, s.business_id, s.customer_id,
       s.customer_business_id, s.agent_id, s.request_id, s.country_code,
       'SO-BENCH-' || g, 'GSO-BENCH-' || g, s.delivery_address_text,
       s.delivery_note, s.payment_reference, s.settlement_reference,
       s.logistics_request_id, s.logistics_provider, s.parent_sale,
       s.total_quantity, s.order_amount, s.shipping_fee, s.discount,
       s.total_promotion_discount, s.total_vat, s.total_vat_ratio,
       999999999999.99, s.payment_method, s.payment_mode, s.delivery_mode,
       s.transaction_base_fare, s.customer, s.agent, s.seller,
       s.extra_payloads, s.delivery_address, s.shipping_fee_detail,
       s.transaction_shipping_fee_detail
FROM sales s, generate_series(1, 100) AS g
WHERE s.id = 'aa100000-0000-4000-8000-000000000001'
ON CONFLICT (id) DO UPDATE SET amount_paid = 0, payment_status = 'PENDING',
    payment_method = 'QR', transaction_reference = NULL,
    last_payment_amount = NULL, payment_response_message = NULL,
    first_paid_at = NULL, last_paid_at = NULL, payment_count = 0;

INSERT INTO sale_details (uuid, sale_id, tenant_id, merchant_id,
    business_id, country_code, quantity, amount, vat, vat_ratio,
    promotion_discount, cost_price, total_cost_price, profit,
    quantity_remaining, product, selling_price)
SELECT ('b6000000-0000-4000-8' || lpad(g::text, 3, '0') || '-'
        || substr(d.uuid::text, 25, 12))::uuid,
       ('b5000000-0000-4000-8000-' || lpad(g::text, 12, '0'))::uuid,
       'tenant-bench', d.merchant_id, d.business_id, d.country_code,
       d.quantity, d.amount, d.vat, d.vat_ratio, d.promotion_discount,
       d.cost_price, d.total_cost_price, d.profit, d.quantity_remaining,
       d.product, d.selling_price
FROM sale_details d, generate_series(1, 100) AS g
WHERE d.sale_id = 'aa100000-0000-4000-8000-000000000001'
ON CONFLICT DO NOTHING;

-- Bureau answers of tenant-bench for the identity-cached row: RC numbers
-- BENCH001 .. BENCH100, each answered by the bureau "now" at every run, so
-- that every verification of the run is a repeat within
-- platform_identity_cache_time, answered from the record. scripts/bench
-- deletes the reuses (rows with cached_from) before and after its runs.
DELETE FROM identity_verifications WHERE tenant_id = 'tenant-bench';
INSERT INTO identity_verifications (tenant_id, rc_number, customer_name,
    status, bureau, requested_by)
SELECT 'tenant-bench', 'BENCH' || lpad(g::text, 3, '0'), NULL, 'VERIFIED',
       jsonb_build_object('companyName', 'Bench Company ' || g || ' Limited',
                          'address', g || ' Bench Street, Lagos',
                          'rcNumber', 'BENCH' || lpad(g::text, 3, '0')),
       'bench'
FROM generate_series(1, 100) AS g;

ANALYZE identity_verifications;
