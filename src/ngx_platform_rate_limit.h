
/*
 * ngx_platform: fleet-wide rate limits (platform_rate_limit,
 * platform_identity_bureau_rate), counted in Redis with GCRA.
 */


#ifndef _NGX_PLATFORM_RATE_LIMIT_H_INCLUDED_
#define _NGX_PLATFORM_RATE_LIMIT_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_platform.h"


/* the details of a 429 (French texts: ngx_platform_texts.c) */
#define NGX_PLATFORM_RL_DETAIL                                               \
    "The rate limit is reached. Retry after the time Retry-After gives."
#define NGX_PLATFORM_RL_BUREAU_DETAIL                                        \
    "The tenant's budget of credit bureau calls is spent. Retry after the "  \
    "time Retry-After gives."


/* when a request's limits are checked */
#define NGX_PLATFORM_RL_ANONYMOUS   1     /* before authentication: address */
#define NGX_PLATFORM_RL_IDENTIFIED  2     /* after it: tenant, credential */


/*
 * One declared limit. GCRA: a request is allowed when the budget, burst
 * + 1 intervals of time, has room for one more interval.
 */
struct ngx_platform_rate_limit_s {
    ngx_uint_t                 kind;       /* NGX_PLATFORM_RL_* */
    ngx_uint_t                 rate;       /* requests per period */
    ngx_uint_t                 period;     /* seconds: 1 or 60 */
    ngx_uint_t                 burst;
    uint64_t                   interval;   /* microseconds per request */

    /* the script's arguments and the keys' end: "}:<interval>:<burst>" */
    ngx_str_t                  interval_text;
    ngx_str_t                  burst_text;
    ngx_str_t                  suffix;

    /* the RateLimit-Policy item: "tenant";q=100;w=1 */
    ngx_str_t                  policy;
};


/*
 * The limits of the request's location for the stage whose identity the
 * request has: NGX_OK (none applies, or all allow), 429 (recorded, with
 * ctx->retry_after), or NGX_DONE with the request counted: resume is
 * then called with NGX_OK or 429. The RateLimit header values of the
 * limits checked are left in ctx for every response.
 */
ngx_int_t ngx_platform_rate_limit(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx, ngx_uint_t stage, ngx_platform_resume_pt resume);

/* one limit for the identity id (a tenant's bureau budget), the same way */
ngx_int_t ngx_platform_rate_limit_one(ngx_http_request_t *r,
    ngx_platform_rate_limit_t *limit, ngx_str_t *id,
    ngx_platform_resume_pt resume);

/* platform_rate_limit KIND RATE [burst=N] */
char *ngx_platform_rate_limit_conf(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);

/* platform_identity_bureau_rate RATE [burst=N] | off */
char *ngx_platform_rate_limit_bureau_conf(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);

void ngx_platform_rate_limit_init_process(ngx_cycle_t *cycle);
void ngx_platform_rate_limit_exit_process(ngx_cycle_t *cycle);


#endif /* _NGX_PLATFORM_RATE_LIMIT_H_INCLUDED_ */
