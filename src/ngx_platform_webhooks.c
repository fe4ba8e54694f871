
/*
 * ngx_platform: webhook intakes (spec 4.11 and 6, decisions.md section 3
 * "Webhooks"). Envelope B.
 *
 *   POST /api/v1/webhooks/public/{source}/events    apiKey
 *   POST /api/webhooks/public/{source}/events       none
 *   POST /webhooks/{paymentmethod}                  apiKey
 *
 * The sources and payment methods a location accepts are configured with
 * platform_webhook_source and platform_webhook_payment_method, each with
 * optional signing secrets; a name with secrets requires a Standard
 * Webhooks signature on every route that serves it. nginx -t refuses a
 * name that a route without a credential and a route with one would both
 * serve: its events could be posted without the key.
 *
 * Each event is stored exactly once. Its key (docs/api.md; for a name
 * with secrets, the signed webhook-id alone) is claimed in Redis with
 * SET NX as a pending value unique to the request; a key
 * already "stored" answers 200 duplicate at once. Everything else goes to
 * PostgreSQL, whose unique index decides: INSERT ... ON CONFLICT DO
 * NOTHING either stores the event (200, then the Redis key becomes
 * "stored" for 24 h) or finds it stored already (200 duplicate). A
 * duplicate of a call still in flight (a pending key) goes to PostgreSQL
 * too, where its insert waits for the first one's: it never answers 200
 * for an event that is then not stored, and a pending key left by a
 * crashed worker blocks nothing. Redis down or failing: straight to
 * PostgreSQL. PostgreSQL failing: 503, and the pending key is deleted
 * when it is still this request's, so the sender's retry starts afresh.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <openssl/evp.h>
#include <openssl/crypto.h>

#include "ngx_platform.h"
#include "ngx_platform_op.h"


#define NGX_PLATFORM_WEBHOOK_NAME_MAX      64
#define NGX_PLATFORM_WEBHOOK_SECRET_MIN    16

/* event keys longer than this, or not printable ASCII, are hashed */
#define NGX_PLATFORM_WEBHOOK_KEY_MAX       200

/* Standard Webhooks: a signature's timestamp within 300 s of now */
#define NGX_PLATFORM_WEBHOOK_TOLERANCE     300
#define NGX_PLATFORM_WEBHOOK_ID_MAX        256
#define NGX_PLATFORM_WEBHOOK_SIGNATURES    16

#define NGX_PLATFORM_WEBHOOK_MAC_LEN       32     /* HMAC-SHA256 */

/* how long a pending claim and a stored mark live in Redis, seconds */
#define NGX_PLATFORM_WEBHOOK_PENDING_TTL   "60"
#define NGX_PLATFORM_WEBHOOK_STORED_TTL    "86400"

/* signatures over bodies this large are computed in the thread pool */
#define NGX_PLATFORM_WEBHOOK_THREAD_SIZE   (64 * 1024)


/* a source or payment method the operator accepts */
typedef struct {
    ngx_str_t                  name;
    ngx_array_t               *secrets;    /* of ngx_str_t; NULL: none */

    /* where it is declared, for nginx -t */
    ngx_str_t                  file;
    ngx_uint_t                 line;
} ngx_platform_webhook_t;


/* a location that serves the webhooks family, as merged */
typedef struct {
    ngx_http_core_loc_conf_t  *clcf;
    ngx_platform_loc_conf_t   *plcf;
} ngx_platform_webhook_location_t;


/* a name that a route serves in a location, with or without a key */
typedef struct {
    ngx_platform_webhook_t    *hook;
    char                      *kind;       /* "source", "payment method" */
    ngx_http_core_loc_conf_t  *clcf;
    ngx_platform_endpoint_t   *endpoint;
    ngx_uint_t                 keyed;      /* an API key or a token */
} ngx_platform_webhook_use_t;


/* one request's event, from its checks to its storage */
typedef struct {
    ngx_platform_webhook_t    *hook;
    ngx_str_t                  kind;       /* "source", "payment_method" */
    ngx_str_t                  key;        /* the event key */
    ngx_str_t                  redis_key;
    ngx_str_t                  token;      /* this request's pending value */
    ngx_str_t                  headers;    /* JSON object text */
    ngx_str_t                  tenant;     /* from a credential, or empty */

    /* the signature's parts and the work done over the body */
    ngx_str_t                  msg_id;
    ngx_str_t                  timestamp;
    ngx_str_t                  signatures[NGX_PLATFORM_WEBHOOK_SIGNATURES];
    ngx_uint_t                 nsignatures;
    u_char                    *body;
    size_t                     body_len;
    u_char                    *macs;       /* one per secret */
    u_char                     digest[NGX_PLATFORM_WEBHOOK_MAC_LEN];

    /* the failure answered once the Redis key is released */
    ngx_uint_t                 status;
    const char                *message;
    const char                *detail;

    unsigned                   need_digest:1;
    unsigned                   work_failed:1;
    unsigned                   redis:1;    /* Redis answered the claim */
    unsigned                   owned:1;    /* the key holds our token */
} ngx_platform_webhook_ctx_t;


static ngx_int_t ngx_platform_webhooks_source(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);
static ngx_int_t ngx_platform_webhooks_payment(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);
static ngx_int_t ngx_platform_webhooks_intake(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx, ngx_array_t *hooks, char *kind);
static ngx_int_t ngx_platform_webhooks_signature(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx, ngx_platform_webhook_ctx_t *w);
static ngx_int_t ngx_platform_webhooks_refuse(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx, const char *detail);
static ngx_int_t ngx_platform_webhooks_event_key(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx, ngx_platform_webhook_ctx_t *w);
static ngx_int_t ngx_platform_webhooks_set_key(ngx_http_request_t *r,
    ngx_platform_webhook_ctx_t *w, u_char *data, size_t len);
static void ngx_platform_webhooks_work(void *data);
static ngx_int_t ngx_platform_webhooks_hmac(ngx_str_t *secret,
    ngx_platform_webhook_ctx_t *w, u_char *mac);
static ngx_int_t ngx_platform_webhooks_verified(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);
static ngx_int_t ngx_platform_webhooks_headers(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx, ngx_str_t *out);
static json_t *ngx_platform_webhooks_json_string(ngx_pool_t *pool,
    u_char *data, size_t len);
static ngx_int_t ngx_platform_webhooks_claim(ngx_http_request_t *r,
    ngx_platform_webhook_ctx_t *w);
static void ngx_platform_webhooks_claim_done(void *data, redisReply *reply,
    ngx_int_t rc);
static ngx_int_t ngx_platform_webhooks_insert(ngx_http_request_t *r,
    ngx_platform_webhook_ctx_t *w);
static void ngx_platform_webhooks_insert_done(void *data,
    ngx_platform_pg_op_t *op, PGresult *res, ngx_int_t rc);
static ngx_int_t ngx_platform_webhooks_fail(ngx_http_request_t *r,
    ngx_platform_webhook_ctx_t *w, ngx_int_t status);
static void ngx_platform_webhooks_release_done(void *data,
    redisReply *reply, ngx_int_t rc);
static void ngx_platform_webhooks_mark_stored(ngx_http_request_t *r,
    ngx_platform_webhook_ctx_t *w);
static void ngx_platform_webhooks_ignore(void *data, redisReply *reply,
    ngx_int_t rc);
static void ngx_platform_webhooks_redis_failed(ngx_http_request_t *r,
    const char *why);
static ngx_int_t ngx_platform_webhooks_duplicate(ngx_http_request_t *r);
static ngx_int_t ngx_platform_webhooks_base64(ngx_str_t *src, ngx_str_t *dst);
static ngx_uint_t ngx_platform_webhooks_serves(ngx_http_core_loc_conf_t *clcf,
    ngx_platform_endpoint_t *ep);
static ngx_int_t ngx_platform_webhooks_check_route(ngx_conf_t *cf,
    ngx_array_t *uses, ngx_platform_webhook_location_t *loc,
    ngx_platform_endpoint_t *ep);
static void ngx_platform_webhooks_log_mixed(ngx_conf_t *cf,
    ngx_platform_webhook_use_t *a, ngx_platform_webhook_use_t *b);


/*
 * The claim: "stored" answers a duplicate; another request's pending
 * value goes on to PostgreSQL; no key: this request's pending value,
 * with a short expiry (a worker that dies leaves nothing for long).
 *
 * KEYS[1] the event's key, ARGV[1] the pending value, ARGV[2] its expiry
 * returns 0 claimed, 1 stored, 2 pending (another request's)
 */

static ngx_platform_redis_script_t  ngx_platform_webhooks_claim_script = {
    "local v = redis.call('GET', KEYS[1])\n"
    "if v == 'stored' then\n"
    "  return 1\n"
    "end\n"
    "if v then\n"
    "  return 2\n"
    "end\n"
    "redis.call('SET', KEYS[1], ARGV[1], 'EX', tonumber(ARGV[2]))\n"
    "return 0\n",
    ""
};


/* the claim let go, only while it is still this request's */

static ngx_platform_redis_script_t  ngx_platform_webhooks_release_script = {
    "if redis.call('GET', KEYS[1]) == ARGV[1] then\n"
    "  return redis.call('DEL', KEYS[1])\n"
    "end\n"
    "return 0\n",
    ""
};


/*
 * The durable guard: the unique index on (kind, name, tenant, key). A
 * concurrent insert of the same key waits for the first one's commit, so
 * no row returned means the event is stored and committed. The body
 * ($6) travels as binary, byte for byte. The table's trigger notifies
 * "webhook_events" of a new row.
 */

static ngx_platform_pg_stmt_t  ngx_platform_webhooks_insert_stmt = {
    "platform_webhooks_insert",

    "INSERT INTO webhook_events"
    " (tenant_id, kind, name, event_key, headers, body, signed)"
    " VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7::boolean)"
    " ON CONFLICT (kind, name, (coalesce(tenant_id, '')), event_key)"
    " DO NOTHING"
    " RETURNING id",

    7, 1 << 5, 0
};


/* any JSON object: the core refuses other bodies with 400 */

static ngx_platform_field_t  ngx_platform_webhooks_body[] = {
    { NULL, 0, 0, 0, 0, NULL, NULL, NULL }
};


/* the shapes of the data its endpoints answer (docs/api.md) */

static const char  ngx_platform_webhooks_schemas[] =
    "{"
    "\"WebhookReceipt\":{\"type\":\"object\",\"properties\":{"
     "\"id\":{\"type\":\"integer\"},"
     "\"duplicate\":{\"type\":\"boolean\"}}}"
    "}";


/*
 * platform_openapi: each endpoint's success data, an example on the demo
 * data (the sources and payment methods of docs/development.md), and
 * what the intake's code refuses
 */

static ngx_platform_doc_answer_t  ngx_platform_webhooks_source_answers[] = {
    { NGX_HTTP_NOT_FOUND, "Unknown webhook source.",
      "No such source is configured." },
    { NGX_HTTP_UNAUTHORIZED, "Invalid webhook signature.",
      "The webhook-signature header is missing." },
    { 0, NULL, NULL }
};


static ngx_platform_doc_answer_t  ngx_platform_webhooks_payment_answers[] = {
    { NGX_HTTP_NOT_FOUND, "Unknown payment method.",
      "No such payment method is configured." },
    { NGX_HTTP_UNAUTHORIZED, "Invalid webhook signature.",
      "The webhook-signature header is missing." },
    { 0, NULL, NULL }
};


static ngx_platform_doc_t  ngx_platform_webhooks_keyed_source_doc = {
    ngx_platform_doc_schema("WebhookReceipt"),
    "{\"path\":{\"source\":\"source-a\"},"
    "\"body\":{\"id\":\"evt_demo_1\",\"type\":\"order.paid\"}}",
    ngx_platform_webhooks_source_answers, 0, "Event received."
};


static ngx_platform_doc_t  ngx_platform_webhooks_public_source_doc = {
    ngx_platform_doc_schema("WebhookReceipt"),
    "{\"path\":{\"source\":\"source-b\"},"
    "\"body\":{\"eventId\":\"b-1\",\"status\":\"ok\"}}",
    ngx_platform_webhooks_source_answers, 0, "Event received."
};


static ngx_platform_doc_t  ngx_platform_webhooks_payment_doc = {
    ngx_platform_doc_schema("WebhookReceipt"),
    "{\"path\":{\"paymentmethod\":\"card\"},"
    "\"body\":{\"reference\":\"T-1001\",\"status\":\"success\"}}",
    ngx_platform_webhooks_payment_answers, 0, "Event received."
};


static ngx_platform_endpoint_t  ngx_platform_webhooks_endpoints[] = {

    { NGX_HTTP_POST, "/api/v1/webhooks/public/{string:source}/events",
      NGX_PLATFORM_AUTH_APIKEY, 0,
      NULL, ngx_platform_webhooks_body,
      NULL, NULL,
      NULL, ngx_platform_webhooks_source,
      &ngx_platform_webhooks_keyed_source_doc },

    /* unless the source has a signing secret: then a signature */
    { NGX_HTTP_POST, "/api/webhooks/public/{string:source}/events",
      NGX_PLATFORM_AUTH_NONE, 0,
      NULL, ngx_platform_webhooks_body,
      NULL, NULL,
      NULL, ngx_platform_webhooks_source,
      &ngx_platform_webhooks_public_source_doc },

    { NGX_HTTP_POST, "/webhooks/{string:paymentmethod}",
      NGX_PLATFORM_AUTH_APIKEY, 0,
      NULL, ngx_platform_webhooks_body,
      NULL, NULL,
      NULL, ngx_platform_webhooks_payment,
      &ngx_platform_webhooks_payment_doc },

    { 0, NULL, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL }
};


ngx_platform_family_t  ngx_platform_webhooks_family = {
    ngx_string("webhooks"),
    NGX_PLATFORM_ENVELOPE_B,
    NGX_PLATFORM_BACKEND_PG|NGX_PLATFORM_BACKEND_REDIS,
    ngx_platform_webhooks_endpoints,
    NULL,
    0,
    ngx_platform_webhooks_schemas
};


/* Redis down or failing: said once per worker, not per request */
static ngx_uint_t  ngx_platform_webhooks_redis_down;

/* makes each pending value of the worker unique */
static ngx_uint_t  ngx_platform_webhooks_claims;


static ngx_int_t
ngx_platform_webhooks_source(ngx_http_request_t *r, ngx_platform_ctx_t *ctx)
{
    ngx_platform_loc_conf_t  *plcf;

    plcf = ngx_http_get_module_loc_conf(r, ngx_platform_module);

    return ngx_platform_webhooks_intake(r, ctx, plcf->webhook_sources,
                                        "source");
}


static ngx_int_t
ngx_platform_webhooks_payment(ngx_http_request_t *r, ngx_platform_ctx_t *ctx)
{
    ngx_platform_loc_conf_t  *plcf;

    plcf = ngx_http_get_module_loc_conf(r, ngx_platform_module);

    return ngx_platform_webhooks_intake(r, ctx, plcf->webhook_methods,
                                        "payment_method");
}


/*
 * The body is a JSON object (checked by the core). Then: the name is one
 * the location accepts (404), its signature when it has secrets (401),
 * the event key, then the digests over the body (in the thread pool for
 * a large one), then the storage.
 */

static ngx_int_t
ngx_platform_webhooks_intake(ngx_http_request_t *r, ngx_platform_ctx_t *ctx,
    ngx_array_t *hooks, char *kind)
{
    ngx_int_t                    rc;
    ngx_str_t                   *name;
    ngx_uint_t                   i;
    ngx_platform_webhook_t      *hook;
    ngx_platform_webhook_ctx_t  *w;

    name = &ctx->args[0];
    hook = NULL;

    for (i = 0; hooks && i < hooks->nelts; i++) {
        hook = &((ngx_platform_webhook_t *) hooks->elts)[i];

        if (hook->name.len == name->len
            && ngx_strncmp(hook->name.data, name->data, name->len) == 0)
        {
            break;
        }

        hook = NULL;
    }

    if (hook == NULL) {
        if (kind[0] == 's') {
            return ngx_platform_fail(r, NGX_HTTP_NOT_FOUND,
                                     "Unknown webhook source.",
                                     "No such source is configured.");
        }

        return ngx_platform_fail(r, NGX_HTTP_NOT_FOUND,
                                 "Unknown payment method.",
                                 "No such payment method is configured.");
    }

    w = ngx_pcalloc(r->pool, sizeof(ngx_platform_webhook_ctx_t));
    if (w == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ctx->data = w;

    w->hook = hook;
    w->kind.data = (u_char *) kind;
    w->kind.len = ngx_strlen(kind);
    w->body = ctx->body;
    w->body_len = ctx->body_len;

    /* a tenant only from a credential: a bare tenantId header is no proof */

    if (ctx->identity.apikey || ctx->identity.bearer) {
        w->tenant = ctx->identity.tenant;
    }

    if (hook->secrets) {
        rc = ngx_platform_webhooks_signature(r, ctx, w);
        if (rc != NGX_OK) {
            return rc;
        }

        w->macs = ngx_pnalloc(r->pool, hook->secrets->nelts
                                       * NGX_PLATFORM_WEBHOOK_MAC_LEN);
        if (w->macs == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
    }

    rc = ngx_platform_webhooks_event_key(r, ctx, w);
    if (rc != NGX_OK) {
        return rc;
    }

    if (!w->need_digest && hook->secrets == NULL) {
        return ngx_platform_webhooks_verified(r, ctx);
    }

    if (w->body_len >= NGX_PLATFORM_WEBHOOK_THREAD_SIZE) {
        /* a megabyte's HMAC per secret: not in the event loop */
        return ngx_platform_offload(r, ngx_platform_webhooks_work, w,
                                    ngx_platform_webhooks_verified);
    }

    ngx_platform_webhooks_work(w);

    return ngx_platform_webhooks_verified(r, ctx);
}


/*
 * Standard Webhooks: webhook-id, webhook-timestamp (seconds, within the
 * tolerance both ways) and webhook-signature, space-separated
 * "v1,<base64>" entries (others, such as "v1a", are ignored). Checked in
 * the worker before any digest; the MACs are compared afterwards.
 */

static ngx_int_t
ngx_platform_webhooks_signature(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx, ngx_platform_webhook_ctx_t *w)
{
    u_char           *p, *end, *entry;
    time_t            ts, now;
    size_t            i;
    ngx_str_t         sig, mac;
    ngx_table_elt_t  *h;

    h = ngx_platform_header(r, "webhook-id");

    if (h == NULL || h->value.len == 0) {
        return ngx_platform_webhooks_refuse(r, ctx,
                   "The webhook-id header is missing.");
    }

    if (h->value.len > NGX_PLATFORM_WEBHOOK_ID_MAX) {
        goto bad_id;
    }

    for (i = 0; i < h->value.len; i++) {
        if (h->value.data[i] < 0x21 || h->value.data[i] > 0x7e) {
            goto bad_id;
        }
    }

    w->msg_id = h->value;

    h = ngx_platform_header(r, "webhook-timestamp");

    if (h == NULL || h->value.len == 0) {
        return ngx_platform_webhooks_refuse(r, ctx,
                   "The webhook-timestamp header is missing.");
    }

    ts = (h->value.len <= 12) ? ngx_atotm(h->value.data, h->value.len)
                              : NGX_ERROR;

    if (ts == NGX_ERROR) {
        return ngx_platform_webhooks_refuse(r, ctx,
                   "The webhook-timestamp header is malformed: "
                   "it must be whole seconds since 1970.");
    }

    now = ngx_time();

    if (ts < now - NGX_PLATFORM_WEBHOOK_TOLERANCE) {
        return ngx_platform_webhooks_refuse(r, ctx,
                   "The webhook-timestamp header is too old: "
                   "more than 300 seconds before the server's time.");
    }

    if (ts > now + NGX_PLATFORM_WEBHOOK_TOLERANCE) {
        return ngx_platform_webhooks_refuse(r, ctx,
                   "The webhook-timestamp header is in the future: "
                   "more than 300 seconds after the server's time.");
    }

    w->timestamp = h->value;

    h = ngx_platform_header(r, "webhook-signature");

    if (h == NULL || h->value.len == 0) {
        return ngx_platform_webhooks_refuse(r, ctx,
                   "The webhook-signature header is missing.");
    }

    p = h->value.data;
    end = p + h->value.len;

    while (p < end && w->nsignatures < NGX_PLATFORM_WEBHOOK_SIGNATURES) {

        while (p < end && *p == ' ') {
            p++;
        }

        entry = p;

        while (p < end && *p != ' ') {
            p++;
        }

        if (p - entry < 3 || ngx_strncmp(entry, "v1,", 3) != 0) {
            continue;
        }

        sig.data = entry + 3;
        sig.len = p - sig.data;

        mac.data = ngx_pnalloc(r->pool, ngx_base64_decoded_length(sig.len));
        if (mac.data == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        if (ngx_platform_webhooks_base64(&sig, &mac) != NGX_OK
            || mac.len != NGX_PLATFORM_WEBHOOK_MAC_LEN)
        {
            continue;
        }

        w->signatures[w->nsignatures++] = mac;
    }

    if (w->nsignatures == 0) {
        return ngx_platform_webhooks_refuse(r, ctx,
                   "The webhook-signature header is malformed: it holds "
                   "no \"v1,<base64 HMAC-SHA256>\" signature.");
    }

    return NGX_OK;

bad_id:

    return ngx_platform_webhooks_refuse(r, ctx,
               "The webhook-id header is malformed: 1 to 256 printable "
               "characters without spaces.");
}


static ngx_int_t
ngx_platform_webhooks_refuse(ngx_http_request_t *r, ngx_platform_ctx_t *ctx,
    const char *detail)
{
    ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                  "webhooks: signature refused: %s", detail);

    ngx_str_set(&ctx->challenge,
                "Webhook-Signature headers=\"webhook-id webhook-timestamp "
                "webhook-signature\"");

    return ngx_platform_fail(r, NGX_HTTP_UNAUTHORIZED,
                             "Invalid webhook signature.", detail);
}


/*
 * The event key. A name with signing secrets: the signed webhook-id
 * alone, so that a captured delivery replayed with another key is still
 * a duplicate, and no replay can take the key of an event yet to come.
 * Others: the Idempotency-Key header, else webhook-id, else the body's
 * top-level "id", else its "eventId" (a string or a number), else the
 * SHA-256 of the raw body (computed in ngx_platform_webhooks_work()).
 */

static ngx_int_t
ngx_platform_webhooks_event_key(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx, ngx_platform_webhook_ctx_t *w)
{
    char              *text;
    u_char            *p;
    json_t            *v;
    ngx_int_t          rc;
    ngx_uint_t         i;
    ngx_table_elt_t   *h;
    static char       *headers[] = { "Idempotency-Key", "webhook-id" };
    static char       *fields[] = { "id", "eventId" };

    if (w->hook->secrets) {
        return ngx_platform_webhooks_set_key(r, w, w->msg_id.data,
                                             w->msg_id.len);
    }

    for (i = 0; i < 2; i++) {
        h = ngx_platform_header(r, headers[i]);

        if (h && h->value.len) {
            return ngx_platform_webhooks_set_key(r, w, h->value.data,
                                                 h->value.len);
        }
    }

    for (i = 0; ctx->json && i < 2; i++) {
        v = json_object_get(ctx->json, fields[i]);

        if (json_is_string(v) && json_string_length(v) > 0) {
            return ngx_platform_webhooks_set_key(r, w,
                                          (u_char *) json_string_value(v),
                                          json_string_length(v));
        }

        if (json_is_integer(v)) {
            p = ngx_pnalloc(r->pool, NGX_INT64_LEN);
            if (p == NULL) {
                return NGX_HTTP_INTERNAL_SERVER_ERROR;
            }

            return ngx_platform_webhooks_set_key(r, w, p,
                       ngx_sprintf(p, "%L", (int64_t) json_integer_value(v))
                       - p);
        }

        if (json_is_real(v)) {
            text = json_dumps(v, JSON_ENCODE_ANY|JSON_COMPACT);
            if (text == NULL) {
                return NGX_HTTP_INTERNAL_SERVER_ERROR;
            }

            rc = ngx_platform_webhooks_set_key(r, w, (u_char *) text,
                                               ngx_strlen(text));
            free(text);

            return rc;
        }
    }

    w->need_digest = 1;

    return NGX_OK;
}


/*
 * 1 to 200 printable ASCII characters are the key as they are; anything
 * longer, or with other bytes, is "sha256:" and the hex digest of it, so
 * the key's size is bounded and it travels safely in Redis and SQL.
 */

static ngx_int_t
ngx_platform_webhooks_set_key(ngx_http_request_t *r,
    ngx_platform_webhook_ctx_t *w, u_char *data, size_t len)
{
    u_char        *p;
    size_t         i;
    u_char         digest[NGX_PLATFORM_WEBHOOK_MAC_LEN];
    unsigned int   n;

    for (i = 0; i < len && len <= NGX_PLATFORM_WEBHOOK_KEY_MAX; i++) {
        if (data[i] < 0x20 || data[i] > 0x7e) {
            break;
        }
    }

    if (i == len && len <= NGX_PLATFORM_WEBHOOK_KEY_MAX) {
        p = ngx_pnalloc(r->pool, len);
        if (p == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        w->key.data = p;
        w->key.len = ngx_cpymem(p, data, len) - p;

        return NGX_OK;
    }

    if (EVP_Digest(data, len, digest, &n, EVP_sha256(), NULL) != 1) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    p = ngx_pnalloc(r->pool, sizeof("sha256:") - 1 + 2 * sizeof(digest));
    if (p == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    w->key.data = p;
    p = ngx_cpymem(p, "sha256:", sizeof("sha256:") - 1);
    w->key.len = ngx_hex_dump(p, digest, sizeof(digest)) - w->key.data;

    return NGX_OK;
}


/*
 * Perhaps in a thread: only w, the body and the secrets (configuration
 * memory, read only), with OpenSSL.
 */

static void
ngx_platform_webhooks_work(void *data)
{
    ngx_platform_webhook_ctx_t *w = data;

    ngx_str_t    *secret;
    ngx_uint_t    i;
    unsigned int  n;

    if (w->need_digest
        && EVP_Digest(w->body, w->body_len, w->digest, &n, EVP_sha256(),
                      NULL)
           != 1)
    {
        w->work_failed = 1;
        return;
    }

    if (w->hook->secrets == NULL) {
        return;
    }

    secret = w->hook->secrets->elts;

    for (i = 0; i < w->hook->secrets->nelts; i++) {
        if (ngx_platform_webhooks_hmac(&secret[i], w,
                                       w->macs
                                       + i * NGX_PLATFORM_WEBHOOK_MAC_LEN)
            != NGX_OK)
        {
            w->work_failed = 1;
            return;
        }
    }
}


/* HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<body>" */

static ngx_int_t
ngx_platform_webhooks_hmac(ngx_str_t *secret, ngx_platform_webhook_ctx_t *w,
    u_char *mac)
{
    size_t       len;
    ngx_int_t    rc;
    EVP_PKEY    *key;
    EVP_MD_CTX  *md;

    key = EVP_PKEY_new_raw_private_key(EVP_PKEY_HMAC, NULL, secret->data,
                                       secret->len);
    if (key == NULL) {
        return NGX_ERROR;
    }

    md = EVP_MD_CTX_new();
    if (md == NULL) {
        EVP_PKEY_free(key);
        return NGX_ERROR;
    }

    len = NGX_PLATFORM_WEBHOOK_MAC_LEN;

    rc = (EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, key) == 1
          && EVP_DigestSignUpdate(md, w->msg_id.data, w->msg_id.len) == 1
          && EVP_DigestSignUpdate(md, ".", 1) == 1
          && EVP_DigestSignUpdate(md, w->timestamp.data, w->timestamp.len)
             == 1
          && EVP_DigestSignUpdate(md, ".", 1) == 1
          && EVP_DigestSignUpdate(md, w->body, w->body_len) == 1
          && EVP_DigestSignFinal(md, mac, &len) == 1
          && len == NGX_PLATFORM_WEBHOOK_MAC_LEN)
         ? NGX_OK : NGX_ERROR;

    EVP_MD_CTX_free(md);
    EVP_PKEY_free(key);

    return rc;
}


/* back in the worker: the signature decided, the key known, then storage */

static ngx_int_t
ngx_platform_webhooks_verified(ngx_http_request_t *r, ngx_platform_ctx_t *ctx)
{
    u_char                      *p;
    ngx_int_t                    rc;
    ngx_uint_t                   i, j, match;
    ngx_platform_webhook_ctx_t  *w;

    w = ctx->data;

    if (w->work_failed) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "webhooks: a digest of the body failed");
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (w->hook->secrets) {
        match = 0;

        /* every pair is compared, so the time says nothing of which */

        for (i = 0; i < w->hook->secrets->nelts; i++) {
            for (j = 0; j < w->nsignatures; j++) {
                match |= (CRYPTO_memcmp(w->macs
                                        + i * NGX_PLATFORM_WEBHOOK_MAC_LEN,
                                        w->signatures[j].data,
                                        NGX_PLATFORM_WEBHOOK_MAC_LEN)
                          == 0);
            }
        }

        if (!match) {
            return ngx_platform_webhooks_refuse(r, ctx,
                       "The webhook-signature header matches none of the "
                       "signing secrets of this source.");
        }
    }

    if (w->need_digest) {
        p = ngx_pnalloc(r->pool, 2 * NGX_PLATFORM_WEBHOOK_MAC_LEN);
        if (p == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        w->key.data = p;
        w->key.len = ngx_hex_dump(p, w->digest, NGX_PLATFORM_WEBHOOK_MAC_LEN)
                     - p;
    }

    rc = ngx_platform_webhooks_headers(r, ctx, &w->headers);
    if (rc != NGX_OK) {
        return rc;
    }

    /* webhook:<kind>:<name>:<tenant>:<key>; a tenant has no ':' */

    w->redis_key.len = sizeof("webhook::::") - 1 + w->kind.len
                       + w->hook->name.len + w->tenant.len + w->key.len;
    w->redis_key.data = ngx_pnalloc(r->pool, w->redis_key.len);
    if (w->redis_key.data == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ngx_sprintf(w->redis_key.data, "webhook:%V:%V:%V:%V", &w->kind,
                &w->hook->name, &w->tenant, &w->key);

    /* unique among the workers of a host, and random across hosts */

    w->token.data = ngx_pnalloc(r->pool, sizeof("pending:") - 1
                                         + 3 * NGX_INT_T_LEN + 16);
    if (w->token.data == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    w->token.len = ngx_sprintf(w->token.data, "pending:%P:%ui:%08xD%08xD",
                               ngx_pid, ++ngx_platform_webhooks_claims,
                               (uint32_t) ngx_random(),
                               (uint32_t) ngx_random())
                   - w->token.data;

    return ngx_platform_webhooks_claim(r, w);
}


/*
 * The request's headers as a JSON object, names in lower case, repeated
 * ones joined with ", ": all but credentials (apiKey, Authorization,
 * Cookie), the signature (whoever reads the table could replay it) and
 * those of the connection rather than the event; and the request id the
 * response carries.
 */

static ngx_int_t
ngx_platform_webhooks_headers(ngx_http_request_t *r, ngx_platform_ctx_t *ctx,
    ngx_str_t *out)
{
    char             *text;
    u_char           *p;
    size_t            len;
    json_t           *obj, *name, *value, *old;
    ngx_uint_t        i, k, skip;
    ngx_list_part_t  *part;
    ngx_table_elt_t  *h;
    static char      *skipped[] = {
        "apikey", "authorization", "proxy-authorization", "cookie",
        "webhook-signature", "connection", "keep-alive",
        "transfer-encoding", "te", "upgrade", "content-length", "expect",
        "x-request-id", NULL
    };

    obj = json_object();
    if (obj == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    part = &r->headers_in.headers.part;
    h = part->elts;

    for (i = 0; /* void */ ; i++) {

        if (i >= part->nelts) {
            if (part->next == NULL) {
                break;
            }

            part = part->next;
            h = part->elts;
            i = 0;
        }

        if (h[i].hash == 0) {
            continue;
        }

        skip = 0;

        for (k = 0; skipped[k]; k++) {
            if (h[i].key.len == ngx_strlen(skipped[k])
                && ngx_strncasecmp(h[i].key.data, (u_char *) skipped[k],
                                   h[i].key.len)
                   == 0)
            {
                skip = 1;
                break;
            }
        }

        if (skip) {
            continue;
        }

        p = ngx_pnalloc(r->pool, h[i].key.len);
        if (p == NULL) {
            goto failed;
        }

        ngx_strlow(p, h[i].key.data, h[i].key.len);

        name = ngx_platform_webhooks_json_string(r->pool, p, h[i].key.len);
        if (name == NULL) {
            goto failed;
        }

        old = json_object_get(obj, json_string_value(name));

        if (old) {
            len = json_string_length(old) + 2 + h[i].value.len;

            p = ngx_pnalloc(r->pool, len);
            if (p == NULL) {
                json_decref(name);
                goto failed;
            }

            ngx_sprintf(p, "%*s, %V", json_string_length(old),
                        json_string_value(old), &h[i].value);

            value = ngx_platform_webhooks_json_string(r->pool, p, len);

        } else {
            value = ngx_platform_webhooks_json_string(r->pool,
                                                      h[i].value.data,
                                                      h[i].value.len);
        }

        if (value == NULL
            || json_object_set_new(obj, json_string_value(name), value) != 0)
        {
            json_decref(name);
            goto failed;
        }

        json_decref(name);
    }

    value = json_stringn((char *) ctx->request_id.data,
                         ctx->request_id.len);

    if (value == NULL || json_object_set_new(obj, "x-request-id", value) != 0)
    {
        goto failed;
    }

    text = json_dumps(obj, JSON_COMPACT);
    json_decref(obj);

    if (text == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    len = ngx_strlen(text);

    out->data = ngx_pnalloc(r->pool, len);
    if (out->data == NULL) {
        free(text);
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    out->len = ngx_cpymem(out->data, text, len) - out->data;
    free(text);

    return NGX_OK;

failed:

    json_decref(obj);

    return NGX_HTTP_INTERNAL_SERVER_ERROR;
}


/*
 * A JSON string of header bytes (headers are octets, Jansson takes only
 * UTF-8): the valid runs as they are, and each byte that starts no valid
 * sequence as the four characters "\xHH", so that the text still says
 * which bytes came.
 */

static json_t *
ngx_platform_webhooks_json_string(ngx_pool_t *pool, u_char *data,
    size_t len)
{
    u_char         *p, *end, *copy, *d;
    size_t          n;
    static u_char   hex[] = "0123456789ABCDEF";

    n = ngx_platform_utf8_valid(data, len);

    if (n == len) {
        return json_stringn((char *) data, len);
    }

    copy = ngx_pnalloc(pool, n + 4 * (len - n));
    if (copy == NULL) {
        return NULL;
    }

    p = data;
    end = data + len;
    d = copy;

    while (p < end) {
        n = ngx_platform_utf8_valid(p, end - p);
        d = ngx_cpymem(d, p, n);
        p += n;

        if (p < end) {
            *d++ = '\\';
            *d++ = 'x';
            *d++ = hex[*p >> 4];
            *d++ = hex[*p & 0x0f];
            p++;
        }
    }

    return json_stringn((char *) copy, d - copy);
}


static ngx_int_t
ngx_platform_webhooks_claim(ngx_http_request_t *r,
    ngx_platform_webhook_ctx_t *w)
{
    ngx_int_t    rc;
    size_t       argvlen[3];
    const char  *argv[3];

    argv[0] = (const char *) w->redis_key.data;
    argvlen[0] = w->redis_key.len;
    argv[1] = (const char *) w->token.data;
    argvlen[1] = w->token.len;
    argv[2] = NGX_PLATFORM_WEBHOOK_PENDING_TTL;
    argvlen[2] = sizeof(NGX_PLATFORM_WEBHOOK_PENDING_TTL) - 1;

    rc = ngx_platform_eval(r, &ngx_platform_webhooks_claim_script, 1, 3,
                           argv, argvlen, ngx_platform_webhooks_claim_done);

    if (rc == NGX_DONE) {
        return NGX_DONE;
    }

    ngx_platform_webhooks_redis_failed(r, "is not connected");

    return ngx_platform_webhooks_insert(r, w);
}


static void
ngx_platform_webhooks_claim_done(void *data, redisReply *reply, ngx_int_t rc)
{
    ngx_http_request_t *r = data;

    ngx_platform_ctx_t          *ctx;
    ngx_platform_webhook_ctx_t  *w;

    ctx = ngx_platform_get_ctx(r);
    w = ctx->data;

    if (rc != NGX_OK) {
        ngx_platform_webhooks_redis_failed(r, rc == NGX_PLATFORM_TIMEOUT
                                              ? "does not answer in time"
                                              : "is not connected");

    } else if (reply->type != REDIS_REPLY_INTEGER) {
        ngx_platform_webhooks_redis_failed(r, "answers errors");

    } else {
        if (ngx_platform_webhooks_redis_down) {
            ngx_log_error(NGX_LOG_NOTICE, r->connection->log, 0,
                          "webhooks: Redis answers again");
            ngx_platform_webhooks_redis_down = 0;
        }

        w->redis = 1;

        if (reply->integer == 1) {
            ngx_platform_finalize(r, ngx_platform_webhooks_duplicate(r));
            return;
        }

        w->owned = (reply->integer == 0);
    }

    /* the query takes a count of its own; the claim's is dropped */

    ngx_platform_finalize(r, ngx_platform_webhooks_insert(r, w));
}


static ngx_int_t
ngx_platform_webhooks_insert(ngx_http_request_t *r,
    ngx_platform_webhook_ctx_t *w)
{
    ngx_int_t            rc;
    ngx_str_t            params[7];
    ngx_platform_ctx_t  *ctx;

    params[0] = w->tenant;

    if (w->tenant.len == 0) {
        ngx_str_null(&params[0]);     /* SQL NULL */
    }

    params[1] = w->kind;
    params[2] = w->hook->name;
    params[3] = w->key;
    params[4] = w->headers;
    params[5].data = w->body;
    params[5].len = w->body_len;

    if (w->hook->secrets) {
        ngx_str_set(&params[6], "true");

    } else {
        ngx_str_set(&params[6], "false");
    }

    /* the event's tenant under row-level security; "": a tenantless one */

    ctx = ngx_platform_get_ctx(r);
    ctx->scope = w->tenant;
    ctx->scoped = 1;

    if (w->tenant.len == 0) {
        ngx_str_set(&ctx->scope, "");
    }

    rc = ngx_platform_query(r, &ngx_platform_webhooks_insert_stmt, params,
                            ngx_platform_webhooks_insert_done);

    if (rc == NGX_DONE) {
        return NGX_DONE;
    }

    return ngx_platform_webhooks_fail(r, w, rc);
}


static void
ngx_platform_webhooks_insert_done(void *data, ngx_platform_pg_op_t *op,
    PGresult *res, ngx_int_t rc)
{
    ngx_http_request_t *r = data;

    u_char                      *p;
    u_char                       buf[sizeof("{\"id\":,\"duplicate\":false}")
                                     + NGX_INT64_LEN];
    ngx_int_t                    status;
    ngx_platform_ctx_t          *ctx;
    ngx_platform_webhook_ctx_t  *w;

    ctx = ngx_platform_get_ctx(r);
    w = ctx->data;

    if (rc != NGX_OK) {
        status = ngx_platform_pg_outcome(r, NULL, res, rc);
        ngx_platform_finalize(r, ngx_platform_webhooks_fail(r, w, status));
        return;
    }

    /* committed either way: this request's row, or an earlier one */

    ngx_platform_webhooks_mark_stored(r, w);

    if (PQntuples(res) == 0) {
        ngx_platform_finalize(r, ngx_platform_webhooks_duplicate(r));
        return;
    }

    if (PQntuples(res) != 1
        || PQgetlength(res, 0, 0) > (int) NGX_INT64_LEN)
    {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "webhooks: the insert answered an unexpected result");
        ngx_platform_finalize(r, ngx_platform_backend_fail(r, NGX_ERROR));
        return;
    }

    p = ngx_sprintf(buf, "{\"id\":%*s,\"duplicate\":false}",
                    (size_t) PQgetlength(res, 0, 0), PQgetvalue(res, 0, 0));

    ngx_platform_finalize(r, ngx_platform_send_ok(r, "Event received.", buf,
                                                  p - buf));
}


/*
 * The event was not stored: the claim, when this request made it, is let
 * go first, so that the sender's retry is not taken for a duplicate in
 * flight; then the failure is answered (503 with Retry-After, or 500).
 */

static ngx_int_t
ngx_platform_webhooks_fail(ngx_http_request_t *r,
    ngx_platform_webhook_ctx_t *w, ngx_int_t status)
{
    ngx_int_t            rc;
    size_t               argvlen[2];
    const char          *argv[2];
    ngx_platform_ctx_t  *ctx;

    if (!w->owned) {
        return status;
    }

    w->owned = 0;

    ctx = ngx_platform_get_ctx(r);

    w->status = status;
    w->message = (ctx->error_status == (ngx_uint_t) status)
                 ? ctx->error_message : NULL;
    w->detail = (ctx->error_status == (ngx_uint_t) status)
                ? ctx->error_detail : NULL;

    argv[0] = (const char *) w->redis_key.data;
    argvlen[0] = w->redis_key.len;
    argv[1] = (const char *) w->token.data;
    argvlen[1] = w->token.len;

    rc = ngx_platform_eval(r, &ngx_platform_webhooks_release_script, 1, 2,
                           argv, argvlen,
                           ngx_platform_webhooks_release_done);

    if (rc == NGX_DONE) {
        return NGX_DONE;
    }

    ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                  "webhooks: the claim on \"%V\" could not be released; "
                  "it expires in " NGX_PLATFORM_WEBHOOK_PENDING_TTL " s",
                  &w->redis_key);

    return ngx_platform_fail(r, w->status, w->message, w->detail);
}


static void
ngx_platform_webhooks_release_done(void *data, redisReply *reply,
    ngx_int_t rc)
{
    ngx_http_request_t *r = data;

    ngx_platform_ctx_t          *ctx;
    ngx_platform_webhook_ctx_t  *w;

    ctx = ngx_platform_get_ctx(r);
    w = ctx->data;

    if (rc != NGX_OK || reply->type != REDIS_REPLY_INTEGER) {
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "webhooks: the claim on \"%V\" could not be "
                      "released; it expires in "
                      NGX_PLATFORM_WEBHOOK_PENDING_TTL " s",
                      &w->redis_key);
    }

    ngx_platform_finalize(r, ngx_platform_fail(r, w->status, w->message,
                                               w->detail));
}


/*
 * The key becomes "stored" for 24 h: later duplicates are answered from
 * Redis. The answer does not wait for it; a mark that is lost only sends
 * a later duplicate to PostgreSQL, which answers the same.
 */

static void
ngx_platform_webhooks_mark_stored(ngx_http_request_t *r,
    ngx_platform_webhook_ctx_t *w)
{
    size_t       argvlen[5];
    const char  *argv[5];

    if (!w->redis) {
        return;
    }

    argv[0] = "SET";
    argvlen[0] = 3;
    argv[1] = (const char *) w->redis_key.data;
    argvlen[1] = w->redis_key.len;
    argv[2] = "stored";
    argvlen[2] = 6;
    argv[3] = "EX";
    argvlen[3] = 2;
    argv[4] = NGX_PLATFORM_WEBHOOK_STORED_TTL;
    argvlen[4] = sizeof(NGX_PLATFORM_WEBHOOK_STORED_TTL) - 1;

    /* not counted: the reply, if the request is still there, is ignored */

    (void) ngx_platform_redis_command(r->pool, r->connection->log,
                                      ngx_platform_webhooks_ignore, NULL,
                                      5, argv, argvlen);
}


static void
ngx_platform_webhooks_ignore(void *data, redisReply *reply, ngx_int_t rc)
{
}


static void
ngx_platform_webhooks_redis_failed(ngx_http_request_t *r, const char *why)
{
    if (ngx_platform_webhooks_redis_down) {
        return;
    }

    ngx_platform_webhooks_redis_down = 1;

    ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                  "webhooks: Redis %s; events go straight to PostgreSQL "
                  "until it answers again", why);
}


static ngx_int_t
ngx_platform_webhooks_duplicate(ngx_http_request_t *r)
{
    static u_char  data[] = "{\"duplicate\":true}";

    return ngx_platform_send_ok(r, "Event already received.", data,
                                sizeof(data) - 1);
}


/*
 * Standard base64, padded or not, and nothing else: ngx_decode_base64()
 * alone would stop at a '=' and ignore what follows it.
 */

static ngx_int_t
ngx_platform_webhooks_base64(ngx_str_t *src, ngx_str_t *dst)
{
    size_t     len, pad;
    ngx_str_t  s;

    len = src->len;
    pad = 0;

    while (len && src->data[len - 1] == '=' && pad < 2) {
        len--;
        pad++;
    }

    if (len == 0 || (pad && (len + pad) % 4 != 0)
        || ngx_strlchr(src->data, src->data + len, '=') != NULL)
    {
        return NGX_ERROR;
    }

    s.data = src->data;
    s.len = len;

    return ngx_decode_base64(dst, &s);
}


/*
 * platform_webhook_source NAME [secret=FILE ...];
 * platform_webhook_payment_method NAME [secret=FILE ...];
 *
 * A secret file holds one secret per line: "whsec_<base64>" (Standard
 * Webhooks) or the secret's bytes as they are; empty lines and lines that
 * start with '#' are skipped. Several secrets (in one file or several)
 * are all accepted, for rotation.
 */

char *
ngx_platform_webhook_conf(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    char  *p = conf;

    u_char                   *s, *end, *line, *eol;
    size_t                    i;
    ssize_t                   n;
    ngx_fd_t                  fd;
    ngx_str_t                *value, file, content, text, *secret;
    ngx_uint_t                a, lineno, found;
    ngx_file_t                f;
    ngx_array_t             **hooks;
    ngx_file_info_t           fi;
    ngx_platform_webhook_t   *hook;

    hooks = (ngx_array_t **) (p + cmd->offset);
    value = cf->args->elts;

    if (value[1].len == 0 || value[1].len > NGX_PLATFORM_WEBHOOK_NAME_MAX) {
        goto bad_name;
    }

    for (i = 0; i < value[1].len; i++) {
        if (!((value[1].data[i] >= 'a' && value[1].data[i] <= 'z')
              || (value[1].data[i] >= 'A' && value[1].data[i] <= 'Z')
              || (value[1].data[i] >= '0' && value[1].data[i] <= '9')
              || value[1].data[i] == '-' || value[1].data[i] == '_'
              || value[1].data[i] == '.'))
        {
            goto bad_name;
        }
    }

    if (*hooks == NGX_CONF_UNSET_PTR) {
        *hooks = ngx_array_create(cf->pool, 4,
                                  sizeof(ngx_platform_webhook_t));
        if (*hooks == NULL) {
            return NGX_CONF_ERROR;
        }
    }

    hook = (*hooks)->elts;

    for (a = 0; a < (*hooks)->nelts; a++) {
        if (hook[a].name.len == value[1].len
            && ngx_strncmp(hook[a].name.data, value[1].data, value[1].len)
               == 0)
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "\"%V\" is configured twice at this level",
                               &value[1]);
            return NGX_CONF_ERROR;
        }
    }

    hook = ngx_array_push(*hooks);
    if (hook == NULL) {
        return NGX_CONF_ERROR;
    }

    hook->name = value[1];
    hook->secrets = NULL;
    hook->file = cf->conf_file->file.name;
    hook->line = cf->conf_file->line;

    for (a = 2; a < cf->args->nelts; a++) {

        if (value[a].len <= sizeof("secret=") - 1
            || ngx_strncmp(value[a].data, "secret=", sizeof("secret=") - 1)
               != 0)
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid parameter \"%V\": expected "
                               "\"secret=<file>\"", &value[a]);
            return NGX_CONF_ERROR;
        }

        file.data = value[a].data + sizeof("secret=") - 1;
        file.len = value[a].len - (sizeof("secret=") - 1);

        if (ngx_conf_full_name(cf->cycle, &file, 1) != NGX_OK) {
            return NGX_CONF_ERROR;
        }

        fd = ngx_open_file(file.data, NGX_FILE_RDONLY, NGX_FILE_OPEN, 0);
        if (fd == NGX_INVALID_FILE) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, ngx_errno,
                               ngx_open_file_n " \"%V\" failed", &file);
            return NGX_CONF_ERROR;
        }

        ngx_memzero(&f, sizeof(ngx_file_t));
        f.fd = fd;
        f.name = file;
        f.log = cf->log;

        if (ngx_fd_info(fd, &fi) == NGX_FILE_ERROR
            || ngx_file_size(&fi) > 64 * 1024)
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "\"%V\" is not a secret file (larger than "
                               "64k, or unreadable)", &file);
            (void) ngx_close_file(fd);
            return NGX_CONF_ERROR;
        }

        content.len = ngx_file_size(&fi);
        content.data = ngx_pnalloc(cf->pool, content.len + 1);
        if (content.data == NULL) {
            (void) ngx_close_file(fd);
            return NGX_CONF_ERROR;
        }

        n = ngx_read_file(&f, content.data, content.len, 0);
        (void) ngx_close_file(fd);

        if (n == NGX_ERROR || (size_t) n != content.len) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, ngx_errno,
                               "cannot read \"%V\"", &file);
            return NGX_CONF_ERROR;
        }

        if (hook->secrets == NULL) {
            hook->secrets = ngx_array_create(cf->pool, 2, sizeof(ngx_str_t));
            if (hook->secrets == NULL) {
                return NGX_CONF_ERROR;
            }
        }

        s = content.data;
        end = s + content.len;
        lineno = 0;
        found = 0;

        for (line = s; line < end; line = eol + 1) {
            lineno++;

            eol = ngx_strlchr(line, end, '\n');
            if (eol == NULL) {
                eol = end;
            }

            text.data = line;
            text.len = eol - line;

            while (text.len && (text.data[0] == ' ' || text.data[0] == '\t'))
            {
                text.data++;
                text.len--;
            }

            while (text.len && (text.data[text.len - 1] == ' '
                                || text.data[text.len - 1] == '\t'
                                || text.data[text.len - 1] == '\r'))
            {
                text.len--;
            }

            if (text.len == 0 || text.data[0] == '#') {
                continue;
            }

            secret = ngx_array_push(hook->secrets);
            if (secret == NULL) {
                return NGX_CONF_ERROR;
            }

            if (text.len > sizeof("whsec_") - 1
                && ngx_strncmp(text.data, "whsec_", sizeof("whsec_") - 1)
                   == 0)
            {
                text.data += sizeof("whsec_") - 1;
                text.len -= sizeof("whsec_") - 1;

                secret->data = ngx_pnalloc(cf->pool,
                                       ngx_base64_decoded_length(text.len));
                if (secret->data == NULL) {
                    return NGX_CONF_ERROR;
                }

                if (ngx_platform_webhooks_base64(&text, secret) != NGX_OK) {
                    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                       "line %ui of \"%V\": what follows "
                                       "\"whsec_\" is not base64",
                                       lineno, &file);
                    return NGX_CONF_ERROR;
                }

            } else {
                *secret = text;
            }

            if (secret->len < NGX_PLATFORM_WEBHOOK_SECRET_MIN) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "line %ui of \"%V\": the secret is "
                                   "shorter than %d bytes", lineno, &file,
                                   NGX_PLATFORM_WEBHOOK_SECRET_MIN);
                return NGX_CONF_ERROR;
            }

            found++;
        }

        if (found == 0) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "\"%V\" holds no secret", &file);
            return NGX_CONF_ERROR;
        }
    }

    return NGX_CONF_OK;

bad_name:

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "invalid name \"%V\": 1 to %d letters, digits, "
                       "\"-\", \"_\" or \".\"", &value[1],
                       NGX_PLATFORM_WEBHOOK_NAME_MAX);
    return NGX_CONF_ERROR;
}


/*
 * A location that serves webhooks, as merged, for
 * ngx_platform_webhooks_check_locations()
 */

char *
ngx_platform_webhooks_record_location(ngx_conf_t *cf,
    ngx_platform_loc_conf_t *plcf)
{
    ngx_platform_main_conf_t         *pmcf;
    ngx_http_core_loc_conf_t         *clcf;
    ngx_platform_webhook_location_t  *loc;

    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);

    /* "if" and "limit_except" have their location's names and policy */

    if (plcf->family != &ngx_platform_webhooks_family
        || clcf->handler != ngx_platform_handler
        || clcf->noname)
    {
        return NGX_CONF_OK;
    }

    pmcf = ngx_http_conf_get_module_main_conf(cf, ngx_platform_module);

    if (pmcf->webhook_locations == NULL) {
        pmcf->webhook_locations = ngx_array_create(cf->pool, 4,
                                      sizeof(ngx_platform_webhook_location_t));
        if (pmcf->webhook_locations == NULL) {
            return NGX_CONF_ERROR;
        }
    }

    loc = ngx_array_push(pmcf->webhook_locations);
    if (loc == NULL) {
        return NGX_CONF_ERROR;
    }

    loc->clcf = clcf;
    loc->plcf = plcf;

    return NGX_CONF_OK;
}


/*
 * nginx -t, once every location is merged: a name that a route without
 * a credential serves must not be served by a route with one (an API
 * key or a bearer token) anywhere, or its events could be posted without
 * the key. Sources and payment methods are checked apart.
 */

ngx_int_t
ngx_platform_webhooks_check_locations(ngx_conf_t *cf)
{
    ngx_uint_t                        i;
    ngx_array_t                       uses;
    ngx_platform_endpoint_t          *ep;
    ngx_platform_main_conf_t         *pmcf;
    ngx_platform_webhook_location_t  *loc;

    pmcf = ngx_http_conf_get_module_main_conf(cf, ngx_platform_module);

    if (pmcf->webhook_locations == NULL) {
        return NGX_OK;
    }

    if (ngx_array_init(&uses, cf->temp_pool, 8,
                       sizeof(ngx_platform_webhook_use_t))
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    loc = pmcf->webhook_locations->elts;

    for (i = 0; i < pmcf->webhook_locations->nelts; i++) {
        for (ep = ngx_platform_webhooks_endpoints; ep->pattern; ep++) {

            if (ngx_platform_webhooks_serves(loc[i].clcf, ep)
                && ngx_platform_webhooks_check_route(cf, &uses, &loc[i], ep)
                   != NGX_OK)
            {
                return NGX_ERROR;
            }
        }
    }

    return NGX_OK;
}


/*
 * Whether a location may take a route's requests: a regular expression
 * or a named location may take any; a prefix or exact one only when its
 * name and the route's literal start are prefixes of one another,
 * compared as nginx compares locations.
 */

static ngx_uint_t
ngx_platform_webhooks_serves(ngx_http_core_loc_conf_t *clcf,
    ngx_platform_endpoint_t *ep)
{
    char    *capture;
    size_t   len;

#if (NGX_PCRE)
    if (clcf->regex) {
        return 1;
    }
#endif

    if (clcf->named) {
        return 1;
    }

    capture = ngx_strchr(ep->pattern, '{');
    len = capture ? (size_t) (capture - ep->pattern)
                  : ngx_strlen(ep->pattern);

    len = ngx_min(len, clcf->name.len);

    return ngx_filename_cmp((u_char *) ep->pattern, clcf->name.data, len)
           == 0;
}


/*
 * The names of one route in one location, with the route's policy there
 * (platform_auth replaces the route's default), each checked against
 * those recorded before it.
 */

static ngx_int_t
ngx_platform_webhooks_check_route(ngx_conf_t *cf, ngx_array_t *uses,
    ngx_platform_webhook_location_t *loc, ngx_platform_endpoint_t *ep)
{
    char                        *kind;
    ngx_uint_t                   i, j, auth, keyed;
    ngx_array_t                 *hooks;
    ngx_platform_webhook_t      *hook;
    ngx_platform_webhook_use_t  *use, *seen;

    if (ep->handler == ngx_platform_webhooks_source) {
        hooks = loc->plcf->webhook_sources;
        kind = "source";

    } else {
        hooks = loc->plcf->webhook_methods;
        kind = "payment method";
    }

    if (hooks == NULL) {
        return NGX_OK;
    }

    auth = (loc->plcf->auth != NGX_CONF_UNSET_UINT) ? loc->plcf->auth
                                                      : ep->auth;
    keyed = (auth & (NGX_PLATFORM_AUTH_APIKEY|NGX_PLATFORM_AUTH_BEARER))
            != 0;

    hook = hooks->elts;

    for (i = 0; i < hooks->nelts; i++) {
        use = ngx_array_push(uses);
        if (use == NULL) {
            return NGX_ERROR;
        }

        use->hook = &hook[i];
        use->kind = kind;
        use->clcf = loc->clcf;
        use->endpoint = ep;
        use->keyed = keyed;

        seen = uses->elts;

        for (j = 0; j < uses->nelts - 1; j++) {
            if (seen[j].keyed != keyed
                && ngx_strcmp(seen[j].kind, kind) == 0
                && seen[j].hook->name.len == hook[i].name.len
                && ngx_strncmp(seen[j].hook->name.data, hook[i].name.data,
                               hook[i].name.len)
                   == 0)
            {
                ngx_platform_webhooks_log_mixed(cf, &seen[j], use);
                return NGX_ERROR;
            }
        }
    }

    return NGX_OK;
}


/*
 * nginx -t's refusal: the name, the two locations with their routes, and
 * where the name is declared (once, or once for each of them)
 */

static void
ngx_platform_webhooks_log_mixed(ngx_conf_t *cf, ngx_platform_webhook_use_t *a,
    ngx_platform_webhook_use_t *b)
{
    u_char                      *p, *last;
    u_char                       where[NGX_MAX_ERROR_STR];
    ngx_platform_webhook_use_t  *keyless, *keyed;

    keyless = a->keyed ? b : a;
    keyed = a->keyed ? a : b;

    last = where + sizeof(where);
    p = ngx_slprintf(where, last, "%V:%ui", &keyless->hook->file,
                     keyless->hook->line);

    if (keyed->hook != keyless->hook) {
        p = ngx_slprintf(p, last, " and %V:%ui", &keyed->hook->file,
                         keyed->hook->line);
    }

    ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                  "%s \"%V\" is served without a credential by location "
                  "\"%V\" (POST %s) and with one by location \"%V\" "
                  "(POST %s), so its events could be posted without the "
                  "key: declare it only in locations that serve it one "
                  "way (it is declared in %*s)",
                  keyless->kind, &keyless->hook->name,
                  &keyless->clcf->name, keyless->endpoint->pattern,
                  &keyed->clcf->name, keyed->endpoint->pattern,
                  p - where, where);
}
