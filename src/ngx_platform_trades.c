
/*
 * ngx_platform: trade process flows (spec 2.11 and 4.6, decisions.md
 * section 3 "Trade process flows"). Envelope B. By default a caller shows
 * both an API key and a bearer token (decisions.md section 2) of one
 * tenant; the flows are that tenant's own.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_platform.h"
#include "ngx_platform_op.h"


/*
 * The tenant's flows whose name contains name, case-insensitively (both
 * through lower(), the database's locale): strpos takes name as plain
 * text, so "%", "_" and "\" match themselves, where LIKE would take them
 * for patterns. By name, then id; the index gives a tenant's flows in
 * that order. No name: every flow. None: "[]".
 */

static ngx_platform_sql_t  ngx_platform_trades_flows = {
    { "platform_trades_flows",

      "SELECT coalesce((SELECT '[' || string_agg(row_to_json(t)::text, ','"
      " ORDER BY t.name, t.id) || ']' FROM (SELECT f.id, f.name,"
      " f.description FROM trade_process_flows f WHERE f.tenant_id = $1"
      " AND ($2::text IS NULL"
      " OR strpos(lower(f.name), lower($2::text)) > 0)) t), '[]')",

      2, 0, 0 },

    { NGX_PLATFORM_P_TENANT, NGX_PLATFORM_P_ARG(0) },
    NGX_PLATFORM_ANSWER_DOCUMENT,

    "Trade process flows retrieved.",
    NULL, NULL,
    NULL, NULL, 0, NULL, NULL,
    NULL, NULL, NULL
};


static ngx_platform_field_t  ngx_platform_trades_flows_query[] = {
    { "name", NGX_PLATFORM_T_STRING, NGX_PLATFORM_F_MAX,
      0, 200, NULL, NULL, NULL },
    { NULL, 0, 0, 0, 0, NULL, NULL, NULL }
};


/* the shapes of the data its endpoints answer (docs/api.md) */

static const char  ngx_platform_trades_schemas[] =
    "{"
    "\"TradeFlow\":{\"type\":\"object\",\"properties\":{"
     "\"id\":{\"type\":\"string\",\"format\":\"uuid\"},"
     "\"name\":{\"type\":\"string\"},"
     "\"description\":{\"type\":\"string\"}}}"
    "}";


/*
 * platform_openapi: the endpoint's success data, and an example on the
 * demo data
 */

static ngx_platform_doc_t  ngx_platform_trades_flows_doc = {
    "List the trade process flows",
    ngx_platform_doc_list("TradeFlow"),
    "{\"query\":{\"name\":\"export\"}}",
    NULL, 0, NULL
};


static ngx_platform_endpoint_t  ngx_platform_trades_endpoints[] = {

    { NGX_HTTP_GET, "/api/v1/trades/process-flows",
      NGX_PLATFORM_AUTH_APIKEY|NGX_PLATFORM_AUTH_BEARER,
      NGX_PLATFORM_IN_TENANT,
      ngx_platform_trades_flows_query, NULL,
      NULL, NULL,
      &ngx_platform_trades_flows, NULL,
      &ngx_platform_trades_flows_doc },

    { 0, NULL, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL }
};


ngx_platform_family_t  ngx_platform_trades_family = {
    ngx_string("trades"),
    NGX_PLATFORM_ENVELOPE_B,
    NGX_PLATFORM_BACKEND_PG,
    ngx_platform_trades_endpoints,
    NULL,
    0,
    ngx_platform_trades_schemas,
    NULL
};
