
/*
 * ngx_platform: webhook intakes (spec 4.11 and 6, decisions.md section 3
 * "Webhooks"). Envelope B.
 *
 *   POST /api/v1/webhooks/public/{source}/events    apiKey
 *   POST /api/webhooks/public/{source}/events       none
 *   POST /webhooks/{paymentmethod}                  apiKey
 *
 * The sources and payment methods a location accepts are configured with
 * platform_webhook_source and platform_webhook_payment_method
 * (ngx_platform_webhook_conf.c), each with optional signing secrets; a
 * name with secrets requires a Standard Webhooks signature on every route
 * that serves it.
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

#include "ngx_platform.h"
#include "ngx_platform_op.h"
#include "ngx_platform_webhook.h"



/* event keys longer than this, or not printable ASCII, are hashed */
#define NGX_PLATFORM_WEBHOOK_KEY_MAX       200



/* how long a pending claim and a stored mark live in Redis, seconds */
#define NGX_PLATFORM_WEBHOOK_PENDING_TTL   "60"
#define NGX_PLATFORM_WEBHOOK_STORED_TTL    "86400"

/* signatures over bodies this large are computed in the thread pool */
#define NGX_PLATFORM_WEBHOOK_THREAD_SIZE   (64 * 1024)


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
    ngx_platform_webhook_signature_t  sig;
    u_char                    *body;
    size_t                     body_len;
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
static off_t ngx_platform_webhooks_max_body(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);
static ngx_platform_webhook_t *ngx_platform_webhooks_find(ngx_array_t *hooks,
    ngx_str_t *name);
static ngx_int_t ngx_platform_webhooks_event_key(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx, ngx_platform_webhook_ctx_t *w);
static ngx_int_t ngx_platform_webhooks_set_key(ngx_http_request_t *r,
    ngx_platform_webhook_ctx_t *w, u_char *data, size_t len);
static void ngx_platform_webhooks_work(void *data);
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
    "", 0
};


/* the claim let go, only while it is still this request's */

static ngx_platform_redis_script_t  ngx_platform_webhooks_release_script = {
    "if redis.call('GET', KEYS[1]) == ARGV[1] then\n"
    "  return redis.call('DEL', KEYS[1])\n"
    "end\n"
    "return 0\n",
    "", 0
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
    "\"WebhookReceipt\":{\"oneOf\":["
     "{\"$ref\":\"#/components/schemas/WebhookStored\"},"
     "{\"$ref\":\"#/components/schemas/WebhookDuplicate\"}]},"
    "\"WebhookStored\":{\"type\":\"object\",\"description\":\"A new "
     "event, stored (message: Event received.).\",\"properties\":{"
     "\"id\":{\"type\":\"integer\",\"description\":\"The stored "
     "row's id.\"},"
     "\"duplicate\":{\"const\":false}}},"
    "\"WebhookDuplicate\":{\"type\":\"object\",\"description\":\"An "
     "event stored before, not stored again (message: Event already "
     "received.).\",\"properties\":{"
     "\"duplicate\":{\"const\":true}}}"
    "}";


/* the intake's answers, for its code and its documentation alike */
#define NGX_PLATFORM_WEBHOOK_RECEIVED         "Event received."
#define NGX_PLATFORM_WEBHOOK_NO_SOURCE        "Unknown webhook source."
#define NGX_PLATFORM_WEBHOOK_NO_SOURCE_DETAIL "No such source is configured."
#define NGX_PLATFORM_WEBHOOK_NO_METHOD        "Unknown payment method."
#define NGX_PLATFORM_WEBHOOK_NO_METHOD_DETAIL                                  \
    "No such payment method is configured."

/* the core's answer past the name's max_body, as the document tells it */
#define NGX_PLATFORM_WEBHOOK_TOO_LARGE        "Request body too large."
#define NGX_PLATFORM_WEBHOOK_TOO_LARGE_DETAIL                                  \
    "This route accepts a body of at most <n> bytes."


/*
 * platform_openapi: each endpoint's success data, an example on the demo
 * data (the sources and payment methods of docs/development.md), and
 * what the intake's code refuses
 */

static ngx_platform_doc_answer_t  ngx_platform_webhooks_source_answers[] = {
    { NGX_HTTP_NOT_FOUND, NGX_PLATFORM_WEBHOOK_NO_SOURCE,
      NGX_PLATFORM_WEBHOOK_NO_SOURCE_DETAIL },
    { NGX_HTTP_UNAUTHORIZED, NGX_PLATFORM_WEBHOOK_BAD_SIGNATURE,
      NGX_PLATFORM_WEBHOOK_NO_SIGNATURE },
    { NGX_HTTP_REQUEST_ENTITY_TOO_LARGE, NGX_PLATFORM_WEBHOOK_TOO_LARGE,
      NGX_PLATFORM_WEBHOOK_TOO_LARGE_DETAIL },
    { 0, NULL, NULL }
};


static ngx_platform_doc_answer_t  ngx_platform_webhooks_payment_answers[] = {
    { NGX_HTTP_NOT_FOUND, NGX_PLATFORM_WEBHOOK_NO_METHOD,
      NGX_PLATFORM_WEBHOOK_NO_METHOD_DETAIL },
    { NGX_HTTP_UNAUTHORIZED, NGX_PLATFORM_WEBHOOK_BAD_SIGNATURE,
      NGX_PLATFORM_WEBHOOK_NO_SIGNATURE },
    { NGX_HTTP_REQUEST_ENTITY_TOO_LARGE, NGX_PLATFORM_WEBHOOK_TOO_LARGE,
      NGX_PLATFORM_WEBHOOK_TOO_LARGE_DETAIL },
    { 0, NULL, NULL }
};


static ngx_platform_doc_t  ngx_platform_webhooks_keyed_source_doc = {
    "Receive a source's event (with an API key)",
    ngx_platform_doc_schema("WebhookReceipt"),
    "{\"path\":{\"source\":\"source-a\"},"
    "\"body\":{\"id\":\"evt_demo_1\",\"type\":\"order.paid\"}}",
    ngx_platform_webhooks_source_answers, 0, NGX_PLATFORM_WEBHOOK_RECEIVED
};


static ngx_platform_doc_t  ngx_platform_webhooks_public_source_doc = {
    "Receive a source's event",
    ngx_platform_doc_schema("WebhookReceipt"),
    "{\"path\":{\"source\":\"source-b\"},"
    "\"body\":{\"eventId\":\"b-1\",\"status\":\"ok\"}}",
    ngx_platform_webhooks_source_answers, 0, NGX_PLATFORM_WEBHOOK_RECEIVED
};


static ngx_platform_doc_t  ngx_platform_webhooks_payment_doc = {
    "Receive a payment method's event",
    ngx_platform_doc_schema("WebhookReceipt"),
    "{\"path\":{\"paymentmethod\":\"card\"},"
    "\"body\":{\"reference\":\"T-1001\",\"status\":\"success\"}}",
    ngx_platform_webhooks_payment_answers, 0, NGX_PLATFORM_WEBHOOK_RECEIVED
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
    ngx_platform_webhooks_schemas,
    ngx_platform_webhooks_max_body
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
    ngx_platform_webhook_t      *hook;
    ngx_platform_webhook_ctx_t  *w;

    hook = ngx_platform_webhooks_find(hooks, &ctx->args[0]);

    if (hook == NULL) {
        if (kind[0] == 's') {
            return ngx_platform_fail(r, NGX_HTTP_NOT_FOUND,
                                     NGX_PLATFORM_WEBHOOK_NO_SOURCE,
                                     NGX_PLATFORM_WEBHOOK_NO_SOURCE_DETAIL);
        }

        return ngx_platform_fail(r, NGX_HTTP_NOT_FOUND,
                                 NGX_PLATFORM_WEBHOOK_NO_METHOD,
                                 NGX_PLATFORM_WEBHOOK_NO_METHOD_DETAIL);
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
        rc = ngx_platform_webhook_signature_read(r, ctx, hook, &w->sig);
        if (rc != NGX_OK) {
            return rc;
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
 * Before the body is read: the name's max_body. A name the location does
 * not accept is 404 once its body is checked, and until then is held to
 * the default, so a keyless route takes no more from an invented name.
 */

static off_t
ngx_platform_webhooks_max_body(ngx_http_request_t *r, ngx_platform_ctx_t *ctx)
{
    ngx_array_t              *hooks;
    ngx_platform_webhook_t   *hook;
    ngx_platform_loc_conf_t  *plcf;

    plcf = ngx_http_get_module_loc_conf(r, ngx_platform_module);

    hooks = (ctx->endpoint->handler == ngx_platform_webhooks_source)
            ? plcf->webhook_sources : plcf->webhook_methods;

    hook = ngx_platform_webhooks_find(hooks, &ctx->args[0]);

    return hook ? hook->max_body : NGX_PLATFORM_WEBHOOK_MAX_BODY;
}


static ngx_platform_webhook_t *
ngx_platform_webhooks_find(ngx_array_t *hooks, ngx_str_t *name)
{
    ngx_uint_t               i;
    ngx_platform_webhook_t  *hook;

    if (hooks == NULL) {
        return NULL;
    }

    hook = hooks->elts;

    for (i = 0; i < hooks->nelts; i++) {
        if (hook[i].name.len == name->len
            && ngx_strncmp(hook[i].name.data, name->data, name->len) == 0)
        {
            return &hook[i];
        }
    }

    return NULL;
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
        return ngx_platform_webhooks_set_key(r, w, w->sig.msg_id.data,
                                             w->sig.msg_id.len);
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

    unsigned int  n;

    if (w->need_digest
        && EVP_Digest(w->body, w->body_len, w->digest, &n, EVP_sha256(),
                      NULL)
           != 1)
    {
        w->work_failed = 1;
        return;
    }

    if (w->hook->secrets
        && ngx_platform_webhook_signature_macs(w->hook, &w->sig, w->body,
                                               w->body_len)
           != NGX_OK)
    {
        w->work_failed = 1;
    }
}


/* back in the worker: the signature decided, the key known, then storage */

static ngx_int_t
ngx_platform_webhooks_verified(ngx_http_request_t *r, ngx_platform_ctx_t *ctx)
{
    u_char                      *p;
    ngx_int_t                    rc;
    ngx_uint_t                   tag;
    ngx_platform_webhook_ctx_t  *w;
    ngx_platform_main_conf_t    *pmcf;

    w = ctx->data;

    if (w->work_failed) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "webhooks: a digest of the body failed");
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (w->hook->secrets) {
        rc = ngx_platform_webhook_signature_check(r, ctx, w->hook, &w->sig);
        if (rc != NGX_OK) {
            return rc;
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

    /*
     * With a Redis Cluster the event's name and tenant are a hash tag:
     * webhook:<kind>:{<name>:<tenant>}:<key>
     */

    pmcf = ngx_http_get_module_main_conf(r, ngx_platform_module);
    tag = (pmcf->redis_deployment == NGX_PLATFORM_REDIS_CLUSTER);

    w->redis_key.len = sizeof("webhook::::") - 1 + (tag ? 2 : 0) + w->kind.len
                       + w->hook->name.len + w->tenant.len + w->key.len;
    w->redis_key.data = ngx_pnalloc(r->pool, w->redis_key.len);
    if (w->redis_key.data == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ngx_sprintf(w->redis_key.data,
                tag ? "webhook:%V:{%V:%V}:%V" : "webhook:%V:%V:%V:%V",
                &w->kind, &w->hook->name, &w->tenant, &w->key);

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

    ngx_platform_finalize(r, ngx_platform_send_ok(r,
                                                  NGX_PLATFORM_WEBHOOK_RECEIVED,
                                                  buf, p - buf));
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
