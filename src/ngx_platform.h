
/*
 * ngx_platform: shared declarations of the module core, the request
 * machinery (routing, envelopes, bodies) and the endpoint families.
 */


#ifndef _NGX_PLATFORM_H_INCLUDED_
#define _NGX_PLATFORM_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <jansson.h>


typedef struct ngx_platform_pg_pool_s   ngx_platform_pg_pool_t;
typedef struct ngx_platform_redis_s     ngx_platform_redis_t;
typedef struct ngx_platform_family_s    ngx_platform_family_t;
typedef struct _PQconninfoOption        ngx_platform_pg_options_t;
typedef struct ngx_platform_ctx_s       ngx_platform_ctx_t;
typedef struct ngx_platform_jwt_conf_s  ngx_platform_jwt_conf_t;


/* envelope of a family, decisions.md section 1 */
#define NGX_PLATFORM_ENVELOPE_A      1
#define NGX_PLATFORM_ENVELOPE_B      2
#define NGX_PLATFORM_ENVELOPE_SALES  3


/* response languages of Envelope A families */
#define NGX_PLATFORM_LANG_EN         0
#define NGX_PLATFORM_LANG_FR         1


/* backends a family uses: a worker connects only to those in use */
#define NGX_PLATFORM_BACKEND_PG      0x01
#define NGX_PLATFORM_BACKEND_REDIS   0x02


/* outcome of a backend operation, beside NGX_OK and NGX_ERROR */
#define NGX_PLATFORM_UNAVAILABLE     -100   /* down, pool full: 503 */
#define NGX_PLATFORM_TIMEOUT         -101   /* backend too slow: 503 */


#define NGX_PLATFORM_MAX_PARAMS      4


/* credentials a route requires, decisions.md section 2 (platform_auth) */
#define NGX_PLATFORM_AUTH_NONE       0x00
#define NGX_PLATFORM_AUTH_BEARER     0x01
#define NGX_PLATFORM_AUTH_APIKEY     0x02
#define NGX_PLATFORM_AUTH_TENANT     0x04   /* the family's tenancy headers */


/* tenancy headers of a family */
#define NGX_PLATFORM_HEADER_TENANT   0x01   /* tenantId */
#define NGX_PLATFORM_HEADER_COUNTRY  0x02   /* countryCode */
#define NGX_PLATFORM_HEADER_USER     0x04   /* userId */


/* counters of the metrics zone */
#define NGX_PLATFORM_M_PG_STATEMENTS        0
#define NGX_PLATFORM_M_PG_ERRORS            1
#define NGX_PLATFORM_M_PG_TIMEOUTS          2
#define NGX_PLATFORM_M_PG_REJECTED          3
#define NGX_PLATFORM_M_PG_CONNECTS          4
#define NGX_PLATFORM_M_PG_CONNECT_FAILURES  5
#define NGX_PLATFORM_M_REDIS_COMMANDS       6
#define NGX_PLATFORM_M_REDIS_ERRORS         7
#define NGX_PLATFORM_M_REDIS_TIMEOUTS       8
#define NGX_PLATFORM_M_REDIS_CONNECTS       9
#define NGX_PLATFORM_M_TOKENS_VERIFIED      10
#define NGX_PLATFORM_M_TOKENS_CACHED        11
#define NGX_PLATFORM_M_TOKENS_REFUSED       12
#define NGX_PLATFORM_M_APIKEY_LOOKUPS       13
#define NGX_PLATFORM_M_APIKEYS_REFUSED      14
#define NGX_PLATFORM_M_MAX                  15

/* HTTP statuses counted one by one; the last slot is "other" */
#define NGX_PLATFORM_STATUSES               19


typedef struct {
    /* PostgreSQL */
    ngx_str_t                  pg_conninfo;
    ngx_platform_pg_options_t *pg_options;      /* pg_conninfo, parsed */
    ngx_uint_t                 pg_pool_size;
    ngx_uint_t                 pg_queue_size;
    ngx_msec_t                 pg_queue_timeout;
    ngx_msec_t                 pg_connect_timeout;
    ngx_msec_t                 pg_query_timeout;
    ngx_msec_t                 pg_idle_timeout;
    ngx_uint_t                 pg_max_uses;

    /* Redis */
    ngx_str_t                  redis_addr;       /* host:port, unix:/path */
    ngx_str_t                  redis_password;
    ngx_int_t                  redis_db;
    ngx_msec_t                 redis_connect_timeout;
    ngx_msec_t                 redis_timeout;

    /* NGX_PLATFORM_BACKEND_* of the families configured */
    ngx_uint_t                 backends;

    /* entries of each per-worker authentication cache */
    ngx_uint_t                 auth_cache_size;

    /* per-worker runtime state, created in init_process */
    ngx_platform_pg_pool_t    *pg;
    ngx_platform_redis_t      *redis;
} ngx_platform_main_conf_t;


typedef struct {
    ngx_platform_family_t     *family;

    /* OTP: failed attempts allowed per tenant and client in a window */
    ngx_uint_t                 otp_max_attempts;
    time_t                     otp_attempts_window;

    /* OTP: failed attempts allowed per tenant, all clients; 0: no ceiling */
    ngx_uint_t                 otp_tenant_attempts;
    time_t                     otp_tenant_window;

    /* Cache-Control max-age of cacheable reads (classifications) */
    time_t                     cache_max_age;

    /* how long a worker reuses a cacheable read before reading again */
    ngx_msec_t                 cache_time;

    /* platform_auth: NGX_PLATFORM_AUTH_*, unset: each route's default */
    ngx_uint_t                 auth;

    /* bearer tokens: key(s), issuer, audience, leeway */
    ngx_platform_jwt_conf_t   *jwt;
    ngx_str_t                  jwt_issuer;
    ngx_str_t                  jwt_audience;
    time_t                     jwt_leeway;
    ngx_flag_t                 jwt_cache;

    /* API keys: how long a worker trusts a lookup; scopes accepted */
    ngx_msec_t                 apikey_cache_time;
    ngx_array_t               *apikey_scopes;    /* of ngx_str_t */
} ngx_platform_loc_conf_t;


/*
 * A route handler runs once the route, method and version are checked.
 * It returns what a send function returned, a bare HTTP error status
 * (an envelope is made for it, with the text of ngx_platform_fail() when
 * that recorded one), or NGX_DONE when a backend operation answers later;
 * the completion then calls ngx_platform_finalize() the same way.
 */
typedef ngx_int_t (*ngx_platform_route_pt)(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);


typedef struct {
    ngx_uint_t                 method;    /* NGX_HTTP_GET, ... */

    /*
     * Path pattern matched segment by segment: literal segments, "{}" for
     * a captured segment (ctx->params), "v{}" for the API version segment
     * (served values: "1", "1.0"; anything else is 404). "*" matches
     * every path of the location.
     */
    char                      *pattern;

    /* NGX_PLATFORM_AUTH_* required unless platform_auth says otherwise */
    ngx_uint_t                 auth;

    ngx_platform_route_pt      handler;
} ngx_platform_route_t;


struct ngx_platform_family_s {
    ngx_str_t                  name;
    ngx_uint_t                 envelope;
    ngx_uint_t                 backends;  /* NGX_PLATFORM_BACKEND_* */
    ngx_uint_t                 headers;   /* NGX_PLATFORM_HEADER_* */
    ngx_platform_route_t      *routes;    /* terminated by a NULL pattern */
};


/*
 * Who is calling, established before a route handler runs. tenant is the
 * token's tenantId claim, else the API key's tenant, else the tenantId
 * header; a header that contradicts a credential was refused with 403.
 */
typedef struct {
    ngx_str_t                  tenant;
    ngx_str_t                  country;    /* countryCode header */
    ngx_str_t                  user;       /* userId header */
    ngx_str_t                  subject;    /* sub claim */
    ngx_str_t                  merchant;   /* merchantId claim */
    ngx_str_t                  key_id;     /* API key id */
    ngx_str_t                  key_scope;
    unsigned                   bearer:1;   /* a token was verified */
    unsigned                   apikey:1;   /* an API key was verified */
} ngx_platform_identity_t;


struct ngx_platform_ctx_s {
    ngx_platform_family_t     *family;
    ngx_platform_route_t      *route;
    ngx_str_t                  request_id;
    ngx_str_t                  params[NGX_PLATFORM_MAX_PARAMS];
    ngx_uint_t                 nparams;
    ngx_uint_t                 lang;

    /* the request body, read whole (also from a temp file), NUL-ended */
    u_char                    *body;
    size_t                     body_len;

    /* Allow header of a known path asked with another method */
    ngx_str_t                  allow;

    ngx_platform_identity_t    identity;

    /* WWW-Authenticate of a 401 */
    ngx_str_t                  challenge;

    /* recorded by ngx_platform_fail() for the error response */
    ngx_uint_t                 error_status;
    const char                *error_message;
    const char                *error_detail;

    ngx_http_log_handler_pt    log_handler;

    /* family-specific state */
    void                      *data;

};


extern ngx_module_t  ngx_platform_module;

extern ngx_platform_family_t  ngx_platform_otp_family;
extern ngx_platform_family_t  ngx_platform_products_family;
extern ngx_platform_family_t  ngx_platform_tms_family;
extern ngx_platform_family_t  ngx_platform_health_family;
extern ngx_platform_family_t  ngx_platform_metrics_family;
extern ngx_platform_family_t  ngx_platform_persons_family;


/* ngx_platform_http.c: request entry, routing, body, completion */

ngx_int_t ngx_platform_handler(ngx_http_request_t *r);
ngx_platform_ctx_t *ngx_platform_get_ctx(ngx_http_request_t *r);

/*
 * Ends a request that a route handler left with NGX_DONE: rc is what a
 * send function returned, or a bare HTTP error status.
 */
void ngx_platform_finalize(ngx_http_request_t *r, ngx_int_t rc);

/*
 * Resumes a request that authentication left with NGX_DONE: on NGX_OK
 * reads the body and runs the route, else ends the request with rc.
 */
void ngx_platform_continue(ngx_http_request_t *r, ngx_int_t rc);

/*
 * Records the message and detail of an error and returns status, for
 * "return ngx_platform_fail(r, NGX_HTTP_BAD_REQUEST, ...)"; the strings
 * must outlive the request's handler (literals or request pool).
 */
ngx_int_t ngx_platform_fail(ngx_http_request_t *r, ngx_uint_t status,
    const char *message, const char *detail);

/* the request body as a JSON object: NGX_OK, else 400 (recorded) */
ngx_int_t ngx_platform_parse_body(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx, json_t **object);

/* a request header by name (case-insensitive), or NULL */
ngx_table_elt_t *ngx_platform_header(ngx_http_request_t *r, char *name);

/*
 * "tenantId" etc.: NGX_OK with the value when present and sane, else 400
 * naming the header (recorded with ngx_platform_fail(): return it)
 */
ngx_int_t ngx_platform_require_header(ngx_http_request_t *r, char *name,
    ngx_str_t *value);

/*
 * The caller's tenant (ctx->identity.tenant): NGX_OK, else 400 naming
 * the tenantId header (recorded: return it).
 */
ngx_int_t ngx_platform_require_tenant(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);

/* the countryCode header (ctx->identity.country), the same way */
ngx_int_t ngx_platform_require_country(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);

ngx_int_t ngx_platform_is_uuid(ngx_str_t *s);
ngx_str_t *ngx_platform_client_addr(ngx_http_request_t *r);


/* ngx_platform_json.c: envelopes and responses */

/*
 * All send functions return a status for ngx_http_finalize_request() or
 * ngx_platform_finalize(), take ownership of the json_t they are given
 * (json_decref exactly once, also on failure), and add Content-Type,
 * X-Request-Id and, for Envelope A, Content-Language.
 */
ngx_int_t ngx_platform_send_json(ngx_http_request_t *r, ngx_uint_t status,
    json_t *body);

/*
 * 200 in the family's envelope; data may be NULL for {} (B) or null (A).
 * message NULL means the family's default success message.
 */
ngx_int_t ngx_platform_send_ok(ngx_http_request_t *r, const char *message,
    json_t *data);

/* the same with data given as serialized JSON, spliced as it is */
ngx_int_t ngx_platform_send_ok_raw(ngx_http_request_t *r,
    const char *message, u_char *data, size_t len);

/*
 * An error in the family's envelope. message is the summary, detail the
 * descriptive text (Envelope B) or the single errors[] item (A, sales).
 * For 503 adds Retry-After: 1, for 405 the Allow header of the path.
 */
ngx_int_t ngx_platform_send_error(ngx_http_request_t *r, ngx_uint_t status,
    const char *message, const char *detail);

/* maps NGX_PLATFORM_UNAVAILABLE, NGX_PLATFORM_TIMEOUT, NGX_ERROR */
ngx_int_t ngx_platform_send_backend_error(ngx_http_request_t *r,
    ngx_int_t rc);

/* the same recorded with ngx_platform_fail(), for a bare status */
ngx_int_t ngx_platform_backend_fail(ngx_http_request_t *r, ngx_int_t rc);

/* a body that is already JSON, sent as it is */
ngx_int_t ngx_platform_send_raw(ngx_http_request_t *r, ngx_uint_t status,
    u_char *body, size_t len);

/* a body of another type ("text/plain; charset=utf-8"), sent as it is */
ngx_int_t ngx_platform_send_body(ngx_http_request_t *r, ngx_uint_t status,
    ngx_str_t *type, u_char *body, size_t len);

/* a header-only response (204, 304, 200 with no body) */
ngx_int_t ngx_platform_send_empty(ngx_http_request_t *r, ngx_uint_t status);

ngx_int_t ngx_platform_add_header(ngx_http_request_t *r, char *name,
    ngx_str_t *value);


/* ngx_platform_auth.c: bearer tokens, API keys, tenancy headers */

/*
 * Establishes ctx->identity as the route and platform_auth require:
 * NGX_OK, a bare 400/401/403 (recorded; 401 sets ctx->challenge), 5xx,
 * or NGX_DONE when an API key is looked up; the lookup's completion then
 * calls ngx_platform_continue().
 */
ngx_int_t ngx_platform_authenticate(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);

char *ngx_platform_auth_merge(ngx_conf_t *cf, ngx_platform_loc_conf_t *prev,
    ngx_platform_loc_conf_t *conf);
ngx_int_t ngx_platform_auth_init_process(ngx_cycle_t *cycle);
void ngx_platform_auth_exit_process(ngx_cycle_t *cycle);

char *ngx_platform_auth_policy(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
char *ngx_platform_jwt_key(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
char *ngx_platform_jwt_jwks(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);


/* ngx_platform_status.c: metrics zone and counters */

ngx_int_t ngx_platform_metrics_add_zone(ngx_conf_t *cf);
ngx_int_t ngx_platform_metrics_log_handler(ngx_http_request_t *r);
void ngx_platform_metrics_init_process(void);
void ngx_platform_metric_inc(ngx_uint_t metric);


#endif /* _NGX_PLATFORM_H_INCLUDED_ */
