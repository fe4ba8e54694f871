
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
 * data is what the caller gave. rc is NGX_OK (reply is the command's
 * reply, possibly REDIS_REPLY_ERROR), NGX_PLATFORM_UNAVAILABLE or
 * NGX_PLATFORM_TIMEOUT (reply is NULL). hiredis frees reply after the
 * handler returns.
 */
typedef void (*ngx_platform_redis_handler_pt)(void *data, redisReply *reply,
    ngx_int_t rc);


/*
 * Sends a command. pool is the caller's (a request's): when it is
 * destroyed the command is detached and its reply dropped; log names the
 * caller in log lines. Returns NGX_DONE when the handler will be called
 * (never before this returns), NGX_PLATFORM_UNAVAILABLE when Redis is
 * not connected, or NGX_ERROR.
 */
ngx_int_t ngx_platform_redis_command(ngx_pool_t *pool, ngx_log_t *log,
    ngx_platform_redis_handler_pt handler, void *data, int argc,
    const char **argv, const size_t *argvlen);

/*
 * Runs a Lua script with EVALSHA, falling back to EVAL once on NOSCRIPT.
 * argv holds the keys first, then the arguments; they are copied.
 */
typedef struct {
    char                      *source;
    char                       sha1[41];   /* computed on first use */

    /*
     * The integer reply, if any, that reports a write which must survive
     * a failover: it is held until platform_redis_wait_replicas replicas
     * have the write (WAIT), else the caller gets NGX_PLATFORM_UNAVAILABLE
     */
    long long                  durable;
} ngx_platform_redis_script_t;

ngx_int_t ngx_platform_redis_eval(ngx_pool_t *pool, ngx_log_t *log,
    ngx_platform_redis_script_t *script, int nkeys, int argc,
    const char **argv, const size_t *argvlen,
    ngx_platform_redis_handler_pt handler, void *data);

/*
 * "nginx -t": platform_redis is well-formed, and a host name in it has a
 * "resolver" in the http block to be resolved with. Called from the main
 * conf's init, once the locations are known.
 */
char *ngx_platform_redis_check_conf(ngx_conf_t *cf,
    ngx_platform_main_conf_t *pmcf);

/*
 * platform_redis_sentinel MASTER HOST:PORT ... [password=FILE]
 * [sentinel_password=FILE]
 */
char *ngx_platform_redis_sentinel_conf(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);

/* platform_redis_cluster HOST:PORT ...: the seed nodes */
char *ngx_platform_redis_cluster_conf(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);

ngx_int_t ngx_platform_redis_init_process(ngx_cycle_t *cycle,
    ngx_platform_main_conf_t *pmcf);
void ngx_platform_redis_exit_process(ngx_cycle_t *cycle,
    ngx_platform_main_conf_t *pmcf);

/* for health and metrics: with a cluster, every slot has its master */
ngx_uint_t ngx_platform_redis_connected(void);

/* the server of key is connected: with a cluster, its slot's master */
ngx_uint_t ngx_platform_redis_key_connected(u_char *key, size_t len);


#endif /* _NGX_PLATFORM_REDIS_H_INCLUDED_ */
