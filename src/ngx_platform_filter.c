
/*
 * ngx_platform: nginx's own error pages in the family's envelope, and
 * the family's limit of a body enforced while nginx reads it.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_platform.h"


static ngx_int_t ngx_platform_header_filter(ngx_http_request_t *r);
static ngx_int_t ngx_platform_body_filter(ngx_http_request_t *r,
    ngx_chain_t *in);
static ngx_int_t ngx_platform_request_body_filter(ngx_http_request_t *r,
    ngx_chain_t *in);
static ngx_int_t ngx_platform_body_too_large(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);


static ngx_http_output_header_filter_pt  ngx_http_next_header_filter;
static ngx_http_output_body_filter_pt    ngx_http_next_body_filter;
static ngx_http_request_body_filter_pt   ngx_http_next_request_body_filter;


/*
 * Errors nginx answers itself in a module location (a body over
 * client_max_body_size, a malformed chunked body, limit_except, ...) are
 * given the family's envelope instead of nginx's HTML page: the header
 * filter sets the envelope's headers and the body filter sends it in
 * place of the page.
 */

ngx_int_t
ngx_platform_filter_init(ngx_conf_t *cf)
{
    ngx_http_next_header_filter = ngx_http_top_header_filter;
    ngx_http_top_header_filter = ngx_platform_header_filter;

    ngx_http_next_body_filter = ngx_http_top_body_filter;
    ngx_http_top_body_filter = ngx_platform_body_filter;

    ngx_http_next_request_body_filter = ngx_http_top_request_body_filter;
    ngx_http_top_request_body_filter = ngx_platform_request_body_filter;

    return NGX_OK;
}


static ngx_int_t
ngx_platform_header_filter(ngx_http_request_t *r)
{
    ngx_int_t                 rc;
    ngx_uint_t                status;
    ngx_platform_ctx_t       *ctx;
    ngx_platform_loc_conf_t  *plcf;

    /*
     * err_status marks nginx's own error pages: a response that a nested
     * location proxies, say, keeps its body
     */

    status = r->err_status;

    if (r != r->main || status < NGX_HTTP_BAD_REQUEST) {
        return ngx_http_next_header_filter(r);
    }

    ctx = ngx_platform_get_ctx(r);

    if (ctx && ctx->answered) {
        return ngx_http_next_header_filter(r);
    }

    plcf = ngx_http_get_module_loc_conf(r, ngx_platform_module);

    if (plcf == NULL || plcf->family == NULL) {
        return ngx_http_next_header_filter(r);
    }

    if (ctx == NULL) {
        /* refused before the module's handler ran */

        ctx = ngx_platform_create_ctx(r, plcf->family);
        if (ctx == NULL) {
            return NGX_ERROR;
        }
    }

    /* headers of nginx's page that do not fit the envelope */

    r->headers_out.content_length_n = -1;

    if (r->headers_out.content_length) {
        r->headers_out.content_length->hash = 0;
        r->headers_out.content_length = NULL;
    }

    /* the envelope goes out now, through the filters, marked answered */

    rc = ngx_platform_send_error(r, status,
                                 ctx->error_status == status
                                 ? ctx->error_message : NULL,
                                 ctx->error_status == status
                                 ? ctx->error_detail : NULL);

    /* and nginx's page, sent after this returns, is dropped */
    ctx->replace = 1;

    return (rc == NGX_ERROR) ? NGX_ERROR : NGX_OK;
}


static ngx_int_t
ngx_platform_body_filter(ngx_http_request_t *r, ngx_chain_t *in)
{
    ngx_chain_t         *cl;
    ngx_platform_ctx_t  *ctx;

    ctx = ngx_platform_get_ctx(r);

    if (ctx == NULL || !ctx->replace) {
        return ngx_http_next_body_filter(r, in);
    }

    /* nginx's page: consumed and dropped, the envelope was sent */

    for (cl = in; cl; cl = cl->next) {
        cl->buf->pos = cl->buf->last;
        cl->buf->file_pos = cl->buf->file_last;
    }

    return NGX_OK;
}


/*
 * The family's limit of a routed request's body, before it is read: a
 * longer Content-Length is refused at once (no "100 Continue" invites
 * the body, and the connection is closed rather than read to its end);
 * a chunked body is counted as it arrives, by the filter below.
 */

ngx_int_t
ngx_platform_body_limit(ngx_http_request_t *r, ngx_platform_ctx_t *ctx)
{
    if (ctx->family->max_body == NULL) {
        return NGX_OK;
    }

    ctx->body_max = ctx->family->max_body(r, ctx);
    ctx->body_received = 0;

    if (ctx->body_max == 0
        || r->headers_in.content_length_n <= ctx->body_max)
    {
        return NGX_OK;
    }

    r->expect_tested = 1;

    return ngx_platform_body_too_large(r, ctx);
}


/*
 * The family's body limit (ctx->body_max, set by the core once the
 * request is routed) over the bytes of the body as they arrive: decoded
 * chunks, HTTP/2 DATA frames, or a Content-Length body. The buffers that
 * go past it are never passed on to be kept: 413 in the envelope, the
 * connection closed.
 */

static ngx_int_t
ngx_platform_request_body_filter(ngx_http_request_t *r, ngx_chain_t *in)
{
    off_t                size;
    ngx_chain_t         *cl;
    ngx_platform_ctx_t  *ctx;

    ctx = ngx_platform_get_ctx(r);

    if (ctx == NULL || ctx->body_max == 0) {
        return ngx_http_next_request_body_filter(r, in);
    }

    size = 0;

    for (cl = in; cl; cl = cl->next) {
        size += ngx_buf_size(cl->buf);
    }

    ctx->body_received += size;

    if (ctx->body_received > ctx->body_max) {
        return ngx_platform_body_too_large(r, ctx);
    }

    return ngx_http_next_request_body_filter(r, in);
}


/* 413, with the limit in the detail; the rest of the body is not read */

static ngx_int_t
ngx_platform_body_too_large(ngx_http_request_t *r, ngx_platform_ctx_t *ctx)
{
    char       *detail;
    u_char      max[NGX_OFF_T_LEN];
    ngx_str_t   arg;

    r->keepalive = 0;

    arg.data = max;
    arg.len = ngx_sprintf(max, "%O", ctx->body_max) - max;

    detail = ngx_platform_text_format(r, ngx_platform_text(ctx,
                 (ctx->body_max == 1)
                 ? "This route accepts a body of at most 1 byte."
                 : "This route accepts a body of at most %s bytes."),
                 &arg, 1);
    if (detail == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_platform_fail(r, NGX_HTTP_REQUEST_ENTITY_TOO_LARGE,
                             "Request body too large.", detail);
}
