-- Demo rows for the dev servers (scripts/dev start loads them).
-- Idempotent: every insert is ON CONFLICT DO NOTHING, ids are fixed so the
-- curl examples of docs/development.md work.
--
-- Tenants: tenant-demo and tenant-other, both in country NG.
--   drivers          d1000000-0000-4000-8000-00000000000N   (tenant-demo)
--                    d2000000-0000-4000-8000-00000000000N   (tenant-other)
--   delivery orders  a1000000-0000-4000-8000-00000000000N   (tenant-demo)
--                    a2000000-0000-4000-8000-00000000000N   (tenant-other)
--   person accounts  b1000000-0000-4000-8000-00000000000N   (tenant-demo)
--                    b2000000-0000-4000-8000-00000000000N   (tenant-other)
--   persons          c1000000-0000-4000-8000-00000000000N   (tenant-demo)
--                    c2000000-0000-4000-8000-00000000000N   (tenant-other)
--                    (no table of their own yet: person_id of the accounts)
--   bank transfers   e1000000-0000-4000-8000-0000000000NN   (tenant-demo, 27)
--                    e2000000-0000-4000-8000-00000000000N   (tenant-other, 4)
--                    Transfer N of tenant-demo is dated 2024-06-30 12:00 UTC
--                    minus N-1 days, except 6 and 7, dated like 5: the list
--                    (newest first, ties by id) is 1, 2, ..., 27, and page 1
--                    of 10 shows the tie-break of 5, 6, 7.
--   tax settings     f1000000-0000-4000-8000-00000000000N   (tenant-demo)
--                    f2000000-0000-4000-8000-00000000000N   (tenant-other)
--   merchants        91000000-0000-4000-8000-00000000000N   (tenant-demo, 1-2;
--                    1 is the merchantId of "scripts/dev token")
--                    92000000-0000-4000-8000-000000000001   (tenant-other)
--                    (no table of their own: the merchantId claim, as text)
--   counterparties   81000000-0000-4000-8000-00000000000N   (tenant-demo:
--                    1-5 of merchant 91...01, 6-7 of merchant 91...02)
--                    85000000-0000-4000-8000-00000000000N   (tenant-other)
--   their accounts   82000000-0000-4000-8000-00000000000N   (tenant-demo:
--                    1 and 2 of counterparty 1, then N of counterparty N-1)
--                    86000000-0000-4000-8000-00000000000N   (tenant-other:
--                    N of counterparty N)
--   groups           83000000-0000-4000-8000-000000000001   (tenant-demo,
--                    merchant 91...01: "Grain suppliers", counterparties 1
--                    and 2)
--   person documents 71000000-0000-4000-8000-00000000000N   (tenant-demo)
--                    72000000-0000-4000-8000-00000000000N   (tenant-other)
--                    Documents 1 and 2 are of person c1...1, 3 of c1...2,
--                    and 72...1 of c2...1; 1 is approved. Their contents
--                    are a few bytes of text.

INSERT INTO product_classifications (group_name, tags, position) VALUES
    ('Grains',     '{rice,maize,sorghum,millet}',       1),
    ('Tubers',     '{cassava,yam,potato,cocoyam}',      2),
    ('Legumes',    '{beans,cowpea,soybean,groundnut}',  3),
    ('Livestock',  '{cattle,goat,sheep,poultry}',       4),
    ('Cash Crops', '{cocoa,cotton,sesame,cashew}',      5),
    ('Vegetables', '{tomato,pepper,onion,okra}',        6)
ON CONFLICT DO NOTHING;

INSERT INTO drivers
    (id, tenant_id, country_code, user_id, name, phone, vehicle_type, status)
VALUES
    ('d1000000-0000-4000-8000-000000000001', 'tenant-demo', 'NG',
     'user-demo-driver-1', 'Adebayo Okafor', '+2348010000001', 'MOTORCYCLE',
     'AVAILABLE'),
    ('d1000000-0000-4000-8000-000000000002', 'tenant-demo', 'NG',
     'user-demo-driver-2', 'Chinwe Eze', '+2348010000002', 'VAN',
     'AVAILABLE'),
    ('d1000000-0000-4000-8000-000000000003', 'tenant-demo', 'NG',
     'user-demo-driver-3', 'Musa Bello', '+2348010000003', 'TRUCK',
     'ON_DELIVERY'),
    ('d1000000-0000-4000-8000-000000000004', 'tenant-demo', 'NG',
     NULL, 'Ngozi Umeh', '+2348010000004', 'VAN',
     'OFFLINE'),
    ('d2000000-0000-4000-8000-000000000001', 'tenant-other', 'NG',
     'user-other-driver-1', 'Emeka Obi', '+2348020000001', 'MOTORCYCLE',
     'AVAILABLE'),
    ('d2000000-0000-4000-8000-000000000002', 'tenant-other', 'NG',
     'user-other-driver-2', 'Halima Sani', '+2348020000002', 'TRUCK',
     'ON_DELIVERY')
ON CONFLICT DO NOTHING;

INSERT INTO delivery_orders
    (id, tenant_id, country_code, order_number, status,
     pickup_address, dropoff_address, driver_id, shipping_fee, currency,
     assigned_at)
SELECT o.id::uuid, o.tenant_id, 'NG', o.order_number, o.status,
       jsonb_build_object(
           'address', o.p_address, 'city', o.p_city, 'state', o.p_state,
           'country', 'NG', 'postalCode', o.p_postal,
           'latitude', o.p_lat, 'longitude', o.p_lon,
           'contactName', o.p_contact, 'contactPhone', o.p_phone),
       jsonb_build_object(
           'address', o.d_address, 'city', o.d_city, 'state', o.d_state,
           'country', 'NG', 'postalCode', o.d_postal,
           'latitude', o.d_lat, 'longitude', o.d_lon,
           'contactName', o.d_contact, 'contactPhone', o.d_phone),
       o.driver_id::uuid, o.fee, CASE WHEN o.fee IS NULL THEN NULL ELSE 'NGN' END,
       CASE WHEN o.driver_id IS NULL THEN NULL
            ELSE timestamptz '2024-05-01 09:00:00+01' END
FROM (VALUES
    ('a1000000-0000-4000-8000-000000000001', 'tenant-demo', 'DO-1001',
     'PENDING', NULL, NULL::numeric,
     '12 Warehouse Road', 'Kano', 'Kano', '700001', 12.0022, 8.5920,
     'Kano Grain Hub', '+2348030000001',
     '5 Marina Street', 'Lagos', 'Lagos', '101001', 6.4541, 3.3947,
     'Tunde Bakare', '+2348030000002'),
    ('a1000000-0000-4000-8000-000000000002', 'tenant-demo', 'DO-1002',
     'PENDING', NULL, NULL,
     '3 Market Lane', 'Ibadan', 'Oyo', '200001', 7.3775, 3.9470,
     'Ibadan Farmers Coop', '+2348030000003',
     '18 Ahmadu Bello Way', 'Abuja', 'FCT', '900001', 9.0765, 7.3986,
     'Aisha Musa', '+2348030000004'),
    ('a1000000-0000-4000-8000-000000000003', 'tenant-demo', 'DO-1003',
     'ASSIGNED', 'd1000000-0000-4000-8000-000000000003', 2500.00,
     '7 Silo Avenue', 'Kaduna', 'Kaduna', '800001', 10.5105, 7.4165,
     'Kaduna Storage', '+2348030000005',
     '44 Aba Road', 'Port Harcourt', 'Rivers', '500001', 4.8156, 7.0498,
     'Ifeanyi Nwosu', '+2348030000006'),
    ('a1000000-0000-4000-8000-000000000004', 'tenant-demo', 'DO-1004',
     'DELIVERED', 'd1000000-0000-4000-8000-000000000002', 1800.50,
     '9 Depot Close', 'Enugu', 'Enugu', '400001', 6.4584, 7.5464,
     'Enugu Depot', '+2348030000007',
     '2 Broad Street', 'Lagos', 'Lagos', '101002', 6.4531, 3.3958,
     'Funke Adeyemi', '+2348030000008'),
    ('a1000000-0000-4000-8000-000000000005', 'tenant-demo', 'DO-1005',
     'CANCELLED', NULL, NULL,
     '1 Farm Gate', 'Jos', 'Plateau', '930001', 9.8965, 8.8583,
     'Jos Potato Farm', '+2348030000009',
     '30 Zoo Road', 'Kano', 'Kano', '700002', 11.9964, 8.5167,
     'Sani Abdullahi', '+2348030000010'),
    ('a2000000-0000-4000-8000-000000000001', 'tenant-other', 'DO-1001',
     'PENDING', NULL, NULL,
     '8 Harbour Road', 'Calabar', 'Cross River', '540001', 4.9517, 8.3220,
     'Calabar Port Store', '+2348040000001',
     '11 Awolowo Road', 'Lagos', 'Lagos', '101233', 6.4474, 3.4203,
     'Kemi Oladipo', '+2348040000002'),
    ('a2000000-0000-4000-8000-000000000002', 'tenant-other', 'DO-1002',
     'PENDING', NULL, NULL,
     '15 Cocoa House Way', 'Akure', 'Ondo', '340001', 7.2571, 5.2058,
     'Akure Cocoa Coop', '+2348040000003',
     '6 Herbert Macaulay Way', 'Abuja', 'FCT', '900211', 9.0579, 7.4951,
     'Bala Yusuf', '+2348040000004'),
    ('a2000000-0000-4000-8000-000000000003', 'tenant-other', 'DO-1003',
     'IN_TRANSIT', 'd2000000-0000-4000-8000-000000000002', 4200.00,
     '20 Cattle Market', 'Maiduguri', 'Borno', '600001', 11.8311, 13.1510,
     'Maiduguri Livestock', '+2348040000005',
     '9 Ogui Road', 'Enugu', 'Enugu', '400102', 6.4413, 7.4988,
     'Obinna Chukwu', '+2348040000006'),
    ('a2000000-0000-4000-8000-000000000004', 'tenant-other', 'DO-1004',
     'DELIVERED', 'd2000000-0000-4000-8000-000000000001', 950.00,
     '4 Sesame Street', 'Sokoto', 'Sokoto', '840001', 13.0059, 5.2476,
     'Sokoto Sesame Store', '+2348040000007',
     '27 Ring Road', 'Benin City', 'Edo', '300001', 6.3350, 5.6037,
     'Osaro Idahosa', '+2348040000008'),
    ('a2000000-0000-4000-8000-000000000005', 'tenant-other', 'DO-1005',
     'CANCELLED', NULL, NULL,
     '10 Yam Barn Road', 'Makurdi', 'Benue', '970001', 7.7337, 8.5214,
     'Makurdi Yam Market', '+2348040000009',
     '3 Stadium Road', 'Ilorin', 'Kwara', '240001', 8.4966, 4.5426,
     'Ahmed Ibrahim', '+2348040000010')
) AS o (id, tenant_id, order_number, status, driver_id, fee,
        p_address, p_city, p_state, p_postal, p_lat, p_lon, p_contact, p_phone,
        d_address, d_city, d_state, d_postal, d_lat, d_lon, d_contact, d_phone)
ON CONFLICT DO NOTHING;

INSERT INTO person_accounts
    (id, tenant_id, person_id, account_id, account_bic, account_type,
     account_name, currency, available_balance, account_limit,
     status_description, created, nuban_or_iban, purpose, comment, status,
     product_id, client_id)
VALUES
    ('b1000000-0000-4000-8000-000000000001', 'tenant-demo',
     'c1000000-0000-4000-8000-000000000001', 'ACC-100001', 'GTBINGLA',
     'SAVINGS', 'Amaka Nwankwo', 'NGN', 250000.00, 0.00,
     'Account is active.', '2024-03-04 10:15:00+01', '0123456789',
     'Personal savings', '', 'ACTIVE', 'PRD-SAV-01', 'CL-100001'),
    ('b1000000-0000-4000-8000-000000000002', 'tenant-demo',
     'c1000000-0000-4000-8000-000000000001', 'ACC-100002', 'GTBINGLA',
     'CURRENT', 'Amaka Nwankwo', 'NGN', -12500.50, 50000.00,
     'Account is active; overdraft in use.', '2024-03-04 10:20:00+01',
     '0123456790', 'Trading payments', 'Overdraft approved 2024-04-01.',
     'ACTIVE', 'PRD-CUR-01', 'CL-100001'),
    ('b1000000-0000-4000-8000-000000000003', 'tenant-demo',
     'c1000000-0000-4000-8000-000000000002', 'ACC-100003', 'ZEIBNGLA',
     'DOMICILIARY', 'Ibrahim Danjuma', 'USD', 1830.75, 0.00,
     'Account is dormant: no activity for 12 months.',
     '2023-01-16 08:45:00+01', '2034567891', 'Export proceeds', '',
     'DORMANT', 'PRD-DOM-01', 'CL-100002'),
    ('b2000000-0000-4000-8000-000000000001', 'tenant-other',
     'c2000000-0000-4000-8000-000000000001', 'ACC-200001', 'FBNINGLA',
     'SAVINGS', 'Yetunde Balogun', 'NGN', 98000.00, 0.00,
     'Account is active.', '2024-02-12 14:00:00+01', '3045678912',
     'Personal savings', '', 'ACTIVE', 'PRD-SAV-01', 'CL-200001')
ON CONFLICT DO NOTHING;

INSERT INTO bank_transfers
    (id, tenant_id, reference, amount, account_name, account_number,
     bank_name, beneficiary_account_name, beneficiary_account_number,
     beneficiary_bank_name, status, date, email, currency)
SELECT ('e1000000-0000-4000-8000-' || lpad(n::text, 12, '0'))::uuid,
       'tenant-demo', 'TRF-DEMO-' || lpad(n::text, 4, '0'),
       round((n * 7919.37) % 500000 + 100, 2),
       'Demo Agro Ltd', '0123456789', 'GTBank',
       (ARRAY['Kano Grain Hub', 'Ibadan Farmers Coop', 'Kaduna Storage',
              'Enugu Depot', 'Jos Potato Farm'])[n % 5 + 1],
       lpad((3000000000 + n * 7331)::text, 10, '0'),
       (ARRAY['Access Bank', 'Zenith Bank', 'First Bank',
              'UBA'])[n % 4 + 1],
       (ARRAY['COMPLETED', 'COMPLETED', 'PENDING', 'FAILED'])[n % 4 + 1],
       timestamptz '2024-06-30 12:00:00+00'
           - (CASE WHEN n IN (6, 7) THEN 4 ELSE n - 1 END) * interval '1 day',
       'payments@demo-agro.example', 'NGN'
FROM generate_series(1, 27) AS n
ON CONFLICT DO NOTHING;

INSERT INTO bank_transfers
    (id, tenant_id, reference, amount, account_name, account_number,
     bank_name, beneficiary_account_name, beneficiary_account_number,
     beneficiary_bank_name, status, date, email, currency)
VALUES
    ('e2000000-0000-4000-8000-000000000001', 'tenant-other', 'TRF-OTH-0001',
     150000.00, 'Other Foods Plc', '3045678912', 'First Bank',
     'Calabar Port Store', '2011223344', 'Zenith Bank', 'COMPLETED',
     '2024-06-29 08:30:00+00', 'finance@other-foods.example', 'NGN'),
    ('e2000000-0000-4000-8000-000000000002', 'tenant-other', 'TRF-OTH-0002',
     8250.50, 'Other Foods Plc', '3045678912', 'First Bank',
     'Akure Cocoa Coop', '2055667788', 'Access Bank', 'PENDING',
     '2024-06-28 15:45:00+00', 'finance@other-foods.example', 'NGN'),
    ('e2000000-0000-4000-8000-000000000003', 'tenant-other', 'TRF-OTH-0003',
     1200.00, 'Other Foods Plc', '9000112233', 'First Bank',
     'Sokoto Sesame Store', '2099001122', 'UBA', 'FAILED',
     '2024-06-20 10:00:00+00', 'finance@other-foods.example', 'USD'),
    ('e2000000-0000-4000-8000-000000000004', 'tenant-other', 'TRF-OTH-0004',
     47000.00, 'Other Foods Plc', '3045678912', 'First Bank',
     'Makurdi Yam Market', '2033445566', 'GTBank', 'COMPLETED',
     '2024-06-01 09:00:00+00', 'finance@other-foods.example', 'NGN')
ON CONFLICT DO NOTHING;

INSERT INTO invoice_tax_settings (id, tenant_id, name, rate) VALUES
    ('f1000000-0000-4000-8000-000000000001', 'tenant-demo', 'VAT', 7.5),
    ('f1000000-0000-4000-8000-000000000002', 'tenant-demo',
     'Withholding tax', 5),
    ('f1000000-0000-4000-8000-000000000003', 'tenant-demo',
     'Stamp duty', 0.5),
    ('f2000000-0000-4000-8000-000000000001', 'tenant-other', 'VAT', 7.5),
    ('f2000000-0000-4000-8000-000000000002', 'tenant-other',
     'Withholding tax', 10)
ON CONFLICT DO NOTHING;

-- Counterparties of the demo merchants and their bank accounts: Nigerian
-- ones (NUBAN account numbers, no IBAN: iban ''), and European ones with
-- IBANs and BICs that pass the module's checks. The integers: account
-- 1 primary, 2 secondary; counterparty_type 1 individual, 2 business;
-- account_type 1 current, 2 savings, 3 domiciliary (docs/api.md).
INSERT INTO counterparties (id, tenant_id, merchant_id, name) VALUES
    ('81000000-0000-4000-8000-000000000001', 'tenant-demo',
     '91000000-0000-4000-8000-000000000001', 'Kano Grain Hub'),
    ('81000000-0000-4000-8000-000000000002', 'tenant-demo',
     '91000000-0000-4000-8000-000000000001', 'Hamburg Agrar Handel GmbH'),
    ('81000000-0000-4000-8000-000000000003', 'tenant-demo',
     '91000000-0000-4000-8000-000000000001', 'Ngozi Umeh'),
    ('81000000-0000-4000-8000-000000000004', 'tenant-demo',
     '91000000-0000-4000-8000-000000000001', 'Rotterdam Cocoa Traders B.V.'),
    ('81000000-0000-4000-8000-000000000005', 'tenant-demo',
     '91000000-0000-4000-8000-000000000001', 'Lyon Semences SARL'),
    ('81000000-0000-4000-8000-000000000006', 'tenant-demo',
     '91000000-0000-4000-8000-000000000002', 'London Seed Merchants Ltd'),
    ('81000000-0000-4000-8000-000000000007', 'tenant-demo',
     '91000000-0000-4000-8000-000000000002', 'Abuja Farm Supplies'),
    ('85000000-0000-4000-8000-000000000001', 'tenant-other',
     '92000000-0000-4000-8000-000000000001', 'Oslo Fisk AS'),
    ('85000000-0000-4000-8000-000000000002', 'tenant-other',
     '92000000-0000-4000-8000-000000000001', 'Valletta Trading Ltd'),
    ('85000000-0000-4000-8000-000000000003', 'tenant-other',
     '92000000-0000-4000-8000-000000000001', 'Calabar Port Store')
ON CONFLICT DO NOTHING;

INSERT INTO counterparty_accounts
    (id, tenant_id, counterparty_id, account, counterparty_type,
     account_type, bank_code, bank_name, account_number, account_name, iban,
     swift_code, bank_address, routing_number)
VALUES
    ('82000000-0000-4000-8000-000000000001', 'tenant-demo',
     '81000000-0000-4000-8000-000000000001', 1, 2, 1, '058',
     'Guaranty Trust Bank', '0123456789', 'Kano Grain Hub Ltd', '',
     'GTBINGLA', 'Plot 635 Akin Adesola Street, Victoria Island, Lagos',
     '058152036'),
    ('82000000-0000-4000-8000-000000000002', 'tenant-demo',
     '81000000-0000-4000-8000-000000000001', 2, 2, 3, '057', 'Zenith Bank',
     '5070012345', 'Kano Grain Hub Ltd (USD)', '', 'ZEIBNGLA',
     'Plot 84 Ajose Adeogun Street, Victoria Island, Lagos', '057150013'),
    ('82000000-0000-4000-8000-000000000003', 'tenant-demo',
     '81000000-0000-4000-8000-000000000002', 1, 2, 1, '10070000',
     'Deutsche Bank', '0123456789', 'Hamburg Agrar Handel GmbH',
     'DE65100700000123456789', 'DEUTDEBBXXX',
     'Otto-Suhr-Allee 6-16, 10585 Berlin', NULL),
    ('82000000-0000-4000-8000-000000000004', 'tenant-demo',
     '81000000-0000-4000-8000-000000000003', 1, 1, 2, '011', 'First Bank',
     '3012345678', 'Ngozi Umeh', '', 'FBNINGLA',
     '35 Samuel Asabia House, Marina, Lagos', NULL),
    ('82000000-0000-4000-8000-000000000005', 'tenant-demo',
     '81000000-0000-4000-8000-000000000004', 1, 2, 1, 'INGB', 'ING Bank',
     '0001234567', 'Rotterdam Cocoa Traders B.V.', 'NL20INGB0001234567',
     'INGBNL2A', 'Bijlmerdreef 106, 1102 CT Amsterdam', NULL),
    ('82000000-0000-4000-8000-000000000006', 'tenant-demo',
     '81000000-0000-4000-8000-000000000005', 1, 2, 1, '30004',
     'BNP Paribas', '00031234567890', 'Lyon Semences SARL',
     'FR7630004000031234567890143', 'BNPAFRPP',
     '16 boulevard des Italiens, 75009 Paris', NULL),
    ('82000000-0000-4000-8000-000000000007', 'tenant-demo',
     '81000000-0000-4000-8000-000000000006', 1, 2, 1, '200000',
     'Barclays Bank', '55779911', 'London Seed Merchants Ltd',
     'GB60BARC20000055779911', 'BARCGB22',
     '1 Churchill Place, London E14 5HP', NULL),
    ('82000000-0000-4000-8000-000000000008', 'tenant-demo',
     '81000000-0000-4000-8000-000000000007', 1, 2, 1, '044', 'Access Bank',
     '0690000031', 'Abuja Farm Supplies', '', 'ABNGNGLA',
     'Plot 999c Danmole Street, Victoria Island, Lagos', '044150149'),
    ('86000000-0000-4000-8000-000000000001', 'tenant-other',
     '85000000-0000-4000-8000-000000000001', 1, 2, 1, '8601', 'DNB Bank',
     '11117947', 'Oslo Fisk AS', 'NO9386011117947', 'DNBANOKK',
     'Dronning Eufemias gate 30, 0191 Oslo', NULL),
    ('86000000-0000-4000-8000-000000000002', 'tenant-other',
     '85000000-0000-4000-8000-000000000002', 1, 2, 1, 'MALT',
     'Bank of Valletta', '0012345MTLCAST001S', 'Valletta Trading Ltd',
     'MT84MALT011000012345MTLCAST001S', 'VALLMTMT',
     '58 Triq San Zakkarija, Il-Belt Valletta', NULL),
    ('86000000-0000-4000-8000-000000000003', 'tenant-other',
     '85000000-0000-4000-8000-000000000003', 1, 2, 1, '033',
     'United Bank for Africa', '2012345678', 'Calabar Port Store', '',
     'UNAFNGLA', '57 Marina, Lagos', NULL)
ON CONFLICT DO NOTHING;

INSERT INTO counterparty_groups (id, tenant_id, merchant_id, name, description)
VALUES
    ('83000000-0000-4000-8000-000000000001', 'tenant-demo',
     '91000000-0000-4000-8000-000000000001', 'Grain suppliers',
     'Who sells us maize and sorghum')
ON CONFLICT DO NOTHING;

INSERT INTO counterparty_group_members
    (group_id, counterparty_id, tenant_id, merchant_id, counterparty_name,
     position)
VALUES
    ('83000000-0000-4000-8000-000000000001',
     '81000000-0000-4000-8000-000000000001', 'tenant-demo',
     '91000000-0000-4000-8000-000000000001', 'Kano Grain Hub', 1),
    ('83000000-0000-4000-8000-000000000001',
     '81000000-0000-4000-8000-000000000002', 'tenant-demo',
     '91000000-0000-4000-8000-000000000001', 'Hamburg Agrar Handel GmbH', 2)
ON CONFLICT DO NOTHING;

INSERT INTO person_documents
    (id, tenant_id, person_id, type, file_name, document_number, approved,
     content, content_sha256, content_size)
SELECT d.id::uuid, d.tenant_id, d.person_id::uuid, d.type, d.file_name,
       d.document_number, d.approved, d.content, sha256(d.content),
       octet_length(d.content)
FROM (VALUES
    ('71000000-0000-4000-8000-000000000001', 'tenant-demo',
     'c1000000-0000-4000-8000-000000000001', 1, 'national-id.txt',
     'NIN-12345678901', true,
     convert_to('National identity card of Amaka Nwankwo', 'UTF8')),
    ('71000000-0000-4000-8000-000000000002', 'tenant-demo',
     'c1000000-0000-4000-8000-000000000001', 4, 'utility-bill.txt',
     '', false,
     convert_to('Electricity bill, 12 Allen Avenue, Ikeja', 'UTF8')),
    ('71000000-0000-4000-8000-000000000003', 'tenant-demo',
     'c1000000-0000-4000-8000-000000000002', 2, 'passport.txt',
     'A01234567', false,
     convert_to('Passport of Ibrahim Danjuma', 'UTF8')),
    ('72000000-0000-4000-8000-000000000001', 'tenant-other',
     'c2000000-0000-4000-8000-000000000001', 3, 'drivers-licence.txt',
     'LAG-2020-0042', true,
     convert_to('Driver''s licence of Yetunde Balogun', 'UTF8'))
) AS d (id, tenant_id, person_id, type, file_name, document_number,
        approved, content)
ON CONFLICT DO NOTHING;

-- Task requests (migration 0010). Ids:
--   laboratories     41000000-0000-4000-8000-00000000000N   (tenant-demo:
--                    1 and 2 in NG, 3 in GH)
--                    42000000-0000-4000-8000-000000000001   (tenant-other)
--   samplers         51000000-0000-4000-8000-00000000000N   (tenant-demo, 1-3)
--                    52000000-0000-4000-8000-000000000001   (tenant-other)
--   task requests    61000000-0000-4000-8000-00000000000N   (tenant-demo)
--                    62000000-0000-4000-8000-00000000000N   (tenant-other)
--                    tenant-demo: 1 PENDING (no sampler yet), 2 ASSIGNED to
--                    sampler 1, 3 ACCEPTED by sampler 2, 4 REJECTED by
--                    sampler 3 (assigning it is 409), 5 PENDING in GH (404
--                    with countryCode NG), 6 PENDING of laboratory 2.
--                    tenant-other: 1 PENDING, 2 ASSIGNED to its sampler.
-- The history of each task leads to its status. Due dates are a week after
-- the first load.

INSERT INTO laboratories (id, tenant_id, country_code, name) VALUES
    ('41000000-0000-4000-8000-000000000001', 'tenant-demo', 'NG',
     'Lagos Food Safety Laboratory'),
    ('41000000-0000-4000-8000-000000000002', 'tenant-demo', 'NG',
     'Kano Grain Quality Lab'),
    ('41000000-0000-4000-8000-000000000003', 'tenant-demo', 'GH',
     'Accra Cocoa Testing Centre'),
    ('42000000-0000-4000-8000-000000000001', 'tenant-other', 'NG',
     'Port Harcourt Analytical Services')
ON CONFLICT DO NOTHING;

INSERT INTO samplers (id, tenant_id, name, phone) VALUES
    ('51000000-0000-4000-8000-000000000001', 'tenant-demo',
     'Funke Adeyemi', '+2348030000001'),
    ('51000000-0000-4000-8000-000000000002', 'tenant-demo',
     'Sani Abdullahi', '+2348030000002'),
    ('51000000-0000-4000-8000-000000000003', 'tenant-demo',
     'Kwame Mensah', '+233240000003'),
    ('52000000-0000-4000-8000-000000000001', 'tenant-other',
     'Ifeoma Chukwu', '+2348040000001')
ON CONFLICT DO NOTHING;

INSERT INTO task_requests
    (id, tenant_id, country_code, laboratory_id, sampler_id, status,
     priority, due_at, due_all_day, description, pickup_address)
SELECT t.id::uuid, t.tenant_id, t.country_code, t.laboratory_id::uuid,
       t.sampler_id::uuid, t.status, t.priority,
       CASE WHEN t.priority IS NOT NULL
            THEN date_trunc('day', now() AT TIME ZONE 'UTC')
                 AT TIME ZONE 'UTC' + interval '7 days' END,
       t.priority IS NOT NULL, t.description, t.pickup_address
FROM (VALUES
    ('61000000-0000-4000-8000-000000000001', 'tenant-demo', 'NG',
     '41000000-0000-4000-8000-000000000001', NULL, 'PENDING', NULL,
     'Maize samples from the Mile 12 warehouse, aflatoxin screening',
     '12 Ikorodu Road, Mile 12, Lagos'),
    ('61000000-0000-4000-8000-000000000002', 'tenant-demo', 'NG',
     '41000000-0000-4000-8000-000000000001',
     '51000000-0000-4000-8000-000000000001', 'ASSIGNED', 'HIGH',
     'Cassava flour, moisture and cyanide content',
     '4 Oba Akran Avenue, Ikeja'),
    ('61000000-0000-4000-8000-000000000003', 'tenant-demo', 'NG',
     '41000000-0000-4000-8000-000000000002',
     '51000000-0000-4000-8000-000000000002', 'ACCEPTED', 'MEDIUM',
     'Sorghum lot 2024-117, grading', 'Dawanau Market, Kano'),
    ('61000000-0000-4000-8000-000000000004', 'tenant-demo', 'NG',
     '41000000-0000-4000-8000-000000000001',
     '51000000-0000-4000-8000-000000000003', 'REJECTED', 'LOW',
     'Palm oil, free fatty acids', 'Oyingbo Market, Lagos'),
    ('61000000-0000-4000-8000-000000000005', 'tenant-demo', 'GH',
     '41000000-0000-4000-8000-000000000003', NULL, 'PENDING', NULL,
     'Cocoa beans, bean count and mould', 'Tema Port, Shed 4'),
    ('61000000-0000-4000-8000-000000000006', 'tenant-demo', 'NG',
     '41000000-0000-4000-8000-000000000002', NULL, 'PENDING', NULL,
     'Rice paddy, broken grain ratio', NULL),
    ('62000000-0000-4000-8000-000000000001', 'tenant-other', 'NG',
     '42000000-0000-4000-8000-000000000001', NULL, 'PENDING', NULL,
     'Crude oil spill soil samples', 'Bonny Island'),
    ('62000000-0000-4000-8000-000000000002', 'tenant-other', 'NG',
     '42000000-0000-4000-8000-000000000001',
     '52000000-0000-4000-8000-000000000001', 'ASSIGNED', 'MEDIUM',
     'Borehole water, heavy metals', '7 Aba Road, Port Harcourt')
) AS t (id, tenant_id, country_code, laboratory_id, sampler_id, status,
        priority, description, pickup_address)
ON CONFLICT DO NOTHING;

-- each task's rows once: the history has no natural key to conflict on
INSERT INTO task_request_history
    (task_id, tenant_id, changed_by, from_status, to_status, changed_at)
SELECT h.task_id::uuid, h.tenant_id, h.changed_by, h.from_status,
       h.to_status, now() - h.ago::interval
FROM (VALUES
    (1, '61000000-0000-4000-8000-000000000002', 'tenant-demo',
     'lab-admin-1', 'PENDING', 'ASSIGNED', '2 days'),
    (2, '61000000-0000-4000-8000-000000000003', 'tenant-demo',
     'lab-admin-2', 'PENDING', 'ASSIGNED', '3 days'),
    (3, '61000000-0000-4000-8000-000000000003', 'tenant-demo',
     'sampler-user-2', 'ASSIGNED', 'ACCEPTED', '2 days'),
    (4, '61000000-0000-4000-8000-000000000004', 'tenant-demo',
     'lab-admin-1', 'PENDING', 'ASSIGNED', '4 days'),
    (5, '61000000-0000-4000-8000-000000000004', 'tenant-demo',
     'sampler-user-3', 'ASSIGNED', 'REJECTED', '1 day'),
    (6, '62000000-0000-4000-8000-000000000002', 'tenant-other',
     'other-admin-1', 'PENDING', 'ASSIGNED', '1 day')
) AS h (n, task_id, tenant_id, changed_by, from_status, to_status, ago)
WHERE NOT EXISTS (SELECT 1 FROM task_request_history x
                  WHERE x.task_id = h.task_id::uuid)
ORDER BY h.n;

-- Transport management, more of it (migration 0008), and trade process
-- flows (migration 0009). Ids:
--   drivers          d1000000-0000-4000-8000-00000000000N   (tenant-demo,
--                    5-9 besides 1-4 above)
--                    d2000000-0000-4000-8000-00000000000N   (tenant-other,
--                    3-6 besides 1-2 above)
--                    tenant-demo NG: 1 MOTORCYCLE, 2 and 5 VAN, 8 TRUCK
--                    AVAILABLE; 3 TRUCK (order 3), 6 MOTORCYCLE (order 6)
--                    and 7 VAN (order 7) ON_DELIVERY; 4 VAN OFFLINE;
--                    9 VAN AVAILABLE in GH (not listed with countryCode NG).
--                    tenant-other NG: 1 MOTORCYCLE, 3 VAN AVAILABLE;
--                    2 TRUCK (order 3), 4 VAN (order 6), 5 MOTORCYCLE
--                    (order 7) ON_DELIVERY; 6 TRUCK OFFLINE.
--   delivery orders  a1000000-0000-4000-8000-00000000000N   (tenant-demo:
--                    6 PICKED_UP, 7 IN_TRANSIT, 8 PENDING, 9 PENDING in GH)
--                    a2000000-0000-4000-8000-00000000000N   (tenant-other:
--                    6 ASSIGNED, 7 PICKED_UP)
--                    With the orders above, each tenant has one in every
--                    status. Assign order 1 or 2 (PENDING) to an AVAILABLE
--                    driver; order 4 (DELIVERED) and 5 (CANCELLED) are 409.
--   vehicles         31000000-0000-4000-8000-00000000000N   (tenant-demo:
--                    1 driven by driver 1, 2 by 2, 3 by 3, 4 and 5 without a
--                    driver, 6 in GH)
--                    32000000-0000-4000-8000-00000000000N   (tenant-other:
--                    1 driven by its driver 1, 2 by 2, 3 without)
--   drivers' user ids  user-demo-driver-N, user-other-driver-N (driverUserId
--                    of the vehicle update)
--   trade flows      21000000-0000-4000-8000-00000000000N   (tenant-demo)
--                    22000000-0000-4000-8000-00000000000N   (tenant-other)

INSERT INTO drivers
    (id, tenant_id, country_code, user_id, name, phone, vehicle_type, status)
VALUES
    ('d1000000-0000-4000-8000-000000000005', 'tenant-demo', 'NG',
     'user-demo-driver-5', 'Ifeanyi Nwosu', '+2348010000005', 'VAN',
     'AVAILABLE'),
    ('d1000000-0000-4000-8000-000000000006', 'tenant-demo', 'NG',
     'user-demo-driver-6', 'Yusuf Garba', '+2348010000006', 'MOTORCYCLE',
     'ON_DELIVERY'),
    ('d1000000-0000-4000-8000-000000000007', 'tenant-demo', 'NG',
     'user-demo-driver-7', 'Blessing Okon', '+2348010000007', 'VAN',
     'ON_DELIVERY'),
    ('d1000000-0000-4000-8000-000000000008', 'tenant-demo', 'NG',
     'user-demo-driver-8', 'Olumide Ajayi', '+2348010000008', 'TRUCK',
     'AVAILABLE'),
    ('d1000000-0000-4000-8000-000000000009', 'tenant-demo', 'GH',
     'user-demo-driver-9', 'Kwabena Asante', '+233240000009', 'VAN',
     'AVAILABLE'),
    ('d2000000-0000-4000-8000-000000000003', 'tenant-other', 'NG',
     'user-other-driver-3', 'Tolu Ogunleye', '+2348020000003', 'VAN',
     'AVAILABLE'),
    ('d2000000-0000-4000-8000-000000000004', 'tenant-other', 'NG',
     'user-other-driver-4', 'Amina Lawal', '+2348020000004', 'VAN',
     'ON_DELIVERY'),
    ('d2000000-0000-4000-8000-000000000005', 'tenant-other', 'NG',
     'user-other-driver-5', 'Chukwuma Eze', '+2348020000005', 'MOTORCYCLE',
     'ON_DELIVERY'),
    ('d2000000-0000-4000-8000-000000000006', 'tenant-other', 'NG',
     'user-other-driver-6', 'Garba Musa', '+2348020000006', 'TRUCK',
     'OFFLINE')
ON CONFLICT DO NOTHING;

INSERT INTO delivery_orders
    (id, tenant_id, country_code, order_number, status,
     pickup_address, dropoff_address, driver_id, shipping_fee, currency,
     assigned_at)
SELECT o.id::uuid, o.tenant_id, o.country_code, o.order_number, o.status,
       jsonb_build_object('address', o.p_address, 'city', o.p_city,
                          'country', o.country_code,
                          'contactName', o.p_contact),
       jsonb_build_object('address', o.d_address, 'city', o.d_city,
                          'country', o.country_code,
                          'contactName', o.d_contact),
       o.driver_id::uuid, o.fee,
       CASE WHEN o.fee IS NOT NULL THEN
           CASE o.country_code WHEN 'GH' THEN 'GHS' ELSE 'NGN' END END,
       CASE WHEN o.driver_id IS NOT NULL
            THEN timestamptz '2024-05-02 08:30:00+01' END
FROM (VALUES
    ('a1000000-0000-4000-8000-000000000006', 'tenant-demo', 'NG', 'DO-1006',
     'PICKED_UP', 'd1000000-0000-4000-8000-000000000006', 1200.00,
     '2 Bompai Road', 'Kano', 'Bompai Depot',
     '15 Adeola Odeku Street', 'Lagos', 'Kemi Alade'),
    ('a1000000-0000-4000-8000-000000000007', 'tenant-demo', 'NG', 'DO-1007',
     'IN_TRANSIT', 'd1000000-0000-4000-8000-000000000007', 3100.00,
     '6 Trans-Amadi Road', 'Port Harcourt', 'Rivers Cold Store',
     '1 Ring Road', 'Ibadan', 'Segun Ojo'),
    ('a1000000-0000-4000-8000-000000000008', 'tenant-demo', 'NG', 'DO-1008',
     'PENDING', NULL, NULL,
     '22 Murtala Mohammed Way', 'Kaduna', 'Kaduna Mills',
     '9 Ahmadu Bello Way', 'Abuja', 'Zainab Bello'),
    ('a1000000-0000-4000-8000-000000000009', 'tenant-demo', 'GH', 'DO-1009',
     'PENDING', NULL, NULL,
     'Tema Port, Shed 4', 'Tema', 'Tema Cocoa Shed',
     '5 Oxford Street', 'Accra', 'Ama Owusu'),
    ('a2000000-0000-4000-8000-000000000006', 'tenant-other', 'NG',
     'DO-1006', 'ASSIGNED', 'd2000000-0000-4000-8000-000000000004', 1650.00,
     '3 Ogui Road', 'Enugu', 'Enugu Yam Store',
     '40 Allen Avenue', 'Lagos', 'Tayo Bello'),
    ('a2000000-0000-4000-8000-000000000007', 'tenant-other', 'NG',
     'DO-1007', 'PICKED_UP', 'd2000000-0000-4000-8000-000000000005', 780.00,
     '8 Lafia Road', 'Makurdi', 'Benue Sesame Co',
     '12 Zoo Road', 'Kano', 'Hauwa Idris')
) AS o (id, tenant_id, country_code, order_number, status, driver_id, fee,
        p_address, p_city, p_contact, d_address, d_city, d_contact)
ON CONFLICT DO NOTHING;

-- ON CONFLICT names the primary key: the unique driver_id is deferrable,
-- and PostgreSQL takes no deferrable constraint as an arbiter
INSERT INTO vehicles
    (id, tenant_id, country_code, driver_id, license_plate, model,
     manufacturer, type, colour, year, capacity, condition, image_url,
     carrier_id, carrier_phone_number)
VALUES
    ('31000000-0000-4000-8000-000000000001', 'tenant-demo', 'NG',
     'd1000000-0000-4000-8000-000000000001', 'KAN-102-MC', 'Boxer BM150',
     'Bajaj', 'MOTORCYCLE', 'red', 2021, 120, 'GOOD',
     'https://images.example/vehicles/boxer.png', 'carrier-demo-1',
     '+2348050000001'),
    ('31000000-0000-4000-8000-000000000002', 'tenant-demo', 'NG',
     'd1000000-0000-4000-8000-000000000002', 'LAG-221-VN', 'Hiace',
     'Toyota', 'VAN', 'white', 2018, 1250.5, 'GOOD', NULL,
     'carrier-demo-1', '+2348050000001'),
    ('31000000-0000-4000-8000-000000000003', 'tenant-demo', 'NG',
     'd1000000-0000-4000-8000-000000000003', 'KAD-884-TR', 'Actros 1840',
     'Mercedes-Benz', 'TRUCK', 'blue', 2016, 18000, 'FAIR', NULL,
     'carrier-demo-2', '+2348050000002'),
    ('31000000-0000-4000-8000-000000000004', 'tenant-demo', 'NG', NULL,
     'ABJ-310-VN', 'Transit', 'Ford', 'VAN', 'silver', 2020, 1400, 'NEW',
     NULL, 'carrier-demo-2', '+2348050000002'),
    ('31000000-0000-4000-8000-000000000005', 'tenant-demo', 'NG', NULL,
     'LAG-990-TR', 'FH16', 'Volvo', 'TRUCK', 'green', 2019, 24000.25,
     'NEEDS_REPAIR', NULL, NULL, NULL),
    ('31000000-0000-4000-8000-000000000006', 'tenant-demo', 'GH', NULL,
     'GR-2231-22', 'Sprinter', 'Mercedes-Benz', 'VAN', 'yellow', 2022, 1600,
     'GOOD', NULL, 'carrier-gh-1', '+233240000100'),
    ('32000000-0000-4000-8000-000000000001', 'tenant-other', 'NG',
     'd2000000-0000-4000-8000-000000000001', 'ENU-411-MC', 'CT100', 'Bajaj',
     'MOTORCYCLE', 'black', 2022, 100, 'GOOD', NULL, 'carrier-other-1',
     '+2348060000001'),
    ('32000000-0000-4000-8000-000000000002', 'tenant-other', 'NG',
     'd2000000-0000-4000-8000-000000000002', 'PHC-702-TR', 'Canter',
     'Mitsubishi', 'TRUCK', 'white', 2015, 5000, 'FAIR', NULL,
     'carrier-other-1', '+2348060000001'),
    ('32000000-0000-4000-8000-000000000003', 'tenant-other', 'NG', NULL,
     'CAL-118-VN', 'Urvan', 'Nissan', 'VAN', 'grey', 2017, 1100, 'GOOD',
     NULL, NULL, NULL)
ON CONFLICT (id) DO NOTHING;

INSERT INTO trade_process_flows (id, tenant_id, name, description) VALUES
    ('21000000-0000-4000-8000-000000000001', 'tenant-demo',
     'Cocoa export', 'Farm gate purchase, grading, warehousing, export'
     || ' permit, shipment from Lagos port'),
    ('21000000-0000-4000-8000-000000000002', 'tenant-demo',
     'Maize import', 'Letter of credit, inspection, port clearance,'
     || ' delivery to the mill'),
    ('21000000-0000-4000-8000-000000000003', 'tenant-demo',
     'Sesame export_EU', 'Export to the European Union: lab analysis,'
     || ' phytosanitary certificate, shipment'),
    ('21000000-0000-4000-8000-000000000004', 'tenant-demo',
     'Domestic 100% prepaid sale', 'Payment before pickup, then delivery'),
    ('21000000-0000-4000-8000-000000000005', 'tenant-demo',
     'Cashew export', 'Aggregation, drying, bagging, export'),
    ('22000000-0000-4000-8000-000000000001', 'tenant-other',
     'Yam export', 'Sorting, packing, cold chain, export'),
    ('22000000-0000-4000-8000-000000000002', 'tenant-other',
     'Rice import', 'Import permit, port clearance, warehousing')
ON CONFLICT DO NOTHING;

-- Sales (migration 0012, PATCH /sales/transactions):
--   sales        aa100000-0000-4000-8000-00000000000N   (tenant-demo, 1-3,
--                all PENDING: nothing paid yet)
--                aa200000-0000-4000-8000-000000000001   (tenant-other)
--   their lines  ae100000-0000-4000-8000-0000000000SN (sale S, line N;
--                ae2... for tenant-other), two or three a sale; a sale's
--                orderAmount, totalVat and totalQuantity are their sums,
--                totalAmount = orderAmount + shippingFee + totalVat -
--                discount (sale 1: 12825.00, sale 2: 53063.04, sale 3:
--                6500.00, tenant-other's: 11000.00).
-- The parties, the seller and the products are stored documents
-- (docs/api.md "The sale model"): one customer, agent and seller per
-- tenant here, varied by name.

CREATE TEMP TABLE demo_sale_lines (sale, n, name, sku, quantity, unit_price,
                                   vat_ratio) AS
VALUES
    ('aa100000-0000-4000-8000-000000000001'::uuid, 1, 'Parboiled rice 50kg',
     'RICE-50', 2, 4000.00, 0.075),
    ('aa100000-0000-4000-8000-000000000001', 2, 'Palm oil 5l', 'OIL-5', 3,
     1000.00, 0.075),
    ('aa100000-0000-4000-8000-000000000002', 1, 'Brown beans 10kg',
     'BEANS-10', 5, 2500.10, 0.075),
    ('aa100000-0000-4000-8000-000000000002', 2, 'Yam tuber', 'YAM-1', 10,
     3000.00, 0.075),
    ('aa100000-0000-4000-8000-000000000002', 3, 'Maize 25kg', 'MAIZE-25', 1,
     5000.00, 0.075),
    ('aa100000-0000-4000-8000-000000000003', 1, 'Tomatoes, basket', 'TOM-B',
     4, 1250.00, 0),
    ('aa100000-0000-4000-8000-000000000003', 2, 'Sweet pepper, bag', 'PEP-B',
     2, 750.00, 0),
    ('aa200000-0000-4000-8000-000000000001', 1, 'Cassava 50kg', 'CAS-50',
     10, 800.00, 0),
    ('aa200000-0000-4000-8000-000000000001', 2, 'Onions, bag', 'ONI-B', 5,
     400.00, 0);

CREATE TEMP TABLE demo_sales AS
SELECT s.id::uuid AS id, s.tenant_id, s.n, s.shipping_fee::numeric AS
       shipping_fee, s.discount::numeric AS discount, s.customer, s.agent,
       s.seller,
       jsonb_build_object('code', 'NG', 'name', 'Nigeria',
                          'currency', 'NGN') AS country,
       jsonb_build_object('userId', 'user-' || s.seller, 'virtualBankCode',
                          '090267', 'floatAccountId', 'FA-' || s.n,
                          'floatAccountUuid',
                          'f0000000-0000-4000-8000-00000000000' || s.n,
                          'floatAccountNumber', '900000000' || s.n,
                          'commissionAccountId', 'CA-' || s.n) AS wallet
FROM (VALUES
    ('aa100000-0000-4000-8000-000000000001', 'tenant-demo', 1, 1500, 500,
     'Amaka Nwankwo', 'Tunde Bakare', 'ada-foods'),
    ('aa100000-0000-4000-8000-000000000002', 'tenant-demo', 2, 2000, 0,
     'Ibrahim Musa', 'Tunde Bakare', 'ada-foods'),
    ('aa100000-0000-4000-8000-000000000003', 'tenant-demo', 3, 0, 0,
     'Grace Okon', 'Tunde Bakare', 'ada-foods'),
    ('aa200000-0000-4000-8000-000000000001', 'tenant-other', 4, 1000, 0,
     'Emeka Obi', 'Halima Sani', 'obi-farms'))
    AS s(id, tenant_id, n, shipping_fee, discount, customer, agent, seller);

INSERT INTO sales (id, tenant_id, merchant_id, business_id, customer_id,
    customer_business_id, agent_id, request_id, country_code, order_number,
    global_order_number, delivery_address_text, delivery_note,
    payment_reference, settlement_reference, logistics_request_id,
    logistics_provider, parent_sale, total_quantity, order_amount,
    shipping_fee, discount, total_promotion_discount, total_vat,
    total_vat_ratio, total_amount, payment_method, payment_mode,
    delivery_mode, transaction_base_fare, customer, agent, seller,
    extra_payloads, delivery_address, shipping_fee_detail,
    transaction_shipping_fee_detail, created_at, updated_at)
SELECT s.id, s.tenant_id,
       CASE s.tenant_id WHEN 'tenant-demo'
            THEN '91000000-0000-4000-8000-000000000001'
            ELSE '92000000-0000-4000-8000-000000000001' END,
       'biz-' || s.seller, 'user-cust-' || s.n, 'biz-cust-' || s.n,
       'user-agent-' || s.n, 'REQ-DEMO-' || s.n, 'NG',
       'SO-2024-000' || s.n, 'GSO-2024-000' || s.n,
       s.n || ' Allen Avenue, Ikeja, Lagos', 'Call on arrival.',
       'PAYREF-' || s.n, '', 'LOG-' || s.n, 'Demo Logistics', '',
       l.quantity, l.amount, s.shipping_fee, s.discount, 0, l.vat,
       0.075, l.amount + s.shipping_fee + l.vat - s.discount, 'QR',
       'IN_STORE', 'PICK_UP', s.shipping_fee,
       pp.parties->'cust', pp.parties->'agent', b.doc,
       jsonb_build_object('ussdString', '*737*000*' || s.n || '#',
                          'bankCode', '058', 'accountNumber',
                          '012345678' || s.n, 'paymentLink',
                          'https://pay.example.com/' || s.n,
                          'navigatingUrl', 'https://shop.example.com/o/'
                          || s.n, 'qrCode', 'QR-DEMO-' || s.n),
       jsonb_build_object('id', s.n, 'uuid',
                          'ad000000-0000-4000-8000-00000000000' || s.n,
                          'createdAt', '2024-06-01T09:00:00Z',
                          'updatedAt', '2024-06-01T09:00:00Z',
                          'state', 'Lagos', 'city', 'Ikeja',
                          'address', s.n || ' Allen Avenue',
                          'latitude', 6.6018, 'longitude', 3.3515,
                          'customerId', 'user-cust-' || s.n,
                          'tenantId', s.tenant_id, 'postalCode', '100271',
                          'deliveryMode', 'PICK_UP',
                          'customerPhoneNumber', '+23480300000' || s.n),
       jsonb_build_object('shippingFee', s.shipping_fee,
                          'distanceCovered', 4.2, 'requestId',
                          'REQ-DEMO-' || s.n, 'dropOffUserId',
                          'user-cust-' || s.n),
       jsonb_build_object('totalDistanceCovered', 4.2, 'baseFare',
                          s.shipping_fee, 'unitPrice', 250.00,
                          'totalShippingFee', s.shipping_fee,
                          'unitOfMeasurement', 'KM'),
       timestamptz '2024-06-01T09:00:00Z' + s.n * interval '1 hour',
       timestamptz '2024-06-01T09:00:00Z' + s.n * interval '1 hour'
FROM demo_sales s
CROSS JOIN LATERAL (
    SELECT sum(x.quantity)::int AS quantity,
           sum(round(x.quantity * x.unit_price, 2)) AS amount,
           sum(round(x.quantity * x.unit_price * x.vat_ratio, 2)) AS vat
    FROM demo_sale_lines x WHERE x.sale = s.id) l
CROSS JOIN LATERAL (
    SELECT jsonb_build_object(
        'get_id', 'biz-' || s.seller, 'name', initcap(replace(s.seller, '-',
        ' ')), 'email', 'sales@' || s.seller || '.example',
        'photo', 'https://cdn.example.com/b/' || s.seller || '.png',
        'wallet', s.wallet,
        'address', jsonb_build_object('country', 'Nigeria', 'lga', 'Ikeja',
                   'name', '12 Allen Avenue', 'state', 'Lagos',
                   'latitude', 6.6018, 'longitude', 3.3515),
        'location', jsonb_build_object('coordinates',
                    jsonb_build_array(3.3515, 6.6018), 'type', 'Point'),
        'user', 'user-' || s.seller,
        'owner', jsonb_build_object('profileTenant', s.tenant_id,
                 'city', jsonb_build_object('code', 'IKJ', 'name', 'Ikeja'),
                 'country', s.country, 'firstName', 'Adaeze',
                 'lastName', 'Okeke', 'phone', '+2348090000001',
                 'photo', 'https://cdn.example.com/p/owner.jpg',
                 'state', jsonb_build_object('code', 'LA', 'name', 'Lagos'),
                 'username', 'adaeze.okeke', 'wallet', s.wallet,
                 'id', 'user-owner-' || s.seller,
                 'fullName', 'Adaeze Okeke'),
        'businessHandle', s.seller, 'phone', '+2348090000002',
        'category', 'Groceries', 'shippingFee', s.shipping_fee,
        'extraLocationPrice', 250.00, 'distance', 4.2, 'active', true,
        'acceptingOrder', true, 'isDistributor', false,
        'isManufacturer', false, 'isHead', true,
        'kycDetails', jsonb_build_object('rcNumber', 'RC1234' || s.n,
                      'tin', '12345678-000' || s.n, 'verified', true),
        'pickUpAddresses', jsonb_build_array(jsonb_build_object(
            'country', 'Nigeria', 'lga', 'Ikeja', 'name', 'Warehouse 1',
            'state', 'Lagos', 'latitude', 6.6, 'longitude', 3.35,
            'location', jsonb_build_object('coordinates',
                        jsonb_build_array(3.35, 6.6), 'type', 'Point'))),
        'priceMargin', jsonb_build_object('type', 'FIXED', 'source',
                       'BUSINESS', 'value', 100.00, 'enabled', true))
        AS doc
) b
CROSS JOIN LATERAL (
    SELECT jsonb_object_agg(c.kind, jsonb_build_object(
               'country', s.country, 'firstName', split_part(c.name, ' ', 1),
               'lastName', split_part(c.name, ' ', 2), 'wallet', s.wallet,
               'city', jsonb_build_object('code', 'IKJ', 'name', 'Ikeja'),
               'phone', '+2348030000' || s.n, 'profileTenant', s.tenant_id,
               'photo', 'https://cdn.example.com/p/' || s.n || '.jpg',
               'get_id', 'user-' || c.kind || '-' || s.n,
               'state', jsonb_build_object('code', 'LA', 'name', 'Lagos'),
               'username', lower(replace(c.name, ' ', '.')),
               'status', 'ACTIVE',
               'profileOwners', jsonb_build_array('user-' || c.kind || '-'
                                                  || s.n),
               'businesses', jsonb_build_array(b.doc),
               'address', s.n || ' Allen Avenue, Ikeja',
               'fullName', c.name)) AS parties
    FROM (VALUES ('cust', s.customer), ('agent', s.agent)) AS c(kind, name)
) pp
ON CONFLICT DO NOTHING;

INSERT INTO sale_details (uuid, sale_id, tenant_id, merchant_id,
    business_id, country_code, quantity, amount, vat, vat_ratio,
    promotion_discount, cost_price, total_cost_price, profit,
    quantity_remaining, product, selling_price, created_at, updated_at)
SELECT ('ae' || substr(x.sale::text, 3, 1) || '00000-0000-4000-8000-0000000000'
        || right(x.sale::text, 1) || x.n)::uuid,
       x.sale, s.tenant_id, s.merchant_id, s.business_id, 'NG', x.quantity,
       round(x.quantity * x.unit_price, 2),
       round(x.quantity * x.unit_price * x.vat_ratio, 2), x.vat_ratio, 0,
       round(x.unit_price * 0.8, 2), round(x.quantity * x.unit_price * 0.8, 2),
       round(x.quantity * x.unit_price * 0.2, 2), 0,
       jsonb_build_object(
           'id', 100 + x.n, 'uuid', 'af000000-0000-4000-8000-0000000001'
                                     || lpad(x.n::text, 2, '0'),
           'createdAt', '2024-05-01T08:00:00Z',
           'updatedAt', '2024-05-01T08:00:00Z',
           'tenantId', s.tenant_id, 'merchantId', s.merchant_id,
           'businessId', s.business_id, 'name', x.name,
           'description', x.name || ', sold by the unit.', 'sku', x.sku,
           'category', 'Groceries', 'subCategories', 'Staples',
           'brand', 'Farm Fresh', 'countryCode', 'NG',
           'productPublicId', 'PUB-' || x.sku, 'unit', 'unit',
           'minimumOrderQuantity', 1, 'quantityOnHand', 500,
           'reorderLevel', 50, 'weight', 1.5,
           'costPrice', jsonb_build_object('price', round(x.unit_price * 0.8,
                        2), 'unitQuantity', 1, 'unitPrice',
                        round(x.unit_price * 0.8, 2)),
           'sellingPrice', jsonb_build_object('price', x.unit_price,
                           'unitQuantity', 1, 'unitPrice', x.unit_price),
           'priceMargin', jsonb_build_object('type', 'FIXED', 'source',
                          'BUSINESS', 'value', round(x.unit_price * 0.2, 2),
                          'enabled', true),
           'promotion', jsonb_build_object('id', 7, 'uuid',
                        'a7000000-0000-4000-8000-000000000007',
                        'createdAt', '2024-05-01T08:00:00Z',
                        'updatedAt', '2024-05-01T08:00:00Z',
                        'tenantId', s.tenant_id,
                        'merchantId', s.merchant_id,
                        'name', 'No promotion', 'description', '',
                        'discountType', 'FIXED', 'amount', 0,
                        'percentage', 0,
                        'endDate', '2030-12-31T23:59:59Z',
                        'isActive', false),
           'stockLevel', 'IN_STOCK', 'visibility', true,
           'images', jsonb_build_array('https://cdn.example.com/i/'
                                       || lower(x.sku) || '.jpg'),
           'clusters', jsonb_build_array(1, 2)),
       jsonb_build_object('price', round(x.quantity * x.unit_price, 2),
                          'unitQuantity', x.quantity,
                          'unitPrice', x.unit_price),
       s.created_at, s.created_at
FROM demo_sale_lines x
JOIN sales s ON s.id = x.sale
ON CONFLICT DO NOTHING;

DROP TABLE demo_sale_lines, demo_sales;
