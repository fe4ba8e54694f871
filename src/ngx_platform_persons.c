
/*
 * ngx_platform: person accounts (spec 2.6 and 4.4, decisions.md section 3
 * "Person accounts"). Envelope A. The caller's tenant comes from its
 * credentials (by default the bearer token's tenantId), and only that
 * tenant's accounts are visible: another tenant's account is 404.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_platform.h"
#include "ngx_platform_document.h"


static ngx_int_t ngx_platform_persons_account(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);


static ngx_platform_route_t  ngx_platform_persons_routes[] = {

    { NGX_HTTP_GET, "/api/v{}/PersonAccounts/{}/get",
      NGX_PLATFORM_AUTH_BEARER, ngx_platform_persons_account },

    { 0, NULL, 0, NULL }
};


ngx_platform_family_t  ngx_platform_persons_family = {
    ngx_string("persons"),
    NGX_PLATFORM_ENVELOPE_A,
    NGX_PLATFORM_BACKEND_PG,
    0,
    ngx_platform_persons_routes
};


/*
 * The person account document of spec 2.6, built by the server: the
 * balances are numeric, so JSON numbers; created is a timestamptz, so an
 * ISO 8601 string in the session's time zone (UTC unless platform_pg
 * sets options).
 */

static ngx_platform_pg_document_t  ngx_platform_persons_account_doc = {
    { "platform_persons_account",

    "SELECT json_build_object("
    "'id', id,"
    " 'personId', person_id,"
    " 'accountId', account_id,"
    " 'accountBIC', account_bic,"
    " 'accountType', account_type,"
    " 'accountName', account_name,"
    " 'currency', currency,"
    " 'availableBalance', available_balance,"
    " 'accountLimit', account_limit,"
    " 'statusDescription', status_description,"
    " 'created', created,"
    " 'nubanOrIban', nuban_or_iban,"
    " 'purpose', purpose,"
    " 'comment', comment,"
    " 'status', status,"
    " 'productId', product_id,"
    " 'clientId', client_id)::text"
    " FROM person_accounts"
    " WHERE id = $1::uuid AND tenant_id = $2",

    2 },

    "Person account retrieved.",
    "Person account not found.",
    "No person account with this id exists."
};


static ngx_int_t
ngx_platform_persons_account(ngx_http_request_t *r, ngx_platform_ctx_t *ctx)
{
    ngx_int_t  rc;
    ngx_str_t  params[2];

    rc = ngx_platform_require_tenant(r, ctx);
    if (rc != NGX_OK) {
        return rc;
    }

    params[0] = ctx->params[0];
    params[1] = ctx->identity.tenant;

    if (!ngx_platform_is_uuid(&params[0])) {
        return ngx_platform_fail(r, NGX_HTTP_BAD_REQUEST,
                                 "Invalid person account id.",
                                 "The id must be a uuid.");
    }

    return ngx_platform_pg_document(r, &ngx_platform_persons_account_doc,
                                    params);
}
