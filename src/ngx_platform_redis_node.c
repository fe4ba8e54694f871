
/*
 * ngx_platform: one connection to one Redis server on the nginx event
 * loop: resolved, connected and set up without blocking, reconnected
 * with backoff, and hiredis's events on an nginx connection.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_event.h>
#include <ngx_http.h>

#include "ngx_platform_redis_node.h"



/*
 * unix:/path, or host[:port] where host is an IP address or a name to be
 * resolved by nginx's resolver on each connect
 */

static ngx_int_t ngx_platform_redis_node_parse_addr(ngx_cycle_t *cycle,
    ngx_pool_t *pool, ngx_platform_redis_node_t *node);
static void ngx_platform_redis_node_resolved(ngx_resolver_ctx_t *ctx);
static void ngx_platform_redis_node_open(ngx_platform_redis_node_t *node);
static void ngx_platform_redis_node_setup(ngx_platform_redis_node_t *node,
    const char *name, int argc, const char **argv, const size_t *argvlen);
static void ngx_platform_redis_node_schedule(ngx_platform_redis_node_t *node);
static void ngx_platform_redis_node_reconnect_handler(ngx_event_t *ev);
static void ngx_platform_redis_node_connect_timeout(ngx_event_t *ev);
static void ngx_platform_redis_node_on_connect(const redisAsyncContext *ac,
    int status);
static void ngx_platform_redis_node_setup_reply(redisAsyncContext *ac,
    void *data, void *privdata);
static ngx_uint_t ngx_platform_redis_node_is_master(redisReply *reply);
static void ngx_platform_redis_node_count(ngx_platform_redis_node_t *node,
    redisReply *reply);
static void ngx_platform_redis_node_role_handler(ngx_event_t *ev);
static void ngx_platform_redis_node_role_reply(redisAsyncContext *ac,
    void *data, void *privdata);
static void ngx_platform_redis_node_set_ready(ngx_platform_redis_node_t *node);
static void ngx_platform_redis_node_gone(ngx_platform_redis_node_t *node,
    redisAsyncContext *ac);

static ngx_int_t ngx_platform_redis_node_attach(redisAsyncContext *ac,
    ngx_log_t *log);
static void ngx_platform_redis_node_add_read(void *data);
static void ngx_platform_redis_node_del_read(void *data);
static void ngx_platform_redis_node_add_write(void *data);
static void ngx_platform_redis_node_del_write(void *data);
static void ngx_platform_redis_node_cleanup(void *data);
static void ngx_platform_redis_node_read_handler(ngx_event_t *ev);
static void ngx_platform_redis_node_write_handler(ngx_event_t *ev);
static void ngx_platform_redis_node_flush_handler(ngx_event_t *ev);


ngx_platform_redis_node_t *
ngx_platform_redis_node_create(ngx_cycle_t *cycle, ngx_pool_t *pool,
    ngx_platform_main_conf_t *pmcf, ngx_str_t *addr)
{
    ngx_platform_redis_node_t  *node;

    node = ngx_pcalloc(pool, sizeof(ngx_platform_redis_node_t));
    if (node == NULL) {
        return NULL;
    }

    node->pmcf = pmcf;
    node->log = cycle->log;
    node->backoff = NGX_PLATFORM_REDIS_BACKOFF_MIN;
    node->backoff_max = NGX_PLATFORM_REDIS_BACKOFF_MAX;
    node->password = pmcf->redis_password;
    node->db = pmcf->redis_db;

    /* room for an address learned later: set_addr() writes it here */

    node->addr.data = ngx_pnalloc(pool, ngx_max(addr->len,
                                                NGX_SOCKADDR_STRLEN + 8));
    if (node->addr.data == NULL) {
        return NULL;
    }

    node->addr.len = ngx_cpymem(node->addr.data, addr->data, addr->len)
                     - node->addr.data;

    if (ngx_platform_redis_node_parse_addr(cycle, pool, node) != NGX_OK) {
        return NULL;
    }

    /* cancelable: these timers must not hold up a graceful shutdown */

    node->dummy.fd = (ngx_socket_t) -1;
    node->dummy.data = node;
    node->dummy.log = cycle->log;

    node->connect_timer.handler = ngx_platform_redis_node_connect_timeout;
    node->connect_timer.data = &node->dummy;
    node->connect_timer.log = cycle->log;
    node->connect_timer.cancelable = 1;

    node->reconnect_timer.handler = ngx_platform_redis_node_reconnect_handler;
    node->reconnect_timer.data = &node->dummy;
    node->reconnect_timer.log = cycle->log;
    node->reconnect_timer.cancelable = 1;

    /*
     * Not cancelable: like an upstream read timeout, it keeps a worker
     * that shuts down gracefully alive until its callers are answered.
     * Its handler is set by the commands' owner.
     */
    ngx_queue_init(&node->cmds);

    node->cmd_timer.data = &node->dummy;
    node->cmd_timer.log = cycle->log;

    node->flush.handler = ngx_platform_redis_node_flush_handler;
    node->flush.data = &node->dummy;
    node->flush.log = cycle->log;

    node->role_timer.handler = ngx_platform_redis_node_role_handler;
    node->role_timer.data = &node->dummy;
    node->role_timer.log = cycle->log;
    node->role_timer.cancelable = 1;

    return node;
}


ngx_int_t
ngx_platform_redis_node_set_addr(ngx_platform_redis_node_t *node,
    u_char *host, size_t len, ngx_uint_t port)
{
    u_char  *p;

    if (len == 0 || len > NGX_SOCKADDR_STRLEN || port == 0 || port > 65535) {
        return NGX_ERROR;
    }

    p = ngx_cpymem(node->host, host, len);
    *p = '\0';

    node->port = (int) port;
    node->path = NULL;
    node->name.len = 0;

    /* another server: its replicas are its own */
    node->replicas = 0;
    node->replicas_seen = ngx_current_msec;

    node->addr.len = ngx_sprintf(node->addr.data, "%*s:%ui", len, host, port)
                     - node->addr.data;

    return NGX_OK;
}


void
ngx_platform_redis_node_reconnect(ngx_platform_redis_node_t *node)
{
    if (node->exiting) {
        return;
    }

    ngx_platform_redis_node_drop(node);

    if (node->reconnect_timer.timer_set) {
        ngx_del_timer(&node->reconnect_timer);
    }

    ngx_platform_redis_node_connect(node);
}


void
ngx_platform_redis_node_drop(ngx_platform_redis_node_t *node)
{
    redisAsyncContext  *ac;

    ac = node->ac;

    if (ac == NULL || (ac->c.flags & REDIS_FREEING)) {
        return;
    }

    /*
     * Logged by the caller. Inside one of this context's reply callbacks
     * hiredis frees it once the callback returns; elsewhere it is freed
     * now and the cleanup schedules the reconnection.
     */
    node->ready = 0;
    redisAsyncFree(ac);
}


void
ngx_platform_redis_node_close(ngx_platform_redis_node_t *node)
{
    redisAsyncContext  *ac;

    node->exiting = 1;
    node->ready = 0;

    if (node->connect_timer.timer_set) {
        ngx_del_timer(&node->connect_timer);
    }

    if (node->reconnect_timer.timer_set) {
        ngx_del_timer(&node->reconnect_timer);
    }

    if (node->role_timer.timer_set) {
        ngx_del_timer(&node->role_timer);
    }

    if (node->flush.posted) {
        ngx_delete_posted_event(&node->flush);
    }

    if (node->resolving) {
        ngx_resolve_name_done(node->resolving);
        node->resolving = NULL;
    }

    ac = node->ac;
    node->ac = NULL;

    if (ac) {
        /* pending commands are called back with NULL and only freed */
        redisAsyncFree(ac);
    }

    /* none is left: each was called back and detached */
    if (node->cmd_timer.timer_set) {
        ngx_del_timer(&node->cmd_timer);
    }
}


ngx_uint_t
ngx_platform_redis_node_usable(ngx_platform_redis_node_t *node)
{
    return node != NULL
           && node->ac != NULL
           && node->ready
           && !node->exiting
           && !(node->ac->c.flags & (REDIS_DISCONNECTING|REDIS_FREEING));
}


/*
 * unix:/path, or host[:port] where host is an IP address or a name to be
 * resolved by nginx's resolver on each connect
 */

ngx_int_t
ngx_platform_redis_parse_url(ngx_pool_t *pool, ngx_str_t *addr,
    ngx_url_t *u, ngx_uint_t *literal)
{
    u_char     buf[16];
    ngx_str_t  host;

    ngx_memzero(u, sizeof(ngx_url_t));

    u->url = *addr;
    u->default_port = NGX_PLATFORM_REDIS_PORT;
    u->no_resolve = 1;

    if (ngx_parse_url(pool, u) != NGX_OK || u->host.len == 0) {
        return NGX_ERROR;
    }

    host = u->host;

    if (host.len > 2 && host.data[0] == '[') {
        host.data++;
        host.len -= 2;
        u->host = host;
    }

    *literal = (ngx_inet_addr(host.data, host.len) != INADDR_NONE);

#if (NGX_HAVE_INET6)
    if (!*literal) {
        *literal = (ngx_inet6_addr(host.data, host.len, buf) == NGX_OK);
    }
#else
    (void) buf;
#endif

    return NGX_OK;
}


ngx_uint_t
ngx_platform_redis_is_unix(ngx_str_t *addr)
{
    return addr->len > 5
           && ngx_strncasecmp(addr->data, (u_char *) "unix:", 5) == 0;
}


static ngx_int_t
ngx_platform_redis_node_parse_addr(ngx_cycle_t *cycle, ngx_pool_t *pool,
    ngx_platform_redis_node_t *node)
{
    u_char                    *p;
    ngx_str_t                 *addr;
    ngx_url_t                  u;
    ngx_uint_t                 literal;
    ngx_http_conf_ctx_t       *ctx;
    ngx_http_core_loc_conf_t  *clcf;

    addr = &node->addr;

    if (ngx_platform_redis_is_unix(addr)) {
        node->path = ngx_pnalloc(pool, addr->len - 5 + 1);
        if (node->path == NULL) {
            return NGX_ERROR;
        }

        ngx_cpystrn((u_char *) node->path, addr->data + 5, addr->len - 5 + 1);

        return NGX_OK;
    }

    if (ngx_platform_redis_parse_url(pool, addr, &u, &literal)
        != NGX_OK)
    {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                      "%s in the Redis address \"%V\"",
                      u.err ? u.err : "no host", addr);
        return NGX_ERROR;
    }

    node->port = u.no_port ? NGX_PLATFORM_REDIS_PORT : u.port;

    if (literal) {
        /* hiredis is only ever given a numeric address */
        p = ngx_cpymem(node->host, u.host.data,
                       ngx_min(u.host.len, NGX_SOCKADDR_STRLEN));
        *p = '\0';

        return NGX_OK;
    }

    /*
     * A name: resolved on every (re)connect by the http block's resolver,
     * never by getaddrinfo(), which would block the worker.
     */

    node->name.data = ngx_pstrdup(pool, &u.host);
    if (node->name.data == NULL) {
        return NGX_ERROR;
    }

    node->name.len = u.host.len;

    ctx = (ngx_http_conf_ctx_t *) cycle->conf_ctx[ngx_http_module.index];
    clcf = ctx->loc_conf[ngx_http_core_module.ctx_index];

    node->resolver = clcf->resolver;
    node->resolver_timeout = (clcf->resolver_timeout == NGX_CONF_UNSET_MSEC)
                           ? 30000 : clcf->resolver_timeout;

    return NGX_OK;
}


void
ngx_platform_redis_node_connect(ngx_platform_redis_node_t *node)
{
    ngx_resolver_ctx_t  *ctx, temp;

    if (node->name.len == 0) {
        ngx_platform_redis_node_open(node);
        return;
    }

    if (node->resolving) {
        return;
    }

    ngx_memzero(&temp, sizeof(ngx_resolver_ctx_t));
    temp.name = node->name;

    ctx = (node->resolver != NULL) ? ngx_resolve_start(node->resolver, &temp)
                                 : NGX_NO_RESOLVER;

    if (ctx == NULL) {
        ngx_platform_redis_node_schedule(node);
        return;
    }

    if (ctx == NGX_NO_RESOLVER) {
        ngx_log_error(NGX_LOG_ERR, node->log, 0,
                      "redis: no resolver defined to resolve \"%V\"",
                      &node->name);
        ngx_platform_redis_node_schedule(node);
        return;
    }

    ctx->name = node->name;
    ctx->handler = ngx_platform_redis_node_resolved;
    ctx->data = node;
    ctx->timeout = node->resolver_timeout;

    /* a slow resolution must not hold up a graceful shutdown */
    ctx->cancelable = 1;

    node->resolving = ctx;

    /* the handler may run before this returns, from the cache */

    if (ngx_resolve_name(ctx) != NGX_OK) {
        /* ctx is freed */
        node->resolving = NULL;
        ngx_platform_redis_node_schedule(node);
    }
}


static void
ngx_platform_redis_node_resolved(ngx_resolver_ctx_t *ctx)
{
    size_t                      len;
    ngx_uint_t                  i;
    ngx_platform_redis_node_t  *node;

    node = ctx->data;
    node->resolving = NULL;

    if (ctx->state || ctx->naddrs == 0) {
        ngx_log_error(NGX_LOG_ERR, node->log, 0,
                      "redis: \"%V\" could not be resolved (%i: %s)",
                      &ctx->name, ctx->state,
                      ctx->state ? ngx_resolver_strerror(ctx->state)
                                 : "no address");

        ngx_resolve_name_done(ctx);
        ngx_platform_redis_node_schedule(node);
        return;
    }

    /* each attempt takes the next address: one that is down is not stuck */

    i = node->next_addr++ % ctx->naddrs;

    len = ngx_sock_ntop(ctx->addrs[i].sockaddr, ctx->addrs[i].socklen,
                        (u_char *) node->host, NGX_SOCKADDR_STRLEN, 0);
    node->host[len] = '\0';

    ngx_log_debug2(NGX_LOG_DEBUG_EVENT, node->log, 0,
                   "redis: \"%V\" resolved to %s", &ctx->name, node->host);

    ngx_resolve_name_done(ctx);

    if (node->exiting) {
        return;
    }

    ngx_platform_redis_node_open(node);
}


static void
ngx_platform_redis_node_open(ngx_platform_redis_node_t *node)
{
    u_char                     db[NGX_INT_T_LEN];
    size_t                     argvlen[2];
    const char                *argv[2];
    redisAsyncContext         *ac;
    ngx_platform_main_conf_t  *pmcf;

    pmcf = node->pmcf;

    if (node->path) {
        ac = redisAsyncConnectUnix(node->path);

    } else {
        ac = redisAsyncConnect(node->host, node->port);
    }

    if (ac == NULL) {
        ngx_log_error(NGX_LOG_ERR, node->log, 0,
                      "redis: could not allocate a connection");
        ngx_platform_redis_node_schedule(node);
        return;
    }

    if (ac->err) {
        ngx_platform_log_limited(NGX_PLATFORM_LOG_REDIS_FAILED, NGX_LOG_ERR,
                                 node->log, 0,
                                 "redis: connect to \"%V\" failed: %s",
                                 &node->addr, ac->c.errstr);
        redisAsyncFree(ac);
        ngx_platform_redis_node_schedule(node);
        return;
    }

    if (ngx_platform_redis_node_attach(ac, node->log) != NGX_OK) {
        redisAsyncFree(ac);
        ngx_platform_redis_node_schedule(node);
        return;
    }

    ac->data = node;
    node->ac = ac;
    node->ready = 0;
    node->setup_pending = 0;

    if (!node->path) {
        (void) redisEnableKeepAlive(&ac->c);
    }

    /* also registers the write event that reports the connect */
    redisAsyncSetConnectCallback(ac, ngx_platform_redis_node_on_connect);

    /* queued now, written once connected; replies come first, in order */

    if (node->password.len) {
        argv[0] = "AUTH";
        argvlen[0] = 4;
        argv[1] = (const char *) node->password.data;
        argvlen[1] = node->password.len;

        ngx_platform_redis_node_setup(node, "AUTH", 2, argv, argvlen);
    }

    if (node->db > 0) {
        argv[0] = "SELECT";
        argvlen[0] = 6;
        argv[1] = (const char *) db;
        argvlen[1] = ngx_sprintf(db, "%i", node->db) - db;

        ngx_platform_redis_node_setup(node, "SELECT", 2, argv, argvlen);
    }

    if (node->check_master || node->count_replicas) {
        argv[0] = "ROLE";
        argvlen[0] = 4;

        ngx_platform_redis_node_setup(node, "ROLE", 1, argv, argvlen);
    }

    /* a server that accepts but does not answer is not ready */

    argv[0] = "PING";
    argvlen[0] = 4;

    ngx_platform_redis_node_setup(node, "PING", 1, argv, argvlen);

    ngx_add_timer(&node->connect_timer, pmcf->redis_connect_timeout);
}


/* name is the reply's privdata: it names the step in log lines */

static void
ngx_platform_redis_node_setup(ngx_platform_redis_node_t *node,
    const char *name, int argc, const char **argv, const size_t *argvlen)
{
    if (redisAsyncCommandArgv(node->ac, ngx_platform_redis_node_setup_reply,
                              (void *) name, argc, argv, argvlen)
        == REDIS_OK)
    {
        node->setup_pending++;
    }
}


static void
ngx_platform_redis_node_schedule(ngx_platform_redis_node_t *node)
{
    ngx_msec_t  delay;

    if (node->exiting || node->reconnect_timer.timer_set) {
        return;
    }

    /* 75% to 100% of the backoff, so that workers spread out */

    delay = node->backoff
            - (ngx_msec_t) ngx_random() % (node->backoff / 4 + 1);

    node->backoff = ngx_min(node->backoff * 2, node->backoff_max);

    ngx_log_debug1(NGX_LOG_DEBUG_EVENT, node->log, 0,
                   "redis: reconnect in %M ms", delay);

    ngx_add_timer(&node->reconnect_timer, delay);
}


static void
ngx_platform_redis_node_reconnect_handler(ngx_event_t *ev)
{
    ngx_connection_t           *c;
    ngx_platform_redis_node_t  *node;

    c = ev->data;
    node = c->data;

    if (node->exiting || ngx_exiting || ngx_terminate || ngx_quit) {
        return;
    }

    if (node->ac == NULL && node->resolving == NULL) {
        ngx_platform_redis_node_connect(node);
    }
}


static void
ngx_platform_redis_node_connect_timeout(ngx_event_t *ev)
{
    ngx_connection_t           *c;
    ngx_platform_redis_node_t  *node;

    c = ev->data;
    node = c->data;

    if (node->ac == NULL || node->ready) {
        return;
    }

    ngx_platform_log_limited(NGX_PLATFORM_LOG_REDIS_FAILED, NGX_LOG_ERR,
                             node->log, 0,
                             "redis: connect to \"%V\" timed out",
                             &node->addr);

    /* not inside a hiredis callback: frees now, cleanup reschedules */
    redisAsyncFree(node->ac);
}


static void
ngx_platform_redis_node_on_connect(const redisAsyncContext *ac, int status)
{
    ngx_platform_redis_node_t  *node;

    node = ac->data;

    if (status != REDIS_OK) {
        /* hiredis frees the context after this returns */
        ngx_platform_log_limited(NGX_PLATFORM_LOG_REDIS_FAILED, NGX_LOG_ERR,
                                 node->log, 0,
                                 "redis: connect to \"%V\" failed: %s",
                                 &node->addr, ac->c.errstr);
        return;
    }

    if (node->ac == ac && node->setup_pending == 0) {
        ngx_platform_redis_node_set_ready(node);
    }
}


static void
ngx_platform_redis_node_setup_reply(redisAsyncContext *ac, void *data,
    void *privdata)
{
    redisReply  *reply = data;

    ngx_platform_redis_node_t  *node;

    node = ac->data;

    if (reply == NULL || node->ac != ac) {
        return;
    }

    if (reply->type == REDIS_REPLY_ERROR) {
        /* the error text is the server's: it never holds the password */
        ngx_log_error(NGX_LOG_ERR, node->log, 0, "redis: %s failed: %*s",
                      (char *) privdata, reply->len, reply->str);

        /* inside a reply callback: hiredis frees once this returns */
        redisAsyncFree(ac);
        return;
    }

    if (node->check_master
        && privdata != NULL
        && ngx_strcmp(privdata, "ROLE") == 0
        && !ngx_platform_redis_node_is_master(reply))
    {
        ngx_log_error(NGX_LOG_ERR, node->log, 0,
                      "redis: \"%V\" is not a master, leaving it",
                      &node->addr);

        redisAsyncFree(ac);
        return;
    }

    if (privdata != NULL && ngx_strcmp(privdata, "ROLE") == 0) {
        ngx_platform_redis_node_count(node, reply);
    }

    if (node->setup_pending > 0 && --node->setup_pending == 0) {
        ngx_platform_redis_node_set_ready(node);
    }
}


/*
 * ROLE answers an array whose first element is "master", "slave", ...;
 * a master's third is the array of its connected replicas
 */

static ngx_uint_t
ngx_platform_redis_node_is_master(redisReply *reply)
{
    redisReply  *role;

    if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 3) {
        return 0;
    }

    role = reply->element[0];

    return (role->type == REDIS_REPLY_STRING
            || role->type == REDIS_REPLY_STATUS)
           && role->len == 6
           && ngx_strncmp(role->str, "master", 6) == 0;
}


static void
ngx_platform_redis_node_set_ready(ngx_platform_redis_node_t *node)
{
    if (node->connect_timer.timer_set) {
        ngx_del_timer(&node->connect_timer);
    }

    node->ready = 1;
    node->backoff = NGX_PLATFORM_REDIS_BACKOFF_MIN;

    ngx_platform_metric_inc(NGX_PLATFORM_M_REDIS_CONNECTS);
    node->last_reply = ngx_current_msec;

    if (node->name.len) {
        ngx_log_error(NGX_LOG_INFO, node->log, 0,
                      "redis: connected to \"%V\" at %s",
                      &node->addr, node->host);

    } else {
        ngx_log_error(NGX_LOG_INFO, node->log, 0,
                      "redis: connected to \"%V\"", &node->addr);
    }

    /* a new context may have the address of a freed one */
    node->role_pending = NULL;

    if ((node->check_master || node->count_replicas)
        && !node->role_timer.timer_set)
    {
        ngx_add_timer(&node->role_timer, 1000);
    }

    if (node->ready_handler) {
        node->ready_handler(node);
    }
}


static void
ngx_platform_redis_node_role_handler(ngx_event_t *ev)
{
    ngx_connection_t           *c;
    ngx_platform_redis_node_t  *node;

    c = ev->data;
    node = c->data;

    if (!ngx_platform_redis_node_usable(node)) {
        /* set_ready() starts it again */
        return;
    }

    if (node->role_pending == node->ac) {

        if (ngx_current_msec - node->role_sent < node->pmcf->redis_timeout) {
            ngx_add_timer(&node->role_timer, 1000);
            return;
        }

        /*
         * A master that answers nothing while no request asks it (stopped,
         * or behind a half-open connection) is left as one that timed out
         * a command is: without it a worker with nothing to do would stay
         * on it through a failover
         */

        ngx_log_error(NGX_LOG_ERR, node->log, 0,
                      "redis: no answer to ROLE from \"%V\", reconnecting",
                      &node->addr);

        /* not inside a hiredis callback: freed now */
        ngx_platform_redis_node_drop(node);
        return;
    }

    if (redisAsyncCommand(node->ac, ngx_platform_redis_node_role_reply,
                          node->ac, "ROLE")
        == REDIS_OK)
    {
        node->role_pending = node->ac;
        node->role_sent = ngx_current_msec;

        ngx_add_timer(&node->role_timer, 1000);
    }
}


static void
ngx_platform_redis_node_role_reply(redisAsyncContext *ac, void *data,
    void *privdata)
{
    redisReply  *reply = data;

    ngx_platform_redis_node_t  *node;

    node = ac->data;


    if (reply == NULL || node == NULL || node->ac != ac || node->exiting) {
        return;
    }

    node->role_pending = NULL;

    if (node->check_master && !ngx_platform_redis_node_is_master(reply)) {
        ngx_log_error(NGX_LOG_ERR, node->log, 0,
                      "redis: \"%V\" is no longer a master, leaving it",
                      &node->addr);

        /* in a reply callback: freed once this returns */
        ngx_platform_redis_node_drop(node);
        return;
    }

    ngx_platform_redis_node_count(node, reply);
}


/*
 * The replicas of a master, the most seen over the last few seconds at
 * this address, reconnections included: a master that lost them, even
 * reached again, may be one that a failover is leaving behind
 */

static void
ngx_platform_redis_node_count(ngx_platform_redis_node_t *node,
    redisReply *reply)
{
    ngx_uint_t  n;

    n = 0;

    if (ngx_platform_redis_node_is_master(reply)
        && reply->element[2]->type == REDIS_REPLY_ARRAY)
    {
        n = reply->element[2]->elements;
    }

    if (n >= node->replicas
        || ngx_current_msec - node->replicas_seen
           > NGX_PLATFORM_REDIS_REPLICAS_MEMORY)
    {
        node->replicas = n;
        node->replicas_seen = ngx_current_msec;
    }
}


/* the context is being freed, for whatever reason: start over */

static void
ngx_platform_redis_node_gone(ngx_platform_redis_node_t *node,
    redisAsyncContext *ac)
{
    if (node == NULL || node->ac != ac) {
        return;
    }

    if (node->ready) {
        ngx_log_error(NGX_LOG_ERR, node->log, 0,
                      "redis: connection to \"%V\" lost: %s",
                      &node->addr,
                      ac->c.err ? ac->c.errstr : "closed");
    }

    node->ac = NULL;
    node->ready = 0;
    node->setup_pending = 0;

    if (node->connect_timer.timer_set) {
        ngx_del_timer(&node->connect_timer);
    }

    if (!node->manual) {
        ngx_platform_redis_node_schedule(node);
    }

    /* may reconnect the node at once, to another address */

    if (node->lost_handler && !node->exiting) {
        node->lost_handler(node);
    }
}


/* event adapter: hiredis's hooks on an nginx connection */

static ngx_int_t
ngx_platform_redis_node_attach(redisAsyncContext *ac, ngx_log_t *log)
{
    ngx_connection_t  *c;

    c = ngx_get_connection(ac->c.fd, log);
    if (c == NULL) {
        return NGX_ERROR;
    }

    /* hiredis owns the fd: ngx_close_connection() must not close it */
    c->shared = 1;
    c->data = ac;

    c->read->log = log;
    c->write->log = log;
    c->read->handler = ngx_platform_redis_node_read_handler;
    c->write->handler = ngx_platform_redis_node_write_handler;

    ac->ev.data = c;
    ac->ev.addRead = ngx_platform_redis_node_add_read;
    ac->ev.delRead = ngx_platform_redis_node_del_read;
    ac->ev.addWrite = ngx_platform_redis_node_add_write;
    ac->ev.delWrite = ngx_platform_redis_node_del_write;
    ac->ev.cleanup = ngx_platform_redis_node_cleanup;

    return NGX_OK;
}


/*
 * Level-triggered registration (NGX_LEVEL_EVENT, no EPOLLET): hiredis
 * reads at most 16 KiB per call, so an edge-triggered read event would
 * strand the rest of a large reply in the socket.
 */

static void
ngx_platform_redis_node_add_read(void *data)
{
    ngx_connection_t  *c = data;

    if (c == NULL || c->read->active) {
        return;
    }

    if (ngx_add_event(c->read, NGX_READ_EVENT, NGX_LEVEL_EVENT) != NGX_OK) {
        ngx_log_error(NGX_LOG_ALERT, c->log, 0,
                      "redis: could not add the read event");
    }
}


static void
ngx_platform_redis_node_del_read(void *data)
{
    ngx_connection_t  *c = data;

    if (c == NULL || !c->read->active) {
        return;
    }

    if (ngx_del_event(c->read, NGX_READ_EVENT, 0) != NGX_OK) {
        ngx_log_error(NGX_LOG_ALERT, c->log, 0,
                      "redis: could not delete the read event");
    }
}


/*
 * Once connected, a command does not register for write readiness: the
 * commands queued during one pass of the event loop are written together
 * at its end, from a posted event, in one write. Only a write that left
 * some behind (or the connect) waits for the socket.
 */

static void
ngx_platform_redis_node_add_write(void *data)
{
    ngx_connection_t  *c = data;

    redisAsyncContext          *ac;
    ngx_platform_redis_node_t  *node;

    if (c == NULL || c->write->active) {
        return;
    }

    ac = c->data;
    node = ac->data;

    if (node != NULL && node->ac == ac && !node->flushing
        && (ac->c.flags & REDIS_CONNECTED))
    {
        if (!node->flush.posted) {
            ngx_post_event(&node->flush, &ngx_posted_events);
        }

        return;
    }

    if (ngx_add_event(c->write, NGX_WRITE_EVENT, NGX_LEVEL_EVENT) != NGX_OK)
    {
        ngx_log_error(NGX_LOG_ALERT, c->log, 0,
                      "redis: could not add the write event");
    }
}


static void
ngx_platform_redis_node_del_write(void *data)
{
    ngx_connection_t  *c = data;

    if (c == NULL || !c->write->active) {
        return;
    }

    if (ngx_del_event(c->write, NGX_WRITE_EVENT, 0) != NGX_OK) {
        ngx_log_error(NGX_LOG_ALERT, c->log, 0,
                      "redis: could not delete the write event");
    }
}


/*
 * Called from __redisAsyncFree() on every teardown path, before hiredis
 * closes the fd (redisFree). The fd is still open here, so it is really
 * removed from the event module (flags 0, not NGX_CLOSE_EVENT: nothing
 * stale may stay registered whoever closes it); ngx_close_connection()
 * with c->shared then drops timers and posted events and releases the
 * connection without closing the fd.
 */

static void
ngx_platform_redis_node_cleanup(void *data)
{
    ngx_connection_t  *c = data;

    redisAsyncContext          *ac;
    ngx_platform_redis_node_t  *node;

    if (c == NULL) {
        return;
    }

    ac = c->data;

    /* some hiredis versions call cleanup twice */
    ac->ev.data = NULL;

    if (ngx_del_conn) {
        if (c->read->active || c->write->active) {
            (void) ngx_del_conn(c, 0);
        }

    } else {
        if (c->read->active) {
            (void) ngx_del_event(c->read, NGX_READ_EVENT, 0);
        }

        if (c->write->active) {
            (void) ngx_del_event(c->write, NGX_WRITE_EVENT, 0);
        }
    }

    /* whatever ngx_del_conn() did, nothing may fire on a freed c */
    c->read->active = 0;
    c->write->active = 0;

    node = ac->data;

    if (node != NULL && node->ac == ac && node->flush.posted) {
        ngx_delete_posted_event(&node->flush);
    }

    ngx_close_connection(c);

    ngx_platform_redis_node_gone(ac->data, ac);
}


static void
ngx_platform_redis_node_read_handler(ngx_event_t *ev)
{
    ngx_connection_t  *c;

    c = ev->data;

    /* may free the context and c */
    redisAsyncHandleRead(c->data);
}


static void
ngx_platform_redis_node_write_handler(ngx_event_t *ev)
{
    ngx_connection_t  *c;

    c = ev->data;

    redisAsyncHandleWrite(c->data);
}


static void
ngx_platform_redis_node_flush_handler(ngx_event_t *ev)
{
    ngx_connection_t           *c;
    ngx_platform_redis_node_t  *node;

    c = ev->data;
    node = c->data;

    if (node->ac == NULL) {
        return;
    }

    /* a write that leaves some behind registers for the socket */
    node->flushing = 1;

    /* may free the context */
    redisAsyncHandleWrite(node->ac);

    node->flushing = 0;
}

