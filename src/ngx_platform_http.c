
/*
 * ngx_platform: the request core shared by every endpoint family: request
 * id and language, routing over the compiled endpoint tables, the inputs
 * each endpoint declares (tenancy, captures, query arguments, body), and
 * the completion of requests that waited on a backend.
 *
 * A request goes: route (404, 405), credentials and tenancy headers
 * (ngx_platform_auth.c: 401, 403, 400), declared inputs (400, 403),
 * body (415, 413, 400), then the endpoint's operation.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_platform.h"


#define NGX_PLATFORM_REQUEST_ID_MAX     64

/* bodies this large are read and parsed in the thread pool */
#define NGX_PLATFORM_BODY_THREAD_SIZE  (64 * 1024)

/*
 * decisions.md section 5: a JSON body nests at most 64 levels and holds
 * at most 10,000 members (object members and array elements, at every
 * level), checked by a linear scan before Jansson builds anything
 */
#define NGX_PLATFORM_JSON_MAX_DEPTH    64
#define NGX_PLATFORM_JSON_MAX_MEMBERS  10000

#define NGX_PLATFORM_JSON_TOO_DEEP     1
#define NGX_PLATFORM_JSON_TOO_MANY     2


/* a body being read into one buffer and parsed, perhaps in a thread */
struct ngx_platform_body_work_s {
    ngx_chain_t               *bufs;
    u_char                    *data;
    size_t                     len;
    json_t                    *json;
    json_error_t               error;
    ngx_err_t                  read_error;
    ngx_uint_t                 too_complex;   /* NGX_PLATFORM_JSON_TOO_* */
    unsigned                   read_failed:1;
};


static void ngx_platform_continue(ngx_http_request_t *r, ngx_int_t rc);
static ngx_platform_ctx_t *ngx_platform_create_ctx(ngx_http_request_t *r,
    ngx_platform_family_t *family);
static void ngx_platform_request_id(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);
static u_char *ngx_platform_log_error(ngx_http_request_t *r,
    ngx_http_request_t *sr, u_char *buf, size_t len);
static ngx_uint_t ngx_platform_lang(ngx_http_request_t *r);
static ngx_int_t ngx_platform_compile_route(ngx_conf_t *cf,
    ngx_platform_family_t *family, ngx_platform_endpoint_t *ep,
    ngx_platform_route_t *route);
static ngx_int_t ngx_platform_route(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx, ngx_array_t *routes);
static ngx_int_t ngx_platform_match(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx, ngx_platform_route_t *route,
    ngx_uint_t *bad_version);
static ngx_int_t ngx_platform_add_allow(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx, ngx_platform_endpoint_t *ep);
static ngx_int_t ngx_platform_check_inputs(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);
static ngx_int_t ngx_platform_check_content_type(ngx_http_request_t *r);
static void ngx_platform_body_handler(ngx_http_request_t *r);
static ngx_int_t ngx_platform_collect_body(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);
static void ngx_platform_body_work(void *data);
static ngx_uint_t ngx_platform_json_limits(u_char *p, size_t len);
static ngx_int_t ngx_platform_body_done(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);
static void ngx_platform_body_cleanup(void *data);
static ngx_int_t ngx_platform_refuse(ngx_http_request_t *r, ngx_int_t rc);
static ngx_int_t ngx_platform_proceed(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);
static ngx_int_t ngx_platform_run(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);
static void ngx_platform_check_broken_connection(ngx_http_request_t *r);
static ngx_int_t ngx_platform_header_filter(ngx_http_request_t *r);
static ngx_int_t ngx_platform_body_filter(ngx_http_request_t *r,
    ngx_chain_t *in);


static ngx_http_output_header_filter_pt  ngx_http_next_header_filter;
static ngx_http_output_body_filter_pt    ngx_http_next_body_filter;

/* nginx's own log handler of requests, the same for all of them */
static ngx_http_log_handler_pt           ngx_platform_http_log_handler;

/* the state of the request ids' generator, and whose it is */
static uint64_t                          ngx_platform_rid[2];
static ngx_pid_t                         ngx_platform_rid_pid;


ngx_int_t
ngx_platform_handler(ngx_http_request_t *r)
{
    ngx_int_t                 rc;
    ngx_platform_ctx_t       *ctx;
    ngx_platform_loc_conf_t  *plcf;

    plcf = ngx_http_get_module_loc_conf(r, ngx_platform_module);

    if (r != r->main) {
        return NGX_HTTP_NOT_FOUND;
    }

    if (plcf->family == NULL || plcf->routes == NULL) {
        ngx_log_error(NGX_LOG_ALERT, r->connection->log, 0,
                      "platform: no family in this location");
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ctx = ngx_platform_create_ctx(r, plcf->family);
    if (ctx == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    rc = ngx_platform_route(r, ctx, plcf->routes);

    if (rc == NGX_OK) {
        rc = ngx_platform_authenticate(r, ctx, ngx_platform_continue);
    }

    if (rc == NGX_DONE) {
        /* an API key is looked up; ngx_platform_continue() follows */
        r->read_event_handler = ngx_platform_check_broken_connection;
        return NGX_DONE;
    }

    if (rc != NGX_OK) {
        return ngx_platform_refuse(r, rc);
    }

    return ngx_platform_proceed(r, ctx);
}


/* what authentication resumes once an API key's lookup has answered */

static void
ngx_platform_continue(ngx_http_request_t *r, ngx_int_t rc)
{
    ngx_platform_ctx_t  *ctx;

    ctx = ngx_platform_get_ctx(r);

    r->read_event_handler = ngx_http_block_reading;

    if (rc != NGX_OK) {
        ngx_http_finalize_request(r, ngx_platform_refuse(r, rc));
        return;
    }

    rc = ngx_platform_proceed(r, ctx);

    /*
     * NGX_DONE: the body reader or a backend took a count of its own;
     * the lookup's count is dropped either way
     */

    ngx_http_finalize_request(r, rc);
}


/* a request refused before its body was read */

static ngx_int_t
ngx_platform_refuse(ngx_http_request_t *r, ngx_int_t rc)
{
    /* a body left unread would be taken for the next request */
    (void) ngx_http_discard_request_body(r);

    return ngx_platform_settle(r, rc);
}


/*
 * An authenticated request: its declared inputs, its body if it takes
 * one, then its operation.
 */

static ngx_int_t
ngx_platform_proceed(ngx_http_request_t *r, ngx_platform_ctx_t *ctx)
{
    ngx_int_t  rc;

    rc = ngx_platform_check_inputs(r, ctx);
    if (rc != NGX_OK) {
        return ngx_platform_refuse(r, rc);
    }

    if (ctx->endpoint->body == NULL) {
        rc = ngx_http_discard_request_body(r);
        if (rc != NGX_OK) {
            return ngx_platform_settle(r, rc);
        }

        return ngx_platform_run(r, ctx);
    }

    rc = ngx_platform_check_content_type(r);
    if (rc != NGX_OK) {
        return ngx_platform_refuse(r, rc);
    }

    rc = ngx_http_read_client_request_body(r, ngx_platform_body_handler);

    if (rc >= NGX_HTTP_SPECIAL_RESPONSE) {
        /* a body over client_max_body_size, a malformed chunked body */
        return ngx_platform_settle(r, rc);
    }

    return NGX_DONE;
}


static ngx_platform_ctx_t *
ngx_platform_create_ctx(ngx_http_request_t *r, ngx_platform_family_t *family)
{
    ngx_platform_ctx_t  *ctx;

    ctx = ngx_pcalloc(r->pool, sizeof(ngx_platform_ctx_t));
    if (ctx == NULL) {
        return NULL;
    }

    ctx->family = family;
    ctx->lang = ngx_platform_lang(r);

    ngx_http_set_ctx(r, ctx, ngx_platform_module);

    ngx_platform_request_id(r, ctx);

    /*
     * nginx's handler is kept aside once: after an internal redirect the
     * module's context is gone but its log lines still need nginx's part
     */

    if (r->log_handler != ngx_platform_log_error) {
        ngx_platform_http_log_handler = r->log_handler;
        r->log_handler = ngx_platform_log_error;
    }

    return ctx;
}


/*
 * The client's X-Request-Id when it is 1 to 64 characters of a safe set,
 * else 32 random hex digits.
 */

static void
ngx_platform_request_id(ngx_http_request_t *r, ngx_platform_ctx_t *ctx)
{
    u_char           *p;
    size_t            i;
    uint64_t          x, y;
    ngx_uint_t        n;
    ngx_table_elt_t  *h;
    static u_char     hex[] = "0123456789abcdef";

    h = ngx_platform_header(r, "X-Request-Id");

    if (h && h->value.len > 0 && h->value.len <= NGX_PLATFORM_REQUEST_ID_MAX)
    {
        for (i = 0; i < h->value.len; i++) {
            p = &h->value.data[i];

            if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z')
                  || (*p >= 'A' && *p <= 'Z')
                  || *p == '-' || *p == '_' || *p == '.' || *p == ':'))
            {
                break;
            }
        }

        if (i == h->value.len) {
            ctx->request_id = h->value;
            return;
        }
    }

    p = ngx_pnalloc(r->pool, 32);
    if (p == NULL) {
        ngx_str_set(&ctx->request_id, "-");
        return;
    }

    ctx->request_id.data = p;
    ctx->request_id.len = 32;

    /*
     * xorshift128+, seeded from random() once per process: an id must not
     * repeat, it need not be secret, and random() takes a lock per call
     */

    if (ngx_platform_rid_pid != ngx_pid) {
        ngx_platform_rid_pid = ngx_pid;

        ngx_platform_rid[0] = ((uint64_t) ngx_random() << 33)
                              ^ ((uint64_t) ngx_random() << 11)
                              ^ (uint64_t) ngx_pid;
        ngx_platform_rid[1] = (((uint64_t) ngx_random() << 33)
                               ^ ((uint64_t) ngx_random() << 11)
                               ^ (uint64_t) ngx_time())
                              | 1;
    }

    for (n = 0; n < 2; n++) {
        x = ngx_platform_rid[0];
        y = ngx_platform_rid[1];

        ngx_platform_rid[0] = y;
        x ^= x << 23;
        ngx_platform_rid[1] = x ^ y ^ (x >> 17) ^ (y >> 26);

        x = ngx_platform_rid[1] + y;

        for (i = 0; i < 16; i++) {
            *p++ = hex[(x >> (60 - 4 * i)) & 0xf];
        }
    }
}


/* error log lines of a request name its request id */

static u_char *
ngx_platform_log_error(ngx_http_request_t *r, ngx_http_request_t *sr,
    u_char *buf, size_t len)
{
    u_char              *p;
    ngx_platform_ctx_t  *ctx;

    p = buf;

    if (ngx_platform_http_log_handler) {
        p = ngx_platform_http_log_handler(r, sr, p, len);
        len -= p - buf;
    }

    ctx = ngx_http_get_module_ctx(r, ngx_platform_module);

    if (ctx == NULL) {
        return p;
    }

    return ngx_snprintf(p, len, ", request_id: \"%V\"", &ctx->request_id);
}


static ngx_uint_t
ngx_platform_lang(ngx_http_request_t *r)
{
    ngx_table_elt_t  *h;

    h = ngx_platform_header(r, "Accept-Language");

    if (h && h->value.len >= 2
        && ngx_strncasecmp(h->value.data, (u_char *) "fr", 2) == 0
        && (h->value.len == 2 || h->value.data[2] == '-'
            || h->value.data[2] == ',' || h->value.data[2] == ';'
            || h->value.data[2] == '_'))
    {
        return NGX_PLATFORM_LANG_FR;
    }

    return NGX_PLATFORM_LANG_EN;
}


/* endpoint patterns, compiled when the configuration loads */

ngx_array_t *
ngx_platform_compile_routes(ngx_conf_t *cf, ngx_platform_family_t *family)
{
    ngx_uint_t                n;
    ngx_array_t              *routes;
    ngx_platform_route_t     *route;
    ngx_platform_endpoint_t  *ep;

    n = 0;
    for (ep = family->endpoints; ep->pattern; ep++) {
        n++;
    }

    routes = ngx_array_create(cf->pool, n ? n : 1,
                              sizeof(ngx_platform_route_t));
    if (routes == NULL) {
        return NULL;
    }

    for (ep = family->endpoints; ep->pattern; ep++) {
        route = ngx_array_push(routes);
        if (route == NULL) {
            return NULL;
        }

        if (ngx_platform_compile_route(cf, family, ep, route) != NGX_OK) {
            return NULL;
        }
    }

    return routes;
}


static ngx_int_t
ngx_platform_compile_route(ngx_conf_t *cf, ngx_platform_family_t *family,
    ngx_platform_endpoint_t *ep, ngx_platform_route_t *route)
{
    u_char                  *p, *end, *seg, *colon;
    size_t                   len;
    ngx_uint_t               n, nquery;
    ngx_platform_field_t    *f;
    ngx_platform_segment_t  *s;

    ngx_memzero(route, sizeof(ngx_platform_route_t));
    route->endpoint = ep;

    nquery = 0;
    for (f = ep->query; f && f->name; f++) {
        nquery++;
    }

    if (ep->pattern[0] == '*' && ep->pattern[1] == '\0') {
        route->any = 1;
        goto done;
    }

    p = (u_char *) ep->pattern;
    end = p + ngx_strlen(p);

    if (*p != '/') {
        goto invalid;
    }

    n = 0;
    for (seg = p; seg < end; seg++) {
        if (*seg == '/') {
            n++;
        }
    }

    route->segments = ngx_pcalloc(cf->pool,
                                  n * sizeof(ngx_platform_segment_t));
    if (route->segments == NULL) {
        return NGX_ERROR;
    }

    while (p < end) {
        seg = ++p;                          /* past '/' */

        while (p < end && *p != '/') {
            p++;
        }

        len = p - seg;
        s = &route->segments[route->nsegments++];

        if (len && seg[len - 1] == '}'
            && (seg[0] == '{' || (len > 1 && seg[0] == 'v' && seg[1] == '{')))
        {
            if (seg[0] == 'v') {
                s->prefix = 1;
                seg++;
                len--;
            }

            /* "{type}" or "{type:name}" */

            seg++;
            len -= 2;

            colon = ngx_strlchr(seg, seg + len, ':');

            s->name.data = colon ? colon + 1 : seg;
            s->name.len = colon ? (size_t) (seg + len - colon - 1) : len;

            if (colon) {
                len = colon - seg;
            }

            if (len == 7 && ngx_strncmp(seg, "version", 7) == 0) {
                s->version = 1;
                continue;
            }

            if (s->prefix) {
                goto invalid;
            }

            if (len == 4 && ngx_strncmp(seg, "uuid", 4) == 0) {
                s->type = NGX_PLATFORM_T_UUID;

            } else if (len == 6 && ngx_strncmp(seg, "string", 6) == 0) {
                s->type = NGX_PLATFORM_T_STRING;

            } else {
                goto invalid;
            }

            if (!colon) {
                ngx_str_set(&s->name, "id");
            }

            route->ncaptures++;
            continue;
        }

        if (len == 0 || ngx_strlchr(seg, seg + len, '{')
            || ngx_strlchr(seg, seg + len, '}'))
        {
            goto invalid;
        }

        s->literal.data = seg;
        s->literal.len = len;
    }

done:

    if (route->ncaptures + nquery > NGX_PLATFORM_MAX_ARGS) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "platform_%V: \"%s\" has more than %d arguments",
                           &family->name, ep->pattern, NGX_PLATFORM_MAX_ARGS);
        return NGX_ERROR;
    }

    if (ep->sql == NULL && ep->handler == NULL) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "platform_%V: \"%s\" needs a statement or a "
                           "handler", &family->name, ep->pattern);
        return NGX_ERROR;
    }

    return NGX_OK;

invalid:

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "platform_%V: invalid endpoint pattern \"%s\"",
                       &family->name, ep->pattern);
    return NGX_ERROR;
}


/*
 * Finds the endpoint of the request: 404 for an unknown path or version,
 * 405 (with Allow) for a known path with another method.
 */

static ngx_int_t
ngx_platform_route(ngx_http_request_t *r, ngx_platform_ctx_t *ctx,
    ngx_array_t *routes)
{
    u_char                   *detail;
    ngx_uint_t                i, method, bad_version, path_known;
    ngx_platform_route_t     *route;
    ngx_platform_endpoint_t  *ep;

    route = routes->elts;
    path_known = 0;

    for (i = 0; i < routes->nelts; i++) {

        if (ngx_platform_match(r, ctx, &route[i], &bad_version) != NGX_OK) {
            continue;
        }

        ep = route[i].endpoint;
        method = r->method;

        /* a HEAD is a GET without the body, unless the GET changes state */

        if (method == NGX_HTTP_HEAD && !(ep->inputs & NGX_PLATFORM_IN_NO_HEAD))
        {
            method = NGX_HTTP_GET;
        }

        if (ep->method == method) {

            if (bad_version) {
                return ngx_platform_fail(r, NGX_HTTP_NOT_FOUND,
                                         "API version not supported.",
                                         "Supported versions: 1, 1.0.");
            }

            ctx->route = &route[i];
            ctx->endpoint = ep;
            return NGX_OK;
        }

        path_known = 1;

        if (ngx_platform_add_allow(r, ctx, ep) != NGX_OK) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
    }

    if (path_known) {
        detail = ngx_pnalloc(r->pool, sizeof("This endpoint accepts .")
                                      + ctx->allow.len);
        if (detail == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        ngx_sprintf(detail, "This endpoint accepts %V.%Z", &ctx->allow);

        return ngx_platform_fail(r, NGX_HTTP_NOT_ALLOWED,
                                 "Method not allowed.", (char *) detail);
    }

    return ngx_platform_fail(r, NGX_HTTP_NOT_FOUND, "Resource not found.",
                             "No such endpoint.");
}


static ngx_int_t
ngx_platform_match(ngx_http_request_t *r, ngx_platform_ctx_t *ctx,
    ngx_platform_route_t *route, ngx_uint_t *bad_version)
{
    u_char                  *u, *end, *seg;
    ngx_str_t                value;
    ngx_uint_t               i, nargs, version_ok;
    ngx_platform_segment_t  *s;

    *bad_version = 0;

    if (route->any) {
        ctx->nargs = 0;
        return NGX_OK;
    }

    u = r->uri.data;
    end = r->uri.data + r->uri.len;

    nargs = 0;
    version_ok = 1;

    for (i = 0; i < route->nsegments; i++) {
        s = &route->segments[i];

        if (u == end || *u != '/') {
            return NGX_DECLINED;
        }

        seg = ++u;
        while (u < end && *u != '/') {
            u++;
        }

        value.data = seg;
        value.len = u - seg;

        if (s->literal.len) {
            if (value.len != s->literal.len
                || ngx_strncmp(value.data, s->literal.data, value.len) != 0)
            {
                return NGX_DECLINED;
            }

            continue;
        }

        if (s->prefix) {
            if (value.len < 2 || value.data[0] != 'v') {
                return NGX_DECLINED;
            }

            value.data++;
            value.len--;
        }

        if (value.len == 0) {
            return NGX_DECLINED;
        }

        if (s->version) {
            if (!((value.len == 1 && value.data[0] == '1')
                  || (value.len == 3
                      && ngx_strncmp(value.data, "1.0", 3) == 0)))
            {
                version_ok = 0;
            }

            continue;
        }

        /* typed captures are checked once the caller is known */
        ctx->args[nargs++] = value;
    }

    /* a single trailing slash is tolerated */

    if (u != end && !(u + 1 == end && *u == '/')) {
        return NGX_DECLINED;
    }

    ctx->nargs = nargs;
    *bad_version = !version_ok;

    return NGX_OK;
}


static ngx_int_t
ngx_platform_add_allow(ngx_http_request_t *r, ngx_platform_ctx_t *ctx,
    ngx_platform_endpoint_t *ep)
{
    u_char     *p;
    ngx_str_t   name;

    switch (ep->method) {
    case NGX_HTTP_GET:
        if (ep->inputs & NGX_PLATFORM_IN_NO_HEAD) {
            ngx_str_set(&name, "GET");

        } else {
            ngx_str_set(&name, "GET, HEAD");
        }
        break;
    case NGX_HTTP_POST:
        ngx_str_set(&name, "POST");
        break;
    case NGX_HTTP_PUT:
        ngx_str_set(&name, "PUT");
        break;
    case NGX_HTTP_PATCH:
        ngx_str_set(&name, "PATCH");
        break;
    case NGX_HTTP_DELETE:
        ngx_str_set(&name, "DELETE");
        break;
    default:
        return NGX_OK;
    }

    if (ctx->allow.len
        && ngx_strlcasestrn(ctx->allow.data, ctx->allow.data + ctx->allow.len,
                            name.data, name.len - 1)
           != NULL)
    {
        return NGX_OK;
    }

    p = ngx_pnalloc(r->pool, ctx->allow.len + 2 + name.len);
    if (p == NULL) {
        return NGX_ERROR;
    }

    if (ctx->allow.len) {
        p = ngx_cpymem(p, ctx->allow.data, ctx->allow.len);
        *p++ = ',';
        *p++ = ' ';
        ctx->allow.len += 2;
    }

    ngx_memcpy(p, name.data, name.len);

    ctx->allow.data = p - ctx->allow.len;
    ctx->allow.len += name.len;

    return NGX_OK;
}


/*
 * What the endpoint declares it needs, checked before its body is read:
 * the tenancy inputs, the merchant claim, then its arguments.
 */

static ngx_int_t
ngx_platform_check_inputs(ngx_http_request_t *r, ngx_platform_ctx_t *ctx)
{
    ngx_int_t                 rc;
    ngx_uint_t                inputs;
    ngx_table_elt_t          *h;
    ngx_platform_identity_t  *id;

    inputs = ctx->endpoint->inputs;
    id = &ctx->identity;

    if ((inputs & NGX_PLATFORM_IN_TENANT) && id->tenant.len == 0) {
        rc = ngx_platform_require_header(r, "tenantId", &id->tenant);
        if (rc != NGX_OK) {
            return rc;
        }
    }

    if ((inputs & NGX_PLATFORM_IN_COUNTRY) && id->country.len == 0) {
        rc = ngx_platform_require_header(r, "countryCode", &id->country);
        if (rc != NGX_OK) {
            return rc;
        }
    }

    /* an optional countryCode narrows the caller's view: checked alike */

    if ((inputs & NGX_PLATFORM_IN_COUNTRY_OPT) && id->country.len == 0) {
        h = ngx_platform_header(r, "countryCode");

        if (h != NULL && h->value.len) {
            rc = ngx_platform_require_header(r, "countryCode",
                                             &id->country);
            if (rc != NGX_OK) {
                return rc;
            }
        }
    }

    if ((inputs & NGX_PLATFORM_IN_USER) && id->user.len == 0) {
        rc = ngx_platform_require_header(r, "userId", &id->user);
        if (rc != NGX_OK) {
            return rc;
        }

        /* with a verified token the user is its subject, not a claim */

        if (id->bearer
            && (id->user.len != id->subject.len
                || ngx_strncmp(id->user.data, id->subject.data,
                               id->user.len)
                   != 0))
        {
            return ngx_platform_fail(r, NGX_HTTP_FORBIDDEN, "Access denied.",
                         "The userId header does not match the token's sub.");
        }
    }

    if ((inputs & NGX_PLATFORM_IN_MERCHANT) && id->merchant.len == 0) {
        /* decisions.md section 5: the message itself says why */
        return ngx_platform_fail(r, NGX_HTTP_FORBIDDEN,
                                 "The token carries no merchantId.",
                                 "This operation acts for a merchant: "
                                 "its token needs a merchantId claim.");
    }

    rc = ngx_platform_check_captures(r, ctx);
    if (rc != NGX_OK) {
        return rc;
    }

    return ngx_platform_check_query(r, ctx);
}


/* decisions.md: JSON, text/json, text/plain or no type; else 415 */

static ngx_int_t
ngx_platform_check_content_type(ngx_http_request_t *r)
{
    size_t            len;
    ngx_str_t        *type;
    ngx_uint_t        i;
    static ngx_str_t  accepted[] = {
        ngx_string("application/json"),
        ngx_string("text/json"),
        ngx_string("text/plain")
    };

    if (r->headers_in.content_type == NULL) {
        return NGX_OK;
    }

    type = &r->headers_in.content_type->value;

    len = 0;
    while (len < type->len && type->data[len] != ';'
           && type->data[len] != ' ')
    {
        len++;
    }

    for (i = 0; i < sizeof(accepted) / sizeof(ngx_str_t); i++) {
        if (len == accepted[i].len
            && ngx_strncasecmp(type->data, accepted[i].data, len) == 0)
        {
            return NGX_OK;
        }
    }

    return ngx_platform_fail(r, NGX_HTTP_UNSUPPORTED_MEDIA_TYPE,
                             "Unsupported media type.",
                             "Send the body as application/json.");
}


static void
ngx_platform_body_handler(ngx_http_request_t *r)
{
    ngx_int_t                  rc;
    ngx_platform_ctx_t        *ctx;
    ngx_platform_body_work_t  *bw;

    ctx = ngx_platform_get_ctx(r);

    rc = ngx_platform_collect_body(r, ctx);

    if (rc == NGX_OK) {
        bw = ctx->body_work;

        if (bw->len >= NGX_PLATFORM_BODY_THREAD_SIZE) {
            /* parsing megabytes takes the event loop tens of milliseconds */
            rc = ngx_platform_offload(r, ngx_platform_body_work, bw,
                                      ngx_platform_body_done);

        } else {
            ngx_platform_body_work(bw);
            rc = ngx_platform_body_done(r, ctx);
        }
    }

    if (rc == NGX_DONE) {
        /* the thread or the backend took its own count; drop the reader's */
        ngx_http_finalize_request(r, NGX_DONE);
        return;
    }

    ngx_http_finalize_request(r, ngx_platform_settle(r, rc));
}


/*
 * Where the body is: one NUL-ended buffer of the request pool is made
 * ready for it, the work of filling it from the reader's buffers and
 * temporary file and parsing it may run in a thread.
 */

static ngx_int_t
ngx_platform_collect_body(ngx_http_request_t *r, ngx_platform_ctx_t *ctx)
{
    off_t                      len;
    ngx_buf_t                 *b;
    ngx_chain_t               *cl;
    ngx_pool_cleanup_t        *cln;
    ngx_platform_body_work_t  *bw;

    bw = ngx_pcalloc(r->pool, sizeof(ngx_platform_body_work_t));
    if (bw == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    /* the document is the request's from now on: freed exactly once */

    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    cln->handler = ngx_platform_body_cleanup;
    cln->data = bw;

    ctx->body_work = bw;

    len = 0;

    if (r->request_body) {
        bw->bufs = r->request_body->bufs;

        for (cl = bw->bufs; cl; cl = cl->next) {
            b = cl->buf;
            len += b->in_file ? b->file_last - b->file_pos : b->last - b->pos;
        }
    }

    bw->data = ngx_pnalloc(r->pool, len + 1);
    if (bw->data == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    bw->len = len;

    ctx->body = bw->data;
    ctx->body_len = len;

    return NGX_OK;
}


/*
 * In a thread for a large body: no nginx log, no pool, only the
 * buffers, the file descriptor and Jansson
 */

static void
ngx_platform_body_work(void *data)
{
    ngx_platform_body_work_t *bw = data;

    u_char       *p;
    size_t        size;
    ssize_t       n;
    ngx_buf_t    *b;
    ngx_chain_t  *cl;

    p = bw->data;

    for (cl = bw->bufs; cl; cl = cl->next) {
        b = cl->buf;

        if (!b->in_file) {
            p = ngx_cpymem(p, b->pos, b->last - b->pos);
            continue;
        }

        size = b->file_last - b->file_pos;

        n = pread(b->file->fd, p, size, b->file_pos);

        if (n == -1 || (size_t) n != size) {
            bw->read_failed = 1;
            bw->read_error = (n == -1) ? ngx_errno : 0;
            return;
        }

        p += n;
    }

    *p = '\0';

    bw->too_complex = ngx_platform_json_limits(bw->data, bw->len);

    if (bw->too_complex) {
        return;
    }

    bw->json = json_loadb((char *) bw->data, bw->len,
                          JSON_REJECT_DUPLICATES, &bw->error);
}


/*
 * The JSON limits, in one pass over the bytes outside strings: each '{'
 * or '[' opens a level; a ':' in an object and each element of an array
 * (its first, then one per ',') is a member. Text that is not JSON may
 * be miscounted, but Jansson refuses it anyway.
 */

static ngx_uint_t
ngx_platform_json_limits(u_char *p, size_t len)
{
    u_char      c, *end;
    u_char      open[NGX_PLATFORM_JSON_MAX_DEPTH];
    ngx_uint_t  depth, members, string, escape, first;

    end = p + len;
    depth = 0;
    members = 0;
    string = 0;
    escape = 0;
    first = 0;      /* an array was just opened: its first element counts */

    for ( /* void */ ; p < end; p++) {
        c = *p;

        if (string) {
            if (escape) {
                escape = 0;

            } else if (c == '\\') {
                escape = 1;

            } else if (c == '"') {
                string = 0;
            }

            continue;
        }

        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            continue;
        }

        if (first) {
            first = 0;

            if (c != ']') {
                members++;
            }
        }

        switch (c) {

        case '"':
            string = 1;
            break;

        case '{':
        case '[':
            if (depth == NGX_PLATFORM_JSON_MAX_DEPTH) {
                return NGX_PLATFORM_JSON_TOO_DEEP;
            }

            open[depth++] = c;
            first = (c == '[');
            break;

        case '}':
        case ']':
            if (depth) {
                depth--;
            }
            break;

        case ':':
            if (depth && open[depth - 1] == '{') {
                members++;
            }
            break;

        case ',':
            if (depth && open[depth - 1] == '[') {
                members++;
            }
            break;
        }

        if (members > NGX_PLATFORM_JSON_MAX_MEMBERS) {
            return NGX_PLATFORM_JSON_TOO_MANY;
        }
    }

    return 0;
}


/* back in the worker: the parsed body checked, then the operation */

static ngx_int_t
ngx_platform_body_done(ngx_http_request_t *r, ngx_platform_ctx_t *ctx)
{
    ngx_int_t                  rc;
    ngx_platform_body_work_t  *bw;

    bw = ctx->body_work;

    if (bw->read_failed) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, bw->read_error,
                      "platform: short read of the request body file");
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (bw->too_complex == NGX_PLATFORM_JSON_TOO_DEEP) {
        return ngx_platform_fail(r, NGX_HTTP_BAD_REQUEST,
                                 "The request body nests too deeply.",
                                 "JSON bodies nest at most 64 levels.");
    }

    if (bw->too_complex == NGX_PLATFORM_JSON_TOO_MANY) {
        return ngx_platform_fail(r, NGX_HTTP_BAD_REQUEST,
                                 "The request body has too many members.",
                                 "JSON bodies hold at most 10000 members "
                                 "(object members and array elements).");
    }

    rc = ngx_platform_check_body(r, ctx, bw->json, &bw->error);

    if (rc != NGX_OK) {
        return rc;
    }

    return ngx_platform_run(r, ctx);
}


static void
ngx_platform_body_cleanup(void *data)
{
    ngx_platform_body_work_t *bw = data;

    if (bw->json) {
        json_decref(bw->json);
    }
}


/*
 * The thread pool of platform_thread_pool, when the module has one, runs
 * work; done follows in the worker. The request is held (counted) and
 * blocked, so that neither a client that goes away nor a worker that
 * exits frees the memory the thread writes.
 */

#if (NGX_THREADS)

/*
 * A worker that shuts down gracefully exits once no timer of its own is
 * left: hold, a timer that is not cancelable, keeps it for the task, so
 * that the request is answered and its connection closed first.
 */
#define NGX_PLATFORM_TASK_HOLD  60000

typedef struct {
    ngx_http_request_t        *request;
    ngx_platform_work_pt       work;
    void                      *data;
    ngx_platform_handler_pt    done;
    ngx_event_t                hold;
} ngx_platform_task_t;


static void
ngx_platform_task_handler(void *data, ngx_log_t *log)
{
    ngx_platform_task_t *t = data;

    t->work(t->data);
}


static void
ngx_platform_task_hold(ngx_event_t *ev)
{
    ngx_add_timer(ev, NGX_PLATFORM_TASK_HOLD);
}


static void
ngx_platform_task_done(ngx_event_t *ev)
{
    ngx_platform_task_t *t = ev->data;

    ngx_int_t            rc;
    ngx_connection_t    *c;
    ngx_http_request_t  *r;

    r = t->request;
    c = r->connection;

    ngx_http_set_log_request(c->log, r);

    if (t->hold.timer_set) {
        ngx_del_timer(&t->hold);
    }

    r->main->blocked--;

    if (c->error) {
        /* the client went away meanwhile: nginx may now free it all */
        ngx_http_finalize_request(r, NGX_HTTP_CLIENT_CLOSED_REQUEST);
        ngx_http_run_posted_requests(c);
        return;
    }

    rc = t->done(r, ngx_platform_get_ctx(r));

    if (rc == NGX_DONE) {
        /* a backend took its own count; the thread's is dropped */
        ngx_http_finalize_request(r, NGX_DONE);

    } else {
        ngx_http_finalize_request(r, ngx_platform_settle(r, rc));
    }

    ngx_http_run_posted_requests(c);
}

#endif


ngx_int_t
ngx_platform_offload(ngx_http_request_t *r, ngx_platform_work_pt work,
    void *data, ngx_platform_handler_pt done)
{
#if (NGX_THREADS)
    ngx_thread_task_t         *task;
    ngx_platform_task_t       *t;
    ngx_platform_main_conf_t  *pmcf;

    pmcf = ngx_http_get_module_main_conf(r, ngx_platform_module);

    if (pmcf->thread_pool) {
        task = ngx_thread_task_alloc(r->pool, sizeof(ngx_platform_task_t));
        if (task == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        t = task->ctx;

        t->request = r;
        t->work = work;
        t->data = data;
        t->done = done;

        task->handler = ngx_platform_task_handler;
        task->event.data = t;
        task->event.handler = ngx_platform_task_done;

        if (ngx_thread_task_post(pmcf->thread_pool, task) != NGX_OK) {
            /* the pool's queue is full: the worker is overloaded */
            return ngx_platform_fail(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                                     "Service temporarily unavailable.",
                                     "The server is busy; retry shortly.");
        }

        t->hold.handler = ngx_platform_task_hold;
        t->hold.data = t;
        t->hold.log = r->connection->log;
        ngx_add_timer(&t->hold, NGX_PLATFORM_TASK_HOLD);

        r->main->blocked++;
        r->main->count++;

        r->read_event_handler = ngx_platform_check_broken_connection;

        return NGX_DONE;
    }
#endif

    work(data);

    return done(r, ngx_platform_get_ctx(r));
}


static ngx_int_t
ngx_platform_run(ngx_http_request_t *r, ngx_platform_ctx_t *ctx)
{
    ngx_int_t  rc;

    if (ctx->endpoint->handler) {
        rc = ctx->endpoint->handler(r, ctx);

    } else {
        rc = ngx_platform_run_sql(r, ctx);
    }

    if (rc == NGX_DONE) {
        /* notice a client that goes away while a backend works */
        r->read_event_handler = ngx_platform_check_broken_connection;
        return NGX_DONE;
    }

    return ngx_platform_settle(r, rc);
}


/* from nginx's upstream: a client that closed while we wait is let go */

static void
ngx_platform_check_broken_connection(ngx_http_request_t *r)
{
    int                n;
    char               buf[1];
    ngx_err_t          err;
    ngx_event_t       *ev;
    ngx_connection_t  *c;

    c = r->connection;
    ev = c->read;

    if (c->error) {
        /* an HTTP/2 stream reset, or an error noticed elsewhere */

        if ((ngx_event_flags & NGX_USE_LEVEL_EVENT) && ev->active) {
            (void) ngx_del_event(ev, NGX_READ_EVENT, 0);
        }

        ngx_log_error(NGX_LOG_INFO, c->log, 0,
                      "client closed the request while waiting for a backend");

        ngx_http_finalize_request(r, NGX_HTTP_CLIENT_CLOSED_REQUEST);
        return;
    }

#if (NGX_HTTP_V2)

    /* the socket is the whole HTTP/2 connection's, not this stream's */

    if (r->stream) {
        return;
    }

#endif

#if (NGX_HAVE_EPOLLRDHUP)

    if ((ngx_event_flags & NGX_USE_EPOLL_EVENT) && ngx_use_epoll_rdhup) {

        if (!ev->pending_eof) {
            return;
        }

        ev->eof = 1;
        c->error = 1;

        ngx_log_error(NGX_LOG_INFO, c->log, 0,
                      "client prematurely closed connection "
                      "while waiting for a backend");

        ngx_http_finalize_request(r, NGX_HTTP_CLIENT_CLOSED_REQUEST);
        return;
    }

#endif

    n = recv(c->fd, buf, 1, MSG_PEEK);

    err = ngx_socket_errno;

    if (n > 0) {
        /* pipelined data: leave it for after the response */

        if ((ngx_event_flags & NGX_USE_LEVEL_EVENT) && ev->active) {
            if (ngx_del_event(ev, NGX_READ_EVENT, 0) != NGX_OK) {
                ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
            }
        }

        return;
    }

    if (n == -1 && err == NGX_EAGAIN) {
        return;
    }

    ev->eof = 1;
    c->error = 1;

    ngx_log_error(NGX_LOG_INFO, c->log, n == 0 ? 0 : err,
                  "client prematurely closed connection "
                  "while waiting for a backend");

    ngx_http_finalize_request(r, NGX_HTTP_CLIENT_CLOSED_REQUEST);
}


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
