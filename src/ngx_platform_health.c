
/*
 * ngx_platform: platform_health answers whether PostgreSQL and Redis
 * answer right now: a real SELECT 1 through the pool and a PING, both
 * at once.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_platform.h"
#include "ngx_platform_op.h"


typedef struct {
    ngx_uint_t                   pending;
    ngx_uint_t                   pg_up;
    ngx_uint_t                   redis_up;
} ngx_platform_health_t;


static ngx_int_t ngx_platform_health(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);
static void ngx_platform_health_pg_done(void *data, ngx_platform_pg_op_t *op,
    PGresult *res, ngx_int_t rc);
static void ngx_platform_health_redis_done(void *data, redisReply *reply,
    ngx_int_t rc);
static void ngx_platform_health_step(ngx_http_request_t *r);
static ngx_int_t ngx_platform_health_send(ngx_http_request_t *r,
    ngx_platform_health_t *h);
static ngx_platform_endpoint_t  ngx_platform_health_endpoints[] = {
    { NGX_HTTP_GET, "*", NGX_PLATFORM_AUTH_NONE, 0, NULL, NULL, NULL, NULL,
      NULL, ngx_platform_health,
      NULL },
    { 0, NULL, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL }
};


ngx_platform_family_t  ngx_platform_health_family = {
    ngx_string("health"),
    NGX_PLATFORM_ENVELOPE_B,
    NGX_PLATFORM_BACKEND_PG|NGX_PLATFORM_BACKEND_REDIS,
    ngx_platform_health_endpoints,
    NULL,
    0,
    NULL,
    NULL
};


static ngx_platform_pg_stmt_t  ngx_platform_health_stmt = {
    "platform_health", "SELECT 1", 0, 0, 1
};


static ngx_int_t
ngx_platform_health(ngx_http_request_t *r, ngx_platform_ctx_t *ctx)
{
    ngx_int_t               rc;
    ngx_platform_health_t  *h;

    static const char      *ping[] = { "PING" };
    static const size_t     ping_len[] = { 4 };

    h = ngx_pcalloc(r->pool, sizeof(ngx_platform_health_t));
    if (h == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ctx->data = h;

    /* each backend operation holds its own count of the request */

    rc = ngx_platform_query(r, &ngx_platform_health_stmt, NULL,
                            ngx_platform_health_pg_done);
    if (rc == NGX_DONE) {
        h->pending++;
    }

    rc = ngx_platform_command(r, ngx_platform_health_redis_done, 1, ping,
                              ping_len);
    if (rc == NGX_DONE) {
        h->pending++;
    }

    if (h->pending == 0) {
        return ngx_platform_health_send(r, h);
    }

    /* the last operation to answer sends the response */

    return NGX_DONE;
}


static void
ngx_platform_health_pg_done(void *data, ngx_platform_pg_op_t *op,
    PGresult *res, ngx_int_t rc)
{
    ngx_http_request_t *r = data;

    ngx_platform_ctx_t     *ctx;
    ngx_platform_health_t  *h;

    ctx = ngx_platform_get_ctx(r);
    h = ctx->data;

    h->pg_up = (rc == NGX_OK);

    ngx_platform_health_step(r);
}


static void
ngx_platform_health_redis_done(void *data, redisReply *reply, ngx_int_t rc)
{
    ngx_http_request_t *r = data;

    ngx_platform_ctx_t     *ctx;
    ngx_platform_health_t  *h;

    ctx = ngx_platform_get_ctx(r);
    h = ctx->data;

    h->redis_up = (rc == NGX_OK && reply
                   && reply->type != REDIS_REPLY_ERROR);

    ngx_platform_health_step(r);
}


static void
ngx_platform_health_step(ngx_http_request_t *r)
{
    ngx_platform_ctx_t     *ctx;
    ngx_platform_health_t  *h;

    ctx = ngx_platform_get_ctx(r);
    h = ctx->data;

    if (--h->pending > 0) {
        /* drop this operation's count of the request */
        ngx_http_finalize_request(r, NGX_DONE);
        return;
    }

    ngx_platform_finalize(r, ngx_platform_health_send(r, h));
}


static ngx_int_t
ngx_platform_health_send(ngx_http_request_t *r, ngx_platform_health_t *h)
{
    u_char                   *body, *p;
    ngx_uint_t                up;
    ngx_platform_pg_stats_t   read;

    up = h->pg_up && h->redis_up;

    body = ngx_pnalloc(r->pool, sizeof("{\"status\":\"down\","
                                       "\"postgres\":{\"status\":\"down\"},"
                                       "\"postgresRead\":{\"status\":"
                                       "\"down\"},"
                                       "\"redis\":{\"status\":\"down\"}}"));
    if (body == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    p = ngx_sprintf(body, "{\"status\":\"%s\",\"postgres\":{\"status\":"
                    "\"%s\"},", up ? "up" : "down", h->pg_up ? "up" : "down");

    /*
     * The read pool as this worker last found it; its being down does
     * not make the module down: reads then run on the primary.
     */

    ngx_platform_pg_stats(1, &read);

    if (read.configured) {
        p = ngx_sprintf(p, "\"postgresRead\":{\"status\":\"%s\"},",
                        read.connected ? "up" : "down");
    }

    p = ngx_sprintf(p, "\"redis\":{\"status\":\"%s\"}}",
                    h->redis_up ? "up" : "down");

    return ngx_platform_send_raw(r, up ? NGX_HTTP_OK
                                       : NGX_HTTP_SERVICE_UNAVAILABLE,
                                 body, p - body);
}
