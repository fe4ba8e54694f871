
/*
 * ngx_platform: fleet-wide rate limits (issue 23, section 1).
 *
 * platform_rate_limit limits requests per tenant, per credential (an API
 * key's id, a token's sub) or per client address (IPv4, or the /64 of an
 * IPv6 address); platform_identity_bureau_rate limits a tenant's paid
 * bureau calls. Each limit is a GCRA: one key in Redis holds the
 * theoretical arrival time, one script reads and moves it, with Redis's
 * TIME as the clock of the whole fleet. The key's hash tag is the limited
 * identity, so the same declared limit shares its budget across the
 * locations and nginx instances that declare it, and the keys of one
 * identity land on one Redis Cluster slot.
 *
 * One script call a request and a key costs the worker a command to
 * format, send and parse, and Redis a script run, even at rates never
 * reached. So the checks of one key made in one pass of the event loop
 * wait for its end (a posted event) and are sent as one call counting
 * them all: GCRA takes n requests at once as it would take them one by
 * one, the first k admitted. The batches live outside the requests, which
 * may go away while their check waits: a request's pool cleanup takes
 * its checks out, and the reply is dealt to the checks still there.
 *
 * Far from the limit a request need not wait for its round trip: each
 * reply leaves the worker a hint, the key's arrival time as Redis counted
 * it. A check that finds a hint at most a second old, with room for the
 * margin beyond what the worker admitted since, is admitted at once: it
 * still joins its batch and is counted in Redis, but as a number only,
 * so that nothing of the request stays in the batch. The margin bounds
 * both: at most the margin admitted so by a worker awaits its reply, so
 * a fleet overshoots a limit by at most workers x nodes x margin. Near
 * the limit, and for every refusal, the request waits for Redis.
 *
 * When Redis cannot answer (not connected, timed out, an error), each
 * worker decides alone with the rate divided by worker_processes. The
 * hints and this fallback share a table of a fixed number of identities
 * (the least recently used forgotten); the outage is logged once, its
 * decisions counted.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_event.h>
#include <ngx_http.h>
#include <ngx_sha1.h>

#include "ngx_platform.h"
#include "ngx_platform_redis.h"
#include "ngx_platform_rate_limit.h"


/* an identity longer than this is keyed by its SHA-1 */
#define NGX_PLATFORM_RL_ID_MAX      64

/* identities each worker's fallback remembers */
#define NGX_PLATFORM_RL_LOCAL_MAX   4096

/* checks of one key in one script call; more start another call */
#define NGX_PLATFORM_RL_BATCH_MAX   64

/* a hint is trusted this long after its reply, in milliseconds */
#define NGX_PLATFORM_RL_HINT_AGE    1000

/*
 * a batch of checks admitted from the hint only is sent this many
 * milliseconds after its first, unless a check that waits joins it
 */
#define NGX_PLATFORM_RL_LINGER      5

/* the fast path's margin: at least this many requests, and burst+1 / 4 */
#define NGX_PLATFORM_RL_MARGIN_MIN  8

/* rates: at most a million requests per period, one microsecond apart */
#define NGX_PLATFORM_RL_RATE_MAX    1000000
#define NGX_PLATFORM_RL_BURST_MAX   1000000


typedef struct ngx_platform_rl_state_s  ngx_platform_rl_state_t;
typedef struct ngx_platform_rl_batch_s  ngx_platform_rl_batch_t;


/* one limit checked for one identity */

typedef struct {
    ngx_platform_rate_limit_t  *limit;
    ngx_platform_rl_state_t    *state;
    ngx_str_t                   key;
    ngx_platform_rl_batch_t    *batch;      /* while it waits in one */
    ngx_uint_t                  slot;       /* its place in the batch */
    uint64_t                    remaining;
    uint64_t                    retry;      /* ms until one more is allowed */
    uint64_t                    reset;      /* ms until the budget is whole */
    unsigned                    refused:1;
} ngx_platform_rl_check_t;


/* the limits of one stage of a request */

struct ngx_platform_rl_state_s {
    ngx_http_request_t         *request;
    ngx_platform_resume_pt      resume;
    ngx_uint_t                  n;
    ngx_uint_t                  pending;
    ngx_platform_rl_check_t     checks[NGX_PLATFORM_RL_KINDS];
};


/*
 * The checks of one key of one pass of the event loop, in arrival order;
 * a slot is NULL once its request went away. It is allocated in its own
 * pool, which the command is sent with, and freed when all are decided.
 */

struct ngx_platform_rl_batch_s {
    ngx_str_node_t              sn;         /* by key while it takes more */
    ngx_queue_t                 queue;      /* to send, or sent */
    ngx_pool_t                 *pool;
    ngx_platform_rate_limit_t  *limit;
    ngx_uint_t                  n;
    ngx_uint_t                  fast;       /* admitted from the hint */
    ngx_uint_t                  admitted;   /* the first of fast + n */
    ngx_msec_t                  start;
    uint64_t                    wait;       /* us to the arrival time */
    unsigned                    counted:1;  /* else decided here */
    u_char                      digest[20]; /* the key's, for its hint */
    ngx_platform_rl_check_t    *checks[NGX_PLATFORM_RL_BATCH_MAX];
};


/*
 * An identity of the worker: its key's SHA-1, the fallback's arrival
 * time, and the hint: the arrival time Redis last replied (on this
 * worker's clock) and when, and the checks admitted from the hint since
 * whose reply has not come
 */

typedef struct {
    ngx_rbtree_node_t           node;
    ngx_queue_t                 queue;
    u_char                      digest[20];
    uint64_t                    tat;        /* microseconds */
    uint64_t                    hint_tat;   /* microseconds */
    ngx_msec_t                  hint_time;
    ngx_uint_t                  fast;
    unsigned                    hint:1;
} ngx_platform_rl_local_t;


static ngx_int_t ngx_platform_rl_start(ngx_http_request_t *r,
    ngx_platform_rl_state_t *st);
static ngx_int_t ngx_platform_rl_id(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx, ngx_uint_t kind, ngx_str_t *id);
static ngx_int_t ngx_platform_rl_key(ngx_http_request_t *r,
    ngx_platform_rl_check_t *check, ngx_str_t *id);
static ngx_int_t ngx_platform_rl_join(ngx_platform_rl_check_t *check);
static ngx_uint_t ngx_platform_rl_fast(ngx_platform_rl_check_t *check,
    ngx_platform_rl_local_t *e);
static ngx_platform_rl_batch_t *ngx_platform_rl_batch(
    ngx_platform_rl_check_t *check, uint32_t hash, u_char *digest);
static void ngx_platform_rl_hint(ngx_platform_rl_batch_t *b);
static void ngx_platform_rl_flush_handler(ngx_event_t *ev);
static void ngx_platform_rl_send(ngx_platform_rl_batch_t *b);
static void ngx_platform_rl_compact(ngx_platform_rl_batch_t *b);
static void ngx_platform_rl_done(void *data, redisReply *reply,
    ngx_int_t rc);
static ngx_int_t ngx_platform_rl_reply(ngx_platform_rl_batch_t *b,
    redisReply *reply);
static void ngx_platform_rl_deal(ngx_platform_rl_batch_t *b);
static void ngx_platform_rl_set(ngx_platform_rl_check_t *check,
    ngx_uint_t i, ngx_uint_t k, uint64_t wait);
static void ngx_platform_rl_detach(void *data);
static void ngx_platform_rl_local(ngx_log_t *log,
    ngx_platform_rl_check_t *check);
static ngx_platform_rl_local_t *ngx_platform_rl_local_entry(u_char *digest);
static void ngx_platform_rl_rbtree_insert(ngx_rbtree_node_t *temp,
    ngx_rbtree_node_t *node, ngx_rbtree_node_t *sentinel);
static ngx_int_t ngx_platform_rl_decide(ngx_http_request_t *r,
    ngx_platform_rl_state_t *st);
static ngx_int_t ngx_platform_rl_headers(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx, ngx_platform_rl_state_t *st);
static char *ngx_platform_rl_parse(ngx_conf_t *cf, ngx_str_t *value,
    ngx_uint_t n, ngx_uint_t kind, ngx_platform_rate_limit_t *limit);


static ngx_str_t  ngx_platform_rl_kinds[NGX_PLATFORM_RL_KINDS] = {
    ngx_string("tenant"),
    ngx_string("credential"),
    ngx_string("address"),
    ngx_string("bureau")
};


/*
 * GCRA for n requests in one round trip. KEYS[1] the identity's key,
 * ARGV[1] the interval in microseconds, ARGV[2] the burst, ARGV[3] n.
 * The key holds the theoretical arrival time and expires when the budget
 * is whole again. k of the n fit, 0 to n: the arrival time moves k
 * intervals. Returns {k, microseconds from now to the arrival time before
 * them}, from which each request's outcome follows (ngx_platform_rl_set).
 */

static ngx_platform_redis_script_t  ngx_platform_rl_script = {
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000000 + tonumber(t[2])\n"
    "local interval = tonumber(ARGV[1])\n"
    "local budget = interval * (tonumber(ARGV[2]) + 1)\n"
    "local tat = tonumber(redis.call('GET', KEYS[1])) or now\n"
    "if tat < now then\n"
    "  tat = now\n"
    "end\n"
    "local k = math.floor((budget - tat + now) / interval)\n"
    "k = math.max(0, math.min(k, tonumber(ARGV[3])))\n"
    "if k > 0 then\n"
    "  local next = tat + k * interval\n"
    "  redis.call('SET', KEYS[1], string.format('%.0f', next),\n"
    "             'PX', math.ceil((next - now) / 1000))\n"
    "end\n"
    "return {k, tat - now}\n",
    "", 0
};


/* the identities' table (hints, fallback), allocated at its first use */

static ngx_rbtree_t              ngx_platform_rl_tree;
static ngx_rbtree_node_t         ngx_platform_rl_sentinel;
static ngx_queue_t               ngx_platform_rl_lru;
static ngx_queue_t               ngx_platform_rl_free;
static ngx_platform_rl_local_t  *ngx_platform_rl_entries;

static ngx_uint_t                ngx_platform_rl_workers = 1;

/* Redis failed to answer and has not answered since: logged once */
static ngx_uint_t                ngx_platform_rl_outage;

/*
 * The batches of this pass of the event loop by key, those that still
 * take checks; all of them to send at its end; those sent
 */
static ngx_rbtree_t              ngx_platform_rl_open;
static ngx_rbtree_node_t         ngx_platform_rl_open_sentinel;
static ngx_queue_t               ngx_platform_rl_pending;
static ngx_queue_t               ngx_platform_rl_sent;
static ngx_event_t               ngx_platform_rl_flush;
static ngx_connection_t          ngx_platform_rl_dummy;


ngx_int_t
ngx_platform_rate_limit(ngx_http_request_t *r, ngx_platform_ctx_t *ctx,
    ngx_uint_t stage, ngx_platform_resume_pt resume)
{
    ngx_str_t                   id;
    ngx_uint_t                  i, anonymous;
    ngx_platform_rl_state_t    *st;
    ngx_platform_rl_check_t    *check;
    ngx_platform_loc_conf_t    *plcf;
    ngx_platform_rate_limit_t  *limits;

    plcf = ngx_http_get_module_loc_conf(r, ngx_platform_module);

    if (plcf->rate_limits == NULL) {
        return NGX_OK;
    }

    st = NULL;
    limits = plcf->rate_limits->elts;

    for (i = 0; i < plcf->rate_limits->nelts; i++) {

        anonymous = (limits[i].kind == NGX_PLATFORM_RL_ADDRESS);

        if (anonymous != (stage == NGX_PLATFORM_RL_ANONYMOUS)) {
            continue;
        }

        if (ngx_platform_rl_id(r, ctx, limits[i].kind, &id) != NGX_OK) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        if (id.len == 0) {
            /* an anonymous request has no tenant to limit */
            continue;
        }

        if (st == NULL) {
            st = ngx_pcalloc(r->pool, sizeof(ngx_platform_rl_state_t));
            if (st == NULL) {
                return NGX_HTTP_INTERNAL_SERVER_ERROR;
            }
        }

        check = &st->checks[st->n++];
        check->limit = &limits[i];

        if (ngx_platform_rl_key(r, check, &id) != NGX_OK) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
    }

    if (st == NULL) {
        return NGX_OK;
    }

    st->resume = resume;

    return ngx_platform_rl_start(r, st);
}


ngx_int_t
ngx_platform_rate_limit_one(ngx_http_request_t *r,
    ngx_platform_rate_limit_t *limit, ngx_str_t *id,
    ngx_platform_resume_pt resume)
{
    ngx_platform_rl_state_t  *st;

    st = ngx_pcalloc(r->pool, sizeof(ngx_platform_rl_state_t));
    if (st == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    st->resume = resume;
    st->n = 1;
    st->checks[0].limit = limit;

    if (ngx_platform_rl_key(r, &st->checks[0], id) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_platform_rl_start(r, st);
}


/* every check sent together; those Redis cannot take decided here */

static ngx_int_t
ngx_platform_rl_start(ngx_http_request_t *r, ngx_platform_rl_state_t *st)
{
    ngx_int_t            rc;
    ngx_uint_t           i;
    ngx_pool_cleanup_t  *cln;

    st->request = r;

    for (i = 0; i < st->n; i++) {
        st->checks[i].state = st;

        rc = ngx_platform_rl_join(&st->checks[i]);

        if (rc == NGX_DONE) {
            st->pending++;
            continue;
        }

        if (rc == NGX_OK) {
            /* admitted from the hint */
            continue;
        }

        if (rc == NGX_ERROR) {
            ngx_platform_rl_detach(st);
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        ngx_platform_rl_local(r->connection->log, &st->checks[i]);
    }

    if (st->pending == 0) {
        return ngx_platform_rl_decide(r, st);
    }

    /* the request may go away while its checks wait */

    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL) {
        ngx_platform_rl_detach(st);
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    cln->handler = ngx_platform_rl_detach;
    cln->data = st;

    r->main->count++;

    return NGX_DONE;
}


/*
 * Who the limit's kind counts: the tenant after authentication, the API
 * key's id or else the token's sub, the client's address; empty when the
 * request has none.
 */

static ngx_int_t
ngx_platform_rl_id(ngx_http_request_t *r, ngx_platform_ctx_t *ctx,
    ngx_uint_t kind, ngx_str_t *id)
{
    ngx_platform_identity_t  *ident;

    ident = &ctx->identity;

    switch (kind) {

    case NGX_PLATFORM_RL_ADDRESS:
        return ngx_platform_client_address(r, id);

    case NGX_PLATFORM_RL_CREDENTIAL:
        if (ident->apikey) {
            *id = ident->key_id;

        } else if (ident->bearer) {
            *id = ident->subject;

        } else {
            ngx_str_null(id);
        }

        return NGX_OK;

    default: /* NGX_PLATFORM_RL_TENANT */
        *id = ident->tenant;
        return NGX_OK;
    }
}


/* platform:rl:{<kind>:<id>}:<interval>:<burst>, bounded, binary-safe */

static ngx_int_t
ngx_platform_rl_key(ngx_http_request_t *r, ngx_platform_rl_check_t *check,
    ngx_str_t *id)
{
    u_char      *p;
    u_char       digest[20];
    ngx_str_t   *kind;
    ngx_sha1_t   sha1;

    kind = &ngx_platform_rl_kinds[check->limit->kind];

    check->key.data = ngx_pnalloc(r->pool,
                                  sizeof("platform:rl:{:#") - 1 + kind->len
                                  + ngx_max(id->len, 40)
                                  + check->limit->suffix.len);
    if (check->key.data == NULL) {
        return NGX_ERROR;
    }

    p = ngx_cpymem(check->key.data, "platform:rl:{", sizeof("platform:rl:{") - 1);
    p = ngx_cpymem(p, kind->data, kind->len);
    *p++ = ':';

    if (id->len <= NGX_PLATFORM_RL_ID_MAX) {
        p = ngx_cpymem(p, id->data, id->len);

    } else {
        /* "#" and hex: no identity short enough to be kept is like it */
        ngx_sha1_init(&sha1);
        ngx_sha1_update(&sha1, id->data, id->len);
        ngx_sha1_final(digest, &sha1);

        *p++ = '#';
        p = ngx_hex_dump(p, digest, 20);
    }

    p = ngx_cpymem(p, check->limit->suffix.data, check->limit->suffix.len);

    check->key.len = p - check->key.data;

    return NGX_OK;
}


/*
 * The check joins its key's batch of this pass of the event loop: it
 * waits there (NGX_DONE), or is admitted from the hint and counted in
 * the batch as a number (NGX_OK)
 */

static ngx_int_t
ngx_platform_rl_join(ngx_platform_rl_check_t *check)
{
    u_char                    digest[20];
    uint32_t                  hash;
    ngx_uint_t                fast;
    ngx_sha1_t                sha1;
    ngx_platform_rl_local_t  *e;
    ngx_platform_rl_batch_t  *b;

    if (!ngx_platform_redis_key_connected(check->key.data, check->key.len)) {
        ngx_platform_metric_inc(NGX_PLATFORM_M_REDIS_ERRORS);
        return NGX_PLATFORM_UNAVAILABLE;
    }

    ngx_sha1_init(&sha1);
    ngx_sha1_update(&sha1, check->key.data, check->key.len);
    ngx_sha1_final(digest, &sha1);

    e = ngx_platform_rl_local_entry(digest);

    fast = (e != NULL && ngx_platform_rl_fast(check, e));

    hash = ngx_crc32_short(check->key.data, check->key.len);

    b = (ngx_platform_rl_batch_t *)
            ngx_str_rbtree_lookup(&ngx_platform_rl_open, &check->key, hash);

    if (b == NULL) {
        b = ngx_platform_rl_batch(check, hash, digest);
        if (b == NULL) {
            if (fast) {
                e->fast--;
            }

            return NGX_ERROR;
        }
    }

    if (fast) {
        b->fast++;

    } else {
        check->batch = b;
        check->slot = b->n;
        b->checks[b->n++] = check;

        /* the batch may linger with admitted checks only: not any more */
        if (!ngx_platform_rl_flush.posted) {
            ngx_post_event(&ngx_platform_rl_flush, &ngx_posted_events);
        }
    }

    if (b->n + b->fast == NGX_PLATFORM_RL_BATCH_MAX) {
        /* full: the key's next check starts another */
        ngx_rbtree_delete(&ngx_platform_rl_open, &b->sn.node);
    }

    return fast ? NGX_OK : NGX_DONE;
}


/*
 * Far from the limit: a fresh hint leaves at least the margin after this
 * check and what the worker admitted from it since, and fewer than the
 * margin of those await their reply. The check is then admitted, its
 * headers from the hint, and counted in the hint until its reply.
 */

static ngx_uint_t
ngx_platform_rl_fast(ngx_platform_rl_check_t *check,
    ngx_platform_rl_local_t *e)
{
    uint64_t    now, interval, budget, margin, tat, next;

    if (!e->hint
        || ngx_current_msec - e->hint_time > NGX_PLATFORM_RL_HINT_AGE)
    {
        return 0;
    }

    interval = check->limit->interval;
    budget = interval * (check->limit->burst + 1);
    margin = ngx_max(NGX_PLATFORM_RL_MARGIN_MIN,
                     (check->limit->burst + 1) / 4);

    if (e->fast >= margin) {
        return 0;
    }

    now = (uint64_t) ngx_current_msec * 1000;
    tat = ngx_max(e->hint_tat, now) + e->fast * interval;
    next = tat + interval;

    if (next - now > budget || (budget - (next - now)) / interval < margin) {
        return 0;
    }

    e->fast++;

    check->refused = 0;
    check->remaining = (budget - (next - now)) / interval;
    check->retry = 0;
    check->reset = (next - now + 999) / 1000;

    return 1;
}


/* a new batch, in its own pool, sent at the end of this pass */

static ngx_platform_rl_batch_t *
ngx_platform_rl_batch(ngx_platform_rl_check_t *check, uint32_t hash,
    u_char *digest)
{
    u_char                   *key;
    ngx_pool_t               *pool;
    ngx_platform_rl_batch_t  *b;

    /* room for the batch, its key and the command's pool cleanup */
    pool = ngx_create_pool(sizeof(ngx_pool_t)
                           + sizeof(ngx_platform_rl_batch_t)
                           + check->key.len + 128, ngx_cycle->log);
    if (pool == NULL) {
        return NULL;
    }

    b = ngx_pcalloc(pool, sizeof(ngx_platform_rl_batch_t));
    key = ngx_pnalloc(pool, check->key.len);

    if (b == NULL || key == NULL) {
        ngx_destroy_pool(pool);
        return NULL;
    }

    b->sn.node.key = hash;
    b->sn.str.data = ngx_cpymem(key, check->key.data, check->key.len)
                     - check->key.len;
    b->sn.str.len = check->key.len;
    b->pool = pool;
    b->limit = check->limit;
    b->start = ngx_current_msec;
    ngx_memcpy(b->digest, digest, 20);

    ngx_rbtree_insert(&ngx_platform_rl_open, &b->sn.node);
    ngx_queue_insert_tail(&ngx_platform_rl_pending, &b->queue);

    if (!ngx_platform_rl_flush.posted) {
        ngx_post_event(&ngx_platform_rl_flush, &ngx_posted_events);
    }

    return b;
}


/*
 * The end of the pass: one script call per batch. A batch of checks
 * admitted from the hint only, which no request waits for, lingers a
 * little to take more, with room left: one call counts them all.
 */

static void
ngx_platform_rl_flush_handler(ngx_event_t *ev)
{
    ngx_uint_t                linger;
    ngx_queue_t               batches, *q;
    ngx_platform_rl_batch_t  *b;

    if (ngx_queue_empty(&ngx_platform_rl_pending)) {
        return;
    }

    /* a check decided here may start a batch: it is for the next pass */

    batches = ngx_platform_rl_pending;
    batches.next->prev = &batches;
    batches.prev->next = &batches;

    ngx_queue_init(&ngx_platform_rl_pending);
    ngx_rbtree_init(&ngx_platform_rl_open, &ngx_platform_rl_open_sentinel,
                    ngx_str_rbtree_insert_value);

    linger = 0;

    while (!ngx_queue_empty(&batches)) {
        q = ngx_queue_head(&batches);
        ngx_queue_remove(q);

        b = ngx_queue_data(q, ngx_platform_rl_batch_t, queue);

        if (b->n == 0
            && b->fast + 1 < NGX_PLATFORM_RL_BATCH_MAX
            && ngx_current_msec - b->start < NGX_PLATFORM_RL_LINGER
            && !ngx_exiting)
        {
            ngx_rbtree_insert(&ngx_platform_rl_open, &b->sn.node);
            ngx_queue_insert_tail(&ngx_platform_rl_pending, &b->queue);
            linger = 1;
            continue;
        }

        ngx_platform_rl_send(b);
    }

    if (linger && !ev->timer_set) {
        ngx_add_timer(ev, NGX_PLATFORM_RL_LINGER);
    }
}


static void
ngx_platform_rl_send(ngx_platform_rl_batch_t *b)
{
    u_char       count[NGX_INT_T_LEN];
    size_t       argvlen[4];
    ngx_int_t    rc;
    const char  *argv[4];

    ngx_platform_rl_compact(b);

    if (b->n + b->fast == 0) {
        /* every request went away first */
        ngx_destroy_pool(b->pool);
        return;
    }

    argv[0] = (const char *) b->sn.str.data;
    argvlen[0] = b->sn.str.len;
    argv[1] = (const char *) b->limit->interval_text.data;
    argvlen[1] = b->limit->interval_text.len;
    argv[2] = (const char *) b->limit->burst_text.data;
    argvlen[2] = b->limit->burst_text.len;
    argv[3] = (const char *) count;
    argvlen[3] = ngx_sprintf(count, "%ui", b->fast + b->n) - count;

    rc = ngx_platform_redis_eval(b->pool, ngx_cycle->log,
                                 &ngx_platform_rl_script, 1, 4, argv,
                                 argvlen, ngx_platform_rl_done, b);

    if (rc == NGX_DONE) {
        ngx_queue_insert_tail(&ngx_platform_rl_sent, &b->queue);
        return;
    }

    /* Redis cannot take it: each check is decided here */
    ngx_platform_rl_deal(b);
}


/* the checks whose request went away before the send are not counted */

static void
ngx_platform_rl_compact(ngx_platform_rl_batch_t *b)
{
    ngx_uint_t  i, n;

    n = 0;

    for (i = 0; i < b->n; i++) {
        if (b->checks[i] == NULL) {
            continue;
        }

        b->checks[n] = b->checks[i];
        b->checks[n]->slot = n;
        n++;
    }

    b->n = n;
}


static void
ngx_platform_rl_done(void *data, redisReply *reply, ngx_int_t rc)
{
    ngx_platform_rl_batch_t  *b = data;

    ngx_queue_remove(&b->queue);

    if (rc == NGX_OK && ngx_platform_rl_reply(b, reply) == NGX_OK
        && ngx_platform_rl_outage)
    {
        ngx_platform_rl_outage = 0;

        ngx_log_error(NGX_LOG_NOTICE, ngx_cycle->log, 0,
                      "platform: Redis answers rate limits again");
    }

    ngx_platform_rl_deal(b);
}


/* {admitted, microseconds to the arrival time}, as the limit allows */

static ngx_int_t
ngx_platform_rl_reply(ngx_platform_rl_batch_t *b, redisReply *reply)
{
    uint64_t     k, n, wait, interval, budget;
    redisReply  *e0, *e1;

    if (reply->type == REDIS_REPLY_ERROR) {
        ngx_platform_log_limited(NGX_PLATFORM_LOG_REDIS_FAILED, NGX_LOG_ERR,
                                 ngx_cycle->log, 0,
                                 "platform: rate limit script failed: %*s",
                                 (size_t) reply->len, reply->str);
        return NGX_ERROR;
    }

    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2) {
        return NGX_ERROR;
    }

    e0 = reply->element[0];
    e1 = reply->element[1];

    if (e0->type != REDIS_REPLY_INTEGER || e0->integer < 0
        || e1->type != REDIS_REPLY_INTEGER || e1->integer < 0)
    {
        return NGX_ERROR;
    }

    k = e0->integer;
    wait = e1->integer;
    n = b->fast + b->n;
    interval = b->limit->interval;
    budget = interval * (b->limit->burst + 1);

    /* k fit, and one more would not have */

    if (k > n
        || (k && wait + k * interval > budget)
        || (k < n && wait + (k + 1) * interval <= budget))
    {
        return NGX_ERROR;
    }

    b->admitted = k;
    b->wait = wait;
    b->counted = 1;

    return NGX_OK;
}


/*
 * The hint is refreshed, and each check still in the batch has its
 * outcome, in arrival order after those admitted from the hint; a
 * request resumes once all of its checks have theirs. Then the batch
 * is freed.
 */

static void
ngx_platform_rl_deal(ngx_platform_rl_batch_t *b)
{
    ngx_uint_t                i;
    ngx_http_request_t       *r;
    ngx_platform_rl_state_t  *st;
    ngx_platform_rl_check_t  *check;

    ngx_platform_rl_hint(b);

    for (i = 0; i < b->n; i++) {
        check = b->checks[i];

        if (check == NULL) {
            /* its request went away, perhaps as an earlier one resumed */
            continue;
        }

        check->batch = NULL;
        st = check->state;
        r = st->request;

        if (b->counted) {
            ngx_platform_rl_set(check, b->fast + i, b->admitted, b->wait);

        } else {
            ngx_platform_rl_local(r->connection->log, check);
        }

        if (--st->pending) {
            continue;
        }

        /* the wait's count is dropped by whoever resume hands r to */

        st->resume(r, ngx_platform_rl_decide(r, st));
    }

    ngx_destroy_pool(b->pool);
}


/*
 * What Redis replied is the key's hint, the batch's admissions from the
 * hint counted in it now; no reply leaves no hint
 */

static void
ngx_platform_rl_hint(ngx_platform_rl_batch_t *b)
{
    ngx_platform_rl_local_t  *e;

    e = ngx_platform_rl_local_entry(b->digest);
    if (e == NULL) {
        return;
    }

    /* the entry may have been forgotten and taken anew meanwhile */
    e->fast -= ngx_min(e->fast, b->fast);

    if (!b->counted) {
        e->hint = 0;
        return;
    }

    e->hint = 1;
    e->hint_time = ngx_current_msec;
    e->hint_tat = (uint64_t) ngx_current_msec * 1000 + b->wait
                  + b->admitted * b->limit->interval;
}


/*
 * The i-th check of a batch whose first k were admitted, the arrival
 * time wait microseconds ahead before them: as if it came alone, in its
 * turn
 */

static void
ngx_platform_rl_set(ngx_platform_rl_check_t *check, ngx_uint_t i,
    ngx_uint_t k, uint64_t wait)
{
    uint64_t  interval, budget, tat;

    interval = check->limit->interval;
    budget = interval * (check->limit->burst + 1);

    if (i < k) {
        tat = wait + (i + 1) * interval;

        check->refused = 0;
        check->remaining = (budget - tat) / interval;
        check->retry = 0;
        check->reset = (tat + 999) / 1000;
        return;
    }

    tat = wait + k * interval;

    check->refused = 1;
    check->remaining = 0;
    check->retry = (tat + interval - budget + 999) / 1000;
    check->reset = (tat + 999) / 1000;
}


/* the request goes away: its checks leave their batches, sent or not */

static void
ngx_platform_rl_detach(void *data)
{
    ngx_platform_rl_state_t  *st = data;

    ngx_uint_t                i;
    ngx_platform_rl_check_t  *check;

    for (i = 0; i < st->n; i++) {
        check = &st->checks[i];

        if (check->batch) {
            check->batch->checks[check->slot] = NULL;
            check->batch = NULL;
        }
    }
}


/*
 * Redis cannot answer: this worker decides alone, with the rate divided
 * by the workers (and the burst, whole requests only), so that the node
 * as a whole keeps about the declared rate
 */

static void
ngx_platform_rl_local(ngx_log_t *log, ngx_platform_rl_check_t *check)
{
    u_char                    digest[20];
    uint64_t                  now, interval, budget, tat, next;
    ngx_sha1_t                sha1;
    ngx_platform_rl_local_t  *e;

    if (!ngx_platform_rl_outage) {
        ngx_platform_rl_outage = 1;

        ngx_log_error(NGX_LOG_WARN, log, 0,
                      "platform: Redis cannot answer rate limits: each "
                      "worker limits alone, at 1/%ui of each rate, until "
                      "it answers again", ngx_platform_rl_workers);
    }

    ngx_platform_metric_inc(NGX_PLATFORM_M_RATE_LIMIT_LOCAL);

    interval = check->limit->interval * ngx_platform_rl_workers;
    budget = interval * (check->limit->burst / ngx_platform_rl_workers + 1);
    now = (uint64_t) ngx_current_msec * 1000;

    ngx_sha1_init(&sha1);
    ngx_sha1_update(&sha1, check->key.data, check->key.len);
    ngx_sha1_final(digest, &sha1);

    e = ngx_platform_rl_local_entry(digest);

    tat = (e && e->tat > now) ? e->tat : now;
    next = tat + interval;

    if (next - now > budget) {
        check->refused = 1;
        check->remaining = 0;
        check->retry = (next - budget - now + 999) / 1000;
        check->reset = (tat - now + 999) / 1000;
        return;
    }

    if (e) {
        e->tat = next;
    }

    check->refused = 0;
    check->remaining = (budget - (next - now)) / interval;
    check->retry = 0;
    check->reset = (next - now + 999) / 1000;
}


/* the identity's entry, made most recently used; NULL: out of memory */

static ngx_platform_rl_local_t *
ngx_platform_rl_local_entry(u_char *digest)
{
    ngx_int_t                 rc;
    ngx_uint_t                i;
    ngx_queue_t              *q;
    ngx_rbtree_key_t          key;
    ngx_rbtree_node_t        *node, *sentinel;
    ngx_platform_rl_local_t  *e;

    if (ngx_platform_rl_entries == NULL) {
        ngx_platform_rl_entries = ngx_alloc(NGX_PLATFORM_RL_LOCAL_MAX
                                            * sizeof(ngx_platform_rl_local_t),
                                            ngx_cycle->log);
        if (ngx_platform_rl_entries == NULL) {
            return NULL;
        }

        ngx_rbtree_init(&ngx_platform_rl_tree, &ngx_platform_rl_sentinel,
                        ngx_platform_rl_rbtree_insert);
        ngx_queue_init(&ngx_platform_rl_lru);
        ngx_queue_init(&ngx_platform_rl_free);

        for (i = 0; i < NGX_PLATFORM_RL_LOCAL_MAX; i++) {
            ngx_queue_insert_tail(&ngx_platform_rl_free,
                                  &ngx_platform_rl_entries[i].queue);
        }
    }

    ngx_memcpy(&key, digest, sizeof(ngx_rbtree_key_t));

    node = ngx_platform_rl_tree.root;
    sentinel = ngx_platform_rl_tree.sentinel;

    while (node != sentinel) {

        if (key != node->key) {
            node = (key < node->key) ? node->left : node->right;
            continue;
        }

        e = (ngx_platform_rl_local_t *) node;
        rc = ngx_memcmp(digest, e->digest, 20);

        if (rc == 0) {
            ngx_queue_remove(&e->queue);
            ngx_queue_insert_head(&ngx_platform_rl_lru, &e->queue);
            return e;
        }

        node = (rc < 0) ? node->left : node->right;
    }

    /* a new identity: a free entry, or the least recently used one */

    if (!ngx_queue_empty(&ngx_platform_rl_free)) {
        q = ngx_queue_head(&ngx_platform_rl_free);

    } else {
        q = ngx_queue_last(&ngx_platform_rl_lru);
        e = ngx_queue_data(q, ngx_platform_rl_local_t, queue);
        ngx_rbtree_delete(&ngx_platform_rl_tree, &e->node);
    }

    ngx_queue_remove(q);
    ngx_queue_insert_head(&ngx_platform_rl_lru, q);

    e = ngx_queue_data(q, ngx_platform_rl_local_t, queue);

    ngx_memcpy(e->digest, digest, 20);
    e->node.key = key;
    e->tat = 0;
    e->hint = 0;
    e->fast = 0;

    ngx_rbtree_insert(&ngx_platform_rl_tree, &e->node);

    return e;
}


/* by key, then by the whole digest */

static void
ngx_platform_rl_rbtree_insert(ngx_rbtree_node_t *temp,
    ngx_rbtree_node_t *node, ngx_rbtree_node_t *sentinel)
{
    ngx_rbtree_node_t       **p;
    ngx_platform_rl_local_t  *n, *t;

    for ( ;; ) {

        if (node->key != temp->key) {
            p = (node->key < temp->key) ? &temp->left : &temp->right;

        } else {
            n = (ngx_platform_rl_local_t *) node;
            t = (ngx_platform_rl_local_t *) temp;

            p = (ngx_memcmp(n->digest, t->digest, 20) < 0)
                ? &temp->left : &temp->right;
        }

        if (*p == sentinel) {
            break;
        }

        temp = *p;
    }

    *p = node;
    node->parent = temp;
    node->left = sentinel;
    node->right = sentinel;
    ngx_rbt_red(node);
}


/* every check has an outcome: the headers, and 429 if one refused */

static ngx_int_t
ngx_platform_rl_decide(ngx_http_request_t *r, ngx_platform_rl_state_t *st)
{
    uint64_t                  retry;
    ngx_uint_t                i;
    ngx_platform_ctx_t       *ctx;
    ngx_platform_rl_check_t  *check, *refused;

    ctx = ngx_platform_get_ctx(r);

    if (ngx_platform_rl_headers(r, ctx, st) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    refused = NULL;
    retry = 0;

    for (i = 0; i < st->n; i++) {
        check = &st->checks[i];

        if (!check->refused) {
            continue;
        }

        if (refused == NULL) {
            refused = check;
        }

        retry = ngx_max(retry, check->retry);
    }

    if (refused == NULL) {
        return NGX_OK;
    }

    /* counted once, under the first limit that refused */

    ngx_platform_metrics_limited(ctx->family, refused->limit->kind);

    /* whole seconds, rounded up: never "retry at once" */
    ctx->retry_after = (time_t) ngx_max((retry + 999) / 1000, 1);

    return ngx_platform_fail(r, 429, "Too many requests.",
                             (refused->limit->kind == NGX_PLATFORM_RL_BUREAU)
                             ? NGX_PLATFORM_RL_BUREAU_DETAIL
                             : NGX_PLATFORM_RL_DETAIL);
}


/*
 * The draft's structured fields, one item per limit, named by its kind:
 * RateLimit-Policy: "tenant";q=100;w=1 and RateLimit: "tenant";r=42;t=1,
 * appended to those of an earlier stage of the request
 */

static ngx_int_t
ngx_platform_rl_headers(ngx_http_request_t *r, ngx_platform_ctx_t *ctx,
    ngx_platform_rl_state_t *st)
{
    u_char                   *policy, *values, *p, *q;
    size_t                    len;
    ngx_str_t                *kind;
    ngx_uint_t                i;
    ngx_platform_rl_check_t  *check;

    len = ctx->rate_policy.len;

    for (i = 0; i < st->n; i++) {
        len += sizeof(", ") - 1 + st->checks[i].limit->policy.len;
    }

    policy = ngx_pnalloc(r->pool, len + ctx->rate_limit.len
                                  + st->n * (sizeof(", \"credential\";r=;t=") - 1
                                             + 2 * NGX_INT64_LEN));
    if (policy == NULL) {
        return NGX_ERROR;
    }

    values = policy + len;

    p = ngx_cpymem(policy, ctx->rate_policy.data, ctx->rate_policy.len);
    q = ngx_cpymem(values, ctx->rate_limit.data, ctx->rate_limit.len);

    for (i = 0; i < st->n; i++) {
        check = &st->checks[i];
        kind = &ngx_platform_rl_kinds[check->limit->kind];

        if (p != policy) {
            *p++ = ',';
            *p++ = ' ';
            *q++ = ',';
            *q++ = ' ';
        }

        p = ngx_cpymem(p, check->limit->policy.data,
                       check->limit->policy.len);

        q = ngx_sprintf(q, "\"%V\";r=%uL;t=%uL", kind, check->remaining,
                        (check->reset + 999) / 1000);
    }

    ctx->rate_policy.data = policy;
    ctx->rate_policy.len = p - policy;
    ctx->rate_limit.data = values;
    ctx->rate_limit.len = q - values;

    return NGX_OK;
}


void
ngx_platform_rate_limit_init_process(ngx_cycle_t *cycle)
{
    ngx_core_conf_t  *ccf;

    ccf = (ngx_core_conf_t *) ngx_get_conf(cycle->conf_ctx, ngx_core_module);

    ngx_platform_rl_workers = (ccf && ccf->worker_processes > 0)
                              ? (ngx_uint_t) ccf->worker_processes : 1;

    ngx_rbtree_init(&ngx_platform_rl_open, &ngx_platform_rl_open_sentinel,
                    ngx_str_rbtree_insert_value);
    ngx_queue_init(&ngx_platform_rl_pending);
    ngx_queue_init(&ngx_platform_rl_sent);

    ngx_platform_rl_dummy.fd = (ngx_socket_t) -1;
    ngx_platform_rl_dummy.log = cycle->log;

    ngx_platform_rl_flush.handler = ngx_platform_rl_flush_handler;
    ngx_platform_rl_flush.data = &ngx_platform_rl_dummy;
    ngx_platform_rl_flush.log = cycle->log;
    ngx_platform_rl_flush.cancelable = 1;
}


/* after Redis's: no reply is waited for any more, none will come */

void
ngx_platform_rate_limit_exit_process(ngx_cycle_t *cycle)
{
    ngx_queue_t              *q;
    ngx_platform_rl_batch_t  *b;

    if (ngx_platform_rl_flush.posted) {
        ngx_delete_posted_event(&ngx_platform_rl_flush);
    }

    if (ngx_platform_rl_flush.timer_set) {
        ngx_del_timer(&ngx_platform_rl_flush);
    }

    if (ngx_platform_rl_sent.next == NULL) {
        return;
    }

    if (!ngx_queue_empty(&ngx_platform_rl_pending)) {
        ngx_queue_add(&ngx_platform_rl_sent, &ngx_platform_rl_pending);
        ngx_queue_init(&ngx_platform_rl_pending);
    }

    while (!ngx_queue_empty(&ngx_platform_rl_sent)) {
        q = ngx_queue_head(&ngx_platform_rl_sent);
        ngx_queue_remove(q);

        b = ngx_queue_data(q, ngx_platform_rl_batch_t, queue);
        ngx_destroy_pool(b->pool);
    }
}


/* platform_rate_limit tenant|credential|address RATE [burst=N]; */

char *
ngx_platform_rate_limit_conf(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_platform_loc_conf_t *plcf = conf;

    char                       *rv;
    ngx_str_t                  *value;
    ngx_uint_t                  kind, i;
    ngx_platform_rate_limit_t  *limit, *limits;
    ngx_platform_main_conf_t   *pmcf;

    value = cf->args->elts;

    for (kind = 0; kind < NGX_PLATFORM_RL_BUREAU; kind++) {
        if (value[1].len == ngx_platform_rl_kinds[kind].len
            && ngx_strncmp(value[1].data, ngx_platform_rl_kinds[kind].data,
                           value[1].len) == 0)
        {
            break;
        }
    }

    if (kind == NGX_PLATFORM_RL_BUREAU) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid kind \"%V\": a limit counts per "
                           "\"tenant\", \"credential\" or \"address\"",
                           &value[1]);
        return NGX_CONF_ERROR;
    }

    if (plcf->rate_limits == NGX_CONF_UNSET_PTR) {
        plcf->rate_limits = ngx_array_create(cf->pool, 3,
                                            sizeof(ngx_platform_rate_limit_t));
        if (plcf->rate_limits == NULL) {
            return NGX_CONF_ERROR;
        }
    }

    limits = plcf->rate_limits->elts;

    for (i = 0; i < plcf->rate_limits->nelts; i++) {
        if (limits[i].kind == kind) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "a \"%V\" limit is already declared at this "
                               "level: one limit per kind", &value[1]);
            return NGX_CONF_ERROR;
        }
    }

    limit = ngx_array_push(plcf->rate_limits);
    if (limit == NULL) {
        return NGX_CONF_ERROR;
    }

    rv = ngx_platform_rl_parse(cf, &value[2], cf->args->nelts - 2, kind,
                               limit);
    if (rv != NGX_CONF_OK) {
        return rv;
    }

    /* the limits are counted in Redis: every worker connects to it */

    pmcf = ngx_http_conf_get_module_main_conf(cf, ngx_platform_module);
    pmcf->backends |= NGX_PLATFORM_BACKEND_REDIS;

    return NGX_CONF_OK;
}


/* platform_identity_bureau_rate RATE [burst=N] | off; */

char *
ngx_platform_rate_limit_bureau_conf(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf)
{
    ngx_platform_loc_conf_t *plcf = conf;

    ngx_str_t                  *value;
    ngx_platform_main_conf_t   *pmcf;
    ngx_platform_rate_limit_t  *limit;

    if (plcf->identity_bureau_rate != NGX_CONF_UNSET_PTR) {
        return "is duplicate";
    }

    value = cf->args->elts;

    if (cf->args->nelts == 2 && ngx_strcmp(value[1].data, "off") == 0) {
        plcf->identity_bureau_rate = NULL;
        return NGX_CONF_OK;
    }

    limit = ngx_pcalloc(cf->pool, sizeof(ngx_platform_rate_limit_t));
    if (limit == NULL) {
        return NGX_CONF_ERROR;
    }

    if (ngx_platform_rl_parse(cf, &value[1], cf->args->nelts - 1,
                              NGX_PLATFORM_RL_BUREAU, limit)
        != NGX_CONF_OK)
    {
        return NGX_CONF_ERROR;
    }

    plcf->identity_bureau_rate = limit;

    pmcf = ngx_http_conf_get_module_main_conf(cf, ngx_platform_module);
    pmcf->backends |= NGX_PLATFORM_BACKEND_REDIS;

    return NGX_CONF_OK;
}


/* "100r/s" or "6000r/m", then perhaps "burst=N" */

static char *
ngx_platform_rl_parse(ngx_conf_t *cf, ngx_str_t *value, ngx_uint_t n,
    ngx_uint_t kind, ngx_platform_rate_limit_t *limit)
{
    u_char     *p, *last;
    size_t      len;
    ngx_int_t   rate, burst;
    ngx_str_t  *name;

    len = value[0].len;
    p = value[0].data;

    if (len < 4 || ngx_strncmp(p + len - 3, "r/", 2) != 0
        || (p[len - 1] != 's' && p[len - 1] != 'm'))
    {
        goto invalid_rate;
    }

    rate = ngx_atoi(p, len - 3);

    if (rate <= 0 || rate > NGX_PLATFORM_RL_RATE_MAX) {
        goto invalid_rate;
    }

    burst = 0;

    if (n == 2) {
        if (value[1].len <= 6
            || ngx_strncmp(value[1].data, "burst=", 6) != 0)
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid parameter \"%V\": only "
                               "\"burst=N\" may follow the rate",
                               &value[1]);
            return NGX_CONF_ERROR;
        }

        burst = ngx_atoi(value[1].data + 6, value[1].len - 6);

        if (burst == NGX_ERROR || burst > NGX_PLATFORM_RL_BURST_MAX) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid burst \"%V\": a number of requests "
                               "from 0 to %d", &value[1],
                               NGX_PLATFORM_RL_BURST_MAX);
            return NGX_CONF_ERROR;
        }
    }

    limit->kind = kind;
    limit->rate = rate;
    limit->period = (p[len - 1] == 's') ? 1 : 60;
    limit->burst = burst;
    limit->interval = (uint64_t) limit->period * 1000000 / rate;

    if (limit->interval == 0) {
        goto invalid_rate;
    }

    /* the texts the script and the headers use, written once */

    name = &ngx_platform_rl_kinds[kind];

    p = ngx_pnalloc(cf->pool, 4 * NGX_INT64_LEN + sizeof("}::\"\";q=;w=")
                              + name->len);
    if (p == NULL) {
        return NGX_CONF_ERROR;
    }

    limit->suffix.data = p;
    last = ngx_sprintf(p, "}:%uL:%ui", limit->interval, limit->burst);
    limit->suffix.len = last - p;

    limit->interval_text.data = p + 2;
    limit->interval_text.len = ngx_sprintf(p, "}:%uL", limit->interval)
                               - p - 2;

    limit->burst_text.data = p + 3 + limit->interval_text.len;
    limit->burst_text.len = last - limit->burst_text.data;

    limit->policy.data = last;
    limit->policy.len = ngx_sprintf(last, "\"%V\";q=%ui;w=%ui", name,
                                    limit->rate, limit->period)
                        - last;

    return NGX_CONF_OK;

invalid_rate:

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "invalid rate \"%V\": requests per second or minute "
                       "as \"100r/s\" or \"6000r/m\", from 1 to %d",
                       &value[0], NGX_PLATFORM_RL_RATE_MAX);
    return NGX_CONF_ERROR;
}
