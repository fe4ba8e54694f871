
/*
 * ngx_platform: the metrics store. Counters, request and round-trip
 * histograms and their bounds (platform_metrics_buckets) live in a shared
 * memory zone, so that every worker reports the same totals and they
 * survive a reload. The transports, runners and the request core feed
 * it; ngx_platform_prometheus.c reads it. It uses nothing above the
 * floor.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_platform.h"
#include "ngx_platform_metrics.h"


static void ngx_platform_metrics_count(ngx_platform_shm_histogram_t *h,
    ngx_msec_t ms);
static ngx_int_t ngx_platform_metrics_init_zone(ngx_shm_zone_t *shm_zone,
    void *data);
static void ngx_platform_metrics_set_bounds(ngx_platform_shm_t *shm,
    ngx_platform_main_conf_t *pmcf);
static ngx_int_t ngx_platform_metrics_parse_bound(ngx_str_t *value);


ngx_platform_shm_t  *ngx_platform_metrics_zone;


/* platform_metrics_buckets' default: 1 ms to 5 s */

static ngx_msec_t  ngx_platform_default_buckets[] = {
    1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000
};


ngx_uint_t  ngx_platform_metrics_statuses[NGX_PLATFORM_STATUSES] = {
    200, 201, 204, 304, 400, 401, 403, 404, 405, 409, 413, 415, 429, 499,
    500, 502, 503, 504, 0
};


void
ngx_platform_metric_inc(ngx_uint_t metric)
{
    ngx_platform_shm_t  *shm;

    shm = ngx_platform_metrics_zone;

    if (shm && metric < NGX_PLATFORM_M_MAX) {
        (void) ngx_atomic_fetch_add(&shm->counters[metric], 1);
    }
}


void
ngx_platform_metrics_limited(ngx_platform_family_t *family, ngx_uint_t kind)
{
    ngx_platform_shm_t  *shm;

    shm = ngx_platform_metrics_zone;

    if (shm && family && family->index < NGX_PLATFORM_FAMILIES_MAX
        && kind < NGX_PLATFORM_RL_KINDS)
    {
        (void) ngx_atomic_fetch_add(&shm->limited[family->index][kind], 1);
    }
}

/* a round trip to a backend: NGX_PLATFORM_H_* */

void
ngx_platform_metrics_observe(ngx_uint_t histogram, ngx_msec_t ms)
{
    ngx_platform_shm_t  *shm;

    shm = ngx_platform_metrics_zone;

    if (shm && histogram < NGX_PLATFORM_H_MAX) {
        ngx_platform_metrics_count(&shm->round_trips[histogram], ms);
    }
}

static void
ngx_platform_metrics_count(ngx_platform_shm_histogram_t *h, ngx_msec_t ms)
{
    ngx_uint_t  i, n;

    n = ngx_min(ngx_platform_metrics_zone->nbuckets, NGX_PLATFORM_BUCKETS_MAX);

    for (i = 0; i < n; i++) {
        if (ms <= ngx_platform_metrics_zone->bounds[i]) {
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
    ngx_platform_shm_t  *shm;

    shm = ngx_platform_metrics_zone;

    if (shm == NULL) {
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
        if (ngx_platform_metrics_statuses[s] == status) {
            break;
        }
    }

    (void) ngx_atomic_fetch_add(&shm->requests[f][s], 1);

    if (status < 100 || status > 599) {
        return NGX_OK;
    }

    /* as $request_time */

    tp = ngx_timeofday();

    ms = (ngx_msec_int_t) ((tp->sec - r->start_sec) * 1000
                           + (tp->msec - r->start_msec));

    ngx_platform_metrics_count(&ngx_platform_metrics_zone
                                    ->durations[f][status / 100 - 1],
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
    ngx_platform_metrics_zone = shm;

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
