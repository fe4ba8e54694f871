
/*
 * ngx_platform: shared declarations of the module core, the request
 * machinery (endpoint tables, inputs, envelopes, operations) and the
 * endpoint families.
 *
 * Layers point one way: a family (ngx_platform_<family>.c) declares its
 * endpoints; the request core (ngx_platform_http.c, _auth.c, _schema.c)
 * routes, authenticates and checks every declared input, then runs the
 * endpoint's operation through the runners (ngx_platform_op.c), which
 * use the transports (ngx_platform_pg.c, ngx_platform_redis.c). The
 * transports know nothing of HTTP. Every layer may use the floor: the
 * request helpers (ngx_platform_request.c), the response writer
 * (ngx_platform_response.c) and the metrics store
 * (ngx_platform_metrics.c); the floor uses nothing above it.
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
typedef struct ngx_platform_sql_s       ngx_platform_sql_t;
typedef struct ngx_platform_field_s     ngx_platform_field_t;
typedef struct ngx_platform_route_s     ngx_platform_route_t;
typedef struct ngx_platform_body_work_s ngx_platform_body_work_t;
typedef struct ngx_platform_rate_limit_s ngx_platform_rate_limit_t;


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


/* how Redis is deployed: pmcf->redis_deployment */
#define NGX_PLATFORM_REDIS_SINGLE    0
#define NGX_PLATFORM_REDIS_SENTINEL  1
#define NGX_PLATFORM_REDIS_CLUSTER   2


/* outcome of a backend operation, beside NGX_OK and NGX_ERROR */
#define NGX_PLATFORM_UNAVAILABLE     -100   /* down, pool full: 503 */
#define NGX_PLATFORM_TIMEOUT         -101   /* backend too slow: 503 */
#define NGX_PLATFORM_OVER_SHARE      -102   /* caller's share in use: 429 */


/*
 * Why a request failed, for $platform_error (ngx_platform_variables.c
 * holds their names): set where the status alone does not tell
 * (ngx_platform_fail_reason()), else taken from the status
 */
#define NGX_PLATFORM_E_NONE                0
#define NGX_PLATFORM_E_BAD_REQUEST         1    /* nginx's own 400 */
#define NGX_PLATFORM_E_VALIDATION          2
#define NGX_PLATFORM_E_INVALID_JSON        3
#define NGX_PLATFORM_E_BODY_TOO_COMPLEX    4
#define NGX_PLATFORM_E_UNAUTHORIZED        5
#define NGX_PLATFORM_E_FORBIDDEN           6
#define NGX_PLATFORM_E_NOT_FOUND           7
#define NGX_PLATFORM_E_METHOD_NOT_ALLOWED  8
#define NGX_PLATFORM_E_CLIENT_TIMEOUT      9
#define NGX_PLATFORM_E_CONFLICT            10
#define NGX_PLATFORM_E_BODY_TOO_LARGE      11
#define NGX_PLATFORM_E_UNSUPPORTED_MEDIA   12
#define NGX_PLATFORM_E_RATE_LIMITED        13
#define NGX_PLATFORM_E_OVER_SHARE          14
#define NGX_PLATFORM_E_CLIENT_CLOSED       15
#define NGX_PLATFORM_E_INTERNAL            16
#define NGX_PLATFORM_E_UPSTREAM_ERROR      17
#define NGX_PLATFORM_E_BACKEND_UNAVAILABLE 18
#define NGX_PLATFORM_E_BACKEND_TIMEOUT     19
#define NGX_PLATFORM_E_LOCK_TIMEOUT        20
#define NGX_PLATFORM_E_OVERLOADED          21
#define NGX_PLATFORM_E_UPSTREAM_TIMEOUT    22
#define NGX_PLATFORM_E_CLIENT_ERROR        23   /* another 4xx */
#define NGX_PLATFORM_E_SERVER_ERROR        24   /* another 5xx */
#define NGX_PLATFORM_E_SERVICE_UNAVAILABLE 25   /* nginx's own 503 */


/* W3C Trace Context: a trace id and a span id, as lower-case hex */
#define NGX_PLATFORM_TRACE_ID_LEN    32
#define NGX_PLATFORM_SPAN_ID_LEN     16
/* "00-<trace id>-<span id>-<flags>" */
#define NGX_PLATFORM_TRACEPARENT_LEN 55


/* families of the registry, at most */
#define NGX_PLATFORM_FAMILIES_MAX    24

/* path captures and query arguments of one endpoint */
#define NGX_PLATFORM_MAX_ARGS        8
/* parameters of one statement */
#define NGX_PLATFORM_MAX_PARAMS      8


/* credentials a route requires, decisions.md section 2 (platform_auth) */
#define NGX_PLATFORM_AUTH_NONE       0x00
#define NGX_PLATFORM_AUTH_BEARER     0x01
#define NGX_PLATFORM_AUTH_APIKEY     0x02
#define NGX_PLATFORM_AUTH_TENANT     0x04   /* the tenancy headers */


/*
 * Inputs the core guarantees before an operation runs. With
 * NGX_PLATFORM_AUTH_TENANT in the policy the tenantId header is required
 * (and must agree with any credential); without it the tenant may come
 * from the credentials alone.
 */
#define NGX_PLATFORM_IN_TENANT       0x01   /* a tenant: 400 without one */
#define NGX_PLATFORM_IN_COUNTRY      0x02   /* countryCode header: 400 */
#define NGX_PLATFORM_IN_USER         0x04   /* userId header: 400 */
#define NGX_PLATFORM_IN_MERCHANT     0x08   /* merchantId claim: 403 */
#define NGX_PLATFORM_IN_NO_HEAD      0x10   /* changes state: no HEAD */
#define NGX_PLATFORM_IN_COUNTRY_OPT  0x20   /* countryCode, if sent: 400 */


/* types of body fields, query arguments and path captures */
#define NGX_PLATFORM_T_STRING        1
#define NGX_PLATFORM_T_UUID          2      /* canonical 8-4-4-4-12 hex */
#define NGX_PLATFORM_T_INTEGER       3
#define NGX_PLATFORM_T_NUMBER        4
#define NGX_PLATFORM_T_BOOLEAN       5
#define NGX_PLATFORM_T_OBJECT        6
#define NGX_PLATFORM_T_ARRAY         7
#define NGX_PLATFORM_T_ENUM          8      /* a string among values */
#define NGX_PLATFORM_T_DATE          9      /* ISO 8601 YYYY-MM-DD */
#define NGX_PLATFORM_T_DATETIME      10     /* ISO 8601 date or date-time */
#define NGX_PLATFORM_T_IBAN          11     /* ISO 13616, "" allowed */
#define NGX_PLATFORM_T_BIC           12     /* ISO 9362, "" allowed */

/* flags of a field */
#define NGX_PLATFORM_F_REQUIRED      0x01
#define NGX_PLATFORM_F_NULLABLE      0x02   /* null is accepted */
#define NGX_PLATFORM_F_MIN           0x04   /* min applies */
#define NGX_PLATFORM_F_MAX           0x08   /* max applies */
#define NGX_PLATFORM_F_TRIM          0x10   /* length counted trimmed */
#define NGX_PLATFORM_F_UNIQUE        0x20   /* array items: once each */
#define NGX_PLATFORM_F_RAW           0x40   /* a large top-level string */


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
#define NGX_PLATFORM_M_PG_RETRIES           15
#define NGX_PLATFORM_M_RATE_LIMIT_LOCAL     16

/* bodies refused past platform_body_memory */
#define NGX_PLATFORM_M_BODY_MEMORY_REFUSED  17

/* statements refused past platform_pg_tenant_share */
#define NGX_PLATFORM_M_PG_OVER_SHARE        18

/* the Redis master learned anew from the sentinels */
#define NGX_PLATFORM_M_REDIS_MASTER_SWITCHES  19

#define NGX_PLATFORM_M_MAX                  20

/* what a rate limit counts, for limits and the metrics of refusals */
#define NGX_PLATFORM_RL_TENANT              0
#define NGX_PLATFORM_RL_CREDENTIAL          1
#define NGX_PLATFORM_RL_ADDRESS             2
#define NGX_PLATFORM_RL_BUREAU              3   /* identity bureau calls */
#define NGX_PLATFORM_RL_KINDS               4

/* HTTP statuses counted one by one; the last slot is "other" */
#define NGX_PLATFORM_STATUSES               19

/* latency histograms: bounds of platform_metrics_buckets, at most */
#define NGX_PLATFORM_BUCKETS_MAX            16

/* the round trips a histogram of the metrics zone times */
#define NGX_PLATFORM_H_PG_PRIMARY           0
#define NGX_PLATFORM_H_PG_READ              1
#define NGX_PLATFORM_H_REDIS                2
#define NGX_PLATFORM_H_MAX                  3


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
    ngx_uint_t                 pg_pipeline_depth;
    ngx_uint_t                 pg_tenant_share;  /* percent */
    ngx_msec_t                 pg_lock_timeout;
    ngx_str_t                  pg_read_conninfo;
    ngx_platform_pg_options_t *pg_read_options; /* pg_read_conninfo, parsed */
    ngx_flag_t                 pg_row_security;
    ngx_flag_t                 pg_prepare;       /* off: unnamed statements */
    ngx_flag_t                 pg_coalesce;      /* reads share sync points */

    /* Redis */
    ngx_str_t                  redis_addr;       /* host:port, unix:/path */
    ngx_str_t                  redis_password;
    ngx_int_t                  redis_db;
    ngx_msec_t                 redis_connect_timeout;
    ngx_msec_t                 redis_timeout;

    /*
     * NGX_PLATFORM_REDIS_SINGLE (platform_redis), _SENTINEL
     * (platform_redis_sentinel) or _CLUSTER (platform_redis_cluster)
     */
    ngx_uint_t                 redis_deployment;
    ngx_array_t               *redis_seeds;      /* of ngx_str_t: the
                                                  sentinels or the cluster's
                                                  seed nodes */
    ngx_str_t                  redis_master_name; /* Sentinel */
    ngx_str_t                  redis_sentinel_password;
    ngx_int_t                  redis_wait_replicas;

    /* NGX_PLATFORM_BACKEND_* of the families configured */
    ngx_uint_t                 backends;

    /* entries of each per-worker authentication cache */
    ngx_uint_t                 auth_cache_size;

    /* API key ids not found: how many a worker remembers, how long */
    ngx_uint_t                 apikey_unknown_size;
    ngx_msec_t                 apikey_unknown_time;

    /* platform_thread_pool: large bodies are parsed there; "off": none */
    ngx_str_t                  thread_pool_name;
    void                      *thread_pool;     /* ngx_thread_pool_t */
    ngx_uint_t                 bodies;          /* a family takes bodies */

    /* platform_body_memory: bytes of bodies and documents a worker holds */
    size_t                     body_memory;

    /* the routes of each family, compiled once: by family index */
    ngx_array_t               *routes[NGX_PLATFORM_FAMILIES_MAX];

    /*
     * platform_openapi: the document, built when the configuration loads,
     * without its "openapi" and "servers" members (written per request)
     */
    ngx_str_t                  openapi;

    /* the locations of the webhooks family, checked by nginx -t */
    ngx_array_t               *webhook_locations;

    /* platform_metrics_buckets: upper bounds in milliseconds, increasing */
    ngx_msec_t                 buckets[NGX_PLATFORM_BUCKETS_MAX];
    ngx_uint_t                 nbuckets;

    /* per-worker runtime state, created in init_process */
    ngx_platform_redis_t      *redis;
} ngx_platform_main_conf_t;


typedef struct {
    ngx_platform_family_t     *family;
    ngx_array_t               *routes;    /* of ngx_platform_route_t */

    /* OTP: failed attempts allowed per tenant and client in a window */
    ngx_uint_t                 otp_max_attempts;
    time_t                     otp_attempts_window;

    /* OTP: failed attempts allowed per tenant, all clients; 0: no ceiling */
    ngx_uint_t                 otp_tenant_attempts;
    time_t                     otp_tenant_window;

    /* person documents: largest decoded content accepted (else 413) */
    size_t                     document_max_size;

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

    /*
     * webhooks: the sources and payment methods accepted, with their
     * signing secrets (ngx_platform_webhooks.c); a level that names any
     * replaces those of the levels around it
     */
    ngx_array_t               *webhook_sources;
    ngx_array_t               *webhook_methods;

    /*
     * identity: the internal location that asks the credit bureau, and
     * how long a bureau's answer recorded for a tenant answers repeats
     * (0: always ask)
     */
    ngx_str_t                  identity_bureau;
    time_t                     identity_cache_time;

    /* identity: a tenant's budget of bureau calls; NULL: none */
    ngx_platform_rate_limit_t *identity_bureau_rate;

    /*
     * platform_rate_limit: of ngx_platform_rate_limit_t, NULL: none; a
     * level that declares any replaces those of the levels around it
     */
    ngx_array_t               *rate_limits;

    /* platform_openapi_server: the document's server URL, checked */
    ngx_str_t                  openapi_server;
} ngx_platform_loc_conf_t;


/* a message in English and in French (Envelope A families answer both) */
typedef struct {
    const char                *en;
    const char                *fr;
} ngx_platform_text_t;


/*
 * An answer of an endpoint's code that none of its tables declares, as
 * the OpenAPI document tells it: status, message (NULL: a status without
 * a body, such as 304) and detail (NULL: the message; "<n>" where the
 * code puts a value).
 */
typedef struct {
    ngx_uint_t                 status;
    const char                *message;
    const char                *detail;
} ngx_platform_doc_answer_t;


/*
 * What the OpenAPI document (ngx_platform_openapi.c) says of an endpoint
 * beyond its row, written beside the row in the family's file.
 *
 * summary: the operation's summary, a short phrase ("Get a delivery
 * order").
 * data: the JSON Schema of the success document's data, as JSON text
 * (bare: of the whole body); NULL only when the statement answers no
 * body. example: a request on the demo data (scripts/demo-data.sql), a
 * JSON object {"path", "query", "headers", "body"} of what it sends ("{}":
 * nothing); each member is the example of its parameter or body.
 * answers: what the endpoint's code answers itself, ended by a 0 status.
 * ok: the success message when code, not a statement, answers.
 */
typedef struct {
    const char                *summary;
    const char                *data;
    const char                *example;
    ngx_platform_doc_answer_t *answers;
    unsigned                   bare:1;
    const char                *ok;
} ngx_platform_doc_t;


/* data of a shape of a family's schemas, and of an array of them */

#define ngx_platform_doc_schema(name)                                        \
    "{\"$ref\":\"#/components/schemas/" name "\"}"

#define ngx_platform_doc_list(name)                                          \
    "{\"type\":\"array\",\"items\":"                                         \
    "{\"$ref\":\"#/components/schemas/" name "\"}}"


/*
 * A body field, a query argument or a typed path capture, checked by one
 * validator (ngx_platform_schema.c). Unknown body fields are ignored; a
 * field of the wrong type or value is 400 naming it.
 */
struct ngx_platform_field_s {
    char                      *name;
    ngx_uint_t                 type;      /* NGX_PLATFORM_T_* */
    ngx_uint_t                 flags;     /* NGX_PLATFORM_F_* */

    /* F_MIN/F_MAX: numbers their value, strings their length in chars */
    double                     min;
    double                     max;

    char                     **values;    /* T_ENUM: NULL-ended */
    ngx_platform_field_t      *items;     /* T_ARRAY of objects: fields */
    char                      *def;       /* query argument default */
};


/*
 * Code that serves an endpoint: returns what a send function returned, a
 * bare HTTP error status (an envelope is made for it, with the text
 * recorded by ngx_platform_fail()), or NGX_DONE when a backend answers
 * later; the completion then ends the request with ngx_platform_finalize().
 */
typedef ngx_int_t (*ngx_platform_handler_pt)(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);


/*
 * What continues a request that waited (an API key's lookup): rc is
 * NGX_OK to go on, else what ends it.
 */
typedef void (*ngx_platform_resume_pt)(ngx_http_request_t *r, ngx_int_t rc);


/*
 * One row of a family's endpoint table.
 *
 * pattern: literal segments and typed captures: "{version}" (served
 * values "1" and "1.0", anything else is 404), "{uuid}" (else 400 with
 * the invalid texts), "{string}". "v{version}" matches "v1". "*" matches
 * every path of the location. Compiled when the configuration loads.
 *
 * The captures (version aside), then the query arguments, are the
 * endpoint's arguments, ctx->args[0...], as checked text.
 */
typedef struct {
    ngx_uint_t                 method;     /* NGX_HTTP_GET, ... */
    char                      *pattern;
    ngx_uint_t                 auth;       /* NGX_PLATFORM_AUTH_* default */
    ngx_uint_t                 inputs;     /* NGX_PLATFORM_IN_* */

    ngx_platform_field_t      *query;      /* ended by a NULL name */
    ngx_platform_field_t      *body;       /* a JSON object body, or NULL */

    /* a capture of the wrong type; NULL: "Bad request.", "<name> ..." */
    const char                *invalid;
    const char                *invalid_detail;

    /*
     * the operation: a statement, or code, or both: code that prepares
     * the statement's arguments (ctx->args) and runs it with
     * ngx_platform_run_sql()
     */
    ngx_platform_sql_t        *sql;
    ngx_platform_handler_pt    handler;

    /* its OpenAPI documentation; NULL only for a "*" pattern */
    ngx_platform_doc_t        *doc;
} ngx_platform_endpoint_t;


struct ngx_platform_family_s {
    ngx_str_t                  name;       /* platform_<name>, metrics */
    ngx_uint_t                 envelope;   /* NGX_PLATFORM_ENVELOPE_* */
    ngx_uint_t                 backends;   /* NGX_PLATFORM_BACKEND_* */
    ngx_platform_endpoint_t   *endpoints;  /* ended by a NULL pattern */

    /*
     * The family's own messages with their French texts, ended by a NULL
     * en; nginx -t refuses an Envelope A family with a message of its
     * endpoint tables missing here or in the core's table.
     */
    ngx_platform_text_t       *texts;

    ngx_uint_t                 index;      /* in the registry */

    /*
     * The shapes its endpoints' documentation refers to, as JSON object
     * text: {"Vehicle": {JSON Schema}, ...} (the document's
     * components.schemas; a name is one family's), or NULL
     */
    const char                *schemas;

    /*
     * The largest body a routed request may send, known from its
     * captures (a webhook's name); 0 or a NULL function: no limit but
     * client_max_body_size. The core refuses a longer Content-Length
     * with 413 before reading, and a chunked body as it grows past.
     */
    off_t                    (*max_body)(ngx_http_request_t *r,
                                         ngx_platform_ctx_t *ctx);
};


/* a compiled endpoint pattern */
typedef struct {
    ngx_str_t                  literal;    /* empty: a capture */
    ngx_uint_t                 type;       /* captures: T_UUID, T_STRING */
    ngx_str_t                  name;       /* captures: for messages */
    unsigned                   version:1;  /* "{version}", "v{version}" */
    unsigned                   prefix:1;   /* "v" before it */
} ngx_platform_segment_t;


struct ngx_platform_route_s {
    ngx_platform_endpoint_t   *endpoint;
    ngx_platform_segment_t    *segments;
    ngx_uint_t                 nsegments;
    ngx_uint_t                 ncaptures;
    unsigned                   any:1;      /* "*" */
};


/*
 * Who is calling, established before an operation runs. tenant is the
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
    ngx_platform_endpoint_t   *endpoint;
    ngx_str_t                  request_id;
    ngx_uint_t                 lang;

    /*
     * The trace context: the caller's trace id (else a new one), the
     * span id of this request's work (traceresponse, the parent of its
     * bureau call), the caller's flags, and its tracestate, passed on
     * untouched (empty: none, or a new trace)
     */
    u_char                     trace_id[NGX_PLATFORM_TRACE_ID_LEN];
    u_char                     span_id[NGX_PLATFORM_SPAN_ID_LEN];
    u_char                     trace_flags[2];
    ngx_str_t                  tracestate;

    /*
     * Time spent waiting on each backend, in nanoseconds, and the waits:
     * statements and commands, from their send to their completion
     */
    uint64_t                   pg_time;
    uint64_t                   redis_time;
    ngx_uint_t                 pg_waits;
    ngx_uint_t                 redis_waits;

    /* a rate limit's wait started then (ngx_platform_clock()); 0: none */
    uint64_t                   limit_wait;

    /* captures then query arguments, checked; or set by the endpoint's
       code for its declared statement */
    ngx_str_t                  args[NGX_PLATFORM_MAX_ARGS];
    ngx_uint_t                 nargs;

    /* the request body, read whole (also from a temp file), NUL-ended */
    u_char                    *body;
    size_t                     body_len;

    /* the family's limit of the body (0: none), and the bytes read */
    off_t                      body_max;
    off_t                      body_received;

    /* the body parsed and checked against the endpoint's fields */
    json_t                    *json;

    /*
     * The value of the endpoint's F_RAW field, kept out of ctx->json
     * (where it is ""): its UTF-8, in the body's own buffer (NULL data:
     * absent, or not a string)
     */
    ngx_str_t                  raw;
    ngx_platform_body_work_t  *body_work;

    /* Allow header of a known path asked with another method */
    ngx_str_t                  allow;

    ngx_platform_identity_t    identity;

    /*
     * The tenant whose rows the request's statements see under row-level
     * security when it is not the identity's (a webhook's; "": none)
     */
    ngx_str_t                  scope;

    /* the client's address, as the pool's shares count it (op.c) */
    ngx_str_t                  owner;

    /* WWW-Authenticate of a 401 */
    ngx_str_t                  challenge;

    /* recorded by ngx_platform_fail() for the error response */
    ngx_uint_t                 error_status;
    const char                *error_message;
    const char                *error_detail;
    ngx_uint_t                 error_reason;   /* NGX_PLATFORM_E_* */

    /* what continues the request once authentication has waited */
    ngx_platform_resume_pt     resume;

    /* the step of its admission a request that waited goes on with */
    ngx_uint_t                 step;

    /* the rate limits checked: RateLimit-Policy and RateLimit values */
    ngx_str_t                  rate_policy;
    ngx_str_t                  rate_limit;

    /* Retry-After of a 429 or 503 in seconds; 0: none for 429, 1 for 503 */
    time_t                     retry_after;

    /* the operation was retried after a serialization failure */
    unsigned                   retried:1;
    /* scope above is set */
    unsigned                   scoped:1;
    /* the module answers: nginx's own error pages are not replaced */
    unsigned                   answered:1;
    /* nginx answers an error itself: the envelope replaces its page */
    unsigned                   replace:1;

    /* family-specific state */
    void                      *data;
};


extern ngx_module_t  ngx_platform_module;


/* the registry: every family, in the order of ngx_platform_families.h */

#define NGX_PLATFORM_FAMILY(name)                                           \
    extern ngx_platform_family_t  ngx_platform_##name##_family;
#include "ngx_platform_families.h"
#undef NGX_PLATFORM_FAMILY

extern ngx_platform_family_t  *ngx_platform_families[];


/* ngx_platform_request.c: the floor, which every layer may use */

/* the request's context, with its request id and language */
ngx_platform_ctx_t *ngx_platform_create_ctx(ngx_http_request_t *r,
    ngx_platform_family_t *family);
ngx_platform_ctx_t *ngx_platform_get_ctx(ngx_http_request_t *r);

/* a read handler for a request that waits: a client that leaves is let go */
void ngx_platform_check_broken_connection(ngx_http_request_t *r);

/*
 * Records the message and detail of an error and returns status, for
 * "return ngx_platform_fail(r, NGX_HTTP_BAD_REQUEST, ...)"; the strings
 * must outlive the request's handler (literals or request pool).
 */
ngx_int_t ngx_platform_fail(ngx_http_request_t *r, ngx_uint_t status,
    const char *message, const char *detail);

/*
 * The same with the reason of $platform_error (NGX_PLATFORM_E_*) where
 * the status does not tell it
 */
ngx_int_t ngx_platform_fail_reason(ngx_http_request_t *r, ngx_uint_t status,
    ngx_uint_t reason, const char *message, const char *detail);

/* a monotonic clock in nanoseconds, for the backends' waits */
uint64_t ngx_platform_clock(void);

/*
 * A wait on a backend (NGX_PLATFORM_BACKEND_PG or _REDIS) that started
 * at start (ngx_platform_clock()) has ended: counted in the request's
 * $platform_pg_time or $platform_redis_time
 */
void ngx_platform_waited(ngx_http_request_t *r, ngx_uint_t backend,
    uint64_t start);

/*
 * The request's trace context as a traceparent value, "00-<trace id>-
 * <its span id>-<flags>": its traceresponse, and the traceparent of a
 * call it makes (the identity bureau's); in the request pool.
 */
ngx_int_t ngx_platform_traceparent(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx, ngx_str_t *value);

/* a request header by name (case-insensitive), or NULL */
ngx_table_elt_t *ngx_platform_header(ngx_http_request_t *r, char *name);

/*
 * "tenantId" etc.: NGX_OK with the value when present and sane, else 400
 * naming the header (recorded with ngx_platform_fail(): return it)
 */
ngx_int_t ngx_platform_require_header(ngx_http_request_t *r, char *name,
    ngx_str_t *value);

/*
 * The client as limits and attempt counters count it: an IPv4 address,
 * or the /64 of an IPv6 one (an IPv4-mapped address is its IPv4 address)
 */
ngx_int_t ngx_platform_client_address(ngx_http_request_t *r,
    ngx_str_t *client);

/* a tenant, country or user name: 1 to 128 printable, no ':' */
ngx_int_t ngx_platform_name_valid(u_char *p, size_t len);

ngx_int_t ngx_platform_is_uuid(ngx_str_t *s);

/* the length of the longest valid strict UTF-8 prefix: len when valid */
size_t ngx_platform_utf8_valid(u_char *p, size_t len);


/* ngx_platform_texts.c: the text service */

/* the message in the request's language */
const char *ngx_platform_text(ngx_platform_ctx_t *ctx, const char *en);
ngx_uint_t ngx_platform_text_french(ngx_platform_ctx_t *ctx);

/* the message has a French text, the family's or the core's */
ngx_int_t ngx_platform_text_known(ngx_platform_family_t *family,
    const char *en);

/*
 * text, already in the request's language, with its "%s" replaced in
 * order by args: NUL-ended, in the request pool; NULL when out of memory
 */
char *ngx_platform_text_format(ngx_http_request_t *r, const char *text,
    ngx_str_t *args, ngx_uint_t nargs);


/* ngx_platform_log.c: lines a flood would repeat, limited per worker */

#define NGX_PLATFORM_LOG_PG_REJECTED    0
#define NGX_PLATFORM_LOG_PG_CONFLICT    1
#define NGX_PLATFORM_LOG_KEY_REFUSED    2
#define NGX_PLATFORM_LOG_TOKEN_REFUSED  3
#define NGX_PLATFORM_LOG_SIGNATURE      4
#define NGX_PLATFORM_LOG_REDIS_FAILED   5
#define NGX_PLATFORM_LOG_BODY_MEMORY    6
#define NGX_PLATFORM_LOG_KINDS          7

/* at most a few lines of a kind a second, then one that counts the rest */
ngx_uint_t ngx_platform_log_allowed(ngx_uint_t kind, ngx_uint_t level,
    ngx_log_t *log);

/* ngx_log_error(level, log, err, fmt, ...) for a line of that kind */
#define ngx_platform_log_limited(kind, level, log, ...)                     \
    do {                                                                    \
        if (ngx_platform_log_allowed(kind, level, log)) {                   \
            ngx_log_error(level, log, __VA_ARGS__);                         \
        }                                                                   \
    } while (0)


/* ngx_platform_conf_file.c: files that directives name */

/* the file, NUL-ended, in cf->pool: NGX_CONF_OK, else logged */
char *ngx_platform_conf_read_file(ngx_conf_t *cf, ngx_str_t *name,
    size_t max, const char *what, ngx_str_t *content);


/* ngx_platform_base64.c: the one strict base64 decoder */

#define NGX_PLATFORM_BASE64_URL      0x01   /* the base64url alphabet */
#define NGX_PLATFORM_BASE64_PADDED   0x02   /* '=' must fill the last group */
#define NGX_PLATFORM_BASE64_NO_PAD   0x04   /* '=' is no character at all */
#define NGX_PLATFORM_BASE64_BREAKS   0x08   /* CR and LF are skipped */

#define NGX_PLATFORM_BASE64_OK         0
#define NGX_PLATFORM_BASE64_EMPTY      1
#define NGX_PLATFORM_BASE64_CHARACTER  2    /* at position */
#define NGX_PLATFORM_BASE64_LENGTH     3    /* a last group of one */
#define NGX_PLATFORM_BASE64_PAD        4    /* '=' at position */
#define NGX_PLATFORM_BASE64_BITS       5    /* unused bits not zero */

typedef struct {
    u_char                    *src;
    size_t                     len;
    u_char                    *buf;        /* bytes past cap are counted */
    size_t                     cap;
    ngx_uint_t                 flags;      /* NGX_PLATFORM_BASE64_* */
    size_t                     size;       /* decoded, all of it */
    size_t                     position;   /* from 1, of a problem */
} ngx_platform_base64_t;

/* NGX_PLATFORM_BASE64_OK, or the problem (position set where it has one) */
ngx_uint_t ngx_platform_base64_decode(ngx_platform_base64_t *b);

/* a whole value into dst, ngx_base64_decoded_length() bytes: NGX_OK */
ngx_int_t ngx_platform_base64_value(ngx_str_t *dst, ngx_str_t *src,
    ngx_uint_t flags);


/*
 * ngx_platform_json.c: the string of an F_RAW body field, read outside
 * Jansson as Jansson reads it
 */

/* whether the text of a key (no quotes) spells name */
ngx_uint_t ngx_platform_json_key_is(u_char *p, u_char *end, const char *name);

/*
 * The string's text, len bytes at body + start: NGX_OK if Jansson would
 * take it, else NGX_ERROR with error set as Jansson sets it
 */
ngx_int_t ngx_platform_json_string_check(u_char *body, size_t start,
    size_t len, json_error_t *error);

/* error's line and column at offset of body, as Jansson counts them */
void ngx_platform_json_where(json_error_t *error, u_char *body,
    size_t offset);

/* a checked string's escapes undone in place: its length as UTF-8 */
size_t ngx_platform_json_unescape(u_char *text, size_t len);


/* ngx_platform_http.c: request entry, inputs, body, operation */

ngx_int_t ngx_platform_handler(ngx_http_request_t *r);

/* the preaccess phase's handler: the context of a module location's request */
ngx_int_t ngx_platform_preaccess_handler(ngx_http_request_t *r);

/*
 * The raw text of the body (ctx->body) is no longer needed: its memory
 * is freed at once, for an endpoint that holds a large document in
 * another form. The parsed body (ctx->json) stays.
 */
void ngx_platform_body_drop(ngx_http_request_t *r, ngx_platform_ctx_t *ctx);

/* bytes of bodies and documents this worker holds (platform_body_memory) */
size_t ngx_platform_body_reserved(void);


/* ngx_platform_route.c: endpoint patterns and the matching of paths */

/* compiles a family's endpoint patterns for the configuration */
ngx_array_t *ngx_platform_compile_routes(ngx_conf_t *cf,
    ngx_platform_family_t *family);

/*
 * The endpoint of the request into ctx (route, endpoint, the captures in
 * ctx->args): NGX_OK, else 404 or 405 (with ctx->allow) recorded
 */
ngx_int_t ngx_platform_route(ngx_http_request_t *r, ngx_platform_ctx_t *ctx,
    ngx_array_t *routes);

/*
 * The operationIds of the endpoints of the registry, as the OpenAPI
 * document names them: made once per process, when the configuration
 * loads first
 */
ngx_int_t ngx_platform_operation_ids_init(ngx_log_t *log);

/* "get", "post", ... as OpenAPI names a method; NULL for another */
const char *ngx_platform_method_name(ngx_uint_t method);

/* an endpoint's operationId (head: of the HEAD of a GET), or NULL */
ngx_str_t *ngx_platform_operation_id(ngx_platform_endpoint_t *ep,
    ngx_uint_t head);


/* ngx_platform_variables.c: $platform_* variables */

ngx_int_t ngx_platform_variables_add(ngx_conf_t *cf);


/* ngx_platform_openapi.c: the OpenAPI document (platform_openapi) */

/*
 * When the configuration loads: nginx -t refuses an endpoint of the
 * registry that the document cannot describe (no documentation, success
 * shape or example, or one that is not JSON) and a family's schemas that
 * are not JSON or name another's shape; with a platform_openapi location
 * the document is built, in the configuration's pool.
 */
ngx_int_t ngx_platform_openapi_init(ngx_conf_t *cf);

/* platform_openapi_server URL: refused unless a URL the document can name */
char *ngx_platform_openapi_server(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);


/*
 * ngx_platform_filter.c: nginx's own error pages in the envelope, and
 * the family's body limit (ctx->body_max) while the body is read
 */

ngx_int_t ngx_platform_filter_init(ngx_conf_t *cf);

/*
 * Before a routed request's body is read: ctx->body_max from its
 * family; NGX_OK, or 413 (recorded) for a longer Content-Length
 */
ngx_int_t ngx_platform_body_limit(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);


/* ngx_platform_thread.c: work offloaded to the thread pool */

/*
 * Work that would hold the event loop for more than a few milliseconds
 * (a large body's parse, a document's decoding and digest) runs in the
 * thread pool of platform_thread_pool. work runs in a thread: it may use
 * only memory given to it in data (allocated beforehand, for instance in
 * the request pool), malloc-based libraries such as Jansson and
 * OpenSSL, and must not touch the request, its pool or nginx's log. done
 * runs afterwards in the worker, with the request, and returns what a
 * handler returns. Without a thread pool work runs at once, inline.
 * Returns NGX_DONE or what done returned, for the handler to return.
 */
typedef void (*ngx_platform_work_pt)(void *data);

ngx_int_t ngx_platform_offload(ngx_http_request_t *r,
    ngx_platform_work_pt work, void *data, ngx_platform_handler_pt done);


/* ngx_platform_schema.c: the one validator of declared inputs */

/*
 * The typed path captures in ctx->args: NGX_OK, or 400 with the
 * endpoint's invalid texts, else naming the capture
 */
ngx_int_t ngx_platform_check_captures(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);

/* the query arguments of the endpoint into ctx->args: NGX_OK or 400 */
ngx_int_t ngx_platform_check_query(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);

/*
 * The parsed body (json, NULL when Jansson refused it with error) as a
 * JSON object matching the endpoint's fields: then ctx->json. The
 * caller keeps the reference.
 */
ngx_int_t ngx_platform_check_body(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx, json_t *json, json_error_t *error);


/* ngx_platform_response.c: envelopes, responses, the end of a request */

/*
 * The data of a response: JSON text spliced as it is (PostgreSQL builds
 * it), and for the paged Envelope A the page figures.
 */
typedef struct {
    ngx_str_t                  json;       /* empty: the envelope's none */
    ngx_str_t                  page_number;
    ngx_str_t                  page_size;
    ngx_str_t                  total;
    unsigned                   paged:1;
} ngx_platform_data_t;

/*
 * The one envelope writer: a response in the family's envelope, compact
 * JSON. status 200 is a success (message NULL: the family's default);
 * any other an error with message and detail (NULL: by status). Adds
 * Content-Type, X-Request-Id, Content-Language (Envelope A), and for 503
 * Retry-After, for 405 Allow, for 401 WWW-Authenticate. Returns a status
 * for ngx_http_finalize_request() or ngx_platform_finalize().
 */
ngx_int_t ngx_platform_answer(ngx_http_request_t *r, ngx_uint_t status,
    const char *message, const char *detail, ngx_platform_data_t *data);

/*
 * Ends a request that an operation left with NGX_DONE: rc is what a
 * send function returned, a bare HTTP error status, or NGX_DONE when
 * another operation now holds the request (its count is dropped).
 */
void ngx_platform_finalize(ngx_http_request_t *r, ngx_int_t rc);

/*
 * What a handler's rc becomes: a bare HTTP status that nothing was sent
 * for is sent as an error in the family's envelope, with the text
 * recorded by ngx_platform_fail(); anything else is returned as it is.
 */
ngx_int_t ngx_platform_settle(ngx_http_request_t *r, ngx_int_t rc);

/* 200 in the envelope with data (JSON text, len 0: the empty data) */
ngx_int_t ngx_platform_send_ok(ngx_http_request_t *r, const char *message,
    u_char *data, size_t len);

/* an error in the family's envelope */
ngx_int_t ngx_platform_send_error(ngx_http_request_t *r, ngx_uint_t status,
    const char *message, const char *detail);

/* a body of a type ("text/plain; charset=utf-8"), sent as it is */
ngx_int_t ngx_platform_send_body(ngx_http_request_t *r, ngx_uint_t status,
    ngx_str_t *type, u_char *body, size_t len);

/* a body that is already JSON, sent as it is */
ngx_int_t ngx_platform_send_raw(ngx_http_request_t *r, ngx_uint_t status,
    u_char *body, size_t len);

/* a header-only response (204, 304, 200 with no body) */
ngx_int_t ngx_platform_send_empty(ngx_http_request_t *r, ngx_uint_t status);

ngx_int_t ngx_platform_add_header(ngx_http_request_t *r, char *name,
    ngx_str_t *value);



/* ngx_platform_op.c: operation runners and the outcomes of backends */

/* runs the endpoint's statement (ctx->endpoint->sql) */
ngx_int_t ngx_platform_run_sql(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);

/*
 * Maps what a backend answered to a recorded error status: the one place
 * that knows SQLSTATEs and Redis error replies.
 */
ngx_int_t ngx_platform_backend_fail(ngx_http_request_t *r, ngx_int_t rc);


/* ngx_platform_auth.c: bearer tokens, API keys, tenancy headers */

/*
 * Establishes ctx->identity as the route and platform_auth require, and
 * the endpoint's declared inputs: NGX_OK, a bare 400/401/403 (recorded;
 * 401 sets ctx->challenge), 5xx, or NGX_DONE when an API key is looked
 * up; the lookup's completion then calls resume with what it decided.
 */
ngx_int_t ngx_platform_authenticate(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx, ngx_platform_resume_pt resume);

/*
 * Who the request's credentials name, as far as that is known without
 * waiting, for $platform_tenant and $platform_credential read before
 * the content handler (limit_req in the preaccess phase): the tenant and
 * the token's sub or the API key's id into id. A bearer token is
 * verified (or found in the worker's cache), an API key found in the
 * worker's cache; with no credential required by the route, the
 * tenantId header. Nothing is logged, counted or cached; a credential
 * that would be refused names nobody. NGX_OK, or NGX_ERROR.
 */
ngx_int_t ngx_platform_auth_peek(ngx_http_request_t *r,
    ngx_platform_identity_t *id);

char *ngx_platform_auth_merge(ngx_conf_t *cf, ngx_platform_loc_conf_t *prev,
    ngx_platform_loc_conf_t *conf);
ngx_int_t ngx_platform_auth_init_process(ngx_cycle_t *cycle);
void ngx_platform_auth_exit_process(ngx_cycle_t *cycle);

char *ngx_platform_auth_policy(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
char *ngx_platform_jwt_key(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
char *ngx_platform_jwt_jwks(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);


/* ngx_platform_webhook_conf.c: platform_webhook_source, _payment_method */

char *ngx_platform_webhook_conf(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);

/*
 * nginx -t refuses a name served both without a credential and with one:
 * each merged location of the family is recorded, then all are checked
 */
char *ngx_platform_webhooks_record_location(ngx_conf_t *cf,
    ngx_platform_loc_conf_t *plcf);
ngx_int_t ngx_platform_webhooks_check_locations(ngx_conf_t *cf);


/* ngx_platform_metrics.c: the metrics store, in a shared zone */

ngx_int_t ngx_platform_metrics_add_zone(ngx_conf_t *cf);
ngx_int_t ngx_platform_metrics_log_handler(ngx_http_request_t *r);
void ngx_platform_metric_inc(ngx_uint_t metric);
/* a request refused with 429 by a rate limit of a kind (NGX_PLATFORM_RL_*) */
void ngx_platform_metrics_limited(ngx_platform_family_t *family,
    ngx_uint_t kind);
void ngx_platform_metrics_observe(ngx_uint_t histogram, ngx_msec_t ms);
char *ngx_platform_metrics_buckets(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
void ngx_platform_metrics_init_buckets(ngx_platform_main_conf_t *pmcf);


/* ngx_platform_prometheus.c: the metrics endpoint and the pools' gauges */

void ngx_platform_metrics_init_process(ngx_cycle_t *cycle);


/* ngx_platform_subrequest.c: a GET to an internal location, in memory */

typedef struct {
    ngx_uint_t                 status;     /* the response's, or nginx's */
    ngx_str_t                  body;       /* in the request pool */
    unsigned                   own:1;      /* no response: nginx's status
                                              (502 unreachable, 504 timed
                                              out, 404 no such location) */
    unsigned                   incomplete:1;  /* cut short, or larger than
                                              subrequest_output_buffer_size */
} ngx_platform_subrequest_result_t;

typedef void (*ngx_platform_subrequest_pt)(ngx_http_request_t *r,
    void *data, ngx_platform_subrequest_result_t *result);

/*
 * GET uri?args as a subrequest of r, with none of the client's headers
 * and no body; the response is kept in memory. Returns NGX_DONE (the
 * request is counted, like a backend operation: handler ends it with
 * ngx_platform_finalize(), or drops the count with
 * ngx_http_finalize_request(r, NGX_DONE) when it starts another
 * operation) or NGX_ERROR. handler is called later from a posted event,
 * never when the client has gone (the request is then terminated and
 * its pool's cleanups run). Started from an event of another connection
 * (a backend's completion), call ngx_http_run_posted_requests() for r's
 * connection afterwards: that runs the subrequest.
 */
ngx_int_t ngx_platform_subrequest(ngx_http_request_t *r, ngx_str_t *uri,
    ngx_str_t *args, ngx_platform_subrequest_pt handler, void *data);


#endif /* _NGX_PLATFORM_H_INCLUDED_ */
