
/*
 * ngx_platform: Redis on the nginx event loop, one multiplexed hiredis
 * async connection per worker.
 */


#ifndef _NGX_PLATFORM_REDIS_H_INCLUDED_
#define _NGX_PLATFORM_REDIS_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <hiredis/hiredis.h>
#include <hiredis/async.h>

#include "ngx_platform.h"


/*
 * rc is NGX_OK (reply is the command's reply, possibly REDIS_REPLY_ERROR),
 * NGX_PLATFORM_UNAVAILABLE or NGX_PLATFORM_TIMEOUT (reply is NULL).
 * hiredis frees reply after the handler returns. The handler ends the
 * request with ngx_platform_finalize() or issues another command.
 */
typedef void (*ngx_platform_redis_handler_pt)(ngx_http_request_t *r,
    redisReply *reply, ngx_int_t rc);


/*
 * Sends a command. Returns NGX_DONE when the handler will be called (the
 * request's count was taken) or NGX_PLATFORM_UNAVAILABLE when Redis is not
 * connected.
 */
ngx_int_t ngx_platform_redis_command(ngx_http_request_t *r,
    ngx_platform_redis_handler_pt handler, int argc, const char **argv,
    const size_t *argvlen);

/*
 * Runs a Lua script with EVALSHA, falling back to EVAL once on NOSCRIPT.
 * argv holds the keys first, then the arguments.
 */
typedef struct {
    char                      *source;
    char                       sha1[41];   /* computed on first use */
} ngx_platform_redis_script_t;

ngx_int_t ngx_platform_redis_eval(ngx_http_request_t *r,
    ngx_platform_redis_script_t *script, int nkeys, int argc,
    const char **argv, const size_t *argvlen,
    ngx_platform_redis_handler_pt handler);

ngx_int_t ngx_platform_redis_init_process(ngx_cycle_t *cycle,
    ngx_platform_main_conf_t *pmcf);
void ngx_platform_redis_exit_process(ngx_cycle_t *cycle,
    ngx_platform_main_conf_t *pmcf);

/* for health and metrics */
ngx_uint_t ngx_platform_redis_connected(void);


#endif /* _NGX_PLATFORM_REDIS_H_INCLUDED_ */
