
/*
 * ngx_platform: lines that a flood of requests would repeat (a pool that
 * refuses, keys and tokens refused, statements that run into a conflict,
 * Redis commands that fail) are limited per worker and kind: at most
 * NGX_PLATFORM_LOG_BURST lines a second, then one line saying how many
 * were left out, so that no client can fill the disk with the log.
 */


#include <ngx_config.h>
#include <ngx_core.h>

#include "ngx_platform.h"


/* lines of one kind written in one second, by one worker */
#define NGX_PLATFORM_LOG_BURST  10


typedef struct {
    const char                *what;      /* in the summary */
    time_t                     second;
    ngx_uint_t                 written;
    ngx_uint_t                 left_out;
} ngx_platform_log_kind_t;


static ngx_platform_log_kind_t  ngx_platform_log_kinds[NGX_PLATFORM_LOG_KINDS]
    = {
    { "PostgreSQL rejection", 0, 0, 0 },
    { "PostgreSQL conflict", 0, 0, 0 },
    { "API key refusal", 0, 0, 0 },
    { "bearer token refusal", 0, 0, 0 },
    { "webhook signature refusal", 0, 0, 0 },
    { "Redis command failure", 0, 0, 0 },
    { "body memory refusal", 0, 0, 0 },
};


/*
 * Whether a line of the kind may be written now, at level, to log; the
 * first line of a new second first says, at the same level, how many of
 * the kind were left out before it
 */

ngx_uint_t
ngx_platform_log_allowed(ngx_uint_t kind, ngx_uint_t level, ngx_log_t *log)
{
    time_t                    now;
    ngx_tm_t                  tm;
    ngx_platform_log_kind_t  *k;

    if (kind >= NGX_PLATFORM_LOG_KINDS) {
        return 1;
    }

    k = &ngx_platform_log_kinds[kind];
    now = ngx_time();

    if (k->second != now) {
        /* the cycle's log: the count is of no one request */

        if (k->left_out) {
            /* the second they were left out in, as the log's own times */
            ngx_localtime(k->second, &tm);

            ngx_log_error(level, ngx_cycle->log, 0,
                          "platform: %ui more lines of %s left out of "
                          "the log in the second of %02d:%02d:%02d",
                          k->left_out, k->what, tm.ngx_tm_hour,
                          tm.ngx_tm_min, tm.ngx_tm_sec);
        }

        k->second = now;
        k->written = 0;
        k->left_out = 0;
    }

    if (k->written < NGX_PLATFORM_LOG_BURST) {
        k->written++;
        return 1;
    }

    k->left_out++;

    return 0;
}
