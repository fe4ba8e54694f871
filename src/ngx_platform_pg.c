
/*
 * ngx_platform: PostgreSQL on the nginx event loop.
 *
 * Each worker keeps a pool of libpq connections driven by nginx events:
 * non-blocking connect (PQconnectStartParams/PQconnectPoll), statements
 * prepared once per connection and run with PQsendQueryPrepared, output
 * flushed while PQflush() asks for it, input read with PQconsumeInput()
 * until PQgetResult() returns NULL. A batch runs its statements in
 * pipeline mode, closed by one sync point. Callers that find every
 * connection busy wait in a bounded queue; past it they are refused at
 * once.
 *
 * The transport knows nothing of HTTP: an operation (op) belongs to a
 * caller's pool and reports to a handler with the caller's data. When
 * that pool is destroyed first, its cleanup detaches the op, which
 * finishes as an orphan, its result dropped. Operations and their
 * parameters are therefore allocated from the heap, never from the
 * caller's pool.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_event.h>

#include "ngx_platform_pg.h"


#define NGX_PLATFORM_PG_MAX_PREPARED   64

#define NGX_PLATFORM_PG_BACKOFF_MIN    250
#define NGX_PLATFORM_PG_BACKOFF_MAX    2000


typedef enum {
    ngx_platform_pg_connecting = 0,
    ngx_platform_pg_idle,
    ngx_platform_pg_preparing,
    ngx_platform_pg_querying,
    ngx_platform_pg_pipeline
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


/* a statement with its parameters, copied */
typedef struct {
    ngx_platform_pg_stmt_t      *stmt;
    char                       **values;
    int                         *lengths;
    int                         *formats;    /* NULL: all text */
} ngx_platform_pg_call_t;


/* a command sent in a pipeline, whose results come back in order */
typedef struct {
    ngx_uint_t                   step;
    ngx_uint_t                   prepare;    /* PQsendPrepare of the step */
} ngx_platform_pg_slot_t;


struct ngx_platform_pg_op_s {
    ngx_queue_t                  queue;      /* pool->waiting */
    void                        *data;
    ngx_log_t                   *log;
    ngx_pool_cleanup_t          *cleanup;    /* NULL once orphaned */
    ngx_platform_pg_conn_t      *conn;
    ngx_platform_pg_handler_pt   handler;

    /* one call, or a batch's calls, results and slots */
    ngx_platform_pg_call_t       call;
    ngx_platform_pg_call_t      *calls;
    ngx_uint_t                   ncalls;
    void                        *block;      /* what the above point to */

    ngx_platform_pg_batch_handler_pt  batch_handler;
    PGresult                   **results;
    ngx_platform_pg_slot_t      *slots;
    ngx_uint_t                   nslots;
    ngx_uint_t                   slot;       /* whose results come next */
    ngx_uint_t                   failed;
    ngx_int_t                    rc;

    ngx_event_t                  wait_timer;
    unsigned                     continued:1;
    unsigned                     waiting:1;
    unsigned                     batch:1;
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


static ngx_int_t ngx_platform_pg_submit(ngx_platform_pg_op_t *op,
    ngx_pool_t *pool, ngx_log_t *log, void *data);
static size_t ngx_platform_pg_params_size(ngx_platform_pg_stmt_t *stmt,
    ngx_str_t *params);
static u_char *ngx_platform_pg_params_copy(ngx_platform_pg_call_t *call,
    ngx_platform_pg_stmt_t *stmt, ngx_str_t *params, u_char *p);
static void ngx_platform_pg_op_fail(ngx_platform_pg_op_t *op, ngx_int_t rc);
static void ngx_platform_pg_op_free(ngx_platform_pg_op_t *op);
static void ngx_platform_pg_op_clear(ngx_platform_pg_op_t *op);
static void ngx_platform_pg_cleanup(void *data);
static void ngx_platform_pg_wait_timeout(ngx_event_t *ev);
static ngx_int_t ngx_platform_pg_connect(ngx_platform_pg_pool_t *pool,
    ngx_platform_pg_op_t *op);
static void ngx_platform_pg_backoff(ngx_platform_pg_pool_t *pool,
    char *reason);
static ngx_int_t ngx_platform_pg_wrap_socket(ngx_platform_pg_conn_t *pc,
    ngx_uint_t write);
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
static ngx_int_t ngx_platform_pg_send_batch(ngx_platform_pg_conn_t *pc);
static ngx_int_t ngx_platform_pg_flush(ngx_platform_pg_conn_t *pc);
static void ngx_platform_pg_read_handler(ngx_event_t *ev);
static void ngx_platform_pg_write_handler(ngx_event_t *ev);
static void ngx_platform_pg_timer_handler(ngx_event_t *ev);
static void ngx_platform_pg_receive(ngx_platform_pg_conn_t *pc);
static void ngx_platform_pg_receive_batch(ngx_platform_pg_conn_t *pc);
static ngx_int_t ngx_platform_pg_result_rc(ngx_platform_pg_conn_t *pc,
    ngx_platform_pg_stmt_t *stmt, PGresult *res);
static void ngx_platform_pg_complete(ngx_platform_pg_conn_t *pc,
    PGresult *res, ngx_int_t rc);
static void ngx_platform_pg_complete_batch(ngx_platform_pg_conn_t *pc);
static void ngx_platform_pg_release(ngx_platform_pg_conn_t *pc);
static void ngx_platform_pg_fail(ngx_platform_pg_conn_t *pc, ngx_int_t rc,
    char *reason);
static void ngx_platform_pg_close(ngx_platform_pg_conn_t *pc);
static void ngx_platform_pg_serve_waiting(ngx_platform_pg_pool_t *pool);
static ngx_uint_t ngx_platform_pg_is_prepared(ngx_platform_pg_conn_t *pc,
    ngx_platform_pg_stmt_t *stmt);
static void ngx_platform_pg_add_prepared(ngx_platform_pg_conn_t *pc,
    ngx_platform_pg_stmt_t *stmt);
static size_t ngx_platform_pg_line(const char *message);
static ngx_log_t *ngx_platform_pg_log(ngx_platform_pg_conn_t *pc,
    ngx_platform_pg_op_t *op);


/* one pool per worker process */
static ngx_platform_pg_pool_t  *ngx_platform_pg_pool;

/*
 * The data of the transport's timers. nginx's timer code reads an
 * event's data as a connection (its debug lines print the fd), so the
 * timers point at this one, with no socket, as nginx's cache manager
 * does; their owners are found from the event's address instead.
 */
static ngx_connection_t         ngx_platform_pg_timer_conn;


ngx_int_t
ngx_platform_pg_query(ngx_pool_t *pool, ngx_log_t *log,
    ngx_platform_pg_stmt_t *stmt, ngx_str_t *params,
    ngx_platform_pg_handler_pt handler, void *data)
{
    u_char                *p;
    size_t                 size;
    ngx_platform_pg_op_t  *op;

    op = ngx_calloc(sizeof(ngx_platform_pg_op_t), log);
    if (op == NULL) {
        return NGX_ERROR;
    }

    size = ngx_platform_pg_params_size(stmt, params);

    if (size) {
        p = ngx_alloc(size, log);
        if (p == NULL) {
            ngx_free(op);
            return NGX_ERROR;
        }

        op->block = p;
    }

    (void) ngx_platform_pg_params_copy(&op->call, stmt, params, op->block);

    op->calls = &op->call;
    op->ncalls = 1;
    op->handler = handler;

    return ngx_platform_pg_submit(op, pool, log, data);
}


ngx_int_t
ngx_platform_pg_batch(ngx_pool_t *pool, ngx_log_t *log,
    ngx_platform_pg_step_t *steps, ngx_uint_t n,
    ngx_platform_pg_batch_handler_pt handler, void *data)
{
    u_char                *p;
    size_t                 size;
    ngx_uint_t             i;
    ngx_platform_pg_op_t  *op;

    if (n == 0) {
        return NGX_ERROR;
    }

    op = ngx_calloc(sizeof(ngx_platform_pg_op_t), log);
    if (op == NULL) {
        return NGX_ERROR;
    }

    /* calls, results, slots (a prepare and an execute a step) and params */

    size = n * (sizeof(ngx_platform_pg_call_t) + sizeof(PGresult *)
                + 2 * sizeof(ngx_platform_pg_slot_t));

    for (i = 0; i < n; i++) {
        size += ngx_platform_pg_params_size(steps[i].stmt, steps[i].params);
    }

    p = ngx_calloc(size, log);
    if (p == NULL) {
        ngx_free(op);
        return NGX_ERROR;
    }

    op->block = p;

    op->calls = (ngx_platform_pg_call_t *) p;
    p += n * sizeof(ngx_platform_pg_call_t);

    op->results = (PGresult **) p;
    p += n * sizeof(PGresult *);

    op->slots = (ngx_platform_pg_slot_t *) p;
    p += 2 * n * sizeof(ngx_platform_pg_slot_t);

    for (i = 0; i < n; i++) {
        p = ngx_platform_pg_params_copy(&op->calls[i], steps[i].stmt,
                                        steps[i].params, p);
    }

    op->ncalls = n;
    op->batch = 1;
    op->batch_handler = handler;

    return ngx_platform_pg_submit(op, pool, log, data);
}


/*
 * Runs op on an idle connection, a new one, or queues it. Nothing here
 * calls the handler before NGX_DONE is returned: failures are answered
 * by the return code, later ones from event handlers.
 */

static ngx_int_t
ngx_platform_pg_submit(ngx_platform_pg_op_t *op, ngx_pool_t *pool,
    ngx_log_t *log, void *data)
{
    ngx_queue_t             *q;
    ngx_pool_cleanup_t      *cln;
    ngx_platform_pg_conn_t  *pc;
    ngx_platform_pg_pool_t  *pgp;

    pgp = ngx_platform_pg_pool;

    if (pgp == NULL) {
        ngx_log_error(NGX_LOG_ERR, log, 0,
                      "platform: \"platform_pg\" is not configured");
        ngx_platform_pg_op_free(op);
        return NGX_PLATFORM_UNAVAILABLE;
    }

    cln = ngx_pool_cleanup_add(pool, 0);
    if (cln == NULL) {
        ngx_platform_pg_op_free(op);
        return NGX_ERROR;
    }

    op->data = data;
    op->log = log;
    op->cleanup = cln;

    cln->handler = ngx_platform_pg_cleanup;
    cln->data = op;

    if (!ngx_queue_empty(&pgp->idle)) {
        q = ngx_queue_head(&pgp->idle);
        ngx_queue_remove(q);

        pc = ngx_queue_data(q, ngx_platform_pg_conn_t, queue);
        ngx_queue_insert_head(&pgp->busy, q);

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

    } else if (pgp->nconns < pgp->conf->pg_pool_size
               && ngx_current_msec >= pgp->retry_at)
    {
        if (ngx_platform_pg_connect(pgp, op) != NGX_OK) {
            goto unavailable;
        }

    } else if (pgp->nconns > 0
               && pgp->nwaiting < pgp->conf->pg_queue_size)
    {
        /* every connection is busy: wait for one, for a bounded time */

        op->waiting = 1;
        ngx_queue_insert_tail(&pgp->waiting, &op->queue);
        pgp->nwaiting++;

        op->wait_timer.handler = ngx_platform_pg_wait_timeout;
        op->wait_timer.data = &ngx_platform_pg_timer_conn;
        op->wait_timer.log = log;
        /* a caller waits here: the timer must hold a graceful exit */
        op->wait_timer.cancelable = 0;

        ngx_add_timer(&op->wait_timer, pgp->conf->pg_queue_timeout);

    } else {
        goto unavailable;
    }

    return NGX_DONE;

unavailable:

    ngx_platform_metric_inc(NGX_PLATFORM_M_PG_REJECTED);

    ngx_log_error(NGX_LOG_WARN, log, 0,
                  "platform: PostgreSQL %s, %s \"%s\" rejected",
                  pgp->nconns ? "pool and queue are full" : "is unavailable",
                  op->batch ? "batch starting with" : "statement",
                  op->calls[0].stmt->name);

    ngx_platform_pg_op_free(op);

    return NGX_PLATFORM_UNAVAILABLE;
}


ngx_int_t
ngx_platform_pg_next(ngx_platform_pg_op_t *op, ngx_platform_pg_stmt_t *stmt,
    ngx_str_t *params, ngx_platform_pg_handler_pt handler)
{
    u_char  *p;
    size_t   size;

    if (op->conn == NULL || op->continued || op->batch) {
        return NGX_ERROR;
    }

    size = ngx_platform_pg_params_size(stmt, params);
    p = NULL;

    if (size) {
        p = ngx_alloc(size, ngx_cycle->log);
        if (p == NULL) {
            return NGX_ERROR;
        }
    }

    ngx_free(op->block);
    op->block = p;

    (void) ngx_platform_pg_params_copy(&op->call, stmt, params, p);

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


/* parameters are copied into a heap block: the op may outlive its caller */

static size_t
ngx_platform_pg_params_size(ngx_platform_pg_stmt_t *stmt, ngx_str_t *params)
{
    int     i;
    size_t  size;

    size = stmt->nparams * (sizeof(char *) + sizeof(int));

    if (stmt->binary) {
        size += stmt->nparams * sizeof(int);
    }

    for (i = 0; i < stmt->nparams; i++) {
        size += params[i].len + 1;
    }

    /* the next step's pointers follow */
    return ngx_align(size, sizeof(void *));
}


static u_char *
ngx_platform_pg_params_copy(ngx_platform_pg_call_t *call,
    ngx_platform_pg_stmt_t *stmt, ngx_str_t *params, u_char *p)
{
    int      i, n;
    u_char  *start;

    n = stmt->nparams;

    call->stmt = stmt;
    call->values = NULL;
    call->lengths = NULL;
    call->formats = NULL;

    if (n == 0) {
        return p;
    }

    start = p;

    call->values = (char **) p;
    p += n * sizeof(char *);

    call->lengths = (int *) p;
    p += n * sizeof(int);

    if (stmt->binary) {
        call->formats = (int *) p;
        p += n * sizeof(int);
    }

    for (i = 0; i < n; i++) {

        if (call->formats) {
            call->formats[i] = (stmt->binary >> i) & 1;
        }

        if (params[i].data == NULL) {
            call->values[i] = NULL;
            call->lengths[i] = 0;
            continue;
        }

        call->values[i] = (char *) p;
        call->lengths[i] = (int) params[i].len;

        p = ngx_cpymem(p, params[i].data, params[i].len);
        *p++ = '\0';
    }

    return start + ngx_platform_pg_params_size(stmt, params);
}


/* tells the caller, while there is one, that op failed; frees op */

static void
ngx_platform_pg_op_fail(ngx_platform_pg_op_t *op, ngx_int_t rc)
{
    if (op->cleanup) {
        if (op->batch) {
            ngx_platform_pg_op_clear(op);
            op->batch_handler(op->data, op->results, op->ncalls, 0, rc);

        } else {
            op->handler(op->data, op, NULL, rc);
        }
    }

    ngx_platform_pg_op_free(op);
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

    ngx_platform_pg_op_clear(op);

    ngx_free(op->block);
    ngx_free(op);
}


/* a batch's results, freed */

static void
ngx_platform_pg_op_clear(ngx_platform_pg_op_t *op)
{
    ngx_uint_t  i;

    if (op->results == NULL) {
        return;
    }

    for (i = 0; i < op->ncalls; i++) {
        if (op->results[i]) {
            PQclear(op->results[i]);
            op->results[i] = NULL;
        }
    }
}


/* the caller's pool is going away: detach the operation from it */

static void
ngx_platform_pg_cleanup(void *data)
{
    ngx_platform_pg_op_t *op = data;

    op->cleanup = NULL;
    op->data = NULL;
    op->log = NULL;

    if (op->waiting) {
        ngx_queue_remove(&op->queue);
        ngx_platform_pg_pool->nwaiting--;
        op->waiting = 0;
        ngx_platform_pg_op_free(op);
    }

    /* an op on a connection finishes there as an orphan */
}


static void
ngx_platform_pg_wait_timeout(ngx_event_t *ev)
{
    ngx_platform_pg_op_t  *op;

    op = (ngx_platform_pg_op_t *)
             ((u_char *) ev - offsetof(ngx_platform_pg_op_t, wait_timer));

    ngx_queue_remove(&op->queue);
    ngx_platform_pg_pool->nwaiting--;
    ngx_platform_metric_inc(NGX_PLATFORM_M_PG_TIMEOUTS);
    op->waiting = 0;

    ngx_log_error(NGX_LOG_WARN, ev->log, 0,
                  "platform: no PostgreSQL connection became free in time "
                  "for statement \"%s\"", op->calls[0].stmt->name);

    ngx_platform_pg_op_fail(op, NGX_PLATFORM_TIMEOUT);
}


static ngx_int_t
ngx_platform_pg_connect(ngx_platform_pg_pool_t *pool,
    ngx_platform_pg_op_t *op)
{
    PGconn                  *conn;
    ngx_platform_pg_conn_t  *pc;

    conn = PQconnectStartParams(pool->keywords, pool->values, 0);

    if (conn == NULL) {
        ngx_platform_pg_backoff(pool, "out of memory");
        return NGX_ERROR;
    }

    /* a connect may fail at once: a refused port, a missing socket file */

    if (PQstatus(conn) == CONNECTION_BAD) {
        ngx_platform_pg_backoff(pool, PQerrorMessage(conn));
        PQfinish(conn);
        return NGX_ERROR;
    }

    pc = ngx_calloc(sizeof(ngx_platform_pg_conn_t), pool->log);
    if (pc == NULL) {
        PQfinish(conn);
        ngx_platform_pg_backoff(pool, "out of memory");
        return NGX_ERROR;
    }

    pc->pool = pool;
    pc->conn = conn;
    pc->state = ngx_platform_pg_connecting;

    pc->timer.handler = ngx_platform_pg_timer_handler;
    pc->timer.data = &ngx_platform_pg_timer_conn;
    pc->timer.log = pool->log;

    /* libpq: consider the first state PGRES_POLLING_WRITING */

    if (ngx_platform_pg_wrap_socket(pc, 1) != NGX_OK) {
        PQfinish(conn);
        ngx_free(pc);
        ngx_platform_pg_backoff(pool, "cannot watch its socket");
        return NGX_ERROR;
    }

    pc->op = op;
    op->conn = pc;

    ngx_queue_insert_head(&pool->busy, &pc->queue);
    pool->nconns++;

    /* the connection serves a caller: its timer holds a graceful exit */
    pc->timer.cancelable = 0;
    ngx_add_timer(&pc->timer, pool->conf->pg_connect_timeout);

    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, pool->log, 0,
                   "platform pg connect, fd:%d", PQsocket(conn));

    return NGX_OK;
}


/*
 * Every failed connect, at once or later, backs off before the next one:
 * 250 ms doubling to 2 s.
 */

static void
ngx_platform_pg_backoff(ngx_platform_pg_pool_t *pool, char *reason)
{
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
}


/*
 * libpq owns the socket: it is wrapped in an nginx connection for events
 * only, registered level-triggered, and never closed by nginx.
 */

static ngx_int_t
ngx_platform_pg_wrap_socket(ngx_platform_pg_conn_t *pc, ngx_uint_t write)
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

    if (write
        && ngx_add_event(c->write, NGX_WRITE_EVENT, NGX_LEVEL_EVENT)
           != NGX_OK)
    {
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
     * libpq closes the socket itself when the connection fails; the
     * kernel then has dropped it from epoll, and its number may already
     * belong to another connection: do not touch epoll for it.
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

    /*
     * As ngx_close_connection() does: the connection leaves nginx's fd
     * table (poll, select) under its fd, which is then forgotten, so
     * that no open socket is reported at exit.
     */

    ngx_free_connection(c);
    c->fd = (ngx_socket_t) -1;

    pc->c = NULL;
}


/*
 * Inside PQconnectPoll() libpq may close the socket and open another, for
 * the next host of a multi-host conninfo or to retry without SSL; the new
 * one usually gets the same number, which epoll forgot when the old one
 * closed. So the socket's events are removed before each poll, while it
 * is still open, and whatever socket libpq has afterwards is watched.
 */

static void
ngx_platform_pg_connect_poll(ngx_platform_pg_conn_t *pc)
{
    PostgresPollingStatusType  status;

    ngx_platform_pg_unwrap_socket(pc);

    status = PQconnectPoll(pc->conn);

    switch (status) {

    case PGRES_POLLING_READING:
    case PGRES_POLLING_WRITING:
    case PGRES_POLLING_OK:
        if (ngx_platform_pg_wrap_socket(pc, status == PGRES_POLLING_WRITING)
            != NGX_OK)
        {
            ngx_platform_pg_connect_failed(pc, "cannot watch its socket");
            return;
        }

        if (status == PGRES_POLLING_OK) {
            ngx_platform_pg_connected(pc);
        }

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

    if (op && op->cleanup == NULL) {
        /* the caller left while we connected */
        op->conn = NULL;
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
    ngx_platform_pg_backoff(pc->pool, reason);
    ngx_platform_pg_fail(pc, NGX_PLATFORM_UNAVAILABLE, NULL);
}


/* the op runs on pc: prepare its statements once, then execute them */

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

    if (op->batch) {
        return ngx_platform_pg_send_batch(pc);
    }

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
    ngx_platform_pg_call_t  *call;

    call = &pc->op->call;

    ngx_platform_metric_inc(NGX_PLATFORM_M_PG_STATEMENTS);

    if (!ngx_platform_pg_is_prepared(pc, call->stmt)) {
        pc->state = ngx_platform_pg_preparing;
        rc = PQsendPrepare(pc->conn, call->stmt->name, call->stmt->sql,
                           call->stmt->nparams, NULL);

    } else {
        pc->state = ngx_platform_pg_querying;
        rc = PQsendQueryPrepared(pc->conn, call->stmt->name,
                                 call->stmt->nparams,
                                 (const char * const *) call->values,
                                 call->lengths, call->formats, 0);
    }

    if (rc == 0) {
        return NGX_ERROR;
    }

    return ngx_platform_pg_flush(pc);
}


/*
 * A batch in pipeline mode: each statement not yet prepared on this
 * connection is prepared in the same pipeline, then executed; one sync
 * point closes the implicit transaction. The slots record what was
 * sent, in the order its results come back.
 */

static ngx_int_t
ngx_platform_pg_send_batch(ngx_platform_pg_conn_t *pc)
{
    ngx_uint_t               i, j, prepared;
    ngx_platform_pg_op_t    *op;
    ngx_platform_pg_call_t  *call;

    op = pc->op;

    op->nslots = 0;
    op->slot = 0;
    op->failed = 0;
    op->rc = NGX_OK;

    pc->state = ngx_platform_pg_pipeline;

    if (PQenterPipelineMode(pc->conn) == 0) {
        return NGX_ERROR;
    }

    for (i = 0; i < op->ncalls; i++) {
        call = &op->calls[i];

        ngx_platform_metric_inc(NGX_PLATFORM_M_PG_STATEMENTS);

        prepared = ngx_platform_pg_is_prepared(pc, call->stmt);

        for (j = 0; !prepared && j < op->nslots; j++) {
            prepared = op->slots[j].prepare
                       && op->calls[op->slots[j].step].stmt == call->stmt;
        }

        if (!prepared) {
            if (PQsendPrepare(pc->conn, call->stmt->name, call->stmt->sql,
                              call->stmt->nparams, NULL)
                == 0)
            {
                return NGX_ERROR;
            }

            op->slots[op->nslots].step = i;
            op->slots[op->nslots].prepare = 1;
            op->nslots++;
        }

        if (PQsendQueryPrepared(pc->conn, call->stmt->name,
                                call->stmt->nparams,
                                (const char * const *) call->values,
                                call->lengths, call->formats, 0)
            == 0)
        {
            return NGX_ERROR;
        }

        op->slots[op->nslots].step = i;
        op->slots[op->nslots].prepare = 0;
        op->nslots++;
    }

    if (PQpipelineSync(pc->conn) == 0) {
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

    pc = (ngx_platform_pg_conn_t *)
             ((u_char *) ev - offsetof(ngx_platform_pg_conn_t, timer));

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

    if (pc->state == ngx_platform_pg_pipeline) {
        ngx_platform_pg_receive_batch(pc);
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

                ngx_platform_pg_add_prepared(pc, pc->op->call.stmt);

                if (ngx_platform_pg_send(pc) != NGX_OK) {
                    ngx_platform_pg_fail(pc, NGX_PLATFORM_UNAVAILABLE,
                                         PQerrorMessage(pc->conn));
                }

                return;
            }
        }

        rc = ngx_platform_pg_result_rc(pc, pc->op->call.stmt, res);

        ngx_platform_pg_complete(pc, res, rc);

        if (res) {
            PQclear(res);
        }

        return;
    }
}


/*
 * A batch's results come in the order of its slots: for each, its
 * results and then NULL; after an error, PGRES_PIPELINE_ABORTED for the
 * rest; last PGRES_PIPELINE_SYNC for the sync point.
 */

static void
ngx_platform_pg_receive_batch(ngx_platform_pg_conn_t *pc)
{
    PGresult                *res, **result;
    ngx_int_t                rc;
    ExecStatusType           status;
    ngx_platform_pg_op_t    *op;
    ngx_platform_pg_slot_t  *slot;
    ngx_platform_pg_call_t  *call;

    op = pc->op;

    while (!PQisBusy(pc->conn)) {

        res = PQgetResult(pc->conn);

        if (op->slot == op->nslots) {

            /* the sync point */

            if (res == NULL) {
                return;
            }

            status = PQresultStatus(res);
            PQclear(res);

            if (status != PGRES_PIPELINE_SYNC) {
                ngx_platform_pg_fail(pc, NGX_PLATFORM_UNAVAILABLE,
                                     "unexpected result in a pipeline");
                return;
            }

            /* fails only when busy: the connection is then not reused */
            (void) PQexitPipelineMode(pc->conn);

            ngx_platform_pg_complete_batch(pc);
            return;
        }

        slot = &op->slots[op->slot];
        call = &op->calls[slot->step];

        if (res == NULL) {
            /* this command's results are all in */
            op->slot++;
            continue;
        }

        status = PQresultStatus(res);

        if (status == PGRES_PIPELINE_ABORTED) {
            PQclear(res);
            continue;
        }

        if (status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK) {

            if (slot->prepare) {
                ngx_platform_pg_add_prepared(pc, call->stmt);
                PQclear(res);
                continue;
            }

            result = &op->results[slot->step];

            /* keep the first result; a statement has only one */
            if (*result == NULL) {
                *result = res;

            } else {
                PQclear(res);
            }

            continue;
        }

        /* the first error; the statements after it are aborted */

        if (op->rc != NGX_OK) {
            PQclear(res);
            continue;
        }

        rc = ngx_platform_pg_result_rc(pc, call->stmt, res);

        op->rc = rc;
        op->failed = slot->step;

        result = &op->results[slot->step];

        if (*result) {
            PQclear(*result);
        }

        *result = res;
    }
}


/* NGX_OK, or the error a failed statement's result stands for, logged */

static ngx_int_t
ngx_platform_pg_result_rc(ngx_platform_pg_conn_t *pc,
    ngx_platform_pg_stmt_t *stmt, PGresult *res)
{
    char            *message;
    ExecStatusType   status;

    status = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;

    if (status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK) {
        return NGX_OK;
    }

    if (ngx_strcmp(ngx_platform_pg_sqlstate(res), "57014") == 0) {
        /* statement_timeout */
        ngx_platform_metric_inc(NGX_PLATFORM_M_PG_TIMEOUTS);
        return NGX_PLATFORM_TIMEOUT;
    }

    ngx_platform_metric_inc(NGX_PLATFORM_M_PG_ERRORS);

    message = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;

    ngx_log_error(NGX_LOG_ERR, ngx_platform_pg_log(pc, pc->op), 0,
                  "platform: statement \"%s\" failed: SQLSTATE %s: %s",
                  stmt->name, ngx_platform_pg_sqlstate(res),
                  message ? message : "no message");

    return NGX_ERROR;
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

    if (op->cleanup) {
        op->handler(op->data, op, res, rc);
    }

    if (op->continued && op->cleanup && PQstatus(pc->conn) == CONNECTION_OK)
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


/* the sync point is read: the handler gets every result at once */

static void
ngx_platform_pg_complete_batch(ngx_platform_pg_conn_t *pc)
{
    ngx_platform_pg_op_t  *op;

    op = pc->op;

    if (pc->timer.timer_set) {
        ngx_del_timer(&pc->timer);
    }

    pc->state = ngx_platform_pg_idle;

    if (op->rc == NGX_PLATFORM_TIMEOUT) {
        ngx_platform_pg_op_clear(op);
        op->failed = 0;
    }

    if (op->cleanup) {
        op->batch_handler(op->data, op->results, op->ncalls, op->failed,
                          op->rc);
    }

    pc->op = NULL;
    op->conn = NULL;
    ngx_platform_pg_op_free(op);

    ngx_platform_pg_release(pc);
}


/*
 * Only a connection outside any transaction and pipeline, with every
 * result read and uses left, goes back to the pool; anything else is
 * closed, which also rolls back what an abandoned transaction wrote.
 * While the worker exits, a connection still serves the callers that
 * wait for one, and is closed when none is left.
 */

static void
ngx_platform_pg_release(ngx_platform_pg_conn_t *pc)
{
    ngx_queue_t             *q;
    ngx_platform_pg_op_t    *op;
    ngx_platform_pg_pool_t  *pool;

    pool = pc->pool;

    if (PQstatus(pc->conn) != CONNECTION_OK
        || PQtransactionStatus(pc->conn) != PQTRANS_IDLE
        || PQpipelineStatus(pc->conn) != PQ_PIPELINE_OFF
        || (pool->conf->pg_max_uses && pc->uses >= pool->conf->pg_max_uses))
    {
        ngx_platform_pg_close(pc);
        ngx_platform_pg_serve_waiting(pool);
        return;
    }

    pc->state = ngx_platform_pg_idle;

    if (!ngx_queue_empty(&pool->waiting)) {
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

    if (ngx_exiting || ngx_quit || ngx_terminate) {
        ngx_platform_pg_close(pc);
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
        ngx_platform_pg_op_fail(op, rc);
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


/*
 * Waiters left behind when connections closed get new connections, also
 * while the worker exits: they were accepted and are answered.
 */

static void
ngx_platform_pg_serve_waiting(ngx_platform_pg_pool_t *pool)
{
    ngx_queue_t           *q;
    ngx_platform_pg_op_t  *op;

    while (!ngx_queue_empty(&pool->waiting)
           && pool->nconns < pool->conf->pg_pool_size)
    {
        q = ngx_queue_head(&pool->waiting);
        op = ngx_queue_data(q, ngx_platform_pg_op_t, queue);

        ngx_queue_remove(q);
        pool->nwaiting--;
        op->waiting = 0;

        if (op->wait_timer.timer_set) {
            ngx_del_timer(&op->wait_timer);
        }

        if (ngx_current_msec < pool->retry_at
            || ngx_platform_pg_connect(pool, op) != NGX_OK)
        {
            /* PostgreSQL is down: the waiters are told now */
            ngx_platform_pg_op_fail(op, NGX_PLATFORM_UNAVAILABLE);
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


static void
ngx_platform_pg_add_prepared(ngx_platform_pg_conn_t *pc,
    ngx_platform_pg_stmt_t *stmt)
{
    if (pc->nprepared < NGX_PLATFORM_PG_MAX_PREPARED
        && !ngx_platform_pg_is_prepared(pc, stmt))
    {
        pc->prepared[pc->nprepared++] = stmt;
    }
}


/* libpq's messages run over lines; the log takes the first */

static size_t
ngx_platform_pg_line(const char *message)
{
    return strcspn(message, "\r\n");
}


/* the caller's log names it; an orphan's is the worker's */

static ngx_log_t *
ngx_platform_pg_log(ngx_platform_pg_conn_t *pc, ngx_platform_pg_op_t *op)
{
    if (op && op->cleanup && op->log) {
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

    static u_char            statement_timeout[128];

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

    /*
     * The server ends statements that outlive the nginx-side timeout.
     * Every statement is prepared once per connection and selects by
     * tenant and key through an index: its generic plan is the right one,
     * and planning it again for each request's parameters (what the
     * server does while a custom plan looks cheaper) costs more than the
     * execution; a page of bank transfers ran at a third of its speed.
     */

    if (!has_options) {
        p = ngx_snprintf(statement_timeout, sizeof(statement_timeout) - 1,
                         "-c statement_timeout=%M -c TimeZone=UTC"
                         " -c plan_cache_mode=force_generic_plan",
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

    ngx_platform_pg_timer_conn.fd = (ngx_socket_t) -1;

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
