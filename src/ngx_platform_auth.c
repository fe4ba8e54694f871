
/*
 * ngx_platform: who is calling (decisions.md section 2).
 *
 * Each route names the credentials it requires by default; platform_auth
 * replaces that for every route of a location. A request is authenticated
 * after routing and before its body is read:
 *
 *   bearer   a JWT in "Authorization: Bearer", checked by
 *            ngx_platform_jwt.c; remembered per worker until it expires
 *   apikey   the "apiKey" header, looked up by its id in PostgreSQL and
 *            compared by SHA-256 digest in constant time; the outcome is
 *            remembered per worker for platform_apikey_cache_time, an id
 *            that is not found apart (platform_apikey_unknown_cache)
 *   tenant   the family's tenancy headers (tenantId, countryCode, userId)
 *
 * The caller's tenant is the token's, else the key's, else the tenantId
 * header's; a tenantId header that contradicts a credential is 403.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "ngx_platform.h"
#include "ngx_platform_jwt.h"
#include "ngx_platform_op.h"


#define NGX_PLATFORM_AUTH_DIGEST_LEN  32      /* SHA-256 */

/* plk_<16 hex id>.<43 base64url secret> */
#define NGX_PLATFORM_APIKEY_PREFIX    "plk_"
#define NGX_PLATFORM_APIKEY_ID_LEN    16
#define NGX_PLATFORM_APIKEY_LEN       64


/*
 * A per-worker LRU cache of authentication outcomes, keyed by the SHA-256
 * digest of the credential presented. Entries are allocated from the heap:
 * they outlive requests and configuration cycles of nothing but this
 * worker.
 */

typedef struct {
    ngx_rbtree_t                rbtree;
    ngx_rbtree_node_t           sentinel;
    ngx_queue_t                 lru;
    ngx_uint_t                  n;
    ngx_uint_t                  max;
} ngx_platform_auth_cache_t;


/* the values an entry keeps */
#define NGX_PLATFORM_AUTH_V_TENANT    0   /* tenantId claim; key's tenant */
#define NGX_PLATFORM_AUTH_V_SUBJECT   1   /* sub claim; key's id */
#define NGX_PLATFORM_AUTH_V_MERCHANT  2   /* merchantId claim; key's scope */
#define NGX_PLATFORM_AUTH_VALUES      3


typedef struct {
    ngx_rbtree_node_t           node;
    ngx_queue_t                 queue;

    /* tokens: the location conf whose keys and rules checked the token */
    void                       *owner;
    u_char                      digest[NGX_PLATFORM_AUTH_DIGEST_LEN];

    time_t                      expires;    /* tokens: exp plus leeway */
    ngx_msec_t                  fetched;    /* keys: when looked up */
    ngx_uint_t                  valid;      /* keys: known, not revoked */

    /* keys: the digest stored for the key id, compared in constant time */
    u_char                      stored[NGX_PLATFORM_AUTH_DIGEST_LEN];

    ngx_str_t                   values[NGX_PLATFORM_AUTH_VALUES];
} ngx_platform_auth_entry_t;


static ngx_uint_t ngx_platform_auth_bearer_present(ngx_http_request_t *r,
    ngx_platform_loc_conf_t *plcf, ngx_uint_t policy);
static ngx_table_elt_t *ngx_platform_auth_bearer_header(
    ngx_http_request_t *r);
static ngx_int_t ngx_platform_auth_token(ngx_table_elt_t *h,
    ngx_str_t *token);
static ngx_int_t ngx_platform_auth_bearer(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx, ngx_platform_loc_conf_t *plcf);
static ngx_int_t ngx_platform_auth_peek_bearer(ngx_http_request_t *r,
    ngx_platform_loc_conf_t *plcf, ngx_platform_identity_t *id);
static ngx_int_t ngx_platform_auth_peek_apikey(ngx_http_request_t *r,
    ngx_platform_loc_conf_t *plcf, ngx_platform_identity_t *id);
static ngx_int_t ngx_platform_auth_invalid_token(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx, const char *reason);
static ngx_int_t ngx_platform_auth_apikey(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx, ngx_platform_loc_conf_t *plcf);
static ngx_int_t ngx_platform_auth_apikey_digest(ngx_http_request_t *r,
    ngx_str_t *key, u_char *digest);
static void ngx_platform_auth_apikey_done(void *data,
    ngx_platform_pg_op_t *op, PGresult *res, ngx_int_t rc);
static ngx_int_t ngx_platform_auth_apikey_use(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx, ngx_platform_loc_conf_t *plcf,
    ngx_uint_t valid, ngx_str_t *values);
static ngx_uint_t ngx_platform_auth_unknown_id(ngx_http_request_t *r,
    ngx_platform_loc_conf_t *plcf, u_char *id_digest);
static void ngx_platform_auth_remember(ngx_http_request_t *r,
    ngx_platform_loc_conf_t *plcf, ngx_str_t *id, ngx_uint_t found,
    ngx_uint_t known, u_char *stored, ngx_str_t *values);
static ngx_int_t ngx_platform_auth_tenancy(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx, ngx_uint_t policy);
static ngx_uint_t ngx_platform_auth_policy_of(ngx_platform_loc_conf_t *plcf,
    ngx_platform_endpoint_t *ep);
static ngx_int_t ngx_platform_auth_unauthorized(ngx_http_request_t *r,
    const char *message, const char *detail);
static ngx_int_t ngx_platform_auth_copy(ngx_http_request_t *r,
    ngx_str_t *src, ngx_str_t *dst);
static ngx_int_t ngx_platform_auth_digest(ngx_str_t *data, u_char *digest);

static void ngx_platform_auth_cache_init(ngx_platform_auth_cache_t *cache,
    ngx_uint_t max);
static ngx_platform_auth_entry_t *ngx_platform_auth_cache_find(
    ngx_platform_auth_cache_t *cache, void *owner, u_char *digest);
static ngx_platform_auth_entry_t *ngx_platform_auth_cache_add(
    ngx_platform_auth_cache_t *cache, void *owner, u_char *digest,
    ngx_str_t *values);
static void ngx_platform_auth_cache_delete(ngx_platform_auth_cache_t *cache,
    ngx_platform_auth_entry_t *e);
static void ngx_platform_auth_cache_free(ngx_platform_auth_cache_t *cache);
static void ngx_platform_auth_rbtree_insert_value(ngx_rbtree_node_t *temp,
    ngx_rbtree_node_t *node, ngx_rbtree_node_t *sentinel);


static ngx_platform_pg_stmt_t  ngx_platform_auth_apikey_stmt = {
    "platform_auth_apikey",

    "SELECT tenant_id, scope, encode(key_digest, 'hex'),"
    " revoked_at IS NOT NULL"
    " FROM api_keys WHERE id = $1",

    1, 0, 1
};


static ngx_platform_auth_cache_t  ngx_platform_auth_tokens;
static ngx_platform_auth_cache_t  ngx_platform_auth_keys;

/*
 * Key ids not found, kept apart: a flood of made-up ids costs one lookup
 * each and cannot push the known keys out of their cache.
 */
static ngx_platform_auth_cache_t  ngx_platform_auth_unknown;
static ngx_uint_t                 ngx_platform_auth_ready;


ngx_int_t
ngx_platform_authenticate(ngx_http_request_t *r, ngx_platform_ctx_t *ctx,
    ngx_platform_resume_pt resume)
{
    ngx_int_t                 rc;
    ngx_uint_t                policy;
    ngx_platform_loc_conf_t  *plcf;

    plcf = ngx_http_get_module_loc_conf(r, ngx_platform_module);

    policy = ngx_platform_auth_policy_of(plcf, ctx->endpoint);

    /* an API key's lookup, if one is needed, answers there */
    ctx->resume = resume;

    if ((policy & NGX_PLATFORM_AUTH_BEARER)
        || ngx_platform_auth_bearer_present(r, plcf, policy))
    {
        rc = ngx_platform_auth_bearer(r, ctx, plcf);
        if (rc != NGX_OK) {
            return rc;
        }
    }

    if (policy & NGX_PLATFORM_AUTH_APIKEY) {
        rc = ngx_platform_auth_apikey(r, ctx, plcf);
        if (rc != NGX_OK) {
            return rc;   /* NGX_DONE: looked up in PostgreSQL */
        }
    }

    return ngx_platform_auth_tenancy(r, ctx, policy);
}


/*
 * Before the content handler: the route's policy as the handler will
 * find it, then the credentials it requires, or the tenantId header
 * when it requires none. Nothing here logs, counts, caches or waits.
 */

ngx_int_t
ngx_platform_auth_peek(ngx_http_request_t *r, ngx_platform_identity_t *id)
{
    ngx_int_t                 rc;
    ngx_uint_t                policy;
    ngx_table_elt_t          *h;
    ngx_platform_ctx_t        routed;
    ngx_platform_loc_conf_t  *plcf;

    ngx_memzero(id, sizeof(ngx_platform_identity_t));

    plcf = ngx_http_get_module_loc_conf(r, ngx_platform_module);

    if (plcf == NULL || plcf->family == NULL || plcf->routes == NULL) {
        return NGX_OK;
    }

    ngx_memzero(&routed, sizeof(ngx_platform_ctx_t));

    rc = ngx_platform_route(r, &routed, plcf->routes);

    if (rc != NGX_OK) {
        /* no such route: nobody; out of memory: an error */
        return (rc == NGX_HTTP_INTERNAL_SERVER_ERROR) ? NGX_ERROR : NGX_OK;
    }

    policy = ngx_platform_auth_policy_of(plcf, routed.endpoint);

    if ((policy & NGX_PLATFORM_AUTH_BEARER)
        || ngx_platform_auth_bearer_present(r, plcf, policy))
    {
        /* the token's tenant; an API key, if required, must agree */
        return ngx_platform_auth_peek_bearer(r, plcf, id);
    }

    if (policy & NGX_PLATFORM_AUTH_APIKEY) {
        return ngx_platform_auth_peek_apikey(r, plcf, id);
    }

    h = ngx_platform_header(r, "tenantId");

    if (h && ngx_platform_name_valid(h->value.data, h->value.len)) {
        id->tenant = h->value;
    }

    return NGX_OK;
}


static ngx_int_t
ngx_platform_auth_peek_bearer(ngx_http_request_t *r,
    ngx_platform_loc_conf_t *plcf, ngx_platform_identity_t *id)
{
    u_char                      digest[NGX_PLATFORM_AUTH_DIGEST_LEN];
    ngx_str_t                   token, values[NGX_PLATFORM_AUTH_VALUES];
    ngx_table_elt_t            *h;
    ngx_platform_jwt_claims_t   claims;
    ngx_platform_auth_entry_t  *e;

    h = ngx_platform_auth_bearer_header(r);

    if (h == NULL || ngx_platform_auth_token(h, &token) != NGX_OK) {
        return NGX_OK;
    }

    if (plcf->jwt_cache && ngx_platform_auth_ready) {

        if (ngx_platform_auth_digest(&token, digest) != NGX_OK) {
            return NGX_ERROR;
        }

        e = ngx_platform_auth_cache_find(&ngx_platform_auth_tokens, plcf,
                                         digest);

        if (e && ngx_time() < e->expires) {
            if (ngx_platform_auth_copy(r, e->values, values) != NGX_OK) {
                return NGX_ERROR;
            }

            id->tenant = values[NGX_PLATFORM_AUTH_V_TENANT];
            id->subject = values[NGX_PLATFORM_AUTH_V_SUBJECT];
            return NGX_OK;
        }
    }

    /* the handler verifies it again, and caches it */

    if (ngx_platform_jwt_verify(r, plcf, &token, &claims) == NULL) {
        id->tenant = claims.tenant;
        id->subject = claims.subject;
    }

    return NGX_OK;
}


/* only a key the worker has looked up: a lookup would wait */

static ngx_int_t
ngx_platform_auth_peek_apikey(ngx_http_request_t *r,
    ngx_platform_loc_conf_t *plcf, ngx_platform_identity_t *id)
{
    u_char                      digest[NGX_PLATFORM_AUTH_DIGEST_LEN];
    u_char                      id_digest[NGX_PLATFORM_AUTH_DIGEST_LEN];
    ngx_str_t                   key_id, values[NGX_PLATFORM_AUTH_VALUES];
    ngx_table_elt_t            *h;
    ngx_platform_auth_entry_t  *e;

    h = ngx_platform_header(r, "apiKey");

    if (h == NULL || h->value.len != NGX_PLATFORM_APIKEY_LEN
        || ngx_strncmp(h->value.data, NGX_PLATFORM_APIKEY_PREFIX,
                       sizeof(NGX_PLATFORM_APIKEY_PREFIX) - 1)
           != 0
        || !ngx_platform_auth_ready)
    {
        return NGX_OK;
    }

    key_id.data = h->value.data + sizeof(NGX_PLATFORM_APIKEY_PREFIX) - 1;
    key_id.len = NGX_PLATFORM_APIKEY_ID_LEN;

    if (ngx_platform_auth_digest(&key_id, id_digest) != NGX_OK
        || ngx_platform_auth_digest(&h->value, digest) != NGX_OK)
    {
        return NGX_ERROR;
    }

    e = ngx_platform_auth_cache_find(&ngx_platform_auth_keys, NULL,
                                     id_digest);

    if (e == NULL || ngx_current_msec - e->fetched >= plcf->apikey_cache_time
        || !e->valid
        || CRYPTO_memcmp(digest, e->stored, NGX_PLATFORM_AUTH_DIGEST_LEN) != 0)
    {
        return NGX_OK;
    }

    if (ngx_platform_auth_copy(r, e->values, values) != NGX_OK) {
        return NGX_ERROR;
    }

    if (ngx_platform_name_valid(values[NGX_PLATFORM_AUTH_V_TENANT].data,
                                values[NGX_PLATFORM_AUTH_V_TENANT].len))
    {
        id->tenant = values[NGX_PLATFORM_AUTH_V_TENANT];
        id->key_id = values[NGX_PLATFORM_AUTH_V_SUBJECT];
    }

    return NGX_OK;
}


static ngx_uint_t
ngx_platform_auth_policy_of(ngx_platform_loc_conf_t *plcf,
    ngx_platform_endpoint_t *ep)
{
    if (plcf->auth != NGX_CONF_UNSET_UINT) {
        return plcf->auth;
    }

    return ep->auth;
}


/*
 * A route that trusts the tenancy headers alone still verifies a bearer
 * token that is sent, where the location has keys to verify it with: a
 * bad token is 401, and a token of another tenant than the header 403
 * (ngx_platform_auth_tenancy), rather than a credential silently ignored.
 */

static ngx_uint_t
ngx_platform_auth_bearer_present(ngx_http_request_t *r,
    ngx_platform_loc_conf_t *plcf, ngx_uint_t policy)
{
    if (!(policy & NGX_PLATFORM_AUTH_TENANT) || plcf->jwt == NULL) {
        return 0;
    }

    return ngx_platform_auth_bearer_header(r) != NULL;
}


/* the Authorization header when its scheme is Bearer (any case), or NULL */

static ngx_table_elt_t *
ngx_platform_auth_bearer_header(ngx_http_request_t *r)
{
    ngx_table_elt_t  *h;

    h = r->headers_in.authorization;

    if (h == NULL || h->value.len < sizeof("Bearer ") - 1
        || ngx_strncasecmp(h->value.data, (u_char *) "Bearer ",
                           sizeof("Bearer ") - 1)
           != 0)
    {
        return NULL;
    }

    return h;
}


/* the token of an Authorization: Bearer header: NGX_OK, or none */

static ngx_int_t
ngx_platform_auth_token(ngx_table_elt_t *h, ngx_str_t *token)
{
    u_char  *p, *end;

    p = h->value.data + sizeof("Bearer ") - 1;
    end = h->value.data + h->value.len;

    while (p < end && *p == ' ') {
        p++;
    }

    while (end > p && end[-1] == ' ') {
        end--;
    }

    if (p == end) {
        return NGX_DECLINED;
    }

    token->data = p;
    token->len = end - p;

    return NGX_OK;
}


/* bearer tokens */

static ngx_int_t
ngx_platform_auth_bearer(ngx_http_request_t *r, ngx_platform_ctx_t *ctx,
    ngx_platform_loc_conf_t *plcf)
{
    u_char                      digest[NGX_PLATFORM_AUTH_DIGEST_LEN];
    ngx_str_t                   token, values[NGX_PLATFORM_AUTH_VALUES];
    const char                 *reason;
    ngx_table_elt_t            *h;
    ngx_platform_jwt_claims_t   claims;
    ngx_platform_auth_entry_t  *e;

    h = ngx_platform_auth_bearer_header(r);

    if (h == NULL || ngx_platform_auth_token(h, &token) != NGX_OK) {
        return ngx_platform_auth_unauthorized(r, "Authentication required.",
                                              "A bearer token is required.");
    }

    e = NULL;

    if (plcf->jwt_cache && ngx_platform_auth_ready) {

        if (ngx_platform_auth_digest(&token, digest) != NGX_OK) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        e = ngx_platform_auth_cache_find(&ngx_platform_auth_tokens, plcf,
                                         digest);

        if (e && ngx_time() >= e->expires) {
            ngx_platform_auth_cache_delete(&ngx_platform_auth_tokens, e);
            return ngx_platform_auth_invalid_token(r, ctx,
                                                   "The token has expired.");
        }
    }

    if (e) {
        /* the entry may be gone before the request is */

        if (ngx_platform_auth_copy(r, e->values, values) != NGX_OK) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        ngx_platform_metric_inc(NGX_PLATFORM_M_TOKENS_CACHED);

    } else {
        ngx_platform_metric_inc(NGX_PLATFORM_M_TOKENS_VERIFIED);

        reason = ngx_platform_jwt_verify(r, plcf, &token, &claims);
        if (reason) {
            return ngx_platform_auth_invalid_token(r, ctx, reason);
        }

        values[NGX_PLATFORM_AUTH_V_TENANT] = claims.tenant;
        values[NGX_PLATFORM_AUTH_V_SUBJECT] = claims.subject;
        values[NGX_PLATFORM_AUTH_V_MERCHANT] = claims.merchant;

        if (plcf->jwt_cache && ngx_platform_auth_ready) {
            e = ngx_platform_auth_cache_add(&ngx_platform_auth_tokens, plcf,
                                            digest, values);
            if (e) {
                e->expires = claims.expires;
            }
        }
    }

    ctx->identity.tenant = values[NGX_PLATFORM_AUTH_V_TENANT];
    ctx->identity.subject = values[NGX_PLATFORM_AUTH_V_SUBJECT];
    ctx->identity.merchant = values[NGX_PLATFORM_AUTH_V_MERCHANT];
    ctx->identity.bearer = 1;

    return NGX_OK;
}


static ngx_int_t
ngx_platform_auth_invalid_token(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx, const char *reason)
{
    u_char  *p;
    size_t   len;

    ngx_platform_log_limited(NGX_PLATFORM_LOG_TOKEN_REFUSED, NGX_LOG_INFO,
                             r->connection->log, 0,
                             "platform: bearer token refused: %s", reason);

    ngx_platform_metric_inc(NGX_PLATFORM_M_TOKENS_REFUSED);

    /* RFC 6750 section 3 */

    len = sizeof("Bearer error=\"invalid_token\", error_description=\"\"") - 1
          + ngx_strlen(reason);

    p = ngx_pnalloc(r->pool, len);
    if (p == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ctx->challenge.data = p;
    ctx->challenge.len = ngx_sprintf(p, "Bearer error=\"invalid_token\", "
                                     "error_description=\"%s\"", reason)
                         - p;

    return ngx_platform_fail(r, NGX_HTTP_UNAUTHORIZED, "Invalid token.",
                             reason);
}


/* API keys */

/*
 * What a lookup found is kept by key id, not by the key presented: a
 * caller varying the secret part of one key id, known or not, is
 * answered from the cache and cannot make the worker query PostgreSQL
 * again and again.
 */

static ngx_int_t
ngx_platform_auth_apikey(ngx_http_request_t *r, ngx_platform_ctx_t *ctx,
    ngx_platform_loc_conf_t *plcf)
{
    u_char                      digest[NGX_PLATFORM_AUTH_DIGEST_LEN];
    u_char                      id_digest[NGX_PLATFORM_AUTH_DIGEST_LEN];
    ngx_int_t                   rc;
    ngx_str_t                   id, values[NGX_PLATFORM_AUTH_VALUES];
    ngx_uint_t                  valid;
    ngx_table_elt_t            *h;
    ngx_platform_auth_entry_t  *e;

    h = ngx_platform_header(r, "apiKey");

    if (h == NULL || h->value.len == 0) {
        return ngx_platform_auth_unauthorized(r, "Authentication required.",
                                              "An API key is required.");
    }

    rc = ngx_platform_auth_apikey_digest(r, &h->value, digest);
    if (rc != NGX_OK) {
        return rc;
    }

    id.data = h->value.data + sizeof(NGX_PLATFORM_APIKEY_PREFIX) - 1;
    id.len = NGX_PLATFORM_APIKEY_ID_LEN;

    if (ngx_platform_auth_ready) {

        if (ngx_platform_auth_digest(&id, id_digest) != NGX_OK) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        e = ngx_platform_auth_cache_find(&ngx_platform_auth_keys, NULL,
                                         id_digest);

        if (e && ngx_current_msec - e->fetched < plcf->apikey_cache_time) {
            valid = e->valid
                    && CRYPTO_memcmp(digest, e->stored,
                                     NGX_PLATFORM_AUTH_DIGEST_LEN)
                       == 0;

            if (ngx_platform_auth_copy(r, e->values, values) != NGX_OK) {
                return NGX_HTTP_INTERNAL_SERVER_ERROR;
            }

            return ngx_platform_auth_apikey_use(r, ctx, plcf, valid, values);
        }

        if (ngx_platform_auth_unknown_id(r, plcf, id_digest)) {
            ngx_memzero(values, sizeof(values));
            return ngx_platform_auth_apikey_use(r, ctx, plcf, 0, values);
        }
    }

    ngx_platform_metric_inc(NGX_PLATFORM_M_APIKEY_LOOKUPS);

    /* NGX_DONE, or the backend's failure recorded */

    return ngx_platform_query(r, &ngx_platform_auth_apikey_stmt, &id,
                              ngx_platform_auth_apikey_done);
}


/* a key of the right form gets its digest; any other is refused at once */

static ngx_int_t
ngx_platform_auth_apikey_digest(ngx_http_request_t *r, ngx_str_t *key,
    u_char *digest)
{
    u_char      c;
    size_t      i, start;
    ngx_uint_t  ok;

    ok = key->len == NGX_PLATFORM_APIKEY_LEN
         && ngx_strncmp(key->data, NGX_PLATFORM_APIKEY_PREFIX,
                        sizeof(NGX_PLATFORM_APIKEY_PREFIX) - 1)
            == 0;

    start = sizeof(NGX_PLATFORM_APIKEY_PREFIX) - 1;

    for (i = start; ok && i < key->len; i++) {
        c = key->data[i];

        if (i < start + NGX_PLATFORM_APIKEY_ID_LEN) {
            ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');

        } else if (i == start + NGX_PLATFORM_APIKEY_ID_LEN) {
            ok = (c == '.');

        } else {
            ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z')
                 || (c >= 'A' && c <= 'Z') || c == '-' || c == '_';
        }
    }

    if (!ok) {
        ngx_platform_log_limited(NGX_PLATFORM_LOG_KEY_REFUSED, NGX_LOG_INFO,
                                 r->connection->log, 0,
                                 "platform: API key refused: malformed");

        ngx_platform_metric_inc(NGX_PLATFORM_M_APIKEYS_REFUSED);

        return ngx_platform_auth_unauthorized(r, "Invalid API key.",
                                              "The API key is not valid.");
    }

    if (ngx_platform_auth_digest(key, digest) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return NGX_OK;
}


static void
ngx_platform_auth_apikey_done(void *data, ngx_platform_pg_op_t *op,
    PGresult *res, ngx_int_t rc)
{
    ngx_http_request_t *r = data;

    u_char                    digest[NGX_PLATFORM_AUTH_DIGEST_LEN];
    u_char                    stored[NGX_PLATFORM_AUTH_DIGEST_LEN];
    u_char                   *hex;
    ngx_str_t                 id, values[NGX_PLATFORM_AUTH_VALUES];
    ngx_uint_t                known, valid, i;
    ngx_table_elt_t          *h;
    ngx_platform_ctx_t       *ctx;
    ngx_platform_loc_conf_t  *plcf;

    ctx = ngx_platform_get_ctx(r);

    if (rc != NGX_OK) {
        ctx->resume(r, ngx_platform_backend_fail(r, rc));
        return;
    }

    plcf = ngx_http_get_module_loc_conf(r, ngx_platform_module);

    /* the header was checked before the lookup */

    h = ngx_platform_header(r, "apiKey");

    if (h == NULL || h->value.len != NGX_PLATFORM_APIKEY_LEN
        || ngx_platform_auth_digest(&h->value, digest) != NGX_OK)
    {
        ctx->resume(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }

    id.data = h->value.data + sizeof(NGX_PLATFORM_APIKEY_PREFIX) - 1;
    id.len = NGX_PLATFORM_APIKEY_ID_LEN;

    ngx_memzero(values, sizeof(values));
    ngx_memzero(stored, sizeof(stored));
    known = 0;

    if (PQntuples(res) == 1 && PQgetlength(res, 0, 2) == 64) {

        hex = (u_char *) PQgetvalue(res, 0, 2);

        for (i = 0; i < NGX_PLATFORM_AUTH_DIGEST_LEN; i++) {
            stored[i] = (u_char) ngx_hextoi(&hex[2 * i], 2);
        }

        known = (PQgetvalue(res, 0, 3)[0] == 'f');

        values[NGX_PLATFORM_AUTH_V_TENANT].data =
                                          (u_char *) PQgetvalue(res, 0, 0);
        values[NGX_PLATFORM_AUTH_V_TENANT].len = PQgetlength(res, 0, 0);

        values[NGX_PLATFORM_AUTH_V_SUBJECT] = id;

        values[NGX_PLATFORM_AUTH_V_MERCHANT].data =
                                          (u_char *) PQgetvalue(res, 0, 1);
        values[NGX_PLATFORM_AUTH_V_MERCHANT].len = PQgetlength(res, 0, 1);

        if (!known) {
            ngx_memzero(values, sizeof(values));
        }
    }

    valid = known
            && CRYPTO_memcmp(digest, stored, NGX_PLATFORM_AUTH_DIGEST_LEN)
               == 0;

    ngx_platform_auth_remember(r, plcf, &id, PQntuples(res) == 1, known,
                               stored, values);

    /* PQgetvalue() strings die with res: the identity needs its own */

    if (ngx_platform_auth_copy(r, values, values) != NGX_OK) {
        ctx->resume(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }

    rc = ngx_platform_auth_apikey_use(r, ctx, plcf, valid, values);

    if (rc == NGX_OK) {
        rc = ngx_platform_auth_tenancy(r, ctx,
                             ngx_platform_auth_policy_of(plcf, ctx->endpoint));
    }

    ctx->resume(r, rc);
}


/*
 * An id found not to exist a moment ago is not looked up again: for
 * platform_apikey_unknown_cache's time, or the location's
 * platform_apikey_cache_time when it is shorter (0: every key is looked up).
 */

static ngx_uint_t
ngx_platform_auth_unknown_id(ngx_http_request_t *r,
    ngx_platform_loc_conf_t *plcf, u_char *id_digest)
{
    ngx_platform_main_conf_t   *pmcf;
    ngx_platform_auth_entry_t  *e;

    pmcf = ngx_http_get_module_main_conf(r, ngx_platform_module);

    if (pmcf->apikey_unknown_size == 0) {
        return 0;
    }

    e = ngx_platform_auth_cache_find(&ngx_platform_auth_unknown, NULL,
                                     id_digest);
    if (e == NULL) {
        return 0;
    }

    if (ngx_current_msec - e->fetched < pmcf->apikey_unknown_time
        && ngx_current_msec - e->fetched < plcf->apikey_cache_time)
    {
        return 1;
    }

    return 0;
}


/*
 * What a lookup found, by key id: a key (known, or revoked) for
 * platform_apikey_cache_time; an id without a key among the unknown ones.
 */

static void
ngx_platform_auth_remember(ngx_http_request_t *r,
    ngx_platform_loc_conf_t *plcf, ngx_str_t *id, ngx_uint_t found,
    ngx_uint_t known, u_char *stored, ngx_str_t *values)
{
    u_char                      id_digest[NGX_PLATFORM_AUTH_DIGEST_LEN];
    ngx_platform_auth_cache_t  *cache;
    ngx_platform_main_conf_t   *pmcf;
    ngx_platform_auth_entry_t  *e;

    if (!ngx_platform_auth_ready
        || ngx_platform_auth_digest(id, id_digest) != NGX_OK)
    {
        return;
    }

    pmcf = ngx_http_get_module_main_conf(r, ngx_platform_module);

    if (found) {
        if (plcf->apikey_cache_time == 0) {
            return;
        }

        cache = &ngx_platform_auth_keys;

    } else {
        if (pmcf->apikey_unknown_size == 0) {
            return;
        }

        cache = &ngx_platform_auth_unknown;
    }

    e = ngx_platform_auth_cache_find(cache, NULL, id_digest);
    if (e) {
        ngx_platform_auth_cache_delete(cache, e);
    }

    e = ngx_platform_auth_cache_add(cache, NULL, id_digest, values);
    if (e) {
        e->fetched = ngx_current_msec;
        e->valid = known;
        ngx_memcpy(e->stored, stored, NGX_PLATFORM_AUTH_DIGEST_LEN);
    }
}


static ngx_int_t
ngx_platform_auth_apikey_use(ngx_http_request_t *r, ngx_platform_ctx_t *ctx,
    ngx_platform_loc_conf_t *plcf, ngx_uint_t valid, ngx_str_t *values)
{
    ngx_str_t   *tenant, *scope, *s;
    ngx_uint_t   i;

    if (!valid) {
        /* unknown, revoked or a wrong secret: one answer for all */

        ngx_platform_log_limited(NGX_PLATFORM_LOG_KEY_REFUSED, NGX_LOG_INFO,
                                 r->connection->log, 0,
                                 "platform: API key refused: unknown or "
                                 "revoked");

        ngx_platform_metric_inc(NGX_PLATFORM_M_APIKEYS_REFUSED);

        return ngx_platform_auth_unauthorized(r, "Invalid API key.",
                                              "The API key is not valid.");
    }

    tenant = &values[NGX_PLATFORM_AUTH_V_TENANT];
    scope = &values[NGX_PLATFORM_AUTH_V_MERCHANT];

    if (!ngx_platform_name_valid(tenant->data, tenant->len)) {
        /* written around scripts/apikey: never let it name a Redis key */

        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "platform: API key \"%V\" has an unusable tenant",
                      &values[NGX_PLATFORM_AUTH_V_SUBJECT]);

        return ngx_platform_auth_unauthorized(r, "Invalid API key.",
                                              "The API key is not valid.");
    }

    if (plcf->apikey_scopes) {
        s = plcf->apikey_scopes->elts;

        for (i = 0; i < plcf->apikey_scopes->nelts; i++) {
            if (s[i].len == scope->len
                && ngx_strncmp(s[i].data, scope->data, scope->len) == 0)
            {
                break;
            }
        }

        if (i == plcf->apikey_scopes->nelts) {
            ngx_platform_log_limited(NGX_PLATFORM_LOG_KEY_REFUSED, NGX_LOG_INFO,
                                     r->connection->log, 0,
                                     "platform: API key refused: scope "
                                     "\"%V\" is not accepted here", scope);

            ngx_platform_metric_inc(NGX_PLATFORM_M_APIKEYS_REFUSED);

            return ngx_platform_fail(r, NGX_HTTP_FORBIDDEN, "Access denied.",
                                "The API key is not valid for this endpoint.");
        }
    }

    if (ctx->identity.bearer
        && (ctx->identity.tenant.len != tenant->len
            || ngx_strncmp(ctx->identity.tenant.data, tenant->data,
                           tenant->len)
               != 0))
    {
        return ngx_platform_fail(r, NGX_HTTP_FORBIDDEN, "Access denied.",
                       "The API key and the token belong to other tenants.");
    }

    if (!ctx->identity.bearer) {
        ctx->identity.tenant = *tenant;
    }

    ctx->identity.key_id = values[NGX_PLATFORM_AUTH_V_SUBJECT];
    ctx->identity.key_scope = *scope;
    ctx->identity.apikey = 1;

    return NGX_OK;
}


/*
 * The tenantId header: required when the policy names "tenant", checked
 * against the credentials whenever it is sent. The endpoint's other
 * inputs (countryCode, userId, merchantId) are the request core's.
 */

static ngx_int_t
ngx_platform_auth_tenancy(ngx_http_request_t *r, ngx_platform_ctx_t *ctx,
    ngx_uint_t policy)
{
    ngx_int_t                 rc;
    ngx_str_t                 tenant;
    ngx_table_elt_t          *h;
    ngx_platform_identity_t  *id;

    id = &ctx->identity;

    if (policy & NGX_PLATFORM_AUTH_TENANT) {
        rc = ngx_platform_require_header(r, "tenantId", &tenant);
        if (rc != NGX_OK) {
            return rc;
        }

        h = NULL;

    } else {
        h = ngx_platform_header(r, "tenantId");

        if (h == NULL) {
            ngx_str_null(&tenant);

        } else {
            tenant = h->value;
        }
    }

    if (id->bearer || id->apikey) {
        if (tenant.data
            && (tenant.len != id->tenant.len
                || ngx_strncmp(tenant.data, id->tenant.data, tenant.len)
                   != 0))
        {
            return ngx_platform_fail(r, NGX_HTTP_FORBIDDEN, "Access denied.",
                        "The tenantId header does not match the credentials.");
        }

    } else if (tenant.data
               && (h == NULL
                   || ngx_platform_name_valid(tenant.data, tenant.len)))
    {
        /* no credential: the header names the tenant */
        id->tenant = tenant;
    }

    return NGX_OK;
}


static ngx_int_t
ngx_platform_auth_unauthorized(ngx_http_request_t *r, const char *message,
    const char *detail)
{
    ngx_platform_ctx_t  *ctx;

    ctx = ngx_platform_get_ctx(r);

    ngx_str_set(&ctx->challenge, "Bearer");

    return ngx_platform_fail(r, NGX_HTTP_UNAUTHORIZED, message, detail);
}


/* values into the request pool */

static ngx_int_t
ngx_platform_auth_copy(ngx_http_request_t *r, ngx_str_t *src, ngx_str_t *dst)
{
    u_char      *p;
    size_t       size;
    ngx_uint_t   i;

    size = 0;

    for (i = 0; i < NGX_PLATFORM_AUTH_VALUES; i++) {
        size += src[i].len;
    }

    p = ngx_pnalloc(r->pool, size + 1);
    if (p == NULL) {
        return NGX_ERROR;
    }

    /* src may be dst */

    for (i = 0; i < NGX_PLATFORM_AUTH_VALUES; i++) {
        if (src[i].len) {
            ngx_memcpy(p, src[i].data, src[i].len);
        }

        dst[i].len = src[i].len;
        dst[i].data = src[i].len ? p : NULL;
        p += src[i].len;
    }

    return NGX_OK;
}


static ngx_int_t
ngx_platform_auth_digest(ngx_str_t *data, u_char *digest)
{
    unsigned int  len;

    if (EVP_Digest(data->data, data->len, digest, &len, EVP_sha256(), NULL)
        != 1)
    {
        return NGX_ERROR;
    }

    return NGX_OK;
}


/* configuration */

/* platform_auth bearer apikey tenant; platform_auth none; */

char *
ngx_platform_auth_policy(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_platform_loc_conf_t *plcf = conf;

    ngx_str_t   *value;
    ngx_uint_t   i, bit, none;

    if (plcf->auth != NGX_CONF_UNSET_UINT) {
        return "is duplicate";
    }

    value = cf->args->elts;

    plcf->auth = NGX_PLATFORM_AUTH_NONE;
    none = 0;

    for (i = 1; i < cf->args->nelts; i++) {

        if (ngx_strcmp(value[i].data, "none") == 0) {
            none = 1;
            continue;

        } else if (ngx_strcmp(value[i].data, "bearer") == 0) {
            bit = NGX_PLATFORM_AUTH_BEARER;

        } else if (ngx_strcmp(value[i].data, "apikey") == 0) {
            bit = NGX_PLATFORM_AUTH_APIKEY;

        } else if (ngx_strcmp(value[i].data, "tenant") == 0) {
            bit = NGX_PLATFORM_AUTH_TENANT;

        } else {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid value \"%V\", expected \"none\" or "
                               "any of \"bearer\", \"apikey\", \"tenant\"",
                               &value[i]);
            return NGX_CONF_ERROR;
        }

        if (plcf->auth & bit) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "\"%V\" is given twice", &value[i]);
            return NGX_CONF_ERROR;
        }

        plcf->auth |= bit;
    }

    if (none && cf->args->nelts > 2) {
        return "takes \"none\" alone";
    }

    return NGX_CONF_OK;
}


char *
ngx_platform_auth_merge(ngx_conf_t *cf, ngx_platform_loc_conf_t *prev,
    ngx_platform_loc_conf_t *conf)
{
    ngx_uint_t                 needs;
    ngx_platform_endpoint_t   *ep;
    ngx_http_core_loc_conf_t  *clcf;
    ngx_platform_main_conf_t  *pmcf;

    ngx_conf_merge_uint_value(conf->auth, prev->auth, NGX_CONF_UNSET_UINT);
    ngx_conf_merge_ptr_value(conf->jwt, prev->jwt, NULL);
    ngx_conf_merge_str_value(conf->jwt_issuer, prev->jwt_issuer, "");
    ngx_conf_merge_str_value(conf->jwt_audience, prev->jwt_audience, "");
    ngx_conf_merge_value(conf->jwt_leeway, prev->jwt_leeway, 0);
    ngx_conf_merge_value(conf->jwt_cache, prev->jwt_cache, 1);
    ngx_conf_merge_msec_value(conf->apikey_cache_time,
                              prev->apikey_cache_time, 60000);
    ngx_conf_merge_ptr_value(conf->apikey_scopes, prev->apikey_scopes, NULL);

    if (conf->family == NULL) {
        return NGX_CONF_OK;
    }

    /* what the routes of this location will ask for */

    needs = 0;

    for (ep = conf->family->endpoints; ep->pattern; ep++) {
        needs |= ngx_platform_auth_policy_of(conf, ep);
    }

    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);

    if ((needs & NGX_PLATFORM_AUTH_BEARER) && conf->jwt == NULL) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "location \"%V\" requires bearer tokens (by "
                           "\"platform_auth\" or the default of "
                           "\"platform_%V\") but has no \"platform_jwt_key\" "
                           "or \"platform_jwt_jwks\"",
                           &clcf->name, &conf->family->name);
        return NGX_CONF_ERROR;
    }

    if (needs & NGX_PLATFORM_AUTH_APIKEY) {
        pmcf = ngx_http_conf_get_module_main_conf(cf, ngx_platform_module);

        if (pmcf->pg_conninfo.len == 0) {
            ngx_conf_log_error(NGX_LOG_WARN, cf, 0,
                               "location \"%V\" requires API keys, which are "
                               "kept in PostgreSQL, but \"platform_pg\" is "
                               "not set: they will be answered with 503",
                               &clcf->name);
        }

        pmcf->backends |= NGX_PLATFORM_BACKEND_PG;
    }

    return NGX_CONF_OK;
}


/* per-worker caches */

ngx_int_t
ngx_platform_auth_init_process(ngx_cycle_t *cycle)
{
    ngx_platform_main_conf_t  *pmcf;

    pmcf = ngx_http_cycle_get_module_main_conf(cycle, ngx_platform_module);

    ngx_platform_auth_cache_init(&ngx_platform_auth_tokens,
                                 pmcf->auth_cache_size);
    ngx_platform_auth_cache_init(&ngx_platform_auth_keys,
                                 pmcf->auth_cache_size);
    ngx_platform_auth_cache_init(&ngx_platform_auth_unknown,
                                 ngx_max(pmcf->apikey_unknown_size, 1));

    ngx_platform_auth_ready = 1;

    return NGX_OK;
}


void
ngx_platform_auth_exit_process(ngx_cycle_t *cycle)
{
    if (!ngx_platform_auth_ready) {
        return;
    }

    ngx_platform_auth_cache_free(&ngx_platform_auth_tokens);
    ngx_platform_auth_cache_free(&ngx_platform_auth_keys);
    ngx_platform_auth_cache_free(&ngx_platform_auth_unknown);

    ngx_platform_auth_ready = 0;
}


static void
ngx_platform_auth_cache_init(ngx_platform_auth_cache_t *cache, ngx_uint_t max)
{
    ngx_rbtree_init(&cache->rbtree, &cache->sentinel,
                    ngx_platform_auth_rbtree_insert_value);
    ngx_queue_init(&cache->lru);

    cache->n = 0;
    cache->max = max;
}


static ngx_platform_auth_entry_t *
ngx_platform_auth_cache_find(ngx_platform_auth_cache_t *cache, void *owner,
    u_char *digest)
{
    ngx_int_t                   rc;
    ngx_rbtree_key_t            key;
    ngx_rbtree_node_t          *node, *sentinel;
    ngx_platform_auth_entry_t  *e;

    ngx_memcpy(&key, digest, sizeof(ngx_rbtree_key_t));

    node = cache->rbtree.root;
    sentinel = cache->rbtree.sentinel;

    while (node != sentinel) {

        if (key != node->key) {
            node = (key < node->key) ? node->left : node->right;
            continue;
        }

        e = (ngx_platform_auth_entry_t *) node;

        rc = ngx_memcmp(digest, e->digest, NGX_PLATFORM_AUTH_DIGEST_LEN);

        if (rc == 0) {
            rc = (owner == e->owner) ? 0
                 : ((uintptr_t) owner < (uintptr_t) e->owner ? -1 : 1);
        }

        if (rc == 0) {
            ngx_queue_remove(&e->queue);
            ngx_queue_insert_head(&cache->lru, &e->queue);
            return e;
        }

        node = (rc < 0) ? node->left : node->right;
    }

    return NULL;
}


static ngx_platform_auth_entry_t *
ngx_platform_auth_cache_add(ngx_platform_auth_cache_t *cache, void *owner,
    u_char *digest, ngx_str_t *values)
{
    u_char                     *p;
    size_t                      size;
    ngx_uint_t                  i;
    ngx_queue_t                *q;
    ngx_platform_auth_entry_t  *e;

    if (cache->n >= cache->max) {
        q = ngx_queue_last(&cache->lru);
        e = ngx_queue_data(q, ngx_platform_auth_entry_t, queue);
        ngx_platform_auth_cache_delete(cache, e);
    }

    size = sizeof(ngx_platform_auth_entry_t);

    for (i = 0; i < NGX_PLATFORM_AUTH_VALUES; i++) {
        size += values[i].len;
    }

    e = ngx_alloc(size, ngx_cycle->log);
    if (e == NULL) {
        return NULL;
    }

    ngx_memzero(e, sizeof(ngx_platform_auth_entry_t));

    e->owner = owner;
    ngx_memcpy(e->digest, digest, NGX_PLATFORM_AUTH_DIGEST_LEN);
    ngx_memcpy(&e->node.key, digest, sizeof(ngx_rbtree_key_t));

    p = (u_char *) e + sizeof(ngx_platform_auth_entry_t);

    for (i = 0; i < NGX_PLATFORM_AUTH_VALUES; i++) {
        e->values[i].len = values[i].len;
        e->values[i].data = values[i].len ? p : NULL;
        p = ngx_cpymem(p, values[i].data, values[i].len);
    }

    ngx_rbtree_insert(&cache->rbtree, &e->node);
    ngx_queue_insert_head(&cache->lru, &e->queue);
    cache->n++;

    return e;
}


static void
ngx_platform_auth_cache_delete(ngx_platform_auth_cache_t *cache,
    ngx_platform_auth_entry_t *e)
{
    ngx_rbtree_delete(&cache->rbtree, &e->node);
    ngx_queue_remove(&e->queue);
    cache->n--;

    ngx_free(e);
}


static void
ngx_platform_auth_cache_free(ngx_platform_auth_cache_t *cache)
{
    ngx_queue_t                *q;
    ngx_platform_auth_entry_t  *e;

    while (!ngx_queue_empty(&cache->lru)) {
        q = ngx_queue_head(&cache->lru);
        e = ngx_queue_data(q, ngx_platform_auth_entry_t, queue);
        ngx_platform_auth_cache_delete(cache, e);
    }
}


static void
ngx_platform_auth_rbtree_insert_value(ngx_rbtree_node_t *temp,
    ngx_rbtree_node_t *node, ngx_rbtree_node_t *sentinel)
{
    ngx_int_t                   rc;
    ngx_rbtree_node_t         **p;
    ngx_platform_auth_entry_t  *e, *t;

    e = (ngx_platform_auth_entry_t *) node;

    for ( ;; ) {

        if (node->key < temp->key) {
            p = &temp->left;

        } else if (node->key > temp->key) {
            p = &temp->right;

        } else {
            t = (ngx_platform_auth_entry_t *) temp;

            rc = ngx_memcmp(e->digest, t->digest,
                            NGX_PLATFORM_AUTH_DIGEST_LEN);

            if (rc == 0) {
                rc = ((uintptr_t) e->owner < (uintptr_t) t->owner) ? -1 : 1;
            }

            p = (rc < 0) ? &temp->left : &temp->right;
        }

        if (*p == sentinel) {
            break;
        }

        temp = *p;
    }

    *p = node;
    node->parent = temp;
    node->left = sentinel;
    node->right = sentinel;
    ngx_rbt_red(node);
}
