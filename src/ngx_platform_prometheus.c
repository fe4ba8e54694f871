
/*
 * ngx_platform: platform_metrics answers the metrics store
 * (ngx_platform_metrics.c) in Prometheus text format, with the gauges of
 * each worker's pools, which every worker samples here once a second.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_platform.h"
#include "ngx_platform_op.h"
#include "ngx_platform_metrics.h"


static ngx_int_t ngx_platform_metrics(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);
static u_char *ngx_platform_metrics_counters(u_char *p,
    ngx_platform_shm_t *shm);
static u_char *ngx_platform_metrics_pools(u_char *p, ngx_platform_shm_t *shm);
static u_char *ngx_platform_metrics_histograms(u_char *p, u_char *last,
    ngx_platform_shm_t *shm);
static ngx_uint_t ngx_platform_metrics_observed(
    ngx_platform_shm_histogram_t *h);
static u_char *ngx_platform_metrics_histogram(u_char *p, u_char *last,
    char *name, u_char *labels, ngx_platform_shm_histogram_t *h);
static u_char *ngx_platform_metrics_seconds(u_char *p, u_char *last,
    ngx_atomic_uint_t ms);
static void ngx_platform_metrics_gauges(void);
static void ngx_platform_metrics_gauges_timer(ngx_event_t *ev);


static ngx_platform_endpoint_t  ngx_platform_metrics_endpoints[] = {
    { NGX_HTTP_GET, "*", NGX_PLATFORM_AUTH_NONE, 0, NULL, NULL, NULL, NULL,
      NULL, ngx_platform_metrics,
      NULL },
    { 0, NULL, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL }
};


ngx_platform_family_t  ngx_platform_metrics_family = {
    ngx_string("metrics"),
    NGX_PLATFORM_ENVELOPE_B,
    0,
    ngx_platform_metrics_endpoints,
    NULL,
    0,
    NULL,
    NULL
};


static char  *ngx_platform_pg_pool_names[2] = { "primary", "read" };


/* a gauge of the pools: which field of a worker's pool, with what label */

typedef struct {
    char                      *name;
    char                      *help;     /* NULL: the row above's metric */
    char                      *state;    /* more labels, or "" */
    size_t                     offset;   /* in ngx_platform_shm_pg_t */
} ngx_platform_pool_gauge_t;


static ngx_platform_pool_gauge_t  ngx_platform_pool_gauges[] = {

    { "platform_pg_connections",
      "PostgreSQL connections of each worker, by pool and state (idle: "
      "nothing in flight).",
      ",state=\"idle\"", offsetof(ngx_platform_shm_pg_t, idle) },

    { "platform_pg_connections", NULL,
      ",state=\"busy\"", offsetof(ngx_platform_shm_pg_t, busy) },

    { "platform_pg_in_flight",
      "Statements sent on the PostgreSQL connections of each worker and "
      "not yet answered, by pool.",
      "", offsetof(ngx_platform_shm_pg_t, in_flight) },

    { "platform_pg_waiting",
      "Requests waiting for room on a PostgreSQL connection, per worker "
      "and pool.",
      "", offsetof(ngx_platform_shm_pg_t, waiting) },

    { NULL, NULL, NULL, 0 }
};


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
      "Statements run again after a serialization failure or deadlock." },
    { "platform_rate_limit_local_total",
      "Rate limit decisions a worker took alone because Redis could not "
      "answer." },

    /* platform_body_memory */
    { "platform_body_memory_refused_total",
      "Requests refused because their body did not fit in "
      "platform_body_memory beside those held." },

    /* platform_pg_tenant_share */
    { "platform_pg_over_share_total",
      "Requests refused because their tenant or client address held its "
      "share of the pool." },

    /* platform_redis_sentinel */
    { "platform_redis_master_switches_total",
      "Times a worker pointed its Redis connection at the master the "
      "sentinels named: at start and after each failover." }
};


static char  *ngx_platform_rate_limit_kinds[NGX_PLATFORM_RL_KINDS] = {
    "tenant", "credential", "address", "bureau"
};


static ngx_int_t
ngx_platform_metrics(ngx_http_request_t *r, ngx_platform_ctx_t *ctx)
{
    u_char              *p, *start, *last;
    size_t               size;
    ngx_uint_t           f, i, histograms;
    ngx_platform_shm_t  *shm;

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
           + NGX_PLATFORM_FAMILIES_MAX * NGX_PLATFORM_RL_KINDS * 96
           + NGX_PLATFORM_WORKERS_MAX * 12 * 96
           + (histograms + 4) * (NGX_PLATFORM_BUCKETS_MAX + 3) * 192;

    start = ngx_pnalloc(r->pool, size);
    if (start == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    last = start + size;

    p = ngx_platform_metrics_counters(start, shm);
    p = ngx_platform_metrics_pools(p, shm);

    /*
     * Last: a histogram that counts its first request while this runs
     * may find no room left, but never writes past the buffer.
     */

    p = ngx_platform_metrics_histograms(p, last, shm);

    return ngx_platform_send_body(r, NGX_HTTP_OK, &type, start, p - start);
}


/* the requests by family and status, then the counters of the store */

static u_char *
ngx_platform_metrics_counters(u_char *p, ngx_platform_shm_t *shm)
{
    ngx_uint_t  f, s, k, m, n;

    p = ngx_sprintf(p,
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

    p = ngx_sprintf(p,
                    "# HELP platform_rate_limited_total Requests refused "
                    "with 429 by a rate limit, by family and the kind of "
                    "the limit.\n"
                    "# TYPE platform_rate_limited_total counter\n");

    for (f = 0; ngx_platform_families[f]; f++) {
        for (k = 0; k < NGX_PLATFORM_RL_KINDS; k++) {
            n = shm->limited[f][k];
            if (n == 0) {
                continue;
            }

            p = ngx_sprintf(p, "platform_rate_limited_total{family=\"%V\","
                               "kind=\"%s\"} %ui\n",
                            &ngx_platform_families[f]->name,
                            ngx_platform_rate_limit_kinds[k], n);
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

    return p;
}


/* the gauges of every worker's pools: one table row, one metric's lines */

static u_char *
ngx_platform_metrics_pools(u_char *p, ngx_platform_shm_t *shm)
{
    ngx_uint_t                   w, i;
    ngx_atomic_t                *v;
    ngx_platform_shm_pg_t       *g;
    ngx_platform_pool_gauge_t   *gauge;

    for (gauge = ngx_platform_pool_gauges; gauge->name; gauge++) {

        if (gauge->help) {
            p = ngx_sprintf(p, "# HELP %s %s\n# TYPE %s gauge\n",
                            gauge->name, gauge->help, gauge->name);
        }

        for (w = 0; w < NGX_PLATFORM_WORKERS_MAX; w++) {
            for (i = 0; shm->workers[w].pid && i < 2; i++) {
                g = &shm->workers[w].pg[i];

                if (!g->configured) {
                    continue;
                }

                v = (ngx_atomic_t *) ((u_char *) g + gauge->offset);

                p = ngx_sprintf(p, "%s{worker=\"%ui\",pool=\"%s\"%s} %uA\n",
                                gauge->name, w, ngx_platform_pg_pool_names[i],
                                gauge->state, *v);
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

    p = ngx_sprintf(p,
                    "# HELP platform_body_memory_bytes Bytes of "
                    "platform_body_memory held by each worker's requests.\n"
                    "# TYPE platform_body_memory_bytes gauge\n");

    for (w = 0; w < NGX_PLATFORM_WORKERS_MAX; w++) {
        if (shm->workers[w].pid) {
            p = ngx_sprintf(p, "platform_body_memory_bytes{worker=\"%ui\"} "
                               "%uA\n",
                            w, shm->workers[w].body_reserved);
        }
    }

    return p;
}


static u_char *
ngx_platform_metrics_histograms(u_char *p, u_char *last,
    ngx_platform_shm_t *shm)
{
    ngx_uint_t  f, i;
    u_char      labels[128];

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

    return p;
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
        p = ngx_platform_metrics_seconds(p, last,
                                         ngx_platform_metrics_zone->bounds[i]);
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

    if (ngx_platform_metrics_zone == NULL
        || ngx_worker >= NGX_PLATFORM_WORKERS_MAX)
    {
        return;
    }

    ngx_platform_metrics_zone->workers[ngx_worker].pid = ngx_pid;
    ngx_platform_metrics_zone->workers[ngx_worker].redis_connected =
                                               ngx_platform_redis_connected();
    ngx_platform_metrics_zone->workers[ngx_worker].body_reserved =
                                               ngx_platform_body_reserved();

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


