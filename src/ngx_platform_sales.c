
/*
 * ngx_platform: sales transactions (spec 2.12 and 4.10, decisions.md
 * sections 3 "Sales transaction patch" and 5). The sales envelope: a
 * success is {message, data, meta}, built whole by the statement; errors
 * are {message, data: null, errors: [detail]}. A bearer token names the
 * tenant; another tenant's sale is 404, like an unknown one.
 *
 * PATCH /sales/transactions records a payment against a sale, in one
 * statement that decides under the sale's row lock. Money is exact: the
 * body reaches PostgreSQL as JSON text and the amount is read there as
 * numeric, never as a double.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_platform.h"
#include "ngx_platform_op.h"


/*
 * The sale document of spec 2.12 for the sale row "u" (docs/api.md "The
 * sale document"): the summary, the parties and the seller (stored
 * documents, embedded as their compact json twins), the products (from
 * the details' product snapshots), the extra payloads, and the Sale with
 * its details, its transaction (the columns the latest payment set) and
 * its tracking (the rows stored, and "t", the row this payment opened).
 */

#define NGX_PLATFORM_SALES_DETAIL                                            \
    " (SELECT row_to_json(e) FROM (SELECT d.id, d.uuid,"                     \
    " d.created_at AS \"createdAt\", d.updated_at AS \"updatedAt\","         \
    " d.tenant_id AS \"tenantId\", d.merchant_id AS \"merchantId\","         \
    " d.business_id AS \"businessId\", d.country_code AS \"countryCode\","   \
    " d.sale_id AS sale, d.parent_sale AS \"parentSale\","                   \
    " d.product_json AS product, d.quantity, d.amount, d.vat,"               \
    " d.vat_ratio AS \"vatRatio\","                                          \
    " d.promotion_discount AS \"promotionDiscount\","                        \
    " d.cost_price AS \"costPrice\","                                        \
    " d.total_cost_price AS \"totalCostPrice\", d.profit,"                   \
    " d.quantity_remaining AS \"quantityRemaining\","                        \
    " d.selling_price_json AS \"sellingPrice\") e)::text"

#define NGX_PLATFORM_SALES_PRODUCT                                           \
    " (SELECT row_to_json(e) FROM (SELECT"                                   \
    " d.product->>'uuid' AS \"productId\","                                  \
    " d.product->>'name' AS \"productName\","                                \
    " coalesce(d.product_json->'images', '[]'::json) AS images,"             \
    " d.quantity) e)::text"

#define NGX_PLATFORM_SALES_TRACKING                                          \
    " (SELECT row_to_json(e) FROM (SELECT k.id, k.uuid,"                     \
    " k.created_at AS \"createdAt\", k.updated_at AS \"updatedAt\","         \
    " k.sale_id AS sale, k.merchant_id AS \"merchantId\","                   \
    " k.business_id AS \"businessId\", k.tenant_id AS \"tenantId\","         \
    " k.delivery_status AS \"deliveryStatus\","                              \
    " k.is_delayed AS \"isDelayed\") e)::text"

#define NGX_PLATFORM_SALES_TRANSACTION                                       \
    " (SELECT row_to_json(w) FROM (SELECT u.first_paid_at AS \"createdAt\"," \
    " u.last_paid_at AS \"updatedAt\","                                      \
    " u.transaction_next_retry AS \"nextRetry\","                            \
    " u.last_payment_amount AS amount,"                                      \
    " u.shipping_fee AS \"totalShippingFee\","                               \
    " u.transaction_base_fare AS \"baseFare\","                              \
    " u.total_amount AS \"totalOrderAmount\","                               \
    " u.total_vat AS \"totalVat\", u.total_vat_ratio AS \"totalVatRatio\","  \
    " u.transaction_shipping_fee_detail_json AS \"shippingFeeDetail\","      \
    " ARRAY[u.id::text] AS sales, u.tenant_id AS \"tenantId\","              \
    " u.country_code AS \"countryCode\","                                    \
    " u.transaction_reference AS \"transactionReference\","                  \
    " u.global_order_number AS \"globalOrderNumber\","                       \
    " u.transaction_eft_attachment AS \"eftAttachment\","                    \
    " u.payment_response_message AS \"paymentResponseMessage\","             \
    " u.payment_status AS \"paymentStatus\","                                \
    " u.payment_method AS \"paymentMethod\","                                \
    " u.payment_mode AS \"paymentMode\", u.eft AS \"isEFT\","                \
    " u.is_in_store AS \"isInStore\", u.transaction_settled AS settled,"     \
    " 1 AS \"totalSaleCount\","                                              \
    " CASE WHEN u.delivery_status = 'DELIVERED' THEN 1 ELSE 0 END"           \
    " AS \"totalDeliveredSaleCount\","                                       \
    " u.transaction_requery_count AS \"reQueryCount\","                      \
    " u.extra_payloads_json AS \"extraPayloads\") w)"

#define NGX_PLATFORM_SALES_SALE                                              \
    " (SELECT row_to_json(s) FROM (SELECT u.created_at AS \"createdAt\","    \
    " u.updated_at AS \"updatedAt\","                                        \
    " u.settlement_attempt_next_retry AS \"settlementAttemptNextRetry\","    \
    " u.tenant_id AS \"tenantId\", u.agent_id AS \"agentId\","               \
    " u.merchant_id AS \"merchantId\", u.business_id AS \"businessId\","     \
    " u.customer_id AS \"customerId\","                                      \
    " u.customer_business_id AS \"customerBusinessId\","                     \
    " u.request_id AS \"requestId\","                                        \
    " u.transaction_reference AS \"transactionReference\","                  \
    " u.payment_reference AS \"paymentReference\","                          \
    " u.country_code AS \"countryCode\","                                    \
    " u.delivery_note AS \"deliveryNote\","                                  \
    " u.order_number AS \"orderNumber\","                                    \
    " u.global_order_number AS \"globalOrderNumber\","                       \
    " u.delivery_address_text AS \"deliveryAddress\","                       \
    " u.settlement_reference AS \"settlementReference\","                    \
    " u.logistics_request_id AS \"logisticsRequestId\","                     \
    " u.logistics_provider AS \"logisticsProvider\","                        \
    " u.parent_sale AS \"parentSale\","                                      \
    " u.delivery_address_json AS \"deliveryAddressId\","                     \
    " u.total_quantity AS \"totalQuantity\","                                \
    " u.settlement_attempt AS \"settlementAttempt\","                        \
    " u.is_partial_parent AS \"isPartialParent\","                           \
    " u.is_partial AS \"isPartial\", u.is_updated AS \"isUpdated\","         \
    " u.is_in_store AS \"isInStore\", u.eft,"                                \
    " u.shipping_fee AS \"shippingFee\", u.order_amount AS \"orderAmount\"," \
    " u.total_amount AS \"totalAmount\", u.discount,"                        \
    " u.total_promotion_discount AS \"totalPromotionDiscount\","             \
    " u.total_vat AS \"totalVat\", u.total_vat_ratio AS \"totalVatRatio\","  \
    " u.amount_paid AS \"amountPaid\","                                      \
    " u.shipping_fee_detail_json AS \"shippingFeeDetail\","                  \
    " u.discount_type AS \"discountType\","                                  \
    " u.payment_method AS \"paymentMethod\","                                \
    " u.payment_mode AS \"paymentMode\","                                    \
    " u.payment_status AS \"paymentStatus\","                                \
    " u.delivery_mode AS \"deliveryMode\","                                  \
    " u.delivery_status AS \"deliveryStatus\","                              \
    " u.settlement_status AS \"settlementStatus\","                          \
    " coalesce((SELECT ('[' || string_agg(" NGX_PLATFORM_SALES_DETAIL        \
    ", ',' ORDER BY d.id) || ']')::json FROM sale_details d"                 \
    " WHERE d.tenant_id = u.tenant_id AND d.sale_id = u.id), '[]')"          \
    " AS \"saleDetails\","                                                   \
    NGX_PLATFORM_SALES_TRANSACTION " AS \"saleTransaction\","                \
    " coalesce((SELECT ('[' || string_agg(" NGX_PLATFORM_SALES_TRACKING      \
    ", ',' ORDER BY k.id) || ']')::json FROM (SELECT q.* FROM"               \
    " sales_tracking q WHERE q.tenant_id = u.tenant_id AND q.sale_id = u.id" \
    " UNION ALL SELECT t.* FROM t) k), '[]') AS \"salesTracking\") s)"

#define NGX_PLATFORM_SALES_DOCUMENT                                          \
    " (SELECT row_to_json(y) FROM (SELECT u.id,"                             \
    " u.request_id AS \"requestId\", u.merchant_id AS \"merchantId\","       \
    " u.order_number AS \"orderNumber\","                                    \
    " u.delivery_address_text AS \"deliveryAddress\","                       \
    " u.total_amount AS \"totalAmount\", u.discount,"                        \
    " u.shipping_fee AS \"shippingFee\", u.order_amount AS \"orderAmount\"," \
    " u.total_vat AS \"totalVat\", u.total_vat_ratio AS \"totalVatRatio\","  \
    " u.total_quantity AS \"totalQuantity\","                                \
    " u.payment_method AS \"paymentMethod\","                                \
    " u.payment_mode AS \"paymentMode\","                                    \
    " u.payment_status AS \"paymentStatus\","                                \
    " u.delivery_mode AS \"deliveryMode\","                                  \
    " u.delivery_status AS \"deliveryStatus\","                              \
    " u.customer_json AS customer, u.agent_json AS agent,"                   \
    " u.seller_json AS seller,"                                              \
    " coalesce((SELECT ('[' || string_agg(" NGX_PLATFORM_SALES_PRODUCT       \
    ", ',' ORDER BY d.id) || ']')::json FROM sale_details d"                 \
    " WHERE d.tenant_id = u.tenant_id AND d.sale_id = u.id), '[]')"          \
    " AS products,"                                                          \
    " u.extra_payloads_json AS \"extraPayloads\","                           \
    NGX_PLATFORM_SALES_SALE " AS sale) y)"


/*
 * PATCH /sales/transactions, one statement; $1 the checked body, $2 the
 * tenant.
 *
 * v: the body's values; the reference trimmed as the validator counted
 *    it, the amount read as numeric from the JSON text (jsonb keeps
 *    numbers exact).
 * s: the tenant's sale, locked first (none: 404), and read as the lock
 *    found it: of concurrent payments on one sale each waits for the one
 *    before and adds to what it left.
 * e: the payment of the reference, read once the lock is had through a
 *    VOLATILE function (migration 0012), which sees what committed while
 *    this statement waited: the statement's own snapshot, older, would
 *    not, and a replay that waited on the first payment of its reference
 *    would pay it twice (the unique constraint would refuse the second).
 * f: the decision: an amount of more than two decimal places; then a
 *    known reference: the same sale, amount and method is a replay (the
 *    first answer again, nothing changed), anything else 409; then a
 *    payment past totalAmount, 409. at: the time of the payment, taken
 *    after the lock.
 * u: the payment applied to the sale: amountPaid, paymentStatus, the
 *    sale's transaction (reference, method, amount, message, times).
 * t: the tracking the payment that makes the sale PAID opens, when it
 *    has none.
 * d: the answer, {message, data, meta}; p: the payment row, which keeps
 *    that answer for the replays.
 *
 * Two payments of one new reference on two sales at once: they lock
 * different rows, and the second insert waits for the first and fails
 * on the unique constraint (23505): 409, as the refusal "reference".
 */

static ngx_platform_outcome_t  ngx_platform_sales_patch_outcomes[] = {
    { "amount", NGX_HTTP_BAD_REQUEST, "Bad request.",
      "amount must have at most two decimal places." },
    { "reference", NGX_HTTP_CONFLICT, "Transaction reference already used.",
      "transactionReference was recorded with another sale, amount or "
      "payment method." },
    { "overpaid", NGX_HTTP_CONFLICT, "Payment exceeds the amount due.",
      "amountPaid plus amount would exceed the sale's totalAmount." },
    { NULL, 0, NULL, NULL }
};

static ngx_platform_sql_t  ngx_platform_sales_patch = {
    { "platform_sales_patch",

      "WITH v AS MATERIALIZED (SELECT (b->>'saleId')::uuid AS sale,"
      " btrim(b->>'transactionReference', E' \\t\\r\\n') AS ref,"
      " (b->>'amount')::numeric AS amount,"
      " b->>'paymentMethod' AS method"
      " FROM (SELECT $1::jsonb AS b) p),"
      " s AS MATERIALIZED (SELECT x.id, x.amount_paid, x.total_amount"
      " FROM sales x, v WHERE x.id = v.sale AND x.tenant_id = $2"
      " AND v.amount = round(v.amount, 2)"
      " FOR NO KEY UPDATE OF x),"
      " e AS MATERIALIZED (SELECT q.sale_id, q.amount, q.payment_method,"
      " q.answer FROM s, v, platform_sale_payment($2, v.ref) q),"
      " f AS MATERIALIZED (SELECT CASE"
      " WHEN v.amount <> round(v.amount, 2) THEN 'amount'"
      " WHEN s.id IS NULL THEN NULL"
      " WHEN e.sale_id IS NOT NULL AND (e.sale_id <> s.id"
      " OR e.amount <> v.amount OR e.payment_method <> v.method)"
      " THEN 'reference'"
      " WHEN e.sale_id IS NOT NULL THEN NULL"
      " WHEN s.amount_paid + v.amount > s.total_amount THEN 'overpaid'"
      " END AS refusal,"
      " s.id IS NOT NULL AND e.sale_id IS NULL AS pay,"
      " e.answer, clock_timestamp() AS at"
      " FROM v LEFT JOIN s ON true LEFT JOIN e ON true),"
      " u AS (UPDATE sales x SET amount_paid = x.amount_paid + v.amount,"
      " payment_status = CASE WHEN x.amount_paid + v.amount = x.total_amount"
      " THEN 'PAID' ELSE 'PARTIALLY_PAID' END,"
      " payment_method = v.method, transaction_reference = v.ref,"
      " last_payment_amount = v.amount,"
      " payment_response_message = CASE"
      " WHEN x.amount_paid + v.amount = x.total_amount"
      " THEN 'Payment completed.' ELSE 'Partial payment received.' END,"
      " first_paid_at = coalesce(x.first_paid_at, f.at),"
      " last_paid_at = f.at, payment_count = x.payment_count + 1,"
      " updated_at = f.at"
      " FROM v, f WHERE x.id = v.sale AND x.tenant_id = $2"
      " AND f.refusal IS NULL AND f.pay"
      " RETURNING x.*),"
      " t AS (INSERT INTO sales_tracking (sale_id, tenant_id, merchant_id,"
      " business_id, delivery_status, is_delayed, created_at, updated_at)"
      " SELECT u.id, u.tenant_id, u.merchant_id, u.business_id,"
      " u.delivery_status, false, u.updated_at, u.updated_at FROM u"
      " WHERE u.payment_status = 'PAID' AND NOT EXISTS (SELECT 1"
      " FROM sales_tracking q WHERE q.tenant_id = u.tenant_id"
      " AND q.sale_id = u.id)"
      " RETURNING *),"
      " d AS MATERIALIZED (SELECT row_to_json(x)::text AS doc FROM (SELECT"
      " 'Sale transaction updated.' AS message,"
      NGX_PLATFORM_SALES_DOCUMENT " AS data,"
      " (SELECT row_to_json(m) FROM (SELECT 1 AS \"currentPage\","
      " 1 AS \"from\", 1 AS \"to\", 1 AS \"perPage\", 1 AS total,"
      " 1 AS \"lastPage\") m) AS meta FROM u) x),"
      " p AS (INSERT INTO sale_payments (tenant_id, reference, sale_id,"
      " amount, payment_method, answer, created_at)"
      " SELECT $2, v.ref, u.id, v.amount, v.method, d.doc, u.updated_at"
      " FROM u, v, d)"
      " SELECT f.refusal, CASE WHEN f.refusal IS NOT NULL THEN NULL"
      " WHEN f.answer IS NOT NULL THEN f.answer"
      " ELSE (SELECT d.doc FROM d) END"
      " FROM f",

      2, 0, 0 },

    { NGX_PLATFORM_P_BODY, NGX_PLATFORM_P_TENANT },
    NGX_PLATFORM_ANSWER_CHECKED,

    NULL,
    "Sale not found.",
    "No sale with this id exists.",
    "Transaction reference already used.",
    "transactionReference was recorded with another sale, amount or payment "
    "method.",
    NGX_HTTP_NOT_FOUND,
    "Sale not found.",
    "No sale with this id exists.",
    NULL, NULL,
    ngx_platform_sales_patch_outcomes
};


static char  *ngx_platform_sales_methods[] = {
    "QR", "TRANSFER", "CARD", "USSD", "CASH", NULL
};


/*
 * Spec 2.12 and decisions.md: all four required. The amount at least one
 * cent (more than 0 with at most two places, which the statement checks
 * exactly) and at most 999999999999.99, well within numeric(16,2); the
 * reference's length in characters, trimmed.
 */

static ngx_platform_field_t  ngx_platform_sales_patch_body[] = {
    { "saleId", NGX_PLATFORM_T_UUID, NGX_PLATFORM_F_REQUIRED,
      0, 0, NULL, NULL, NULL },
    { "transactionReference", NGX_PLATFORM_T_STRING,
      NGX_PLATFORM_F_REQUIRED|NGX_PLATFORM_F_TRIM|NGX_PLATFORM_F_MIN
      |NGX_PLATFORM_F_MAX,
      1, 128, NULL, NULL, NULL },
    { "amount", NGX_PLATFORM_T_NUMBER,
      NGX_PLATFORM_F_REQUIRED|NGX_PLATFORM_F_MIN|NGX_PLATFORM_F_MAX,
      0.01, 999999999999.99, NULL, NULL, NULL },
    { "paymentMethod", NGX_PLATFORM_T_ENUM, NGX_PLATFORM_F_REQUIRED,
      0, 0, ngx_platform_sales_methods, NULL, NULL },
    { NULL, 0, 0, 0, 0, NULL, NULL, NULL }
};


/*
 * The shapes of the answer (docs/api.md, "The sale document"), spec
 * 2.12's types by its names. What the statement builds from columns has
 * every key, always; the stored documents (customer, agent, seller, the
 * extra payloads, the delivery address object, the shipping fee details,
 * each detail's product and selling price) are as the sale's makers
 * stored them, so none of their keys is required ("required": []).
 */

static const char  ngx_platform_sales_schemas[] =
    "{"
    "\"SaleAnswer\":{\"type\":\"object\",\"description\":\"The whole body of "
    "a recorded (or replayed) payment: the sales envelope.\",\"properties\":{"
     "\"message\":{\"type\":\"string\"},"
     "\"data\":{\"$ref\":\"#/components/schemas/SaleDocument\"},"
     "\"meta\":{\"$ref\":\"#/components/schemas/SalesMeta\"}}},"
    "\"SalesMeta\":{\"type\":\"object\",\"description\":\"One page of one "
    "item, always.\",\"properties\":{"
     "\"currentPage\":{\"type\":\"integer\"},"
     "\"from\":{\"type\":\"integer\"},"
     "\"to\":{\"type\":\"integer\"},"
     "\"perPage\":{\"type\":\"integer\"},"
     "\"total\":{\"type\":\"integer\"},"
     "\"lastPage\":{\"type\":\"integer\"}}},"
    "\"PaymentMethod\":{\"type\":\"string\",\"enum\":[\"QR\",\"TRANSFER\","
    "\"CARD\",\"USSD\",\"CASH\"]},"
    "\"PaymentStatus\":{\"type\":\"string\",\"enum\":[\"PENDING\","
    "\"PARTIALLY_PAID\",\"PAID\"]},"
    "\"SaleDocument\":{\"type\":\"object\",\"description\":\"The sale after "
    "the payment (spec 2.12).\",\"properties\":{"
     "\"id\":{\"type\":\"string\",\"format\":\"uuid\"},"
     "\"requestId\":{\"type\":\"string\"},"
     "\"merchantId\":{\"type\":\"string\"},"
     "\"orderNumber\":{\"type\":\"string\"},"
     "\"deliveryAddress\":{\"type\":\"string\"},"
     "\"totalAmount\":{\"type\":\"number\"},"
     "\"discount\":{\"type\":\"number\"},"
     "\"shippingFee\":{\"type\":\"number\"},"
     "\"orderAmount\":{\"type\":\"number\"},"
     "\"totalVat\":{\"type\":\"number\"},"
     "\"totalVatRatio\":{\"type\":\"number\"},"
     "\"totalQuantity\":{\"type\":\"integer\"},"
     "\"paymentMethod\":{\"$ref\":\"#/components/schemas/PaymentMethod\"},"
     "\"paymentMode\":{\"type\":\"string\"},"
     "\"paymentStatus\":{\"$ref\":\"#/components/schemas/PaymentStatus\"},"
     "\"deliveryMode\":{\"type\":\"string\"},"
     "\"deliveryStatus\":{\"type\":\"string\"},"
     "\"customer\":{\"$ref\":\"#/components/schemas/Party\"},"
     "\"agent\":{\"$ref\":\"#/components/schemas/Party\"},"
     "\"seller\":{\"$ref\":\"#/components/schemas/Business\"},"
     "\"products\":{\"type\":\"array\",\"items\":{"
     "\"$ref\":\"#/components/schemas/SaleProduct\"}},"
     "\"extraPayloads\":{\"$ref\":\"#/components/schemas/ExtraPayloads\"},"
     "\"sale\":{\"$ref\":\"#/components/schemas/Sale\"}}},"
    "\"SaleProduct\":{\"type\":\"object\",\"description\":\"A line of the "
    "sale: its product's uuid and name (null when the stored product has "
    "none), images and the quantity sold.\",\"properties\":{"
     "\"productId\":{\"type\":[\"string\",\"null\"]},"
     "\"productName\":{\"type\":[\"string\",\"null\"]},"
     "\"images\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
     "\"quantity\":{\"type\":\"number\"}}},"
    "\"Sale\":{\"type\":\"object\",\"properties\":{"
     "\"createdAt\":{\"type\":\"string\",\"format\":\"date-time\"},"
     "\"updatedAt\":{\"type\":\"string\",\"format\":\"date-time\"},"
     "\"settlementAttemptNextRetry\":{\"type\":[\"string\",\"null\"],"
     "\"format\":\"date-time\"},"
     "\"tenantId\":{\"type\":\"string\"},"
     "\"agentId\":{\"type\":\"string\"},"
     "\"merchantId\":{\"type\":\"string\"},"
     "\"businessId\":{\"type\":\"string\"},"
     "\"customerId\":{\"type\":\"string\"},"
     "\"customerBusinessId\":{\"type\":\"string\"},"
     "\"requestId\":{\"type\":\"string\"},"
     "\"transactionReference\":{\"type\":\"string\"},"
     "\"paymentReference\":{\"type\":\"string\"},"
     "\"countryCode\":{\"type\":\"string\"},"
     "\"deliveryNote\":{\"type\":\"string\"},"
     "\"orderNumber\":{\"type\":\"string\"},"
     "\"globalOrderNumber\":{\"type\":\"string\"},"
     "\"deliveryAddress\":{\"type\":\"string\"},"
     "\"settlementReference\":{\"type\":\"string\"},"
     "\"logisticsRequestId\":{\"type\":\"string\"},"
     "\"logisticsProvider\":{\"type\":\"string\"},"
     "\"parentSale\":{\"type\":\"string\"},"
     "\"deliveryAddressId\":{"
     "\"$ref\":\"#/components/schemas/SaleDeliveryAddress\"},"
     "\"totalQuantity\":{\"type\":\"integer\"},"
     "\"settlementAttempt\":{\"type\":\"integer\"},"
     "\"isPartialParent\":{\"type\":\"boolean\"},"
     "\"isPartial\":{\"type\":\"boolean\"},"
     "\"isUpdated\":{\"type\":\"boolean\"},"
     "\"isInStore\":{\"type\":\"boolean\"},"
     "\"eft\":{\"type\":\"boolean\"},"
     "\"shippingFee\":{\"type\":\"number\"},"
     "\"orderAmount\":{\"type\":\"number\"},"
     "\"totalAmount\":{\"type\":\"number\"},"
     "\"discount\":{\"type\":\"number\"},"
     "\"totalPromotionDiscount\":{\"type\":\"number\"},"
     "\"totalVat\":{\"type\":\"number\"},"
     "\"totalVatRatio\":{\"type\":\"number\"},"
     "\"amountPaid\":{\"type\":\"number\"},"
     "\"shippingFeeDetail\":{"
     "\"$ref\":\"#/components/schemas/SaleShippingFeeDetail\"},"
     "\"discountType\":{\"type\":\"string\"},"
     "\"paymentMethod\":{\"$ref\":\"#/components/schemas/PaymentMethod\"},"
     "\"paymentMode\":{\"type\":\"string\"},"
     "\"paymentStatus\":{\"$ref\":\"#/components/schemas/PaymentStatus\"},"
     "\"deliveryMode\":{\"type\":\"string\"},"
     "\"deliveryStatus\":{\"type\":\"string\"},"
     "\"settlementStatus\":{\"type\":\"string\"},"
     "\"saleDetails\":{\"type\":\"array\",\"items\":{"
     "\"$ref\":\"#/components/schemas/SaleDetail\"}},"
     "\"saleTransaction\":{\"$ref\":\"#/components/schemas/SaleTransaction\"},"
     "\"salesTracking\":{\"type\":\"array\",\"items\":{"
     "\"$ref\":\"#/components/schemas/SalesTracking\"}}}},"
    "\"SaleDetail\":{\"type\":\"object\",\"properties\":{"
     "\"id\":{\"type\":\"integer\"},"
     "\"uuid\":{\"type\":\"string\",\"format\":\"uuid\"},"
     "\"createdAt\":{\"type\":\"string\",\"format\":\"date-time\"},"
     "\"updatedAt\":{\"type\":\"string\",\"format\":\"date-time\"},"
     "\"tenantId\":{\"type\":\"string\"},"
     "\"merchantId\":{\"type\":\"string\"},"
     "\"businessId\":{\"type\":\"string\"},"
     "\"countryCode\":{\"type\":\"string\"},"
     "\"sale\":{\"type\":\"string\"},"
     "\"parentSale\":{\"type\":\"string\"},"
     "\"product\":{\"$ref\":\"#/components/schemas/Product\"},"
     "\"quantity\":{\"type\":\"number\"},"
     "\"amount\":{\"type\":\"number\"},"
     "\"vat\":{\"type\":\"number\"},"
     "\"vatRatio\":{\"type\":\"number\"},"
     "\"promotionDiscount\":{\"type\":\"number\"},"
     "\"costPrice\":{\"type\":\"number\"},"
     "\"totalCostPrice\":{\"type\":\"number\"},"
     "\"profit\":{\"type\":\"number\"},"
     "\"quantityRemaining\":{\"type\":\"number\"},"
     "\"sellingPrice\":{\"$ref\":\"#/components/schemas/Price\"}}},"
    "\"SaleTransaction\":{\"type\":\"object\",\"description\":\"The sale's "
    "latest payment.\",\"properties\":{"
     "\"createdAt\":{\"type\":\"string\",\"format\":\"date-time\"},"
     "\"updatedAt\":{\"type\":\"string\",\"format\":\"date-time\"},"
     "\"nextRetry\":{\"type\":[\"string\",\"null\"],\"format\":\"date-time\"},"
     "\"amount\":{\"type\":\"number\"},"
     "\"totalShippingFee\":{\"type\":\"number\"},"
     "\"baseFare\":{\"type\":\"number\"},"
     "\"totalOrderAmount\":{\"type\":\"number\"},"
     "\"totalVat\":{\"type\":\"number\"},"
     "\"totalVatRatio\":{\"type\":\"number\"},"
     "\"shippingFeeDetail\":{"
     "\"$ref\":\"#/components/schemas/TransactionShippingFeeDetail\"},"
     "\"sales\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
     "\"tenantId\":{\"type\":\"string\"},"
     "\"countryCode\":{\"type\":\"string\"},"
     "\"transactionReference\":{\"type\":\"string\"},"
     "\"globalOrderNumber\":{\"type\":\"string\"},"
     "\"eftAttachment\":{\"type\":\"string\"},"
     "\"paymentResponseMessage\":{\"type\":\"string\"},"
     "\"paymentStatus\":{\"$ref\":\"#/components/schemas/PaymentStatus\"},"
     "\"paymentMethod\":{\"$ref\":\"#/components/schemas/PaymentMethod\"},"
     "\"paymentMode\":{\"type\":\"string\"},"
     "\"isEFT\":{\"type\":\"boolean\"},"
     "\"isInStore\":{\"type\":\"boolean\"},"
     "\"settled\":{\"type\":\"boolean\"},"
     "\"totalSaleCount\":{\"type\":\"integer\"},"
     "\"totalDeliveredSaleCount\":{\"type\":\"integer\"},"
     "\"reQueryCount\":{\"type\":\"integer\"},"
     "\"extraPayloads\":{\"$ref\":\"#/components/schemas/ExtraPayloads\"}}},"
    "\"SalesTracking\":{\"type\":\"object\",\"properties\":{"
     "\"id\":{\"type\":\"integer\"},"
     "\"uuid\":{\"type\":\"string\",\"format\":\"uuid\"},"
     "\"createdAt\":{\"type\":\"string\",\"format\":\"date-time\"},"
     "\"updatedAt\":{\"type\":\"string\",\"format\":\"date-time\"},"
     "\"sale\":{\"type\":\"string\"},"
     "\"merchantId\":{\"type\":\"string\"},"
     "\"businessId\":{\"type\":\"string\"},"
     "\"tenantId\":{\"type\":\"string\"},"
     "\"deliveryStatus\":{\"type\":\"string\"},"
     "\"isDelayed\":{\"type\":\"boolean\"}}},"
    "\"Party\":{\"type\":\"object\",\"description\":\"A customer or an agent, "
    "a stored document: its keys as stored.\",\"required\":[],\"properties\":{"
     "\"country\":{\"$ref\":\"#/components/schemas/Country\"},"
     "\"firstName\":{\"type\":\"string\"},"
     "\"lastName\":{\"type\":\"string\"},"
     "\"wallet\":{\"$ref\":\"#/components/schemas/Wallet\"},"
     "\"city\":{\"$ref\":\"#/components/schemas/City\"},"
     "\"phone\":{\"type\":\"string\"},"
     "\"profileTenant\":{\"type\":\"string\"},"
     "\"photo\":{\"type\":\"string\"},"
     "\"get_id\":{\"type\":\"string\"},"
     "\"state\":{\"$ref\":\"#/components/schemas/State\"},"
     "\"username\":{\"type\":\"string\"},"
     "\"status\":{\"type\":\"string\"},"
     "\"profileOwners\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
     "\"businesses\":{\"type\":\"array\",\"items\":{"
     "\"$ref\":\"#/components/schemas/Business\"}},"
     "\"address\":{\"type\":\"string\"},"
     "\"fullName\":{\"type\":\"string\"}}},"
    "\"Owner\":{\"type\":\"object\",\"description\":\"A business's owner, a "
    "stored document: its keys as stored.\",\"required\":[],\"properties\":{"
     "\"profileTenant\":{\"type\":\"string\"},"
     "\"city\":{\"$ref\":\"#/components/schemas/City\"},"
     "\"country\":{\"$ref\":\"#/components/schemas/Country\"},"
     "\"firstName\":{\"type\":\"string\"},"
     "\"lastName\":{\"type\":\"string\"},"
     "\"phone\":{\"type\":\"string\"},"
     "\"photo\":{\"type\":\"string\"},"
     "\"state\":{\"$ref\":\"#/components/schemas/State\"},"
     "\"username\":{\"type\":\"string\"},"
     "\"wallet\":{\"$ref\":\"#/components/schemas/Wallet\"},"
     "\"id\":{\"type\":\"string\"},"
     "\"fullName\":{\"type\":\"string\"}}},"
    "\"Business\":{\"type\":\"object\",\"description\":\"A business, a stored "
    "document: its keys as stored.\",\"required\":[],\"properties\":{"
     "\"get_id\":{\"type\":\"string\"},"
     "\"name\":{\"type\":\"string\"},"
     "\"email\":{\"type\":\"string\"},"
     "\"photo\":{\"type\":\"string\"},"
     "\"wallet\":{\"$ref\":\"#/components/schemas/Wallet\"},"
     "\"address\":{\"$ref\":\"#/components/schemas/Address\"},"
     "\"location\":{\"$ref\":\"#/components/schemas/Location\"},"
     "\"user\":{\"type\":\"string\"},"
     "\"owner\":{\"$ref\":\"#/components/schemas/Owner\"},"
     "\"businessHandle\":{\"type\":\"string\"},"
     "\"phone\":{\"type\":\"string\"},"
     "\"category\":{\"type\":\"string\"},"
     "\"shippingFee\":{\"type\":\"number\"},"
     "\"extraLocationPrice\":{\"type\":\"number\"},"
     "\"distance\":{\"type\":\"number\"},"
     "\"active\":{\"type\":\"boolean\"},"
     "\"acceptingOrder\":{\"type\":\"boolean\"},"
     "\"isDistributor\":{\"type\":\"boolean\"},"
     "\"isManufacturer\":{\"type\":\"boolean\"},"
     "\"isHead\":{\"type\":\"boolean\"},"
     "\"kycDetails\":{\"type\":\"object\",\"additionalProperties\":true,"
     "\"description\":\"Free-form.\"},"
     "\"pickUpAddresses\":{\"type\":\"array\",\"items\":{"
     "\"$ref\":\"#/components/schemas/PickUpAddress\"}},"
     "\"priceMargin\":{\"$ref\":\"#/components/schemas/PriceMargin\"}}},"
    "\"Wallet\":{\"type\":\"object\",\"description\":\"A wallet, a stored "
    "document: its keys as stored.\",\"required\":[],\"properties\":{"
     "\"userId\":{\"type\":\"string\"},"
     "\"virtualBankCode\":{\"type\":\"string\"},"
     "\"floatAccountId\":{\"type\":\"string\"},"
     "\"floatAccountUuid\":{\"type\":\"string\"},"
     "\"floatAccountNumber\":{\"type\":\"string\"},"
     "\"commissionAccountId\":{\"type\":\"string\"}}},"
    "\"Country\":{\"type\":\"object\",\"description\":\"A country, a stored "
    "document: its keys as stored.\",\"required\":[],\"properties\":{"
     "\"code\":{\"type\":\"string\"},"
     "\"name\":{\"type\":\"string\"},"
     "\"currency\":{\"type\":\"string\"}}},"
    "\"City\":{\"type\":\"object\",\"description\":\"A city, a stored "
    "document: its keys as stored.\",\"required\":[],\"properties\":{"
     "\"code\":{\"type\":\"string\"},"
     "\"name\":{\"type\":\"string\"}}},"
    "\"State\":{\"type\":\"object\",\"description\":\"A state, a stored "
    "document: its keys as stored.\",\"required\":[],\"properties\":{"
     "\"code\":{\"type\":\"string\"},"
     "\"name\":{\"type\":\"string\"}}},"
    "\"Address\":{\"type\":\"object\",\"description\":\"An address, a stored "
    "document: its keys as stored.\",\"required\":[],\"properties\":{"
     "\"country\":{\"type\":\"string\"},"
     "\"lga\":{\"type\":\"string\"},"
     "\"name\":{\"type\":\"string\"},"
     "\"state\":{\"type\":\"string\"},"
     "\"latitude\":{\"type\":\"number\"},"
     "\"longitude\":{\"type\":\"number\"}}},"
    "\"PickUpAddress\":{\"type\":\"object\",\"description\":\"An address with "
    "its location, a stored document: its keys as stored.\",\"required\":[],"
    "\"properties\":{"
     "\"country\":{\"type\":\"string\"},"
     "\"lga\":{\"type\":\"string\"},"
     "\"name\":{\"type\":\"string\"},"
     "\"state\":{\"type\":\"string\"},"
     "\"latitude\":{\"type\":\"number\"},"
     "\"longitude\":{\"type\":\"number\"},"
     "\"location\":{\"$ref\":\"#/components/schemas/Location\"}}},"
    "\"Location\":{\"type\":\"object\",\"description\":\"A location, a stored "
    "document: its keys as stored.\",\"required\":[],\"properties\":{"
     "\"coordinates\":{\"type\":\"array\",\"items\":{\"type\":\"number\"}},"
     "\"type\":{\"type\":\"string\"}}},"
    "\"ExtraPayloads\":{\"type\":\"object\",\"description\":\"The payment's "
    "extra payloads, a stored document: its keys as stored.\",\"required\":[],"
    "\"properties\":{"
     "\"ussdString\":{\"type\":\"string\"},"
     "\"bankCode\":{\"type\":\"string\"},"
     "\"accountNumber\":{\"type\":\"string\"},"
     "\"paymentLink\":{\"type\":\"string\"},"
     "\"navigatingUrl\":{\"type\":\"string\"},"
     "\"qrCode\":{\"type\":\"string\"}}},"
    "\"PriceMargin\":{\"type\":\"object\",\"description\":\"A price margin, a "
    "stored document: its keys as stored.\",\"required\":[],\"properties\":{"
     "\"type\":{\"type\":\"string\"},"
     "\"source\":{\"type\":\"string\"},"
     "\"value\":{\"type\":\"number\"},"
     "\"enabled\":{\"type\":\"boolean\"}}},"
    "\"Price\":{\"type\":\"object\",\"description\":\"A price, a stored "
    "document: its keys as stored.\",\"required\":[],\"properties\":{"
     "\"price\":{\"type\":\"number\"},"
     "\"unitQuantity\":{\"type\":\"number\"},"
     "\"unitPrice\":{\"type\":\"number\"}}},"
    "\"Product\":{\"type\":\"object\",\"description\":\"A product as sold, a "
    "stored document: its keys as stored.\",\"required\":[],\"properties\":{"
     "\"id\":{\"type\":\"integer\"},"
     "\"uuid\":{\"type\":\"string\"},"
     "\"createdAt\":{\"type\":\"string\"},"
     "\"updatedAt\":{\"type\":\"string\"},"
     "\"tenantId\":{\"type\":\"string\"},"
     "\"merchantId\":{\"type\":\"string\"},"
     "\"businessId\":{\"type\":\"string\"},"
     "\"name\":{\"type\":\"string\"},"
     "\"description\":{\"type\":\"string\"},"
     "\"sku\":{\"type\":\"string\"},"
     "\"category\":{\"type\":\"string\"},"
     "\"subCategories\":{\"type\":\"string\"},"
     "\"brand\":{\"type\":\"string\"},"
     "\"countryCode\":{\"type\":\"string\"},"
     "\"productPublicId\":{\"type\":\"string\"},"
     "\"unit\":{\"type\":\"string\"},"
     "\"minimumOrderQuantity\":{\"type\":\"number\"},"
     "\"quantityOnHand\":{\"type\":\"number\"},"
     "\"reorderLevel\":{\"type\":\"number\"},"
     "\"weight\":{\"type\":\"number\"},"
     "\"costPrice\":{\"$ref\":\"#/components/schemas/Price\"},"
     "\"sellingPrice\":{\"$ref\":\"#/components/schemas/Price\"},"
     "\"priceMargin\":{\"$ref\":\"#/components/schemas/PriceMargin\"},"
     "\"promotion\":{\"$ref\":\"#/components/schemas/Promotion\"},"
     "\"stockLevel\":{\"type\":\"string\"},"
     "\"visibility\":{\"type\":\"boolean\"},"
     "\"images\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
     "\"clusters\":{\"type\":\"array\",\"items\":{\"type\":\"integer\"}}}},"
    "\"Promotion\":{\"type\":\"object\",\"description\":\"A promotion, a "
    "stored document: its keys as stored.\",\"required\":[],\"properties\":{"
     "\"id\":{\"type\":\"integer\"},"
     "\"uuid\":{\"type\":\"string\"},"
     "\"createdAt\":{\"type\":\"string\"},"
     "\"updatedAt\":{\"type\":\"string\"},"
     "\"tenantId\":{\"type\":\"string\"},"
     "\"merchantId\":{\"type\":\"string\"},"
     "\"name\":{\"type\":\"string\"},"
     "\"description\":{\"type\":\"string\"},"
     "\"discountType\":{\"type\":\"string\"},"
     "\"amount\":{\"type\":\"number\"},"
     "\"percentage\":{\"type\":\"number\"},"
     "\"endDate\":{\"type\":\"string\",\"format\":\"date-time\"},"
     "\"isActive\":{\"type\":\"boolean\"}}},"
    "\"SaleDeliveryAddress\":{\"type\":\"object\",\"description\":\"The "
    "sale's delivery address, a stored document: its keys as stored.\","
    "\"required\":[],\"properties\":{"
     "\"id\":{\"type\":\"integer\"},"
     "\"uuid\":{\"type\":\"string\"},"
     "\"createdAt\":{\"type\":\"string\"},"
     "\"updatedAt\":{\"type\":\"string\"},"
     "\"state\":{\"type\":\"string\"},"
     "\"city\":{\"type\":\"string\"},"
     "\"address\":{\"type\":\"string\"},"
     "\"latitude\":{\"type\":\"number\"},"
     "\"longitude\":{\"type\":\"number\"},"
     "\"customerId\":{\"type\":\"string\"},"
     "\"tenantId\":{\"type\":\"string\"},"
     "\"postalCode\":{\"type\":\"string\"},"
     "\"deliveryMode\":{\"type\":\"string\"},"
     "\"customerPhoneNumber\":{\"type\":\"string\"}}},"
    "\"SaleShippingFeeDetail\":{\"type\":\"object\",\"description\":\"The "
    "sale's shipping fee detail, a stored document: its keys as stored.\","
    "\"required\":[],\"properties\":{"
     "\"shippingFee\":{\"type\":\"number\"},"
     "\"distanceCovered\":{\"type\":\"number\"},"
     "\"requestId\":{\"type\":\"string\"},"
     "\"dropOffUserId\":{\"type\":\"string\"}}},"
    "\"TransactionShippingFeeDetail\":{\"type\":\"object\","
    "\"description\":\"The transaction's shipping fee detail, a stored "
    "document: its keys as stored.\",\"required\":[],\"properties\":{"
     "\"totalDistanceCovered\":{\"type\":\"number\"},"
     "\"baseFare\":{\"type\":\"number\"},"
     "\"unitPrice\":{\"type\":\"number\"},"
     "\"totalShippingFee\":{\"type\":\"number\"},"
     "\"unitOfMeasurement\":{\"type\":\"string\"}}}"
    "}";



/*
 * platform_openapi: the whole success body (Envelope Sales), and an
 * example on the demo data
 */

static ngx_platform_doc_t  ngx_platform_sales_patch_doc = {
    "Record a payment on a sale",
    ngx_platform_doc_schema("SaleAnswer"),
    "{\"body\":{\"saleId\":\"aa100000-0000-4000-8000-000000000001\","
    "\"transactionReference\":\"PAY-DEMO-1\",\"amount\":2500.5,"
    "\"paymentMethod\":\"TRANSFER\"}}",
    NULL, 0, NULL
};


static ngx_platform_endpoint_t  ngx_platform_sales_endpoints[] = {

    { NGX_HTTP_PATCH, "/sales/transactions",
      NGX_PLATFORM_AUTH_BEARER,
      NGX_PLATFORM_IN_TENANT|NGX_PLATFORM_IN_NO_HEAD,
      NULL, ngx_platform_sales_patch_body,
      NULL, NULL,
      &ngx_platform_sales_patch, NULL,
      &ngx_platform_sales_patch_doc },

    { 0, NULL, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL }
};


ngx_platform_family_t  ngx_platform_sales_family = {
    ngx_string("sales"),
    NGX_PLATFORM_ENVELOPE_SALES,
    NGX_PLATFORM_BACKEND_PG,
    ngx_platform_sales_endpoints,
    NULL,
    0,
    ngx_platform_sales_schemas,
    NULL
};
