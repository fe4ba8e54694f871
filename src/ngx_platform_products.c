
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
#include "ngx_platform_op.h"


static ngx_int_t ngx_platform_products_classifications(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);
static void ngx_platform_products_classifications_done(void *data,
    ngx_platform_pg_op_t *op, PGresult *res, ngx_int_t rc);
static ngx_int_t ngx_platform_products_cache_set(u_char *data, size_t len);
static ngx_int_t ngx_platform_products_send(ngx_http_request_t *r);
static ngx_int_t ngx_platform_products_etag_matches(ngx_http_request_t *r,
    ngx_str_t *etag);


typedef struct {
    u_char                    *body;       /* heap, owned by the worker */
    size_t                     len;
    ngx_msec_t                 fetched;
    ngx_str_t                  etag;
    u_char                     etag_data[2 + 32];
} ngx_platform_products_cache_t;


static ngx_platform_products_cache_t  ngx_platform_products_cache;


/* the catalogue as it is: no envelope, and 304 without a body */

static ngx_platform_doc_answer_t
    ngx_platform_products_classifications_answers[] =
{
    { NGX_HTTP_NOT_MODIFIED, NULL, NULL },
    { 0, NULL, NULL }
};


static ngx_platform_doc_t  ngx_platform_products_classifications_doc = {
    "List the product classifications",
    ngx_platform_doc_schema("Classifications"),
    "{}",
    ngx_platform_products_classifications_answers, 1,
    "Product classifications, with Cache-Control and ETag."
};


static const char  ngx_platform_products_schemas[] =
    "{"
    "\"Classifications\":{\"type\":\"object\",\"properties\":{"
     "\"classifications\":{\"type\":\"array\",\"items\":{"
     "\"type\":\"object\",\"properties\":{"
     "\"group\":{\"type\":\"string\"},"
     "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}}}}}}"
    "}";


static ngx_platform_endpoint_t  ngx_platform_products_endpoints[] = {

    { NGX_HTTP_GET, "/api/v1/products/classifications",
      NGX_PLATFORM_AUTH_NONE, 0,
      NULL, NULL, NULL, NULL,
      NULL, ngx_platform_products_classifications,
      &ngx_platform_products_classifications_doc },

    { 0, NULL, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL }
};


ngx_platform_family_t  ngx_platform_products_family = {
    ngx_string("products"),
    NGX_PLATFORM_ENVELOPE_B,
    NGX_PLATFORM_BACKEND_PG,
    ngx_platform_products_endpoints,
    NULL,
    0,
    ngx_platform_products_schemas,
    NULL
};


static ngx_platform_pg_stmt_t  ngx_platform_products_classifications_stmt = {
    "platform_products_classifications",

    "SELECT '{\"classifications\":['"
    " || coalesce(string_agg((SELECT row_to_json(x) FROM (SELECT"
    " c.group_name AS \"group\", to_json(c.tags) AS tags) x)::text, ','"
    " ORDER BY c.position, c.group_name), '') || ']}'"
    " FROM product_classifications c",

    0, 0, 1
};


static ngx_int_t
ngx_platform_products_classifications(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx)
{
    ngx_platform_loc_conf_t  *plcf;

    plcf = ngx_http_get_module_loc_conf(r, ngx_platform_module);

    if (ngx_platform_products_cache.body
        && ngx_current_msec - ngx_platform_products_cache.fetched
           < plcf->cache_time)
    {
        return ngx_platform_products_send(r);
    }

    return ngx_platform_read_query(r,
                                   &ngx_platform_products_classifications_stmt,
                                   NULL,
                                   ngx_platform_products_classifications_done);
}


static void
ngx_platform_products_classifications_done(void *data,
    ngx_platform_pg_op_t *op, PGresult *res, ngx_int_t rc)
{
    ngx_http_request_t *r = data;

    if (rc != NGX_OK) {
        ngx_platform_finalize(r, ngx_platform_pg_outcome(r, NULL, res, rc));
        return;
    }

    if (PQntuples(res) != 1 || PQgetisnull(res, 0, 0)) {
        ngx_platform_finalize(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }

    if (ngx_platform_products_cache_set((u_char *) PQgetvalue(res, 0, 0),
                                        PQgetlength(res, 0, 0))
        != NGX_OK)
    {
        ngx_platform_finalize(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }

    ngx_platform_finalize(r, ngx_platform_products_send(r));
}


/*
 * The worker keeps the last document it read, with its ETag, and reuses
 * it for platform_cache_time; the request gets its own copy, so a refresh
 * never frees what a slow client is still being sent.
 */

static ngx_int_t
ngx_platform_products_cache_set(u_char *data, size_t len)
{
    u_char                         *p, *body;
    ngx_md5_t                       md5;
    u_char                          digest[16];
    ngx_platform_products_cache_t  *cache;

    cache = &ngx_platform_products_cache;

    body = ngx_alloc(len, ngx_cycle->log);
    if (body == NULL) {
        return NGX_ERROR;
    }

    ngx_memcpy(body, data, len);

    ngx_free(cache->body);

    cache->body = body;
    cache->len = len;
    cache->fetched = ngx_current_msec;

    ngx_md5_init(&md5);
    ngx_md5_update(&md5, body, len);
    ngx_md5_final(digest, &md5);

    p = cache->etag_data;
    *p++ = '"';
    p = ngx_hex_dump(p, digest, 16);
    *p++ = '"';

    cache->etag.data = cache->etag_data;
    cache->etag.len = p - cache->etag_data;

    return NGX_OK;
}


static ngx_int_t
ngx_platform_products_send(ngx_http_request_t *r)
{
    u_char                         *body;
    ngx_str_t                       etag, cache_control;
    ngx_platform_loc_conf_t        *plcf;
    ngx_platform_products_cache_t  *cache;

    cache = &ngx_platform_products_cache;
    plcf = ngx_http_get_module_loc_conf(r, ngx_platform_module);

    body = ngx_pnalloc(r->pool, cache->len + cache->etag.len
                                + sizeof("public, max-age=") - 1
                                + NGX_TIME_T_LEN);
    if (body == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ngx_memcpy(body, cache->body, cache->len);

    etag.data = body + cache->len;
    etag.len = cache->etag.len;
    ngx_memcpy(etag.data, cache->etag.data, etag.len);

    cache_control.data = etag.data + etag.len;
    cache_control.len = ngx_sprintf(cache_control.data, "public, max-age=%T",
                                    plcf->cache_max_age)
                        - cache_control.data;

    if (ngx_platform_add_header(r, "ETag", &etag) != NGX_OK
        || ngx_platform_add_header(r, "Cache-Control", &cache_control)
           != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (ngx_platform_products_etag_matches(r, &etag)) {
        return ngx_platform_send_empty(r, NGX_HTTP_NOT_MODIFIED);
    }

    return ngx_platform_send_raw(r, NGX_HTTP_OK, body, cache->len);
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
