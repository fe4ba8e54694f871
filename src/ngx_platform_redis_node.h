
/*
 * ngx_platform: one connection to one Redis server on the nginx event
 * loop, with its setup (AUTH, SELECT, ROLE, PING), its reconnections and
 * the commands waiting for its replies. The transport's inner part:
 * ngx_platform_redis.c owns the commands and routes them to nodes, and
 * the deployments (a single server, Sentinel, Cluster) create the nodes.
 */


#ifndef _NGX_PLATFORM_REDIS_NODE_H_INCLUDED_
#define _NGX_PLATFORM_REDIS_NODE_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_event.h>
#include <ngx_http.h>

#include <hiredis/hiredis.h>
#include <hiredis/async.h>

#include "ngx_platform.h"


#define NGX_PLATFORM_REDIS_PORT         6379
#define NGX_PLATFORM_REDIS_BACKOFF_MIN  500
#define NGX_PLATFORM_REDIS_BACKOFF_MAX  10000
#define NGX_PLATFORM_REDIS_REPLICAS_MEMORY  5000


typedef struct ngx_platform_redis_node_s  ngx_platform_redis_node_t;

typedef void (*ngx_platform_redis_node_pt)(ngx_platform_redis_node_t *node);


struct ngx_platform_redis_node_s {
    ngx_platform_main_conf_t       *pmcf;
    redisAsyncContext              *ac;
    ngx_log_t                      *log;

    /*
     * The data of every timer here and of the commands' timers: nginx's
     * debug log reads an event's data as a connection (its fd). The node
     * is found through it.
     */
    ngx_connection_t                dummy;

    ngx_str_t                       addr;      /* for log lines */

    ngx_str_t                       name;      /* to resolve, or empty */
    ngx_resolver_t                 *resolver;
    ngx_msec_t                      resolver_timeout;
    ngx_resolver_ctx_t             *resolving;
    ngx_uint_t                      next_addr;

    char                            host[NGX_SOCKADDR_STRLEN + 1];
    int                             port;
    char                           *path;

    /* the setup: AUTH when password.len, SELECT when db > 0 */
    ngx_str_t                       password;
    ngx_int_t                       db;

    ngx_event_t                     connect_timer;
    ngx_event_t                     reconnect_timer;

    /*
     * The commands waiting for their reply, oldest first, and one timer
     * for the oldest's deadline rather than one per command: they are
     * sent and answered in order on the one connection. The timer's
     * handler is the command owner's (ngx_platform_redis.c).
     */
    ngx_queue_t                     cmds;
    ngx_event_t                     cmd_timer;

    /* the commands of one pass of the event loop, written together */
    ngx_event_t                     flush;
    ngx_msec_t                      backoff;
    ngx_msec_t                      backoff_max;
    ngx_msec_t                      last_reply;
    ngx_uint_t                      setup_pending;

    /*
     * The deployment's: told when the node is ready, and when its
     * connection is lost or could not be made (it reconnects by itself
     * after the backoff unless told otherwise).
     */
    ngx_platform_redis_node_pt      ready_handler;
    ngx_platform_redis_node_pt      lost_handler;
    void                           *data;

    /*
     * The replicas connected to it, as ROLE tells in the setup and then
     * every second: the most seen over the last
     * NGX_PLATFORM_REDIS_REPLICAS_MEMORY ms on this connection. A master
     * that loses its replicas may be one that a failover is leaving
     * behind: its writes still wait for them until that is over.
     */
    ngx_uint_t                      replicas;
    ngx_msec_t                      replicas_seen;
    ngx_event_t                     role_timer;

    /* the ROLE asked last and not answered yet: when, on which context */
    ngx_msec_t                      role_sent;
    redisAsyncContext              *role_pending;

    unsigned                        ready:1;
    unsigned                        exiting:1;
    unsigned                        flushing:1;

    /*
     * The setup asks ROLE, and a server that is not a master is left;
     * asked again every second, ROLE tells the replicas it has and a
     * master demoted without a word
     */
    unsigned                        check_master:1;

    /* ROLE asked as above, to count the replicas, a replica kept */
    unsigned                        count_replicas:1;

    /* a connection that ends is not made again, but on request */
    unsigned                        manual:1;
};


/*
 * A node for addr (host[:port], unix:/path, or a name that the http
 * block's resolver resolves on every connect), allocated in pool. It
 * does not connect until ngx_platform_redis_node_connect().
 */
ngx_platform_redis_node_t *ngx_platform_redis_node_create(
    ngx_cycle_t *cycle, ngx_pool_t *pool, ngx_platform_main_conf_t *pmcf,
    ngx_str_t *addr);

/* a numeric address learned from a server (Sentinel, Cluster) */
ngx_int_t ngx_platform_redis_node_set_addr(ngx_platform_redis_node_t *node,
    u_char *host, size_t len, ngx_uint_t port);

void ngx_platform_redis_node_connect(ngx_platform_redis_node_t *node);

/* drops the connection, if any, and connects again now */
void ngx_platform_redis_node_reconnect(ngx_platform_redis_node_t *node);

/* drops the connection; its waiting commands are answered with NULL */
void ngx_platform_redis_node_drop(ngx_platform_redis_node_t *node);

/* for good: the worker exits, or the node is no longer wanted */
void ngx_platform_redis_node_close(ngx_platform_redis_node_t *node);

ngx_uint_t ngx_platform_redis_node_usable(ngx_platform_redis_node_t *node);

/* parses host[:port] for nginx -t; literal says if host is an address */
ngx_int_t ngx_platform_redis_parse_url(ngx_pool_t *pool, ngx_str_t *addr,
    ngx_url_t *u, ngx_uint_t *literal);
ngx_uint_t ngx_platform_redis_is_unix(ngx_str_t *addr);


#endif /* _NGX_PLATFORM_REDIS_NODE_H_INCLUDED_ */
