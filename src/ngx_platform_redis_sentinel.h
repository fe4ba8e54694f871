
/*
 * ngx_platform: Redis behind Sentinel, followed per worker: the master's
 * address asked of the sentinels, and asked again on a failover.
 */


#ifndef _NGX_PLATFORM_REDIS_SENTINEL_H_INCLUDED_
#define _NGX_PLATFORM_REDIS_SENTINEL_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_platform_redis_node.h"


/*
 * Connects to the sentinels and keeps master (created, not connected)
 * pointed at the master they name.
 */
ngx_int_t ngx_platform_redis_sentinel_init(ngx_cycle_t *cycle,
    ngx_platform_main_conf_t *pmcf, ngx_platform_redis_node_t *master);
void ngx_platform_redis_sentinel_exit(void);

/* nginx -t: the sentinels' addresses are well-formed */
char *ngx_platform_redis_sentinel_check_conf(ngx_conf_t *cf,
    ngx_platform_main_conf_t *pmcf);


#endif /* _NGX_PLATFORM_REDIS_SENTINEL_H_INCLUDED_ */
