
/*
 * ngx_platform: Redis behind Sentinel, as the Sentinel client guidelines
 * describe: the sentinels are asked in turn for the master's address
 * (SENTINEL get-master-addr-by-name), a sentinel that does not answer is
 * skipped, and the node the module connects to must answer ROLE as a
 * master. The address is asked again when the master's connection is
 * lost or cannot be made, when it answers -READONLY (the node is then
 * dropped by the command layer) or is no master, and at once when a
 * sentinel announces +switch-master, which one connection per worker
 * subscribes to.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_event.h>
#include <ngx_http.h>

#include "ngx_platform_redis_sentinel.h"


#define NGX_PLATFORM_REDIS_SENTINELS       16

/* how soon another sentinel is asked after one that could not answer */
#define NGX_PLATFORM_REDIS_SENTINEL_RETRY  200

/*
 * How long a sentinel's answer naming the master just left is taken as
 * stale: sentinels learn a failover one after the other
 */
#define NGX_PLATFORM_REDIS_SENTINEL_STALE  10000

/* the master's reconnections: quick, a failover is a matter of seconds */
#define NGX_PLATFORM_REDIS_SENTINEL_BACKOFF_MAX  1000


typedef struct {
    ngx_platform_main_conf_t       *pmcf;
    ngx_log_t                      *log;
    ngx_platform_redis_node_t      *master;

    /* one connection per sentinel for the questions */
    ngx_platform_redis_node_t      *sentinels[NGX_PLATFORM_REDIS_SENTINELS];
    ngx_uint_t                      nsentinels;
    ngx_uint_t                      next;

    /* and one subscribed to +switch-master, on the sentinels in turn */
    ngx_platform_redis_node_t      *subscriber;
    ngx_uint_t                      subscribed_to;

    /*
     * The sentinel whose answer the master node has, and the sentinels
     * that answered they do not know the master (logged once each)
     */
    ngx_uint_t                      answered;
    u_char                          unknown[NGX_PLATFORM_REDIS_SENTINELS];

    /* the master left last, and when */
    u_char                          left[NGX_SOCKADDR_STRLEN + 8];
    size_t                          left_len;
    ngx_msec_t                      left_at;

    ngx_uint_t                      generation;
    ngx_event_t                     ask;
    ngx_event_t                     deadline;
    ngx_connection_t                dummy;

    unsigned                        asking:1;
    unsigned                        known:1;   /* a sentinel named it */
    unsigned                        moving:1;  /* the subscriber, on purpose */
    unsigned                        exiting:1;
} ngx_platform_redis_sentinel_t;


static ngx_platform_redis_node_t *ngx_platform_redis_sentinel_node(
    ngx_cycle_t *cycle, ngx_platform_redis_sentinel_t *st, ngx_str_t *addr);
static void ngx_platform_redis_sentinel_ready(ngx_platform_redis_node_t *node);
static void ngx_platform_redis_sentinel_master_ready(
    ngx_platform_redis_node_t *node);
static void ngx_platform_redis_sentinel_master_lost(
    ngx_platform_redis_node_t *node);
static void ngx_platform_redis_sentinel_schedule(
    ngx_platform_redis_sentinel_t *st, ngx_msec_t delay);
static void ngx_platform_redis_sentinel_ask_handler(ngx_event_t *ev);
static void ngx_platform_redis_sentinel_deadline_handler(ngx_event_t *ev);
static void ngx_platform_redis_sentinel_reply(redisAsyncContext *ac,
    void *data, void *privdata);
static void ngx_platform_redis_sentinel_point(
    ngx_platform_redis_sentinel_t *st, ngx_uint_t from, u_char *host,
    size_t hlen, u_char *port, size_t plen, const char *announced);
static void ngx_platform_redis_sentinel_listen(
    ngx_platform_redis_sentinel_t *st, ngx_uint_t i);
static void ngx_platform_redis_sentinel_subscribe(
    ngx_platform_redis_node_t *node);
static void ngx_platform_redis_sentinel_subscriber_lost(
    ngx_platform_redis_node_t *node);
static void ngx_platform_redis_sentinel_message(redisAsyncContext *ac,
    void *data, void *privdata);


/* the worker's sentinels; set in init */
static ngx_platform_redis_sentinel_t  *ngx_platform_redis_sentinel;


ngx_int_t
ngx_platform_redis_sentinel_init(ngx_cycle_t *cycle,
    ngx_platform_main_conf_t *pmcf, ngx_platform_redis_node_t *master)
{
    ngx_str_t                      *addr;
    ngx_uint_t                      i;
    ngx_platform_redis_node_t      *node;
    ngx_platform_redis_sentinel_t  *st;

    st = ngx_pcalloc(cycle->pool, sizeof(ngx_platform_redis_sentinel_t));
    if (st == NULL) {
        return NGX_ERROR;
    }

    st->pmcf = pmcf;
    st->log = cycle->log;
    st->master = master;

    st->dummy.fd = (ngx_socket_t) -1;
    st->dummy.data = st;
    st->dummy.log = cycle->log;

    st->ask.handler = ngx_platform_redis_sentinel_ask_handler;
    st->ask.data = &st->dummy;
    st->ask.log = cycle->log;
    st->ask.cancelable = 1;

    st->deadline.handler = ngx_platform_redis_sentinel_deadline_handler;
    st->deadline.data = &st->dummy;
    st->deadline.log = cycle->log;
    st->deadline.cancelable = 1;

    /* not connected until a sentinel names the master */
    master->manual = 1;
    master->check_master = 1;
    master->backoff_max = NGX_PLATFORM_REDIS_SENTINEL_BACKOFF_MAX;
    master->ready_handler = ngx_platform_redis_sentinel_master_ready;
    master->lost_handler = ngx_platform_redis_sentinel_master_lost;
    master->data = st;

    addr = pmcf->redis_seeds->elts;

    for (i = 0; i < pmcf->redis_seeds->nelts; i++) {
        node = ngx_platform_redis_sentinel_node(cycle, st, &addr[i]);
        if (node == NULL) {
            return NGX_ERROR;
        }

        node->ready_handler = ngx_platform_redis_sentinel_ready;
        st->sentinels[st->nsentinels++] = node;
    }

    st->subscriber = ngx_platform_redis_sentinel_node(cycle, st, &addr[0]);
    if (st->subscriber == NULL) {
        return NGX_ERROR;
    }

    st->subscriber->ready_handler = ngx_platform_redis_sentinel_subscribe;
    st->subscriber->lost_handler = ngx_platform_redis_sentinel_subscriber_lost;

    ngx_platform_redis_sentinel = st;

    for (i = 0; i < st->nsentinels; i++) {
        ngx_platform_redis_node_connect(st->sentinels[i]);
    }

    ngx_platform_redis_node_connect(st->subscriber);

    return NGX_OK;
}


void
ngx_platform_redis_sentinel_exit(void)
{
    ngx_uint_t                      i;
    ngx_platform_redis_sentinel_t  *st;

    st = ngx_platform_redis_sentinel;
    if (st == NULL) {
        return;
    }

    st->exiting = 1;

    if (st->ask.timer_set) {
        ngx_del_timer(&st->ask);
    }

    if (st->deadline.timer_set) {
        ngx_del_timer(&st->deadline);
    }

    for (i = 0; i < st->nsentinels; i++) {
        ngx_platform_redis_node_close(st->sentinels[i]);
    }

    ngx_platform_redis_node_close(st->subscriber);

    ngx_platform_redis_sentinel = NULL;
}


char *
ngx_platform_redis_sentinel_check_conf(ngx_conf_t *cf,
    ngx_platform_main_conf_t *pmcf)
{
    ngx_url_t    u;
    ngx_str_t   *addr;
    ngx_uint_t   i, literal;

    addr = pmcf->redis_seeds->elts;

    if (pmcf->redis_seeds->nelts > NGX_PLATFORM_REDIS_SENTINELS) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"platform_redis_sentinel\" names %ui sentinels:"
                           " at most %d", pmcf->redis_seeds->nelts,
                           NGX_PLATFORM_REDIS_SENTINELS);
        return NGX_CONF_ERROR;
    }

    for (i = 0; i < pmcf->redis_seeds->nelts; i++) {
        if (ngx_platform_redis_is_unix(&addr[i])
            || ngx_platform_redis_parse_url(cf->pool, &addr[i], &u, &literal)
               != NGX_OK
            || !literal || u.no_port)
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid \"platform_redis_sentinel\" sentinel "
                               "\"%V\": an IP address and a port, such as "
                               "10.0.0.1:26379, are expected", &addr[i]);
            return NGX_CONF_ERROR;
        }
    }

    return NGX_CONF_OK;
}


/* a connection to a sentinel: no database, its own password if any */

static ngx_platform_redis_node_t *
ngx_platform_redis_sentinel_node(ngx_cycle_t *cycle,
    ngx_platform_redis_sentinel_t *st, ngx_str_t *addr)
{
    ngx_platform_redis_node_t  *node;

    node = ngx_platform_redis_node_create(cycle, cycle->pool, st->pmcf, addr);
    if (node == NULL) {
        return NULL;
    }

    node->password = st->pmcf->redis_sentinel_password;
    node->db = 0;
    node->backoff_max = NGX_PLATFORM_REDIS_SENTINEL_BACKOFF_MAX;
    node->data = st;

    return node;
}


/* a sentinel connected: the master is asked for if it is not served */

static void
ngx_platform_redis_sentinel_ready(ngx_platform_redis_node_t *node)
{
    ngx_platform_redis_sentinel_t  *st;

    st = node->data;

    if (!ngx_platform_redis_node_usable(st->master)) {
        ngx_platform_redis_sentinel_schedule(st, 0);
    }
}


/*
 * The master connected where a sentinel said: the subscription moves to
 * that sentinel, so that one out of date, or watching another master of
 * the name, is not the one listened to
 */

static void
ngx_platform_redis_sentinel_master_ready(ngx_platform_redis_node_t *node)
{
    ngx_platform_redis_sentinel_t  *st;

    st = node->data;

    if (st->subscribed_to != st->answered) {
        ngx_platform_redis_sentinel_listen(st, st->answered);
    }
}


/* lost, refused, not a master, or -READONLY: where is the master now? */

static void
ngx_platform_redis_sentinel_master_lost(ngx_platform_redis_node_t *node)
{
    ngx_platform_redis_sentinel_schedule(node->data, 0);
}


static void
ngx_platform_redis_sentinel_schedule(ngx_platform_redis_sentinel_t *st,
    ngx_msec_t delay)
{
    if (st->exiting || st->asking || st->ask.timer_set) {
        return;
    }

    /* from a timer: this may run inside a hiredis callback */
    ngx_add_timer(&st->ask, delay);
}


static void
ngx_platform_redis_sentinel_ask_handler(ngx_event_t *ev)
{
    ngx_uint_t                      i, n;
    ngx_connection_t               *c;
    ngx_platform_redis_node_t      *node;
    ngx_platform_redis_sentinel_t  *st;

    c = ev->data;
    st = c->data;

    if (st->exiting || st->asking || ngx_exiting || ngx_terminate
        || ngx_quit)
    {
        return;
    }

    for (n = 0; n < st->nsentinels; n++) {
        i = st->next++ % st->nsentinels;
        node = st->sentinels[i];

        if (!ngx_platform_redis_node_usable(node)) {
            continue;
        }

        st->generation++;

        if (redisAsyncCommand(node->ac, ngx_platform_redis_sentinel_reply,
                              (void *) st->generation,
                              "SENTINEL get-master-addr-by-name %b",
                              st->pmcf->redis_master_name.data,
                              st->pmcf->redis_master_name.len)
            != REDIS_OK)
        {
            continue;
        }

        st->asking = 1;
        ngx_add_timer(&st->deadline, st->pmcf->redis_timeout);

        return;
    }

    /* none connected: each sentinel asks once it is (ready above) */

    ngx_platform_log_limited(NGX_PLATFORM_LOG_REDIS_FAILED, NGX_LOG_ERR,
                             st->log, 0,
                             "redis: no sentinel of \"%V\" answers",
                             &st->pmcf->redis_master_name);
}


static void
ngx_platform_redis_sentinel_deadline_handler(ngx_event_t *ev)
{
    ngx_connection_t               *c;
    ngx_platform_redis_sentinel_t  *st;

    c = ev->data;
    st = c->data;

    ngx_platform_log_limited(NGX_PLATFORM_LOG_REDIS_FAILED, NGX_LOG_ERR,
                             st->log, 0,
                             "redis: a sentinel did not answer in time");

    /* its late reply is of an older generation: dropped */
    st->asking = 0;
    st->generation++;

    ngx_platform_redis_sentinel_schedule(st,
                                         NGX_PLATFORM_REDIS_SENTINEL_RETRY);
}


static void
ngx_platform_redis_sentinel_reply(redisAsyncContext *ac, void *data,
    void *privdata)
{
    redisReply  *reply = data;

    ngx_uint_t                      i;
    redisReply                     *host, *port;
    ngx_platform_redis_node_t      *node;
    ngx_platform_redis_sentinel_t  *st;

    st = ngx_platform_redis_sentinel;
    node = ac->data;

    if (st == NULL || st->exiting || (ngx_uint_t) privdata != st->generation)
    {
        return;
    }

    st->asking = 0;

    if (st->deadline.timer_set) {
        ngx_del_timer(&st->deadline);
    }

    for (i = 0; i < st->nsentinels - 1; i++) {
        if (st->sentinels[i] == node) {
            break;
        }
    }

    if (reply != NULL && reply->type == REDIS_REPLY_NIL) {

        /* the master is unknown there: said once, the next one asked */

        if (!st->unknown[i]) {
            st->unknown[i] = 1;

            ngx_log_error(NGX_LOG_ERR, st->log, 0,
                          "redis: the sentinel \"%V\" does not know the "
                          "master \"%V\"", &node->addr,
                          &st->pmcf->redis_master_name);
        }

        ngx_platform_redis_sentinel_schedule(st,
                                          NGX_PLATFORM_REDIS_SENTINEL_RETRY);
        return;
    }

    if (reply == NULL || reply->type != REDIS_REPLY_ARRAY
        || reply->elements != 2
        || reply->element[0]->type != REDIS_REPLY_STRING
        || reply->element[1]->type != REDIS_REPLY_STRING)
    {
        /* lost, or an error */
        ngx_platform_log_limited(NGX_PLATFORM_LOG_REDIS_FAILED, NGX_LOG_ERR,
                                 st->log, 0,
                                 "redis: the sentinel \"%V\" does not name "
                                 "the master \"%V\"%s%*s", &node->addr,
                                 &st->pmcf->redis_master_name,
                                 reply && reply->type == REDIS_REPLY_ERROR
                                 ? ": " : "",
                                 reply && reply->type == REDIS_REPLY_ERROR
                                 ? reply->len : 0,
                                 reply ? reply->str : NULL);

        ngx_platform_redis_sentinel_schedule(st,
                                          NGX_PLATFORM_REDIS_SENTINEL_RETRY);
        return;
    }

    host = reply->element[0];
    port = reply->element[1];

    st->unknown[i] = 0;

    ngx_platform_redis_sentinel_point(st, i, (u_char *) host->str,
                                      host->len, (u_char *) port->str,
                                      port->len, NULL);
}


/*
 * The master at host:port: connected there unless it is already. An
 * answer (announced NULL) that names the master left after a failover is
 * not followed for a while: the sentinel asked may not know yet.
 */

static void
ngx_platform_redis_sentinel_point(ngx_platform_redis_sentinel_t *st,
    ngx_uint_t from, u_char *host, size_t hlen, u_char *port, size_t plen,
    const char *announced)
{
    u_char                      addr[NGX_SOCKADDR_STRLEN + 8];
    size_t                      len;
    ngx_int_t                   n;
    ngx_platform_redis_node_t  *master;

    master = st->master;

    n = ngx_atoi(port, plen);

    if (n <= 0 || n > 65535 || hlen == 0 || hlen > NGX_SOCKADDR_STRLEN) {
        ngx_log_error(NGX_LOG_ERR, st->log, 0,
                      "redis: a sentinel named \"%*s:%*s\": not an address",
                      ngx_min(hlen, 64), host, ngx_min(plen, 8), port);
        return;
    }

    if (st->known
        && master->port == n
        && ngx_strlen(master->host) == hlen
        && ngx_strncmp(master->host, host, hlen) == 0)
    {
        /* the same: its own reconnections go on (or it is connected) */
        return;
    }

    len = ngx_snprintf(addr, sizeof(addr), "%*s:%i", hlen, host, n) - addr;

    if (announced == NULL
        && len == st->left_len
        && ngx_strncmp(addr, st->left, len) == 0
        && ngx_current_msec - st->left_at < NGX_PLATFORM_REDIS_SENTINEL_STALE)
    {
        ngx_platform_log_limited(NGX_PLATFORM_LOG_REDIS_FAILED, NGX_LOG_WARN,
                                 st->log, 0,
                                 "redis: a sentinel still names \"%*s\", "
                                 "the master before the failover",
                                 len, addr);

        ngx_platform_redis_sentinel_schedule(st,
                                          NGX_PLATFORM_REDIS_SENTINEL_RETRY);
        return;
    }

    if (st->known && announced != NULL) {
        /* the master being left: not to be gone back to on hearsay */
        st->left_len = ngx_cpymem(st->left, master->addr.data,
                                  ngx_min(master->addr.len,
                                          sizeof(st->left)))
                       - st->left;
        st->left_at = ngx_current_msec;
    }

    if (ngx_platform_redis_node_set_addr(master, host, hlen, (ngx_uint_t) n)
        != NGX_OK)
    {
        return;
    }

    ngx_log_error(NGX_LOG_NOTICE, st->log, 0,
                  "redis: the master \"%V\" is at \"%V\", %s",
                  &st->pmcf->redis_master_name, &master->addr,
                  announced ? announced : "named by a sentinel");

    st->known = 1;
    st->answered = from;
    master->manual = 0;

    ngx_platform_metric_inc(NGX_PLATFORM_M_REDIS_MASTER_SWITCHES);

    ngx_platform_redis_node_reconnect(master);
}


/* +switch-master: "<name> <old ip> <old port> <new ip> <new port>" */

static void
ngx_platform_redis_sentinel_subscribe(ngx_platform_redis_node_t *node)
{
    if (redisAsyncCommand(node->ac, ngx_platform_redis_sentinel_message,
                          node->data, "SUBSCRIBE +switch-master")
        != REDIS_OK)
    {
        ngx_platform_redis_node_drop(node);
    }
}


/* the subscription goes to the next sentinel */

static void
ngx_platform_redis_sentinel_subscriber_lost(ngx_platform_redis_node_t *node)
{
    ngx_platform_redis_node_t      *next;
    ngx_platform_redis_sentinel_t  *st;

    st = node->data;

    if (st->nsentinels < 2 || st->moving) {
        return;
    }

    st->subscribed_to = (st->subscribed_to + 1) % st->nsentinels;
    next = st->sentinels[st->subscribed_to];

    /* an address nginx -t checked, parsed once at start */

    (void) ngx_platform_redis_node_set_addr(node, (u_char *) next->host,
                                            ngx_strlen(next->host),
                                            (ngx_uint_t) next->port);
}


/* the subscription moved to sentinel i, now */

static void
ngx_platform_redis_sentinel_listen(ngx_platform_redis_sentinel_t *st,
    ngx_uint_t i)
{
    ngx_platform_redis_node_t  *sentinel;

    sentinel = st->sentinels[i];

    if (ngx_platform_redis_node_set_addr(st->subscriber,
                                         (u_char *) sentinel->host,
                                         ngx_strlen(sentinel->host),
                                         (ngx_uint_t) sentinel->port)
        != NGX_OK)
    {
        return;
    }

    st->subscribed_to = i;

    /* its loss is not news: the next sentinel is not taken */

    st->moving = 1;
    ngx_platform_redis_node_reconnect(st->subscriber);
    st->moving = 0;
}


static void
ngx_platform_redis_sentinel_message(redisAsyncContext *ac, void *data,
    void *privdata)
{
    redisReply  *reply = data;

    u_char                         *p, *last, *f[5];
    size_t                          len[5];
    ngx_str_t                      *name;
    ngx_uint_t                      i;
    redisReply                     *msg;
    ngx_platform_redis_sentinel_t  *st;

    st = privdata;

    if (reply == NULL || st->exiting || reply->type != REDIS_REPLY_ARRAY
        || reply->elements != 3)
    {
        return;
    }

    msg = reply->element[2];

    if (msg->type != REDIS_REPLY_STRING) {
        /* the subscription's confirmation */
        return;
    }

    p = (u_char *) msg->str;
    last = p + msg->len;

    for (i = 0; i < 5; i++) {
        f[i] = p;

        while (p < last && *p != ' ') {
            p++;
        }

        len[i] = p - f[i];

        if (p < last) {
            p++;
        }
    }

    name = &st->pmcf->redis_master_name;

    if (len[0] != name->len || ngx_strncmp(f[0], name->data, name->len) != 0)
    {
        return;
    }

    ngx_platform_redis_sentinel_point(st, st->subscribed_to, f[3], len[3],
                                      f[4], len[4],
                                      "after a failover (+switch-master)");
}
