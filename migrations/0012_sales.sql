-- 0012: sales and their payments (spec 2.12 and 4.10, decisions.md
-- sections 3 "Sales transaction patch" and 5), for PATCH /sales/transactions.
--
-- Applied by scripts/migrate inside one transaction, like every migration.
--
-- Sales are created elsewhere; the module records payments against them.
-- The model splits a sale in two (docs/api.md, "The sale model"):
--
--   columns         what a payment reads, decides on or changes, and what a
--                   query would filter on: ids, tenant, money, quantities,
--                   statuses, flags, timestamps. Money is numeric(16,2):
--                   exact, never binary floating point.
--   stored docs     the descriptive parts, snapshots taken when the sale
--                   was made (the customer and agent parties, the seller
--                   business, the delivery address, the shipping fee's
--                   detail, extra payloads, each detail's product): jsonb,
--                   whose numbers are exact numerics too. Each has a
--                   generated json twin, compact (no spaces) with its keys
--                   in jsonb's order, that the sale document embeds as it
--                   is: built once when the row is written, not at every
--                   read.
--
-- Every row carries its tenant; the composite keys (tenant_id, id) make a
-- detail, a tracking row or a payment belong to a sale of its own tenant.

-- jsonb as compact JSON text: jsonb's own text form puts a space after
-- every ':' and ','. Keys keep jsonb's order, strings jsonb's escaping.
CREATE FUNCTION platform_json_compact(doc jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE jsonb_typeof(doc)
        WHEN 'object' THEN '{' || coalesce((SELECT string_agg(
                 to_jsonb(e.key)::text || ':' || platform_json_compact(e.value),
                 ',' ORDER BY e.n)
             FROM jsonb_each(doc) WITH ORDINALITY AS e(key, value, n)), '')
             || '}'
        WHEN 'array' THEN '[' || coalesce((SELECT string_agg(
                 platform_json_compact(a.value), ',' ORDER BY a.n)
             FROM jsonb_array_elements(doc) WITH ORDINALITY AS a(value, n)),
             '') || ']'
        ELSE doc::text
    END
$$;

-- A sale (spec 2.12 "Sale", and the summary fields of the document).
--
--   payment_status    PENDING (nothing paid), PARTIALLY_PAID, PAID
--                     (amount_paid = total_amount): only payments change it
--   amount_paid       the sum of the sale's payments, at most total_amount
--   transaction_*,    the sale's transaction as its latest payment left it:
--   last_payment_*    reference, method, amount, response message, first
--                     and latest payment times; NULL before any payment
--   payment_count     payments recorded
--   delivery_status,  changed by fulfilment and settlement, not by
--   settlement_*      payments
CREATE TABLE sales (
    id                        uuid          PRIMARY KEY
                                            DEFAULT gen_random_uuid(),
    tenant_id                 text          NOT NULL,
    merchant_id               text          NOT NULL DEFAULT '',
    business_id               text          NOT NULL DEFAULT '',
    customer_id               text          NOT NULL DEFAULT '',
    customer_business_id      text          NOT NULL DEFAULT '',
    agent_id                  text          NOT NULL DEFAULT '',
    request_id                text          NOT NULL DEFAULT '',
    country_code              text          NOT NULL DEFAULT '',
    order_number              text          NOT NULL DEFAULT '',
    global_order_number       text          NOT NULL DEFAULT '',
    delivery_address_text     text          NOT NULL DEFAULT '',
    delivery_note             text          NOT NULL DEFAULT '',
    payment_reference         text          NOT NULL DEFAULT '',
    settlement_reference      text          NOT NULL DEFAULT '',
    logistics_request_id      text          NOT NULL DEFAULT '',
    logistics_provider        text          NOT NULL DEFAULT '',
    parent_sale               text          NOT NULL DEFAULT '',

    total_quantity            integer       NOT NULL DEFAULT 0
                                            CHECK (total_quantity >= 0),
    order_amount              numeric(16,2) NOT NULL DEFAULT 0,
    shipping_fee              numeric(16,2) NOT NULL DEFAULT 0,
    discount                  numeric(16,2) NOT NULL DEFAULT 0,
    total_promotion_discount  numeric(16,2) NOT NULL DEFAULT 0,
    total_vat                 numeric(16,2) NOT NULL DEFAULT 0,
    total_vat_ratio           numeric(8,4)  NOT NULL DEFAULT 0,
    total_amount              numeric(16,2) NOT NULL
                                            CHECK (total_amount > 0),
    amount_paid               numeric(16,2) NOT NULL DEFAULT 0,

    discount_type             text          NOT NULL DEFAULT 'FIXED',
    payment_method            text          NOT NULL DEFAULT 'QR'
                              CHECK (payment_method IN ('QR', 'TRANSFER',
                                     'CARD', 'USSD', 'CASH')),
    payment_mode              text          NOT NULL DEFAULT 'IN_STORE',
    payment_status            text          NOT NULL DEFAULT 'PENDING'
                              CHECK (payment_status IN ('PENDING',
                                     'PARTIALLY_PAID', 'PAID')),
    delivery_mode             text          NOT NULL DEFAULT 'PICK_UP',
    delivery_status           text          NOT NULL DEFAULT 'PENDING',
    settlement_status         text          NOT NULL DEFAULT 'PENDING',
    settlement_attempt        integer       NOT NULL DEFAULT 0,
    settlement_attempt_next_retry timestamptz,

    is_partial_parent         boolean       NOT NULL DEFAULT false,
    is_partial                boolean       NOT NULL DEFAULT false,
    is_updated                boolean       NOT NULL DEFAULT false,
    is_in_store               boolean       NOT NULL DEFAULT true,
    eft                       boolean       NOT NULL DEFAULT false,

    transaction_reference     text,
    last_payment_amount       numeric(16,2),
    payment_response_message  text,
    first_paid_at             timestamptz,
    last_paid_at              timestamptz,
    payment_count             integer       NOT NULL DEFAULT 0,
    transaction_settled       boolean       NOT NULL DEFAULT false,
    transaction_requery_count integer       NOT NULL DEFAULT 0,
    transaction_next_retry    timestamptz,
    transaction_base_fare     numeric(16,2) NOT NULL DEFAULT 0,
    transaction_eft_attachment text         NOT NULL DEFAULT '',

    -- stored documents: Party, Party, Business, ExtraPayloads, the
    -- deliveryAddressId object, the sale's shippingFeeDetail and the
    -- transaction's
    customer                  jsonb         NOT NULL DEFAULT '{}',
    agent                     jsonb         NOT NULL DEFAULT '{}',
    seller                    jsonb         NOT NULL DEFAULT '{}',
    extra_payloads            jsonb         NOT NULL DEFAULT '{}',
    delivery_address          jsonb         NOT NULL DEFAULT '{}',
    shipping_fee_detail       jsonb         NOT NULL DEFAULT '{}',
    transaction_shipping_fee_detail jsonb   NOT NULL DEFAULT '{}',

    customer_json             json GENERATED ALWAYS AS
                              (platform_json_compact(customer)::json) STORED,
    agent_json                json GENERATED ALWAYS AS
                              (platform_json_compact(agent)::json) STORED,
    seller_json               json GENERATED ALWAYS AS
                              (platform_json_compact(seller)::json) STORED,
    extra_payloads_json       json GENERATED ALWAYS AS
                              (platform_json_compact(extra_payloads)::json)
                              STORED,
    delivery_address_json     json GENERATED ALWAYS AS
                              (platform_json_compact(delivery_address)::json)
                              STORED,
    shipping_fee_detail_json  json GENERATED ALWAYS AS
                              (platform_json_compact(shipping_fee_detail)
                               ::json) STORED,
    transaction_shipping_fee_detail_json json GENERATED ALWAYS AS
                              (platform_json_compact(
                                   transaction_shipping_fee_detail)::json)
                              STORED,

    created_at                timestamptz   NOT NULL DEFAULT now(),
    updated_at                timestamptz   NOT NULL DEFAULT now(),

    UNIQUE (tenant_id, id),
    CHECK (amount_paid >= 0 AND amount_paid <= total_amount),
    CHECK (payment_status = CASE WHEN amount_paid = 0 THEN 'PENDING'
                                 WHEN amount_paid = total_amount THEN 'PAID'
                                 ELSE 'PARTIALLY_PAID' END),
    CHECK (jsonb_typeof(customer) = 'object'
           AND jsonb_typeof(agent) = 'object'
           AND jsonb_typeof(seller) = 'object'
           AND jsonb_typeof(extra_payloads) = 'object'
           AND jsonb_typeof(delivery_address) = 'object'
           AND jsonb_typeof(shipping_fee_detail) = 'object'
           AND jsonb_typeof(transaction_shipping_fee_detail) = 'object')
);

-- A line of a sale (spec 2.12 "SaleDetail"): its figures are columns, the
-- product as it was sold and its selling price are stored documents.
CREATE TABLE sale_details (
    id                  bigint        GENERATED ALWAYS AS IDENTITY
                                      PRIMARY KEY,
    uuid                uuid          NOT NULL UNIQUE
                                      DEFAULT gen_random_uuid(),
    sale_id             uuid          NOT NULL,
    tenant_id           text          NOT NULL,
    merchant_id         text          NOT NULL DEFAULT '',
    business_id         text          NOT NULL DEFAULT '',
    country_code        text          NOT NULL DEFAULT '',
    parent_sale         text          NOT NULL DEFAULT '',
    quantity            numeric(14,3) NOT NULL CHECK (quantity > 0),
    amount              numeric(16,2) NOT NULL DEFAULT 0,
    vat                 numeric(16,2) NOT NULL DEFAULT 0,
    vat_ratio           numeric(8,4)  NOT NULL DEFAULT 0,
    promotion_discount  numeric(16,2) NOT NULL DEFAULT 0,
    cost_price          numeric(16,2) NOT NULL DEFAULT 0,
    total_cost_price    numeric(16,2) NOT NULL DEFAULT 0,
    profit              numeric(16,2) NOT NULL DEFAULT 0,
    quantity_remaining  numeric(14,3) NOT NULL DEFAULT 0,
    product             jsonb         NOT NULL DEFAULT '{}'
                                      CHECK (jsonb_typeof(product) = 'object'),
    selling_price       jsonb         NOT NULL DEFAULT '{}'
                        CHECK (jsonb_typeof(selling_price) = 'object'),
    product_json        json GENERATED ALWAYS AS
                        (platform_json_compact(product)::json) STORED,
    selling_price_json  json GENERATED ALWAYS AS
                        (platform_json_compact(selling_price)::json) STORED,
    created_at          timestamptz   NOT NULL DEFAULT now(),
    updated_at          timestamptz   NOT NULL DEFAULT now(),
    FOREIGN KEY (tenant_id, sale_id) REFERENCES sales (tenant_id, id)
        ON DELETE CASCADE
);

CREATE INDEX sale_details_sale_idx ON sale_details (tenant_id, sale_id, id);

-- The sale's delivery tracking (spec 2.12 "SalesTracking"). The payment
-- that makes a sale PAID opens its tracking (docs/api.md) when it has none.
CREATE TABLE sales_tracking (
    id               bigint       GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    uuid             uuid         NOT NULL UNIQUE DEFAULT gen_random_uuid(),
    sale_id          uuid         NOT NULL,
    tenant_id        text         NOT NULL,
    merchant_id      text         NOT NULL DEFAULT '',
    business_id      text         NOT NULL DEFAULT '',
    delivery_status  text         NOT NULL DEFAULT 'PENDING',
    is_delayed       boolean      NOT NULL DEFAULT false,
    created_at       timestamptz  NOT NULL DEFAULT now(),
    updated_at       timestamptz  NOT NULL DEFAULT now(),
    FOREIGN KEY (tenant_id, sale_id) REFERENCES sales (tenant_id, id)
        ON DELETE CASCADE
);

CREATE INDEX sales_tracking_sale_idx
    ON sales_tracking (tenant_id, sale_id, id);

-- One row per payment recorded: its reference is unique in the tenant, so
-- a reference is paid once whatever the sale. answer is the response body
-- the payment was first answered with, byte for byte: a replay of the
-- reference (same sale, amount and method) is answered with it again.
CREATE TABLE sale_payments (
    id              bigint         GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id       text           NOT NULL,
    reference       text           NOT NULL
                                   CHECK (length(reference) BETWEEN 1 AND 128),
    sale_id         uuid           NOT NULL,
    amount          numeric(16,2)  NOT NULL CHECK (amount > 0),
    payment_method  text           NOT NULL
                    CHECK (payment_method IN ('QR', 'TRANSFER', 'CARD',
                                              'USSD', 'CASH')),
    answer          text           NOT NULL,
    created_at      timestamptz    NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, reference),
    FOREIGN KEY (tenant_id, sale_id) REFERENCES sales (tenant_id, id)
        ON DELETE CASCADE
);

CREATE INDEX sale_payments_sale_idx ON sale_payments (tenant_id, sale_id);

-- The payment of a reference as committed now, for the statement that
-- records a payment: called once it holds the sale's row lock, it sees a
-- payment committed while it waited for that lock (a VOLATILE function
-- takes a new snapshot at each query; the statement's own snapshot was
-- taken before it waited). So two requests of one new reference on one
-- sale are applied one after the other: the second finds the first's
-- payment and replays it.
CREATE FUNCTION platform_sale_payment(tenant text, ref text)
RETURNS SETOF sale_payments
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RETURN QUERY SELECT * FROM sale_payments p
                  WHERE p.tenant_id = tenant AND p.reference = ref;
END
$$;
