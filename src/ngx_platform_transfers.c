
/*
 * ngx_platform: bank transfers (spec 2.4, 4.2 and 8, decisions.md section
 * 3 "Bank transfers"). Paged Envelope A. The caller's tenant comes from
 * its credentials (by default the bearer token's tenantId); only that
 * tenant's transfers are listed and counted.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_platform.h"
#include "ngx_platform_op.h"


/*
 * One statement, one round trip: the page figures, the tenant's total and
 * the page of transfers, newest date first, ties by id (the index
 * bank_transfers_tenant_date_idx gives both in that order). The server
 * builds the JSON: amount is numeric, so a JSON number; date is a
 * timestamptz, so an ISO 8601 string in the session's time zone (UTC
 * unless platform_pg sets options). A page past the end is "[]".
 *
 * The query checks bound PageNumber to 1..2^31-1 and PageSize to 1..100,
 * so the casts cannot fail and the offset fits a bigint.
 */

static ngx_platform_sql_t  ngx_platform_transfers_list = {
    { "platform_transfers_list",

      "SELECT $2::int AS page_number, $3::int AS page_size,"
      " (SELECT count(*) FROM bank_transfers WHERE tenant_id = $1)"
      " AS total,"
      " coalesce((SELECT '[' || string_agg(row_to_json(t)::text, ','"
      " ORDER BY t.date DESC, t.id) || ']' FROM ("
      "SELECT b.id, b.reference, b.amount,"
      " (SELECT row_to_json(a) FROM (SELECT"
      " b.account_name AS \"accountName\","
      " b.account_number AS \"accountNumber\","
      " b.bank_name AS \"bankName\") a) AS account,"
      " (SELECT row_to_json(a) FROM (SELECT"
      " b.beneficiary_account_name AS \"accountName\","
      " b.beneficiary_account_number AS \"accountNumber\","
      " b.beneficiary_bank_name AS \"bankName\") a) AS beneficiary,"
      " b.status, b.date, b.tenant_id AS \"tenantId\", b.email, b.currency"
      " FROM bank_transfers b WHERE b.tenant_id = $1"
      " ORDER BY b.date DESC, b.id"
      " LIMIT $3::int OFFSET ($2::int - 1)::bigint * $3::int) t),"
      " '[]') AS data",

      3, 0, 0 },

    { NGX_PLATFORM_P_TENANT, NGX_PLATFORM_P_ARG(0), NGX_PLATFORM_P_ARG(1) },
    NGX_PLATFORM_ANSWER_PAGE,

    "Bank transfers retrieved.",
    NULL, NULL,
    NULL, NULL, 0, NULL, NULL,
    NULL, NULL, NULL
};


/* spec 8: defaults 1 and 10; decisions.md: PageSize at most 100 */

static ngx_platform_field_t  ngx_platform_transfers_list_query[] = {
    { "PageNumber", NGX_PLATFORM_T_INTEGER,
      NGX_PLATFORM_F_MIN|NGX_PLATFORM_F_MAX,
      1, 2147483647, NULL, NULL, "1" },
    { "PageSize", NGX_PLATFORM_T_INTEGER,
      NGX_PLATFORM_F_MIN|NGX_PLATFORM_F_MAX,
      1, 100, NULL, NULL, "10" },
    { NULL, 0, 0, 0, 0, NULL, NULL, NULL }
};


/* the shapes of the data its endpoints answer (docs/api.md) */

static const char  ngx_platform_transfers_schemas[] =
    "{"
    "\"BankAccount\":{\"type\":\"object\",\"properties\":{"
     "\"accountName\":{\"type\":\"string\"},"
     "\"accountNumber\":{\"type\":\"string\"},"
     "\"bankName\":{\"type\":\"string\"}}},"
    "\"BankTransfer\":{\"type\":\"object\",\"properties\":{"
     "\"id\":{\"type\":\"string\",\"format\":\"uuid\"},"
     "\"reference\":{\"type\":\"string\"},"
     "\"amount\":{\"type\":\"number\"},"
     "\"account\":{\"$ref\":\"#/components/schemas/BankAccount\"},"
     "\"beneficiary\":{\"$ref\":\"#/components/schemas/BankAccount\"},"
     "\"status\":{\"type\":\"string\"},"
     "\"date\":{\"type\":\"string\",\"format\":\"date-time\"},"
     "\"tenantId\":{\"type\":\"string\"},"
     "\"email\":{\"type\":\"string\"},"
     "\"currency\":{\"type\":\"string\"}}}"
    "}";


/*
 * platform_openapi: each endpoint's success data, and an example on the
 * demo data
 */

static ngx_platform_doc_t  ngx_platform_transfers_list_doc = {
    "List the bank transfers, a page at a time",
    ngx_platform_doc_list("BankTransfer"),
    "{\"query\":{\"PageNumber\":1,\"PageSize\":5}}",
    NULL, 0, NULL
};


/*
 * The specification names POST and samples GET; both are served, alike.
 * Neither takes a body: a POST's body, if any, is not read.
 */

static ngx_platform_endpoint_t  ngx_platform_transfers_endpoints[] = {

    { NGX_HTTP_GET, "/api/v{version}/BankTransfers/all-account",
      NGX_PLATFORM_AUTH_BEARER, NGX_PLATFORM_IN_TENANT,
      ngx_platform_transfers_list_query, NULL,
      NULL, NULL,
      &ngx_platform_transfers_list, NULL,
      &ngx_platform_transfers_list_doc },

    { NGX_HTTP_POST, "/api/v{version}/BankTransfers/all-account",
      NGX_PLATFORM_AUTH_BEARER, NGX_PLATFORM_IN_TENANT,
      ngx_platform_transfers_list_query, NULL,
      NULL, NULL,
      &ngx_platform_transfers_list, NULL,
      &ngx_platform_transfers_list_doc },

    { 0, NULL, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL }
};


static ngx_platform_text_t  ngx_platform_transfers_texts[] = {
    { "Bank transfers retrieved.", "Virements bancaires récupérés." },
    { NULL, NULL }
};


ngx_platform_family_t  ngx_platform_transfers_family = {
    ngx_string("transfers"),
    NGX_PLATFORM_ENVELOPE_A,
    NGX_PLATFORM_BACKEND_PG,
    ngx_platform_transfers_endpoints,
    ngx_platform_transfers_texts,
    0,
    ngx_platform_transfers_schemas,
    NULL
};
