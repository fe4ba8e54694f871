
/*
 * ngx_platform: PostgreSQL on the nginx event loop, pipelined.
 *
 * Each worker keeps a pool of libpq connections driven by nginx events:
 * non-blocking connect (PQconnectStartParams/PQconnectPoll), then libpq
 * pipeline mode for the life of the connection. An operation (one
 * statement, with the scope of its request before it when row-level
 * security is on) is sent as its prepares, if the connection has not
 * prepared them yet, its executes and one sync point of its own (reads
 * may share one, see below), so an error aborts that operation only. A
 * connection has up to platform_pg_pipeline_depth operations in flight;
 * their results come back in order and are matched to the queue of
 * operations in flight.
 *
 * A new operation goes to the least loaded connection. One whose oldest
 * operation has waited for long (a lock wait, a slow statement) is
 * avoided while another connection has room or a new one may be opened,
 * so that a slow statement does not hold up the worker's other requests.
 * When every connection is full and the pool is at its size, callers
 * wait in a bounded queue; past it they are refused at once.
 *
 * No owner (a tenant, or a client address for what runs before a tenant
 * is known) may hold more than platform_pg_tenant_share percent of a
 * pool's pipeline slots (its connections' times the depth), nor of its
 * queue: an owner at its share of the slots waits in the queue even when
 * a slot is free, and one at its share of both is refused at once, while
 * the others are served. A queue that serves its oldest waiter first
 * passes over those whose owner is at its share of the slots. Each pool
 * counts the operations of each owner that holds any, in a tree of
 * owners that is as small as the operations in flight: an owner's entry
 * goes when its last operation ends. An orphan still counts, since its
 * statement still holds a slot.
 *
 * A scoped statement on the primary runs with platform_pg_lock_timeout,
 * set in the same round trip as its scope: one waiting on a row lock
 * (many clients changing one row) fails with 55P03 after that long
 * instead of stalling the statements pipelined behind it on its
 * connection until the lock is released.
 *
 * With platform_pg_prepare off nothing outlives an operation's implicit
 * transaction on the server session, so that a pooler in transaction
 * mode (PgBouncer) may hand each one to another server: every statement
 * is sent unnamed (parsed, bound and run in one go), and what a session
 * would keep (statement_timeout, TimeZone, given at connect otherwise)
 * is set in each operation, in the same hidden first call as its scope.
 *
 * An optional read pool (platform_pg_read, typically replicas) takes
 * the operations a caller marks as reads; whatever it cannot take, or
 * loses with its connection, runs on the primary instead.
 *
 * Reads share sync points (platform_pg_coalesce): a read sent on a
 * connection gets no sync point of its own, and the reads sent after it
 * in the same pass of the event loop join its segment, until the flush
 * posted for that pass, or an operation that is not such a read, closes
 * it with one sync point. PostgreSQL then ends one implicit transaction,
 * and writes and wakes once, for the segment instead of for each read:
 * that is most of a small read's cost on the server. Nothing waits for a
 * segment to fill: it takes what the pass brought, and the flush goes
 * when it went without sharing. Reads join a segment only when no
 * connection is idle and the pool may not grow, so that while it has
 * room they spread over connections as before and a slow read holds up
 * no other. Writes never share one: each keeps its own sync point, its
 * own transaction.
 *
 * One segment is one implicit transaction, which decides the rest:
 *
 * - A setting local to the transaction lasts until the sync point, so
 *   each read sets its scope (its tenant, with platform_pg_prepare off
 *   the session's settings) right before its statement, as alone, and
 *   a tenant's statement never runs under another's: a read of no
 *   tenant sets the empty scope, which sees no tenant's rows, what a
 *   connection's session holds once a transaction's scope has ended.
 *   A read whose scope is the one the read before it in the segment
 *   set does not set it again. An unscoped statement reads no table
 *   under row-level security: the scope it runs under does not matter.
 *
 * - An error aborts the rest of the segment: the reads after the
 *   failing one get PGRES_PIPELINE_ABORTED. Each is sent again alone,
 *   with a sync point of its own, at the sync point's arrival, so that a
 *   failing statement fails only its own caller; an orphan among them is
 *   dropped. We chose that over a savepoint around each read: two more
 *   commands for every read, paid always, against a retry paid only
 *   when a read fails, which a read seldom does.
 *
 * - A prepare in a segment could be aborted by another read's error,
 *   and the reads sent after it, counting on it, would then fail: a
 *   read that needs a prepare is sent alone, with its own sync point;
 *   the reads after it may share, which is every read but the first of
 *   a statement on a connection.
 *
 * - Behind a pooler in transaction mode (platform_pg_prepare off) a
 *   segment is one transaction there too, handed to one server.
 *
 * Each read of a segment is an operation as any other: it takes a slot
 * of its connection's depth, counts against its owner's shares, waits
 * in the queue, is orphaned, and fails or moves to the primary with a
 * lost connection, as without sharing.
 *
 * The transport knows nothing of HTTP: an operation belongs to a
 * caller's pool and reports to a handler with the caller's data. When
 * that pool is destroyed first, its cleanup detaches the operation, which
 * stays in its connection's queue as an orphan: its results are read and
 * dropped. Operations and their parameters are therefore allocated from
 * the heap, never from the caller's pool.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_event.h>

#include "ngx_platform_pg.h"


#define NGX_PLATFORM_PG_MAX_PREPARED   128

#define NGX_PLATFORM_PG_BACKOFF_MIN    250
#define NGX_PLATFORM_PG_BACKOFF_MAX    2000

/*
 * A connection whose oldest operation has waited this long is stalled:
 * new operations go elsewhere while there is room elsewhere.
 */
#define NGX_PLATFORM_PG_STALL          20

/* what the hidden first call of an operation sets */
#define NGX_PLATFORM_PG_SCOPE          1
#define NGX_PLATFORM_PG_LOCK           2
#define NGX_PLATFORM_PG_SESSION        4

#define NGX_PLATFORM_PG_SESSION_SQL                                           \
    "SELECT set_config('statement_timeout', $1, true),"                      \
    " set_config('TimeZone', 'UTC', true)"


typedef struct {
    ngx_queue_t                  queue;      /* pool->conns */
    ngx_platform_pg_pool_t      *pool;
    PGconn                      *conn;
    ngx_connection_t            *c;

    ngx_queue_t                  ops;        /* in flight, oldest first */
    ngx_uint_t                   nops;
    ngx_uint_t                   uses;
    ngx_msec_t                   start;      /* of the connect */

    ngx_event_t                  timer;      /* connect, statement, idle */
    ngx_event_t                  flush;      /* posted after sends */

    ngx_platform_pg_op_t        *open;       /* the last read sent, unsynced */
    ngx_platform_pg_op_t        *reading;    /* whose results come; or head */
    ngx_uint_t                   nopen;      /* reads in the open segment */

    ngx_uint_t                   nprepared;
    ngx_platform_pg_stmt_t      *prepared[NGX_PLATFORM_PG_MAX_PREPARED];

    unsigned                     connecting:1;
    unsigned                     broken:1;   /* a send failed; fail soon */
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


/* who holds operations in a pool, and how many */
typedef struct {
    ngx_str_node_t               sn;         /* sn.str: the owner's name */
    ngx_uint_t                   running;    /* sent, or leaving the queue */
    ngx_uint_t                   waiting;    /* in the queue */
    ngx_platform_pg_pool_t      *pool;
} ngx_platform_pg_owner_t;


/* a statement and its parameters, as an operation sends it */
typedef struct {
    ngx_platform_pg_stmt_t    *stmt;
    ngx_str_t                 *params;
} ngx_platform_pg_step_t;


struct ngx_platform_pg_op_s {
    ngx_queue_t                  queue;      /* pool->waiting or pc->ops */
    void                        *data;
    ngx_log_t                   *log;
    ngx_pool_cleanup_t          *cleanup;    /* NULL once orphaned */
    ngx_platform_pg_pool_t      *pool;       /* where it waits or runs */
    ngx_platform_pg_conn_t      *conn;

    ngx_platform_pg_handler_pt   handler;

    /* the scope's call, if any, and the statement's: results, slots */
    ngx_platform_pg_call_t      *calls;
    PGresult                   **results;
    ngx_platform_pg_slot_t      *slots;
    ngx_uint_t                   ncalls;
    ngx_uint_t                   first;      /* 1: calls[0] is the scope */
    ngx_uint_t                   nslots;
    ngx_uint_t                   slot;       /* whose results come next */
    ngx_uint_t                   failed;
    ngx_int_t                    rc;
    ngx_msec_t                   sent;
    void                        *block;      /* what the above point to */

    ngx_platform_pg_call_t       call;
    PGresult                    *result;
    ngx_platform_pg_slot_t       slot_pair[2];

    ngx_platform_pg_owner_t     *owner;      /* counted against, if any */

    ngx_event_t                  wait_timer;
    unsigned                     waiting:1;
    unsigned                     pushed_out:1;  /* refused, being told */
    unsigned                     read:1;     /* may run on the read pool */
    unsigned                     sync:1;     /* a sync point follows it */
    unsigned                     aborted:1;  /* an earlier error skipped it */
    unsigned                     alone:1;    /* shares no sync point */
};


struct ngx_platform_pg_pool_s {
    ngx_platform_main_conf_t    *conf;
    ngx_log_t                   *log;
    char                        *name;       /* in log lines */

    const char                 **keywords;
    const char                 **values;

    /* the values with the host lists rotated, one array per start host */
    const char                ***rotations;
    ngx_uint_t                   nrotations;
    ngx_uint_t                   next_rotation;

    ngx_queue_t                  conns;
    ngx_queue_t                  waiting;
    ngx_uint_t                   nconns;
    ngx_uint_t                   nwaiting;

    ngx_msec_t                   backoff;
    ngx_msec_t                   retry_at;
    ngx_uint_t                   connected;

    ngx_rbtree_t                 owners;
    ngx_rbtree_node_t            owners_sentinel;
    ngx_uint_t                   nowners;
    ngx_uint_t                   slot_share;     /* an owner's; 0: any */
    ngx_uint_t                   queue_share;
};


static ngx_int_t ngx_platform_pg_single(ngx_pool_t *pool, ngx_log_t *log,
    ngx_str_t *owner, ngx_str_t *scope, ngx_platform_pg_stmt_t *stmt,
    ngx_str_t *params, ngx_platform_pg_handler_pt handler, void *data,
    ngx_uint_t read);
static ngx_platform_pg_stmt_t *ngx_platform_pg_prefix(ngx_str_t *scope,
    ngx_uint_t lock, ngx_str_t *params);
static ngx_platform_pg_op_t *ngx_platform_pg_op_create(ngx_log_t *log,
    ngx_platform_pg_step_t *prefix, ngx_platform_pg_step_t *steps,
    ngx_uint_t n);
static ngx_int_t ngx_platform_pg_submit(ngx_platform_pg_op_t *op,
    ngx_pool_t *pool, ngx_log_t *log, void *data, ngx_str_t *owner);
static ngx_int_t ngx_platform_pg_admit(ngx_platform_pg_pool_t *pool,
    ngx_platform_pg_op_t *op, ngx_str_t *owner);
static ngx_platform_pg_owner_t *ngx_platform_pg_owner_find(
    ngx_platform_pg_pool_t *pool, ngx_str_t *name, uint32_t hash);
static void ngx_platform_pg_own(ngx_platform_pg_pool_t *pool,
    ngx_platform_pg_op_t *op, ngx_str_t *name);
static void ngx_platform_pg_owner_release(ngx_platform_pg_owner_t *owner);
static ngx_int_t ngx_platform_pg_place(ngx_platform_pg_pool_t *pool,
    ngx_platform_pg_op_t *op, ngx_platform_pg_owner_t *owner);
static ngx_uint_t ngx_platform_pg_may_run(ngx_platform_pg_pool_t *pool,
    ngx_platform_pg_op_t *op);
static void ngx_platform_pg_unqueue(ngx_platform_pg_op_t *op);
static ngx_platform_pg_conn_t *ngx_platform_pg_pick_open(
    ngx_platform_pg_pool_t *pool);
static ngx_int_t ngx_platform_pg_enqueue(ngx_platform_pg_pool_t *pool,
    ngx_platform_pg_op_t *op, ngx_platform_pg_owner_t *owner, ngx_int_t full);
static ngx_uint_t ngx_platform_pg_queue_room(ngx_platform_pg_pool_t *pool,
    ngx_platform_pg_owner_t *owner);
static void ngx_platform_pg_push_out(ngx_platform_pg_op_t *op);
static void ngx_platform_pg_pushed_out(ngx_event_t *ev);
static ngx_platform_pg_conn_t *ngx_platform_pg_pick(
    ngx_platform_pg_pool_t *pool, ngx_uint_t stalled);
static ngx_uint_t ngx_platform_pg_can_connect(ngx_platform_pg_pool_t *pool);
static size_t ngx_platform_pg_params_size(ngx_platform_pg_stmt_t *stmt,
    ngx_str_t *params);
static u_char *ngx_platform_pg_params_copy(ngx_platform_pg_call_t *call,
    ngx_platform_pg_stmt_t *stmt, ngx_str_t *params, u_char *p);
static void ngx_platform_pg_op_lost(ngx_platform_pg_op_t *op, ngx_int_t rc);
static void ngx_platform_pg_op_fail(ngx_platform_pg_op_t *op, ngx_int_t rc);
static void ngx_platform_pg_op_free(ngx_platform_pg_op_t *op);
static void ngx_platform_pg_op_clear(ngx_platform_pg_op_t *op);
static void ngx_platform_pg_cleanup(void *data);
static void ngx_platform_pg_wait(ngx_platform_pg_pool_t *pool,
    ngx_platform_pg_op_t *op);
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
static void ngx_platform_pg_add(ngx_platform_pg_conn_t *pc,
    ngx_platform_pg_op_t *op);
static void ngx_platform_pg_send(ngx_platform_pg_conn_t *pc,
    ngx_platform_pg_op_t *op);
static ngx_int_t ngx_platform_pg_send_op(ngx_platform_pg_conn_t *pc,
    ngx_platform_pg_op_t *op);
static ngx_uint_t ngx_platform_pg_shares(ngx_platform_pg_conn_t *pc,
    ngx_platform_pg_op_t *op);
static ngx_uint_t ngx_platform_pg_same_prefix(ngx_platform_pg_op_t *prev,
    ngx_platform_pg_op_t *op);
static ngx_int_t ngx_platform_pg_sync(ngx_platform_pg_conn_t *pc);
static ngx_int_t ngx_platform_pg_send_prepares(ngx_platform_pg_conn_t *pc,
    ngx_platform_pg_op_t *op);
static int ngx_platform_pg_send_call(ngx_platform_pg_conn_t *pc,
    ngx_platform_pg_call_t *call);
static ngx_int_t ngx_platform_pg_flush(ngx_platform_pg_conn_t *pc);
static void ngx_platform_pg_flush_handler(ngx_event_t *ev);
static void ngx_platform_pg_read_handler(ngx_event_t *ev);
static void ngx_platform_pg_write_handler(ngx_event_t *ev);
static void ngx_platform_pg_timer_handler(ngx_event_t *ev);
static void ngx_platform_pg_receive(ngx_platform_pg_conn_t *pc);
static ngx_int_t ngx_platform_pg_result(ngx_platform_pg_conn_t *pc,
    ngx_platform_pg_op_t *op, PGresult *res);
static ngx_int_t ngx_platform_pg_result_rc(ngx_platform_pg_conn_t *pc,
    ngx_platform_pg_op_t *op, ngx_platform_pg_stmt_t *stmt, PGresult *res);
static void ngx_platform_pg_segment_done(ngx_platform_pg_conn_t *pc,
    ngx_platform_pg_op_t *last);
static void ngx_platform_pg_complete(ngx_platform_pg_op_t *op);
static void ngx_platform_pg_settle(ngx_platform_pg_conn_t *pc);
static void ngx_platform_pg_arm(ngx_platform_pg_conn_t *pc);
static void ngx_platform_pg_fail(ngx_platform_pg_conn_t *pc, ngx_int_t rc,
    char *reason);
static void ngx_platform_pg_close(ngx_platform_pg_conn_t *pc);
static void ngx_platform_pg_serve_waiting(ngx_platform_pg_pool_t *pool);
static ngx_uint_t ngx_platform_pg_is_prepared(ngx_platform_pg_conn_t *pc,
    ngx_platform_pg_stmt_t *stmt);
static void ngx_platform_pg_add_prepared(ngx_platform_pg_conn_t *pc,
    ngx_platform_pg_stmt_t *stmt);
static void ngx_platform_pg_forget_prepared(ngx_platform_pg_conn_t *pc,
    ngx_platform_pg_stmt_t *stmt);
static size_t ngx_platform_pg_line(const char *message);
static ngx_log_t *ngx_platform_pg_log(ngx_platform_pg_pool_t *pool,
    ngx_platform_pg_op_t *op);
static ngx_int_t ngx_platform_pg_pool_rotate(ngx_platform_pg_pool_t *pool);
static ngx_uint_t ngx_platform_pg_list_rotated(const char *keyword);
static ngx_uint_t ngx_platform_pg_list_count(const char *list);
static ngx_platform_pg_pool_t *ngx_platform_pg_pool_create(ngx_cycle_t *cycle,
    ngx_platform_main_conf_t *pmcf, ngx_platform_pg_options_t *options,
    char *name);
static ngx_uint_t ngx_platform_pg_share(ngx_platform_main_conf_t *pmcf,
    ngx_uint_t capacity);
static void ngx_platform_pg_pool_destroy(ngx_platform_pg_pool_t *pool);


/* the pools of this worker: the primary and the optional read pool */
static ngx_platform_pg_pool_t  *ngx_platform_pg_primary;
static ngx_platform_pg_pool_t  *ngx_platform_pg_replica;

/*
 * The data of the transport's timers. nginx's timer code reads an
 * event's data as a connection (its debug lines print the fd), so the
 * timers point at this one, with no socket, as nginx's cache manager
 * does; their owners are found from the event's address instead.
 */
static ngx_connection_t         ngx_platform_pg_timer_conn;

/*
 * The hidden first call of an operation, by what it sets (bit 0: the
 * scope, bit 1: the lock timeout, bit 2: the session's settings): each a
 * setting local to the implicit transaction that the operation's sync
 * point closes, so that it never outlives the operation on the shared
 * connection. The scope is the tenant of the statements under row-level
 * security; the lock timeout that of a statement on the primary; the
 * session's settings, with platform_pg_prepare off, what the connect
 * gives otherwise. Parameters in that order: statement_timeout, tenant,
 * lock_timeout.
 */
static ngx_platform_pg_stmt_t   ngx_platform_pg_prefixes[8] = {
    { NULL, NULL, 0, 0, 1 },

    { "platform_scope", "SELECT set_config('app.tenant_id', $1, true)",
      1, 0, 1 },

    { "platform_lock", "SELECT set_config('lock_timeout', $1, true)",
      1, 0, 1 },

    { "platform_scope_lock",
      "SELECT set_config('app.tenant_id', $1, true),"
      " set_config('lock_timeout', $2, true)", 2, 0, 1 },

    { "platform_session", NGX_PLATFORM_PG_SESSION_SQL, 1, 0, 1 },

    { "platform_session_scope",
      NGX_PLATFORM_PG_SESSION_SQL ", set_config('app.tenant_id', $2, true)",
      2, 0, 1 },

    { "platform_session_lock",
      NGX_PLATFORM_PG_SESSION_SQL ", set_config('lock_timeout', $2, true)",
      2, 0, 1 },

    { "platform_session_scope_lock",
      NGX_PLATFORM_PG_SESSION_SQL ", set_config('app.tenant_id', $2, true),"
      " set_config('lock_timeout', $3, true)", 3, 0, 1 }
};

/* the scope of a read of no tenant that may share a transaction */
static ngx_str_t                ngx_platform_pg_no_scope = ngx_string("");

/* platform_pg_lock_timeout as PostgreSQL reads it; empty: none */
static ngx_str_t                ngx_platform_pg_lock_timeout;
static u_char                   ngx_platform_pg_lock_timeout_text[NGX_INT_T_LEN
                                                                  + 3];

/* platform_pg_prepare off: platform_pg_query_timeout, for each operation */
static ngx_str_t                ngx_platform_pg_statement_timeout;
static u_char                   ngx_platform_pg_statement_timeout_text[
                                    NGX_INT_T_LEN + 3];


ngx_int_t
ngx_platform_pg_query(ngx_pool_t *pool, ngx_log_t *log, ngx_str_t *owner,
    ngx_str_t *scope, ngx_platform_pg_stmt_t *stmt, ngx_str_t *params,
    ngx_platform_pg_handler_pt handler, void *data)
{
    return ngx_platform_pg_single(pool, log, owner, scope, stmt, params,
                                  handler, data, 0);
}


ngx_int_t
ngx_platform_pg_read_query(ngx_pool_t *pool, ngx_log_t *log,
    ngx_str_t *owner, ngx_str_t *scope, ngx_platform_pg_stmt_t *stmt,
    ngx_str_t *params, ngx_platform_pg_handler_pt handler, void *data)
{
    return ngx_platform_pg_single(pool, log, owner, scope, stmt, params,
                                  handler, data, 1);
}


static ngx_int_t
ngx_platform_pg_single(ngx_pool_t *pool, ngx_log_t *log, ngx_str_t *owner,
    ngx_str_t *scope, ngx_platform_pg_stmt_t *stmt, ngx_str_t *params,
    ngx_platform_pg_handler_pt handler, void *data, ngx_uint_t read)
{
    ngx_str_t                prefix_params[3];
    ngx_uint_t               lock;
    ngx_platform_pg_op_t    *op;
    ngx_platform_pg_step_t   step, prefix;

    step.stmt = stmt;
    step.params = params;

    /* what reads shared tables, or only reads, waits on no row lock */

    if (stmt->unscoped) {
        scope = NULL;

    } else if (scope == NULL && read && ngx_platform_pg_primary
               && ngx_platform_pg_primary->conf->pg_row_security
               && ngx_platform_pg_primary->conf->pg_coalesce)
    {
        /*
         * a read of no tenant may share a transaction with a tenant's: it
         * sets the empty scope, which sees no tenant's rows
         */
        scope = &ngx_platform_pg_no_scope;
    }

    lock = !read && !stmt->unscoped && ngx_platform_pg_lock_timeout.len;

    prefix.stmt = ngx_platform_pg_prefix(scope, lock, prefix_params);
    prefix.params = prefix_params;

    op = ngx_platform_pg_op_create(log, prefix.stmt ? &prefix : NULL, &step,
                                   1);
    if (op == NULL) {
        return NGX_ERROR;
    }

    op->handler = handler;
    op->read = read;

    return ngx_platform_pg_submit(op, pool, log, data, owner);
}


/* the hidden first call of an operation, if it needs one */

static ngx_platform_pg_stmt_t *
ngx_platform_pg_prefix(ngx_str_t *scope, ngx_uint_t lock, ngx_str_t *params)
{
    ngx_uint_t  n, which;

    n = 0;
    which = 0;

    if (ngx_platform_pg_statement_timeout.len) {
        params[n++] = ngx_platform_pg_statement_timeout;
        which |= NGX_PLATFORM_PG_SESSION;
    }

    if (scope) {
        params[n++] = *scope;
        which |= NGX_PLATFORM_PG_SCOPE;
    }

    if (lock) {
        params[n++] = ngx_platform_pg_lock_timeout;
        which |= NGX_PLATFORM_PG_LOCK;
    }

    return which ? &ngx_platform_pg_prefixes[which] : NULL;
}


/*
 * One heap allocation for the op, one for what it sends: the calls,
 * results and slots of its steps (a prepare and an execute a step at
 * most) and every parameter's bytes. A prefix (the scope, the lock
 * timeout) is one more call, the first, hidden from the handler.
 */

static ngx_platform_pg_op_t *
ngx_platform_pg_op_create(ngx_log_t *log, ngx_platform_pg_step_t *prefix,
    ngx_platform_pg_step_t *steps, ngx_uint_t n)
{
    u_char                *p;
    size_t                 size;
    ngx_uint_t             i, first;
    ngx_platform_pg_op_t  *op;

    op = ngx_calloc(sizeof(ngx_platform_pg_op_t), log);
    if (op == NULL) {
        return NULL;
    }

    first = (prefix != NULL);
    size = 0;

    if (first + n > 1) {
        size = (first + n) * (sizeof(ngx_platform_pg_call_t)
                              + sizeof(PGresult *)
                              + 2 * sizeof(ngx_platform_pg_slot_t));
    }

    if (first) {
        size += ngx_platform_pg_params_size(prefix->stmt, prefix->params);
    }

    for (i = 0; i < n; i++) {
        size += ngx_platform_pg_params_size(steps[i].stmt, steps[i].params);
    }

    p = NULL;

    if (size) {
        p = ngx_calloc(size, log);
        if (p == NULL) {
            ngx_free(op);
            return NULL;
        }
    }

    op->block = p;

    if (first + n == 1) {
        op->calls = &op->call;
        op->results = &op->result;
        op->slots = op->slot_pair;

    } else {
        op->calls = (ngx_platform_pg_call_t *) p;
        p += (first + n) * sizeof(ngx_platform_pg_call_t);

        op->results = (PGresult **) p;
        p += (first + n) * sizeof(PGresult *);

        op->slots = (ngx_platform_pg_slot_t *) p;
        p += 2 * (first + n) * sizeof(ngx_platform_pg_slot_t);
    }

    if (first) {
        p = ngx_platform_pg_params_copy(&op->calls[0], prefix->stmt,
                                        prefix->params, p);
    }

    for (i = 0; i < n; i++) {
        p = ngx_platform_pg_params_copy(&op->calls[first + i], steps[i].stmt,
                                        steps[i].params, p);
    }

    op->ncalls = first + n;
    op->first = first;

    return op;
}


/*
 * Places op on the read pool or the primary. Nothing here calls the
 * handler before NGX_DONE is returned: failures are answered by the
 * return code, later ones from event handlers.
 */

static ngx_int_t
ngx_platform_pg_submit(ngx_platform_pg_op_t *op, ngx_pool_t *pool,
    ngx_log_t *log, void *data, ngx_str_t *owner)
{
    ngx_int_t                rc;
    ngx_pool_cleanup_t      *cln;
    ngx_platform_pg_pool_t  *pgp;

    pgp = ngx_platform_pg_primary;

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

    rc = NGX_DECLINED;

    if (op->read && ngx_platform_pg_replica) {
        rc = ngx_platform_pg_admit(ngx_platform_pg_replica, op, owner);

        /* the read pool is down or full: the primary serves reads too */
    }

    if (rc != NGX_DONE && rc != NGX_PLATFORM_OVER_SHARE) {
        rc = ngx_platform_pg_admit(pgp, op, owner);
    }

    if (rc == NGX_DONE) {
        return NGX_DONE;
    }

    if (rc == NGX_PLATFORM_OVER_SHARE) {
        ngx_platform_metric_inc(NGX_PLATFORM_M_PG_OVER_SHARE);

        ngx_platform_log_limited(NGX_PLATFORM_LOG_PG_REJECTED, NGX_LOG_WARN,
                                 log, 0,
                                 "platform: PostgreSQL share of \"%V\" "
                                 "in use, statement \"%s\" refused",
                                 owner, op->calls[op->first].stmt->name);

        ngx_platform_pg_op_free(op);

        return NGX_PLATFORM_OVER_SHARE;
    }

    ngx_platform_metric_inc(NGX_PLATFORM_M_PG_REJECTED);

    ngx_platform_log_limited(NGX_PLATFORM_LOG_PG_REJECTED, NGX_LOG_WARN, log, 0,
                             "platform: PostgreSQL %s, statement \"%s\" "
                             "rejected",
                             pgp->nconns ? "pool and queue are full"
                                         : "is unavailable",
                             op->calls[op->first].stmt->name);

    ngx_platform_pg_op_free(op);

    return NGX_PLATFORM_UNAVAILABLE;
}


/*
 * op is placed with its owner's shares in mind, and counted against its
 * owner once the pool took it.
 */

static ngx_int_t
ngx_platform_pg_admit(ngx_platform_pg_pool_t *pool, ngx_platform_pg_op_t *op,
    ngx_str_t *owner)
{
    ngx_int_t                 rc;
    ngx_platform_pg_owner_t  *o;

    if (owner == NULL || owner->len == 0 || pool->slot_share == 0) {
        return ngx_platform_pg_place(pool, op, NULL);
    }

    o = ngx_platform_pg_owner_find(pool, owner,
                                   ngx_crc32_short(owner->data, owner->len));

    rc = ngx_platform_pg_place(pool, op, o);

    if (rc == NGX_DONE) {
        ngx_platform_pg_own(pool, op, owner);
    }

    return rc;
}


static ngx_platform_pg_owner_t *
ngx_platform_pg_owner_find(ngx_platform_pg_pool_t *pool, ngx_str_t *name,
    uint32_t hash)
{
    return (ngx_platform_pg_owner_t *) ngx_str_rbtree_lookup(&pool->owners,
                                                             name, hash);
}


/*
 * op counts against its owner's share until it is freed. Without memory
 * for a new owner op is not counted: refusing it would fail a request
 * for the bookkeeping's sake.
 */

static void
ngx_platform_pg_own(ngx_platform_pg_pool_t *pool, ngx_platform_pg_op_t *op,
    ngx_str_t *name)
{
    uint32_t                  hash;
    ngx_platform_pg_owner_t  *o;

    hash = ngx_crc32_short(name->data, name->len);

    o = ngx_platform_pg_owner_find(pool, name, hash);

    if (o == NULL) {
        o = ngx_alloc(sizeof(ngx_platform_pg_owner_t) + name->len, pool->log);
        if (o == NULL) {
            return;
        }

        o->sn.node.key = hash;
        o->sn.str.len = name->len;
        o->sn.str.data = (u_char *) (o + 1);
        ngx_memcpy(o->sn.str.data, name->data, name->len);

        o->running = 0;
        o->waiting = 0;
        o->pool = pool;

        ngx_rbtree_insert(&pool->owners, &o->sn.node);
        pool->nowners++;
    }

    if (op->waiting) {
        o->waiting++;

    } else {
        o->running++;
    }

    op->owner = o;
}


/*
 * An operation of the owner ended (a waiter leaves the queue as running
 * first); the owner goes with its last one.
 */

static void
ngx_platform_pg_owner_release(ngx_platform_pg_owner_t *o)
{
    if (--o->running || o->waiting) {
        return;
    }

    ngx_rbtree_delete(&o->pool->owners, &o->sn.node);
    o->pool->nowners--;

    ngx_free(o);
}


/*
 * An idle connection; else a new one, while the pool may grow, so that a
 * statement waits behind another only when it must; else, for a read, the
 * connection where this pass of the event loop opened a segment of reads,
 * while it has room, so that they share its sync point; else the least
 * loaded connection that is not stalled, the one whose oldest statement
 * is the youngest among equals; else a stalled one with room; else the
 * queue.
 */

static ngx_int_t
ngx_platform_pg_place(ngx_platform_pg_pool_t *pool, ngx_platform_pg_op_t *op,
    ngx_platform_pg_owner_t *owner)
{
    ngx_platform_pg_conn_t  *pc, *open;

    if (owner && owner->running >= pool->slot_share) {
        /* its share of the slots is in use: it may wait for its turn */
        return ngx_platform_pg_enqueue(pool, op, owner,
                                       NGX_PLATFORM_OVER_SHARE);
    }

    pc = ngx_platform_pg_pick(pool, 0);

    if (pc && pc->nops == 0) {
        ngx_platform_pg_send(pc, op);
        return NGX_DONE;
    }

    if (ngx_platform_pg_can_connect(pool)
        && ngx_platform_pg_connect(pool, op) == NGX_OK)
    {
        return NGX_DONE;
    }

    if (op->read && pool->conf->pg_coalesce) {
        open = ngx_platform_pg_pick_open(pool);

        if (open) {
            ngx_platform_pg_send(open, op);
            return NGX_DONE;
        }
    }

    if (pc == NULL) {
        pc = ngx_platform_pg_pick(pool, 1);
    }

    if (pc) {
        ngx_platform_pg_send(pc, op);
        return NGX_DONE;
    }

    if (pool->nconns == 0) {
        return NGX_PLATFORM_UNAVAILABLE;
    }

    return ngx_platform_pg_enqueue(pool, op, owner, NGX_PLATFORM_UNAVAILABLE);
}


/*
 * op waits in the queue, unless its owner holds its share of the queue
 * already (429), or the queue is full and no owner waits more than this
 * one would: then "full" is the answer, 429 for an owner at its share of
 * the slots, 503 for a pool with no room at all.
 */

static ngx_int_t
ngx_platform_pg_enqueue(ngx_platform_pg_pool_t *pool, ngx_platform_pg_op_t *op,
    ngx_platform_pg_owner_t *owner, ngx_int_t full)
{
    if (owner && owner->waiting >= pool->queue_share) {
        return NGX_PLATFORM_OVER_SHARE;
    }

    if (!ngx_platform_pg_queue_room(pool, owner)) {
        return full;
    }

    ngx_platform_pg_wait(pool, op);

    return NGX_DONE;
}


/*
 * A full queue makes room for an owner that waits less than another: the
 * newest statement of the owner with the most waiting is pushed out and
 * refused as over its share. Shares alone cannot keep the queue open,
 * since two owners at a share of 50% fill it; this way a queue that others
 * filled refuses an owner only when none of them waits more than it would.
 */

static ngx_uint_t
ngx_platform_pg_queue_room(ngx_platform_pg_pool_t *pool,
    ngx_platform_pg_owner_t *owner)
{
    ngx_uint_t                mine;
    ngx_queue_t              *q;
    ngx_rbtree_node_t        *node, *root, *sentinel;
    ngx_platform_pg_op_t     *op;
    ngx_platform_pg_owner_t  *o, *most;

    if (pool->nwaiting < pool->conf->pg_queue_size) {
        return 1;
    }

    root = pool->owners.root;
    sentinel = pool->owners.sentinel;

    if (pool->slot_share == 0 || root == sentinel) {
        return 0;
    }

    mine = owner ? owner->waiting : 0;
    most = NULL;

    for (node = ngx_rbtree_min(root, sentinel);
         node;
         node = ngx_rbtree_next(&pool->owners, node))
    {
        o = (ngx_platform_pg_owner_t *) node;

        if (o->waiting > mine + 1
            && (most == NULL || o->waiting > most->waiting))
        {
            most = o;
        }
    }

    if (most == NULL) {
        return 0;
    }

    for (q = ngx_queue_last(&pool->waiting);
         q != ngx_queue_sentinel(&pool->waiting);
         q = ngx_queue_prev(q))
    {
        op = ngx_queue_data(q, ngx_platform_pg_op_t, queue);

        if (op->owner == most) {
            ngx_platform_pg_push_out(op);
            return 1;
        }
    }

    return 0;
}


/*
 * op leaves the queue and is refused from a posted event: its request's
 * handler must not run inside another request's submit.
 */

static void
ngx_platform_pg_push_out(ngx_platform_pg_op_t *op)
{
    ngx_platform_pg_unqueue(op);

    op->pushed_out = 1;

    op->wait_timer.handler = ngx_platform_pg_pushed_out;
    ngx_post_event(&op->wait_timer, &ngx_posted_events);
}


static void
ngx_platform_pg_pushed_out(ngx_event_t *ev)
{
    ngx_platform_pg_op_t  *op;

    op = (ngx_platform_pg_op_t *)
             ((u_char *) ev - offsetof(ngx_platform_pg_op_t, wait_timer));

    ngx_platform_metric_inc(NGX_PLATFORM_M_PG_OVER_SHARE);

    ngx_platform_log_limited(NGX_PLATFORM_LOG_PG_REJECTED, NGX_LOG_WARN,
                             ev->log, 0,
                             "platform: PostgreSQL share of \"%V\" "
                             "in use, statement \"%s\" pushed out of "
                             "the full queue",
                             &op->owner->sn.str,
                             op->calls[op->first].stmt->name);

    /* the request's cleanup, run by its handler, leaves op to op_fail */
    op->pushed_out = 0;

    ngx_platform_pg_op_fail(op, NGX_PLATFORM_OVER_SHARE);
}


/* a waiter whose owner is at its share of the slots waits on */

static ngx_uint_t
ngx_platform_pg_may_run(ngx_platform_pg_pool_t *pool, ngx_platform_pg_op_t *op)
{
    return op->owner == NULL
           || pool->slot_share == 0
           || op->owner->running < pool->slot_share;
}


/* op leaves the queue: counted as running until it is freed */

static void
ngx_platform_pg_unqueue(ngx_platform_pg_op_t *op)
{
    ngx_queue_remove(&op->queue);
    op->pool->nwaiting--;
    op->waiting = 0;

    if (op->wait_timer.timer_set) {
        ngx_del_timer(&op->wait_timer);
    }

    if (op->owner) {
        op->owner->waiting--;
        op->owner->running++;
    }
}


/* a connection with an open segment of reads and room, not stalled */

static ngx_platform_pg_conn_t *
ngx_platform_pg_pick_open(ngx_platform_pg_pool_t *pool)
{
    ngx_queue_t             *q;
    ngx_platform_pg_op_t    *head;
    ngx_platform_pg_conn_t  *pc;

    for (q = ngx_queue_head(&pool->conns);
         q != ngx_queue_sentinel(&pool->conns);
         q = ngx_queue_next(q))
    {
        pc = ngx_queue_data(q, ngx_platform_pg_conn_t, queue);

        if (pc->open == NULL
            || pc->broken
            || pc->nops >= pool->conf->pg_pipeline_depth
            || (pool->conf->pg_max_uses && pc->uses >= pool->conf->pg_max_uses))
        {
            continue;
        }

        head = ngx_queue_data(ngx_queue_head(&pc->ops), ngx_platform_pg_op_t,
                              queue);

        if (ngx_current_msec - head->sent < NGX_PLATFORM_PG_STALL) {
            return pc;
        }
    }

    return NULL;
}


static ngx_platform_pg_conn_t *
ngx_platform_pg_pick(ngx_platform_pg_pool_t *pool, ngx_uint_t stalled)
{
    ngx_msec_t               since, best_since;
    ngx_uint_t               load, best_load, depth;
    ngx_queue_t             *q;
    ngx_platform_pg_op_t    *head;
    ngx_platform_pg_conn_t  *pc, *best;

    best = NULL;
    best_load = 0;
    best_since = 0;
    depth = pool->conf->pg_pipeline_depth;

    for (q = ngx_queue_head(&pool->conns);
         q != ngx_queue_sentinel(&pool->conns);
         q = ngx_queue_next(q))
    {
        pc = ngx_queue_data(q, ngx_platform_pg_conn_t, queue);

        if (pc->broken
            || pc->nops >= depth
            || (pool->conf->pg_max_uses && pc->uses >= pool->conf->pg_max_uses))
        {
            continue;
        }

        if (pc->connecting) {
            since = pc->start;

        } else if (pc->nops) {
            head = ngx_queue_data(ngx_queue_head(&pc->ops),
                                  ngx_platform_pg_op_t, queue);
            since = head->sent;

        } else {
            since = ngx_current_msec;
        }

        if (!stalled && ngx_current_msec - since >= NGX_PLATFORM_PG_STALL) {
            continue;
        }

        /* a connection still connecting only when no other has room */

        load = pc->nops + (pc->connecting ? depth : 0);

        if (best == NULL
            || load < best_load
            || (load == best_load && (ngx_msec_int_t) (since - best_since) > 0))
        {
            best = pc;
            best_load = load;
            best_since = since;
        }
    }

    return best;
}


static ngx_uint_t
ngx_platform_pg_can_connect(ngx_platform_pg_pool_t *pool)
{
    return pool->nconns < pool->conf->pg_pool_size
           && ngx_current_msec >= pool->retry_at
           && !ngx_exiting && !ngx_quit && !ngx_terminate;
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
ngx_platform_pg_stats(ngx_uint_t read, ngx_platform_pg_stats_t *stats)
{
    ngx_queue_t             *q;
    ngx_platform_pg_conn_t  *pc;
    ngx_platform_pg_pool_t  *pool;

    ngx_memzero(stats, sizeof(ngx_platform_pg_stats_t));

    pool = read ? ngx_platform_pg_replica : ngx_platform_pg_primary;
    if (pool == NULL) {
        return;
    }

    stats->configured = 1;

    for (q = ngx_queue_head(&pool->conns);
         q != ngx_queue_sentinel(&pool->conns);
         q = ngx_queue_next(q))
    {
        pc = ngx_queue_data(q, ngx_platform_pg_conn_t, queue);

        if (pc->nops == 0 && !pc->connecting) {
            stats->idle++;
        }

        stats->in_flight += pc->nops;
    }

    stats->busy = pool->nconns - stats->idle;
    stats->waiting = pool->nwaiting;
    stats->connected = pool->connected;
    stats->owners = pool->nowners;
}
/*
 * parameters are copied into a heap block: the op may outlive its caller;
 * borrowed ones are pointed to (see ngx_platform_pg_stmt_t)
 */

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
        if (!ngx_platform_pg_borrowed(stmt, i)) {
            size += params[i].len + 1;
        }
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

        call->lengths[i] = (int) params[i].len;

        if (ngx_platform_pg_borrowed(stmt, i)) {
            call->values[i] = (char *) params[i].data;
            continue;
        }

        call->values[i] = (char *) p;

        p = ngx_cpymem(p, params[i].data, params[i].len);
        *p++ = '\0';
    }

    return start + ngx_platform_pg_params_size(stmt, params);
}


/*
 * op lost its connection or could not get one. A read the read pool
 * lost is run on the primary; anything else fails.
 */

static void
ngx_platform_pg_op_lost(ngx_platform_pg_op_t *op, ngx_int_t rc)
{
    ngx_platform_pg_owner_t  *owner;
    ngx_platform_pg_pool_t   *primary;

    primary = ngx_platform_pg_primary;

    if (op->read
        && rc == NGX_PLATFORM_UNAVAILABLE
        && op->cleanup
        && op->pool != primary)
    {
        ngx_platform_pg_op_clear(op);

        op->conn = NULL;
        op->pool = NULL;

        /* it was admitted: it moves with its owner, whatever the share */

        owner = op->owner;
        op->owner = NULL;

        if (ngx_platform_pg_place(primary, op, NULL) == NGX_DONE) {
            if (owner) {
                if (primary->slot_share) {
                    ngx_platform_pg_own(primary, op, &owner->sn.str);
                }

                ngx_platform_pg_owner_release(owner);
            }

            ngx_log_error(NGX_LOG_INFO, op->log, 0,
                          "platform: read pool unavailable, statement "
                          "\"%s\" runs on the primary",
                          op->calls[op->first].stmt->name);
            return;
        }

        op->owner = owner;
    }

    ngx_platform_pg_op_fail(op, rc);
}


/* tells the caller, while there is one, that op failed; frees op */

static void
ngx_platform_pg_op_fail(ngx_platform_pg_op_t *op, ngx_int_t rc)
{
    op->conn = NULL;

    if (op->cleanup) {
        ngx_platform_pg_op_clear(op);

        op->handler(op->data, op, NULL, rc);
    }

    ngx_platform_pg_op_free(op);
}


static void
ngx_platform_pg_op_free(ngx_platform_pg_op_t *op)
{
    if (op->wait_timer.timer_set) {
        ngx_del_timer(&op->wait_timer);
    }

    if (op->wait_timer.posted) {
        ngx_delete_posted_event(&op->wait_timer);
    }

    if (op->cleanup) {
        op->cleanup->handler = NULL;
    }

    if (op->owner) {
        ngx_platform_pg_owner_release(op->owner);
        op->owner = NULL;
    }

    ngx_platform_pg_op_clear(op);

    ngx_free(op->block);
    ngx_free(op);
}


/* the results read so far, freed; ready to be sent again */

static void
ngx_platform_pg_op_clear(ngx_platform_pg_op_t *op)
{
    ngx_uint_t  i;

    for (i = 0; i < op->ncalls; i++) {
        if (op->results[i]) {
            PQclear(op->results[i]);
            op->results[i] = NULL;
        }
    }

    op->nslots = 0;
    op->slot = 0;
    op->failed = 0;
    op->rc = NGX_OK;
    op->sync = 0;
    op->aborted = 0;
}


/*
 * The caller's pool is going away: detach the operation from it. One in
 * a connection's queue stays there as an orphan until its results are
 * read.
 */

static void
ngx_platform_pg_cleanup(void *data)
{
    ngx_platform_pg_op_t *op = data;

    op->cleanup = NULL;
    op->data = NULL;
    op->log = NULL;

    if (op->waiting) {
        ngx_platform_pg_unqueue(op);
        ngx_platform_pg_op_free(op);

    } else if (op->pushed_out) {
        ngx_platform_pg_op_free(op);
    }
}


static void
ngx_platform_pg_wait(ngx_platform_pg_pool_t *pool, ngx_platform_pg_op_t *op)
{
    op->pool = pool;
    op->waiting = 1;

    ngx_queue_insert_tail(&pool->waiting, &op->queue);
    pool->nwaiting++;

    op->wait_timer.handler = ngx_platform_pg_wait_timeout;
    op->wait_timer.data = &ngx_platform_pg_timer_conn;
    op->wait_timer.log = op->log;
    /* a caller waits here: the timer must hold a graceful exit */
    op->wait_timer.cancelable = 0;

    ngx_add_timer(&op->wait_timer, pool->conf->pg_queue_timeout);
}


static void
ngx_platform_pg_wait_timeout(ngx_event_t *ev)
{
    ngx_platform_pg_op_t  *op;

    op = (ngx_platform_pg_op_t *)
             ((u_char *) ev - offsetof(ngx_platform_pg_op_t, wait_timer));

    ngx_platform_pg_unqueue(op);

    ngx_platform_metric_inc(NGX_PLATFORM_M_PG_TIMEOUTS);

    ngx_log_error(NGX_LOG_WARN, ev->log, 0,
                  "platform: no PostgreSQL connection had room in time "
                  "for statement \"%s\"", op->calls[op->first].stmt->name);

    ngx_platform_pg_op_fail(op, NGX_PLATFORM_TIMEOUT);
}


/* a new connection; op, if any, is sent once it is established */

static ngx_int_t
ngx_platform_pg_connect(ngx_platform_pg_pool_t *pool,
    ngx_platform_pg_op_t *op)
{
    PGconn                  *conn;
    const char             **values;
    ngx_platform_pg_conn_t  *pc;

    values = pool->values;

    if (pool->nrotations) {
        values = pool->rotations[pool->next_rotation++ % pool->nrotations];
    }

    conn = PQconnectStartParams(pool->keywords, values, 0);

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
    pc->connecting = 1;
    pc->start = ngx_current_msec;
    ngx_queue_init(&pc->ops);

    pc->timer.handler = ngx_platform_pg_timer_handler;
    pc->timer.data = &ngx_platform_pg_timer_conn;
    pc->timer.log = pool->log;

    pc->flush.handler = ngx_platform_pg_flush_handler;
    pc->flush.data = &ngx_platform_pg_timer_conn;
    pc->flush.log = pool->log;

    /* libpq: consider the first state PGRES_POLLING_WRITING */

    if (ngx_platform_pg_wrap_socket(pc, 1) != NGX_OK) {
        PQfinish(conn);
        ngx_free(pc);
        ngx_platform_pg_backoff(pool, "cannot watch its socket");
        return NGX_ERROR;
    }

    ngx_queue_insert_tail(&pool->conns, &pc->queue);
    pool->nconns++;

    if (op) {
        ngx_platform_pg_add(pc, op);
    }

    /* a caller may wait for it: the timer holds a graceful exit */
    pc->timer.cancelable = 0;
    ngx_add_timer(&pc->timer, pool->conf->pg_connect_timeout);

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, pool->log, 0,
                   "platform pg %s connect, fd:%d",
                   pool->name, PQsocket(conn));

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
                      "platform: PostgreSQL %sconnect failed: %*s",
                      pool == ngx_platform_pg_replica ? "read pool " : "",
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


/* pipeline mode for the life of the connection; what waited is sent */

static void
ngx_platform_pg_connected(ngx_platform_pg_conn_t *pc)
{
    const char              *superuser;
    ngx_queue_t             *q, *next;
    ngx_platform_pg_op_t    *op;
    ngx_platform_pg_pool_t  *pool;

    pool = pc->pool;

    if (PQsetnonblocking(pc->conn, 1) == -1
        || PQenterPipelineMode(pc->conn) == 0)
    {
        ngx_platform_pg_connect_failed(pc, PQerrorMessage(pc->conn));
        return;
    }

    if (pc->timer.timer_set) {
        ngx_del_timer(&pc->timer);
    }

    pc->connecting = 0;

    ngx_platform_metric_inc(NGX_PLATFORM_M_PG_CONNECTS);

    if (!pool->connected) {
        ngx_log_error(NGX_LOG_NOTICE, pool->log, 0,
                      "platform: PostgreSQL %sconnection established",
                      pool == ngx_platform_pg_replica ? "read pool " : "");

        /* the server reports it at connect: no round trip to ask */

        superuser = PQparameterStatus(pc->conn, "is_superuser");

        if (pool->conf->pg_row_security
            && superuser && ngx_strcmp(superuser, "on") == 0)
        {
            ngx_log_error(NGX_LOG_WARN, pool->log, 0,
                          "platform: PostgreSQL %srole \"%s\" is a "
                          "superuser, which row-level security does not "
                          "bind: connect as the role scripts/migrate makes",
                          pool == ngx_platform_pg_replica ? "read pool " : "",
                          PQuser(pc->conn));
        }
    }

    pool->connected = 1;
    pool->backoff = 0;
    pool->retry_at = 0;

    for (q = ngx_queue_head(&pc->ops);
         q != ngx_queue_sentinel(&pc->ops);
         q = next)
    {
        next = ngx_queue_next(q);
        op = ngx_queue_data(q, ngx_platform_pg_op_t, queue);

        if (op->cleanup == NULL) {
            /* the caller left while we connected */
            ngx_queue_remove(q);
            pc->nops--;
            ngx_platform_pg_op_free(op);
            continue;
        }

        if (!pc->broken && ngx_platform_pg_send_op(pc, op) != NGX_OK) {
            pc->broken = 1;
        }
    }

    if (pc->broken) {
        ngx_platform_pg_fail(pc, NGX_PLATFORM_UNAVAILABLE,
                             PQerrorMessage(pc->conn));
        return;
    }

    ngx_platform_pg_settle(pc);
}


static void
ngx_platform_pg_connect_failed(ngx_platform_pg_conn_t *pc, char *reason)
{
    ngx_platform_pg_backoff(pc->pool, reason);
    ngx_platform_pg_fail(pc, NGX_PLATFORM_UNAVAILABLE, NULL);
}


/* op joins pc's queue, to be sent now or once pc is connected */

static void
ngx_platform_pg_add(ngx_platform_pg_conn_t *pc, ngx_platform_pg_op_t *op)
{
    op->pool = pc->pool;
    op->conn = pc;

    ngx_queue_insert_tail(&pc->ops, &op->queue);
    pc->nops++;
    pc->uses++;
}


/*
 * From a caller or a handler: a failed send does not close the
 * connection under them; the connection is failed from its own event,
 * posted, with op among its operations. On a connection still
 * connecting, op waits its turn in the queue.
 */

static void
ngx_platform_pg_send(ngx_platform_pg_conn_t *pc, ngx_platform_pg_op_t *op)
{
    ngx_platform_pg_add(pc, op);

    if (pc->connecting) {
        /* sent once connected */
        return;
    }

    if (ngx_platform_pg_send_op(pc, op) != NGX_OK) {
        pc->broken = 1;
        ngx_post_event(pc->c->read, &ngx_posted_events);
        return;
    }

    if (pc->nops == 1) {
        ngx_platform_pg_arm(pc);
    }
}


/*
 * The prepares of the statements this connection has not prepared yet,
 * if statements are prepared, first (an error before them would skip
 * them), then the executes, then the sync point that closes the
 * operation's implicit transaction. The slots record what was sent, in
 * the order its results come back.
 *
 * A read that needs no prepare gets no sync point of its own: it joins
 * the connection's open segment, which the next operation that is not
 * such a read, or the flush at the end of this pass of the event loop,
 * closes with one sync point.
 */

static ngx_int_t
ngx_platform_pg_send_op(ngx_platform_pg_conn_t *pc, ngx_platform_pg_op_t *op)
{
    ngx_uint_t               i, shared;
    ngx_platform_pg_call_t  *call;

    op->sent = ngx_current_msec;
    op->sync = 0;

    shared = ngx_platform_pg_shares(pc, op);

    if (!shared && ngx_platform_pg_sync(pc) != NGX_OK) {
        return NGX_ERROR;
    }

    if (pc->pool->conf->pg_prepare
        && ngx_platform_pg_send_prepares(pc, op) != NGX_OK)
    {
        return NGX_ERROR;
    }

    /*
     * In a segment, the settings of the read before, the same as op's,
     * are still those of the implicit transaction: op's are not sent
     * again. A read sent again alone sends them.
     */

    i = 0;

    if (shared && pc->open && ngx_platform_pg_same_prefix(pc->open, op)) {
        i = 1;
    }

    for ( /* void */ ; i < op->ncalls; i++) {
        call = &op->calls[i];

        if (i >= op->first) {
            ngx_platform_metric_inc(NGX_PLATFORM_M_PG_STATEMENTS);
        }

        if (ngx_platform_pg_send_call(pc, call) == 0) {
            return NGX_ERROR;
        }

        op->slots[op->nslots].step = i;
        op->slots[op->nslots].prepare = 0;
        op->nslots++;
    }

    if (shared) {
        pc->open = op;
        pc->nopen++;

    } else {
        if (PQpipelineSync(pc->conn) == 0) {
            return NGX_ERROR;
        }

        op->sync = 1;
    }

    /*
     * The statements sent during one pass of the event loop leave
     * together, in one write, when the loop runs its posted events.
     */

    if (!pc->flush.posted) {
        ngx_post_event(&pc->flush, &ngx_posted_events);
    }

    return NGX_OK;
}


/*
 * Whether op may share a sync point with the reads around it: a read
 * whose statements, its scope's included, are prepared on pc already,
 * or are sent unnamed. A prepare goes in a segment of its own, first,
 * so that no other statement's error may abort it (the statements sent
 * after it, counting on it, would then fail).
 */

static ngx_uint_t
ngx_platform_pg_shares(ngx_platform_pg_conn_t *pc, ngx_platform_pg_op_t *op)
{
    ngx_uint_t  i;

    if (!op->read || op->alone || !pc->pool->conf->pg_coalesce) {
        return 0;
    }

    if (!pc->pool->conf->pg_prepare) {
        return 1;
    }

    for (i = 0; i < op->ncalls; i++) {
        if (!ngx_platform_pg_is_prepared(pc, op->calls[i].stmt)) {
            return 0;
        }
    }

    return 1;
}


/* whether op's hidden first call sets what prev's did */

static ngx_uint_t
ngx_platform_pg_same_prefix(ngx_platform_pg_op_t *prev,
    ngx_platform_pg_op_t *op)
{
    int                      n;
    ngx_platform_pg_call_t  *a, *b;

    if (!prev->first || !op->first) {
        return 0;
    }

    a = &prev->calls[0];
    b = &op->calls[0];

    if (a->stmt != b->stmt) {
        return 0;
    }

    for (n = 0; n < b->stmt->nparams; n++) {
        if (a->lengths[n] != b->lengths[n]
            || (a->values[n] == NULL) != (b->values[n] == NULL)
            || (b->values[n]
                && ngx_memcmp(a->values[n], b->values[n], b->lengths[n])
                   != 0))
        {
            return 0;
        }
    }

    return 1;
}


/* the open segment of reads, if any, is closed by one sync point */

static ngx_int_t
ngx_platform_pg_sync(ngx_platform_pg_conn_t *pc)
{
    if (pc->open == NULL) {
        return NGX_OK;
    }

    if (PQpipelineSync(pc->conn) == 0) {
        return NGX_ERROR;
    }

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, pc->pool->log, 0,
                   "platform pg %s sync after %ui reads",
                   pc->pool->name, pc->nopen);

    pc->open->sync = 1;
    pc->open = NULL;
    pc->nopen = 0;

    return NGX_OK;
}


static ngx_int_t
ngx_platform_pg_send_prepares(ngx_platform_pg_conn_t *pc,
    ngx_platform_pg_op_t *op)
{
    ngx_uint_t               i;
    ngx_platform_pg_call_t  *call;

    for (i = 0; i < op->ncalls; i++) {
        call = &op->calls[i];

        if (ngx_platform_pg_is_prepared(pc, call->stmt)) {
            continue;
        }

        if (PQsendPrepare(pc->conn, call->stmt->name, call->stmt->sql,
                          call->stmt->nparams, NULL)
            == 0)
        {
            return NGX_ERROR;
        }

        /* later operations on this connection count on it */
        ngx_platform_pg_add_prepared(pc, call->stmt);

        op->slots[op->nslots].step = i;
        op->slots[op->nslots].prepare = 1;
        op->nslots++;
    }

    return NGX_OK;
}


/* the execute of a prepared statement, or an unnamed one: nothing kept */

static int
ngx_platform_pg_send_call(ngx_platform_pg_conn_t *pc,
    ngx_platform_pg_call_t *call)
{
    if (pc->pool->conf->pg_prepare) {
        return PQsendQueryPrepared(pc->conn, call->stmt->name,
                                   call->stmt->nparams,
                                   (const char * const *) call->values,
                                   call->lengths, call->formats, 0);
    }

    return PQsendQueryParams(pc->conn, call->stmt->sql, call->stmt->nparams,
                             NULL, (const char * const *) call->values,
                             call->lengths, call->formats, 0);
}


static void
ngx_platform_pg_flush_handler(ngx_event_t *ev)
{
    ngx_platform_pg_conn_t  *pc;

    pc = (ngx_platform_pg_conn_t *)
             ((u_char *) ev - offsetof(ngx_platform_pg_conn_t, flush));

    if (pc->broken
        || ngx_platform_pg_sync(pc) != NGX_OK
        || ngx_platform_pg_flush(pc) != NGX_OK)
    {
        ngx_platform_pg_fail(pc, NGX_PLATFORM_UNAVAILABLE,
                             PQerrorMessage(pc->conn));
    }
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

    if (pc->connecting) {
        ngx_platform_pg_connect_poll(pc);
        return;
    }

    if (pc->broken) {
        ngx_platform_pg_fail(pc, NGX_PLATFORM_UNAVAILABLE,
                             PQerrorMessage(pc->conn));
        return;
    }

    if (pc->nops == 0) {
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
    }

    ngx_platform_pg_receive(pc);
}


static void
ngx_platform_pg_write_handler(ngx_event_t *ev)
{
    ngx_connection_t        *c;
    ngx_platform_pg_conn_t  *pc;

    c = ev->data;
    pc = c->data;

    if (pc->connecting) {
        ngx_platform_pg_connect_poll(pc);
        return;
    }

    if (ngx_platform_pg_flush(pc) != NGX_OK) {
        ngx_platform_pg_fail(pc, NGX_PLATFORM_UNAVAILABLE,
                             PQerrorMessage(pc->conn));
    }
}


static void
ngx_platform_pg_timer_handler(ngx_event_t *ev)
{
    ngx_platform_pg_op_t    *op;
    ngx_platform_pg_conn_t  *pc;

    pc = (ngx_platform_pg_conn_t *)
             ((u_char *) ev - offsetof(ngx_platform_pg_conn_t, timer));

    if (pc->connecting) {
        ngx_platform_pg_connect_failed(pc, "connect timed out");
        return;
    }

    if (pc->nops == 0) {
        ngx_log_debug0(NGX_LOG_DEBUG_HTTP, ev->log, 0,
                       "platform pg idle timeout");
        ngx_platform_pg_close(pc);
        return;
    }

    /*
     * The oldest operation ran out of time. PQcancel() blocks, so the
     * connection is dropped instead, with what was queued behind it; the
     * server's statement_timeout ends the statement there.
     */

    op = ngx_queue_data(ngx_queue_head(&pc->ops), ngx_platform_pg_op_t,
                        queue);

    if (ngx_current_msec - op->sent < pc->pool->conf->pg_query_timeout) {
        /* the timer was left at an earlier head's deadline, near this one */
        ngx_platform_pg_arm(pc);
        return;
    }

    ngx_platform_metric_inc(NGX_PLATFORM_M_PG_TIMEOUTS);

    ngx_log_error(NGX_LOG_ERR, ngx_platform_pg_log(pc->pool, op), 0,
                  "platform: PostgreSQL statement \"%s\" timed out%s",
                  op->calls[op->ncalls - 1].stmt->name,
                  pc->nops > 1 ? ", with the statements behind it" : "");

    ngx_platform_pg_fail(pc, NGX_PLATFORM_TIMEOUT, NULL);
}


/*
 * Results come in the order the operations were sent. For each command
 * of an operation: its result, then NULL; after an error,
 * PGRES_PIPELINE_ABORTED for the rest of the segment; last
 * PGRES_PIPELINE_SYNC for the segment's sync point, which follows the
 * last operation of a segment of reads, or each other operation.
 */

static void
ngx_platform_pg_receive(ngx_platform_pg_conn_t *pc)
{
    PGresult              *res;
    ngx_queue_t           *q;
    ngx_platform_pg_op_t  *op;

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

    while (pc->nops && !PQisBusy(pc->conn)) {

        op = pc->reading;

        if (op == NULL) {
            op = ngx_queue_data(ngx_queue_head(&pc->ops),
                                ngx_platform_pg_op_t, queue);
        }

        if (op->slot == op->nslots && !op->sync) {
            /* read; the next read of its segment follows, once sent */

            q = ngx_queue_next(&op->queue);

            if (q == ngx_queue_sentinel(&pc->ops)) {
                break;
            }

            pc->reading = ngx_queue_data(q, ngx_platform_pg_op_t, queue);
            continue;
        }

        res = PQgetResult(pc->conn);

        if (op->slot < op->nslots) {
            if (res == NULL) {
                /* this command's results are all in */
                op->slot++;
                continue;
            }

            if (ngx_platform_pg_result(pc, op, res) != NGX_OK) {
                return;
            }

            continue;
        }

        /* the sync point */

        if (res == NULL) {
            break;
        }

        if (PQresultStatus(res) != PGRES_PIPELINE_SYNC) {
            PQclear(res);
            ngx_platform_pg_fail(pc, NGX_PLATFORM_UNAVAILABLE,
                                 "unexpected result in a pipeline");
            return;
        }

        PQclear(res);

        /* the handlers may send on this connection; that never closes it */

        ngx_platform_pg_segment_done(pc, op);

        if (pc->broken) {
            ngx_platform_pg_fail(pc, NGX_PLATFORM_UNAVAILABLE,
                                 PQerrorMessage(pc->conn));
            return;
        }
    }

    ngx_platform_pg_settle(pc);
}


/*
 * The sync point after last is read: the operations of its segment, the
 * head to last, leave the connection. An error in a segment of reads
 * aborted the reads after it, which did not fail: each is sent again
 * with a sync point of its own, so that a failing statement fails only
 * its own caller. The others get their results.
 */

static void
ngx_platform_pg_segment_done(ngx_platform_pg_conn_t *pc,
    ngx_platform_pg_op_t *last)
{
    ngx_queue_t            done, *q, *next;
    ngx_platform_pg_op_t  *op;

    pc->reading = NULL;

    ngx_queue_init(&done);

    do {
        q = ngx_queue_head(&pc->ops);
        ngx_queue_remove(q);
        pc->nops--;

        ngx_queue_insert_tail(&done, q);

        op = ngx_queue_data(q, ngx_platform_pg_op_t, queue);
        op->conn = NULL;

    } while (op != last);

    for (q = ngx_queue_head(&done);
         q != ngx_queue_sentinel(&done);
         q = next)
    {
        next = ngx_queue_next(q);
        op = ngx_queue_data(q, ngx_platform_pg_op_t, queue);

        if (!op->aborted || op->rc != NGX_OK) {
            continue;
        }

        ngx_queue_remove(q);

        if (op->cleanup == NULL) {
            /* nobody waits for it */
            ngx_platform_pg_op_free(op);
            continue;
        }

        ngx_log_debug1(NGX_LOG_DEBUG_HTTP, pc->pool->log, 0,
                       "platform pg statement \"%s\" sent again alone",
                       op->calls[op->ncalls - 1].stmt->name);

        ngx_platform_pg_op_clear(op);
        op->alone = 1;

        ngx_platform_pg_send(pc, op);
    }

    while (!ngx_queue_empty(&done)) {
        q = ngx_queue_head(&done);
        ngx_queue_remove(q);

        op = ngx_queue_data(q, ngx_platform_pg_op_t, queue);

        ngx_platform_metrics_observe(pc->pool == ngx_platform_pg_replica
                                     ? NGX_PLATFORM_H_PG_READ
                                     : NGX_PLATFORM_H_PG_PRIMARY,
                                     ngx_current_msec - op->sent);

        ngx_platform_pg_complete(op);
    }
}


/* one result of the head operation's current command */

static ngx_int_t
ngx_platform_pg_result(ngx_platform_pg_conn_t *pc, ngx_platform_pg_op_t *op,
    PGresult *res)
{
    ExecStatusType           status;
    ngx_platform_pg_slot_t  *slot;
    ngx_platform_pg_call_t  *call;

    slot = &op->slots[op->slot];
    call = &op->calls[slot->step];

    status = PQresultStatus(res);

    if (status == PGRES_PIPELINE_ABORTED) {
        if (slot->prepare) {
            ngx_platform_pg_forget_prepared(pc, call->stmt);
        }

        op->aborted = 1;

        PQclear(res);
        return NGX_OK;
    }

    if (status == PGRES_PIPELINE_SYNC) {
        PQclear(res);
        ngx_platform_pg_fail(pc, NGX_PLATFORM_UNAVAILABLE,
                             "unexpected sync in a pipeline");
        return NGX_ERROR;
    }

    if (status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK) {

        if (slot->prepare || op->results[slot->step]) {
            /* a prepare's result; or a second one, which has no use */
            PQclear(res);
            return NGX_OK;
        }

        op->results[slot->step] = res;
        return NGX_OK;
    }

    if (slot->prepare) {
        ngx_platform_pg_forget_prepared(pc, call->stmt);
    }

    /* the first error; the commands after it are aborted */

    if (op->rc != NGX_OK) {
        PQclear(res);
        return NGX_OK;
    }

    op->rc = ngx_platform_pg_result_rc(pc, op, call->stmt, res);
    op->failed = slot->step;

    if (op->results[slot->step]) {
        PQclear(op->results[slot->step]);
    }

    op->results[slot->step] = res;

    return NGX_OK;
}


/* NGX_OK, or the error a failed statement's result stands for, logged */

static ngx_int_t
ngx_platform_pg_result_rc(ngx_platform_pg_conn_t *pc,
    ngx_platform_pg_op_t *op, ngx_platform_pg_stmt_t *stmt, PGresult *res)
{
    char        *message, *state, *hint;
    ngx_uint_t   level, conflict;

    state = ngx_platform_pg_sqlstate(res);

    if (ngx_strcmp(state, "57014") == 0) {
        /* statement_timeout */
        ngx_platform_metric_inc(NGX_PLATFORM_M_PG_TIMEOUTS);
        return NGX_PLATFORM_TIMEOUT;
    }

    ngx_platform_metric_inc(NGX_PLATFORM_M_PG_ERRORS);

    /*
     * a constraint a client's change ran into (a conflict, a reference)
     * or a race between clients (retried) is their outcome, which a flood
     * repeats: info, and limited; any other failure is a fault to see
     */

    conflict = (ngx_strncmp(state, "23", 2) == 0
                || ngx_strncmp(state, "40", 2) == 0
                || ngx_strcmp(state, "55P03") == 0);
    level = conflict ? NGX_LOG_INFO : NGX_LOG_ERR;

    message = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);

    /*
     * a prepared statement missing, or there already: the server session
     * changed under the connection, as a pooler in transaction mode does
     */

    hint = "";

    if (pc->pool->conf->pg_prepare
        && (ngx_strcmp(state, "26000") == 0
            || ngx_strcmp(state, "42P05") == 0))
    {
        hint = " (the server session is not the one that prepared the "
               "statements: behind a pooler in transaction mode, set "
               "\"platform_pg_prepare off\")";
    }

    if (!conflict
        || ngx_platform_log_allowed(NGX_PLATFORM_LOG_PG_CONFLICT, level,
                                    ngx_platform_pg_log(pc->pool, op)))
    {
        ngx_log_error(level, ngx_platform_pg_log(pc->pool, op), 0,
                      "platform: statement \"%s\" failed: SQLSTATE %s: %s%s",
                      stmt->name, state, message ? message : "no message",
                      hint);
    }

    return NGX_ERROR;
}


/* the sync point is read: the handler gets the results; op is freed */

static void
ngx_platform_pg_complete(ngx_platform_pg_op_t *op)
{
    PGresult  *res;

    if (op->rc == NGX_PLATFORM_TIMEOUT) {
        ngx_platform_pg_op_clear(op);
        op->rc = NGX_PLATFORM_TIMEOUT;
    }

    if (op->rc == NGX_ERROR && op->failed < op->first) {
        /* the scope failed: its error stands for the first statement's */
        if (op->results[op->first]) {
            PQclear(op->results[op->first]);
        }

        op->results[op->first] = op->results[op->failed];
        op->results[op->failed] = NULL;
        op->failed = op->first;
    }

    if (op->cleanup) {
        res = op->results[op->first];

        if (op->rc == NGX_OK && res == NULL) {
            /* a statement always has a result; never seen */
            op->rc = NGX_ERROR;
        }

        op->handler(op->data, op, res, op->rc);
    }

    ngx_platform_pg_op_free(op);
}


/*
 * After operations left pc: callers waiting for room get it; an idle
 * connection is kept for the next ones, unless it is past its uses, not
 * healthy, or the worker exits.
 */

static void
ngx_platform_pg_settle(ngx_platform_pg_conn_t *pc)
{
    ngx_queue_t             *q, *next;
    ngx_platform_pg_op_t    *op;
    ngx_platform_pg_pool_t  *pool;

    pool = pc->pool;

    for (q = ngx_queue_head(&pool->waiting);
         q != ngx_queue_sentinel(&pool->waiting)
         && !pc->broken
         && pc->nops < pool->conf->pg_pipeline_depth
         && (pool->conf->pg_max_uses == 0
             || pc->uses < pool->conf->pg_max_uses);
         q = next)
    {
        next = ngx_queue_next(q);
        op = ngx_queue_data(q, ngx_platform_pg_op_t, queue);

        if (!ngx_platform_pg_may_run(pool, op)) {
            continue;
        }

        ngx_platform_pg_unqueue(op);
        ngx_platform_pg_send(pc, op);
    }

    if (pc->nops) {
        ngx_platform_pg_arm(pc);
        return;
    }

    if (pc->broken
        || PQstatus(pc->conn) != CONNECTION_OK
        || PQtransactionStatus(pc->conn) != PQTRANS_IDLE
        || (pool->conf->pg_max_uses && pc->uses >= pool->conf->pg_max_uses)
        || ngx_exiting || ngx_quit || ngx_terminate)
    {
        ngx_platform_pg_close(pc);
        ngx_platform_pg_serve_waiting(pool);
        return;
    }

    ngx_platform_pg_arm(pc);
}


/*
 * The timer: the oldest operation's deadline while any is in flight (it
 * holds a graceful exit), else the idle timeout (it does not).
 */

static void
ngx_platform_pg_arm(ngx_platform_pg_conn_t *pc)
{
    ngx_msec_t             timeout, age;
    ngx_platform_pg_op_t  *op;

    if (pc->nops == 0) {
        pc->timer.cancelable = 1;
        ngx_add_timer(&pc->timer, pc->pool->conf->pg_idle_timeout);
        return;
    }

    op = ngx_queue_data(ngx_queue_head(&pc->ops), ngx_platform_pg_op_t,
                        queue);

    timeout = pc->pool->conf->pg_query_timeout;
    age = ngx_current_msec - op->sent;

    pc->timer.cancelable = 0;
    ngx_add_timer(&pc->timer, age < timeout ? timeout - age : 1);
}


/*
 * The connection is lost or unusable: it is closed, and every operation
 * it carried fails, or, for the read pool's reads, moves to the primary.
 */

static void
ngx_platform_pg_fail(ngx_platform_pg_conn_t *pc, ngx_int_t rc, char *reason)
{
    ngx_queue_t              ops, *q;
    ngx_platform_pg_op_t    *op;
    ngx_platform_pg_pool_t  *pool;

    pool = pc->pool;

    op = NULL;
    if (pc->nops) {
        op = ngx_queue_data(ngx_queue_head(&pc->ops), ngx_platform_pg_op_t,
                            queue);
    }

    if (reason) {
        ngx_log_error(NGX_LOG_ERR, ngx_platform_pg_log(pool, op), 0,
                      "platform: PostgreSQL %sconnection lost: %*s%s",
                      pool == ngx_platform_pg_replica ? "read pool " : "",
                      ngx_platform_pg_line(reason), reason,
                      op ? "" : " (idle)");
    }

    ngx_queue_init(&ops);

    if (pc->nops) {
        ngx_queue_add(&ops, &pc->ops);
        ngx_queue_init(&pc->ops);
        pc->nops = 0;
    }

    ngx_platform_pg_close(pc);

    while (!ngx_queue_empty(&ops)) {
        q = ngx_queue_head(&ops);
        ngx_queue_remove(q);

        op = ngx_queue_data(q, ngx_platform_pg_op_t, queue);
        op->conn = NULL;

        ngx_platform_pg_op_lost(op, rc);
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

    if (pc->flush.posted) {
        ngx_delete_posted_event(&pc->flush);
    }

    ngx_platform_pg_unwrap_socket(pc);

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
    ngx_queue_t           *q, *next;
    ngx_platform_pg_op_t  *op;

    for (q = ngx_queue_head(&pool->waiting);
         q != ngx_queue_sentinel(&pool->waiting)
         && pool->nconns < pool->conf->pg_pool_size;
         q = next)
    {
        next = ngx_queue_next(q);
        op = ngx_queue_data(q, ngx_platform_pg_op_t, queue);

        if (!ngx_platform_pg_may_run(pool, op)) {
            continue;
        }

        ngx_platform_pg_unqueue(op);

        if (ngx_current_msec < pool->retry_at
            || ngx_platform_pg_connect(pool, op) != NGX_OK)
        {
            /* PostgreSQL is down: the waiters are told now */
            ngx_platform_pg_op_lost(op, NGX_PLATFORM_UNAVAILABLE);
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


/* a prepare failed or was aborted: the next use prepares again */

static void
ngx_platform_pg_forget_prepared(ngx_platform_pg_conn_t *pc,
    ngx_platform_pg_stmt_t *stmt)
{
    ngx_uint_t  i;

    for (i = 0; i < pc->nprepared; i++) {
        if (pc->prepared[i] == stmt) {
            pc->prepared[i] = pc->prepared[--pc->nprepared];
            return;
        }
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
ngx_platform_pg_log(ngx_platform_pg_pool_t *pool, ngx_platform_pg_op_t *op)
{
    if (op && op->cleanup && op->log) {
        return op->log;
    }

    return pool->log;
}


ngx_int_t
ngx_platform_pg_init_process(ngx_cycle_t *cycle,
    ngx_platform_main_conf_t *pmcf)
{
    u_char  *p, *text;

    ngx_platform_pg_timer_conn.fd = (ngx_socket_t) -1;

    ngx_str_null(&ngx_platform_pg_lock_timeout);

    if (pmcf->pg_lock_timeout) {
        p = ngx_sprintf(ngx_platform_pg_lock_timeout_text, "%Mms",
                        pmcf->pg_lock_timeout);

        ngx_platform_pg_lock_timeout.data = ngx_platform_pg_lock_timeout_text;
        ngx_platform_pg_lock_timeout.len = p - ngx_platform_pg_lock_timeout_text;
    }

    ngx_str_null(&ngx_platform_pg_statement_timeout);

    if (!pmcf->pg_prepare) {
        text = ngx_platform_pg_statement_timeout_text;
        p = ngx_sprintf(text, "%Mms", pmcf->pg_query_timeout);

        ngx_platform_pg_statement_timeout.data = text;
        ngx_platform_pg_statement_timeout.len = p - text;
    }

    /* parsed, and checked, when the configuration was read */

    if (pmcf->pg_options) {
        ngx_platform_pg_primary = ngx_platform_pg_pool_create(cycle, pmcf,
                                                  pmcf->pg_options, "primary");
        if (ngx_platform_pg_primary == NULL) {
            return NGX_ERROR;
        }
    }

    if (pmcf->pg_options && pmcf->pg_read_options) {
        ngx_platform_pg_replica = ngx_platform_pg_pool_create(cycle, pmcf,
                                                pmcf->pg_read_options, "read");
        if (ngx_platform_pg_replica == NULL) {
            return NGX_ERROR;
        }

        if (ngx_platform_pg_pool_rotate(ngx_platform_pg_replica) != NGX_OK) {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


static ngx_platform_pg_pool_t *
ngx_platform_pg_pool_create(ngx_cycle_t *cycle,
    ngx_platform_main_conf_t *pmcf, ngx_platform_pg_options_t *options,
    char *name)
{
    u_char                  *p;
    ngx_uint_t               n, i, has_options, has_appname;
    PQconninfoOption        *opt;
    ngx_platform_pg_pool_t  *pool;

    static u_char            statement_timeout[128];

    pool = ngx_calloc(sizeof(ngx_platform_pg_pool_t), cycle->log);
    if (pool == NULL) {
        return NULL;
    }

    ngx_queue_init(&pool->conns);
    ngx_queue_init(&pool->waiting);

    ngx_rbtree_init(&pool->owners, &pool->owners_sentinel,
                    ngx_str_rbtree_insert_value);

    if (pmcf->pg_tenant_share < 100) {
        pool->slot_share = ngx_platform_pg_share(pmcf,
                               pmcf->pg_pool_size * pmcf->pg_pipeline_depth);
        pool->queue_share = ngx_platform_pg_share(pmcf, pmcf->pg_queue_size);
    }

    n = 0;
    for (opt = options; opt->keyword; opt++) {
        n++;
    }

    pool->keywords = ngx_calloc((n + 3) * sizeof(char *), cycle->log);
    pool->values = ngx_calloc((n + 3) * sizeof(char *), cycle->log);

    if (pool->keywords == NULL || pool->values == NULL) {
        ngx_platform_pg_pool_destroy(pool);
        return NULL;
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
     * Without prepared statements these settings travel with each
     * operation instead: PgBouncer refuses "options" at connect, and
     * would not keep a session's settings for the module anyway.
     */

    if (!has_options && pmcf->pg_prepare) {
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
    pool->name = name;

    return pool;
}


/*
 * The operations an owner may hold of a capacity (the slots of every
 * connection the pool may open, or its queue): one at least, so that a
 * small pool still serves everyone.
 */

static ngx_uint_t
ngx_platform_pg_share(ngx_platform_main_conf_t *pmcf, ngx_uint_t capacity)
{
    return ngx_max(capacity * pmcf->pg_tenant_share / 100, 1);
}


/*
 * The read pool's connections take the hosts of a multi-host conninfo in
 * turn, each worker from its own first one: libpq tries the hosts in the
 * order given, so otherwise every connection would land on the first
 * server that suits target_session_attrs, and the other replicas would
 * serve no reads. A conninfo with load_balance_hosts (libpq 16) leaves
 * the choice to libpq.
 */

static ngx_int_t
ngx_platform_pg_pool_rotate(ngx_platform_pg_pool_t *pool)
{
    u_char       *p;
    size_t        size;
    ngx_uint_t    i, j, k, n, nvalues;
    const char   *list, *entry, **values;

    n = 0;

    for (i = 0; pool->keywords[i]; i++) {
        if (ngx_strcmp(pool->keywords[i], "load_balance_hosts") == 0) {
            return NGX_OK;
        }

        if (ngx_strcmp(pool->keywords[i], "host") == 0
            || ngx_strcmp(pool->keywords[i], "hostaddr") == 0)
        {
            n = ngx_max(n, ngx_platform_pg_list_count(pool->values[i]));
        }
    }

    nvalues = i;

    if (n < 2) {
        return NGX_OK;
    }

    pool->rotations = ngx_calloc(n * sizeof(const char **), pool->log);
    if (pool->rotations == NULL) {
        return NGX_ERROR;
    }

    size = (nvalues + 1) * sizeof(const char *);

    for (i = 0; i < nvalues; i++) {
        size += ngx_strlen(pool->values[i]) + 1;
    }

    for (k = 0; k < n; k++) {
        values = ngx_alloc(size, pool->log);
        if (values == NULL) {
            return NGX_ERROR;
        }

        pool->rotations[k] = values;
        pool->nrotations = k + 1;

        p = (u_char *) &values[nvalues + 1];

        for (i = 0; i < nvalues; i++) {
            list = pool->values[i];
            values[i] = list;

            /* a single port applies to every host: it stays as it is */

            if (k == 0
                || !ngx_platform_pg_list_rotated(pool->keywords[i])
                || ngx_platform_pg_list_count(list) != n)
            {
                continue;
            }

            /* entries k .. n - 1, then 0 .. k - 1 */

            entry = list;

            for (j = 0; j < k; j++) {
                entry = strchr(entry, ',') + 1;
            }

            values[i] = (const char *) p;
            p = ngx_cpymem(p, entry, ngx_strlen(entry));
            *p++ = ',';
            p = ngx_cpymem(p, list, entry - list - 1);
            *p++ = '\0';
        }

        values[nvalues] = NULL;
    }

    pool->next_rotation = ngx_worker;

    return NGX_OK;
}


static ngx_uint_t
ngx_platform_pg_list_rotated(const char *keyword)
{
    return ngx_strcmp(keyword, "host") == 0
           || ngx_strcmp(keyword, "hostaddr") == 0
           || ngx_strcmp(keyword, "port") == 0;
}


static ngx_uint_t
ngx_platform_pg_list_count(const char *list)
{
    ngx_uint_t  n;

    for (n = 1; *list; list++) {
        if (*list == ',') {
            n++;
        }
    }

    return n;
}


void
ngx_platform_pg_exit_process(ngx_cycle_t *cycle,
    ngx_platform_main_conf_t *pmcf)
{
    if (ngx_platform_pg_replica) {
        ngx_platform_pg_pool_destroy(ngx_platform_pg_replica);
        ngx_platform_pg_replica = NULL;
    }

    if (ngx_platform_pg_primary) {
        ngx_platform_pg_pool_destroy(ngx_platform_pg_primary);
        ngx_platform_pg_primary = NULL;
    }
}


/* the worker exits: what is left is dropped without a word */

static void
ngx_platform_pg_pool_destroy(ngx_platform_pg_pool_t *pool)
{
    ngx_uint_t               i;
    ngx_queue_t             *q;
    ngx_platform_pg_op_t    *op;
    ngx_platform_pg_conn_t  *pc;

    while (!ngx_queue_empty(&pool->waiting)) {
        q = ngx_queue_head(&pool->waiting);
        op = ngx_queue_data(q, ngx_platform_pg_op_t, queue);
        ngx_platform_pg_unqueue(op);
        ngx_platform_pg_op_free(op);
    }

    while (!ngx_queue_empty(&pool->conns)) {
        q = ngx_queue_head(&pool->conns);
        pc = ngx_queue_data(q, ngx_platform_pg_conn_t, queue);

        while (!ngx_queue_empty(&pc->ops)) {
            q = ngx_queue_head(&pc->ops);
            ngx_queue_remove(q);
            op = ngx_queue_data(q, ngx_platform_pg_op_t, queue);
            op->conn = NULL;
            ngx_platform_pg_op_free(op);
        }

        pc->nops = 0;

        ngx_platform_pg_close(pc);
    }

    for (i = 0; i < pool->nrotations; i++) {
        ngx_free(pool->rotations[i]);
    }

    if (pool->rotations) {
        ngx_free(pool->rotations);
    }

    ngx_free(pool->keywords);
    ngx_free(pool->values);
    ngx_free(pool);
}
