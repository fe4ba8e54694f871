
/*
 * ngx_platform: routing. A family's endpoint patterns are compiled when
 * the configuration loads; a request's path is matched against them:
 * 404 for an unknown path or API version, 405 with Allow for a known
 * path asked with another method. Each endpoint's operationId is made
 * here from its method and pattern, once, for the OpenAPI document and
 * $platform_operation alike.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_platform.h"


/* an endpoint's operationIds: of its method, and of the GET's HEAD */

typedef struct {
    ngx_platform_endpoint_t   *endpoint;
    ngx_str_t                  id[2];
} ngx_platform_operation_t;


static ngx_int_t ngx_platform_compile_route(ngx_conf_t *cf,
    ngx_platform_family_t *family, ngx_platform_endpoint_t *ep,
    ngx_platform_route_t *route);
static ngx_int_t ngx_platform_match(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx, ngx_platform_route_t *route,
    ngx_uint_t *bad_version);
static ngx_int_t ngx_platform_add_allow(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx, ngx_platform_endpoint_t *ep);
static ngx_int_t ngx_platform_operation_name(ngx_log_t *log,
    ngx_platform_operation_t *ops, ngx_uint_t n, const char *method,
    ngx_str_t *name);


#define ngx_platform_route_alnum(c)                                          \
    (((c) >= '0' && (c) <= '9') || ((c) >= 'a' && (c) <= 'z')                \
     || ((c) >= 'A' && (c) <= 'Z'))


/*
 * Every endpoint of the registry, made once per process: the tables are
 * the binary's, the same for every configuration
 */
static ngx_platform_operation_t  *ngx_platform_operations;
static ngx_uint_t                 ngx_platform_noperations;


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

ngx_int_t
ngx_platform_route(ngx_http_request_t *r, ngx_platform_ctx_t *ctx,
    ngx_array_t *routes)
{
    char                     *detail;
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
        detail = ngx_platform_text_format(r,
                     ngx_platform_text(ctx, "This endpoint accepts %s."),
                     &ctx->allow, 1);
        if (detail == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        return ngx_platform_fail(r, NGX_HTTP_NOT_ALLOWED,
                                 "Method not allowed.", detail);
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


/*
 * "getApiPersonAccountsGet": the method and the literal segments, in the
 * order of the registry and of each family's table; a name met again
 * gets a number ("postX2"). A GET that a HEAD may ask has the HEAD's
 * too ("headX"), right after it.
 */

ngx_int_t
ngx_platform_operation_ids_init(ngx_log_t *log)
{
    ngx_uint_t                 f, n;
    const char                *method;
    ngx_platform_endpoint_t   *ep;
    ngx_platform_operation_t  *ops;

    if (ngx_platform_operations) {
        return NGX_OK;
    }

    n = 0;

    for (f = 0; ngx_platform_families[f]; f++) {
        for (ep = ngx_platform_families[f]->endpoints; ep->pattern; ep++) {
            n++;
        }
    }

    ops = ngx_calloc(n * sizeof(ngx_platform_operation_t), log);
    if (ops == NULL) {
        return NGX_ERROR;
    }

    n = 0;

    for (f = 0; ngx_platform_families[f]; f++) {
        for (ep = ngx_platform_families[f]->endpoints; ep->pattern; ep++) {

            /* operator families answer every path of their location */
            if (ep->pattern[0] == '*') {
                continue;
            }

            method = ngx_platform_method_name(ep->method);
            if (method == NULL) {
                continue;
            }

            ops[n].endpoint = ep;

            if (ngx_platform_operation_name(log, ops, n, method,
                                            &ops[n].id[0])
                != NGX_OK)
            {
                return NGX_ERROR;
            }

            if (ep->method == NGX_HTTP_GET
                && !(ep->inputs & NGX_PLATFORM_IN_NO_HEAD)
                && ngx_platform_operation_name(log, ops, n, "head",
                                               &ops[n].id[1])
                   != NGX_OK)
            {
                return NGX_ERROR;
            }

            n++;
        }
    }

    ngx_platform_operations = ops;
    ngx_platform_noperations = n;

    return NGX_OK;
}


const char *
ngx_platform_method_name(ngx_uint_t method)
{
    switch (method) {
    case NGX_HTTP_GET:
        return "get";
    case NGX_HTTP_POST:
        return "post";
    case NGX_HTTP_PUT:
        return "put";
    case NGX_HTTP_PATCH:
        return "patch";
    case NGX_HTTP_DELETE:
        return "delete";
    default:
        return NULL;
    }
}


/* a name of ops[n]'s endpoint, unique among the names of ops[0...n] */

static ngx_int_t
ngx_platform_operation_name(ngx_log_t *log, ngx_platform_operation_t *ops,
    ngx_uint_t n, const char *method, ngx_str_t *name)
{
    u_char      *p, *q, *last;
    u_char       id[256];
    size_t       len;
    ngx_str_t   *other;
    ngx_uint_t   i, k, upper, skip, taken;

    q = ngx_cpystrn(id, (u_char *) method, sizeof(id));
    last = id + sizeof(id) - 8;

    upper = 1;
    skip = 0;

    for (p = (u_char *) ops[n].endpoint->pattern; *p && q < last; p++) {

        if (*p == '{') {
            skip = 1;
            continue;
        }

        if (*p == '}') {
            skip = 0;
            upper = 1;
            continue;
        }

        if (skip || (*p == 'v' && p[1] == '{')) {
            continue;
        }

        if (!ngx_platform_route_alnum(*p)) {
            upper = 1;
            continue;
        }

        *q++ = upper ? ngx_toupper(*p) : *p;
        upper = 0;
    }

    len = q - id;

    for (k = 2; /* void */ ; k++) {
        taken = 0;

        for (i = 0; i < (n + 1) * 2 && !taken; i++) {
            other = &ops[i / 2].id[i % 2];

            taken = (other->len == len
                     && ngx_strncmp(other->data, id, len) == 0);
        }

        if (!taken) {
            break;
        }

        len = ngx_sprintf(q, "%ui", k) - id;
    }

    name->data = ngx_alloc(len, log);
    if (name->data == NULL) {
        return NGX_ERROR;
    }

    ngx_memcpy(name->data, id, len);
    name->len = len;

    return NGX_OK;
}


ngx_str_t *
ngx_platform_operation_id(ngx_platform_endpoint_t *ep, ngx_uint_t head)
{
    ngx_str_t   *id;
    ngx_uint_t   i;

    for (i = 0; i < ngx_platform_noperations; i++) {
        if (ngx_platform_operations[i].endpoint == ep) {
            id = &ngx_platform_operations[i].id[head ? 1 : 0];
            return id->len ? id : NULL;
        }
    }

    return NULL;
}
