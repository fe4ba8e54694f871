
/*
 * ngx_platform: operation runners, between the request core and the
 * transports. An endpoint declared with a statement is run here: its
 * parameters taken from the request's checked inputs, its result turned
 * into the answer it declares. This is also the one place that maps what
 * a backend answered (SQLSTATEs, Redis error replies, down, timed out)
 * to an HTTP status, and the one place that times the request's waits on
 * the backends ($platform_pg_time, $platform_redis_time): each call into
 * a transport goes through a wait whose completion counts the time
 * before it calls the caller's handler.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_platform.h"
#include "ngx_platform_op.h"


/* a call into a transport, timed from its send to its completion */
typedef struct {
    ngx_http_request_t                *request;
    ngx_platform_pg_handler_pt         pg;
    ngx_platform_redis_handler_pt      redis;
    uint64_t                           start;
} ngx_platform_wait_t;


static ngx_platform_wait_t *ngx_platform_wait(ngx_http_request_t *r);
static void ngx_platform_pg_waited(void *data, ngx_platform_pg_op_t *op,
    PGresult *res, ngx_int_t rc);
static void ngx_platform_redis_waited(void *data, redisReply *reply,
    ngx_int_t rc);
static ngx_int_t ngx_platform_sql_send(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);
static ngx_int_t ngx_platform_counted(ngx_http_request_t *r, ngx_int_t rc);
static ngx_str_t *ngx_platform_scope(ngx_http_request_t *r);
static ngx_str_t *ngx_platform_owner(ngx_http_request_t *r);
static void ngx_platform_sql_done(void *data, ngx_platform_pg_op_t *op,
    PGresult *res, ngx_int_t rc);
static ngx_int_t ngx_platform_sql_answer(ngx_http_request_t *r,
    ngx_platform_sql_t *sql, PGresult *res);
static ngx_int_t ngx_platform_sql_missing(ngx_http_request_t *r,
    ngx_platform_sql_t *sql);
static ngx_int_t ngx_platform_sql_raw(ngx_http_request_t *r, PGresult *res);
static ngx_int_t ngx_platform_sql_refuse(ngx_http_request_t *r,
    ngx_platform_sql_t *sql, PGresult *res);
static ngx_uint_t ngx_platform_sqlstate_is(char *state, char *prefix);


ngx_int_t
ngx_platform_run_sql(ngx_http_request_t *r, ngx_platform_ctx_t *ctx)
{
    ngx_int_t  rc;

    rc = ngx_platform_sql_send(r, ctx);

    if (rc == NGX_DONE) {
        r->main->count++;
    }

    return rc;
}


/* the statement with its parameters from the checked inputs */

static ngx_int_t
ngx_platform_sql_send(ngx_http_request_t *r, ngx_platform_ctx_t *ctx)
{
    int                       i;
    ngx_int_t                 rc;
    ngx_str_t                 params[NGX_PLATFORM_MAX_PARAMS];
    ngx_uint_t                src;
    ngx_platform_sql_t       *sql;
    ngx_platform_wait_t      *w;
    ngx_platform_identity_t  *id;

    sql = ctx->endpoint->sql;
    id = &ctx->identity;

    for (i = 0; i < sql->stmt.nparams && i < NGX_PLATFORM_MAX_PARAMS; i++) {
        src = sql->params[i];

        switch (src) {

        case NGX_PLATFORM_P_TENANT:
            params[i] = id->tenant;
            break;

        case NGX_PLATFORM_P_COUNTRY:
            params[i] = id->country;
            break;

        case NGX_PLATFORM_P_USER:
            params[i] = id->user;
            break;

        case NGX_PLATFORM_P_MERCHANT:
            params[i] = id->merchant;
            break;

        case NGX_PLATFORM_P_SUBJECT:
            params[i] = id->subject;
            break;

        case NGX_PLATFORM_P_BODY:
            params[i].data = ctx->body;
            params[i].len = ctx->body_len;
            break;

        default:
            if (src < NGX_PLATFORM_P_ARG(0)
                || src - NGX_PLATFORM_P_ARG(0) >= ctx->nargs)
            {
                ngx_log_error(NGX_LOG_ALERT, r->connection->log, 0,
                              "platform: statement \"%s\" has no "
                              "parameter %d", sql->stmt.name, i + 1);
                return NGX_HTTP_INTERNAL_SERVER_ERROR;
            }

            params[i] = ctx->args[src - NGX_PLATFORM_P_ARG(0)];
            break;
        }
    }

    w = ngx_platform_wait(r);
    if (w == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    w->pg = ngx_platform_sql_done;

    /* a GET only reads: the read pool, if there is one, may answer it */

    if (r->method & (NGX_HTTP_GET|NGX_HTTP_HEAD)) {
        rc = ngx_platform_pg_read_query(r->pool, r->connection->log,
                                        ngx_platform_owner(r),
                                        ngx_platform_scope(r), &sql->stmt,
                                        params, ngx_platform_pg_waited, w);

    } else {
        rc = ngx_platform_pg_query(r->pool, r->connection->log,
                                   ngx_platform_owner(r),
                                   ngx_platform_scope(r), &sql->stmt, params,
                                   ngx_platform_pg_waited, w);
    }

    if (rc == NGX_DONE) {
        return NGX_DONE;
    }

    return ngx_platform_backend_fail(r, rc);
}


static void
ngx_platform_sql_done(void *data, ngx_platform_pg_op_t *op, PGresult *res,
    ngx_int_t rc)
{
    ngx_http_request_t *r = data;

    char                *state;
    ngx_platform_ctx_t  *ctx;

    ctx = ngx_platform_get_ctx(r);

    if (rc == NGX_ERROR && !ctx->retried) {
        state = ngx_platform_pg_sqlstate(res);

        /* a serialization failure or a deadlock: once more, then 503 */

        if (ngx_strcmp(state, "40001") == 0
            || ngx_strcmp(state, "40P01") == 0)
        {
            ctx->retried = 1;
            ngx_platform_metric_inc(NGX_PLATFORM_M_PG_RETRIES);

            rc = ngx_platform_sql_send(r, ctx);

            if (rc == NGX_DONE) {
                /* the retry holds the request; this operation lets go */
                return;
            }

            ngx_platform_finalize(r, rc);
            return;
        }
    }

    if (rc != NGX_OK) {
        ngx_platform_finalize(r, ngx_platform_pg_outcome(r, ctx->endpoint->sql,
                                                         res, rc));
        return;
    }

    ngx_platform_finalize(r, ngx_platform_sql_answer(r, ctx->endpoint->sql,
                                                     res));
}


static ngx_int_t
ngx_platform_sql_answer(ngx_http_request_t *r, ngx_platform_sql_t *sql,
    PGresult *res)
{
    ngx_platform_data_t  data;

    if (PQntuples(res) == 0 || PQnfields(res) == 0) {
        return ngx_platform_sql_missing(r, sql);
    }

    switch (sql->answer) {

    case NGX_PLATFORM_ANSWER_EMPTY:
        return ngx_platform_send_empty(r, NGX_HTTP_OK);

    case NGX_PLATFORM_ANSWER_PAGE:
        if (PQnfields(res) != 4) {
            break;
        }

        ngx_memzero(&data, sizeof(ngx_platform_data_t));

        data.paged = 1;

        data.page_number.data = (u_char *) PQgetvalue(res, 0, 0);
        data.page_number.len = PQgetlength(res, 0, 0);
        data.page_size.data = (u_char *) PQgetvalue(res, 0, 1);
        data.page_size.len = PQgetlength(res, 0, 1);
        data.total.data = (u_char *) PQgetvalue(res, 0, 2);
        data.total.len = PQgetlength(res, 0, 2);
        data.json.data = (u_char *) PQgetvalue(res, 0, 3);
        data.json.len = PQgetlength(res, 0, 3);

        if (data.page_number.len == 0 || data.page_size.len == 0
            || data.total.len == 0 || data.json.len == 0)
        {
            break;
        }

        /* the envelope is written into the request pool: res may go */
        return ngx_platform_answer(r, NGX_HTTP_OK, sql->ok, NULL, &data);

    case NGX_PLATFORM_ANSWER_CHECKED:
    case NGX_PLATFORM_ANSWER_RAW:
        if (PQnfields(res) != 2) {
            break;
        }

        if (!PQgetisnull(res, 0, 0)) {
            return ngx_platform_sql_refuse(r, sql, res);
        }

        if (PQgetisnull(res, 0, 1)) {
            return ngx_platform_sql_missing(r, sql);
        }

        if (sql->answer == NGX_PLATFORM_ANSWER_RAW) {
            return ngx_platform_sql_raw(r, res);
        }

        return ngx_platform_send_ok(r, sql->ok,
                                    (u_char *) PQgetvalue(res, 0, 1),
                                    PQgetlength(res, 0, 1));

    default: /* NGX_PLATFORM_ANSWER_DOCUMENT */
        if (PQgetisnull(res, 0, 0)) {
            return ngx_platform_sql_missing(r, sql);
        }

        return ngx_platform_send_ok(r, sql->ok,
                                    (u_char *) PQgetvalue(res, 0, 0),
                                    PQgetlength(res, 0, 0));
    }

    ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                  "platform: statement \"%s\" answered an unexpected row",
                  sql->stmt.name);

    return ngx_platform_backend_fail(r, NGX_ERROR);
}


static ngx_int_t
ngx_platform_sql_missing(ngx_http_request_t *r, ngx_platform_sql_t *sql)
{
    return ngx_platform_fail(r, NGX_HTTP_NOT_FOUND,
                             sql->missing ? sql->missing
                                          : "Resource not found.",
                             sql->missing_detail);
}


/* the statement built the whole body: it is sent as it is, from the pool */

static ngx_int_t
ngx_platform_sql_raw(ngx_http_request_t *r, PGresult *res)
{
    u_char  *body;
    size_t   len;

    len = PQgetlength(res, 0, 1);

    body = ngx_pnalloc(r->pool, len);
    if (body == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ngx_memcpy(body, PQgetvalue(res, 0, 1), len);

    return ngx_platform_send_raw(r, NGX_HTTP_OK, body, len);
}


/*
 * The statement refused the request: a refusal it names in the declared
 * outcomes answers as that outcome says; any other says which input is
 * at fault: 400 with the declared detail, in the request's language, the
 * refusal's text in place of its "%s".
 */

static ngx_int_t
ngx_platform_sql_refuse(ngx_http_request_t *r, ngx_platform_sql_t *sql,
    PGresult *res)
{
    char                    *detail;
    ngx_str_t                refusal;
    ngx_platform_ctx_t      *ctx;
    ngx_platform_outcome_t  *o;

    ctx = ngx_platform_get_ctx(r);

    refusal.data = (u_char *) PQgetvalue(res, 0, 0);
    refusal.len = PQgetlength(res, 0, 0);

    for (o = sql->outcomes; o && o->name; o++) {
        if (refusal.len == ngx_strlen(o->name)
            && ngx_strncmp(refusal.data, o->name, refusal.len) == 0)
        {
            return ngx_platform_fail(r, o->status, o->message, o->detail);
        }
    }

    refusal.len = ngx_min(refusal.len, 256);

    /* the detail outlives res: it is written into the request pool */

    detail = ngx_platform_text_format(r, ngx_platform_text(ctx,
                                             sql->refused_detail
                                             ? sql->refused_detail : "%s"),
                                      &refusal, 1);
    if (detail == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_platform_fail(r, NGX_HTTP_BAD_REQUEST,
                             sql->refused ? sql->refused : "Bad request.",
                             detail);
}


/*
 * What a failed statement means to the client. Constraint violations
 * are the client's conflict or reference; a lost connection, a server
 * going away or out of resources, a cancelled statement and a repeated
 * serialization failure are 503 (retry shortly); anything else is 500
 * with nothing of the server's message in the body.
 */

ngx_int_t
ngx_platform_pg_outcome(ngx_http_request_t *r, ngx_platform_sql_t *sql,
    PGresult *res, ngx_int_t rc)
{
    char  *state;

    if (rc != NGX_ERROR) {
        return ngx_platform_backend_fail(r, rc);
    }

    state = ngx_platform_pg_sqlstate(res);

    if (ngx_strcmp(state, "23505") == 0 && sql && sql->conflict) {
        return ngx_platform_fail(r, NGX_HTTP_CONFLICT, sql->conflict,
                                 sql->conflict_detail);
    }

    if (ngx_strcmp(state, "23503") == 0 && sql && sql->reference) {
        return ngx_platform_fail(r, sql->reference, sql->reference_message,
                                 sql->reference_detail);
    }

    if (ngx_strcmp(state, "55P03") == 0) {
        /* platform_pg_lock_timeout: another request holds the row */
        return ngx_platform_fail_reason(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                                        NGX_PLATFORM_E_LOCK_TIMEOUT,
                                        "Service temporarily unavailable.",
                                        "The resource is being changed by "
                                        "another request; retry shortly.");
    }

    if (ngx_strcmp(state, "40001") == 0 || ngx_strcmp(state, "40P01") == 0
        || ngx_platform_sqlstate_is(state, "08")
        || ngx_platform_sqlstate_is(state, "53")
        || ngx_strcmp(state, "57P01") == 0
        || ngx_strcmp(state, "57014") == 0)
    {
        return ngx_platform_backend_fail(r, NGX_PLATFORM_UNAVAILABLE);
    }

    return ngx_platform_backend_fail(r, NGX_ERROR);
}


static ngx_uint_t
ngx_platform_sqlstate_is(char *state, char *prefix)
{
    return ngx_strncmp(state, prefix, 2) == 0;
}


/*
 * A Redis error reply: a replica after a failover (READONLY, the
 * transport reconnects), a server loading its data, busy with a script
 * or out of memory is 503; any other is 500.
 */

ngx_int_t
ngx_platform_redis_outcome(ngx_http_request_t *r, redisReply *reply)
{
    size_t        i;
    ngx_str_t     s;
    static char  *unavailable[] = { "READONLY", "LOADING", "BUSY", "OOM",
                                    "MASTERDOWN", "CLUSTERDOWN",
                                    "TRYAGAIN", "MOVED", "ASK" };

    if (reply && reply->type == REDIS_REPLY_ERROR && reply->str) {
        s.data = (u_char *) reply->str;
        s.len = reply->len;

        for (i = 0; i < sizeof(unavailable) / sizeof(char *); i++) {
            if (s.len >= ngx_strlen(unavailable[i])
                && ngx_strncmp(s.data, unavailable[i],
                               ngx_strlen(unavailable[i]))
                   == 0)
            {
                ngx_platform_log_limited(NGX_PLATFORM_LOG_REDIS_FAILED,
                                         NGX_LOG_WARN, r->connection->log, 0,
                                         "platform: Redis answered \"%*s\"",
                                         ngx_min(s.len, 64), s.data);

                return ngx_platform_backend_fail(r,
                                                 NGX_PLATFORM_UNAVAILABLE);
            }
        }

        ngx_platform_log_limited(NGX_PLATFORM_LOG_REDIS_FAILED, NGX_LOG_ERR,
                                 r->connection->log, 0,
                                 "platform: Redis error: \"%*s\"",
                                 ngx_min(s.len, 128), s.data);
    }

    return ngx_platform_backend_fail(r, NGX_ERROR);
}


ngx_int_t
ngx_platform_backend_fail(ngx_http_request_t *r, ngx_int_t rc)
{
    switch (rc) {

    case NGX_PLATFORM_TIMEOUT:
        return ngx_platform_fail_reason(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                           NGX_PLATFORM_E_BACKEND_TIMEOUT,
                           "Service temporarily unavailable.",
                           "A backend did not answer in time; retry shortly.");

    case NGX_PLATFORM_UNAVAILABLE:
        return ngx_platform_fail_reason(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                                 NGX_PLATFORM_E_BACKEND_UNAVAILABLE,
                                 "Service temporarily unavailable.",
                                 "A backend is unavailable; retry shortly.");

    case NGX_PLATFORM_OVER_SHARE:
        ngx_platform_get_ctx(r)->retry_after = 1;
        return ngx_platform_fail_reason(r, NGX_HTTP_TOO_MANY_REQUESTS,
                                 NGX_PLATFORM_E_OVER_SHARE,
                                 "Too many requests.",
                                 "Your share of the database connections is "
                                 "in use; retry shortly.");

    default:
        return ngx_platform_fail(r, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                 "Internal server error.",
                                 "The request could not be completed.");
    }
}


ngx_int_t
ngx_platform_query(ngx_http_request_t *r, ngx_platform_pg_stmt_t *stmt,
    ngx_str_t *params, ngx_platform_pg_handler_pt handler)
{
    ngx_platform_wait_t  *w;

    w = ngx_platform_wait(r);
    if (w == NULL) {
        return ngx_platform_backend_fail(r, NGX_ERROR);
    }

    w->pg = handler;

    return ngx_platform_counted(r, ngx_platform_pg_query(r->pool,
                                    r->connection->log, ngx_platform_owner(r),
                                    ngx_platform_scope(r), stmt, params,
                                    ngx_platform_pg_waited, w));
}


ngx_int_t
ngx_platform_read_query(ngx_http_request_t *r, ngx_platform_pg_stmt_t *stmt,
    ngx_str_t *params, ngx_platform_pg_handler_pt handler)
{
    ngx_platform_wait_t  *w;

    w = ngx_platform_wait(r);
    if (w == NULL) {
        return ngx_platform_backend_fail(r, NGX_ERROR);
    }

    w->pg = handler;

    return ngx_platform_counted(r, ngx_platform_pg_read_query(r->pool,
                                    r->connection->log, ngx_platform_owner(r),
                                    ngx_platform_scope(r), stmt, params,
                                    ngx_platform_pg_waited, w));
}


/*
 * The wait of a call made now; it lives in the request's pool, as long
 * as the transport may call back (an operation is detached when the
 * pool goes)
 */

static ngx_platform_wait_t *
ngx_platform_wait(ngx_http_request_t *r)
{
    ngx_platform_wait_t  *w;

    w = ngx_pcalloc(r->pool, sizeof(ngx_platform_wait_t));
    if (w == NULL) {
        return NULL;
    }

    w->request = r;
    w->start = ngx_platform_clock();

    return w;
}


static void
ngx_platform_pg_waited(void *data, ngx_platform_pg_op_t *op, PGresult *res,
    ngx_int_t rc)
{
    ngx_platform_wait_t *w = data;

    ngx_platform_waited(w->request, NGX_PLATFORM_BACKEND_PG, w->start);

    w->pg(w->request, op, res, rc);
}


static void
ngx_platform_redis_waited(void *data, redisReply *reply, ngx_int_t rc)
{
    ngx_platform_wait_t *w = data;

    ngx_platform_waited(w->request, NGX_PLATFORM_BACKEND_REDIS, w->start);

    w->redis(w->request, reply, rc);
}


/*
 * The tenant of the request's statements under row-level security
 * (platform_pg_row_security): the one the statements are scoped to by
 * their own WHERE, so that the policies are a second wall behind it.
 * None before a tenant is known (an API key's lookup): the statement
 * then sees no tenant's rows.
 */

static ngx_str_t *
ngx_platform_scope(ngx_http_request_t *r)
{
    ngx_platform_ctx_t        *ctx;
    ngx_platform_main_conf_t  *pmcf;

    pmcf = ngx_http_get_module_main_conf(r, ngx_platform_module);

    if (!pmcf->pg_row_security) {
        return NULL;
    }

    ctx = ngx_platform_get_ctx(r);

    if (ctx == NULL) {
        return NULL;
    }

    if (ctx->scoped) {
        return &ctx->scope;
    }

    return ctx->identity.tenant.len ? &ctx->identity.tenant : NULL;
}


/*
 * Who the request's statements count against in the pool's shares
 * (platform_pg_tenant_share): its tenant, whether or not row-level
 * security is on; before a tenant is known (an API key's lookup, an
 * anonymous route), the client's address, an IPv6 one by its /64, the
 * block one client is usually given.
 */

static ngx_str_t *
ngx_platform_owner(ngx_http_request_t *r)
{
    ngx_platform_ctx_t  *ctx;

    ctx = ngx_platform_get_ctx(r);

    if (ctx == NULL) {
        return &r->connection->addr_text;
    }

    if (ctx->scoped && ctx->scope.len) {
        return &ctx->scope;
    }

    if (ctx->identity.tenant.len) {
        return &ctx->identity.tenant;
    }

    if (ctx->owner.len == 0
        && ngx_platform_client_address(r, &ctx->owner) != NGX_OK)
    {
        return &r->connection->addr_text;
    }

    return &ctx->owner;
}


/* a backend took the operation: the request is counted until it answers */

static ngx_int_t
ngx_platform_counted(ngx_http_request_t *r, ngx_int_t rc)
{
    if (rc == NGX_DONE) {
        r->main->count++;
        return NGX_DONE;
    }

    return ngx_platform_backend_fail(r, rc);
}


ngx_int_t
ngx_platform_command(ngx_http_request_t *r,
    ngx_platform_redis_handler_pt handler, int argc, const char **argv,
    const size_t *argvlen)
{
    ngx_int_t             rc;
    ngx_platform_wait_t  *w;

    w = ngx_platform_wait(r);
    if (w == NULL) {
        return ngx_platform_backend_fail(r, NGX_ERROR);
    }

    w->redis = handler;

    rc = ngx_platform_redis_command(r->pool, r->connection->log,
                                    ngx_platform_redis_waited, w, argc, argv,
                                    argvlen);

    return ngx_platform_counted(r, rc);
}


ngx_int_t
ngx_platform_eval(ngx_http_request_t *r, ngx_platform_redis_script_t *script,
    int nkeys, int argc, const char **argv, const size_t *argvlen,
    ngx_platform_redis_handler_pt handler)
{
    ngx_int_t             rc;
    ngx_platform_wait_t  *w;

    w = ngx_platform_wait(r);
    if (w == NULL) {
        return ngx_platform_backend_fail(r, NGX_ERROR);
    }

    w->redis = handler;

    rc = ngx_platform_redis_eval(r->pool, r->connection->log, script, nkeys,
                                 argc, argv, argvlen,
                                 ngx_platform_redis_waited, w);

    return ngx_platform_counted(r, rc);
}
