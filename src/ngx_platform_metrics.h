
/*
 * ngx_platform: the metrics store's shared zone, for the code that
 * writes the metrics endpoint and the gauges.
 */


#ifndef _NGX_PLATFORM_METRICS_H_INCLUDED_
#define _NGX_PLATFORM_METRICS_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>

#include "ngx_platform.h"


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

    /* requests refused with 429 by a rate limit, by family and its kind */
    ngx_atomic_t                 limited[NGX_PLATFORM_FAMILIES_MAX]
                                        [NGX_PLATFORM_RL_KINDS];

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

        /* bytes of platform_body_memory held */
        ngx_atomic_t             body_reserved;
    }                            workers[NGX_PLATFORM_WORKERS_MAX];
} ngx_platform_shm_t;


/* the zone of this cycle, NULL before it is mapped */
extern ngx_platform_shm_t  *ngx_platform_metrics_zone;

/* the statuses counted one by one, by slot; the last slot (0) is other */
extern ngx_uint_t  ngx_platform_metrics_statuses[NGX_PLATFORM_STATUSES];


#endif /* _NGX_PLATFORM_METRICS_H_INCLUDED_ */
