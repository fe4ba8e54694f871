
/*
 * ngx_platform: nginx's own error pages in the family's envelope.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_platform.h"


static ngx_int_t ngx_platform_header_filter(ngx_http_request_t *r);
static ngx_int_t ngx_platform_body_filter(ngx_http_request_t *r,
    ngx_chain_t *in);


static ngx_http_output_header_filter_pt  ngx_http_next_header_filter;
static ngx_http_output_body_filter_pt    ngx_http_next_body_filter;


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
