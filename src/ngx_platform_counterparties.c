
/*
 * ngx_platform: counterparties (spec 2.2, 2.3 and 4.1, decisions.md
 * sections 3 and 5 "Counterparty bank account", "Counterparty group").
 * Envelope A. Both operations act for a merchant: the caller's tenant and
 * merchant come from its bearer token (tenantId, merchantId), and the core
 * refuses a token without merchantId (403) before the body is read. Rows
 * of another tenant or merchant are 404 or 400 like unknown ones.
 *
 * Each operation is one statement that takes the checked body as jsonb:
 * the validator (ngx_platform_schema.c) has checked every field the
 * statement reads, so its casts cannot fail.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_platform.h"
#include "ngx_platform_op.h"


/*
 * PUT accounts: fields present in the body replace the stored ones,
 * absent fields keep theirs ("b ? 'field'"), null clears a string. The
 * account is found by id within the tenant, through its counterparty of
 * the caller's merchant. One UPDATE: it takes the row lock, and a second
 * update of the same account waits for the first and then applies its
 * own fields to the row the first left, so a row never mixes two bodies
 * and no update is lost. The answer is the row as stored.
 */

#define NGX_PLATFORM_CP_SET(column, field, cast)                             \
    NGX_PLATFORM_SQL_SET("p.b", "a", column, field, cast)

static ngx_platform_sql_t  ngx_platform_counterparties_account = {
    { "platform_counterparties_account",

      "WITH p AS MATERIALIZED (SELECT $1::jsonb AS b)"
      " UPDATE counterparty_accounts a SET"
      NGX_PLATFORM_CP_SET("account", "account", "::int")
      NGX_PLATFORM_CP_SET("counterparty_type", "counterpartyType", "::int")
      NGX_PLATFORM_CP_SET("account_type", "accountType", "::int")
      NGX_PLATFORM_CP_SET("bank_code", "bankCode", "")
      NGX_PLATFORM_CP_SET("bank_name", "bankName", "")
      NGX_PLATFORM_CP_SET("account_number", "accountNumber", "")
      NGX_PLATFORM_CP_SET("account_name", "accountName", "")
      NGX_PLATFORM_CP_SET("iban", "iban", "")
      NGX_PLATFORM_CP_SET("swift_code", "swiftCode", "")
      NGX_PLATFORM_CP_SET("bank_address", "bankAddress", "")
      NGX_PLATFORM_CP_SET("routing_number", "routingNumber", "")
      " updated_at = now()"
      " FROM p, counterparties c"
      " WHERE a.id = (p.b->>'id')::uuid AND a.tenant_id = $2"
      " AND c.tenant_id = a.tenant_id AND c.id = a.counterparty_id"
      " AND c.merchant_id = $3"
      " RETURNING (SELECT row_to_json(x)::text FROM (SELECT a.id,"
      " a.account, a.counterparty_type AS \"counterpartyType\","
      " a.account_type AS \"accountType\", a.bank_code AS \"bankCode\","
      " a.bank_name AS \"bankName\","
      " a.account_number AS \"accountNumber\","
      " a.account_name AS \"accountName\", a.iban,"
      " a.swift_code AS \"swiftCode\", a.bank_address AS \"bankAddress\","
      " a.routing_number AS \"routingNumber\","
      " c.merchant_id AS \"merchantId\","
      " a.counterparty_id AS \"counterpartyId\") x)",

      3, 0, 0 },

    { NGX_PLATFORM_P_BODY, NGX_PLATFORM_P_TENANT, NGX_PLATFORM_P_MERCHANT },
    NGX_PLATFORM_ANSWER_DOCUMENT,

    "Counterparty bank account updated.",
    "Counterparty bank account not found.",
    "No bank account of the merchant's counterparties has this id.",
    NULL, NULL, 0, NULL, NULL,
    NULL, NULL, NULL
};


/*
 * POST groups, in one statement, so that a refusal or a failure leaves
 * neither group nor members. f: the first member (by position) that is
 * not a counterparty of the caller's merchant, looked up one by one
 * through the index; g: the group, inserted only when there is none; the
 * members of g. The answer's first column is the refusal, named as the
 * validator names fields (members[2] is the third); the foreign key from
 * the members to the merchant's counterparties is the durable guard, for
 * a counterparty deleted meanwhile (23503). A member repeated, in any
 * case, was refused by the validator (F_UNIQUE).
 */

static ngx_platform_sql_t  ngx_platform_counterparties_group = {
    { "platform_counterparties_group",

      "WITH p AS MATERIALIZED (SELECT $1::jsonb AS b),"
      " m AS MATERIALIZED (SELECT e.ord,"
      " e.v->>'counterpartyId' AS counterparty_id,"
      " e.v->>'counterpartyName' AS counterparty_name"
      " FROM p, jsonb_array_elements(CASE"
      " WHEN jsonb_typeof(p.b->'members') = 'array'"
      " THEN p.b->'members' ELSE '[]' END)"
      " WITH ORDINALITY AS e(v, ord)),"
      " f AS MATERIALIZED (SELECT 'members[' || (m.ord - 1)"
      " || '].counterpartyId ' || m.counterparty_id AS refusal"
      " FROM m WHERE (SELECT c.id FROM counterparties c"
      " WHERE c.tenant_id = $2 AND c.merchant_id = $3"
      " AND c.id = m.counterparty_id::uuid) IS NULL"
      " ORDER BY m.ord LIMIT 1),"
      " g AS (INSERT INTO counterparty_groups"
      " (tenant_id, merchant_id, name, description)"
      " SELECT $2, $3, btrim(p.b->>'name', E' \\t\\r\\n'),"
      " p.b->>'description'"
      " FROM p WHERE NOT EXISTS (SELECT 1 FROM f)"
      " RETURNING id, name, merchant_id),"
      " i AS (INSERT INTO counterparty_group_members"
      " (group_id, counterparty_id, tenant_id, merchant_id,"
      " counterparty_name, position)"
      " SELECT g.id, m.counterparty_id::uuid, $2, $3, m.counterparty_name,"
      " m.ord FROM g, m"
      " ON CONFLICT DO NOTHING)"
      " SELECT (SELECT refusal FROM f),"
      " (SELECT row_to_json(x)::text FROM (SELECT g.name,"
      " g.merchant_id AS \"merchantId\", g.id FROM g) x)",

      3, 0, 0 },

    { NGX_PLATFORM_P_BODY, NGX_PLATFORM_P_TENANT, NGX_PLATFORM_P_MERCHANT },
    NGX_PLATFORM_ANSWER_CHECKED,

    "Counterparty group created.",
    NULL, NULL,
    "Counterparty group already exists.",
    "The merchant already has a group of this name.",
    NGX_HTTP_BAD_REQUEST,
    "Invalid group member.",
    "A member is not a counterparty of the merchant.",
    "Invalid group member.",
    "%s is not a counterparty of the merchant.",
    NULL
};


/*
 * The first field set of spec 2.2 (decisions.md). The integers' meanings
 * are in docs/api.md; the strings may be null (cleared). Lengths in
 * characters.
 */

static ngx_platform_field_t  ngx_platform_counterparties_account_body[] = {
    { "id", NGX_PLATFORM_T_UUID, NGX_PLATFORM_F_REQUIRED,
      0, 0, NULL, NULL, NULL },
    { "account", NGX_PLATFORM_T_INTEGER,
      NGX_PLATFORM_F_MIN|NGX_PLATFORM_F_MAX,
      1, 2, NULL, NULL, NULL },
    { "counterpartyType", NGX_PLATFORM_T_INTEGER,
      NGX_PLATFORM_F_MIN|NGX_PLATFORM_F_MAX,
      1, 2, NULL, NULL, NULL },
    { "accountType", NGX_PLATFORM_T_INTEGER,
      NGX_PLATFORM_F_MIN|NGX_PLATFORM_F_MAX,
      1, 3, NULL, NULL, NULL },
    { "bankCode", NGX_PLATFORM_T_STRING,
      NGX_PLATFORM_F_NULLABLE|NGX_PLATFORM_F_MAX,
      0, 32, NULL, NULL, NULL },
    { "bankName", NGX_PLATFORM_T_STRING,
      NGX_PLATFORM_F_NULLABLE|NGX_PLATFORM_F_MAX,
      0, 200, NULL, NULL, NULL },
    { "accountNumber", NGX_PLATFORM_T_STRING,
      NGX_PLATFORM_F_NULLABLE|NGX_PLATFORM_F_MAX,
      0, 34, NULL, NULL, NULL },
    { "accountName", NGX_PLATFORM_T_STRING,
      NGX_PLATFORM_F_NULLABLE|NGX_PLATFORM_F_MAX,
      0, 200, NULL, NULL, NULL },
    { "iban", NGX_PLATFORM_T_IBAN, NGX_PLATFORM_F_NULLABLE,
      0, 0, NULL, NULL, NULL },
    { "swiftCode", NGX_PLATFORM_T_BIC, NGX_PLATFORM_F_NULLABLE,
      0, 0, NULL, NULL, NULL },
    { "bankAddress", NGX_PLATFORM_T_STRING,
      NGX_PLATFORM_F_NULLABLE|NGX_PLATFORM_F_MAX,
      0, 500, NULL, NULL, NULL },
    { "routingNumber", NGX_PLATFORM_T_STRING,
      NGX_PLATFORM_F_NULLABLE|NGX_PLATFORM_F_MAX,
      0, 32, NULL, NULL, NULL },
    { NULL, 0, 0, 0, 0, NULL, NULL, NULL }
};


static ngx_platform_field_t  ngx_platform_counterparties_member[] = {
    { "counterpartyId", NGX_PLATFORM_T_UUID,
      NGX_PLATFORM_F_REQUIRED|NGX_PLATFORM_F_UNIQUE,
      0, 0, NULL, NULL, NULL },
    { "counterpartyName", NGX_PLATFORM_T_STRING,
      NGX_PLATFORM_F_NULLABLE|NGX_PLATFORM_F_MAX,
      0, 200, NULL, NULL, NULL },
    { NULL, 0, 0, 0, 0, NULL, NULL, NULL }
};


/* members: null or absent is none; at most 1000 of them */

static ngx_platform_field_t  ngx_platform_counterparties_group_body[] = {
    { "name", NGX_PLATFORM_T_STRING,
      NGX_PLATFORM_F_REQUIRED|NGX_PLATFORM_F_TRIM
      |NGX_PLATFORM_F_MIN|NGX_PLATFORM_F_MAX,
      1, 200, NULL, NULL, NULL },
    { "members", NGX_PLATFORM_T_ARRAY,
      NGX_PLATFORM_F_NULLABLE|NGX_PLATFORM_F_MAX,
      0, 1000, NULL, ngx_platform_counterparties_member, NULL },
    { "description", NGX_PLATFORM_T_STRING,
      NGX_PLATFORM_F_NULLABLE|NGX_PLATFORM_F_MAX,
      0, 1000, NULL, NULL, NULL },
    { NULL, 0, 0, 0, 0, NULL, NULL, NULL }
};


/* the shapes of the data its endpoints answer (docs/api.md) */

static const char  ngx_platform_counterparties_schemas[] =
    "{"
    "\"CounterpartyAccount\":{\"type\":\"object\",\"properties\":{"
     "\"id\":{\"type\":\"string\",\"format\":\"uuid\"},"
     "\"account\":{\"type\":\"integer\"},"
     "\"counterpartyType\":{\"type\":\"integer\"},"
     "\"accountType\":{\"type\":\"integer\"},"
     "\"bankCode\":{\"type\":[\"string\",\"null\"]},"
     "\"bankName\":{\"type\":[\"string\",\"null\"]},"
     "\"accountNumber\":{\"type\":[\"string\",\"null\"]},"
     "\"accountName\":{\"type\":[\"string\",\"null\"]},"
     "\"iban\":{\"type\":[\"string\",\"null\"]},"
     "\"swiftCode\":{\"type\":[\"string\",\"null\"]},"
     "\"bankAddress\":{\"type\":[\"string\",\"null\"]},"
     "\"routingNumber\":{\"type\":[\"string\",\"null\"]},"
     "\"merchantId\":{\"type\":\"string\"},"
     "\"counterpartyId\":{\"type\":\"string\",\"format\":\"uuid\"}}},"
    "\"CounterpartyGroup\":{\"type\":\"object\",\"properties\":{"
     "\"name\":{\"type\":\"string\"},"
     "\"merchantId\":{\"type\":\"string\"},"
     "\"id\":{\"type\":\"string\",\"format\":\"uuid\"}}}"
    "}";


/*
 * platform_openapi: each endpoint's success data, and an example on the
 * demo data
 */

static ngx_platform_doc_t  ngx_platform_counterparties_account_doc = {
    "Update a counterparty bank account",
    ngx_platform_doc_schema("CounterpartyAccount"),
    "{\"body\":{\"id\":\"82000000-0000-4000-8000-000000000001\","
    "\"bankName\":\"GTBank\"}}",
    NULL, 0, NULL
};


static ngx_platform_doc_t  ngx_platform_counterparties_group_doc = {
    "Create a counterparty group",
    ngx_platform_doc_schema("CounterpartyGroup"),
    "{\"body\":{\"name\":\"Cocoa buyers\",\"members\":[{\"counterpartyId\":"
    "\"81000000-0000-4000-8000-000000000004\"}]}}",
    NULL, 0, NULL
};


static ngx_platform_endpoint_t  ngx_platform_counterparties_endpoints[] = {

    { NGX_HTTP_PUT, "/api/v{version}/Counterparties/accounts",
      NGX_PLATFORM_AUTH_BEARER,
      NGX_PLATFORM_IN_TENANT|NGX_PLATFORM_IN_MERCHANT,
      NULL, ngx_platform_counterparties_account_body,
      NULL, NULL,
      &ngx_platform_counterparties_account, NULL,
      &ngx_platform_counterparties_account_doc },

    { NGX_HTTP_POST, "/api/v{version}/Counterparties/groups",
      NGX_PLATFORM_AUTH_BEARER,
      NGX_PLATFORM_IN_TENANT|NGX_PLATFORM_IN_MERCHANT,
      NULL, ngx_platform_counterparties_group_body,
      NULL, NULL,
      &ngx_platform_counterparties_group, NULL,
      &ngx_platform_counterparties_group_doc },

    { 0, NULL, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL }
};


static ngx_platform_text_t  ngx_platform_counterparties_texts[] = {
    { "Counterparty bank account updated.",
      "Compte bancaire de la contrepartie mis à jour." },
    { "Counterparty bank account not found.",
      "Compte bancaire de contrepartie introuvable." },
    { "No bank account of the merchant's counterparties has this id.",
      "Aucun compte bancaire des contreparties du marchand ne porte cet "
      "identifiant." },
    { "Counterparty group created.", "Groupe de contreparties créé." },
    { "Counterparty group already exists.",
      "Le groupe de contreparties existe déjà." },
    { "The merchant already has a group of this name.",
      "Le marchand a déjà un groupe de ce nom." },
    { "Invalid group member.", "Membre de groupe invalide." },
    { "A member is not a counterparty of the merchant.",
      "Un membre n'est pas une contrepartie du marchand." },
    { "%s is not a counterparty of the merchant.",
      "%s n'est pas une contrepartie du marchand." },
    { NULL, NULL }
};


ngx_platform_family_t  ngx_platform_counterparties_family = {
    ngx_string("counterparties"),
    NGX_PLATFORM_ENVELOPE_A,
    NGX_PLATFORM_BACKEND_PG,
    ngx_platform_counterparties_endpoints,
    ngx_platform_counterparties_texts,
    0,
    ngx_platform_counterparties_schemas,
    NULL
};
