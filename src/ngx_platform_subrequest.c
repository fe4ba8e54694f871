
/*
 * ngx_platform: a GET subrequest to an internal location, its response
 * kept in memory, for the outside parties an operator reaches through
 * nginx's own proxy_* settings (timeouts, TLS, keepalive, credentials).
 *
 * The subrequest carries none of the client's headers nor its body: a
 * bearer token sent to the module never travels on to a third party.
 * It carries the request's trace context instead (W3C Trace Context): a
 * traceparent of the request's trace whose parent is the request's own
 * span, and the caller's tracestate untouched.
 * The response body is bounded by subrequest_output_buffer_size of the
 * internal location. The post-subrequest handler keeps what the location
 * answered and wakes the main request, whose write handler calls the
 * caller back; a failed subrequest never ends the main request, whose
 * client still gets an answer, unless that client is gone.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_platform.h"


typedef struct {
    ngx_http_request_t                *request;
    ngx_platform_subrequest_pt         handler;
    void                              *data;
    ngx_platform_subrequest_result_t   result;
    ngx_event_t                        event;
    unsigned                           done:1;
} ngx_platform_subrequest_ctx_t;


static ngx_int_t ngx_platform_subrequest_trace(ngx_http_request_t *r,
    ngx_http_request_t *sr);
static ngx_int_t ngx_platform_subrequest_header(ngx_http_request_t *sr,
    char *name, ngx_str_t *value);
static ngx_int_t ngx_platform_subrequest_done(ngx_http_request_t *sr,
    void *data, ngx_int_t rc);
static ngx_uint_t ngx_platform_subrequest_too_big(ngx_http_request_t *sr);
static void ngx_platform_subrequest_wake(ngx_event_t *ev);
static void ngx_platform_subrequest_cleanup(void *data);


ngx_int_t
ngx_platform_subrequest(ngx_http_request_t *r, ngx_str_t *uri,
    ngx_str_t *args, ngx_platform_subrequest_pt handler, void *data)
{
    ngx_pool_cleanup_t             *cln;
    ngx_http_request_t             *sr;
    ngx_http_post_subrequest_t     *ps;
    ngx_platform_subrequest_ctx_t  *sc;

    sc = ngx_pcalloc(r->pool, sizeof(ngx_platform_subrequest_ctx_t));
    if (sc == NULL) {
        return NGX_ERROR;
    }

    ps = ngx_palloc(r->pool, sizeof(ngx_http_post_subrequest_t));
    if (ps == NULL) {
        return NGX_ERROR;
    }

    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL) {
        return NGX_ERROR;
    }

    sc->request = r;
    sc->handler = handler;
    sc->data = data;

    sc->event.handler = ngx_platform_subrequest_wake;
    sc->event.data = sc;
    sc->event.log = r->connection->log;

    cln->handler = ngx_platform_subrequest_cleanup;
    cln->data = sc;

    ps->handler = ngx_platform_subrequest_done;
    ps->data = sc;

    if (ngx_http_subrequest(r, uri, args, &sr, ps,
                            NGX_HTTP_SUBREQUEST_IN_MEMORY
                            |NGX_HTTP_SUBREQUEST_WAITED)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    /* none of the client's headers, no body: a plain GET */

    ngx_memzero(&sr->headers_in, sizeof(ngx_http_headers_in_t));

    if (ngx_list_init(&sr->headers_in.headers, r->pool, 2,
                      sizeof(ngx_table_elt_t))
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    sr->headers_in.server = r->headers_in.server;
    sr->headers_in.content_length_n = -1;
    sr->headers_in.keep_alive_n = -1;
    sr->request_body = NULL;

    if (ngx_platform_subrequest_trace(r, sr) != NGX_OK) {
        return NGX_ERROR;
    }

    /* the caller's hold on the request, released by its handler */
    r->main->count++;

    return NGX_DONE;
}


static ngx_int_t
ngx_platform_subrequest_trace(ngx_http_request_t *r, ngx_http_request_t *sr)
{
    ngx_str_t            traceparent;
    ngx_platform_ctx_t  *ctx;

    ctx = ngx_http_get_module_ctx(r->main, ngx_platform_module);

    if (ctx == NULL) {
        return NGX_OK;
    }

    if (ngx_platform_traceparent(r, ctx, &traceparent) != NGX_OK
        || ngx_platform_subrequest_header(sr, "traceparent", &traceparent)
           != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (ctx->tracestate.len == 0) {
        return NGX_OK;
    }

    return ngx_platform_subrequest_header(sr, "tracestate", &ctx->tracestate);
}


/* a request header of the subrequest, as the proxy module passes it on */

static ngx_int_t
ngx_platform_subrequest_header(ngx_http_request_t *sr, char *name,
    ngx_str_t *value)
{
    ngx_table_elt_t  *h;

    h = ngx_list_push(&sr->headers_in.headers);
    if (h == NULL) {
        return NGX_ERROR;
    }

    h->key.data = (u_char *) name;
    h->key.len = ngx_strlen(name);
    h->hash = ngx_hash_key(h->key.data, h->key.len);
    h->lowcase_key = (u_char *) name;
    h->value = *value;
#if (nginx_version >= 1023000)
    h->next = NULL;
#endif

    return NGX_OK;
}


/*
 * Called when the subrequest finalizes, possibly more than once (a
 * status nginx makes itself is finalized again with its page): the
 * first call tells. The status is the response's or, when no response
 * came, nginx's own (502, 504, ...).
 */

static ngx_int_t
ngx_platform_subrequest_done(ngx_http_request_t *sr, void *data,
    ngx_int_t rc)
{
    ngx_platform_subrequest_ctx_t *sc = data;

    ngx_uint_t  big;

    ngx_log_debug4(NGX_LOG_DEBUG_HTTP, sr->connection->log, 0,
                   "platform subrequest done: %i, status %ui, error %d, "
                   "seen %d", rc, sr->headers_out.status,
                   sr->connection->error, sc->done);

    big = 0;

    if ((rc == NGX_ERROR || rc == NGX_OK) && sr->connection->error
        && ngx_platform_subrequest_too_big(sr))
    {
        big = 1;

        /*
         * nginx marks the client's connection failed on any filter error,
         * also when the in-memory buffer of a subrequest overflows, though
         * nothing was sent to the client: it is alive, and gets an answer
         */
        sr->connection->error = 0;
    }

    if (rc == NGX_HTTP_CLIENT_CLOSED_REQUEST
        || rc == NGX_HTTP_REQUEST_TIME_OUT
        || sr->connection->error)
    {
        /* the client is gone: the main request ends, nobody is called */
        return rc;
    }

    if (!sc->done) {
        sc->done = 1;

        sc->result.status = sr->headers_out.status;

        if (sc->result.status == 0 || rc >= NGX_HTTP_SPECIAL_RESPONSE) {
            /* no response came: the status nginx made */
            sc->result.own = 1;
            sc->result.status = (rc >= NGX_HTTP_SPECIAL_RESPONSE)
                                ? (ngx_uint_t) rc : NGX_HTTP_BAD_GATEWAY;
        }

        if (rc == NGX_ERROR || big) {
            /* a response cut short, or larger than the buffer */
            sc->result.incomplete = 1;
        }

        if (sr->out && sr->out->buf) {
            sc->result.body.data = sr->out->buf->pos;
            sc->result.body.len = sr->out->buf->last - sr->out->buf->pos;
        }

        /*
         * the caller is called back once the subrequest is over and the
         * main request active again: after this event loop iteration
         */
        ngx_post_event(&sc->event, &ngx_posted_events);

        sr->parent->write_event_handler = ngx_http_request_empty_handler;
    }

    if (rc == NGX_ERROR || big || rc >= NGX_HTTP_SPECIAL_RESPONSE
        || rc == NGX_HTTP_CREATED || rc == NGX_HTTP_NO_CONTENT)
    {
        /*
         * nginx would send its error page, or end the whole request on
         * NGX_ERROR: the subrequest just ends, the main request goes on
         */
        return NGX_OK;
    }

    return rc;
}


/*
 * The response did not fit subrequest_output_buffer_size: its declared
 * length is larger, or a buffer was made and something did not fit (the
 * in-memory filter fails for nothing else once it has a buffer)
 */

static ngx_uint_t
ngx_platform_subrequest_too_big(ngx_http_request_t *sr)
{
    ngx_http_core_loc_conf_t  *clcf;

    if (!sr->subrequest_in_memory || sr->headers_out.status == 0) {
        return 0;
    }

    clcf = ngx_http_get_module_loc_conf(sr, ngx_http_core_module);

    return (sr->headers_out.content_length_n
            > (off_t) clcf->subrequest_output_buffer_size)
           || (sr->out && sr->out->buf);
}


static void
ngx_platform_subrequest_wake(ngx_event_t *ev)
{
    ngx_platform_subrequest_ctx_t *sc = ev->data;

    ngx_connection_t    *c;
    ngx_http_request_t  *r;

    r = sc->request;
    c = r->connection;

    sc->handler(r, sc->data, &sc->result);

    ngx_http_run_posted_requests(c);
}


static void
ngx_platform_subrequest_cleanup(void *data)
{
    ngx_platform_subrequest_ctx_t *sc = data;

    if (sc->event.posted) {
        ngx_delete_posted_event(&sc->event);
    }
}
