
/*
 * ngx_platform: Redis on the nginx event loop. One multiplexed hiredis
 * async connection per worker, reconnected with backoff; command
 * deadlines are kept here because hiredis 0.14 has none.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_event.h>
#include <ngx_http.h>
#include <ngx_sha1.h>

#include "ngx_platform_redis.h"


#define NGX_PLATFORM_REDIS_PORT         6379
#define NGX_PLATFORM_REDIS_BACKOFF_MIN  500
#define NGX_PLATFORM_REDIS_BACKOFF_MAX  10000


typedef struct {
    void                           *data;
    ngx_log_t                      *log;       /* the caller's */
    ngx_platform_redis_handler_pt   handler;
    ngx_pool_cleanup_t             *cleanup;
    redisAsyncContext              *ac;
    ngx_platform_redis_t           *rd;
    ngx_queue_t                     queue;     /* in rd->cmds if attached */
    ngx_msec_t                      sent;

    /*
     * EVALSHA: the command as sent, for the EVAL retry; tail is where
     * the arguments after the sha1 start
     */
    ngx_platform_redis_script_t    *script;
    u_char                         *buf;
    size_t                          len;
    size_t                          tail;
    int                             argc;
    unsigned                        attached:1;
    unsigned                        retried:1;
} ngx_platform_redis_cmd_t;


struct ngx_platform_redis_s {
    ngx_platform_main_conf_t       *pmcf;
    redisAsyncContext              *ac;
    ngx_log_t                      *log;

    /*
     * The data of every timer here and of the commands' timers: nginx's
     * debug log reads an event's data as a connection (its fd). The owner
     * is found through it (rd) or around the event (a command).
     */
    ngx_connection_t                dummy;

    ngx_str_t                       name;      /* to resolve, or empty */
    ngx_resolver_t                 *resolver;
    ngx_msec_t                      resolver_timeout;
    ngx_resolver_ctx_t             *resolving;
    ngx_uint_t                      next_addr;

    char                            host[NGX_SOCKADDR_STRLEN + 1];
    int                             port;
    char                           *path;

    ngx_event_t                     connect_timer;
    ngx_event_t                     reconnect_timer;

    /*
     * The commands waiting for their reply, oldest first, and one timer
     * for the oldest's deadline rather than one per command: they are
     * sent and answered in order on the one connection.
     */
    ngx_queue_t                     cmds;
    ngx_event_t                     cmd_timer;

    /* the commands of one pass of the event loop, written together */
    ngx_event_t                     flush;
    ngx_msec_t                      backoff;
    ngx_msec_t                      last_reply;
    ngx_uint_t                      setup_pending;

    unsigned                        ready:1;
    unsigned                        exiting:1;
    unsigned                        flushing:1;
};


static ngx_int_t ngx_platform_redis_parse_url(ngx_pool_t *pool,
    ngx_str_t *addr, ngx_url_t *u, ngx_uint_t *literal);
static ngx_uint_t ngx_platform_redis_is_unix(ngx_str_t *addr);
static ngx_int_t ngx_platform_redis_parse_addr(ngx_cycle_t *cycle,
    ngx_platform_redis_t *rd);
static void ngx_platform_redis_connect(ngx_platform_redis_t *rd);
static void ngx_platform_redis_resolved(ngx_resolver_ctx_t *ctx);
static void ngx_platform_redis_open(ngx_platform_redis_t *rd);
static void ngx_platform_redis_schedule(ngx_platform_redis_t *rd);
static void ngx_platform_redis_reconnect_handler(ngx_event_t *ev);
static void ngx_platform_redis_connect_timeout(ngx_event_t *ev);
static void ngx_platform_redis_on_connect(const redisAsyncContext *ac,
    int status);
static void ngx_platform_redis_setup_reply(redisAsyncContext *ac,
    void *data, void *privdata);
static void ngx_platform_redis_set_ready(ngx_platform_redis_t *rd);
static void ngx_platform_redis_gone(ngx_platform_redis_t *rd,
    redisAsyncContext *ac);

static ngx_int_t ngx_platform_redis_attach(redisAsyncContext *ac,
    ngx_log_t *log);
static void ngx_platform_redis_add_read(void *data);
static void ngx_platform_redis_del_read(void *data);
static void ngx_platform_redis_add_write(void *data);
static void ngx_platform_redis_del_write(void *data);
static void ngx_platform_redis_cleanup(void *data);
static void ngx_platform_redis_read_handler(ngx_event_t *ev);
static void ngx_platform_redis_write_handler(ngx_event_t *ev);
static void ngx_platform_redis_flush_handler(ngx_event_t *ev);
static size_t ngx_platform_redis_format_len(int argc,
    const size_t *argvlen);
static u_char *ngx_platform_redis_format(u_char *p, int argc,
    const char **argv, const size_t *argvlen);
static u_char *ngx_platform_redis_format_args(u_char *p, int argc,
    const char **argv, const size_t *argvlen);

static ngx_uint_t ngx_platform_redis_usable(ngx_platform_redis_t *rd);
static ngx_int_t ngx_platform_redis_submit(ngx_pool_t *pool,
    ngx_platform_redis_cmd_t *cmd, u_char *buf, size_t len);
static void ngx_platform_redis_reply(redisAsyncContext *ac, void *data,
    void *privdata);
static ngx_int_t ngx_platform_redis_eval_source(redisAsyncContext *ac,
    ngx_platform_redis_cmd_t *cmd);
static ngx_uint_t ngx_platform_redis_readonly(redisReply *reply);
static void ngx_platform_redis_cmd_timeout(ngx_event_t *ev);
static void ngx_platform_redis_expire(ngx_platform_redis_t *rd,
    ngx_platform_redis_cmd_t *cmd);
static void ngx_platform_redis_cmd_cleanup(void *data);
static void ngx_platform_redis_detach(ngx_platform_redis_cmd_t *cmd);
static void ngx_platform_redis_script_sha1(
    ngx_platform_redis_script_t *script);


/* the worker's connection state; set in init_process */
static ngx_platform_redis_t  *ngx_platform_redis;


ngx_int_t
ngx_platform_redis_init_process(ngx_cycle_t *cycle,
    ngx_platform_main_conf_t *pmcf)
{
    ngx_platform_redis_t  *rd;

    rd = ngx_pcalloc(cycle->pool, sizeof(ngx_platform_redis_t));
    if (rd == NULL) {
        return NGX_ERROR;
    }

    rd->pmcf = pmcf;
    rd->log = cycle->log;
    rd->backoff = NGX_PLATFORM_REDIS_BACKOFF_MIN;

    if (ngx_platform_redis_parse_addr(cycle, rd) != NGX_OK) {
        return NGX_ERROR;
    }

    /* cancelable: these timers must not hold up a graceful shutdown */

    rd->dummy.fd = (ngx_socket_t) -1;
    rd->dummy.data = rd;
    rd->dummy.log = cycle->log;

    rd->connect_timer.handler = ngx_platform_redis_connect_timeout;
    rd->connect_timer.data = &rd->dummy;
    rd->connect_timer.log = cycle->log;
    rd->connect_timer.cancelable = 1;

    rd->reconnect_timer.handler = ngx_platform_redis_reconnect_handler;
    rd->reconnect_timer.data = &rd->dummy;
    rd->reconnect_timer.log = cycle->log;
    rd->reconnect_timer.cancelable = 1;

    /*
     * Not cancelable: like an upstream read timeout, it keeps a worker
     * that shuts down gracefully alive until its callers are answered.
     */
    ngx_queue_init(&rd->cmds);

    rd->cmd_timer.handler = ngx_platform_redis_cmd_timeout;
    rd->cmd_timer.data = &rd->dummy;
    rd->cmd_timer.log = cycle->log;

    rd->flush.handler = ngx_platform_redis_flush_handler;
    rd->flush.data = &rd->dummy;
    rd->flush.log = cycle->log;

    pmcf->redis = rd;
    ngx_platform_redis = rd;

    ngx_platform_redis_connect(rd);

    return NGX_OK;
}


void
ngx_platform_redis_exit_process(ngx_cycle_t *cycle,
    ngx_platform_main_conf_t *pmcf)
{
    redisAsyncContext     *ac;
    ngx_platform_redis_t  *rd;

    rd = pmcf->redis;
    if (rd == NULL) {
        return;
    }

    rd->exiting = 1;
    rd->ready = 0;

    if (rd->connect_timer.timer_set) {
        ngx_del_timer(&rd->connect_timer);
    }

    if (rd->reconnect_timer.timer_set) {
        ngx_del_timer(&rd->reconnect_timer);
    }

    if (rd->flush.posted) {
        ngx_delete_posted_event(&rd->flush);
    }

    if (rd->resolving) {
        ngx_resolve_name_done(rd->resolving);
        rd->resolving = NULL;
    }

    ac = rd->ac;
    rd->ac = NULL;

    if (ac) {
        /* pending commands are called back with NULL and only freed */
        redisAsyncFree(ac);
    }

    /* none is left: each was called back and detached */
    if (rd->cmd_timer.timer_set) {
        ngx_del_timer(&rd->cmd_timer);
    }

    ngx_platform_redis = NULL;
    pmcf->redis = NULL;
}


ngx_uint_t
ngx_platform_redis_connected(void)
{
    return ngx_platform_redis_usable(ngx_platform_redis);
}


/*
 * unix:/path, or host[:port] where host is an IP address or a name to be
 * resolved by nginx's resolver on each connect
 */

static ngx_int_t
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


static ngx_uint_t
ngx_platform_redis_is_unix(ngx_str_t *addr)
{
    return addr->len > 5
           && ngx_strncasecmp(addr->data, (u_char *) "unix:", 5) == 0;
}


char *
ngx_platform_redis_check_conf(ngx_conf_t *cf, ngx_platform_main_conf_t *pmcf)
{
    ngx_url_t                  u;
    ngx_uint_t                 literal;
    ngx_http_core_loc_conf_t  *clcf;

    if (ngx_platform_redis_is_unix(&pmcf->redis_addr)) {
        return NGX_CONF_OK;
    }

    if (ngx_platform_redis_parse_url(cf->pool, &pmcf->redis_addr, &u,
                                     &literal)
        != NGX_OK)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid \"platform_redis\" \"%V\": %s",
                           &pmcf->redis_addr, u.err ? u.err : "no host");
        return NGX_CONF_ERROR;
    }

    if (literal || !(pmcf->backends & NGX_PLATFORM_BACKEND_REDIS)) {
        return NGX_CONF_OK;
    }

    /* called from the http block: its own location conf, not merged yet */

    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);

    if (clcf->resolver == NULL || clcf->resolver->connections.nelts == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"platform_redis\" \"%V\" names a host: "
                           "it needs a \"resolver\" in the http block",
                           &pmcf->redis_addr);
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


static ngx_int_t
ngx_platform_redis_parse_addr(ngx_cycle_t *cycle, ngx_platform_redis_t *rd)
{
    u_char                    *p;
    ngx_str_t                 *addr;
    ngx_url_t                  u;
    ngx_uint_t                 literal;
    ngx_http_conf_ctx_t       *ctx;
    ngx_http_core_loc_conf_t  *clcf;

    addr = &rd->pmcf->redis_addr;

    if (ngx_platform_redis_is_unix(addr)) {
        rd->path = ngx_pnalloc(cycle->pool, addr->len - 5 + 1);
        if (rd->path == NULL) {
            return NGX_ERROR;
        }

        ngx_cpystrn((u_char *) rd->path, addr->data + 5, addr->len - 5 + 1);

        return NGX_OK;
    }

    if (ngx_platform_redis_parse_url(cycle->pool, addr, &u, &literal)
        != NGX_OK)
    {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                      "%s in platform_redis \"%V\"",
                      u.err ? u.err : "no host", addr);
        return NGX_ERROR;
    }

    rd->port = u.no_port ? NGX_PLATFORM_REDIS_PORT : u.port;

    if (literal) {
        /* hiredis is only ever given a numeric address */
        p = ngx_cpymem(rd->host, u.host.data,
                       ngx_min(u.host.len, NGX_SOCKADDR_STRLEN));
        *p = '\0';

        return NGX_OK;
    }

    /*
     * A name: resolved on every (re)connect by the http block's resolver,
     * never by getaddrinfo(), which would block the worker.
     */

    rd->name.data = ngx_pstrdup(cycle->pool, &u.host);
    if (rd->name.data == NULL) {
        return NGX_ERROR;
    }

    rd->name.len = u.host.len;

    ctx = (ngx_http_conf_ctx_t *) cycle->conf_ctx[ngx_http_module.index];
    clcf = ctx->loc_conf[ngx_http_core_module.ctx_index];

    rd->resolver = clcf->resolver;
    rd->resolver_timeout = (clcf->resolver_timeout == NGX_CONF_UNSET_MSEC)
                           ? 30000 : clcf->resolver_timeout;

    return NGX_OK;
}


static void
ngx_platform_redis_connect(ngx_platform_redis_t *rd)
{
    ngx_resolver_ctx_t  *ctx, temp;

    if (rd->name.len == 0) {
        ngx_platform_redis_open(rd);
        return;
    }

    if (rd->resolving) {
        return;
    }

    ngx_memzero(&temp, sizeof(ngx_resolver_ctx_t));
    temp.name = rd->name;

    ctx = (rd->resolver != NULL) ? ngx_resolve_start(rd->resolver, &temp)
                                 : NGX_NO_RESOLVER;

    if (ctx == NULL) {
        ngx_platform_redis_schedule(rd);
        return;
    }

    if (ctx == NGX_NO_RESOLVER) {
        ngx_log_error(NGX_LOG_ERR, rd->log, 0,
                      "redis: no resolver defined to resolve \"%V\"",
                      &rd->name);
        ngx_platform_redis_schedule(rd);
        return;
    }

    ctx->name = rd->name;
    ctx->handler = ngx_platform_redis_resolved;
    ctx->data = rd;
    ctx->timeout = rd->resolver_timeout;

    /* a slow resolution must not hold up a graceful shutdown */
    ctx->cancelable = 1;

    rd->resolving = ctx;

    /* the handler may run before this returns, from the cache */

    if (ngx_resolve_name(ctx) != NGX_OK) {
        /* ctx is freed */
        rd->resolving = NULL;
        ngx_platform_redis_schedule(rd);
    }
}


static void
ngx_platform_redis_resolved(ngx_resolver_ctx_t *ctx)
{
    size_t                 len;
    ngx_uint_t             i;
    ngx_platform_redis_t  *rd;

    rd = ctx->data;
    rd->resolving = NULL;

    if (ctx->state || ctx->naddrs == 0) {
        ngx_log_error(NGX_LOG_ERR, rd->log, 0,
                      "redis: \"%V\" could not be resolved (%i: %s)",
                      &ctx->name, ctx->state,
                      ctx->state ? ngx_resolver_strerror(ctx->state)
                                 : "no address");

        ngx_resolve_name_done(ctx);
        ngx_platform_redis_schedule(rd);
        return;
    }

    /* each attempt takes the next address: one that is down is not stuck */

    i = rd->next_addr++ % ctx->naddrs;

    len = ngx_sock_ntop(ctx->addrs[i].sockaddr, ctx->addrs[i].socklen,
                        (u_char *) rd->host, NGX_SOCKADDR_STRLEN, 0);
    rd->host[len] = '\0';

    ngx_log_debug2(NGX_LOG_DEBUG_EVENT, rd->log, 0,
                   "redis: \"%V\" resolved to %s", &ctx->name, rd->host);

    ngx_resolve_name_done(ctx);

    if (rd->exiting) {
        return;
    }

    ngx_platform_redis_open(rd);
}


static void
ngx_platform_redis_open(ngx_platform_redis_t *rd)
{
    u_char                     db[NGX_INT_T_LEN];
    size_t                     argvlen[2];
    const char                *argv[2];
    redisAsyncContext         *ac;
    ngx_platform_main_conf_t  *pmcf;

    pmcf = rd->pmcf;

    if (rd->path) {
        ac = redisAsyncConnectUnix(rd->path);

    } else {
        ac = redisAsyncConnect(rd->host, rd->port);
    }

    if (ac == NULL) {
        ngx_log_error(NGX_LOG_ERR, rd->log, 0,
                      "redis: could not allocate a connection");
        ngx_platform_redis_schedule(rd);
        return;
    }

    if (ac->err) {
        ngx_log_error(NGX_LOG_ERR, rd->log, 0,
                      "redis: connect to \"%V\" failed: %s",
                      &pmcf->redis_addr, ac->c.errstr);
        redisAsyncFree(ac);
        ngx_platform_redis_schedule(rd);
        return;
    }

    if (ngx_platform_redis_attach(ac, rd->log) != NGX_OK) {
        redisAsyncFree(ac);
        ngx_platform_redis_schedule(rd);
        return;
    }

    ac->data = rd;
    rd->ac = ac;
    rd->ready = 0;
    rd->setup_pending = 0;

    if (!rd->path) {
        (void) redisEnableKeepAlive(&ac->c);
    }

    /* also registers the write event that reports the connect */
    redisAsyncSetConnectCallback(ac, ngx_platform_redis_on_connect);

    /* queued now, written once connected; replies come first, in order */

    if (pmcf->redis_password.len) {
        argv[0] = "AUTH";
        argvlen[0] = 4;
        argv[1] = (const char *) pmcf->redis_password.data;
        argvlen[1] = pmcf->redis_password.len;

        if (redisAsyncCommandArgv(ac, ngx_platform_redis_setup_reply,
                                  "AUTH", 2, argv, argvlen)
            == REDIS_OK)
        {
            rd->setup_pending++;
        }
    }

    if (pmcf->redis_db > 0) {
        argv[0] = "SELECT";
        argvlen[0] = 6;
        argv[1] = (const char *) db;
        argvlen[1] = ngx_sprintf(db, "%i", pmcf->redis_db) - db;

        if (redisAsyncCommandArgv(ac, ngx_platform_redis_setup_reply,
                                  "SELECT", 2, argv, argvlen)
            == REDIS_OK)
        {
            rd->setup_pending++;
        }
    }

    /* a server that accepts but does not answer is not ready */

    argv[0] = "PING";
    argvlen[0] = 4;

    if (redisAsyncCommandArgv(ac, ngx_platform_redis_setup_reply,
                              "PING", 1, argv, argvlen)
        == REDIS_OK)
    {
        rd->setup_pending++;
    }

    ngx_add_timer(&rd->connect_timer, pmcf->redis_connect_timeout);
}


static void
ngx_platform_redis_schedule(ngx_platform_redis_t *rd)
{
    ngx_msec_t  delay;

    if (rd->exiting || rd->reconnect_timer.timer_set) {
        return;
    }

    /* 75% to 100% of the backoff, so that workers spread out */

    delay = rd->backoff
            - (ngx_msec_t) ngx_random() % (rd->backoff / 4 + 1);

    rd->backoff = ngx_min(rd->backoff * 2, NGX_PLATFORM_REDIS_BACKOFF_MAX);

    ngx_log_debug1(NGX_LOG_DEBUG_EVENT, rd->log, 0,
                   "redis: reconnect in %M ms", delay);

    ngx_add_timer(&rd->reconnect_timer, delay);
}


static void
ngx_platform_redis_reconnect_handler(ngx_event_t *ev)
{
    ngx_connection_t      *c;
    ngx_platform_redis_t  *rd;

    c = ev->data;
    rd = c->data;

    if (rd->exiting || ngx_exiting || ngx_terminate || ngx_quit) {
        return;
    }

    if (rd->ac == NULL && rd->resolving == NULL) {
        ngx_platform_redis_connect(rd);
    }
}


static void
ngx_platform_redis_connect_timeout(ngx_event_t *ev)
{
    ngx_connection_t      *c;
    ngx_platform_redis_t  *rd;

    c = ev->data;
    rd = c->data;

    if (rd->ac == NULL || rd->ready) {
        return;
    }

    ngx_log_error(NGX_LOG_ERR, rd->log, 0,
                  "redis: connect to \"%V\" timed out",
                  &rd->pmcf->redis_addr);

    /* not inside a hiredis callback: frees now, cleanup reschedules */
    redisAsyncFree(rd->ac);
}


static void
ngx_platform_redis_on_connect(const redisAsyncContext *ac, int status)
{
    ngx_platform_redis_t  *rd;

    rd = ac->data;

    if (status != REDIS_OK) {
        /* hiredis frees the context after this returns */
        ngx_log_error(NGX_LOG_ERR, rd->log, 0,
                      "redis: connect to \"%V\" failed: %s",
                      &rd->pmcf->redis_addr, ac->c.errstr);
        return;
    }

    if (rd->ac == ac && rd->setup_pending == 0) {
        ngx_platform_redis_set_ready(rd);
    }
}


static void
ngx_platform_redis_setup_reply(redisAsyncContext *ac, void *data,
    void *privdata)
{
    redisReply  *reply = data;

    ngx_platform_redis_t  *rd;

    rd = ac->data;

    if (reply == NULL || rd->ac != ac) {
        return;
    }

    if (reply->type == REDIS_REPLY_ERROR) {
        /* the error text is the server's: it never holds the password */
        ngx_log_error(NGX_LOG_ERR, rd->log, 0, "redis: %s failed: %*s",
                      (char *) privdata, reply->len, reply->str);

        /* inside a reply callback: hiredis frees once this returns */
        redisAsyncFree(ac);
        return;
    }

    if (rd->setup_pending > 0 && --rd->setup_pending == 0) {
        ngx_platform_redis_set_ready(rd);
    }
}


static void
ngx_platform_redis_set_ready(ngx_platform_redis_t *rd)
{
    if (rd->connect_timer.timer_set) {
        ngx_del_timer(&rd->connect_timer);
    }

    rd->ready = 1;
    rd->backoff = NGX_PLATFORM_REDIS_BACKOFF_MIN;

    ngx_platform_metric_inc(NGX_PLATFORM_M_REDIS_CONNECTS);
    rd->last_reply = ngx_current_msec;

    if (rd->name.len) {
        ngx_log_error(NGX_LOG_INFO, rd->log, 0,
                      "redis: connected to \"%V\" at %s",
                      &rd->pmcf->redis_addr, rd->host);
        return;
    }

    ngx_log_error(NGX_LOG_INFO, rd->log, 0,
                  "redis: connected to \"%V\"", &rd->pmcf->redis_addr);
}


/* the context is being freed, for whatever reason: start over */

static void
ngx_platform_redis_gone(ngx_platform_redis_t *rd, redisAsyncContext *ac)
{
    if (rd == NULL || rd->ac != ac) {
        return;
    }

    if (rd->ready) {
        ngx_log_error(NGX_LOG_ERR, rd->log, 0,
                      "redis: connection to \"%V\" lost: %s",
                      &rd->pmcf->redis_addr,
                      ac->c.err ? ac->c.errstr : "closed");
    }

    rd->ac = NULL;
    rd->ready = 0;
    rd->setup_pending = 0;

    if (rd->connect_timer.timer_set) {
        ngx_del_timer(&rd->connect_timer);
    }

    ngx_platform_redis_schedule(rd);
}


/* event adapter: hiredis's hooks on an nginx connection */

static ngx_int_t
ngx_platform_redis_attach(redisAsyncContext *ac, ngx_log_t *log)
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
    c->read->handler = ngx_platform_redis_read_handler;
    c->write->handler = ngx_platform_redis_write_handler;

    ac->ev.data = c;
    ac->ev.addRead = ngx_platform_redis_add_read;
    ac->ev.delRead = ngx_platform_redis_del_read;
    ac->ev.addWrite = ngx_platform_redis_add_write;
    ac->ev.delWrite = ngx_platform_redis_del_write;
    ac->ev.cleanup = ngx_platform_redis_cleanup;

    return NGX_OK;
}


/*
 * Level-triggered registration (NGX_LEVEL_EVENT, no EPOLLET): hiredis
 * reads at most 16 KiB per call, so an edge-triggered read event would
 * strand the rest of a large reply in the socket.
 */

static void
ngx_platform_redis_add_read(void *data)
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
ngx_platform_redis_del_read(void *data)
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
ngx_platform_redis_add_write(void *data)
{
    ngx_connection_t  *c = data;

    redisAsyncContext     *ac;
    ngx_platform_redis_t  *rd;

    if (c == NULL || c->write->active) {
        return;
    }

    ac = c->data;
    rd = ac->data;

    if (rd != NULL && rd->ac == ac && !rd->flushing
        && (ac->c.flags & REDIS_CONNECTED))
    {
        if (!rd->flush.posted) {
            ngx_post_event(&rd->flush, &ngx_posted_events);
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
ngx_platform_redis_del_write(void *data)
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
ngx_platform_redis_cleanup(void *data)
{
    ngx_connection_t  *c = data;

    redisAsyncContext     *ac;
    ngx_platform_redis_t  *rd;

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

    rd = ac->data;

    if (rd != NULL && rd->ac == ac && rd->flush.posted) {
        ngx_delete_posted_event(&rd->flush);
    }

    ngx_close_connection(c);

    ngx_platform_redis_gone(ac->data, ac);
}


static void
ngx_platform_redis_read_handler(ngx_event_t *ev)
{
    ngx_connection_t  *c;

    c = ev->data;

    /* may free the context and c */
    redisAsyncHandleRead(c->data);
}


static void
ngx_platform_redis_write_handler(ngx_event_t *ev)
{
    ngx_connection_t  *c;

    c = ev->data;

    redisAsyncHandleWrite(c->data);
}


static void
ngx_platform_redis_flush_handler(ngx_event_t *ev)
{
    ngx_connection_t      *c;
    ngx_platform_redis_t  *rd;

    c = ev->data;
    rd = c->data;

    if (rd->ac == NULL) {
        return;
    }

    /* a write that leaves some behind registers for the socket */
    rd->flushing = 1;

    /* may free the context */
    redisAsyncHandleWrite(rd->ac);

    rd->flushing = 0;
}


/* commands */

ngx_int_t
ngx_platform_redis_command(ngx_pool_t *pool, ngx_log_t *log,
    ngx_platform_redis_handler_pt handler, void *data, int argc,
    const char **argv, const size_t *argvlen)
{
    u_char                    *p;
    size_t                     len;
    ngx_platform_redis_cmd_t  *cmd;

    if (!ngx_platform_redis_usable(ngx_platform_redis)) {
        ngx_platform_metric_inc(NGX_PLATFORM_M_REDIS_ERRORS);
        return NGX_PLATFORM_UNAVAILABLE;
    }

    len = ngx_platform_redis_format_len(argc, argvlen);

    /* the command is written after cmd, in the same allocation */
    cmd = ngx_alloc(sizeof(ngx_platform_redis_cmd_t) + len, log);
    if (cmd == NULL) {
        return NGX_ERROR;
    }

    ngx_memzero(cmd, sizeof(ngx_platform_redis_cmd_t));

    cmd->handler = handler;
    cmd->data = data;
    cmd->log = log;

    p = (u_char *) (cmd + 1);
    len = ngx_platform_redis_format(p, argc, argv, argvlen) - p;

    /* hiredis copies the command into its buffer at once */
    return ngx_platform_redis_submit(pool, cmd, p, len);
}


ngx_int_t
ngx_platform_redis_eval(ngx_pool_t *pool, ngx_log_t *log,
    ngx_platform_redis_script_t *script, int nkeys, int argc,
    const char **argv, const size_t *argvlen,
    ngx_platform_redis_handler_pt handler, void *data)
{
    u_char                    *p, *n;
    size_t                     len;
    u_char                     nk[NGX_INT_T_LEN];
    ngx_platform_redis_cmd_t  *cmd;

    if (!ngx_platform_redis_usable(ngx_platform_redis)) {
        ngx_platform_metric_inc(NGX_PLATFORM_M_REDIS_ERRORS);
        return NGX_PLATFORM_UNAVAILABLE;
    }

    if (script->sha1[0] == '\0') {
        ngx_platform_redis_script_sha1(script);
    }

    /* EVALSHA sha1 nkeys keys... args... */

    len = sizeof("*\r\n$7\r\nEVALSHA\r\n$40\r\n\r\n$\r\n\r\n") - 1
          + 40 + 3 * NGX_INT_T_LEN
          + ngx_platform_redis_format_len(argc, argvlen);

    /* kept past the caller: the NOSCRIPT retry may come after it */
    cmd = ngx_alloc(sizeof(ngx_platform_redis_cmd_t) + len, log);
    if (cmd == NULL) {
        return NGX_ERROR;
    }

    ngx_memzero(cmd, sizeof(ngx_platform_redis_cmd_t));

    cmd->handler = handler;
    cmd->data = data;
    cmd->log = log;
    cmd->script = script;
    cmd->argc = argc + 3;
    cmd->buf = (u_char *) (cmd + 1);

    p = ngx_sprintf(cmd->buf, "*%d\r\n$7\r\nEVALSHA\r\n$40\r\n",
                    cmd->argc);
    p = ngx_cpymem(p, script->sha1, 40);
    *p++ = '\r';
    *p++ = '\n';

    cmd->tail = p - cmd->buf;

    n = nk;
    len = ngx_sprintf(n, "%d", nkeys) - n;
    p = ngx_platform_redis_format_args(p, 1, (const char **) &n, &len);
    p = ngx_platform_redis_format_args(p, argc, argv, argvlen);

    cmd->len = p - cmd->buf;

    return ngx_platform_redis_submit(pool, cmd, cmd->buf, cmd->len);
}


/*
 * The protocol's form of a command, written here rather than by hiredis's
 * formatter, which grows an sds string piece by piece
 */

static size_t
ngx_platform_redis_format_len(int argc, const size_t *argvlen)
{
    int     i;
    size_t  len;

    len = sizeof("*\r\n") - 1 + NGX_INT_T_LEN;

    for (i = 0; i < argc; i++) {
        len += sizeof("$\r\n\r\n") - 1 + NGX_SIZE_T_LEN + argvlen[i];
    }

    return len;
}


static u_char *
ngx_platform_redis_format(u_char *p, int argc, const char **argv,
    const size_t *argvlen)
{
    p = ngx_sprintf(p, "*%d\r\n", argc);

    return ngx_platform_redis_format_args(p, argc, argv, argvlen);
}


/* each argument a bulk string: $length CRLF bytes CRLF */

static u_char *
ngx_platform_redis_format_args(u_char *p, int argc, const char **argv,
    const size_t *argvlen)
{
    int      i;
    u_char  *d, digits[NGX_SIZE_T_LEN];
    size_t   n;

    for (i = 0; i < argc; i++) {
        d = digits + NGX_SIZE_T_LEN;
        n = argvlen[i];

        do {
            *--d = (u_char) ('0' + n % 10);
            n /= 10;
        } while (n);

        *p++ = '$';
        p = ngx_cpymem(p, d, digits + NGX_SIZE_T_LEN - d);
        *p++ = '\r';
        *p++ = '\n';
        p = ngx_cpymem(p, argv[i], argvlen[i]);
        *p++ = '\r';
        *p++ = '\n';
    }

    return p;
}


static ngx_uint_t
ngx_platform_redis_usable(ngx_platform_redis_t *rd)
{
    return rd != NULL
           && rd->ac != NULL
           && rd->ready
           && !rd->exiting
           && !(rd->ac->c.flags & (REDIS_DISCONNECTING|REDIS_FREEING));
}


/* sends cmd, or frees it; owns cmd from here on */

static ngx_int_t
ngx_platform_redis_submit(ngx_pool_t *pool, ngx_platform_redis_cmd_t *cmd,
    u_char *buf, size_t len)
{
    ngx_pool_cleanup_t    *cln;
    ngx_platform_redis_t  *rd;

    rd = ngx_platform_redis;

    /* before the send: a failure after it could not take cmd back */
    cln = ngx_pool_cleanup_add(pool, 0);
    if (cln == NULL) {
        ngx_free(cmd);
        return NGX_ERROR;
    }

    if (redisAsyncFormattedCommand(rd->ac, ngx_platform_redis_reply, cmd,
                                   (const char *) buf, len)
        != REDIS_OK)
    {
        ngx_log_error(NGX_LOG_ERR, cmd->log, 0,
                      "redis: could not queue a command");
        ngx_free(cmd);
        return NGX_PLATFORM_UNAVAILABLE;
    }

    /* from here hiredis calls ngx_platform_redis_reply() exactly once */

    cmd->attached = 1;
    cmd->cleanup = cln;
    cmd->ac = rd->ac;
    cmd->rd = rd;
    cmd->sent = ngx_current_msec;

    cln->handler = ngx_platform_redis_cmd_cleanup;
    cln->data = cmd;

    ngx_queue_insert_tail(&rd->cmds, &cmd->queue);

    if (!rd->cmd_timer.timer_set) {
        ngx_add_timer(&rd->cmd_timer, rd->pmcf->redis_timeout);
    }

    ngx_platform_metric_inc(NGX_PLATFORM_M_REDIS_COMMANDS);

    return NGX_DONE;
}


static void
ngx_platform_redis_reply(redisAsyncContext *ac, void *data, void *privdata)
{
    redisReply                *reply = data;
    ngx_platform_redis_cmd_t  *cmd = privdata;

    void                           *caller;
    ngx_int_t                       rc;
    ngx_uint_t                      attached;
    ngx_platform_redis_t           *rd;
    ngx_platform_redis_handler_pt   handler;

    rd = ac->data;

    /*
     * A NULL reply: the context is being torn down; hiredis has set
     * REDIS_DISCONNECTING or REDIS_FREEING, so new commands are refused.
     */
    if (reply != NULL) {
        rd->last_reply = ngx_current_msec;

        if (reply->type == REDIS_REPLY_ERROR
            && ngx_platform_redis_readonly(reply)
            && rd->ac == ac
            && !(ac->c.flags & REDIS_FREEING))
        {
            /*
             * A replica: after a failover the address may lead to the
             * new primary. The error still goes to the caller.
             */
            ngx_log_error(NGX_LOG_ERR, rd->log, 0,
                          "redis: \"%V\" is a read-only replica "
                          "(a failover?), reconnecting",
                          &rd->pmcf->redis_addr);

            /* logged here; in a callback: freed once this returns */
            rd->ready = 0;
            redisAsyncFree(ac);
        }
    }

    if (cmd->attached
        && reply != NULL
        && !(ac->c.flags & REDIS_FREEING)
        && cmd->script != NULL
        && !cmd->retried
        && !rd->exiting
        && reply->type == REDIS_REPLY_ERROR
        && reply->len >= 8
        && ngx_strncmp(reply->str, "NOSCRIPT", 8) == 0)
    {
        /* not cached on this server (yet, or any more): send the source */

        cmd->retried = 1;

        if (ngx_platform_redis_eval_source(ac, cmd) == NGX_OK) {
            return;
        }

        ngx_log_error(NGX_LOG_ERR, cmd->log, 0,
                      "redis: could not queue EVAL");

        reply = NULL;
    }

    if (reply != NULL) {
        ngx_platform_metrics_observe(NGX_PLATFORM_H_REDIS,
                                     ngx_current_msec - cmd->sent);
    }

    handler = cmd->handler;
    caller = cmd->data;
    attached = cmd->attached;

    ngx_platform_redis_detach(cmd);
    ngx_free(cmd);

    if (!attached || rd->exiting) {
        /* timed out, caller gone or exiting: the reply is dropped */
        return;
    }

    rc = (reply != NULL) ? NGX_OK : NGX_PLATFORM_UNAVAILABLE;

    if (reply == NULL || reply->type == REDIS_REPLY_ERROR) {
        ngx_platform_metric_inc(NGX_PLATFORM_M_REDIS_ERRORS);
    }

    handler(caller, reply, rc);
}


/* EVAL with the script's source, the same keys and arguments */

static ngx_int_t
ngx_platform_redis_eval_source(redisAsyncContext *ac,
    ngx_platform_redis_cmd_t *cmd)
{
    u_char     *buf, *p;
    size_t      len, slen;
    ngx_int_t   rc;

    slen = ngx_strlen(cmd->script->source);

    len = sizeof("*\r\n$4\r\nEVAL\r\n$\r\n\r\n") - 1 + NGX_INT_T_LEN
          + NGX_SIZE_T_LEN + slen + cmd->len - cmd->tail;

    buf = ngx_alloc(len, ngx_cycle->log);
    if (buf == NULL) {
        return NGX_ERROR;
    }

    /* EVAL source, then what followed the sha1 */

    p = ngx_sprintf(buf, "*%d\r\n$4\r\nEVAL\r\n$%uz\r\n", cmd->argc, slen);
    p = ngx_cpymem(p, cmd->script->source, slen);
    *p++ = '\r';
    *p++ = '\n';
    p = ngx_cpymem(p, cmd->buf + cmd->tail, cmd->len - cmd->tail);

    rc = (redisAsyncFormattedCommand(ac, ngx_platform_redis_reply, cmd,
                                     (const char *) buf, p - buf)
          == REDIS_OK) ? NGX_OK : NGX_ERROR;

    ngx_free(buf);

    return rc;
}


/*
 * -READONLY, or the same error raised inside a script (older servers wrap
 * it in "ERR Error running script ... -READONLY ...")
 */

static ngx_uint_t
ngx_platform_redis_readonly(redisReply *reply)
{
    if (reply->len >= 8 && ngx_strncmp(reply->str, "READONLY", 8) == 0) {
        return 1;
    }

    return reply->len > 3
           && ngx_strncmp(reply->str, "ERR", 3) == 0
           && ngx_strnstr((u_char *) reply->str, "-READONLY ",
                          reply->len) != NULL;
}


/* the commands past their deadline, oldest first */

static void
ngx_platform_redis_cmd_timeout(ngx_event_t *ev)
{
    ngx_msec_int_t             left;
    ngx_connection_t          *c;
    ngx_platform_redis_t      *rd;
    ngx_platform_redis_cmd_t  *cmd;

    c = ev->data;
    rd = c->data;

    /* a caller answered here may send another command, or drop others */

    while (!ngx_queue_empty(&rd->cmds)) {
        cmd = ngx_queue_data(ngx_queue_head(&rd->cmds),
                             ngx_platform_redis_cmd_t, queue);

        left = (ngx_msec_int_t)
                   (cmd->sent + rd->pmcf->redis_timeout - ngx_current_msec);

        if (left > 0) {
            ngx_add_timer(&rd->cmd_timer, (ngx_msec_t) left);
            return;
        }

        ngx_platform_redis_expire(rd, cmd);
    }
}


static void
ngx_platform_redis_expire(ngx_platform_redis_t *rd,
    ngx_platform_redis_cmd_t *cmd)
{
    void                           *caller;
    ngx_uint_t                      stuck;
    redisAsyncContext              *ac;
    ngx_platform_redis_handler_pt   handler;

    handler = cmd->handler;
    caller = cmd->data;

    ngx_platform_log_limited(NGX_PLATFORM_LOG_REDIS_FAILED, NGX_LOG_ERR,
                             cmd->log, 0, "redis: command timed out");

    ngx_platform_metric_inc(NGX_PLATFORM_M_REDIS_TIMEOUTS);

    /*
     * Nothing at all came back on this connection since the command was
     * sent: take it as dead (a half-open TCP connection would otherwise
     * stay "connected" for good) and reconnect.
     */
    ac = cmd->ac;
    stuck = rd->ac == ac
            && (ngx_msec_int_t) (rd->last_reply - cmd->sent) < 0;

    /* cmd stays with hiredis until its reply or the teardown */
    ngx_platform_redis_detach(cmd);

    if (stuck) {
        ngx_log_error(NGX_LOG_ERR, rd->log, 0,
                      "redis: no reply from \"%V\", reconnecting",
                      &rd->pmcf->redis_addr);

        /* logged above; not inside a hiredis callback: frees now */
        rd->ready = 0;
        redisAsyncFree(ac);
    }

    handler(caller, NULL, NGX_PLATFORM_TIMEOUT);
}


/* the caller's pool goes away (a client abort): a later reply is dropped */

static void
ngx_platform_redis_cmd_cleanup(void *data)
{
    ngx_platform_redis_cmd_t  *cmd = data;

    /* the cleanup itself is being run: it is not reset */
    cmd->cleanup = NULL;

    ngx_platform_redis_detach(cmd);
}


static void
ngx_platform_redis_detach(ngx_platform_redis_cmd_t *cmd)
{
    ngx_platform_redis_t  *rd;

    if (!cmd->attached) {
        return;
    }

    rd = cmd->rd;

    ngx_queue_remove(&cmd->queue);

    if (ngx_queue_empty(&rd->cmds) && rd->cmd_timer.timer_set) {
        ngx_del_timer(&rd->cmd_timer);
    }

    if (cmd->cleanup) {
        cmd->cleanup->handler = NULL;
    }

    cmd->attached = 0;
    cmd->data = NULL;
    cmd->log = NULL;
}


static void
ngx_platform_redis_script_sha1(ngx_platform_redis_script_t *script)
{
    u_char      digest[20];
    ngx_sha1_t  sha1;

    ngx_sha1_init(&sha1);
    ngx_sha1_update(&sha1, script->source, ngx_strlen(script->source));
    ngx_sha1_final(digest, &sha1);

    ngx_hex_dump((u_char *) script->sha1, digest, 20);
    script->sha1[40] = '\0';
}
