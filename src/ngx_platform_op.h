
/*
 * ngx_platform: operation runners. An endpoint served by a statement
 * declares it here: the statement, where each parameter comes from, how
 * its result answers, and the texts of its outcomes.
 */


#ifndef _NGX_PLATFORM_OP_H_INCLUDED_
#define _NGX_PLATFORM_OP_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_platform.h"
#include "ngx_platform_pg.h"
#include "ngx_platform_redis.h"


/* where a statement parameter comes from */
#define NGX_PLATFORM_P_TENANT         1
#define NGX_PLATFORM_P_COUNTRY        2
#define NGX_PLATFORM_P_USER           3
#define NGX_PLATFORM_P_MERCHANT       4
#define NGX_PLATFORM_P_SUBJECT        5
#define NGX_PLATFORM_P_BODY           6      /* the body, JSON text */
#define NGX_PLATFORM_P_ARG(n)         (0x100 + (n))  /* ctx->args[n] */


/*
 * SQL of an update whose body says what changes: column takes the body's
 * field when the body (a jsonb expression) has it, null included (which
 * clears it), else keeps the row's value; cast: "" or "::numeric", ...
 */
#define NGX_PLATFORM_SQL_SET(body, row, column, field, cast)                 \
    " " column " = CASE WHEN " body " ? '" field "'"                         \
    " THEN (" body "->>'" field "')" cast " ELSE " row "." column " END,"


/* how the result answers */
#define NGX_PLATFORM_ANSWER_DOCUMENT  1  /* a row: its one column is data */
#define NGX_PLATFORM_ANSWER_EMPTY     2  /* a row: 200 with no body */
#define NGX_PLATFORM_ANSWER_PAGE      3  /* a row: page number, page size,
                                            total, data (paged Envelope A) */
#define NGX_PLATFORM_ANSWER_CHECKED   4  /* a row: a refusal, NULL when none,
                                            then data */
#define NGX_PLATFORM_ANSWER_RAW       5  /* as CHECKED, but the data is the
                                            whole body, no envelope */


/*
 * A refusal the statement names (ANSWER_CHECKED, ANSWER_RAW): when the
 * first column's text is name, the answer is this status and these texts.
 * The statement decides, under its own locks, why a request cannot be
 * done (an order already delivered: 409; a caller who is not the task's
 * sampler: 403); the table says how that reads to the client.
 */
typedef struct {
    const char                *name;
    ngx_uint_t                 status;
    const char                *message;
    const char                *detail;
} ngx_platform_outcome_t;


struct ngx_platform_sql_s {
    ngx_platform_pg_stmt_t     stmt;
    ngx_uint_t                 params[NGX_PLATFORM_MAX_PARAMS];
    ngx_uint_t                 answer;     /* NGX_PLATFORM_ANSWER_* */

    const char                *ok;         /* NULL: the envelope's */

    /* no row: 404 */
    const char                *missing;
    const char                *missing_detail;

    /* SQLSTATE 23505, a unique violation: 409 */
    const char                *conflict;
    const char                *conflict_detail;

    /* SQLSTATE 23503, a foreign key violation: this status (0: 500) */
    ngx_uint_t                 reference;
    const char                *reference_message;
    const char                *reference_detail;

    /*
     * ANSWER_CHECKED: a refusal is 400 with this message and this detail,
     * whose "%s" is replaced by the refusal's text (say, the offending
     * field and value)
     */
    const char                *refused;
    const char                *refused_detail;

    /* named refusals, ended by a NULL name; others are "refused" above */
    ngx_platform_outcome_t    *outcomes;
};


/*
 * A request's own statement or Redis command, for the endpoints served
 * by code: the request is counted while the backend works and the
 * handler gets it back as data. Return NGX_DONE or an error status
 * (recorded) for the handler to return.
 */
ngx_int_t ngx_platform_query(ngx_http_request_t *r,
    ngx_platform_pg_stmt_t *stmt, ngx_str_t *params,
    ngx_platform_pg_handler_pt handler);
/*
 * The same for a statement that only reads: the read pool may answer it.
 * API keys are looked up on the primary, so that a revoked key is refused
 * at once.
 */
ngx_int_t ngx_platform_read_query(ngx_http_request_t *r,
    ngx_platform_pg_stmt_t *stmt, ngx_str_t *params,
    ngx_platform_pg_handler_pt handler);
ngx_int_t ngx_platform_command(ngx_http_request_t *r,
    ngx_platform_redis_handler_pt handler, int argc, const char **argv,
    const size_t *argvlen);
ngx_int_t ngx_platform_eval(ngx_http_request_t *r,
    ngx_platform_redis_script_t *script, int nkeys, int argc,
    const char **argv, const size_t *argvlen,
    ngx_platform_redis_handler_pt handler);

/* a failed statement (res: its error result) as a recorded status */
ngx_int_t ngx_platform_pg_outcome(ngx_http_request_t *r,
    ngx_platform_sql_t *sql, PGresult *res, ngx_int_t rc);

/* a Redis error reply as a recorded status: 503 or 500 */
ngx_int_t ngx_platform_redis_outcome(ngx_http_request_t *r,
    redisReply *reply);


#endif /* _NGX_PLATFORM_OP_H_INCLUDED_ */
