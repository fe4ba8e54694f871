
/*
 * ngx_platform: business identity verification through a credit bureau
 * (spec 2.10 and 4.5, decisions.md sections 3 "Identity verification"
 * and 5 "identity bureau"). Envelope A, bearer token.
 *
 * POST /api/v{version}/Identity/verification/business-credit-bureau
 * with rc_number (or its alias companyNumber) and optionally
 * customer_name. A request goes:
 *
 * 1. to the RC number's call in flight in this worker, if there is one:
 *    it waits for that call's outcome (one bureau call for concurrent
 *    misses);
 * 2. else, with platform_identity_cache_time, to PostgreSQL: the newest
 *    answer the bureau gave the tenant for the RC number within that
 *    time is reused, recorded as a reuse and answered, in one statement;
 * 3. else to the bureau: a subrequest GET <platform_identity_bureau>
 *    ?rc_number=<url-encoded>, whose location holds the proxy_* settings.
 *    Requests of the worker for the same RC number that arrive meanwhile
 *    wait for it (step 1).
 *
 * Each outcome of the bureau is recorded (one row per request, the
 * status computed by PostgreSQL, which also compares the names: see
 * identity_name_fold() in the migration) and answered from what the
 * statement returns: 200 VERIFIED or NAME_MISMATCH, 404, 502, 504.
 *
 * The caller whose request asks the bureau may leave: its request (and
 * the subrequest) ends, and the first waiter, if any, asks the bureau in
 * its place. A waiter that leaves is just taken off the queue.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_platform.h"
#include "ngx_platform_op.h"
#include "ngx_platform_rate_limit.h"


#define NGX_PLATFORM_IDENTITY_RC_MAX    64
#define NGX_PLATFORM_IDENTITY_NAME_MAX  200

/* refusals of the code, answered, translated and documented from here */
#define NGX_PLATFORM_IDENTITY_NO_RC                                          \
    "rc_number or companyNumber is required."
#define NGX_PLATFORM_IDENTITY_RC_DIFFER                                      \
    "rc_number and companyNumber differ."

/* an ASCII letter or digit */
#define ngx_platform_identity_alnum(c)                                       \
    (((c) >= '0' && (c) <= '9')                                               \
     || (((c) | 0x20) >= 'a' && ((c) | 0x20) <= 'z'))


typedef struct ngx_platform_identity_flight_s  ngx_platform_identity_flight_t;


/* a request's state: ctx->data */

typedef struct {
    ngx_http_request_t               *request;
    ngx_str_t                         rc_number;
    ngx_str_t                         name;       /* data NULL: none */

    /* the call this request leads or waits for; NULL once delivered */
    ngx_platform_identity_flight_t   *flight;
    ngx_queue_t                       queue;      /* in flight->waiters */
    ngx_event_t                       wake;

    /* delivered: FOUND, NOT_FOUND, BUREAU_ERROR, BUREAU_TIMEOUT; NULL: 500 */
    const char                       *outcome;
    ngx_str_t                         bureau;     /* FOUND: the answer */

    unsigned                          lead:1;     /* wake: ask the bureau */
    unsigned                          budgeted:1; /* the tenant's budget let
                                                     it call the bureau */
} ngx_platform_identity_req_t;


/* a bureau call in flight in this worker, by RC number */

struct ngx_platform_identity_flight_s {
    ngx_str_node_t                    sn;
    ngx_platform_identity_req_t      *leader;
    ngx_queue_t                       waiters;
};


static ngx_int_t ngx_platform_identity_verify(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);
static ngx_int_t ngx_platform_identity_inputs(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx, ngx_platform_identity_req_t *ir);
static ngx_int_t ngx_platform_identity_string(ngx_http_request_t *r,
    json_t *body, char *name, ngx_str_t *value);
static void ngx_platform_identity_cached(void *data, ngx_platform_pg_op_t *op,
    PGresult *res, ngx_int_t rc);
static ngx_int_t ngx_platform_identity_answer(ngx_http_request_t *r,
    PGresult *res);
static ngx_int_t ngx_platform_identity_ask(ngx_http_request_t *r,
    ngx_platform_identity_req_t *ir);
static void ngx_platform_identity_budgeted(ngx_http_request_t *r,
    ngx_int_t rc);
static ngx_int_t ngx_platform_identity_call(ngx_http_request_t *r,
    ngx_platform_identity_req_t *ir);
static void ngx_platform_identity_answered(ngx_http_request_t *r, void *data,
    ngx_platform_subrequest_result_t *result);
static const char *ngx_platform_identity_outcome(ngx_http_request_t *r,
    ngx_platform_identity_req_t *ir, ngx_platform_subrequest_result_t *res);
static void ngx_platform_identity_deliver(
    ngx_platform_identity_flight_t *flight, const char *outcome,
    ngx_str_t *bureau);
static void ngx_platform_identity_wake(ngx_event_t *ev);
static ngx_int_t ngx_platform_identity_record(ngx_http_request_t *r,
    ngx_platform_identity_req_t *ir);
static void ngx_platform_identity_cleanup(void *data);
static void ngx_platform_identity_forget(
    ngx_platform_identity_flight_t *flight);


static ngx_rbtree_t       ngx_platform_identity_flights;
static ngx_rbtree_node_t  ngx_platform_identity_sentinel;


/*
 * The status of a verification, from the bureau's answer (jsonb, NULL
 * when the bureau did not know the company) and the customer name: the
 * one place the names are compared, for fresh answers and reuses alike.
 */

#define NGX_PLATFORM_IDENTITY_STATUS(bureau, name)                           \
    " CASE WHEN " bureau " IS NULL THEN 'NOT_FOUND'"                          \
    " WHEN " name " IS NULL OR identity_name_fold(" name ")"                  \
    " = identity_name_fold(" bureau "->>'companyName')"                       \
    " THEN 'VERIFIED' ELSE 'NAME_MISMATCH' END"

/* the answer of a recorded row i: refusal, data */

#define NGX_PLATFORM_IDENTITY_ANSWER                                         \
    " SELECT CASE WHEN i.status IN ('VERIFIED', 'NAME_MISMATCH')"             \
    " THEN NULL ELSE i.status END,"                                           \
    " (SELECT row_to_json(x)::text FROM (SELECT"                              \
    " i.bureau->>'companyName' AS \"companyName\","                           \
    " i.bureau->>'address' AS address,"                                       \
    " i.status AS \"verificationStatus\") x)"                                 \
    " FROM i"


/*
 * A repeat within the cache time: the newest answer the bureau gave the
 * tenant for the RC number (through the partial index), recorded again
 * as a reuse for this caller and answered; no row: ask the bureau.
 * $1 tenant, $2 sub, $3 RC number, $4 customer name, $5 seconds.
 */

static ngx_platform_pg_stmt_t  ngx_platform_identity_cached_stmt = {
    "platform_identity_cached",

    "WITH c AS (SELECT v.id, v.bureau FROM identity_verifications v"
    " WHERE v.tenant_id = $1 AND v.rc_number = $3"
    " AND v.cached_from IS NULL"
    " AND v.status IN ('VERIFIED', 'NAME_MISMATCH', 'NOT_FOUND')"
    " AND v.created_at > now() - make_interval(secs => $5::float8)"
    " ORDER BY v.created_at DESC LIMIT 1),"
    " i AS (INSERT INTO identity_verifications"
    " (tenant_id, rc_number, customer_name, status, bureau, requested_by,"
    " cached_from)"
    " SELECT $1, $3, $4,"
    NGX_PLATFORM_IDENTITY_STATUS("c.bureau", "$4::text")
    ", c.bureau, $2, c.id FROM c"
    " RETURNING status, bureau)"
    NGX_PLATFORM_IDENTITY_ANSWER,

    5, 0, 0
};


/*
 * What the bureau answered, recorded and answered. $1 tenant, $2 sub,
 * $3 RC number, $4 customer name, $5 outcome (FOUND, NOT_FOUND,
 * BUREAU_ERROR, BUREAU_TIMEOUT), $6 the bureau's answer (FOUND only).
 */

static ngx_platform_outcome_t  ngx_platform_identity_outcomes[] = {
    { "NOT_FOUND", NGX_HTTP_NOT_FOUND, "Company not found.",
      "The credit bureau knows no company with this RC number." },
    { "BUREAU_ERROR", NGX_HTTP_BAD_GATEWAY, "Bad gateway.",
      "The credit bureau could not be reached or gave no valid answer." },
    { "BUREAU_TIMEOUT", NGX_HTTP_GATEWAY_TIME_OUT, "Gateway timeout.",
      "The credit bureau did not answer in time." },
    { NULL, 0, NULL, NULL }
};


static ngx_platform_sql_t  ngx_platform_identity_record_sql = {
    { "platform_identity_record",

      "WITH b AS (SELECT $6::jsonb AS bureau),"
      " i AS (INSERT INTO identity_verifications"
      " (tenant_id, rc_number, customer_name, status, bureau, requested_by)"
      " SELECT $1, $3, $4, CASE WHEN $5::text = 'FOUND' THEN"
      NGX_PLATFORM_IDENTITY_STATUS("b.bureau", "$4::text")
      " ELSE $5::text END, b.bureau, $2 FROM b"
      " RETURNING status, bureau)"
      NGX_PLATFORM_IDENTITY_ANSWER,

      6, 0, 0 },

    { NGX_PLATFORM_P_TENANT, NGX_PLATFORM_P_SUBJECT, NGX_PLATFORM_P_ARG(0),
      NGX_PLATFORM_P_ARG(1), NGX_PLATFORM_P_ARG(2), NGX_PLATFORM_P_ARG(3) },
    NGX_PLATFORM_ANSWER_CHECKED,

    "Business verification completed.",
    "Company not found.",
    "The credit bureau knows no company with this RC number.",
    NULL, NULL, 0, NULL, NULL,
    NULL, NULL, ngx_platform_identity_outcomes
};


/*
 * rc_number and companyNumber are one field under two names (spec 2.10);
 * lengths are counted trimmed, and the values used are trimmed
 */

static ngx_platform_field_t  ngx_platform_identity_body[] = {
    { "rc_number", NGX_PLATFORM_T_STRING,
      NGX_PLATFORM_F_NULLABLE|NGX_PLATFORM_F_TRIM
      |NGX_PLATFORM_F_MIN|NGX_PLATFORM_F_MAX,
      1, NGX_PLATFORM_IDENTITY_RC_MAX, NULL, NULL, NULL },
    { "companyNumber", NGX_PLATFORM_T_STRING,
      NGX_PLATFORM_F_NULLABLE|NGX_PLATFORM_F_TRIM
      |NGX_PLATFORM_F_MIN|NGX_PLATFORM_F_MAX,
      1, NGX_PLATFORM_IDENTITY_RC_MAX, NULL, NULL, NULL },
    { "customer_name", NGX_PLATFORM_T_STRING,
      NGX_PLATFORM_F_NULLABLE|NGX_PLATFORM_F_TRIM|NGX_PLATFORM_F_MAX,
      0, NGX_PLATFORM_IDENTITY_NAME_MAX, NULL, NULL, NULL },
    { NULL, 0, 0, 0, 0, NULL, NULL, NULL }
};


/* the shapes of the data its endpoints answer (docs/api.md) */

static const char  ngx_platform_identity_schemas[] =
    "{"
    "\"BusinessVerification\":{\"type\":\"object\",\"properties\":{"
     "\"companyName\":{\"type\":\"string\"},"
     "\"address\":{\"type\":\"string\"},"
     "\"verificationStatus\":{\"type\":\"string\",\"enum\":[\"VERIFIED\","
     "\"NAME_MISMATCH\"]}}}"
    "}";


/*
 * platform_openapi: the endpoint's success data, an example on the demo
 * data, and what its code refuses
 */

static ngx_platform_doc_answer_t  ngx_platform_identity_verify_answers[] = {
    { NGX_HTTP_BAD_REQUEST, "Bad request.", NGX_PLATFORM_IDENTITY_NO_RC },
    { NGX_HTTP_BAD_REQUEST, "Bad request.", NGX_PLATFORM_IDENTITY_RC_DIFFER },
    { 429, "Too many requests.", NGX_PLATFORM_RL_BUREAU_DETAIL },
    { 0, NULL, NULL }
};


static ngx_platform_doc_t  ngx_platform_identity_verify_doc = {
    "Verify a business with the credit bureau",
    ngx_platform_doc_schema("BusinessVerification"),
    "{\"body\":{\"rc_number\":\"RC100001\","
    "\"customer_name\":\"Demo Foods Limited\"}}",
    ngx_platform_identity_verify_answers, 0, NULL
};


static ngx_platform_endpoint_t  ngx_platform_identity_endpoints[] = {

    { NGX_HTTP_POST,
      "/api/v{version}/Identity/verification/business-credit-bureau",
      NGX_PLATFORM_AUTH_BEARER,
      NGX_PLATFORM_IN_TENANT|NGX_PLATFORM_IN_NO_HEAD,
      NULL, ngx_platform_identity_body,
      NULL, NULL,
      &ngx_platform_identity_record_sql, ngx_platform_identity_verify,
      &ngx_platform_identity_verify_doc },

    { 0, NULL, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL }
};


static ngx_platform_text_t  ngx_platform_identity_texts[] = {
    { "Business verification completed.",
      "Vérification de l'entreprise effectuée." },
    { "Company not found.", "Entreprise introuvable." },
    { "The credit bureau knows no company with this RC number.",
      "Le bureau de crédit ne connaît aucune entreprise ayant ce "
      "numéro RC." },
    { "The credit bureau could not be reached or gave no valid answer.",
      "Le bureau de crédit est injoignable ou n'a pas donné de réponse "
      "valide." },
    { "The credit bureau did not answer in time.",
      "Le bureau de crédit n'a pas répondu à temps." },
    { NGX_PLATFORM_IDENTITY_NO_RC,
      "rc_number ou companyNumber est requis." },
    { NGX_PLATFORM_IDENTITY_RC_DIFFER,
      "rc_number et companyNumber diffèrent." },
    { "rc_number may hold only letters, digits, spaces and - / .",
      "rc_number ne peut contenir que des lettres, des chiffres, des espaces "
      "et - / ." },
    { "companyNumber may hold only letters, digits, spaces and - / .",
      "companyNumber ne peut contenir que des lettres, des chiffres, des "
      "espaces et - / ." },
    { "customer_name must not hold control characters.",
      "customer_name ne doit pas contenir de caractères de contrôle." },
    { NULL, NULL }
};


ngx_platform_family_t  ngx_platform_identity_family = {
    ngx_string("identity"),
    NGX_PLATFORM_ENVELOPE_A,
    NGX_PLATFORM_BACKEND_PG,
    ngx_platform_identity_endpoints,
    ngx_platform_identity_texts,
    0,
    ngx_platform_identity_schemas,
    NULL
};


static ngx_int_t
ngx_platform_identity_verify(ngx_http_request_t *r, ngx_platform_ctx_t *ctx)
{
    u_char                       *p;
    ngx_int_t                     rc;
    ngx_str_t                    *params;
    ngx_pool_cleanup_t           *cln;
    ngx_platform_loc_conf_t      *plcf;
    ngx_platform_identity_req_t  *ir;

    ir = ngx_pcalloc(r->pool, sizeof(ngx_platform_identity_req_t));
    if (ir == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ir->request = r;
    ir->wake.handler = ngx_platform_identity_wake;
    ir->wake.data = ir;
    ir->wake.log = r->connection->log;

    rc = ngx_platform_identity_inputs(r, ctx, ir);
    if (rc != NGX_OK) {
        return rc;
    }

    /* the request leaves the flight table when its pool goes */

    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    cln->handler = ngx_platform_identity_cleanup;
    cln->data = ir;

    ctx->data = ir;

    if (ngx_platform_identity_flights.root == NULL) {
        ngx_rbtree_init(&ngx_platform_identity_flights,
                        &ngx_platform_identity_sentinel,
                        ngx_str_rbtree_insert_value);
    }

    plcf = ngx_http_get_module_loc_conf(r, ngx_platform_module);

    if (plcf->identity_cache_time == 0
        || ngx_str_rbtree_lookup(&ngx_platform_identity_flights,
                                 &ir->rc_number,
                                 ngx_crc32_short(ir->rc_number.data,
                                                 ir->rc_number.len))
           != NULL)
    {
        return ngx_platform_identity_ask(r, ir);
    }

    params = ngx_pcalloc(r->pool, 5 * sizeof(ngx_str_t));
    p = ngx_pnalloc(r->pool, NGX_TIME_T_LEN);
    if (params == NULL || p == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    params[0] = ctx->identity.tenant;
    params[1] = ctx->identity.subject;
    params[2] = ir->rc_number;
    params[3] = ir->name;
    params[4].data = p;
    params[4].len = ngx_sprintf(p, "%T", plcf->identity_cache_time) - p;

    return ngx_platform_query(r, &ngx_platform_identity_cached_stmt, params,
                              ngx_platform_identity_cached);
}


/*
 * The body beyond what the validator checked: the RC number under either
 * name (both: the same), its characters, the customer name's
 */

static ngx_int_t
ngx_platform_identity_inputs(ngx_http_request_t *r, ngx_platform_ctx_t *ctx,
    ngx_platform_identity_req_t *ir)
{
    u_char     *p, *last;
    ngx_str_t   rc, alias;

    if (ngx_platform_identity_string(r, ctx->json, "rc_number", &rc)
        != NGX_OK
        || ngx_platform_identity_string(r, ctx->json, "companyNumber", &alias)
           != NGX_OK
        || ngx_platform_identity_string(r, ctx->json, "customer_name",
                                        &ir->name)
           != NGX_OK)
    {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (rc.data == NULL && alias.data == NULL) {
        return ngx_platform_fail(r, NGX_HTTP_BAD_REQUEST, "Bad request.",
                                 NGX_PLATFORM_IDENTITY_NO_RC);
    }

    if (rc.data && alias.data
        && (rc.len != alias.len
            || ngx_strncmp(rc.data, alias.data, rc.len) != 0))
    {
        return ngx_platform_fail(r, NGX_HTTP_BAD_REQUEST, "Bad request.",
                                 NGX_PLATFORM_IDENTITY_RC_DIFFER);
    }

    ir->rc_number = rc.data ? rc : alias;

    /*
     * RC and BN numbers are letters and digits, sometimes with spaces,
     * dashes, slashes or dots: anything else is a mistake, and kept out
     * of the bureau's URL and the log
     */

    last = ir->rc_number.data + ir->rc_number.len;

    for (p = ir->rc_number.data; p < last; p++) {
        if (!ngx_platform_identity_alnum(*p)
            && *p != ' ' && *p != '-' && *p != '/' && *p != '.')
        {
            return ngx_platform_fail(r, NGX_HTTP_BAD_REQUEST, "Bad request.",
                       rc.data ? "rc_number may hold only letters, digits, "
                                 "spaces and - / ."
                               : "companyNumber may hold only letters, "
                                 "digits, spaces and - / .");
        }
    }

    /* a name with control characters would not be stored as text */

    last = ir->name.data + ir->name.len;

    for (p = ir->name.data; p && p < last; p++) {
        if ((*p < 0x20 && *p != '\t' && *p != '\r' && *p != '\n')
            || *p == 0x7f)
        {
            return ngx_platform_fail(r, NGX_HTTP_BAD_REQUEST, "Bad request.",
                           "customer_name must not hold control characters.");
        }
    }

    if (ir->name.len == 0) {
        /* an empty name is no name: nothing to compare */
        ngx_str_null(&ir->name);
    }

    return NGX_OK;
}


/* a string member, trimmed as F_TRIM counts it; data NULL: absent, null */

static ngx_int_t
ngx_platform_identity_string(ngx_http_request_t *r, json_t *body, char *name,
    ngx_str_t *value)
{
    u_char  *p, *last;
    json_t  *v;

    ngx_str_null(value);

    v = body ? json_object_get(body, name) : NULL;

    if (v == NULL || !json_is_string(v)) {
        return NGX_OK;
    }

    p = (u_char *) json_string_value(v);
    last = p + json_string_length(v);

    while (p < last && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) {
        p++;
    }

    while (last > p
           && (last[-1] == ' ' || last[-1] == '\t' || last[-1] == '\r'
               || last[-1] == '\n'))
    {
        last--;
    }

    /* copied: the parsed body is not the request's to keep */

    value->len = last - p;
    value->data = ngx_pnalloc(r->pool, value->len + 1);
    if (value->data == NULL) {
        return NGX_ERROR;
    }

    ngx_memcpy(value->data, p, value->len);

    return NGX_OK;
}


/* the cache's answer, or a miss: ask the bureau */

static void
ngx_platform_identity_cached(void *data, ngx_platform_pg_op_t *op,
    PGresult *res, ngx_int_t rc)
{
    ngx_http_request_t *r = data;

    ngx_connection_t    *c;
    ngx_platform_ctx_t  *ctx;

    c = r->connection;
    ctx = ngx_platform_get_ctx(r);

    if (rc != NGX_OK) {
        ngx_platform_finalize(r, ngx_platform_pg_outcome(r,
                                        &ngx_platform_identity_record_sql,
                                        res, rc));
        return;
    }

    if (PQntuples(res) > 0) {
        ngx_platform_finalize(r, ngx_platform_identity_answer(r, res));
        return;
    }

    /* NGX_DONE: the call or the wait holds the request, the query lets go */

    ngx_platform_finalize(r, ngx_platform_identity_ask(r, ctx->data));

    /* a subrequest started here runs now */
    ngx_http_run_posted_requests(c);
}


/* a recorded row (refusal, data) as the record statement answers it */

static ngx_int_t
ngx_platform_identity_answer(ngx_http_request_t *r, PGresult *res)
{
    size_t                   len;
    ngx_str_t                refusal;
    ngx_platform_sql_t      *sql;
    ngx_platform_outcome_t  *o;

    sql = &ngx_platform_identity_record_sql;

    if (PQnfields(res) != 2 || PQgetisnull(res, 0, 1)) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "identity: unexpected row from \"%s\"",
                      ngx_platform_identity_cached_stmt.name);
        return ngx_platform_backend_fail(r, NGX_ERROR);
    }

    if (!PQgetisnull(res, 0, 0)) {
        refusal.data = (u_char *) PQgetvalue(res, 0, 0);
        refusal.len = PQgetlength(res, 0, 0);

        for (o = sql->outcomes; o->name; o++) {
            len = ngx_strlen(o->name);

            if (refusal.len == len
                && ngx_strncmp(refusal.data, o->name, len) == 0)
            {
                return ngx_platform_fail(r, o->status, o->message,
                                         o->detail);
            }
        }

        return ngx_platform_backend_fail(r, NGX_ERROR);
    }

    return ngx_platform_send_ok(r, sql->ok, (u_char *) PQgetvalue(res, 0, 1),
                                PQgetlength(res, 0, 1));
}


/*
 * No answer to reuse: wait for the RC number's call in flight, or make
 * it, within the tenant's budget of calls (platform_identity_bureau_rate:
 * only a call is paid, so only a call counts). Returns NGX_DONE with the
 * request counted, or a status.
 */

static ngx_int_t
ngx_platform_identity_ask(ngx_http_request_t *r,
    ngx_platform_identity_req_t *ir)
{
    ngx_int_t                        rc;
    uint32_t                         hash;
    ngx_platform_ctx_t              *ctx;
    ngx_platform_loc_conf_t         *plcf;
    ngx_platform_identity_flight_t  *flight;

    hash = ngx_crc32_short(ir->rc_number.data, ir->rc_number.len);

    flight = (ngx_platform_identity_flight_t *)
             ngx_str_rbtree_lookup(&ngx_platform_identity_flights,
                                   &ir->rc_number, hash);

    if (flight) {
        ngx_queue_insert_tail(&flight->waiters, &ir->queue);
        ir->flight = flight;

        r->main->count++;

        return NGX_DONE;
    }

    plcf = ngx_http_get_module_loc_conf(r, ngx_platform_module);

    if (plcf->identity_bureau_rate && !ir->budgeted) {
        ir->budgeted = 1;
        ctx = ngx_platform_get_ctx(r);

        rc = ngx_platform_rate_limit_one(r, plcf->identity_bureau_rate,
                                         &ctx->identity.tenant,
                                         ngx_platform_identity_budgeted);
        if (rc != NGX_OK) {
            /* NGX_DONE: asked again once Redis has answered; or 429 */

            if (rc == NGX_DONE) {
                /* a wait on Redis, for $platform_redis_time */
                ctx->limit_wait = ngx_platform_clock();
            }

            return rc;
        }
    }

    flight = ngx_alloc(sizeof(ngx_platform_identity_flight_t)
                       + ir->rc_number.len, r->connection->log);
    if (flight == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ngx_memzero(flight, sizeof(ngx_platform_identity_flight_t));

    flight->sn.str.len = ir->rc_number.len;
    flight->sn.str.data = (u_char *) (flight + 1);
    ngx_memcpy(flight->sn.str.data, ir->rc_number.data, ir->rc_number.len);
    flight->sn.node.key = hash;

    ngx_queue_init(&flight->waiters);

    ngx_rbtree_insert(&ngx_platform_identity_flights, &flight->sn.node);

    flight->leader = ir;
    ir->flight = flight;

    rc = ngx_platform_identity_call(r, ir);

    if (rc != NGX_DONE) {
        /* nobody waits yet: a call that did not start is forgotten */
        ir->flight = NULL;
        ngx_platform_identity_forget(flight);
    }

    return rc;
}


/* the tenant's budget answered: a call may have started meanwhile */

static void
ngx_platform_identity_budgeted(ngx_http_request_t *r, ngx_int_t rc)
{
    ngx_connection_t    *c;
    ngx_platform_ctx_t  *ctx;

    c = r->connection;
    ctx = ngx_platform_get_ctx(r);

    if (ctx->limit_wait) {
        ngx_platform_waited(r, NGX_PLATFORM_BACKEND_REDIS, ctx->limit_wait);
        ctx->limit_wait = 0;
    }

    if (rc == NGX_OK) {
        rc = ngx_platform_identity_ask(r, ctx->data);
    }

    /* NGX_DONE: the call or the wait holds the request, the budget lets go */

    ngx_platform_finalize(r, rc);

    /* a subrequest started here runs now */
    ngx_http_run_posted_requests(c);
}


/* the subrequest to the bureau's location: GET <location>?rc_number=... */

static ngx_int_t
ngx_platform_identity_call(ngx_http_request_t *r,
    ngx_platform_identity_req_t *ir)
{
    u_char                   *p;
    ngx_str_t                 args;
    ngx_platform_loc_conf_t  *plcf;

    plcf = ngx_http_get_module_loc_conf(r, ngx_platform_module);

    if (plcf->identity_bureau.len == 0) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "identity: no platform_identity_bureau location "
                      "is configured");
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    args.data = ngx_pnalloc(r->pool, sizeof("rc_number=") - 1
                                     + 3 * ir->rc_number.len);
    if (args.data == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    p = ngx_cpymem(args.data, "rc_number=", sizeof("rc_number=") - 1);

    /* everything but the unreserved characters of RFC 3986 is escaped */

    p = (u_char *) ngx_escape_uri(p, ir->rc_number.data, ir->rc_number.len,
                                  NGX_ESCAPE_URI_COMPONENT);

    args.len = p - args.data;

    if (ngx_platform_subrequest(r, &plcf->identity_bureau, &args,
                                ngx_platform_identity_answered, ir)
        != NGX_DONE)
    {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return NGX_DONE;
}


/* the bureau answered the leader: every request of the call learns it */

static void
ngx_platform_identity_answered(ngx_http_request_t *r, void *data,
    ngx_platform_subrequest_result_t *result)
{
    ngx_platform_identity_req_t *ir = data;

    ngx_int_t    rc;
    const char  *outcome;

    outcome = ngx_platform_identity_outcome(r, ir, result);

    if (ir->flight) {
        ngx_platform_identity_deliver(ir->flight, outcome, &result->body);
    }

    ir->outcome = outcome;
    ir->bureau = result->body;

    rc = ngx_platform_identity_record(r, ir);

    if (rc == NGX_DONE) {
        ngx_http_finalize_request(r, NGX_DONE);
        return;
    }

    ngx_platform_finalize(r, rc);
}


/*
 * What the bureau's response means. Its body is never logged nor sent:
 * a malformed one is only described.
 */

static const char *
ngx_platform_identity_outcome(ngx_http_request_t *r,
    ngx_platform_identity_req_t *ir, ngx_platform_subrequest_result_t *res)
{
    json_t        *root, *name, *address;
    const char    *problem;
    json_error_t   error;

    if (res->status == NGX_HTTP_GATEWAY_TIME_OUT) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "identity: the bureau timed out for rc_number \"%V\"",
                      &ir->rc_number);
        return "BUREAU_TIMEOUT";
    }

    if (res->own) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "identity: the bureau location failed with %ui "
                      "for rc_number \"%V\"", res->status, &ir->rc_number);
        return "BUREAU_ERROR";
    }

    if (res->status == NGX_HTTP_NOT_FOUND) {
        return "NOT_FOUND";
    }

    if (res->status != NGX_HTTP_OK) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "identity: the bureau answered %ui for rc_number \"%V\"",
                      res->status, &ir->rc_number);
        return "BUREAU_ERROR";
    }

    problem = NULL;
    root = NULL;

    if (res->incomplete) {
        problem = "cut short or larger than subrequest_output_buffer_size";
        goto malformed;
    }

    root = json_loadb((char *) res->body.data, res->body.len,
                      JSON_REJECT_DUPLICATES, &error);

    if (root == NULL) {
        problem = "not JSON";
        goto malformed;
    }

    name = json_object_get(root, "companyName");
    address = json_object_get(root, "address");

    if (!json_is_object(root)) {
        problem = "not a JSON object";

    } else if (!json_is_string(name) || !json_is_string(address)) {
        problem = "companyName or address missing or not strings";
    }

    json_decref(root);

    if (problem == NULL) {
        return "FOUND";
    }

malformed:

    ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                  "identity: the bureau's answer for rc_number \"%V\" "
                  "is malformed (%s, %uz bytes)",
                  &ir->rc_number, problem, res->body.len);

    return "BUREAU_ERROR";
}


/*
 * The outcome to each request waiting on the call, copied into its own
 * pool, for its own record and answer; the call is over.
 */

static void
ngx_platform_identity_deliver(ngx_platform_identity_flight_t *flight,
    const char *outcome, ngx_str_t *bureau)
{
    ngx_queue_t                  *q;
    ngx_platform_identity_req_t  *w;

    while (!ngx_queue_empty(&flight->waiters)) {
        q = ngx_queue_head(&flight->waiters);
        ngx_queue_remove(q);

        w = ngx_queue_data(q, ngx_platform_identity_req_t, queue);

        w->flight = NULL;
        w->lead = 0;
        w->outcome = outcome;

        if (outcome && bureau->len) {
            w->bureau.data = ngx_pnalloc(w->request->pool, bureau->len);

            if (w->bureau.data == NULL) {
                w->outcome = NULL;

            } else {
                ngx_memcpy(w->bureau.data, bureau->data, bureau->len);
                w->bureau.len = bureau->len;
            }
        }

        ngx_post_event(&w->wake, &ngx_posted_events);
    }

    if (flight->leader) {
        flight->leader->flight = NULL;
    }

    ngx_platform_identity_forget(flight);
}


/* a waiter's turn: record the outcome delivered, or ask the bureau */

static void
ngx_platform_identity_wake(ngx_event_t *ev)
{
    ngx_platform_identity_req_t *ir = ev->data;

    ngx_int_t            rc;
    ngx_connection_t    *c;
    ngx_http_request_t  *r;

    r = ir->request;
    c = r->connection;

    if (ir->lead) {
        ir->lead = 0;

        rc = ngx_platform_identity_call(r, ir);

        if (rc != NGX_DONE) {
            /* the others are told; this one answers the status */
            ngx_platform_identity_deliver(ir->flight, NULL, NULL);
        }

    } else {
        rc = ngx_platform_identity_record(r, ir);
    }

    /* NGX_DONE: the operation holds the request, the wait's count goes */

    ngx_platform_finalize(r, rc);

    ngx_http_run_posted_requests(c);
}


/* the record statement with this request's outcome */

static ngx_int_t
ngx_platform_identity_record(ngx_http_request_t *r,
    ngx_platform_identity_req_t *ir)
{
    ngx_platform_ctx_t  *ctx;

    if (ir->outcome == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ctx = ngx_platform_get_ctx(r);

    ctx->args[0] = ir->rc_number;
    ctx->args[1] = ir->name;
    ctx->args[2].data = (u_char *) ir->outcome;
    ctx->args[2].len = ngx_strlen(ir->outcome);

    if (ngx_strcmp(ir->outcome, "FOUND") == 0) {
        ctx->args[3] = ir->bureau;

    } else {
        ngx_str_null(&ctx->args[3]);
    }

    ctx->nargs = 4;

    return ngx_platform_run_sql(r, ctx);
}


/*
 * The request's pool goes (answered, or its client left): out of the
 * call it waits for; a leader that leaves before the answer hands the
 * call to the first waiter, or the call is forgotten.
 */

static void
ngx_platform_identity_cleanup(void *data)
{
    ngx_platform_identity_req_t *ir = data;

    ngx_queue_t                     *q;
    ngx_platform_identity_req_t     *next;
    ngx_platform_identity_flight_t  *flight;

    if (ir->wake.posted) {
        ngx_delete_posted_event(&ir->wake);
    }

    flight = ir->flight;

    if (flight == NULL) {
        return;
    }

    ir->flight = NULL;

    if (flight->leader != ir) {
        ngx_queue_remove(&ir->queue);
        return;
    }

    flight->leader = NULL;

    if (ngx_queue_empty(&flight->waiters)) {
        ngx_platform_identity_forget(flight);
        return;
    }

    q = ngx_queue_head(&flight->waiters);
    ngx_queue_remove(q);

    next = ngx_queue_data(q, ngx_platform_identity_req_t, queue);

    ngx_log_error(NGX_LOG_INFO, next->request->connection->log, 0,
                  "identity: the request asking the bureau for rc_number "
                  "\"%V\" left; this one asks again", &flight->sn.str);

    flight->leader = next;
    next->lead = 1;

    ngx_post_event(&next->wake, &ngx_posted_events);
}


static void
ngx_platform_identity_forget(ngx_platform_identity_flight_t *flight)
{
    ngx_rbtree_delete(&ngx_platform_identity_flights, &flight->sn.node);
    ngx_free(flight);
}
