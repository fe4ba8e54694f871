
/*
 * ngx_platform: a Redis Cluster, followed per worker: the slot map read
 * from the nodes (CLUSTER SLOTS), a node per master, redirections.
 */


#ifndef _NGX_PLATFORM_REDIS_CLUSTER_H_INCLUDED_
#define _NGX_PLATFORM_REDIS_CLUSTER_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_platform_redis_node.h"


#define NGX_PLATFORM_REDIS_SLOTS          16384

/* no slot: a keyless command, served by any master */
#define NGX_PLATFORM_REDIS_NO_SLOT        NGX_PLATFORM_REDIS_SLOTS


/* connects to the seeds; cmd_timeout is each node's command timer */
ngx_int_t ngx_platform_redis_cluster_init(ngx_cycle_t *cycle,
    ngx_platform_main_conf_t *pmcf, ngx_event_handler_pt cmd_timeout);
void ngx_platform_redis_cluster_exit(void);

/* the slot of a key: CRC16 of the key, or of its hash tag {...} */
ngx_uint_t ngx_platform_redis_cluster_slot(u_char *key, size_t len);

/* the master serving slot now, or NULL (the map is being refreshed) */
ngx_platform_redis_node_t *ngx_platform_redis_cluster_node(ngx_uint_t slot);

/*
 * An error reply -MOVED or -ASK: the node named, connected if it was not
 * (NULL if it cannot be). *ask is set for -ASK; -MOVED updates the map.
 * Returns NULL, *ask untouched, for any other reply.
 */
ngx_platform_redis_node_t *ngx_platform_redis_cluster_redirect(
    redisReply *reply, ngx_uint_t *ask);

/* -CLUSTERDOWN, -TRYAGAIN, a lost node: the map is read again soon */
void ngx_platform_redis_cluster_refresh(void);

/* every slot has a master that is connected */
ngx_uint_t ngx_platform_redis_cluster_connected(void);

/* nginx -t: the seeds are well-formed */
char *ngx_platform_redis_cluster_check_conf(ngx_conf_t *cf,
    ngx_platform_main_conf_t *pmcf);


#endif /* _NGX_PLATFORM_REDIS_CLUSTER_H_INCLUDED_ */
