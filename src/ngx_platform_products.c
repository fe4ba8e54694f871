
/*
 * ngx_platform: product classifications (spec 4.6).
 *
 * GET /api/v1/products/classifications answers the catalogue as it is, with
 * no envelope on success, Cache-Control and an ETag over the body; a
 * matching If-None-Match gets 304. Errors use Envelope B.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>
#include <ngx_md5.h>

#include "ngx_platform.h"
#include "ngx_platform_pg.h"


static ngx_int_t ngx_platform_products_classifications(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);
static void ngx_platform_products_classifications_done(ngx_http_request_t *r,
    ngx_platform_pg_op_t *op, PGresult *res, ngx_int_t rc);
static ngx_int_t ngx_platform_products_etag_matches(ngx_http_request_t *r,
    ngx_str_t *etag);


static ngx_platform_route_t  ngx_platform_products_routes[] = {

    { NGX_HTTP_GET, "/api/v1/products/classifications",
      ngx_platform_products_classifications },

    { 0, NULL, NULL }
};


ngx_platform_family_t  ngx_platform_products_family = {
    ngx_string("products"),
    NGX_PLATFORM_ENVELOPE_B,
    NGX_PLATFORM_BACKEND_PG,
    ngx_platform_products_routes
};


static ngx_platform_pg_stmt_t  ngx_platform_products_classifications_stmt = {
    "platform_products_classifications",

    "SELECT json_build_object('classifications',"
    " coalesce(json_agg(json_build_object('group', group_name,"
    " 'tags', to_json(tags)) ORDER BY position, group_name),"
    " '[]'::json))::text"
    " FROM product_classifications",

    0
};


static ngx_int_t
ngx_platform_products_classifications(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx)
{
    ngx_int_t  rc;

    rc = ngx_platform_pg_query(r, &ngx_platform_products_classifications_stmt,
                               NULL,
                               ngx_platform_products_classifications_done);

    if (rc != NGX_DONE) {
        return ngx_platform_send_backend_error(r, rc);
    }

    return NGX_DONE;
}


static void
ngx_platform_products_classifications_done(ngx_http_request_t *r,
    ngx_platform_pg_op_t *op, PGresult *res, ngx_int_t rc)
{
    u_char                   *body, *p;
    size_t                    len;
    ngx_md5_t                 md5;
    ngx_str_t                 etag, cache_control;
    ngx_platform_loc_conf_t  *plcf;
    u_char                    digest[16];

    if (rc != NGX_OK) {
        ngx_platform_finalize(r, ngx_platform_send_backend_error(r, rc));
        return;
    }

    if (PQntuples(res) != 1 || PQgetisnull(res, 0, 0)) {
        ngx_platform_finalize(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }

    len = PQgetlength(res, 0, 0);

    /* the result is freed when this handler returns */

    body = ngx_pnalloc(r->pool, len);
    if (body == NULL) {
        ngx_platform_finalize(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }

    ngx_memcpy(body, PQgetvalue(res, 0, 0), len);

    ngx_md5_init(&md5);
    ngx_md5_update(&md5, body, len);
    ngx_md5_final(digest, &md5);

    p = ngx_pnalloc(r->pool, 2 + 32);
    if (p == NULL) {
        ngx_platform_finalize(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }

    etag.data = p;
    *p++ = '"';
    p = ngx_hex_dump(p, digest, 16);
    *p++ = '"';
    etag.len = p - etag.data;

    plcf = ngx_http_get_module_loc_conf(r, ngx_platform_module);

    cache_control.data = ngx_pnalloc(r->pool, sizeof("public, max-age=") - 1
                                              + NGX_TIME_T_LEN);
    if (cache_control.data == NULL) {
        ngx_platform_finalize(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }

    cache_control.len = ngx_sprintf(cache_control.data, "public, max-age=%T",
                                    plcf->cache_max_age)
                        - cache_control.data;

    if (ngx_platform_add_header(r, "ETag", &etag) != NGX_OK
        || ngx_platform_add_header(r, "Cache-Control", &cache_control)
           != NGX_OK)
    {
        ngx_platform_finalize(r, NGX_ERROR);
        return;
    }

    if (ngx_platform_products_etag_matches(r, &etag)) {
        ngx_platform_finalize(r, ngx_platform_send_empty(r,
                                                  NGX_HTTP_NOT_MODIFIED));
        return;
    }

    ngx_platform_finalize(r, ngx_platform_send_raw(r, NGX_HTTP_OK, body, len));
}


/* If-None-Match: "*" or a list of (weak or strong) tags */

static ngx_int_t
ngx_platform_products_etag_matches(ngx_http_request_t *r, ngx_str_t *etag)
{
    u_char           *p, *end, *start;
    ngx_table_elt_t  *h;

    h = r->headers_in.if_none_match;

    if (h) {
        p = h->value.data;
        end = p + h->value.len;

        while (p < end) {

            while (p < end && (*p == ' ' || *p == '\t' || *p == ',')) {
                p++;
            }

            if (p == end) {
                break;
            }

            if (*p == '*') {
                return 1;
            }

            if (end - p > 2 && p[0] == 'W' && p[1] == '/') {
                p += 2;
            }

            start = p;

            while (p < end && *p != ',' && *p != ' ' && *p != '\t') {
                p++;
            }

            if ((size_t) (p - start) == etag->len
                && ngx_strncmp(start, etag->data, etag->len) == 0)
            {
                return 1;
            }
        }
    }

    return 0;
}
