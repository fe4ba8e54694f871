
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
 * there; name must be unique in the module.
 */
typedef struct {
    char                      *name;
    char                      *sql;
    int                        nparams;
} ngx_platform_pg_stmt_t;


/*
 * Called once per statement. rc is NGX_OK (res holds the result), NGX_ERROR
 * (the statement failed; res holds the error result, for its SQLSTATE),
 * NGX_PLATFORM_UNAVAILABLE or NGX_PLATFORM_TIMEOUT (res is NULL).
 * The pool frees res after the handler returns. The handler either calls
 * ngx_platform_pg_next() to run another statement on the same connection
 * or ends the request with ngx_platform_finalize().
 */
typedef void (*ngx_platform_pg_handler_pt)(ngx_http_request_t *r,
    ngx_platform_pg_op_t *op, PGresult *res, ngx_int_t rc);


/*
 * Runs stmt with params (stmt->nparams of them; a param with NULL data is
 * SQL NULL, text format). Returns NGX_DONE when the handler will be called
 * (the request's count was taken), or NGX_PLATFORM_UNAVAILABLE when the
 * pool and its queue are full or PostgreSQL is known to be down.
 */
ngx_int_t ngx_platform_pg_query(ngx_http_request_t *r,
    ngx_platform_pg_stmt_t *stmt, ngx_str_t *params,
    ngx_platform_pg_handler_pt handler);

/*
 * From a handler: the next statement on the same connection, for example
 * inside BEGIN ... COMMIT. Returns NGX_OK or NGX_ERROR (nothing sent;
 * the connection is closed, which rolls back an open transaction).
 */
ngx_int_t ngx_platform_pg_next(ngx_platform_pg_op_t *op,
    ngx_platform_pg_stmt_t *stmt, ngx_str_t *params,
    ngx_platform_pg_handler_pt handler);

/*
 * A read of one JSON document: the statement's single column of at most
 * one row. 200 with the document in the family's envelope, else 404.
 */
typedef struct {
    ngx_platform_pg_stmt_t     stmt;            /* first: see the .c */
    char                      *found;           /* the 200 message */
    char                      *missing;         /* the 404 message */
    char                      *missing_detail;
} ngx_platform_pg_document_t;

/* for a route handler to return: NGX_DONE, or the error it sent */
ngx_int_t ngx_platform_pg_document(ngx_http_request_t *r,
    ngx_platform_pg_document_t *doc, ngx_str_t *params);

/* SQLSTATE of an error result, "" when there is none */
char *ngx_platform_pg_sqlstate(PGresult *res);

ngx_int_t ngx_platform_pg_init_process(ngx_cycle_t *cycle,
    ngx_platform_main_conf_t *pmcf);
void ngx_platform_pg_exit_process(ngx_cycle_t *cycle,
    ngx_platform_main_conf_t *pmcf);

/* for health and metrics */
typedef struct {
    ngx_uint_t                 idle;
    ngx_uint_t                 busy;
    ngx_uint_t                 waiting;
    ngx_uint_t                 connected;   /* last connect succeeded */
} ngx_platform_pg_stats_t;

void ngx_platform_pg_stats(ngx_platform_pg_stats_t *stats);


#endif /* _NGX_PLATFORM_PG_H_INCLUDED_ */
