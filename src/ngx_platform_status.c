
/*
 * ngx_platform: operations endpoints and metrics.
 *
 * platform_health answers whether PostgreSQL and Redis answer right now
 * (a real SELECT 1 through the pool and a PING, both at once);
 * platform_metrics answers the counters in Prometheus text format.
 *
 * Counters and latency histograms live in a shared memory zone so that
 * every worker reports the same totals, and they survive a reload; gauges
 * of the pools are kept per worker slot.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_platform.h"
#include "ngx_platform_op.h"


#define NGX_PLATFORM_WORKERS_MAX    64
#define NGX_PLATFORM_SHM_SIZE       (128 * 1024)

/* status classes of the request histograms: 1xx to 5xx */
#define NGX_PLATFORM_CLASSES        5


typedef struct {
    ngx_atomic_t                 configured;
    ngx_atomic_t                 idle;
    ngx_atomic_t                 busy;
    ngx_atomic_t                 in_flight;
    ngx_atomic_t                 waiting;
} ngx_platform_shm_pg_t;


/* observations per bucket, not cumulative; the last bucket is +Inf */

typedef struct {
    ngx_atomic_t                 buckets[NGX_PLATFORM_BUCKETS_MAX + 1];
    ngx_atomic_t                 sum;            /* milliseconds */
} ngx_platform_shm_histogram_t;


typedef struct {
    ngx_atomic_t                 requests[NGX_PLATFORM_FAMILIES_MAX]
                                         [NGX_PLATFORM_STATUSES];
    ngx_atomic_t                 counters[NGX_PLATFORM_M_MAX];

    /* the bounds the histograms count with, in milliseconds */
    ngx_atomic_t                 nbuckets;
    ngx_atomic_t                 bounds[NGX_PLATFORM_BUCKETS_MAX];

    ngx_platform_shm_histogram_t durations[NGX_PLATFORM_FAMILIES_MAX]
                                          [NGX_PLATFORM_CLASSES];
    ngx_platform_shm_histogram_t round_trips[NGX_PLATFORM_H_MAX];

    struct {
        ngx_atomic_t             pid;
        ngx_atomic_t             redis_connected;

        /* the primary, then the read pool */
        ngx_platform_shm_pg_t    pg[2];
    }                            workers[NGX_PLATFORM_WORKERS_MAX];
} ngx_platform_shm_t;


typedef struct {
    ngx_uint_t                   pending;
    ngx_uint_t                   pg_up;
    ngx_uint_t                   redis_up;
} ngx_platform_health_t;


static ngx_int_t ngx_platform_health(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);
static void ngx_platform_health_pg_done(void *data, ngx_platform_pg_op_t *op,
    PGresult *res, ngx_int_t rc);
static void ngx_platform_health_redis_done(void *data, redisReply *reply,
    ngx_int_t rc);
static void ngx_platform_health_step(ngx_http_request_t *r);
static ngx_int_t ngx_platform_health_send(ngx_http_request_t *r,
    ngx_platform_health_t *h);
static ngx_int_t ngx_platform_metrics(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);
static ngx_int_t ngx_platform_metrics_init_zone(ngx_shm_zone_t *shm_zone,
    void *data);
static void ngx_platform_metrics_set_bounds(ngx_platform_shm_t *shm,
    ngx_platform_main_conf_t *pmcf);
static void ngx_platform_metrics_count(ngx_platform_shm_histogram_t *h,
    ngx_msec_t ms);
static ngx_uint_t ngx_platform_metrics_observed(
    ngx_platform_shm_histogram_t *h);
static u_char *ngx_platform_metrics_histogram(u_char *p, u_char *last,
    char *name, u_char *labels, ngx_platform_shm_histogram_t *h);
static u_char *ngx_platform_metrics_seconds(u_char *p, u_char *last,
    ngx_atomic_uint_t ms);
static ngx_int_t ngx_platform_metrics_parse_bound(ngx_str_t *value);
static void ngx_platform_metrics_gauges(void);
static void ngx_platform_metrics_gauges_timer(ngx_event_t *ev);


static ngx_platform_endpoint_t  ngx_platform_health_endpoints[] = {
    { NGX_HTTP_GET, "*", NGX_PLATFORM_AUTH_NONE, 0, NULL, NULL, NULL, NULL,
      NULL, ngx_platform_health },
    { 0, NULL, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL }
};


static ngx_platform_endpoint_t  ngx_platform_metrics_endpoints[] = {
    { NGX_HTTP_GET, "*", NGX_PLATFORM_AUTH_NONE, 0, NULL, NULL, NULL, NULL,
      NULL, ngx_platform_metrics },
    { 0, NULL, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL }
};


ngx_platform_family_t  ngx_platform_health_family = {
    ngx_string("health"),
    NGX_PLATFORM_ENVELOPE_B,
    NGX_PLATFORM_BACKEND_PG|NGX_PLATFORM_BACKEND_REDIS,
    ngx_platform_health_endpoints,
    NULL,
    0
};


ngx_platform_family_t  ngx_platform_metrics_family = {
    ngx_string("metrics"),
    NGX_PLATFORM_ENVELOPE_B,
    0,
    ngx_platform_metrics_endpoints,
    NULL,
    0
};


static char  *ngx_platform_pg_pool_names[2] = { "primary", "read" };


static char  *ngx_platform_round_trip_labels[NGX_PLATFORM_H_MAX] = {
    "backend=\"postgresql\",pool=\"primary\"",
    "backend=\"postgresql\",pool=\"read\"",
    "backend=\"redis\""
};


/* platform_metrics_buckets' default: 1 ms to 5 s */

static ngx_msec_t  ngx_platform_default_buckets[] = {
    1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000
};


static ngx_uint_t  ngx_platform_statuses[NGX_PLATFORM_STATUSES] = {
    200, 201, 204, 304, 400, 401, 403, 404, 405, 409, 413, 415, 429, 499,
    500, 502, 503, 504, 0
};


static char  *ngx_platform_counter_names[NGX_PLATFORM_M_MAX][2] = {
    { "platform_pg_statements_total",
      "Statements sent to PostgreSQL, prepares included." },
    { "platform_pg_errors_total", "Statements that PostgreSQL failed." },
    { "platform_pg_timeouts_total",
      "Statements or waits that ran out of time." },
    { "platform_pg_rejected_total",
      "Requests refused because the pool and its queue were full or "
      "PostgreSQL was down." },
    { "platform_pg_connects_total", "PostgreSQL connections opened." },
    { "platform_pg_connect_failures_total",
      "PostgreSQL connection attempts that failed." },
    { "platform_redis_commands_total", "Commands sent to Redis." },
    { "platform_redis_errors_total",
      "Redis commands that failed or found Redis unavailable." },
    { "platform_redis_timeouts_total", "Redis commands that timed out." },
    { "platform_redis_connects_total", "Redis connections established." },
    { "platform_tokens_verified_total",
      "Bearer tokens verified with their key (not found in the cache)." },
    { "platform_tokens_cached_total",
      "Bearer tokens accepted from a worker's cache." },
    { "platform_tokens_refused_total", "Bearer tokens refused." },
    { "platform_apikey_lookups_total",
      "API keys looked up in PostgreSQL." },
    { "platform_apikeys_refused_total",
      "API keys refused: malformed, unknown, revoked or of another scope." },
    { "platform_pg_retries_total",
      "Statements run again after a serialization failure or deadlock." }
};


static ngx_platform_shm_t  *ngx_platform_shm;


static ngx_platform_pg_stmt_t  ngx_platform_health_stmt = {
    "platform_health", "SELECT 1", 0, 0, 1
};


static ngx_int_t
ngx_platform_health(ngx_http_request_t *r, ngx_platform_ctx_t *ctx)
{
    ngx_int_t               rc;
    ngx_platform_health_t  *h;

    static const char      *ping[] = { "PING" };
    static const size_t     ping_len[] = { 4 };

    h = ngx_pcalloc(r->pool, sizeof(ngx_platform_health_t));
    if (h == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ctx->data = h;

    /* each backend operation holds its own count of the request */

    rc = ngx_platform_query(r, &ngx_platform_health_stmt, NULL,
                            ngx_platform_health_pg_done);
    if (rc == NGX_DONE) {
        h->pending++;
    }

    rc = ngx_platform_command(r, ngx_platform_health_redis_done, 1, ping,
                              ping_len);
    if (rc == NGX_DONE) {
        h->pending++;
    }

    if (h->pending == 0) {
        return ngx_platform_health_send(r, h);
    }

    /* the last operation to answer sends the response */

    return NGX_DONE;
}


static void
ngx_platform_health_pg_done(void *data, ngx_platform_pg_op_t *op,
    PGresult *res, ngx_int_t rc)
{
    ngx_http_request_t *r = data;

    ngx_platform_ctx_t     *ctx;
    ngx_platform_health_t  *h;

    ctx = ngx_platform_get_ctx(r);
    h = ctx->data;

    h->pg_up = (rc == NGX_OK);

    ngx_platform_health_step(r);
}


static void
ngx_platform_health_redis_done(void *data, redisReply *reply, ngx_int_t rc)
{
    ngx_http_request_t *r = data;

    ngx_platform_ctx_t     *ctx;
    ngx_platform_health_t  *h;

    ctx = ngx_platform_get_ctx(r);
    h = ctx->data;

    h->redis_up = (rc == NGX_OK && reply
                   && reply->type != REDIS_REPLY_ERROR);

    ngx_platform_health_step(r);
}


static void
ngx_platform_health_step(ngx_http_request_t *r)
{
    ngx_platform_ctx_t     *ctx;
    ngx_platform_health_t  *h;

    ctx = ngx_platform_get_ctx(r);
    h = ctx->data;

    if (--h->pending > 0) {
        /* drop this operation's count of the request */
        ngx_http_finalize_request(r, NGX_DONE);
        return;
    }

    ngx_platform_finalize(r, ngx_platform_health_send(r, h));
}


static ngx_int_t
ngx_platform_health_send(ngx_http_request_t *r, ngx_platform_health_t *h)
{
    u_char                   *body, *p;
    ngx_uint_t                up;
    ngx_platform_pg_stats_t   read;

    up = h->pg_up && h->redis_up;

    body = ngx_pnalloc(r->pool, sizeof("{\"status\":\"down\","
                                       "\"postgres\":{\"status\":\"down\"},"
                                       "\"postgresRead\":{\"status\":"
                                       "\"down\"},"
                                       "\"redis\":{\"status\":\"down\"}}"));
    if (body == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    p = ngx_sprintf(body, "{\"status\":\"%s\",\"postgres\":{\"status\":"
                    "\"%s\"},", up ? "up" : "down", h->pg_up ? "up" : "down");

    /*
     * The read pool as this worker last found it; its being down does
     * not make the module down: reads then run on the primary.
     */

    ngx_platform_pg_stats(1, &read);

    if (read.configured) {
        p = ngx_sprintf(p, "\"postgresRead\":{\"status\":\"%s\"},",
                        read.connected ? "up" : "down");
    }

    p = ngx_sprintf(p, "\"redis\":{\"status\":\"%s\"}}",
                    h->redis_up ? "up" : "down");

    return ngx_platform_send_raw(r, up ? NGX_HTTP_OK
                                       : NGX_HTTP_SERVICE_UNAVAILABLE,
                                 body, p - body);
}


static ngx_int_t
ngx_platform_metrics(ngx_http_request_t *r, ngx_platform_ctx_t *ctx)
{
    u_char                 *p, *start, *last;
    size_t                  size;
    ngx_uint_t              f, s, m, w, n, i, histograms;
    ngx_platform_shm_t     *shm;
    ngx_platform_shm_pg_t  *g;
    u_char                  labels[128];

    static ngx_str_t     type =
                         ngx_string("text/plain; version=0.0.4; charset=utf-8");

    shm = ngx_platform_shm;
    if (shm == NULL) {
        return NGX_HTTP_SERVICE_UNAVAILABLE;
    }

    ngx_platform_metrics_gauges();

    /* only the histograms that counted something are shown */

    histograms = 0;

    for (f = 0; ngx_platform_families[f]; f++) {
        for (i = 0; i < NGX_PLATFORM_CLASSES; i++) {
            histograms += ngx_platform_metrics_observed(&shm->durations[f][i]);
        }
    }

    for (i = 0; i < NGX_PLATFORM_H_MAX; i++) {
        histograms += ngx_platform_metrics_observed(&shm->round_trips[i]);
    }

    size = 4096
           + NGX_PLATFORM_FAMILIES_MAX * NGX_PLATFORM_STATUSES * 96
           + NGX_PLATFORM_M_MAX * 256
           + NGX_PLATFORM_WORKERS_MAX * 12 * 96
           + (histograms + 4) * (NGX_PLATFORM_BUCKETS_MAX + 3) * 192;

    start = ngx_pnalloc(r->pool, size);
    if (start == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    last = start + size;

    p = ngx_sprintf(start,
                    "# HELP platform_requests_total Requests answered by "
                    "the module, by family and status.\n"
                    "# TYPE platform_requests_total counter\n");

    for (f = 0; ngx_platform_families[f]; f++) {
        for (s = 0; s < NGX_PLATFORM_STATUSES; s++) {
            n = shm->requests[f][s];
            if (n == 0) {
                continue;
            }

            if (ngx_platform_statuses[s]) {
                p = ngx_sprintf(p, "platform_requests_total{family=\"%V\","
                                   "status=\"%ui\"} %ui\n",
                                &ngx_platform_families[f]->name,
                                ngx_platform_statuses[s], n);

            } else {
                p = ngx_sprintf(p, "platform_requests_total{family=\"%V\","
                                   "status=\"other\"} %ui\n",
                                &ngx_platform_families[f]->name, n);
            }
        }
    }

    for (m = 0; m < NGX_PLATFORM_M_MAX; m++) {
        p = ngx_sprintf(p, "# HELP %s %s\n# TYPE %s counter\n%s %uA\n",
                        ngx_platform_counter_names[m][0],
                        ngx_platform_counter_names[m][1],
                        ngx_platform_counter_names[m][0],
                        ngx_platform_counter_names[m][0],
                        shm->counters[m]);
    }

    p = ngx_sprintf(p,
                    "# HELP platform_pg_connections PostgreSQL connections "
                    "of each worker, by pool and state (idle: nothing in "
                    "flight).\n"
                    "# TYPE platform_pg_connections gauge\n");

    for (w = 0; w < NGX_PLATFORM_WORKERS_MAX; w++) {
        for (i = 0; shm->workers[w].pid && i < 2; i++) {
            g = &shm->workers[w].pg[i];

            if (!g->configured) {
                continue;
            }

            p = ngx_sprintf(p, "platform_pg_connections{worker=\"%ui\","
                               "pool=\"%s\",state=\"idle\"} %uA\n"
                               "platform_pg_connections{worker=\"%ui\","
                               "pool=\"%s\",state=\"busy\"} %uA\n",
                            w, ngx_platform_pg_pool_names[i], g->idle,
                            w, ngx_platform_pg_pool_names[i], g->busy);
        }
    }

    p = ngx_sprintf(p,
                    "# HELP platform_pg_in_flight Statements sent on the "
                    "PostgreSQL connections of each worker and not yet "
                    "answered, by pool.\n"
                    "# TYPE platform_pg_in_flight gauge\n");

    for (w = 0; w < NGX_PLATFORM_WORKERS_MAX; w++) {
        for (i = 0; shm->workers[w].pid && i < 2; i++) {
            g = &shm->workers[w].pg[i];

            if (g->configured) {
                p = ngx_sprintf(p, "platform_pg_in_flight{worker=\"%ui\","
                                   "pool=\"%s\"} %uA\n",
                                w, ngx_platform_pg_pool_names[i],
                                g->in_flight);
            }
        }
    }

    p = ngx_sprintf(p,
                    "# HELP platform_pg_waiting Requests waiting for room "
                    "on a PostgreSQL connection, per worker and pool.\n"
                    "# TYPE platform_pg_waiting gauge\n");

    for (w = 0; w < NGX_PLATFORM_WORKERS_MAX; w++) {
        for (i = 0; shm->workers[w].pid && i < 2; i++) {
            g = &shm->workers[w].pg[i];

            if (g->configured) {
                p = ngx_sprintf(p, "platform_pg_waiting{worker=\"%ui\","
                                   "pool=\"%s\"} %uA\n",
                                w, ngx_platform_pg_pool_names[i],
                                g->waiting);
            }
        }
    }

    p = ngx_sprintf(p,
                    "# HELP platform_redis_connected Whether the worker's "
                    "Redis connection is up.\n"
                    "# TYPE platform_redis_connected gauge\n");

    for (w = 0; w < NGX_PLATFORM_WORKERS_MAX; w++) {
        if (shm->workers[w].pid) {
            p = ngx_sprintf(p, "platform_redis_connected{worker=\"%ui\"} "
                               "%uA\n",
                            w, shm->workers[w].redis_connected);
        }
    }

    /*
     * Last: a histogram that counts its first request while this runs
     * may find no room left, but never writes past the buffer.
     */

    p = ngx_slprintf(p, last,
                    "# HELP platform_request_duration_seconds Time from a "
                    "request's first byte to its log phase, by family and "
                    "status class.\n"
                    "# TYPE platform_request_duration_seconds histogram\n");

    for (f = 0; ngx_platform_families[f]; f++) {
        for (i = 0; i < NGX_PLATFORM_CLASSES; i++) {
            *ngx_snprintf(labels, sizeof(labels) - 1,
                          "family=\"%V\",class=\"%uixx\"",
                          &ngx_platform_families[f]->name, i + 1) = '\0';

            p = ngx_platform_metrics_histogram(p, last,
                                         "platform_request_duration_seconds",
                                         labels, &shm->durations[f][i]);
        }
    }

    p = ngx_slprintf(p, last,
                    "# HELP platform_backend_duration_seconds Round trips "
                    "to PostgreSQL (a request's statements, to their sync "
                    "point) and Redis (a command, to its reply).\n"
                    "# TYPE platform_backend_duration_seconds histogram\n");

    for (i = 0; i < NGX_PLATFORM_H_MAX; i++) {
        p = ngx_platform_metrics_histogram(p, last,
                                         "platform_backend_duration_seconds",
                                         (u_char *)
                                         ngx_platform_round_trip_labels[i],
                                         &shm->round_trips[i]);
    }

    return ngx_platform_send_body(r, NGX_HTTP_OK, &type, start, p - start);
}


static ngx_uint_t
ngx_platform_metrics_observed(ngx_platform_shm_histogram_t *h)
{
    ngx_uint_t  i;

    for (i = 0; i <= NGX_PLATFORM_BUCKETS_MAX; i++) {
        if (h->buckets[i]) {
            return 1;
        }
    }

    return 0;
}


/* the Prometheus lines of one histogram: cumulative buckets, sum, count */

static u_char *
ngx_platform_metrics_histogram(u_char *p, u_char *last, char *name,
    u_char *labels, ngx_platform_shm_histogram_t *h)
{
    ngx_uint_t         i, n;
    ngx_atomic_uint_t  counts[NGX_PLATFORM_BUCKETS_MAX + 1], total, sum;

    n = ngx_min(ngx_platform_shm->nbuckets, NGX_PLATFORM_BUCKETS_MAX);

    /* one reading of each bucket, so that the lines agree with each other */

    total = 0;

    for (i = 0; i < n; i++) {
        counts[i] = h->buckets[i];
        total += counts[i];
    }

    total += h->buckets[NGX_PLATFORM_BUCKETS_MAX];
    sum = h->sum;

    if (total == 0) {
        return p;
    }

    total = 0;

    for (i = 0; i < n; i++) {
        total += counts[i];

        p = ngx_slprintf(p, last, "%s_bucket{%s,le=\"", name, labels);
        p = ngx_platform_metrics_seconds(p, last, ngx_platform_shm->bounds[i]);
        p = ngx_slprintf(p, last, "\"} %uA\n", total);
    }

    /* re-read: observations since then are in +Inf */

    total += h->buckets[NGX_PLATFORM_BUCKETS_MAX];

    p = ngx_slprintf(p, last, "%s_bucket{%s,le=\"+Inf\"} %uA\n"
                              "%s_sum{%s} ",
                     name, labels, total, name, labels);
    p = ngx_platform_metrics_seconds(p, last, sum);

    return ngx_slprintf(p, last, "\n%s_count{%s} %uA\n", name, labels, total);
}


/* milliseconds as seconds: 2500 is "2.5", 1 is "0.001" */

static u_char *
ngx_platform_metrics_seconds(u_char *p, u_char *last, ngx_atomic_uint_t ms)
{
    p = ngx_slprintf(p, last, "%uA", ms / 1000);

    if (ms % 1000 == 0) {
        return p;
    }

    p = ngx_slprintf(p, last, ".%03uA", ms % 1000);

    while (p[-1] == '0') {
        p--;
    }

    return p;
}


/* the gauges of this worker: every second, and when it answers metrics */

static void
ngx_platform_metrics_gauges(void)
{
    ngx_uint_t               i;
    ngx_platform_shm_pg_t   *g;
    ngx_platform_pg_stats_t  stats;

    if (ngx_platform_shm == NULL || ngx_worker >= NGX_PLATFORM_WORKERS_MAX) {
        return;
    }

    ngx_platform_shm->workers[ngx_worker].pid = ngx_pid;
    ngx_platform_shm->workers[ngx_worker].redis_connected =
                                               ngx_platform_redis_connected();

    for (i = 0; i < 2; i++) {
        ngx_platform_pg_stats(i, &stats);

        g = &ngx_platform_shm->workers[ngx_worker].pg[i];

        g->configured = stats.configured;
        g->idle = stats.idle;
        g->busy = stats.busy;
        g->in_flight = stats.in_flight;
        g->waiting = stats.waiting;
    }
}


void
ngx_platform_metric_inc(ngx_uint_t metric)
{
    if (ngx_platform_shm && metric < NGX_PLATFORM_M_MAX) {
        (void) ngx_atomic_fetch_add(&ngx_platform_shm->counters[metric], 1);
    }
}


/* a round trip to a backend: NGX_PLATFORM_H_* */

void
ngx_platform_metrics_observe(ngx_uint_t histogram, ngx_msec_t ms)
{
    if (ngx_platform_shm && histogram < NGX_PLATFORM_H_MAX) {
        ngx_platform_metrics_count(&ngx_platform_shm->round_trips[histogram],
                                   ms);
    }
}


static void
ngx_platform_metrics_count(ngx_platform_shm_histogram_t *h, ngx_msec_t ms)
{
    ngx_uint_t  i, n;

    n = ngx_min(ngx_platform_shm->nbuckets, NGX_PLATFORM_BUCKETS_MAX);

    for (i = 0; i < n; i++) {
        if (ms <= ngx_platform_shm->bounds[i]) {
            break;
        }
    }

    /* i == n: past the last bound */

    if (i == n) {
        i = NGX_PLATFORM_BUCKETS_MAX;
    }

    (void) ngx_atomic_fetch_add(&h->buckets[i], 1);
    (void) ngx_atomic_fetch_add(&h->sum, ms);
}


/* log phase: count every request a platform location answered */

ngx_int_t
ngx_platform_metrics_log_handler(ngx_http_request_t *r)
{
    ngx_uint_t           f, s, status;
    ngx_time_t          *tp;
    ngx_msec_int_t       ms;
    ngx_platform_ctx_t  *ctx;

    if (ngx_platform_shm == NULL) {
        return NGX_OK;
    }

    ctx = ngx_http_get_module_ctx(r, ngx_platform_module);
    if (ctx == NULL || ctx->family == NULL) {
        return NGX_OK;
    }

    for (f = 0; ngx_platform_families[f]; f++) {
        if (ngx_platform_families[f] == ctx->family) {
            break;
        }
    }

    if (ngx_platform_families[f] == NULL || f >= NGX_PLATFORM_FAMILIES_MAX) {
        return NGX_OK;
    }

    status = r->headers_out.status;

    if (r->connection->error && !r->header_sent) {
        status = NGX_HTTP_CLIENT_CLOSED_REQUEST;
    }

    for (s = 0; s < NGX_PLATFORM_STATUSES - 1; s++) {
        if (ngx_platform_statuses[s] == status) {
            break;
        }
    }

    (void) ngx_atomic_fetch_add(&ngx_platform_shm->requests[f][s], 1);

    if (status < 100 || status > 599) {
        return NGX_OK;
    }

    /* as $request_time */

    tp = ngx_timeofday();

    ms = (ngx_msec_int_t) ((tp->sec - r->start_sec) * 1000
                           + (tp->msec - r->start_msec));

    ngx_platform_metrics_count(&ngx_platform_shm->durations[f][status / 100
                                                                 - 1],
                               (ngx_msec_t) ngx_max(ms, 0));

    return NGX_OK;
}


ngx_int_t
ngx_platform_metrics_add_zone(ngx_conf_t *cf)
{
    ngx_str_t        name;
    ngx_shm_zone_t  *shm_zone;

    ngx_str_set(&name, "platform_metrics");

    shm_zone = ngx_shared_memory_add(cf, &name, NGX_PLATFORM_SHM_SIZE,
                                     &ngx_platform_module);
    if (shm_zone == NULL) {
        return NGX_ERROR;
    }

    shm_zone->init = ngx_platform_metrics_init_zone;
    shm_zone->noreuse = 0;

    /* for the zone's init: the bounds of this configuration */
    shm_zone->data = ngx_http_conf_get_module_main_conf(cf,
                                                        ngx_platform_module);

    return NGX_OK;
}


static ngx_int_t
ngx_platform_metrics_init_zone(ngx_shm_zone_t *shm_zone, void *data)
{
    ngx_slab_pool_t           *shpool;
    ngx_platform_shm_t        *shm;
    ngx_platform_main_conf_t  *pmcf;

    pmcf = shm_zone->data;
    shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;

    if (data) {
        /* reload: keep the counters of the previous cycle */
        shm = data;

    } else if (shm_zone->shm.exists) {
        shm = shpool->data;

    } else {
        shm = ngx_slab_calloc(shpool, sizeof(ngx_platform_shm_t));
        if (shm == NULL) {
            return NGX_ERROR;
        }

        shpool->data = shm;
    }

    shm_zone->data = shm;
    ngx_platform_shm = shm;

    ngx_platform_metrics_set_bounds(shm, pmcf);

    return NGX_OK;
}


/*
 * Counts kept under other bounds mean nothing under these: a reload that
 * changes the bounds starts the histograms again.
 */

static void
ngx_platform_metrics_set_bounds(ngx_platform_shm_t *shm,
    ngx_platform_main_conf_t *pmcf)
{
    ngx_uint_t  i;

    if (shm->nbuckets == pmcf->nbuckets) {
        for (i = 0; i < pmcf->nbuckets; i++) {
            if (shm->bounds[i] != pmcf->buckets[i]) {
                break;
            }
        }

        if (i == pmcf->nbuckets) {
            return;
        }
    }

    ngx_memzero(shm->durations, sizeof(shm->durations));
    ngx_memzero(shm->round_trips, sizeof(shm->round_trips));

    for (i = 0; i < pmcf->nbuckets; i++) {
        shm->bounds[i] = pmcf->buckets[i];
    }

    shm->nbuckets = pmcf->nbuckets;
}


static void
ngx_platform_metrics_gauges_timer(ngx_event_t *ev)
{
    ngx_platform_metrics_gauges();

    if (!ngx_exiting) {
        ngx_add_timer(ev, 1000);
    }
}


void
ngx_platform_metrics_init_process(ngx_cycle_t *cycle)
{
    static ngx_event_t       ev;
    static ngx_connection_t  dumb;

    ngx_platform_metrics_gauges();

    if (ngx_platform_shm == NULL) {
        return;
    }

    /*
     * nginx's timer debug lines read the fd of ev.data as a connection's:
     * a dummy one, as nginx's cache manager has
     */

    dumb.fd = (ngx_socket_t) -1;

    ev.handler = ngx_platform_metrics_gauges_timer;
    ev.data = &dumb;
    ev.log = cycle->log;

    /* cancelable: it must not hold up a graceful exit */
    ev.cancelable = 1;

    ngx_add_timer(&ev, 1000);
}


/* platform_metrics_buckets <time> ...: the histograms' upper bounds */

char *
ngx_platform_metrics_buckets(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_platform_main_conf_t *pmcf = conf;

    ngx_int_t   ms;
    ngx_str_t  *value;
    ngx_uint_t  i, n;

    if (pmcf->nbuckets) {
        return "is duplicate";
    }

    value = cf->args->elts;
    n = cf->args->nelts - 1;

    if (n > NGX_PLATFORM_BUCKETS_MAX) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"%V\" takes at most %d bounds, not %ui",
                           &cmd->name, NGX_PLATFORM_BUCKETS_MAX, n);
        return NGX_CONF_ERROR;
    }

    for (i = 0; i < n; i++) {
        ms = ngx_platform_metrics_parse_bound(&value[i + 1]);

        if (ms == NGX_ERROR) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid bound \"%V\": a time in "
                               "milliseconds or seconds, as \"250ms\" "
                               "or \"2.5s\"", &value[i + 1]);
            return NGX_CONF_ERROR;
        }

        if (ms == NGX_DECLINED) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "bound \"%V\" is not a whole number of "
                               "milliseconds, the resolution of the "
                               "histograms", &value[i + 1]);
            return NGX_CONF_ERROR;
        }

        if (ms == 0 || ms > 3600000) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "bound \"%V\" is out of range: 1ms to 1h",
                               &value[i + 1]);
            return NGX_CONF_ERROR;
        }

        if (i > 0 && (ngx_msec_t) ms <= pmcf->buckets[i - 1]) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "bound \"%V\" is not above \"%V\": "
                               "bounds must increase",
                               &value[i + 1], &value[i]);
            return NGX_CONF_ERROR;
        }

        pmcf->buckets[i] = (ngx_msec_t) ms;
    }

    pmcf->nbuckets = n;

    return NGX_CONF_OK;
}


/*
 * "250ms", "2.5s", "1s": milliseconds; NGX_DECLINED: a fraction of a
 * millisecond; NGX_ERROR: not such a time
 */

static ngx_int_t
ngx_platform_metrics_parse_bound(ngx_str_t *value)
{
    u_char     *p, *end;
    ngx_int_t   whole, frac, scale, unit;

    p = value->data;
    end = p + value->len;

    if (value->len > 2 && ngx_strncmp(end - 2, "ms", 2) == 0) {
        unit = 1;
        end -= 2;

    } else if (value->len > 1 && end[-1] == 's') {
        unit = 1000;
        end -= 1;

    } else {
        return NGX_ERROR;
    }

    whole = 0;
    frac = 0;
    scale = 1;

    if (p == end || *p < '0' || *p > '9') {
        return NGX_ERROR;
    }

    while (p < end && *p >= '0' && *p <= '9') {
        if (whole > 3600000) {
            return NGX_ERROR;
        }

        whole = whole * 10 + (*p++ - '0');
    }

    if (p < end && *p == '.') {
        p++;

        if (p == end) {
            return NGX_ERROR;
        }

        while (p < end && *p >= '0' && *p <= '9') {
            if (scale >= 1000000) {
                return NGX_ERROR;
            }

            frac = frac * 10 + (*p++ - '0');
            scale *= 10;
        }
    }

    if (p != end) {
        return NGX_ERROR;
    }

    if (frac * unit % scale) {
        return NGX_DECLINED;
    }

    return whole * unit + frac * unit / scale;
}


void
ngx_platform_metrics_init_buckets(ngx_platform_main_conf_t *pmcf)
{
    ngx_uint_t  i;

    if (pmcf->nbuckets) {
        return;
    }

    pmcf->nbuckets = sizeof(ngx_platform_default_buckets)
                     / sizeof(ngx_msec_t);

    for (i = 0; i < pmcf->nbuckets; i++) {
        pmcf->buckets[i] = ngx_platform_default_buckets[i];
    }
}
