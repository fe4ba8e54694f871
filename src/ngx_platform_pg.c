
/*
 * ngx_platform: PostgreSQL on the nginx event loop.
 *
 * Each worker keeps a pool of libpq connections driven by nginx events:
 * non-blocking connect (PQconnectStartParams/PQconnectPoll), statements
 * prepared once per connection and run with PQsendQueryPrepared, output
 * flushed while PQflush() asks for it, input read with PQconsumeInput()
 * until PQgetResult() returns NULL. Requests that find every connection
 * busy wait in a bounded queue; past it they get 503 at once.
 *
 * An operation (op) outlives its request when the client goes away: the
 * request's pool cleanup detaches it, the statement finishes as an orphan
 * and its result is dropped. Operations and their parameters are
 * therefore allocated from the heap, never from the request pool.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_platform_pg.h"


#define NGX_PLATFORM_PG_MAX_PREPARED   64

#define NGX_PLATFORM_PG_BACKOFF_MIN    250
#define NGX_PLATFORM_PG_BACKOFF_MAX    2000


typedef enum {
    ngx_platform_pg_connecting = 0,
    ngx_platform_pg_idle,
    ngx_platform_pg_preparing,
    ngx_platform_pg_querying
} ngx_platform_pg_state_e;


typedef struct {
    ngx_queue_t                  queue;      /* pool->idle or pool->busy */
    ngx_platform_pg_pool_t      *pool;
    PGconn                      *conn;
    ngx_connection_t            *c;
    ngx_platform_pg_op_t        *op;
    ngx_platform_pg_state_e      state;
    ngx_uint_t                   uses;
    ngx_event_t                  timer;      /* connect, query, idle */
    PGresult                    *res;
    ngx_uint_t                   nprepared;
    ngx_platform_pg_stmt_t      *prepared[NGX_PLATFORM_PG_MAX_PREPARED];
} ngx_platform_pg_conn_t;


struct ngx_platform_pg_op_s {
    ngx_queue_t                  queue;      /* pool->waiting */
    void                        *data;       /* NULL once orphaned */
    ngx_log_t                   *log;
    ngx_pool_cleanup_t          *cleanup;
    ngx_platform_pg_conn_t      *conn;
    ngx_platform_pg_stmt_t      *stmt;
    ngx_platform_pg_handler_pt   handler;
    char                       **values;
    int                         *lengths;
    ngx_event_t                  wait_timer;
    unsigned                     continued:1;
    unsigned                     waiting:1;
};


struct ngx_platform_pg_pool_s {
    ngx_platform_main_conf_t    *conf;
    ngx_log_t                   *log;

    const char                 **keywords;
    const char                 **values;

    ngx_queue_t                  idle;       /* most recently used first */
    ngx_queue_t                  busy;
    ngx_queue_t                  waiting;
    ngx_uint_t                   nconns;
    ngx_uint_t                   nwaiting;

    ngx_msec_t                   backoff;
    ngx_msec_t                   retry_at;
    ngx_uint_t                   connected;
};


static ngx_platform_pg_op_t *ngx_platform_pg_op_create(
    ngx_platform_pg_stmt_t *stmt, ngx_str_t *params,
    ngx_platform_pg_handler_pt handler);
static ngx_int_t ngx_platform_pg_op_params(ngx_platform_pg_op_t *op,
    ngx_platform_pg_stmt_t *stmt, ngx_str_t *params);
static void ngx_platform_pg_op_free(ngx_platform_pg_op_t *op);
static void ngx_platform_pg_request_cleanup(void *data);
static void ngx_platform_pg_wait_timeout(ngx_event_t *ev);
static ngx_int_t ngx_platform_pg_connect(ngx_platform_pg_pool_t *pool,
    ngx_platform_pg_op_t *op);
static ngx_int_t ngx_platform_pg_wrap_socket(ngx_platform_pg_conn_t *pc);
static void ngx_platform_pg_unwrap_socket(ngx_platform_pg_conn_t *pc);
static void ngx_platform_pg_connect_poll(ngx_platform_pg_conn_t *pc);
static void ngx_platform_pg_connected(ngx_platform_pg_conn_t *pc);
static void ngx_platform_pg_connect_failed(ngx_platform_pg_conn_t *pc,
    char *reason);
static ngx_int_t ngx_platform_pg_dispatch(ngx_platform_pg_conn_t *pc,
    ngx_platform_pg_op_t *op);
static void ngx_platform_pg_run(ngx_platform_pg_conn_t *pc,
    ngx_platform_pg_op_t *op);
static ngx_int_t ngx_platform_pg_send(ngx_platform_pg_conn_t *pc);
static ngx_int_t ngx_platform_pg_flush(ngx_platform_pg_conn_t *pc);
static void ngx_platform_pg_read_handler(ngx_event_t *ev);
static void ngx_platform_pg_write_handler(ngx_event_t *ev);
static void ngx_platform_pg_timer_handler(ngx_event_t *ev);
static void ngx_platform_pg_receive(ngx_platform_pg_conn_t *pc);
static void ngx_platform_pg_complete(ngx_platform_pg_conn_t *pc,
    PGresult *res, ngx_int_t rc);
static void ngx_platform_pg_release(ngx_platform_pg_conn_t *pc);
static void ngx_platform_pg_fail(ngx_platform_pg_conn_t *pc, ngx_int_t rc,
    char *reason);
static void ngx_platform_pg_close(ngx_platform_pg_conn_t *pc);
static void ngx_platform_pg_serve_waiting(ngx_platform_pg_pool_t *pool);
static ngx_uint_t ngx_platform_pg_is_prepared(ngx_platform_pg_conn_t *pc,
    ngx_platform_pg_stmt_t *stmt);
static size_t ngx_platform_pg_line(const char *message);
static ngx_log_t *ngx_platform_pg_log(ngx_platform_pg_conn_t *pc,
    ngx_platform_pg_op_t *op);


/* one pool per worker process */
static ngx_platform_pg_pool_t  *ngx_platform_pg_pool;


ngx_int_t
ngx_platform_pg_query(ngx_pool_t *p, ngx_log_t *log,
    ngx_platform_pg_stmt_t *stmt, ngx_str_t *params,
    ngx_platform_pg_handler_pt handler, void *data)
{
    ngx_queue_t             *q;
    ngx_pool_cleanup_t      *cln;
    ngx_platform_pg_op_t    *op;
    ngx_platform_pg_conn_t  *pc;
    ngx_platform_pg_pool_t  *pool;

    pool = ngx_platform_pg_pool;

    if (pool == NULL) {
        ngx_log_error(NGX_LOG_ERR, log, 0,
                      "platform: \"platform_pg\" is not configured");
        return NGX_PLATFORM_UNAVAILABLE;
    }

    cln = ngx_pool_cleanup_add(p, 0);
    if (cln == NULL) {
        return NGX_ERROR;
    }

    op = ngx_platform_pg_op_create(stmt, params, handler);
    if (op == NULL) {
        return NGX_ERROR;
    }

    op->data = data;
    op->log = log;
    op->cleanup = cln;

    cln->handler = ngx_platform_pg_request_cleanup;
    cln->data = op;

    /*
     * Nothing here calls the handler before NGX_DONE is returned: failures
     * are answered by the return code, later ones from event handlers.
     */

    if (!ngx_queue_empty(&pool->idle)) {
        q = ngx_queue_head(&pool->idle);
        ngx_queue_remove(q);

        pc = ngx_queue_data(q, ngx_platform_pg_conn_t, queue);
        ngx_queue_insert_head(&pool->busy, q);

        if (ngx_platform_pg_dispatch(pc, op) != NGX_OK) {
            ngx_log_error(NGX_LOG_ERR, log, 0,
                          "platform: PostgreSQL connection lost: %*s",
                          ngx_platform_pg_line(PQerrorMessage(pc->conn)),
                          PQerrorMessage(pc->conn));
            pc->op = NULL;
            op->conn = NULL;
            ngx_platform_pg_close(pc);
            goto unavailable;
        }

    } else if (pool->nconns < pool->conf->pg_pool_size
               && ngx_current_msec >= pool->retry_at)
    {
        if (ngx_platform_pg_connect(pool, op) != NGX_OK) {
            goto unavailable;
        }

    } else if (pool->nconns > 0
               && pool->nwaiting < pool->conf->pg_queue_size)
    {
        /* every connection is busy: wait for one, for a bounded time */

        op->waiting = 1;
        ngx_queue_insert_tail(&pool->waiting, &op->queue);
        pool->nwaiting++;

        op->wait_timer.handler = ngx_platform_pg_wait_timeout;
        op->wait_timer.data = op;
        op->wait_timer.log = log;
        /* a request waits here: the timer must hold a graceful exit */
        op->wait_timer.cancelable = 0;

        ngx_add_timer(&op->wait_timer, pool->conf->pg_queue_timeout);

    } else {
        goto unavailable;
    }

    return NGX_DONE;

unavailable:

    ngx_platform_metric_inc(NGX_PLATFORM_M_PG_REJECTED);

    ngx_log_error(NGX_LOG_WARN, log, 0,
                  "platform: PostgreSQL %s, statement \"%s\" rejected",
                  pool->nconns ? "pool and queue are full"
                               : "is unavailable",
                  stmt->name);

    cln->handler = NULL;
    op->cleanup = NULL;
    ngx_platform_pg_op_free(op);

    return NGX_PLATFORM_UNAVAILABLE;
}


ngx_int_t
ngx_platform_pg_next(ngx_platform_pg_op_t *op, ngx_platform_pg_stmt_t *stmt,
    ngx_str_t *params, ngx_platform_pg_handler_pt handler)
{
    if (op->conn == NULL || op->continued) {
        return NGX_ERROR;
    }

    ngx_free(op->values);
    op->values = NULL;
    op->lengths = NULL;

    if (ngx_platform_pg_op_params(op, stmt, params) != NGX_OK) {
        return NGX_ERROR;
    }

    op->stmt = stmt;
    op->handler = handler;
    op->continued = 1;

    return NGX_OK;
}


char *
ngx_platform_pg_sqlstate(PGresult *res)
{
    char  *state;

    if (res == NULL) {
        return "";
    }

    state = PQresultErrorField(res, PG_DIAG_SQLSTATE);

    return state ? state : "";
}


void
ngx_platform_pg_stats(ngx_platform_pg_stats_t *stats)
{
    ngx_queue_t             *q;
    ngx_platform_pg_pool_t  *pool;

    ngx_memzero(stats, sizeof(ngx_platform_pg_stats_t));

    pool = ngx_platform_pg_pool;
    if (pool == NULL) {
        return;
    }

    for (q = ngx_queue_head(&pool->idle);
         q != ngx_queue_sentinel(&pool->idle);
         q = ngx_queue_next(q))
    {
        stats->idle++;
    }

    stats->busy = pool->nconns - stats->idle;
    stats->waiting = pool->nwaiting;
    stats->connected = pool->connected;
}


static ngx_platform_pg_op_t *
ngx_platform_pg_op_create(ngx_platform_pg_stmt_t *stmt, ngx_str_t *params,
    ngx_platform_pg_handler_pt handler)
{
    ngx_platform_pg_op_t  *op;

    op = ngx_calloc(sizeof(ngx_platform_pg_op_t), ngx_cycle->log);
    if (op == NULL) {
        return NULL;
    }

    if (ngx_platform_pg_op_params(op, stmt, params) != NGX_OK) {
        ngx_free(op);
        return NULL;
    }

    op->stmt = stmt;
    op->handler = handler;

    return op;
}


/* parameters are copied into one heap block: the op may outlive r */

static ngx_int_t
ngx_platform_pg_op_params(ngx_platform_pg_op_t *op,
    ngx_platform_pg_stmt_t *stmt, ngx_str_t *params)
{
    int      i, n;
    char    *p;
    size_t   size;

    n = stmt->nparams;

    size = n * (sizeof(char *) + sizeof(int));
    for (i = 0; i < n; i++) {
        size += params[i].len + 1;
    }

    if (size == 0) {
        return NGX_OK;
    }

    p = ngx_alloc(size, ngx_cycle->log);
    if (p == NULL) {
        return NGX_ERROR;
    }

    op->values = (char **) p;
    p += n * sizeof(char *);

    op->lengths = (int *) p;
    p += n * sizeof(int);

    for (i = 0; i < n; i++) {

        if (params[i].data == NULL) {
            op->values[i] = NULL;
            op->lengths[i] = 0;
            continue;
        }

        op->values[i] = p;
        op->lengths[i] = (int) params[i].len;

        p = (char *) ngx_cpymem(p, params[i].data, params[i].len);
        *p++ = '\0';
    }

    return NGX_OK;
}


static void
ngx_platform_pg_op_free(ngx_platform_pg_op_t *op)
{
    if (op->wait_timer.timer_set) {
        ngx_del_timer(&op->wait_timer);
    }

    if (op->cleanup) {
        op->cleanup->handler = NULL;
    }

    ngx_free(op->values);
    ngx_free(op);
}


/* the request is going away: detach it from its operation */

static void
ngx_platform_pg_request_cleanup(void *data)
{
    ngx_platform_pg_op_t *op = data;

    op->data = NULL;
    op->cleanup = NULL;

    if (op->waiting) {
        ngx_queue_remove(&op->queue);
        ngx_platform_pg_pool->nwaiting--;
        ngx_platform_pg_op_free(op);
    }

    /* an op on a connection finishes there as an orphan */
}


static void
ngx_platform_pg_wait_timeout(ngx_event_t *ev)
{
    ngx_platform_pg_op_t  *op;

    op = ev->data;

    ngx_queue_remove(&op->queue);
    ngx_platform_pg_pool->nwaiting--;
    ngx_platform_metric_inc(NGX_PLATFORM_M_PG_TIMEOUTS);
    op->waiting = 0;

    ngx_log_error(NGX_LOG_WARN, ev->log, 0,
                  "platform: no PostgreSQL connection became free in time "
                  "for statement \"%s\"", op->stmt->name);

    if (op->data) {
        op->handler(op->data, op, NULL, NGX_PLATFORM_TIMEOUT);
    }

    ngx_platform_pg_op_free(op);
}


static ngx_int_t
ngx_platform_pg_connect(ngx_platform_pg_pool_t *pool,
    ngx_platform_pg_op_t *op)
{
    PGconn                  *conn;
    ngx_platform_pg_conn_t  *pc;

    conn = PQconnectStartParams(pool->keywords, pool->values, 0);

    if (conn == NULL) {
        return NGX_ERROR;
    }

    if (PQstatus(conn) == CONNECTION_BAD) {
        ngx_log_error(NGX_LOG_ERR, pool->log, 0,
                      "platform: PostgreSQL connect failed: %*s",
                      ngx_platform_pg_line(PQerrorMessage(conn)),
                      PQerrorMessage(conn));
        PQfinish(conn);
        return NGX_ERROR;
    }

    pc = ngx_calloc(sizeof(ngx_platform_pg_conn_t), pool->log);
    if (pc == NULL) {
        PQfinish(conn);
        return NGX_ERROR;
    }

    pc->pool = pool;
    pc->conn = conn;
    pc->state = ngx_platform_pg_connecting;
    pc->op = op;

    op->conn = pc;

    pc->timer.handler = ngx_platform_pg_timer_handler;
    pc->timer.data = pc;
    pc->timer.log = pool->log;

    if (ngx_platform_pg_wrap_socket(pc) != NGX_OK) {
        PQfinish(conn);
        ngx_free(pc);
        op->conn = NULL;
        return NGX_ERROR;
    }

    ngx_queue_insert_head(&pool->busy, &pc->queue);
    pool->nconns++;

    /* libpq: consider the first state PGRES_POLLING_WRITING */

    if (ngx_add_event(pc->c->write, NGX_WRITE_EVENT, NGX_LEVEL_EVENT)
        != NGX_OK)
    {
        ngx_platform_pg_unwrap_socket(pc);
        PQfinish(conn);
        ngx_queue_remove(&pc->queue);
        pool->nconns--;
        ngx_free(pc);
        op->conn = NULL;
        return NGX_ERROR;
    }

    /* the connection serves a request: its timer holds a graceful exit */
    pc->timer.cancelable = 0;
    ngx_add_timer(&pc->timer, pool->conf->pg_connect_timeout);

    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, pool->log, 0,
                   "platform pg connect, fd:%d", PQsocket(conn));

    return NGX_OK;
}


/*
 * libpq owns the socket: it is wrapped in an nginx connection for events
 * only, registered level-triggered, and never closed by nginx.
 */

static ngx_int_t
ngx_platform_pg_wrap_socket(ngx_platform_pg_conn_t *pc)
{
    int                fd;
    ngx_connection_t  *c;

    fd = PQsocket(pc->conn);
    if (fd == -1) {
        return NGX_ERROR;
    }

    c = ngx_get_connection(fd, pc->pool->log);
    if (c == NULL) {
        return NGX_ERROR;
    }

    c->shared = 1;
    c->data = pc;
    c->log = pc->pool->log;
    c->read->log = c->log;
    c->write->log = c->log;
    c->read->handler = ngx_platform_pg_read_handler;
    c->write->handler = ngx_platform_pg_write_handler;

    pc->c = c;

    if (ngx_add_event(c->read, NGX_READ_EVENT, NGX_LEVEL_EVENT) != NGX_OK) {
        ngx_platform_pg_unwrap_socket(pc);
        return NGX_ERROR;
    }

    return NGX_OK;
}


static void
ngx_platform_pg_unwrap_socket(ngx_platform_pg_conn_t *pc)
{
    ngx_uint_t         flags;
    ngx_connection_t  *c;

    c = pc->c;
    if (c == NULL) {
        return;
    }

    /*
     * libpq closes the socket itself when a connection attempt or the
     * connection fails; the kernel then has dropped it from epoll, and
     * its number may already belong to another connection: do not touch
     * epoll for it.
     */

    flags = (PQsocket(pc->conn) == c->fd) ? 0 : NGX_CLOSE_EVENT;

    if (c->read->active) {
        (void) ngx_del_event(c->read, NGX_READ_EVENT, flags);
    }

    if (c->write->active) {
        (void) ngx_del_event(c->write, NGX_WRITE_EVENT, flags);
    }

    if (c->read->posted) {
        ngx_delete_posted_event(c->read);
    }

    if (c->write->posted) {
        ngx_delete_posted_event(c->write);
    }

    if (c->read->timer_set) {
        ngx_del_timer(c->read);
    }

    if (c->write->timer_set) {
        ngx_del_timer(c->write);
    }

    c->fd = (ngx_socket_t) -1;
    ngx_free_connection(c);

    pc->c = NULL;
}


static void
ngx_platform_pg_connect_poll(ngx_platform_pg_conn_t *pc)
{
    ngx_connection_t         *c;
    PostgresPollingStatusType  status;

    status = PQconnectPoll(pc->conn);

    /* the socket may change between polls, for a multi-host conninfo */

    if (pc->c == NULL || PQsocket(pc->conn) != pc->c->fd) {
        ngx_platform_pg_unwrap_socket(pc);

        if (status != PGRES_POLLING_FAILED
            && ngx_platform_pg_wrap_socket(pc) != NGX_OK)
        {
            ngx_platform_pg_connect_failed(pc, "cannot watch its socket");
            return;
        }
    }

    c = pc->c;

    switch (status) {

    case PGRES_POLLING_READING:
        if (c->write->active) {
            (void) ngx_del_event(c->write, NGX_WRITE_EVENT, 0);
        }
        return;

    case PGRES_POLLING_WRITING:
        if (!c->write->active) {
            if (ngx_add_event(c->write, NGX_WRITE_EVENT, NGX_LEVEL_EVENT)
                != NGX_OK)
            {
                ngx_platform_pg_connect_failed(pc, "cannot watch its socket");
            }
        }
        return;

    case PGRES_POLLING_OK:
        ngx_platform_pg_connected(pc);
        return;

    default: /* PGRES_POLLING_FAILED */
        ngx_platform_pg_connect_failed(pc, PQerrorMessage(pc->conn));
        return;
    }
}


static void
ngx_platform_pg_connected(ngx_platform_pg_conn_t *pc)
{
    ngx_platform_pg_op_t    *op;
    ngx_platform_pg_pool_t  *pool;

    pool = pc->pool;

    if (PQsetnonblocking(pc->conn, 1) == -1) {
        ngx_platform_pg_connect_failed(pc, PQerrorMessage(pc->conn));
        return;
    }

    if (pc->c->write->active) {
        (void) ngx_del_event(pc->c->write, NGX_WRITE_EVENT, 0);
    }

    if (pc->timer.timer_set) {
        ngx_del_timer(&pc->timer);
    }

    ngx_platform_metric_inc(NGX_PLATFORM_M_PG_CONNECTS);

    if (!pool->connected) {
        ngx_log_error(NGX_LOG_NOTICE, pool->log, 0,
                      "platform: PostgreSQL connection established");
    }

    pool->connected = 1;
    pool->backoff = 0;
    pool->retry_at = 0;

    op = pc->op;
    pc->op = NULL;

    if (op && op->data == NULL) {
        /* the client left while we connected */
        ngx_platform_pg_op_free(op);
        op = NULL;
    }

    if (op) {
        ngx_platform_pg_run(pc, op);
        return;
    }

    ngx_platform_pg_release(pc);
}


static void
ngx_platform_pg_connect_failed(ngx_platform_pg_conn_t *pc, char *reason)
{
    ngx_platform_pg_pool_t  *pool;

    pool = pc->pool;

    /* back off before the next connect: 250 ms doubling to 2 s */

    pool->backoff = pool->backoff ? pool->backoff * 2
                                  : NGX_PLATFORM_PG_BACKOFF_MIN;

    if (pool->backoff > NGX_PLATFORM_PG_BACKOFF_MAX) {
        pool->backoff = NGX_PLATFORM_PG_BACKOFF_MAX;
    }

    pool->retry_at = ngx_current_msec + pool->backoff;

    ngx_platform_metric_inc(NGX_PLATFORM_M_PG_CONNECT_FAILURES);

    /* the first failure in a row is logged, not every retry */

    if (pool->backoff == NGX_PLATFORM_PG_BACKOFF_MIN) {
        ngx_log_error(NGX_LOG_ERR, pool->log, 0,
                      "platform: PostgreSQL connect failed: %*s",
                      ngx_platform_pg_line(reason), reason);
    }

    pool->connected = 0;

    ngx_platform_pg_fail(pc, NGX_PLATFORM_UNAVAILABLE, NULL);
}


/* the op runs on pc: prepare its statement once, then execute it */

static ngx_int_t
ngx_platform_pg_dispatch(ngx_platform_pg_conn_t *pc, ngx_platform_pg_op_t *op)
{
    pc->op = op;
    op->conn = pc;
    pc->uses++;

    if (pc->timer.timer_set) {
        ngx_del_timer(&pc->timer);
    }

    pc->timer.cancelable = 0;
    ngx_add_timer(&pc->timer, pc->pool->conf->pg_query_timeout);

    return ngx_platform_pg_send(pc);
}


/* dispatch from an event handler, where a failure calls the handler */

static void
ngx_platform_pg_run(ngx_platform_pg_conn_t *pc, ngx_platform_pg_op_t *op)
{
    if (ngx_platform_pg_dispatch(pc, op) != NGX_OK) {
        ngx_platform_pg_fail(pc, NGX_PLATFORM_UNAVAILABLE,
                             PQerrorMessage(pc->conn));
    }
}


static ngx_int_t
ngx_platform_pg_send(ngx_platform_pg_conn_t *pc)
{
    int                      rc;
    ngx_platform_pg_op_t    *op;
    ngx_platform_pg_stmt_t  *stmt;

    op = pc->op;
    stmt = op->stmt;

    ngx_platform_metric_inc(NGX_PLATFORM_M_PG_STATEMENTS);

    if (!ngx_platform_pg_is_prepared(pc, stmt)) {
        pc->state = ngx_platform_pg_preparing;
        rc = PQsendPrepare(pc->conn, stmt->name, stmt->sql, stmt->nparams,
                           NULL);

    } else {
        pc->state = ngx_platform_pg_querying;
        rc = PQsendQueryPrepared(pc->conn, stmt->name, stmt->nparams,
                                 (const char * const *) op->values,
                                 op->lengths, NULL, 0);
    }

    if (rc == 0) {
        return NGX_ERROR;
    }

    return ngx_platform_pg_flush(pc);
}


/* keep write interest while libpq has output queued */

static ngx_int_t
ngx_platform_pg_flush(ngx_platform_pg_conn_t *pc)
{
    int                rc;
    ngx_connection_t  *c;

    c = pc->c;

    rc = PQflush(pc->conn);

    if (rc == -1) {
        return NGX_ERROR;
    }

    if (rc == 1) {
        if (!c->write->active
            && ngx_add_event(c->write, NGX_WRITE_EVENT, NGX_LEVEL_EVENT)
               != NGX_OK)
        {
            return NGX_ERROR;
        }

        return NGX_OK;
    }

    if (c->write->active) {
        (void) ngx_del_event(c->write, NGX_WRITE_EVENT, 0);
    }

    return NGX_OK;
}


static void
ngx_platform_pg_read_handler(ngx_event_t *ev)
{
    ngx_connection_t        *c;
    ngx_platform_pg_conn_t  *pc;
    ngx_platform_pg_pool_t  *pool;

    c = ev->data;
    pc = c->data;

    switch (pc->state) {

    case ngx_platform_pg_connecting:
        ngx_platform_pg_connect_poll(pc);
        return;

    case ngx_platform_pg_idle:
        /* the server closed or sent a notice on an idle connection */
        if (PQconsumeInput(pc->conn) == 0
            || PQstatus(pc->conn) != CONNECTION_OK)
        {
            ngx_log_error(NGX_LOG_INFO, pc->pool->log, 0,
                          "platform: idle PostgreSQL connection closed");
            pool = pc->pool;
            ngx_platform_pg_close(pc);
            ngx_platform_pg_serve_waiting(pool);
        }
        return;

    default:
        ngx_platform_pg_receive(pc);
        return;
    }
}


static void
ngx_platform_pg_write_handler(ngx_event_t *ev)
{
    ngx_connection_t        *c;
    ngx_platform_pg_conn_t  *pc;

    c = ev->data;
    pc = c->data;

    switch (pc->state) {

    case ngx_platform_pg_connecting:
        ngx_platform_pg_connect_poll(pc);
        return;

    case ngx_platform_pg_idle:
        if (c->write->active) {
            (void) ngx_del_event(c->write, NGX_WRITE_EVENT, 0);
        }
        return;

    default:
        if (ngx_platform_pg_flush(pc) != NGX_OK) {
            ngx_platform_pg_fail(pc, NGX_PLATFORM_UNAVAILABLE,
                                 PQerrorMessage(pc->conn));
        }
        return;
    }
}


static void
ngx_platform_pg_timer_handler(ngx_event_t *ev)
{
    ngx_platform_pg_conn_t  *pc;

    pc = ev->data;

    switch (pc->state) {

    case ngx_platform_pg_connecting:
        ngx_platform_pg_connect_failed(pc, "connect timed out");
        return;

    case ngx_platform_pg_idle:
        ngx_log_debug0(NGX_LOG_DEBUG_HTTP, ev->log, 0,
                       "platform pg idle timeout");
        ngx_platform_pg_close(pc);
        return;

    default:
        /*
         * PQcancel() blocks, so the connection is dropped instead; the
         * server's statement_timeout ends the statement there.
         */
        ngx_platform_metric_inc(NGX_PLATFORM_M_PG_TIMEOUTS);
        ngx_platform_pg_fail(pc, NGX_PLATFORM_TIMEOUT,
                             "statement timed out");
        return;
    }
}


static void
ngx_platform_pg_receive(ngx_platform_pg_conn_t *pc)
{
    char            *message;
    PGresult        *res;
    ngx_int_t        rc;
    ExecStatusType   status;

    if (PQconsumeInput(pc->conn) == 0) {
        ngx_platform_pg_fail(pc, NGX_PLATFORM_UNAVAILABLE,
                             PQerrorMessage(pc->conn));
        return;
    }

    /* output may still be queued when the server answers early */

    if (ngx_platform_pg_flush(pc) != NGX_OK) {
        ngx_platform_pg_fail(pc, NGX_PLATFORM_UNAVAILABLE,
                             PQerrorMessage(pc->conn));
        return;
    }

    while (!PQisBusy(pc->conn)) {

        res = PQgetResult(pc->conn);

        if (res != NULL) {
            /* keep the first result; a statement has only one */
            if (pc->res == NULL) {
                pc->res = res;

            } else {
                PQclear(res);
            }

            continue;
        }

        /* all results are in */

        res = pc->res;
        pc->res = NULL;

        status = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;

        if (pc->state == ngx_platform_pg_preparing) {

            if (status == PGRES_COMMAND_OK) {
                PQclear(res);

                if (pc->nprepared < NGX_PLATFORM_PG_MAX_PREPARED) {
                    pc->prepared[pc->nprepared++] = pc->op->stmt;
                }

                if (ngx_platform_pg_send(pc) != NGX_OK) {
                    ngx_platform_pg_fail(pc, NGX_PLATFORM_UNAVAILABLE,
                                         PQerrorMessage(pc->conn));
                }

                return;
            }
        }

        if (status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK) {
            rc = NGX_OK;

        } else if (ngx_strcmp(ngx_platform_pg_sqlstate(res), "57014") == 0) {
            /* statement_timeout */
            ngx_platform_metric_inc(NGX_PLATFORM_M_PG_TIMEOUTS);
            rc = NGX_PLATFORM_TIMEOUT;

        } else {
            ngx_platform_metric_inc(NGX_PLATFORM_M_PG_ERRORS);
            rc = NGX_ERROR;

            message = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY)
                          : NULL;

            ngx_log_error(NGX_LOG_ERR, ngx_platform_pg_log(pc, pc->op), 0,
                          "platform: statement \"%s\" failed: SQLSTATE %s: %s",
                          pc->op->stmt->name, ngx_platform_pg_sqlstate(res),
                          message ? message : "no message");
        }

        ngx_platform_pg_complete(pc, res, rc);

        if (res) {
            PQclear(res);
        }

        return;
    }
}


/* hands a result to the op's handler and then continues or releases */

static void
ngx_platform_pg_complete(ngx_platform_pg_conn_t *pc, PGresult *res,
    ngx_int_t rc)
{
    ngx_platform_pg_op_t  *op;

    op = pc->op;

    if (pc->timer.timer_set) {
        ngx_del_timer(&pc->timer);
    }

    pc->state = ngx_platform_pg_idle;

    op->continued = 0;

    if (op->data) {
        op->handler(op->data, op, res, rc);
    }

    if (op->continued && op->data && PQstatus(pc->conn) == CONNECTION_OK)
    {
        ngx_add_timer(&pc->timer, pc->pool->conf->pg_query_timeout);

        if (ngx_platform_pg_send(pc) != NGX_OK) {
            ngx_platform_pg_fail(pc, NGX_PLATFORM_UNAVAILABLE,
                                 PQerrorMessage(pc->conn));
        }

        return;
    }

    pc->op = NULL;
    op->conn = NULL;
    ngx_platform_pg_op_free(op);

    ngx_platform_pg_release(pc);
}


/*
 * Only a connection outside any transaction, with every result read and
 * uses left, goes back to the pool; anything else is closed, which also
 * rolls back what an abandoned transaction wrote.
 */

static void
ngx_platform_pg_release(ngx_platform_pg_conn_t *pc)
{
    ngx_platform_pg_pool_t  *pool;

    pool = pc->pool;

    if (PQstatus(pc->conn) != CONNECTION_OK
        || PQtransactionStatus(pc->conn) != PQTRANS_IDLE
        || (pool->conf->pg_max_uses && pc->uses >= pool->conf->pg_max_uses)
        || ngx_exiting || ngx_quit || ngx_terminate)
    {
        ngx_platform_pg_close(pc);
        ngx_platform_pg_serve_waiting(pool);
        return;
    }

    pc->state = ngx_platform_pg_idle;

    if (!ngx_queue_empty(&pool->waiting)) {
        ngx_platform_pg_op_t  *op;
        ngx_queue_t           *q;

        q = ngx_queue_head(&pool->waiting);
        ngx_queue_remove(q);
        pool->nwaiting--;

        op = ngx_queue_data(q, ngx_platform_pg_op_t, queue);
        op->waiting = 0;

        if (op->wait_timer.timer_set) {
            ngx_del_timer(&op->wait_timer);
        }

        ngx_platform_pg_run(pc, op);
        return;
    }

    ngx_queue_remove(&pc->queue);
    ngx_queue_insert_head(&pool->idle, &pc->queue);

    /* an idle connection must not delay a graceful exit or a reload */
    pc->timer.cancelable = 1;
    ngx_add_timer(&pc->timer, pool->conf->pg_idle_timeout);
}


/* the connection is lost or unusable: fail its op and drop it */

static void
ngx_platform_pg_fail(ngx_platform_pg_conn_t *pc, ngx_int_t rc, char *reason)
{
    ngx_platform_pg_op_t    *op;
    ngx_platform_pg_pool_t  *pool;

    pool = pc->pool;
    op = pc->op;
    pc->op = NULL;

    if (reason) {
        ngx_log_error(NGX_LOG_ERR, ngx_platform_pg_log(pc, op), 0,
                      "platform: PostgreSQL %s%*s%s",
                      rc == NGX_PLATFORM_TIMEOUT ? "" : "connection lost: ",
                      ngx_platform_pg_line(reason), reason,
                      op ? "" : " (idle)");
    }

    ngx_platform_pg_close(pc);

    if (op) {
        op->conn = NULL;

        if (op->data) {
            op->handler(op->data, op, NULL, rc);
        }

        ngx_platform_pg_op_free(op);
    }

    ngx_platform_pg_serve_waiting(pool);
}


static void
ngx_platform_pg_close(ngx_platform_pg_conn_t *pc)
{
    ngx_platform_pg_pool_t  *pool;

    pool = pc->pool;

    if (pc->timer.timer_set) {
        ngx_del_timer(&pc->timer);
    }

    ngx_platform_pg_unwrap_socket(pc);

    if (pc->res) {
        PQclear(pc->res);
    }

    /* PQfinish() does not wait for the server; it closes the socket */
    PQfinish(pc->conn);

    ngx_queue_remove(&pc->queue);
    pool->nconns--;

    ngx_free(pc);
}


/* waiters left behind when connections closed get new connections */

static void
ngx_platform_pg_serve_waiting(ngx_platform_pg_pool_t *pool)
{
    ngx_queue_t           *q;
    ngx_platform_pg_op_t  *op;

    while (!ngx_queue_empty(&pool->waiting)
           && pool->nconns < pool->conf->pg_pool_size
           && !ngx_exiting)
    {
        q = ngx_queue_head(&pool->waiting);
        op = ngx_queue_data(q, ngx_platform_pg_op_t, queue);

        if (ngx_current_msec < pool->retry_at
            || ngx_platform_pg_connect(pool, op) != NGX_OK)
        {
            /* PostgreSQL is down: the waiters are told now */

            ngx_queue_remove(q);
            pool->nwaiting--;
            op->waiting = 0;

            if (op->data) {
                op->handler(op->data, op, NULL,
                            NGX_PLATFORM_UNAVAILABLE);
            }

            ngx_platform_pg_op_free(op);
            continue;
        }

        ngx_queue_remove(q);
        pool->nwaiting--;
        op->waiting = 0;

        if (op->wait_timer.timer_set) {
            ngx_del_timer(&op->wait_timer);
        }
    }
}


static ngx_uint_t
ngx_platform_pg_is_prepared(ngx_platform_pg_conn_t *pc,
    ngx_platform_pg_stmt_t *stmt)
{
    ngx_uint_t  i;

    for (i = 0; i < pc->nprepared; i++) {
        if (pc->prepared[i] == stmt) {
            return 1;
        }
    }

    return 0;
}


/* libpq's messages run over lines; the log takes the first */

static size_t
ngx_platform_pg_line(const char *message)
{
    return strcspn(message, "\r\n");
}


/* a request's own log names its request id; an orphan's is the worker's */

static ngx_log_t *
ngx_platform_pg_log(ngx_platform_pg_conn_t *pc, ngx_platform_pg_op_t *op)
{
    if (op && op->data) {
        return op->log;
    }

    return pc->pool->log;
}


ngx_int_t
ngx_platform_pg_init_process(ngx_cycle_t *cycle,
    ngx_platform_main_conf_t *pmcf)
{
    u_char                  *p;
    ngx_uint_t               n, i, has_options, has_appname;
    PQconninfoOption        *opt, *options;
    ngx_platform_pg_pool_t  *pool;

    static u_char            statement_timeout[64];

    /* parsed, and checked, when the configuration was read */
    options = pmcf->pg_options;

    if (options == NULL) {
        return NGX_OK;
    }

    pool = ngx_calloc(sizeof(ngx_platform_pg_pool_t), cycle->log);
    if (pool == NULL) {
        return NGX_ERROR;
    }

    n = 0;
    for (opt = options; opt->keyword; opt++) {
        n++;
    }

    pool->keywords = ngx_calloc((n + 3) * sizeof(char *), cycle->log);
    pool->values = ngx_calloc((n + 3) * sizeof(char *), cycle->log);

    if (pool->keywords == NULL || pool->values == NULL) {
        return NGX_ERROR;
    }

    i = 0;
    has_options = 0;
    has_appname = 0;

    for (opt = options; opt->keyword; opt++) {
        if (opt->val == NULL) {
            continue;
        }

        if (ngx_strcmp(opt->keyword, "options") == 0) {
            has_options = 1;
        }

        if (ngx_strcmp(opt->keyword, "application_name") == 0) {
            has_appname = 1;
        }

        pool->keywords[i] = opt->keyword;
        pool->values[i] = opt->val;
        i++;
    }

    /* the server ends statements that outlive the nginx-side timeout */

    if (!has_options) {
        p = ngx_snprintf(statement_timeout, sizeof(statement_timeout) - 1,
                         "-c statement_timeout=%M -c TimeZone=UTC",
                         pmcf->pg_query_timeout);
        *p = '\0';

        pool->keywords[i] = "options";
        pool->values[i] = (char *) statement_timeout;
        i++;
    }

    if (!has_appname) {
        pool->keywords[i] = "application_name";
        pool->values[i] = "ngx_platform";
        i++;
    }

    pool->conf = pmcf;
    pool->log = cycle->log;

    ngx_queue_init(&pool->idle);
    ngx_queue_init(&pool->busy);
    ngx_queue_init(&pool->waiting);

    pmcf->pg = pool;
    ngx_platform_pg_pool = pool;

    return NGX_OK;
}


void
ngx_platform_pg_exit_process(ngx_cycle_t *cycle,
    ngx_platform_main_conf_t *pmcf)
{
    ngx_queue_t             *q;
    ngx_platform_pg_op_t    *op;
    ngx_platform_pg_conn_t  *pc;
    ngx_platform_pg_pool_t  *pool;

    pool = ngx_platform_pg_pool;
    if (pool == NULL) {
        return;
    }

    while (!ngx_queue_empty(&pool->waiting)) {
        q = ngx_queue_head(&pool->waiting);
        ngx_queue_remove(q);
        op = ngx_queue_data(q, ngx_platform_pg_op_t, queue);
        op->waiting = 0;
        ngx_platform_pg_op_free(op);
    }

    pool->nwaiting = 0;

    while (!ngx_queue_empty(&pool->idle)) {
        q = ngx_queue_head(&pool->idle);
        pc = ngx_queue_data(q, ngx_platform_pg_conn_t, queue);
        ngx_platform_pg_close(pc);
    }

    while (!ngx_queue_empty(&pool->busy)) {
        q = ngx_queue_head(&pool->busy);
        pc = ngx_queue_data(q, ngx_platform_pg_conn_t, queue);

        if (pc->op) {
            pc->op->conn = NULL;
            ngx_platform_pg_op_free(pc->op);
            pc->op = NULL;
        }

        ngx_platform_pg_close(pc);
    }

    ngx_free(pool->keywords);
    ngx_free(pool->values);
    ngx_free(pool);

    ngx_platform_pg_pool = NULL;
    pmcf->pg = NULL;
}
