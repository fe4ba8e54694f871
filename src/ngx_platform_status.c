
/*
 * ngx_platform: operations endpoints.
 *
 * platform_health answers whether PostgreSQL and Redis answer right now
 * (a real SELECT 1 through the pool and a PING, both at once);
 * platform_metrics answers the metrics store (ngx_platform_metrics.c) in
 * Prometheus text format, with the gauges of each worker's pools, which
 * every worker samples here once a second.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_platform.h"
#include "ngx_platform_op.h"
#include "ngx_platform_metrics.h"


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
static ngx_uint_t ngx_platform_metrics_observed(
    ngx_platform_shm_histogram_t *h);
static u_char *ngx_platform_metrics_histogram(u_char *p, u_char *last,
    char *name, u_char *labels, ngx_platform_shm_histogram_t *h);
static u_char *ngx_platform_metrics_seconds(u_char *p, u_char *last,
    ngx_atomic_uint_t ms);
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

    shm = ngx_platform_metrics_zone;
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

            if (ngx_platform_metrics_statuses[s]) {
                p = ngx_sprintf(p, "platform_requests_total{family=\"%V\","
                                   "status=\"%ui\"} %ui\n",
                                &ngx_platform_families[f]->name,
                                ngx_platform_metrics_statuses[s], n);

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

    n = ngx_min(ngx_platform_metrics_zone->nbuckets, NGX_PLATFORM_BUCKETS_MAX);

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
        p = ngx_platform_metrics_seconds(p, last, ngx_platform_metrics_zone->bounds[i]);
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

    if (ngx_platform_metrics_zone == NULL || ngx_worker >= NGX_PLATFORM_WORKERS_MAX) {
        return;
    }

    ngx_platform_metrics_zone->workers[ngx_worker].pid = ngx_pid;
    ngx_platform_metrics_zone->workers[ngx_worker].redis_connected =
                                               ngx_platform_redis_connected();

    for (i = 0; i < 2; i++) {
        ngx_platform_pg_stats(i, &stats);

        g = &ngx_platform_metrics_zone->workers[ngx_worker].pg[i];

        g->configured = stats.configured;
        g->idle = stats.idle;
        g->busy = stats.busy;
        g->in_flight = stats.in_flight;
        g->waiting = stats.waiting;
    }
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

    if (ngx_platform_metrics_zone == NULL) {
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


