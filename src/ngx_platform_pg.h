
/*
 * ngx_platform: PostgreSQL on the nginx event loop, one pool per worker.
 */


#ifndef _NGX_PLATFORM_PG_H_INCLUDED_
#define _NGX_PLATFORM_PG_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <libpq-fe.h>

#include "ngx_platform.h"


typedef struct ngx_platform_pg_op_s  ngx_platform_pg_op_t;


/*
 * A statement is prepared on each connection the first time it runs
 * there, or, with platform_pg_prepare off, sent unnamed each time (name
 * is then only for the log); name must be unique in the module.
 * Parameters are text, except those whose bit is set in binary (bit 0:
 * $1): their bytes are sent as they are, for a bytea. A statement that
 * reads no tenant's rows (API keys, shared reference data) is unscoped:
 * it runs without a scope (see ngx_platform_pg_query()), which it would
 * not use.
 *
 * Parameters are copied when the operation is created, except a binary
 * one marked NGX_PLATFORM_PG_BORROWED(n) in binary (n from 0, as for the
 * binary bit, which it sets too): its bytes (a document of megabytes)
 * are read where the caller keeps them, in memory that lasts as long as
 * the caller's pool. An operation is sent only while its caller's pool
 * exists (one whose caller left before it was sent is dropped), and
 * libpq copies what it sends.
 */
typedef struct {
    char                      *name;
    char                      *sql;
    int                        nparams;
    ngx_uint_t                 binary;
    ngx_uint_t                 unscoped;
} ngx_platform_pg_stmt_t;


#define NGX_PLATFORM_PG_BORROWED(n)  ((1 << (n)) | (1 << (16 + (n))))
#define ngx_platform_pg_borrowed(stmt, n)  (((stmt)->binary >> (16 + (n))) & 1)


/*
 * Called once per statement. data is what the caller gave; op is the
 * operation, valid during the call. rc is NGX_OK (res holds the result),
 * NGX_ERROR (the statement failed; res holds the error result, for its
 * SQLSTATE), NGX_PLATFORM_UNAVAILABLE or NGX_PLATFORM_TIMEOUT (res is
 * NULL). A statement that waited longer than platform_pg_lock_timeout for
 * a row lock fails with SQLSTATE 55P03. The pool frees res after the handler returns. The handler may
 * start other operations.
 */
typedef void (*ngx_platform_pg_handler_pt)(void *data,
    ngx_platform_pg_op_t *op, PGresult *res, ngx_int_t rc);


/*
 * Runs stmt with params (stmt->nparams of them; a param with NULL data is
 * SQL NULL; text unless stmt->binary says otherwise) on the primary.
 * scope, when not NULL, is the tenant whose rows the statement may see
 * under row-level security: "set_config('app.tenant_id', scope, true)"
 * runs first, in the same round trip and the same implicit transaction,
 * so that the setting ends with the operation; a scoped statement on the
 * primary also gets platform_pg_lock_timeout there. pool
 * is the caller's (a request's): when it is destroyed the operation is
 * detached and finishes as an orphan, its result read and dropped; log
 * names the caller in the operation's log lines while it is attached.
 *
 * owner, when not NULL and not empty, is who the operation is counted
 * against (a tenant, or a client address): it may hold at most
 * platform_pg_tenant_share percent of a pool's pipeline slots and queue,
 * orphans included, until each of its operations finishes.
 *
 * Returns NGX_DONE when the handler will be called (never before this
 * returns), NGX_PLATFORM_OVER_SHARE when owner holds its share already,
 * NGX_PLATFORM_UNAVAILABLE when the pool and its queue are full or
 * PostgreSQL is known to be down, or NGX_ERROR.
 */
ngx_int_t ngx_platform_pg_query(ngx_pool_t *pool, ngx_log_t *log,
    ngx_str_t *owner, ngx_str_t *scope, ngx_platform_pg_stmt_t *stmt,
    ngx_str_t *params, ngx_platform_pg_handler_pt handler, void *data);

/*
 * The same for a statement that only reads: it runs on the read pool
 * (platform_pg_read) when there is one, and on the primary when the read
 * pool cannot take it or loses it with its connection. It may share its
 * sync point, so its implicit transaction, with the reads of other
 * callers sent in the same pass of the event loop
 * (platform_pg_coalesce): a statement that writes must never be given
 * here.
 */
ngx_int_t ngx_platform_pg_read_query(ngx_pool_t *pool, ngx_log_t *log,
    ngx_str_t *owner, ngx_str_t *scope, ngx_platform_pg_stmt_t *stmt,
    ngx_str_t *params, ngx_platform_pg_handler_pt handler, void *data);


/* SQLSTATE of an error result, "" when there is none */
char *ngx_platform_pg_sqlstate(PGresult *res);

ngx_int_t ngx_platform_pg_init_process(ngx_cycle_t *cycle,
    ngx_platform_main_conf_t *pmcf);
void ngx_platform_pg_exit_process(ngx_cycle_t *cycle,
    ngx_platform_main_conf_t *pmcf);

/* for health and metrics */
typedef struct {
    ngx_uint_t                 configured;
    ngx_uint_t                 idle;        /* connections, none in flight */
    ngx_uint_t                 busy;
    ngx_uint_t                 in_flight;   /* operations on connections */
    ngx_uint_t                 waiting;
    ngx_uint_t                 connected;   /* last connect succeeded */
    ngx_uint_t                 owners;      /* holding operations */
} ngx_platform_pg_stats_t;

/* of the primary (read 0) or of the read pool (read 1) */
void ngx_platform_pg_stats(ngx_uint_t read, ngx_platform_pg_stats_t *stats);


#endif /* _NGX_PLATFORM_PG_H_INCLUDED_ */
