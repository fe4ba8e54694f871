
/*
 * ngx_platform: person accounts and person documents (spec 2.5, 2.6 and
 * 4.4, decisions.md sections 3 "Person documents", "Person accounts" and
 * 5). Envelope A. The caller's tenant comes from its credentials (by
 * default the bearer token's tenantId), and only that tenant's accounts
 * and documents are visible: another tenant's is 404.
 *
 * A document's content arrives as base64 in a JSON body of up to some
 * megabytes. The base64 is a raw field (NGX_PLATFORM_F_RAW): Jansson
 * never holds it, the core hands it over un-escaped in the body's own
 * buffer. Decoding it, in place, and its SHA-256 run in the thread pool
 * (ngx_platform_offload()); the decoded bytes then go to PostgreSQL as a
 * binary parameter, which the transport borrows instead of copying. An
 * upload holds the body's buffer and libpq's copy of the document.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <openssl/evp.h>

#include "ngx_platform.h"
#include "ngx_platform_op.h"


#define NGX_PLATFORM_SHA256_LEN          32

/* what is wrong with a document's base64, found in the thread */
#define NGX_PLATFORM_DOC_OK              NGX_PLATFORM_BASE64_OK
#define NGX_PLATFORM_DOC_EMPTY           NGX_PLATFORM_BASE64_EMPTY
#define NGX_PLATFORM_DOC_CHARACTER       NGX_PLATFORM_BASE64_CHARACTER
#define NGX_PLATFORM_DOC_LENGTH          NGX_PLATFORM_BASE64_LENGTH
#define NGX_PLATFORM_DOC_PAD             NGX_PLATFORM_BASE64_PAD
#define NGX_PLATFORM_DOC_PAD_BITS        NGX_PLATFORM_BASE64_BITS
#define NGX_PLATFORM_DOC_TOO_LARGE       100 /* decoded over max */
#define NGX_PLATFORM_DOC_DIGEST          101 /* OpenSSL failed */

/*
 * refusals of an update that its documentation tells too: answered,
 * translated and documented from here ("%s" where a number goes)
 */
#define NGX_PLATFORM_PERSONS_FILE_NAME_CHARACTERS                            \
    "fileName must not contain '/', '\\', control characters or "             \
    "bidirectional formatting characters."
#define NGX_PLATFORM_PERSONS_BASE64_CHARACTER(n)                             \
    "base64 has an invalid character at position " n "."
#define NGX_PLATFORM_PERSONS_TOO_LARGE   "Document too large."
#define NGX_PLATFORM_PERSONS_TOO_LARGE_DETAIL(n)                             \
    "The document must be at most " n " bytes once decoded."


/*
 * An update in progress: what the thread reads and writes (the
 * statement's parameters are the request's arguments, ctx->args). The
 * thread touches only src, len, max, cap (read) and buf, size, digest,
 * problem, position (written); all of it lives in the request pool,
 * which outlives the work. The document is decoded over its base64
 * (buf is src): each 4 characters read make 3 bytes behind them.
 */

typedef struct {
    u_char                    *src;        /* the base64 text, or NULL */
    size_t                     len;
    size_t                     max;        /* platform_document_max_size */

    u_char                    *buf;        /* src */
    size_t                     cap;        /* min(len / 4 * 3, max) */
    size_t                     size;       /* decoded, also past max */
    u_char                     digest[NGX_PLATFORM_SHA256_LEN];
    ngx_uint_t                 problem;    /* NGX_PLATFORM_DOC_* */
    size_t                     position;   /* characters, from 1 */

    unsigned                   stored:1;   /* content to store */
} ngx_platform_document_t;


static ngx_int_t ngx_platform_persons_document_update(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);
static ngx_int_t ngx_platform_persons_check_file_name(ngx_http_request_t *r,
    json_t *value);
static void ngx_platform_persons_decode(void *data);
static void ngx_platform_persons_decode_base64(ngx_platform_document_t *doc);
static ngx_int_t ngx_platform_persons_document_store(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);
static ngx_int_t ngx_platform_persons_refuse(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx, ngx_uint_t status, const char *message,
    const char *format, size_t n);


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

      2, 0, 0 },

    { NGX_PLATFORM_P_ARG(0), NGX_PLATFORM_P_TENANT },
    NGX_PLATFORM_ANSWER_DOCUMENT,

    "Person account retrieved.",
    "Person account not found.",
    "No person account with this id exists.",
    NULL, NULL, 0, NULL, NULL,
    NULL, NULL, NULL
};


/*
 * One statement, one round trip: the update and the person document of
 * spec 2.5 built from the updated row. A NULL parameter keeps the stored
 * value. New content (a digest other than the stored one) resets
 * approved; the same content again changes neither approved nor the
 * stored bytes (the row keeps its TOAST value).
 *
 * $1 documentId, $2 tenant, $3 personId, $4 type, $5 fileName,
 * $6 content (binary), $7 its SHA-256 (binary), $8 its size.
 */

static ngx_platform_sql_t  ngx_platform_persons_document_update_sql = {
    { "platform_persons_document_update",

      "WITH d AS ("
      "UPDATE person_documents SET"
      " type = coalesce($4::integer, type),"
      " file_name = coalesce($5::text, file_name),"
      " approved = approved"
      " AND ($7::bytea IS NULL OR $7::bytea = content_sha256),"
      " content = CASE WHEN $6::bytea IS NULL OR $7::bytea = content_sha256"
      " THEN content ELSE $6::bytea END,"
      " content_sha256 = coalesce($7::bytea, content_sha256),"
      " content_size = coalesce($8::bigint, content_size),"
      " updated_at = now()"
      " WHERE id = $1::uuid AND tenant_id = $2 AND person_id = $3::uuid"
      " RETURNING id, person_id, type, file_name, document_number, approved)"
      " SELECT row_to_json(a)::text FROM ("
      "SELECT id, person_id AS \"personId\", type,"
      " 'persons/' || person_id || '/documents/' || id || '/' || file_name"
      " AS path,"
      " file_name AS \"fileName\", document_number AS \"documentNumber\","
      " approved"
      " FROM d) a",

      8, NGX_PLATFORM_PG_BORROWED(5) | (1 << 6), 0 },

    { NGX_PLATFORM_P_ARG(0), NGX_PLATFORM_P_TENANT, NGX_PLATFORM_P_ARG(1),
      NGX_PLATFORM_P_ARG(2), NGX_PLATFORM_P_ARG(3), NGX_PLATFORM_P_ARG(4),
      NGX_PLATFORM_P_ARG(5), NGX_PLATFORM_P_ARG(6) },
    NGX_PLATFORM_ANSWER_DOCUMENT,

    "Person document updated.",
    "Person document not found.",
    "No document with this documentId belongs to this personId.",
    NULL, NULL, 0, NULL, NULL,
    NULL, NULL, NULL
};


/* data: the deleted id, a JSON string */

static ngx_platform_sql_t  ngx_platform_persons_document_delete = {
    { "platform_persons_document_delete",

      "DELETE FROM person_documents"
      " WHERE id = $1::uuid AND tenant_id = $2"
      " RETURNING to_json(id)::text",

      2, 0, 0 },

    { NGX_PLATFORM_P_ARG(0), NGX_PLATFORM_P_TENANT },
    NGX_PLATFORM_ANSWER_DOCUMENT,

    "Person document deleted.",
    "Person document not found.",
    "No person document with this id exists.",
    NULL, NULL, 0, NULL, NULL,
    NULL, NULL, NULL
};


/*
 * The first field set of spec 2.5 (decisions.md section 3). type: 1
 * national identity card, 2 passport, 3 driver's licence, 4 proof of
 * address, 5 other (docs/api.md).
 */

static ngx_platform_field_t  ngx_platform_persons_document_body[] = {
    { "documentId", NGX_PLATFORM_T_UUID, NGX_PLATFORM_F_REQUIRED,
      0, 0, NULL, NULL, NULL },
    { "personId", NGX_PLATFORM_T_UUID, NGX_PLATFORM_F_REQUIRED,
      0, 0, NULL, NULL, NULL },
    { "type", NGX_PLATFORM_T_INTEGER, NGX_PLATFORM_F_MIN|NGX_PLATFORM_F_MAX,
      1, 5, NULL, NULL, NULL },
    { "base64", NGX_PLATFORM_T_STRING, NGX_PLATFORM_F_RAW,
      0, 0, NULL, NULL, NULL },
    { "fileName", NGX_PLATFORM_T_STRING,
      NGX_PLATFORM_F_MIN|NGX_PLATFORM_F_MAX,
      1, 255, NULL, NULL, NULL },
    { NULL, 0, 0, 0, 0, NULL, NULL, NULL }
};


/* the shapes of the data its endpoints answer (docs/api.md) */

static const char  ngx_platform_persons_schemas[] =
    "{"
    "\"PersonAccount\":{\"type\":\"object\",\"properties\":{"
     "\"id\":{\"type\":\"string\",\"format\":\"uuid\"},"
     "\"personId\":{\"type\":\"string\",\"format\":\"uuid\"},"
     "\"accountId\":{\"type\":\"string\"},"
     "\"accountBIC\":{\"type\":\"string\"},"
     "\"accountType\":{\"type\":\"string\"},"
     "\"accountName\":{\"type\":\"string\"},"
     "\"currency\":{\"type\":\"string\"},"
     "\"availableBalance\":{\"type\":\"number\"},"
     "\"accountLimit\":{\"type\":\"number\"},"
     "\"statusDescription\":{\"type\":\"string\"},"
     "\"created\":{\"type\":\"string\",\"format\":\"date-time\"},"
     "\"nubanOrIban\":{\"type\":\"string\"},"
     "\"purpose\":{\"type\":\"string\"},"
     "\"comment\":{\"type\":\"string\"},"
     "\"status\":{\"type\":\"string\"},"
     "\"productId\":{\"type\":\"string\"},"
     "\"clientId\":{\"type\":\"string\"}}},"
    "\"PersonDocument\":{\"type\":\"object\",\"properties\":{"
     "\"id\":{\"type\":\"string\",\"format\":\"uuid\"},"
     "\"personId\":{\"type\":\"string\",\"format\":\"uuid\"},"
     "\"type\":{\"type\":\"integer\"},"
     "\"path\":{\"type\":\"string\"},"
     "\"fileName\":{\"type\":\"string\"},"
     "\"documentNumber\":{\"type\":\"string\"},"
     "\"approved\":{\"type\":\"boolean\"}}}"
    "}";


/*
 * platform_openapi: each endpoint's success data, an example on the demo
 * data, and what the update's code refuses ("<n>": a number)
 */

static ngx_platform_doc_t  ngx_platform_persons_account_doc = {
    "Get a person account",
    ngx_platform_doc_schema("PersonAccount"),
    "{\"path\":{\"id\":\"b1000000-0000-4000-8000-000000000001\"}}",
    NULL, 0, NULL
};


static ngx_platform_doc_answer_t
    ngx_platform_persons_document_update_answers[] =
{
    { NGX_HTTP_BAD_REQUEST, "Bad request.",
      NGX_PLATFORM_PERSONS_FILE_NAME_CHARACTERS },
    { NGX_HTTP_BAD_REQUEST, "Bad request.",
      NGX_PLATFORM_PERSONS_BASE64_CHARACTER("<n>") },
    { NGX_HTTP_REQUEST_ENTITY_TOO_LARGE, NGX_PLATFORM_PERSONS_TOO_LARGE,
      NGX_PLATFORM_PERSONS_TOO_LARGE_DETAIL("<n>") },
    { 0, NULL, NULL }
};


static ngx_platform_doc_t  ngx_platform_persons_document_update_doc = {
    "Update a person document",
    ngx_platform_doc_schema("PersonDocument"),
    "{\"body\":{\"documentId\":\"71000000-0000-4000-8000-000000000002\","
    "\"personId\":\"c1000000-0000-4000-8000-000000000001\","
    "\"fileName\":\"bill.txt\",\"base64\":\"SGVsbG8sIHdvcmxkIQ==\"}}",
    ngx_platform_persons_document_update_answers, 0, NULL
};


static ngx_platform_doc_t  ngx_platform_persons_document_delete_doc = {
    "Delete a person document",
    "{\"type\":\"string\",\"format\":\"uuid\"}",
    "{\"path\":{\"id\":\"71000000-0000-4000-8000-000000000003\"}}",
    NULL, 0, NULL
};


static ngx_platform_endpoint_t  ngx_platform_persons_endpoints[] = {

    { NGX_HTTP_GET, "/api/v{version}/PersonAccounts/{uuid}/get",
      NGX_PLATFORM_AUTH_BEARER, NGX_PLATFORM_IN_TENANT,
      NULL, NULL,
      "Invalid person account id.", "The id must be a uuid.",
      &ngx_platform_persons_account, NULL,
      &ngx_platform_persons_account_doc },

    { NGX_HTTP_PUT, "/api/v{version}/PersonDocuments/update",
      NGX_PLATFORM_AUTH_BEARER, NGX_PLATFORM_IN_TENANT,
      NULL, ngx_platform_persons_document_body,
      NULL, NULL,
      &ngx_platform_persons_document_update_sql,
      ngx_platform_persons_document_update,
      &ngx_platform_persons_document_update_doc },

    { NGX_HTTP_DELETE, "/api/v{version}/PersonDocuments/{uuid}/delete",
      NGX_PLATFORM_AUTH_BEARER, NGX_PLATFORM_IN_TENANT,
      NULL, NULL,
      "Invalid person document id.", "The id must be a uuid.",
      &ngx_platform_persons_document_delete, NULL,
      &ngx_platform_persons_document_delete_doc },

    { 0, NULL, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL }
};


static ngx_platform_text_t  ngx_platform_persons_texts[] = {
    { "Person account retrieved.", "Compte de personne récupéré." },
    { "Invalid person account id.",
      "Identifiant de compte de personne invalide." },
    { "The id must be a uuid.", "L'identifiant doit être un uuid." },
    { "Person account not found.", "Compte de personne introuvable." },
    { "No person account with this id exists.",
      "Aucun compte de personne ne porte cet identifiant." },

    { "Person document updated.", "Document de personne mis à jour." },
    { "Person document deleted.", "Document de personne supprimé." },
    { "Invalid person document id.",
      "Identifiant de document de personne invalide." },
    { "Person document not found.", "Document de personne introuvable." },
    { "No person document with this id exists.",
      "Aucun document de personne ne porte cet identifiant." },
    { "No document with this documentId belongs to this personId.",
      "Aucun document portant ce documentId n'appartient à ce personId." },
    { NGX_PLATFORM_PERSONS_FILE_NAME_CHARACTERS,
      "fileName ne doit contenir ni '/', ni '\\', ni caractère de contrôle, "
      "ni caractère de mise en forme bidirectionnelle." },
    { "fileName must not begin with a dot.",
      "fileName ne doit pas commencer par un point." },
    { "base64 is empty.", "base64 est vide." },
    { NGX_PLATFORM_PERSONS_BASE64_CHARACTER("%s"),
      "base64 contient un caractère invalide à la position %s." },
    { "base64 has bad padding: its length without line breaks is not a "
      "multiple of 4.",
      "base64 a un remplissage incorrect : sa longueur sans les sauts de "
      "ligne n'est pas un multiple de 4." },
    { "base64 has bad padding: '=' at position %s.",
      "base64 a un remplissage incorrect : '=' à la position %s." },
    { "base64 has bad padding: the unused bits of its last character are "
      "not zero.",
      "base64 a un remplissage incorrect : les bits inutilisés de son "
      "dernier caractère ne sont pas nuls." },
    { NGX_PLATFORM_PERSONS_TOO_LARGE, "Document trop volumineux." },
    { NGX_PLATFORM_PERSONS_TOO_LARGE_DETAIL("%s"),
      "Le document doit faire au plus %s octets une fois décodé." },
    { NULL, NULL }
};


ngx_platform_family_t  ngx_platform_persons_family = {
    ngx_string("persons"),
    NGX_PLATFORM_ENVELOPE_A,
    NGX_PLATFORM_BACKEND_PG,
    ngx_platform_persons_endpoints,
    ngx_platform_persons_texts,
    0,
    ngx_platform_persons_schemas,
    NULL
};


/*
 * PUT PersonDocuments/update: the body is checked against the fields
 * already. The content, if any, is decoded in the thread pool; the
 * statement runs afterwards, in ngx_platform_persons_document_store().
 */

static ngx_int_t
ngx_platform_persons_document_update(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx)
{
    u_char                   *p;
    json_t                   *value;
    ngx_int_t                 rc;
    ngx_platform_loc_conf_t  *plcf;
    ngx_platform_document_t  *doc;

    doc = ngx_pcalloc(r->pool, sizeof(ngx_platform_document_t));
    if (doc == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ctx->data = doc;

    /*
     * The declared statement's arguments: the ids, then type, fileName,
     * content, digest and size (absent: NULL data, SQL NULL, the stored
     * value is kept)
     */

    ctx->nargs = 7;

    value = json_object_get(ctx->json, "documentId");
    ctx->args[0].data = (u_char *) json_string_value(value);
    ctx->args[0].len = json_string_length(value);

    value = json_object_get(ctx->json, "personId");
    ctx->args[1].data = (u_char *) json_string_value(value);
    ctx->args[1].len = json_string_length(value);

    value = json_object_get(ctx->json, "type");

    if (value) {
        p = ngx_pnalloc(r->pool, NGX_INT64_LEN);
        if (p == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        ctx->args[2].data = p;
        ctx->args[2].len = ngx_sprintf(p, "%L",
                                         (int64_t) json_integer_value(value))
                             - p;
    }

    value = json_object_get(ctx->json, "fileName");

    if (value) {
        rc = ngx_platform_persons_check_file_name(r, value);
        if (rc != NGX_OK) {
            return rc;
        }

        ctx->args[3].data = (u_char *) json_string_value(value);
        ctx->args[3].len = json_string_length(value);
    }

    /* base64: the raw field, un-escaped in the body's buffer */

    if (ctx->raw.data == NULL) {
        return ngx_platform_persons_document_store(r, ctx);
    }

    plcf = ngx_http_get_module_loc_conf(r, ngx_platform_module);

    doc->src = ctx->raw.data;
    doc->len = ctx->raw.len;
    doc->max = plcf->document_max_size;

    /*
     * Four characters make at most three bytes; past max the thread only
     * counts, so nothing is written past max whatever the body's size.
     */

    doc->cap = doc->len / 4 * 3;

    if (doc->cap > doc->max) {
        doc->cap = doc->max;
    }

    doc->buf = doc->src;

    return ngx_platform_offload(r, ngx_platform_persons_decode, doc,
                                ngx_platform_persons_document_store);
}


/*
 * 1..255 characters (the schema), no leading dot, and nothing that
 * changes what a path or a display of the name means: '/', '\', control
 * characters (C0, DEL, C1), and the bidirectional marks, embeddings,
 * overrides and isolates that make "exe.pdf" of "fdp.exe"
 */

static ngx_int_t
ngx_platform_persons_check_file_name(ngx_http_request_t *r, json_t *value)
{
    u_char    *p, *end;
    uint32_t   c;

    p = (u_char *) json_string_value(value);
    end = p + json_string_length(value);

    if (p < end && *p == '.') {
        return ngx_platform_fail(r, NGX_HTTP_BAD_REQUEST, "Bad request.",
                                 "fileName must not begin with a dot.");
    }

    while (p < end) {

        /* Jansson's strings are valid UTF-8 */
        c = (*p < 0x80) ? *p++ : ngx_utf8_decode(&p, end - p);

        if (c == '/' || c == '\\' || c < 0x20 || (c >= 0x7f && c <= 0x9f)
            || c == 0x061c || c == 0x200e || c == 0x200f
            || (c >= 0x202a && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069))
        {
            return ngx_platform_fail(r, NGX_HTTP_BAD_REQUEST, "Bad request.",
                                     NGX_PLATFORM_PERSONS_FILE_NAME_CHARACTERS);
        }
    }

    return NGX_OK;
}


/*
 * In a thread: no request, pool or log here. Decodes and checks the
 * base64, then digests what it decoded.
 */

static void
ngx_platform_persons_decode(void *data)
{
    ngx_platform_document_t *doc = data;

    unsigned int  n;

    ngx_platform_persons_decode_base64(doc);

    if (doc->problem != NGX_PLATFORM_DOC_OK) {
        return;
    }

    n = 0;

    if (EVP_Digest(doc->buf, doc->size, doc->digest, &n, EVP_sha256(), NULL)
        != 1 || n != NGX_PLATFORM_SHA256_LEN)
    {
        doc->problem = NGX_PLATFORM_DOC_DIGEST;
    }
}


/*
 * RFC 4648 section 4 base64: the standard alphabet, padding required,
 * CR and LF skipped anywhere (MIME line breaks). Bytes past max are
 * counted, not written, so that a body over the limit is told apart from
 * an invalid one without a larger buffer.
 */

static void
ngx_platform_persons_decode_base64(ngx_platform_document_t *doc)
{
    ngx_platform_base64_t  b;

    b.src = doc->src;
    b.len = doc->len;
    b.buf = doc->buf;
    b.cap = doc->cap;
    b.flags = NGX_PLATFORM_BASE64_PADDED|NGX_PLATFORM_BASE64_BREAKS;

    doc->problem = ngx_platform_base64_decode(&b);
    doc->position = b.position;
    doc->size = b.size;

    if (doc->problem == NGX_PLATFORM_DOC_OK && doc->size > doc->max) {
        doc->problem = NGX_PLATFORM_DOC_TOO_LARGE;
    }
}


/*
 * In the worker, after the decoding if there was content: the refusal
 * the thread found, or the statement.
 */

static ngx_int_t
ngx_platform_persons_document_store(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx)
{
    u_char                   *p;
    ngx_platform_document_t  *doc;

    doc = ctx->data;

    if (doc->src) {
        /* the base64 text is decoded: it is gone */
        doc->src = NULL;
        doc->stored = 1;
    }

    switch (doc->problem) {

    case NGX_PLATFORM_DOC_OK:
        break;

    case NGX_PLATFORM_DOC_EMPTY:
        return ngx_platform_fail(r, NGX_HTTP_BAD_REQUEST, "Bad request.",
                                 "base64 is empty.");

    case NGX_PLATFORM_DOC_CHARACTER:
        return ngx_platform_persons_refuse(r, ctx, NGX_HTTP_BAD_REQUEST,
                   "Bad request.", NGX_PLATFORM_PERSONS_BASE64_CHARACTER("%s"),
                   doc->position);

    case NGX_PLATFORM_DOC_LENGTH:
        return ngx_platform_fail(r, NGX_HTTP_BAD_REQUEST, "Bad request.",
                                 "base64 has bad padding: its length without "
                                 "line breaks is not a multiple of 4.");

    case NGX_PLATFORM_DOC_PAD:
        return ngx_platform_persons_refuse(r, ctx, NGX_HTTP_BAD_REQUEST,
                   "Bad request.",
                   "base64 has bad padding: '=' at position %s.",
                   doc->position);

    case NGX_PLATFORM_DOC_PAD_BITS:
        return ngx_platform_fail(r, NGX_HTTP_BAD_REQUEST, "Bad request.",
                                 "base64 has bad padding: the unused bits of "
                                 "its last character are not zero.");

    case NGX_PLATFORM_DOC_TOO_LARGE:
        return ngx_platform_persons_refuse(r, ctx,
                   NGX_HTTP_REQUEST_ENTITY_TOO_LARGE,
                   NGX_PLATFORM_PERSONS_TOO_LARGE,
                   NGX_PLATFORM_PERSONS_TOO_LARGE_DETAIL("%s"), doc->max);

    default: /* NGX_PLATFORM_DOC_DIGEST */
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "platform: SHA-256 of a document failed");
        return ngx_platform_backend_fail(r, NGX_ERROR);
    }

    if (doc->stored) {
        ctx->args[4].data = doc->buf;
        ctx->args[4].len = doc->size;

        ctx->args[5].data = doc->digest;
        ctx->args[5].len = NGX_PLATFORM_SHA256_LEN;

        p = ngx_pnalloc(r->pool, NGX_SIZE_T_LEN);
        if (p == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        ctx->args[6].data = p;
        ctx->args[6].len = ngx_sprintf(p, "%uz", doc->size) - p;
    }

    return ngx_platform_run_sql(r, ctx);
}


/* an error whose detail holds a number, in the request's language */

static ngx_int_t
ngx_platform_persons_refuse(ngx_http_request_t *r, ngx_platform_ctx_t *ctx,
    ngx_uint_t status, const char *message, const char *format, size_t n)
{
    char       *detail;
    u_char      number[NGX_SIZE_T_LEN];
    ngx_str_t   arg;

    arg.data = number;
    arg.len = ngx_sprintf(number, "%uz", n) - number;

    detail = ngx_platform_text_format(r, ngx_platform_text(ctx, format),
                                      &arg, 1);
    if (detail == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_platform_fail(r, status, message, detail);
}
