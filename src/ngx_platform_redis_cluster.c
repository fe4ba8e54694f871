
/*
 * ngx_platform: a Redis Cluster, followed per worker, as the cluster
 * specification tells clients to: the slot map read with CLUSTER SLOTS
 * from any node that answers, one node (one connection) per master,
 * -MOVED updating a slot and reading the map again, -ASK sending one
 * command elsewhere. While a master is lost the map is read again every
 * NGX_PLATFORM_REDIS_CLUSTER_RETRY ms, so that the replica promoted in
 * its place is served as soon as the cluster names it; meanwhile its
 * slots answer "unavailable" at once.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_event.h>
#include <ngx_http.h>

#include "ngx_platform_redis_cluster.h"


/* masters (and seeds) a worker keeps a node for */
#define NGX_PLATFORM_REDIS_CLUSTER_NODES  64

/* how soon the map is read again while a slot has no usable master */
#define NGX_PLATFORM_REDIS_CLUSTER_RETRY  250

/* a node's reconnections: quick, a failover is a matter of seconds */
#define NGX_PLATFORM_REDIS_CLUSTER_BACKOFF_MAX  1000


typedef struct {
    ngx_platform_main_conf_t       *pmcf;
    ngx_cycle_t                    *cycle;
    ngx_log_t                      *log;
    ngx_event_handler_pt            cmd_timeout;

    ngx_platform_redis_node_t      *nodes[NGX_PLATFORM_REDIS_CLUSTER_NODES];
    ngx_uint_t                      nnodes;
    ngx_uint_t                      nseeds;    /* the first nodes */
    ngx_uint_t                      next;      /* the next node to ask */

    /* the master of each slot, NULL until the map names one */
    ngx_platform_redis_node_t      *slots[NGX_PLATFORM_REDIS_SLOTS];

    /* the map being read: which request, and its deadline */
    ngx_uint_t                      generation;
    ngx_platform_redis_node_t      *asked;
    ngx_event_t                     refresh;
    ngx_event_t                     deadline;
    ngx_connection_t                dummy;

    unsigned                        reading:1;
    unsigned                        exiting:1;
} ngx_platform_redis_cluster_t;


static ngx_platform_redis_node_t *ngx_platform_redis_cluster_add(
    ngx_platform_redis_cluster_t *cl, u_char *host, size_t len,
    ngx_uint_t port);
static ngx_platform_redis_node_t *ngx_platform_redis_cluster_new_node(
    ngx_platform_redis_cluster_t *cl, ngx_str_t *addr);
static void ngx_platform_redis_cluster_ready(ngx_platform_redis_node_t *node);
static void ngx_platform_redis_cluster_lost(ngx_platform_redis_node_t *node);
static void ngx_platform_redis_cluster_refresh_handler(ngx_event_t *ev);
static void ngx_platform_redis_cluster_deadline_handler(ngx_event_t *ev);
static void ngx_platform_redis_cluster_read(ngx_platform_redis_cluster_t *cl);
static void ngx_platform_redis_cluster_slots_reply(redisAsyncContext *ac,
    void *data, void *privdata);
static ngx_int_t ngx_platform_redis_cluster_apply(
    ngx_platform_redis_cluster_t *cl, ngx_platform_redis_node_t *from,
    redisReply *reply);
static ngx_platform_redis_node_t *ngx_platform_redis_cluster_master(
    ngx_platform_redis_cluster_t *cl, ngx_platform_redis_node_t *from,
    redisReply *addr);
static void ngx_platform_redis_cluster_schedule(
    ngx_platform_redis_cluster_t *cl, ngx_msec_t delay);
static ngx_uint_t ngx_platform_redis_cluster_complete(
    ngx_platform_redis_cluster_t *cl);
static ngx_int_t ngx_platform_redis_cluster_parse_addr(u_char *p, size_t len,
    u_char **host, size_t *hlen, ngx_uint_t *port);


/* the worker's cluster; set in init */
static ngx_platform_redis_cluster_t  *ngx_platform_redis_cluster;

static uint16_t  ngx_platform_redis_crc16_table[256];


ngx_int_t
ngx_platform_redis_cluster_init(ngx_cycle_t *cycle,
    ngx_platform_main_conf_t *pmcf, ngx_event_handler_pt cmd_timeout)
{
    uint16_t                       crc;
    ngx_str_t                     *seed;
    ngx_uint_t                     i, b;
    ngx_platform_redis_cluster_t  *cl;

    /* CRC16-CCITT (XMODEM), polynomial 0x1021, as the specification */

    for (i = 0; i < 256; i++) {
        crc = (uint16_t) (i << 8);

        for (b = 0; b < 8; b++) {
            crc = (crc & 0x8000) ? (uint16_t) ((crc << 1) ^ 0x1021)
                                 : (uint16_t) (crc << 1);
        }

        ngx_platform_redis_crc16_table[i] = crc;
    }

    cl = ngx_pcalloc(cycle->pool, sizeof(ngx_platform_redis_cluster_t));
    if (cl == NULL) {
        return NGX_ERROR;
    }

    cl->pmcf = pmcf;
    cl->cycle = cycle;
    cl->log = cycle->log;
    cl->cmd_timeout = cmd_timeout;

    cl->dummy.fd = (ngx_socket_t) -1;
    cl->dummy.data = cl;
    cl->dummy.log = cycle->log;

    cl->refresh.handler = ngx_platform_redis_cluster_refresh_handler;
    cl->refresh.data = &cl->dummy;
    cl->refresh.log = cycle->log;
    cl->refresh.cancelable = 1;

    cl->deadline.handler = ngx_platform_redis_cluster_deadline_handler;
    cl->deadline.data = &cl->dummy;
    cl->deadline.log = cycle->log;
    cl->deadline.cancelable = 1;

    seed = pmcf->redis_seeds->elts;

    for (i = 0; i < pmcf->redis_seeds->nelts; i++) {
        if (ngx_platform_redis_cluster_new_node(cl, &seed[i]) == NULL) {
            return NGX_ERROR;
        }
    }

    cl->nseeds = cl->nnodes;

    ngx_platform_redis_cluster = cl;

    for (i = 0; i < cl->nseeds; i++) {
        ngx_platform_redis_node_connect(cl->nodes[i]);
    }

    return NGX_OK;
}


void
ngx_platform_redis_cluster_exit(void)
{
    ngx_uint_t                     i;
    ngx_platform_redis_cluster_t  *cl;

    cl = ngx_platform_redis_cluster;
    if (cl == NULL) {
        return;
    }

    cl->exiting = 1;

    if (cl->refresh.timer_set) {
        ngx_del_timer(&cl->refresh);
    }

    if (cl->deadline.timer_set) {
        ngx_del_timer(&cl->deadline);
    }

    for (i = 0; i < cl->nnodes; i++) {
        ngx_platform_redis_node_close(cl->nodes[i]);
    }

    ngx_platform_redis_cluster = NULL;
}


ngx_uint_t
ngx_platform_redis_cluster_slot(u_char *key, size_t len)
{
    u_char    *open, *close;
    uint16_t   crc;

    /* the first {...} with something inside: only that is hashed */

    open = ngx_strlchr(key, key + len, '{');

    if (open != NULL) {
        close = ngx_strlchr(open + 1, key + len, '}');

        if (close != NULL && close > open + 1) {
            key = open + 1;
            len = close - key;
        }
    }

    crc = 0;

    while (len--) {
        crc = (uint16_t) (crc << 8)
              ^ ngx_platform_redis_crc16_table[((crc >> 8) ^ *key++) & 0xff];
    }

    return crc & (NGX_PLATFORM_REDIS_SLOTS - 1);
}


ngx_platform_redis_node_t *
ngx_platform_redis_cluster_node(ngx_uint_t slot)
{
    ngx_uint_t                     i, n;
    ngx_platform_redis_node_t     *node;
    ngx_platform_redis_cluster_t  *cl;

    cl = ngx_platform_redis_cluster;

    if (slot == NGX_PLATFORM_REDIS_NO_SLOT) {
        /* any master that is connected, in turn */

        for (n = 0; n < cl->nnodes; n++) {
            i = cl->next++ % cl->nnodes;
            node = cl->nodes[i];

            if (ngx_platform_redis_node_usable(node)) {
                return node;
            }
        }

        return NULL;
    }

    node = cl->slots[slot];

    if (ngx_platform_redis_node_usable(node)) {
        return node;
    }

    ngx_platform_redis_cluster_schedule(cl, 0);

    return NULL;
}


ngx_platform_redis_node_t *
ngx_platform_redis_cluster_redirect(redisReply *reply, ngx_uint_t *ask)
{
    u_char                        *p, *last, *host;
    size_t                         hlen;
    ngx_int_t                      slot;
    ngx_uint_t                     port, moved;
    ngx_platform_redis_node_t     *node;
    ngx_platform_redis_cluster_t  *cl;

    cl = ngx_platform_redis_cluster;

    if (cl == NULL || reply->type != REDIS_REPLY_ERROR) {
        return NULL;
    }

    /* "MOVED 3999 127.0.0.1:6381", "ASK 3999 127.0.0.1:6381" */

    p = (u_char *) reply->str;
    last = p + reply->len;

    if (reply->len > 6 && ngx_strncmp(p, "MOVED ", 6) == 0) {
        moved = 1;
        p += 6;

    } else if (reply->len > 4 && ngx_strncmp(p, "ASK ", 4) == 0) {
        moved = 0;
        p += 4;

    } else {
        return NULL;
    }

    host = ngx_strlchr(p, last, ' ');
    if (host == NULL) {
        return NULL;
    }

    slot = ngx_atoi(p, host - p);

    if (slot == NGX_ERROR || slot >= NGX_PLATFORM_REDIS_SLOTS
        || ngx_platform_redis_cluster_parse_addr(host + 1, last - host - 1,
                                                 &host, &hlen, &port)
           != NGX_OK)
    {
        ngx_log_error(NGX_LOG_ERR, cl->log, 0,
                      "redis: cluster: a redirection not understood: %*s",
                      reply->len, reply->str);
        return NULL;
    }

    node = ngx_platform_redis_cluster_add(cl, host, hlen, port);
    if (node == NULL) {
        return NULL;
    }

    if (moved) {
        /* the slot is there now; others may have moved with it */
        cl->slots[slot] = node;
        ngx_platform_redis_cluster_schedule(cl, 0);

    } else {
        *ask = 1;
    }

    return node;
}


void
ngx_platform_redis_cluster_refresh(void)
{
    if (ngx_platform_redis_cluster) {
        ngx_platform_redis_cluster_schedule(ngx_platform_redis_cluster, 0);
    }
}


ngx_uint_t
ngx_platform_redis_cluster_connected(void)
{
    ngx_platform_redis_cluster_t  *cl;

    cl = ngx_platform_redis_cluster;

    return cl != NULL && ngx_platform_redis_cluster_complete(cl);
}


char *
ngx_platform_redis_cluster_check_conf(ngx_conf_t *cf,
    ngx_platform_main_conf_t *pmcf)
{
    u_char      *host;
    size_t       hlen;
    ngx_str_t   *seed;
    ngx_uint_t   i, port;

    seed = pmcf->redis_seeds->elts;

    for (i = 0; i < pmcf->redis_seeds->nelts; i++) {
        if (ngx_platform_redis_cluster_parse_addr(seed[i].data, seed[i].len,
                                                  &host, &hlen, &port)
            != NGX_OK)
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid \"platform_redis_cluster\" seed "
                               "\"%V\": an IP address and a port, "
                               "such as 10.0.0.1:6379, are expected",
                               &seed[i]);
            return NGX_CONF_ERROR;
        }
    }

    if (pmcf->redis_db > 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"platform_redis_db\" %i with "
                           "\"platform_redis_cluster\": a Redis Cluster "
                           "has only the database 0", pmcf->redis_db);
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


/* the node of host:port, a new one connected if there is none */

static ngx_platform_redis_node_t *
ngx_platform_redis_cluster_add(ngx_platform_redis_cluster_t *cl,
    u_char *host, size_t len, ngx_uint_t port)
{
    u_char                      buf[NGX_SOCKADDR_STRLEN + 8];
    ngx_str_t                   addr;
    ngx_uint_t                  i;
    ngx_platform_redis_node_t  *node;

    /* an IPv6 address in brackets, as ngx_parse_url() reads it */

    addr.data = buf;
    addr.len = ngx_snprintf(buf, sizeof(buf),
                            ngx_strlchr(host, host + len, ':') ? "[%*s]:%ui"
                                                               : "%*s:%ui",
                            len, host, port)
               - buf;

    for (i = 0; i < cl->nnodes; i++) {
        node = cl->nodes[i];

        if (node->addr.len == addr.len
            && ngx_strncmp(node->addr.data, addr.data, addr.len) == 0)
        {
            if (node->manual) {
                /* left earlier, wanted again */
                node->manual = 0;

                if (node->ac == NULL && !node->reconnect_timer.timer_set) {
                    ngx_platform_redis_node_connect(node);
                }
            }

            return node;
        }
    }

    if (cl->nnodes == NGX_PLATFORM_REDIS_CLUSTER_NODES) {
        ngx_platform_log_limited(NGX_PLATFORM_LOG_REDIS_FAILED, NGX_LOG_ERR,
                                 cl->log, 0,
                                 "redis: cluster: more than %d nodes, "
                                 "\"%V\" left out",
                                 NGX_PLATFORM_REDIS_CLUSTER_NODES, &addr);
        return NULL;
    }

    node = ngx_platform_redis_cluster_new_node(cl, &addr);
    if (node == NULL) {
        return NULL;
    }

    ngx_log_error(NGX_LOG_INFO, cl->log, 0,
                  "redis: cluster: a node at \"%V\"", &node->addr);

    ngx_platform_redis_node_connect(node);

    return node;
}


/* a node of the cluster at addr, not connected yet, in cl->nodes */

static ngx_platform_redis_node_t *
ngx_platform_redis_cluster_new_node(ngx_platform_redis_cluster_t *cl,
    ngx_str_t *addr)
{
    ngx_platform_redis_node_t  *node;

    node = ngx_platform_redis_node_create(cl->cycle, cl->cycle->pool,
                                          cl->pmcf, addr);
    if (node == NULL) {
        return NULL;
    }

    node->cmd_timer.handler = cl->cmd_timeout;
    node->backoff_max = NGX_PLATFORM_REDIS_CLUSTER_BACKOFF_MAX;
    node->count_replicas = 1;
    node->ready_handler = ngx_platform_redis_cluster_ready;
    node->lost_handler = ngx_platform_redis_cluster_lost;
    node->data = cl;

    cl->nodes[cl->nnodes++] = node;

    return node;
}


/* the first node ready, or a map still missing masters: read the map */

static void
ngx_platform_redis_cluster_ready(ngx_platform_redis_node_t *node)
{
    ngx_platform_redis_cluster_t  *cl;

    cl = node->data;

    if (!ngx_platform_redis_cluster_complete(cl)) {
        ngx_platform_redis_cluster_schedule(cl, 0);
    }
}


static void
ngx_platform_redis_cluster_lost(ngx_platform_redis_node_t *node)
{
    ngx_platform_redis_cluster_t  *cl;

    cl = node->data;

    if (cl->reading && cl->asked == node) {
        /* its reply will not come: ask another */
        cl->reading = 0;

        if (cl->deadline.timer_set) {
            ngx_del_timer(&cl->deadline);
        }
    }

    ngx_platform_redis_cluster_schedule(cl, 0);
}


static void
ngx_platform_redis_cluster_schedule(ngx_platform_redis_cluster_t *cl,
    ngx_msec_t delay)
{
    if (cl->exiting || cl->reading || cl->refresh.timer_set) {
        return;
    }

    /* from a timer, not here: this may run inside a hiredis callback */
    ngx_add_timer(&cl->refresh, delay);
}


static void
ngx_platform_redis_cluster_refresh_handler(ngx_event_t *ev)
{
    ngx_connection_t              *c;
    ngx_platform_redis_cluster_t  *cl;

    c = ev->data;
    cl = c->data;

    if (cl->exiting || ngx_exiting || ngx_terminate || ngx_quit) {
        return;
    }

    ngx_platform_redis_cluster_read(cl);
}


static void
ngx_platform_redis_cluster_deadline_handler(ngx_event_t *ev)
{
    ngx_connection_t              *c;
    ngx_platform_redis_cluster_t  *cl;

    c = ev->data;
    cl = c->data;

    ngx_log_error(NGX_LOG_ERR, cl->log, 0,
                  "redis: cluster: \"%V\" did not answer CLUSTER SLOTS",
                  &cl->asked->addr);

    /* a later reply is dropped: it is of an older generation */
    cl->reading = 0;
    cl->generation++;

    ngx_platform_redis_cluster_schedule(cl, NGX_PLATFORM_REDIS_CLUSTER_RETRY);
}


/* CLUSTER SLOTS to the next node that is connected */

static void
ngx_platform_redis_cluster_read(ngx_platform_redis_cluster_t *cl)
{
    ngx_uint_t                  i, n;
    ngx_platform_redis_node_t  *node;

    if (cl->reading) {
        return;
    }

    for (n = 0; n < cl->nnodes; n++) {
        i = cl->next++ % cl->nnodes;
        node = cl->nodes[i];

        if (!ngx_platform_redis_node_usable(node)) {
            continue;
        }

        cl->generation++;

        if (redisAsyncCommand(node->ac,
                              ngx_platform_redis_cluster_slots_reply,
                              (void *) cl->generation, "CLUSTER SLOTS")
            != REDIS_OK)
        {
            continue;
        }

        cl->reading = 1;
        cl->asked = node;

        ngx_add_timer(&cl->deadline, cl->pmcf->redis_timeout);

        return;
    }

    /* none connected yet: their connections will call ready() */

    ngx_platform_redis_cluster_schedule(cl, NGX_PLATFORM_REDIS_CLUSTER_RETRY);
}


static void
ngx_platform_redis_cluster_slots_reply(redisAsyncContext *ac, void *data,
    void *privdata)
{
    redisReply  *reply = data;

    ngx_platform_redis_node_t     *node;
    ngx_platform_redis_cluster_t  *cl;

    cl = ngx_platform_redis_cluster;
    node = ac->data;

    if (cl == NULL || cl->exiting
        || (ngx_uint_t) privdata != cl->generation)
    {
        return;
    }

    cl->reading = 0;

    if (cl->deadline.timer_set) {
        ngx_del_timer(&cl->deadline);
    }

    if (reply == NULL) {
        ngx_platform_redis_cluster_schedule(cl, 0);
        return;
    }

    if (reply->type != REDIS_REPLY_ARRAY
        || ngx_platform_redis_cluster_apply(cl, node, reply) != NGX_OK)
    {
        ngx_platform_log_limited(NGX_PLATFORM_LOG_REDIS_FAILED, NGX_LOG_ERR,
                                 cl->log, 0,
                                 "redis: cluster: CLUSTER SLOTS of \"%V\" "
                                 "not understood%s%*s", &node->addr,
                                 reply->type == REDIS_REPLY_ERROR ? ": " : "",
                                 reply->type == REDIS_REPLY_ERROR
                                 ? reply->len : 0, reply->str);
    }

    if (!ngx_platform_redis_cluster_complete(cl)) {
        ngx_platform_redis_cluster_schedule(cl,
                                            NGX_PLATFORM_REDIS_CLUSTER_RETRY);
    }
}


/*
 * Each element: start slot, end slot, then the master's [ip, port, id,
 * ...], then its replicas'. A master the new map no longer names keeps
 * no connection open, unless it is a seed.
 */

static ngx_int_t
ngx_platform_redis_cluster_apply(ngx_platform_redis_cluster_t *cl,
    ngx_platform_redis_node_t *from, redisReply *reply)
{
    size_t                      i;
    ngx_uint_t                  n, s, start, end;
    redisReply                 *range;
    ngx_platform_redis_node_t  *node, *named[NGX_PLATFORM_REDIS_CLUSTER_NODES];

    n = 0;

    for (i = 0; i < reply->elements; i++) {
        range = reply->element[i];

        if (range->type != REDIS_REPLY_ARRAY || range->elements < 3
            || range->element[0]->type != REDIS_REPLY_INTEGER
            || range->element[1]->type != REDIS_REPLY_INTEGER)
        {
            return NGX_ERROR;
        }

        start = (ngx_uint_t) range->element[0]->integer;
        end = (ngx_uint_t) range->element[1]->integer;

        if (start > end || end >= NGX_PLATFORM_REDIS_SLOTS) {
            return NGX_ERROR;
        }

        node = ngx_platform_redis_cluster_master(cl, from, range->element[2]);
        if (node == NULL) {
            continue;
        }

        for (s = start; s <= end; s++) {
            cl->slots[s] = node;
        }

        if (n < NGX_PLATFORM_REDIS_CLUSTER_NODES) {
            named[n++] = node;
        }
    }

    for (i = cl->nseeds; i < cl->nnodes; i++) {
        node = cl->nodes[i];

        for (s = 0; s < n; s++) {
            if (named[s] == node) {
                break;
            }
        }

        if (s == n && !node->manual) {
            ngx_log_error(NGX_LOG_INFO, cl->log, 0,
                          "redis: cluster: \"%V\" serves no slot now",
                          &node->addr);

            node->manual = 1;

            if (node->reconnect_timer.timer_set) {
                ngx_del_timer(&node->reconnect_timer);
            }

            ngx_platform_redis_node_drop(node);
        }
    }

    return NGX_OK;
}


static ngx_platform_redis_node_t *
ngx_platform_redis_cluster_master(ngx_platform_redis_cluster_t *cl,
    ngx_platform_redis_node_t *from, redisReply *addr)
{
    u_char      *host;
    size_t       hlen;
    ngx_uint_t   port;

    if (addr->type != REDIS_REPLY_ARRAY || addr->elements < 2
        || addr->element[0]->type != REDIS_REPLY_STRING
        || addr->element[1]->type != REDIS_REPLY_INTEGER
        || addr->element[1]->integer <= 0
        || addr->element[1]->integer > 65535)
    {
        return NULL;
    }

    host = (u_char *) addr->element[0]->str;
    hlen = addr->element[0]->len;
    port = (ngx_uint_t) addr->element[1]->integer;

    if (hlen == 0) {
        /* an empty address: the node that answered */
        host = (u_char *) from->host;
        hlen = ngx_strlen(from->host);
    }

    return ngx_platform_redis_cluster_add(cl, host, hlen, port);
}


static ngx_uint_t
ngx_platform_redis_cluster_complete(ngx_platform_redis_cluster_t *cl)
{
    ngx_uint_t                  s;
    ngx_platform_redis_node_t  *node, *last;

    last = NULL;

    for (s = 0; s < NGX_PLATFORM_REDIS_SLOTS; s++) {
        node = cl->slots[s];

        if (node != NULL && node == last) {
            continue;
        }

        if (!ngx_platform_redis_node_usable(node)) {
            return 0;
        }

        last = node;
    }

    return 1;
}


/* ip:port, ip an IPv4 or IPv6 address (the cluster speaks only those) */

static ngx_int_t
ngx_platform_redis_cluster_parse_addr(u_char *p, size_t len, u_char **host,
    size_t *hlen, ngx_uint_t *port)
{
    u_char     *colon, buf[16];
    ngx_int_t   n;

    /* "ip:port@cport" in some replies: the bus port is not ours */
    colon = ngx_strlchr(p, p + len, '@');
    if (colon != NULL) {
        len = colon - p;
    }

    colon = NULL;

    for (n = (ngx_int_t) len - 1; n >= 0; n--) {
        if (p[n] == ':') {
            colon = p + n;
            break;
        }
    }

    if (colon == NULL || colon == p) {
        return NGX_ERROR;
    }

    n = ngx_atoi(colon + 1, p + len - colon - 1);
    if (n <= 0 || n > 65535) {
        return NGX_ERROR;
    }

    *host = p;
    *hlen = colon - p;
    *port = (ngx_uint_t) n;

    if (*hlen > 2 && p[0] == '[' && p[*hlen - 1] == ']') {
        (*host)++;
        *hlen -= 2;
    }

    if (ngx_inet_addr(*host, *hlen) != INADDR_NONE) {
        return NGX_OK;
    }

#if (NGX_HAVE_INET6)
    if (ngx_inet6_addr(*host, *hlen, buf) == NGX_OK) {
        return NGX_OK;
    }
#else
    (void) buf;
#endif

    return NGX_ERROR;
}
