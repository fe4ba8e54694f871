
/*
 * ngx_platform: Redis on the nginx event loop. The commands: formatted,
 * sent to the node of the deployment that serves them (one multiplexed
 * connection per server and worker, ngx_platform_redis_node.c), given a
 * deadline (hiredis 0.14 has none), retried with EVAL on NOSCRIPT, and
 * answered to their caller exactly once.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_event.h>
#include <ngx_http.h>
#include <ngx_sha1.h>

#include "ngx_platform_redis.h"
#include "ngx_platform_redis_node.h"
#include "ngx_platform_redis_cluster.h"
#include "ngx_platform_redis_sentinel.h"


/* -MOVED and -ASK followed for one command, at most */
#define NGX_PLATFORM_REDIS_REDIRECTS  3

/* a command answered -TRYAGAIN is sent again this much later */
#define NGX_PLATFORM_REDIS_TRYAGAIN   20


typedef struct {
    void                           *data;
    ngx_log_t                      *log;       /* the caller's */
    ngx_platform_redis_handler_pt   handler;
    ngx_pool_cleanup_t             *cleanup;
    redisAsyncContext              *ac;        /* the one it was sent on */
    ngx_platform_redis_node_t      *node;
    ngx_queue_t                     queue;     /* in node->cmds if attached */
    ngx_msec_t                      sent;      /* on this connection */
    ngx_msec_t                      first;     /* its deadline counts from */
    ngx_msec_t                      due;       /* parked: sent again */

    /*
     * The command as sent, for the EVAL retry of a script and for a
     * redirection; tail is where a script's arguments after the sha1
     * start
     */
    ngx_platform_redis_script_t    *script;
    u_char                         *buf;
    size_t                          len;
    size_t                          tail;
    int                             argc;
    ngx_uint_t                      slot;      /* Redis Cluster */
    unsigned                        attached:1;
    unsigned                        retried:1;
    unsigned                        redirects:2;
    unsigned                        resent:1;  /* redirected or parked */
    unsigned                        parked:1;  /* in rd->parked */
    unsigned                        asking:1;  /* sent after ASKING */
    unsigned                        waiting:1; /* for WAIT's reply */

    /* a durable script's reply, held while WAIT runs for wait replicas */
    long long                       held;
    ngx_uint_t                      wait;
} ngx_platform_redis_cmd_t;


/* the worker's Redis deployment */

struct ngx_platform_redis_s {
    ngx_platform_main_conf_t       *pmcf;
    ngx_log_t                      *log;

    /* a single server: platform_redis */
    ngx_platform_redis_node_t      *node;

    ngx_uint_t                      deployment;

    /*
     * Commands answered -TRYAGAIN (their keys' slot is being migrated),
     * oldest first, sent again by the timer
     */
    ngx_queue_t                     parked;
    ngx_event_t                     retry;
    ngx_connection_t                dummy;
};


static size_t ngx_platform_redis_format_len(int argc,
    const size_t *argvlen);
static u_char *ngx_platform_redis_format(u_char *p, int argc,
    const char **argv, const size_t *argvlen);
static u_char *ngx_platform_redis_format_args(u_char *p, int argc,
    const char **argv, const size_t *argvlen);

static ngx_platform_redis_node_t *ngx_platform_redis_route(
    ngx_platform_redis_t *rd, ngx_platform_redis_cmd_t *cmd);
static ngx_int_t ngx_platform_redis_submit(ngx_pool_t *pool,
    ngx_platform_redis_cmd_t *cmd);
static ngx_int_t ngx_platform_redis_send(ngx_platform_redis_node_t *node,
    ngx_platform_redis_cmd_t *cmd, ngx_uint_t ask);
static ngx_uint_t ngx_platform_redis_redirect(redisAsyncContext *ac,
    ngx_platform_redis_cmd_t *cmd, redisReply *reply);
static void ngx_platform_redis_unqueue(ngx_platform_redis_cmd_t *cmd);
static void ngx_platform_redis_mark_resent(ngx_platform_redis_cmd_t *cmd);
static ngx_uint_t ngx_platform_redis_park(ngx_platform_redis_cmd_t *cmd);
static void ngx_platform_redis_retry_handler(ngx_event_t *ev);
static void ngx_platform_redis_resend(ngx_platform_redis_cmd_t *cmd);
static void ngx_platform_redis_free_parked(ngx_platform_redis_cmd_t *cmd);
static ngx_uint_t ngx_platform_redis_key_slot(int argc, const char **argv,
    const size_t *argvlen, int key);
static char *ngx_platform_redis_seeds(ngx_conf_t *cf,
    ngx_platform_main_conf_t *pmcf, ngx_uint_t first);
static char *ngx_platform_redis_password_file(ngx_conf_t *cf,
    ngx_str_t *name, ngx_str_t *password);
static void ngx_platform_redis_reply(redisAsyncContext *ac, void *data,
    void *privdata);
static ngx_int_t ngx_platform_redis_eval_source(redisAsyncContext *ac,
    ngx_platform_redis_cmd_t *cmd);
static ngx_uint_t ngx_platform_redis_readonly(redisReply *reply);
static ngx_int_t ngx_platform_redis_wait(redisAsyncContext *ac,
    ngx_platform_redis_cmd_t *cmd, redisReply *reply);
static redisReply *ngx_platform_redis_waited(ngx_platform_redis_cmd_t *cmd,
    redisReply *reply, redisReply *held);
static void ngx_platform_redis_arm(ngx_platform_redis_node_t *node,
    ngx_platform_redis_cmd_t *cmd);
static void ngx_platform_redis_cmd_timeout(ngx_event_t *ev);
static ngx_platform_redis_cmd_t *ngx_platform_redis_late(
    ngx_platform_redis_node_t *node, ngx_msec_int_t *left);
static void ngx_platform_redis_expire(ngx_platform_redis_node_t *node,
    ngx_platform_redis_cmd_t *cmd);
static void ngx_platform_redis_cmd_cleanup(void *data);
static void ngx_platform_redis_detach(ngx_platform_redis_cmd_t *cmd);
static void ngx_platform_redis_script_sha1(
    ngx_platform_redis_script_t *script);


/* the worker's deployment; set in init_process */
static ngx_platform_redis_t  *ngx_platform_redis;

/*
 * Commands sent again (redirected, or parked after -TRYAGAIN) keep the
 * deadline of their first send: while any is queued, a node's queue is
 * not in the order of the deadlines
 */
static ngx_uint_t             ngx_platform_redis_nresent;


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
    rd->deployment = pmcf->redis_deployment;

    pmcf->redis = rd;
    ngx_platform_redis = rd;

    ngx_queue_init(&rd->parked);

    rd->dummy.fd = (ngx_socket_t) -1;
    rd->dummy.data = rd;
    rd->dummy.log = cycle->log;

    rd->retry.handler = ngx_platform_redis_retry_handler;
    rd->retry.data = &rd->dummy;
    rd->retry.log = cycle->log;
    rd->retry.cancelable = 1;

    if (rd->deployment == NGX_PLATFORM_REDIS_CLUSTER) {
        return ngx_platform_redis_cluster_init(cycle, pmcf,
                                               ngx_platform_redis_cmd_timeout);
    }

    /* with Sentinel: a placeholder address until a sentinel names one */

    rd->node = ngx_platform_redis_node_create(cycle, cycle->pool, pmcf,
                               rd->deployment == NGX_PLATFORM_REDIS_SENTINEL
                               ? pmcf->redis_seeds->elts : &pmcf->redis_addr);
    if (rd->node == NULL) {
        return NGX_ERROR;
    }

    rd->node->cmd_timer.handler = ngx_platform_redis_cmd_timeout;

    if (rd->deployment == NGX_PLATFORM_REDIS_SENTINEL) {
        /* connected once a sentinel names the master */
        return ngx_platform_redis_sentinel_init(cycle, pmcf, rd->node);
    }

    ngx_platform_redis_node_connect(rd->node);

    return NGX_OK;
}


void
ngx_platform_redis_exit_process(ngx_cycle_t *cycle,
    ngx_platform_main_conf_t *pmcf)
{
    ngx_platform_redis_t  *rd;

    rd = pmcf->redis;
    if (rd == NULL) {
        return;
    }

    if (rd->node) {
        ngx_platform_redis_node_close(rd->node);
    }

    if (rd->deployment == NGX_PLATFORM_REDIS_CLUSTER) {
        ngx_platform_redis_cluster_exit();
    }

    /* their callers are not answered, as those of the nodes closed */

    while (!ngx_queue_empty(&rd->parked)) {
        ngx_platform_redis_free_parked(
            ngx_queue_data(ngx_queue_head(&rd->parked),
                           ngx_platform_redis_cmd_t, queue));
    }

    if (rd->retry.timer_set) {
        ngx_del_timer(&rd->retry);
    }

    if (rd->deployment == NGX_PLATFORM_REDIS_SENTINEL) {
        ngx_platform_redis_sentinel_exit();
    }

    ngx_platform_redis = NULL;
    pmcf->redis = NULL;
}


ngx_uint_t
ngx_platform_redis_connected(void)
{
    ngx_platform_redis_t  *rd;

    rd = ngx_platform_redis;

    if (rd == NULL) {
        return 0;
    }

    if (rd->deployment == NGX_PLATFORM_REDIS_CLUSTER) {
        return ngx_platform_redis_cluster_connected();
    }

    return ngx_platform_redis_node_usable(rd->node);
}


ngx_uint_t
ngx_platform_redis_key_connected(u_char *key, size_t len)
{
    ngx_platform_redis_t  *rd;

    rd = ngx_platform_redis;

    if (rd == NULL) {
        return 0;
    }

    if (rd->deployment == NGX_PLATFORM_REDIS_CLUSTER) {
        /* the other masters serve on while one is failed over */
        return ngx_platform_redis_cluster_node(
                   ngx_platform_redis_cluster_slot(key, len))
               != NULL;
    }

    return ngx_platform_redis_node_usable(rd->node);
}


char *
ngx_platform_redis_cluster_conf(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf)
{
    ngx_platform_main_conf_t *pmcf = conf;

    if (pmcf->redis_deployment != NGX_PLATFORM_REDIS_SINGLE) {
        return "is duplicate, or set with \"platform_redis_sentinel\": "
               "the module uses one Redis deployment";
    }

    if (ngx_platform_redis_seeds(cf, pmcf, 1) != NGX_CONF_OK) {
        return NGX_CONF_ERROR;
    }

    if (pmcf->redis_seeds->nelts == 0) {
        return "names no seed node: the cluster's map is read from them";
    }

    pmcf->redis_deployment = NGX_PLATFORM_REDIS_CLUSTER;

    return NGX_CONF_OK;
}


char *
ngx_platform_redis_sentinel_conf(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf)
{
    ngx_platform_main_conf_t *pmcf = conf;

    ngx_str_t  *value;

    if (pmcf->redis_deployment != NGX_PLATFORM_REDIS_SINGLE) {
        return "is duplicate, or set with \"platform_redis_cluster\": "
               "the module uses one Redis deployment";
    }

    value = cf->args->elts;

    if (value[1].len == 0 || ngx_strlchr(value[1].data,
                                         value[1].data + value[1].len, ':'))
    {
        return "needs the master's name first, then the sentinels";
    }

    pmcf->redis_master_name = value[1];

    if (ngx_platform_redis_seeds(cf, pmcf, 2) != NGX_CONF_OK) {
        return NGX_CONF_ERROR;
    }

    if (pmcf->redis_seeds->nelts == 0) {
        return "names no sentinel";
    }

    pmcf->redis_deployment = NGX_PLATFORM_REDIS_SENTINEL;

    return NGX_CONF_OK;
}


/*
 * The addresses from argument first on; password=FILE (the data nodes')
 * and sentinel_password=FILE (the sentinels') read now
 */

static char *
ngx_platform_redis_seeds(ngx_conf_t *cf, ngx_platform_main_conf_t *pmcf,
    ngx_uint_t first)
{
    ngx_str_t   *value, *seed, name, *password;
    ngx_uint_t   i;

    pmcf->redis_seeds = ngx_array_create(cf->pool, cf->args->nelts,
                                         sizeof(ngx_str_t));
    if (pmcf->redis_seeds == NULL) {
        return NGX_CONF_ERROR;
    }

    value = cf->args->elts;

    for (i = first; i < cf->args->nelts; i++) {

        if (ngx_strncmp(value[i].data, "password=", 9) == 0) {
            name.data = value[i].data + 9;
            name.len = value[i].len - 9;
            password = &pmcf->redis_password;

        } else if (ngx_strncmp(value[i].data, "sentinel_password=", 18) == 0
                   && pmcf->redis_master_name.len)
        {
            name.data = value[i].data + 18;
            name.len = value[i].len - 18;
            password = &pmcf->redis_sentinel_password;

        } else {
            seed = ngx_array_push(pmcf->redis_seeds);
            if (seed == NULL) {
                return NGX_CONF_ERROR;
            }

            *seed = value[i];
            continue;
        }

        if (password->len) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "\"%V\": the password is set already",
                               &value[i]);
            return NGX_CONF_ERROR;
        }

        if (ngx_platform_redis_password_file(cf, &name, password)
            != NGX_CONF_OK)
        {
            return NGX_CONF_ERROR;
        }
    }

    return NGX_CONF_OK;
}


/* the first line of the file, without its end of line */

static char *
ngx_platform_redis_password_file(ngx_conf_t *cf, ngx_str_t *name,
    ngx_str_t *password)
{
    u_char  *p;

    if (name->len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "a password file is empty");
        return NGX_CONF_ERROR;
    }

    if (ngx_conf_full_name(cf->cycle, name, 1) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    if (ngx_platform_conf_read_file(cf, name, 4096, "a password file",
                                    password)
        != NGX_CONF_OK)
    {
        return NGX_CONF_ERROR;
    }

    p = ngx_strlchr(password->data, password->data + password->len, '\n');
    if (p != NULL) {
        password->len = p - password->data;
    }

    if (password->len && password->data[password->len - 1] == '\r') {
        password->len--;
    }

    if (password->len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "the password file \"%V\" holds no password",
                           name);
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


char *
ngx_platform_redis_check_conf(ngx_conf_t *cf, ngx_platform_main_conf_t *pmcf)
{
    ngx_url_t                  u;
    ngx_uint_t                 literal;
    ngx_http_core_loc_conf_t  *clcf;

    if (pmcf->redis_deployment == NGX_PLATFORM_REDIS_CLUSTER) {
        return ngx_platform_redis_cluster_check_conf(cf, pmcf);
    }

    if (pmcf->redis_deployment == NGX_PLATFORM_REDIS_SENTINEL) {
        return ngx_platform_redis_sentinel_check_conf(cf, pmcf);
    }

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


/* commands */

ngx_int_t
ngx_platform_redis_command(ngx_pool_t *pool, ngx_log_t *log,
    ngx_platform_redis_handler_pt handler, void *data, int argc,
    const char **argv, const size_t *argvlen)
{
    size_t                     len;
    ngx_platform_redis_cmd_t  *cmd;

    if (ngx_platform_redis == NULL) {
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

    cmd->buf = (u_char *) (cmd + 1);
    cmd->len = ngx_platform_redis_format(cmd->buf, argc, argv, argvlen)
               - cmd->buf;
    cmd->argc = argc;

    /* the commands sent here name their key first: GET key, SET key ... */
    cmd->slot = ngx_platform_redis_key_slot(argc, argv, argvlen, 1);

    return ngx_platform_redis_submit(pool, cmd);
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

    if (ngx_platform_redis == NULL) {
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
    cmd->slot = ngx_platform_redis_key_slot(argc, argv, argvlen,
                                            nkeys > 0 ? 0 : -1);

    return ngx_platform_redis_submit(pool, cmd);
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


/* the node that serves cmd now, or NULL */

static ngx_platform_redis_node_t *
ngx_platform_redis_route(ngx_platform_redis_t *rd,
    ngx_platform_redis_cmd_t *cmd)
{
    if (rd->deployment == NGX_PLATFORM_REDIS_CLUSTER) {
        return ngx_platform_redis_cluster_node(cmd->slot);
    }

    return ngx_platform_redis_node_usable(rd->node) ? rd->node : NULL;
}


/*
 * The slot of argv[key] for a cluster, NGX_PLATFORM_REDIS_NO_SLOT for a
 * command without a key (key < 0 or past argc) or another deployment
 */

static ngx_uint_t
ngx_platform_redis_key_slot(int argc, const char **argv,
    const size_t *argvlen, int key)
{
    if (ngx_platform_redis->deployment != NGX_PLATFORM_REDIS_CLUSTER
        || key < 0 || key >= argc)
    {
        return NGX_PLATFORM_REDIS_NO_SLOT;
    }

    return ngx_platform_redis_cluster_slot((u_char *) argv[key],
                                           argvlen[key]);
}


/* sends cmd, or frees it; owns cmd from here on */

static ngx_int_t
ngx_platform_redis_submit(ngx_pool_t *pool, ngx_platform_redis_cmd_t *cmd)
{
    ngx_pool_cleanup_t         *cln;
    ngx_platform_redis_node_t  *node;

    node = ngx_platform_redis_route(ngx_platform_redis, cmd);

    if (node == NULL) {
        ngx_free(cmd);
        ngx_platform_metric_inc(NGX_PLATFORM_M_REDIS_ERRORS);
        return NGX_PLATFORM_UNAVAILABLE;
    }

    /* before the send: a failure after it could not take cmd back */
    cln = ngx_pool_cleanup_add(pool, 0);
    if (cln == NULL) {
        ngx_free(cmd);
        return NGX_ERROR;
    }

    cmd->first = ngx_current_msec;

    if (ngx_platform_redis_send(node, cmd, 0) != NGX_OK) {
        ngx_log_error(NGX_LOG_ERR, cmd->log, 0,
                      "redis: could not queue a command");
        ngx_free(cmd);
        return NGX_PLATFORM_UNAVAILABLE;
    }

    /* from here hiredis calls ngx_platform_redis_reply() exactly once */

    cmd->attached = 1;
    cmd->cleanup = cln;

    cln->handler = ngx_platform_redis_cmd_cleanup;
    cln->data = cmd;

    ngx_platform_metric_inc(NGX_PLATFORM_M_REDIS_COMMANDS);

    return NGX_DONE;
}


/*
 * cmd on node's connection (connected, or still connecting: hiredis
 * writes it once connected), behind ASKING for an -ASK redirection
 */

static ngx_int_t
ngx_platform_redis_send(ngx_platform_redis_node_t *node,
    ngx_platform_redis_cmd_t *cmd, ngx_uint_t ask)
{
    static char  asking[] = "*1\r\n$6\r\nASKING\r\n";

    if (node->ac == NULL
        || (node->ac->c.flags & (REDIS_DISCONNECTING|REDIS_FREEING)))
    {
        return NGX_ERROR;
    }

    /* hiredis copies the command into its buffer at once */

    if (ask
        && redisAsyncFormattedCommand(node->ac, NULL, NULL, asking,
                                      sizeof(asking) - 1)
           != REDIS_OK)
    {
        return NGX_ERROR;
    }

    if (redisAsyncFormattedCommand(node->ac, ngx_platform_redis_reply, cmd,
                                   (const char *) cmd->buf, cmd->len)
        != REDIS_OK)
    {
        return NGX_ERROR;
    }

    cmd->ac = node->ac;
    cmd->node = node;
    cmd->sent = ngx_current_msec;
    cmd->asking = ask;

    ngx_queue_insert_tail(&node->cmds, &cmd->queue);

    ngx_platform_redis_arm(node, cmd);

    return NGX_OK;
}


/* the node's timer, due by cmd's deadline at the latest */

static void
ngx_platform_redis_arm(ngx_platform_redis_node_t *node,
    ngx_platform_redis_cmd_t *cmd)
{
    ngx_msec_t      deadline;
    ngx_msec_int_t  left;

    deadline = cmd->first + node->pmcf->redis_timeout;

    if (node->cmd_timer.timer_set) {
        if ((ngx_msec_int_t) (node->cmd_timer.timer.key - deadline) <= 0) {
            return;
        }

        /* a redirected command, due before the others */
        ngx_del_timer(&node->cmd_timer);
    }

    left = (ngx_msec_int_t) (deadline - ngx_current_msec);

    ngx_add_timer(&node->cmd_timer, left > 0 ? (ngx_msec_t) left : 1);
}


/*
 * -MOVED or -ASK: cmd sent again to the node named, a few times at most.
 * Returns 1 when it was: its reply will come from there.
 */

static ngx_uint_t
ngx_platform_redis_redirect(redisAsyncContext *ac,
    ngx_platform_redis_cmd_t *cmd, redisReply *reply)
{
    ngx_uint_t                  ask;
    ngx_platform_redis_node_t  *node, *from;

    if (reply == NULL
        || reply->type != REDIS_REPLY_ERROR
        || !cmd->attached
        || ngx_platform_redis->deployment != NGX_PLATFORM_REDIS_CLUSTER)
    {
        return 0;
    }

    if (reply->len >= 11 && ngx_strncmp(reply->str, "CLUSTERDOWN", 11) == 0) {
        /* the caller gets the error (503); the map is read again */
        ngx_platform_redis_cluster_refresh();
        return 0;
    }

    if (reply->len >= 8 && ngx_strncmp(reply->str, "TRYAGAIN", 8) == 0) {
        /*
         * The keys of a script, some moved to the importing node, some
         * not yet: it can run once the slot's migration is over
         */
        ngx_platform_redis_cluster_refresh();
        return ngx_platform_redis_park(cmd);
    }

    if (cmd->redirects == NGX_PLATFORM_REDIS_REDIRECTS) {
        return 0;
    }

    ask = 0;

    node = ngx_platform_redis_cluster_redirect(reply, &ask);
    if (node == NULL) {
        return 0;
    }

    /* off the queue of the node that redirected it, onto the other's */

    from = cmd->node;

    ngx_platform_redis_unqueue(cmd);
    ngx_platform_redis_mark_resent(cmd);

    cmd->redirects++;

    /* a script sent to another server may not be cached there */
    cmd->retried = 0;

    if (ngx_platform_redis_send(node, cmd, ask) != NGX_OK) {
        /* back where it was: the caller gets the redirection (503) */
        ngx_queue_insert_tail(&from->cmds, &cmd->queue);

        ngx_platform_redis_arm(from, cmd);

        return 0;
    }

    return 1;
}


/* off its node's queue; the node's timer goes with its last command */

static void
ngx_platform_redis_unqueue(ngx_platform_redis_cmd_t *cmd)
{
    ngx_platform_redis_node_t  *node;

    node = cmd->node;

    ngx_queue_remove(&cmd->queue);

    if (ngx_queue_empty(&node->cmds) && node->cmd_timer.timer_set) {
        ngx_del_timer(&node->cmd_timer);
    }
}


/* sent again: its deadline is older than those queued before it */

static void
ngx_platform_redis_mark_resent(ngx_platform_redis_cmd_t *cmd)
{
    if (!cmd->resent) {
        cmd->resent = 1;
        ngx_platform_redis_nresent++;
    }
}


/*
 * -TRYAGAIN: cmd is sent again shortly, if its deadline leaves the time.
 * Returns 1 when it will be.
 */

static ngx_uint_t
ngx_platform_redis_park(ngx_platform_redis_cmd_t *cmd)
{
    ngx_msec_int_t         left;
    ngx_platform_redis_t  *rd;

    rd = ngx_platform_redis;

    left = (ngx_msec_int_t) (cmd->first + cmd->node->pmcf->redis_timeout
                             - ngx_current_msec);

    if (left <= NGX_PLATFORM_REDIS_TRYAGAIN) {
        return 0;
    }

    ngx_platform_redis_unqueue(cmd);
    ngx_platform_redis_mark_resent(cmd);

    /* hiredis is done with it: only the caller's cleanup and rd have it */

    cmd->parked = 1;
    cmd->due = ngx_current_msec + NGX_PLATFORM_REDIS_TRYAGAIN;

    /*
     * Routed afresh then, -ASK again while the migration lasts: the
     * bound is on redirections in a row, the deadline bounds the rest
     */
    cmd->redirects = 0;

    ngx_queue_insert_tail(&rd->parked, &cmd->queue);

    if (!rd->retry.timer_set) {
        ngx_add_timer(&rd->retry, NGX_PLATFORM_REDIS_TRYAGAIN);
    }

    return 1;
}


static void
ngx_platform_redis_retry_handler(ngx_event_t *ev)
{
    ngx_msec_int_t             left;
    ngx_connection_t          *c;
    ngx_platform_redis_t      *rd;
    ngx_platform_redis_cmd_t  *cmd;

    c = ev->data;
    rd = c->data;

    /* a caller answered here may send another command, or drop others */

    while (!ngx_queue_empty(&rd->parked)) {
        cmd = ngx_queue_data(ngx_queue_head(&rd->parked),
                             ngx_platform_redis_cmd_t, queue);

        left = (ngx_msec_int_t) (cmd->due - ngx_current_msec);

        if (left > 0) {
            ngx_add_timer(&rd->retry, (ngx_msec_t) left);
            return;
        }

        ngx_platform_redis_resend(cmd);
    }
}


/* a parked command to the slot's master now, or its caller answered */

static void
ngx_platform_redis_resend(ngx_platform_redis_cmd_t *cmd)
{
    void                           *caller;
    ngx_int_t                       rc;
    ngx_platform_redis_node_t      *node;
    ngx_platform_redis_handler_pt   handler;

    ngx_queue_remove(&cmd->queue);
    cmd->parked = 0;

    /* a script sent to another server may not be cached there */
    cmd->retried = 0;

    if ((ngx_msec_int_t) (cmd->first + ngx_platform_redis->pmcf->redis_timeout
                          - ngx_current_msec)
        <= 0)
    {
        rc = NGX_PLATFORM_TIMEOUT;

    } else {
        node = ngx_platform_redis_route(ngx_platform_redis, cmd);

        if (node != NULL && ngx_platform_redis_send(node, cmd, 0) == NGX_OK) {
            return;
        }

        rc = NGX_PLATFORM_UNAVAILABLE;
    }

    handler = cmd->handler;
    caller = cmd->data;

    if (cmd->cleanup) {
        cmd->cleanup->handler = NULL;
    }

    ngx_platform_redis_nresent--;
    ngx_free(cmd);

    ngx_platform_metric_inc(NGX_PLATFORM_M_REDIS_ERRORS);

    handler(caller, NULL, rc);
}


/* a parked command whose caller went away, or at exit */

static void
ngx_platform_redis_free_parked(ngx_platform_redis_cmd_t *cmd)
{
    ngx_queue_remove(&cmd->queue);

    if (cmd->cleanup) {
        cmd->cleanup->handler = NULL;
    }

    ngx_platform_redis_nresent--;
    ngx_free(cmd);
}


static void
ngx_platform_redis_reply(redisAsyncContext *ac, void *data, void *privdata)
{
    redisReply                *reply = data;
    ngx_platform_redis_cmd_t  *cmd = privdata;

    void                           *caller;
    ngx_int_t                       rc;
    ngx_uint_t                      attached;
    redisReply                      held;
    ngx_platform_redis_node_t      *node;
    ngx_platform_redis_handler_pt   handler;

    node = ac->data;

    /*
     * A NULL reply: the context is being torn down; hiredis has set
     * REDIS_DISCONNECTING or REDIS_FREEING, so new commands are refused.
     */
    if (reply != NULL) {
        node->last_reply = ngx_current_msec;

        if (reply->type == REDIS_REPLY_ERROR
            && ngx_platform_redis_readonly(reply)
            && node->ac == ac
            && !(ac->c.flags & REDIS_FREEING))
        {
            /*
             * A replica: after a failover the address may lead to the
             * new primary. The error still goes to the caller.
             */
            ngx_log_error(NGX_LOG_ERR, node->log, 0,
                          "redis: \"%V\" is a read-only replica "
                          "(a failover?), reconnecting", &node->addr);

            /* in a callback: freed once this returns */
            ngx_platform_redis_node_drop(node);
        }
    }

    if (!(ac->c.flags & REDIS_FREEING)
        && ngx_platform_redis_redirect(ac, cmd, reply))
    {
        return;
    }

    if (cmd->attached
        && reply != NULL
        && !(ac->c.flags & REDIS_FREEING)
        && cmd->script != NULL
        && !cmd->retried
        && !node->exiting
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

    if (cmd->waiting) {
        reply = ngx_platform_redis_waited(cmd, reply, &held);

    } else if (reply != NULL
               && cmd->attached
               && cmd->script != NULL
               && cmd->script->durable != 0
               && reply->type == REDIS_REPLY_INTEGER
               && reply->integer == cmd->script->durable
               && node->pmcf->redis_wait_replicas > 0
               && node->replicas > 0
               && !(ac->c.flags & REDIS_FREEING))
    {
        if (ngx_platform_redis_wait(ac, cmd, reply) == NGX_OK) {
            return;
        }

        reply = NULL;
    }

    if (reply != NULL) {
        ngx_platform_metrics_observe(NGX_PLATFORM_H_REDIS,
                                     ngx_current_msec - cmd->first);
    }

    handler = cmd->handler;
    caller = cmd->data;
    attached = cmd->attached;

    ngx_platform_redis_detach(cmd);
    ngx_free(cmd);

    if (!attached || node->exiting) {
        /* timed out, caller gone or exiting: the reply is dropped */
        return;
    }

    rc = (reply != NULL) ? NGX_OK : NGX_PLATFORM_UNAVAILABLE;

    if (reply == NULL || reply->type == REDIS_REPLY_ERROR) {
        ngx_platform_metric_inc(NGX_PLATFORM_M_REDIS_ERRORS);
    }

    handler(caller, reply, rc);
}


/*
 * WAIT numreplicas timeout, on the connection the script ran on: its
 * reply comes once the replicas have every write sent before it. The
 * timeout leaves the command's deadline room to answer.
 */

static ngx_int_t
ngx_platform_redis_wait(redisAsyncContext *ac, ngx_platform_redis_cmd_t *cmd,
    redisReply *reply)
{
    u_char      buf[64], n[NGX_INT_T_LEN], ms[NGX_INT_T_LEN], *p;
    size_t      argvlen[3];
    const char *argv[3];

    ngx_platform_main_conf_t  *pmcf;

    pmcf = cmd->node->pmcf;

    argv[0] = "WAIT";
    argvlen[0] = 4;
    /* a master without replicas has none to lose its writes to */

    cmd->wait = ngx_min((ngx_uint_t) pmcf->redis_wait_replicas,
                        cmd->node->replicas);

    argv[1] = (const char *) n;
    argvlen[1] = ngx_sprintf(n, "%ui", cmd->wait) - n;
    argv[2] = (const char *) ms;
    argvlen[2] = ngx_sprintf(ms, "%M", ngx_max(pmcf->redis_timeout / 2, 1))
                 - ms;

    p = ngx_platform_redis_format(buf, 3, argv, argvlen);

    if (redisAsyncFormattedCommand(ac, ngx_platform_redis_reply, cmd,
                                   (const char *) buf, p - buf)
        != REDIS_OK)
    {
        return NGX_ERROR;
    }

    cmd->held = reply->integer;
    cmd->waiting = 1;

    return NGX_OK;
}


/* the script's reply, if enough replicas have its writes; else NULL */

static redisReply *
ngx_platform_redis_waited(ngx_platform_redis_cmd_t *cmd, redisReply *reply,
    redisReply *held)
{
    if (reply == NULL || reply->type != REDIS_REPLY_INTEGER
        || reply->integer < (long long) cmd->wait)
    {
        if (cmd->attached) {
            ngx_platform_log_limited(NGX_PLATFORM_LOG_REDIS_FAILED,
                                     NGX_LOG_ERR, cmd->log, 0,
                                     "redis: a write reached %L of the %ui "
                                     "replicas it waits for",
                                     (reply && reply->type
                                      == REDIS_REPLY_INTEGER)
                                     ? reply->integer : 0,
                                     cmd->wait);
        }

        return NULL;
    }

    ngx_memzero(held, sizeof(redisReply));
    held->type = REDIS_REPLY_INTEGER;
    held->integer = cmd->held;

    return held;
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

    /* after -ASK, the EVAL too is for the importing node: ASKING again */

    if (cmd->asking
        && redisAsyncFormattedCommand(ac, NULL, NULL,
                                      "*1\r\n$6\r\nASKING\r\n", 16)
           != REDIS_OK)
    {
        ngx_free(buf);
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
    ngx_msec_int_t              left;
    ngx_connection_t           *c;
    ngx_platform_redis_cmd_t   *cmd;
    ngx_platform_redis_node_t  *node;

    c = ev->data;
    node = c->data;

    /* a caller answered here may send another command, or drop others */

    for ( ;; ) {
        cmd = ngx_platform_redis_late(node, &left);

        if (cmd == NULL) {
            break;
        }

        ngx_platform_redis_expire(node, cmd);
    }

    if (left > 0) {
        ngx_add_timer(&node->cmd_timer, (ngx_msec_t) left);
    }
}


/*
 * The first command of node past its deadline, or NULL and in *left the
 * time to the nearest deadline (0: none). The deadlines are in the order
 * of the queue, but those of redirected commands: while there are any,
 * the whole queue is looked at.
 */

static ngx_platform_redis_cmd_t *
ngx_platform_redis_late(ngx_platform_redis_node_t *node,
    ngx_msec_int_t *left)
{
    ngx_queue_t               *q;
    ngx_msec_int_t             n;
    ngx_platform_redis_cmd_t  *cmd;

    *left = 0;

    for (q = ngx_queue_head(&node->cmds);
         q != ngx_queue_sentinel(&node->cmds);
         q = ngx_queue_next(q))
    {
        cmd = ngx_queue_data(q, ngx_platform_redis_cmd_t, queue);

        n = (ngx_msec_int_t)
                (cmd->first + node->pmcf->redis_timeout - ngx_current_msec);

        if (n <= 0) {
            return cmd;
        }

        if (*left == 0 || n < *left) {
            *left = n;
        }

        if (ngx_platform_redis_nresent == 0) {
            break;
        }
    }

    return NULL;
}


static void
ngx_platform_redis_expire(ngx_platform_redis_node_t *node,
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
    stuck = node->ac == ac
            && (ngx_msec_int_t) (node->last_reply - cmd->sent) < 0;

    /* cmd stays with hiredis until its reply or the teardown */
    ngx_platform_redis_detach(cmd);

    if (stuck) {
        ngx_log_error(NGX_LOG_ERR, node->log, 0,
                      "redis: no reply from \"%V\", reconnecting",
                      &node->addr);

        /* logged above; not inside a hiredis callback: frees now */
        ngx_platform_redis_node_drop(node);
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

    if (cmd->parked) {
        /* hiredis does not have it */
        ngx_platform_redis_free_parked(cmd);
        return;
    }

    ngx_platform_redis_detach(cmd);
}


static void
ngx_platform_redis_detach(ngx_platform_redis_cmd_t *cmd)
{
    if (!cmd->attached) {
        return;
    }

    ngx_platform_redis_unqueue(cmd);

    if (cmd->resent) {
        ngx_platform_redis_nresent--;
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
