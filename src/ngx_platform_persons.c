
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
#include "ngx_platform_op.h"


/*
 * The person account document of spec 2.6, built by the server: the
 * balances are numeric, so JSON numbers; created is a timestamptz, so an
 * ISO 8601 string in the session's time zone (UTC unless platform_pg
 * sets options).
 */

static ngx_platform_sql_t  ngx_platform_persons_account = {
    { "platform_persons_account",

      "SELECT row_to_json(a)::text FROM ("
      "SELECT id, person_id AS \"personId\", account_id AS \"accountId\","
      " account_bic AS \"accountBIC\", account_type AS \"accountType\","
      " account_name AS \"accountName\", currency,"
      " available_balance AS \"availableBalance\","
      " account_limit AS \"accountLimit\","
      " status_description AS \"statusDescription\", created,"
      " nuban_or_iban AS \"nubanOrIban\", purpose, comment, status,"
      " product_id AS \"productId\", client_id AS \"clientId\""
      " FROM person_accounts"
      " WHERE id = $1::uuid AND tenant_id = $2) a",

      2, 0 },

    { NGX_PLATFORM_P_ARG(0), NGX_PLATFORM_P_TENANT },
    NGX_PLATFORM_ANSWER_DOCUMENT,

    "Person account retrieved.",
    "Person account not found.",
    "No person account with this id exists.",
    NULL, NULL, 0, NULL, NULL,
    NULL, NULL
};


static ngx_platform_endpoint_t  ngx_platform_persons_endpoints[] = {

    { NGX_HTTP_GET, "/api/v{version}/PersonAccounts/{uuid}/get",
      NGX_PLATFORM_AUTH_BEARER, NGX_PLATFORM_IN_TENANT,
      NULL, NULL,
      "Invalid person account id.", "The id must be a uuid.",
      &ngx_platform_persons_account, NULL },

    { 0, NULL, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL }
};


static ngx_platform_text_t  ngx_platform_persons_texts[] = {
    { "Person account retrieved.", "Compte de personne récupéré." },
    { "Invalid person account id.",
      "Identifiant de compte de personne invalide." },
    { "The id must be a uuid.", "L'identifiant doit être un uuid." },
    { "Person account not found.", "Compte de personne introuvable." },
    { "No person account with this id exists.",
      "Aucun compte de personne ne porte cet identifiant." },
    { NULL, NULL }
};


ngx_platform_family_t  ngx_platform_persons_family = {
    ngx_string("persons"),
    NGX_PLATFORM_ENVELOPE_A,
    NGX_PLATFORM_BACKEND_PG,
    ngx_platform_persons_endpoints,
    ngx_platform_persons_texts,
    0
};
