
/*
 * ngx_platform: the $platform_* variables, for access logs, limits and
 * routing. Registered from one table when the configuration begins;
 * each computes its value only when it is read, from the request's
 * context (ngx_platform_request.c). Request core level: it asks the
 * routing for operationIds and the authentication for the credentials
 * of a request its content handler has not reached yet (limit_req).
 *
 * A variable that does not apply (a location that is not the module's,
 * no tenant, no error, no statement) is not found: empty in a log line.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_platform.h"


/* a reason of $platform_error, and the statuses it is the reason of */

#define NGX_PLATFORM_R_ANY     0      /* whoever answered */
#define NGX_PLATFORM_R_MODULE  1      /* the module answered the status */
#define NGX_PLATFORM_R_NGINX   2      /* nginx answered (its error page) */

typedef struct {
    ngx_str_t                  name;
    ngx_uint_t                 status;    /* 0: where the module says so */
    ngx_uint_t                 source;    /* NGX_PLATFORM_R_* */
} ngx_platform_reason_t;


static ngx_platform_ctx_t *ngx_platform_variable_ctx(ngx_http_request_t *r,
    ngx_uint_t create);
static ngx_int_t ngx_platform_variable_value(ngx_http_variable_value_t *v,
    ngx_str_t *value);
static ngx_int_t ngx_platform_variable_request_id(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
static ngx_int_t ngx_platform_variable_trace_id(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
static ngx_int_t ngx_platform_variable_identity(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
static ngx_int_t ngx_platform_variable_family(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
static ngx_int_t ngx_platform_variable_operation(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
static ngx_int_t ngx_platform_variable_error(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
static ngx_uint_t ngx_platform_error_reason(ngx_platform_ctx_t *ctx,
    ngx_uint_t status);
static ngx_int_t ngx_platform_variable_time(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);


/* $platform_tenant and $platform_credential */
#define NGX_PLATFORM_V_TENANT      0
#define NGX_PLATFORM_V_CREDENTIAL  1


static ngx_http_variable_t  ngx_platform_variables[] = {

    { ngx_string("platform_request_id"), NULL,
      ngx_platform_variable_request_id, 0, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("platform_trace_id"), NULL,
      ngx_platform_variable_trace_id, 0, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("platform_tenant"), NULL,
      ngx_platform_variable_identity, NGX_PLATFORM_V_TENANT,
      NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("platform_credential"), NULL,
      ngx_platform_variable_identity, NGX_PLATFORM_V_CREDENTIAL,
      NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("platform_family"), NULL,
      ngx_platform_variable_family, 0, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("platform_operation"), NULL,
      ngx_platform_variable_operation, 0, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("platform_error"), NULL,
      ngx_platform_variable_error, 0, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("platform_pg_time"), NULL,
      ngx_platform_variable_time, NGX_PLATFORM_BACKEND_PG,
      NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("platform_redis_time"), NULL,
      ngx_platform_variable_time, NGX_PLATFORM_BACKEND_REDIS,
      NGX_HTTP_VAR_NOCACHEABLE, 0 },

      ngx_http_null_variable
};


/*
 * The reasons of $platform_error, by NGX_PLATFORM_E_*: stable names, a
 * contract with the operators' dashboards (docs/directives.md, Variables).
 * A reason without a status is set by the code that knows it; any other
 * is the reason of its status when nothing more precise was set.
 */

static ngx_platform_reason_t  ngx_platform_reasons[] = {
    { ngx_null_string, 0, NGX_PLATFORM_R_ANY },
    { ngx_string("bad_request"), 400, NGX_PLATFORM_R_NGINX },
    { ngx_string("validation"), 400, NGX_PLATFORM_R_MODULE },
    { ngx_string("invalid_json"), 0, NGX_PLATFORM_R_ANY },
    { ngx_string("body_too_complex"), 0, NGX_PLATFORM_R_ANY },
    { ngx_string("unauthorized"), 401, NGX_PLATFORM_R_ANY },
    { ngx_string("forbidden"), 403, NGX_PLATFORM_R_ANY },
    { ngx_string("not_found"), 404, NGX_PLATFORM_R_ANY },
    { ngx_string("method_not_allowed"), 405, NGX_PLATFORM_R_ANY },
    { ngx_string("client_timeout"), 408, NGX_PLATFORM_R_ANY },
    { ngx_string("conflict"), 409, NGX_PLATFORM_R_ANY },
    { ngx_string("body_too_large"), 413, NGX_PLATFORM_R_ANY },
    { ngx_string("unsupported_media_type"), 415, NGX_PLATFORM_R_ANY },
    { ngx_string("rate_limited"), 429, NGX_PLATFORM_R_ANY },
    { ngx_string("over_share"), 0, NGX_PLATFORM_R_ANY },
    { ngx_string("client_closed"), 499, NGX_PLATFORM_R_ANY },
    { ngx_string("internal"), 500, NGX_PLATFORM_R_ANY },
    { ngx_string("upstream_error"), 502, NGX_PLATFORM_R_ANY },
    { ngx_string("backend_unavailable"), 503, NGX_PLATFORM_R_MODULE },
    { ngx_string("backend_timeout"), 0, NGX_PLATFORM_R_ANY },
    { ngx_string("lock_timeout"), 0, NGX_PLATFORM_R_ANY },
    { ngx_string("overloaded"), 0, NGX_PLATFORM_R_ANY },
    { ngx_string("upstream_timeout"), 504, NGX_PLATFORM_R_ANY },
    { ngx_string("client_error"), 0, NGX_PLATFORM_R_ANY },
    { ngx_string("server_error"), 0, NGX_PLATFORM_R_ANY },
    { ngx_string("service_unavailable"), 503, NGX_PLATFORM_R_NGINX }
};


ngx_int_t
ngx_platform_variables_add(ngx_conf_t *cf)
{
    ngx_http_variable_t  *var, *v;

    for (v = ngx_platform_variables; v->name.len; v++) {
        var = ngx_http_add_variable(cf, &v->name, v->flags);
        if (var == NULL) {
            return NGX_ERROR;
        }

        var->get_handler = v->get_handler;
        var->data = v->data;
    }

    return NGX_OK;
}


/*
 * The context of the request (a subrequest's is its main request's);
 * with create, made in a location of the module that the content
 * handler has not reached yet, which then takes it over, so that the
 * request keeps one request id and one trace
 */

static ngx_platform_ctx_t *
ngx_platform_variable_ctx(ngx_http_request_t *r, ngx_uint_t create)
{
    ngx_platform_ctx_t       *ctx;
    ngx_platform_loc_conf_t  *plcf;

    ctx = ngx_http_get_module_ctx(r->main, ngx_platform_module);

    if (ctx || !create) {
        return ctx;
    }

    plcf = ngx_http_get_module_loc_conf(r->main, ngx_platform_module);

    if (plcf == NULL || plcf->family == NULL) {
        return NULL;
    }

    return ngx_platform_create_ctx(r->main, plcf->family);
}


static ngx_int_t
ngx_platform_variable_value(ngx_http_variable_value_t *v, ngx_str_t *value)
{
    if (value == NULL || value->len == 0) {
        v->not_found = 1;
        return NGX_OK;
    }

    v->data = value->data;
    v->len = value->len;
    v->valid = 1;
    v->no_cacheable = 0;
    v->not_found = 0;

    return NGX_OK;
}


static ngx_int_t
ngx_platform_variable_request_id(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data)
{
    ngx_platform_ctx_t  *ctx;

    ctx = ngx_platform_variable_ctx(r, 1);

    return ngx_platform_variable_value(v, ctx ? &ctx->request_id : NULL);
}


static ngx_int_t
ngx_platform_variable_trace_id(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data)
{
    ngx_str_t            id;
    ngx_platform_ctx_t  *ctx;

    ctx = ngx_platform_variable_ctx(r, 1);

    if (ctx == NULL) {
        v->not_found = 1;
        return NGX_OK;
    }

    id.data = ctx->trace_id;
    id.len = NGX_PLATFORM_TRACE_ID_LEN;

    return ngx_platform_variable_value(v, &id);
}


/*
 * The tenant, and the credential (the API key's id, else the token's
 * sub) of the request: once the content handler has routed it, who its
 * authentication established (nobody before that, or when it refused);
 * before, who its credentials name as far as that is known without
 * waiting (ngx_platform_auth_peek())
 */

static ngx_int_t
ngx_platform_variable_identity(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data)
{
    ngx_platform_ctx_t       *ctx;
    ngx_platform_identity_t   peeked, *id;

    ctx = ngx_platform_variable_ctx(r, 0);

    if (ctx && ctx->endpoint) {
        id = &ctx->identity;

    } else {
        if (ngx_platform_auth_peek(r->main, &peeked) != NGX_OK) {
            return NGX_ERROR;
        }

        id = &peeked;
    }

    if (data == NGX_PLATFORM_V_TENANT) {
        return ngx_platform_variable_value(v, &id->tenant);
    }

    return ngx_platform_variable_value(v, id->key_id.len ? &id->key_id
                                                         : &id->subject);
}


static ngx_int_t
ngx_platform_variable_family(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data)
{
    ngx_platform_ctx_t       *ctx;
    ngx_platform_family_t    *family;
    ngx_platform_loc_conf_t  *plcf;

    ctx = ngx_platform_variable_ctx(r, 0);

    if (ctx) {
        family = ctx->family;

    } else {
        plcf = ngx_http_get_module_loc_conf(r->main, ngx_platform_module);
        family = plcf ? plcf->family : NULL;
    }

    return ngx_platform_variable_value(v, family ? &family->name : NULL);
}


/* the OpenAPI operationId of the endpoint routed to; a HEAD's its own */

static ngx_int_t
ngx_platform_variable_operation(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data)
{
    ngx_uint_t           head;
    ngx_platform_ctx_t  *ctx;

    ctx = ngx_platform_variable_ctx(r, 0);

    if (ctx == NULL || ctx->endpoint == NULL) {
        v->not_found = 1;
        return NGX_OK;
    }

    head = (r->main->method == NGX_HTTP_HEAD
            && ctx->endpoint->method == NGX_HTTP_GET);

    return ngx_platform_variable_value(v,
                              ngx_platform_operation_id(ctx->endpoint, head));
}


/* the reason of an error response (a status of 400 or more) */

static ngx_int_t
ngx_platform_variable_error(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data)
{
    ngx_uint_t                status;
    ngx_platform_ctx_t       *ctx;
    ngx_platform_loc_conf_t  *plcf;

    r = r->main;

    ctx = ngx_platform_variable_ctx(r, 0);

    if (ctx == NULL) {
        plcf = ngx_http_get_module_loc_conf(r, ngx_platform_module);

        if (plcf == NULL || plcf->family == NULL) {
            v->not_found = 1;
            return NGX_OK;
        }
    }

    /* as $status has it */

    status = r->err_status ? r->err_status : r->headers_out.status;

    if (status < NGX_HTTP_BAD_REQUEST) {
        v->not_found = 1;
        return NGX_OK;
    }

    return ngx_platform_variable_value(v,
                    &ngx_platform_reasons[ngx_platform_error_reason(ctx,
                                                                status)].name);
}


static ngx_uint_t
ngx_platform_error_reason(ngx_platform_ctx_t *ctx, ngx_uint_t status)
{
    ngx_uint_t  i, source;

    /* the module said why */

    if (ctx && ctx->error_reason && ctx->error_status == status) {
        return ctx->error_reason;
    }

    /* else the status tells, as the module or nginx answered it */

    source = (ctx && ctx->answered && !ctx->replace)
             ? NGX_PLATFORM_R_MODULE : NGX_PLATFORM_R_NGINX;

    for (i = 1; i < sizeof(ngx_platform_reasons)
                    / sizeof(ngx_platform_reason_t); i++)
    {
        if (ngx_platform_reasons[i].status == status
            && (ngx_platform_reasons[i].source == NGX_PLATFORM_R_ANY
                || ngx_platform_reasons[i].source == source))
        {
            return i;
        }
    }

    return (status < NGX_HTTP_INTERNAL_SERVER_ERROR)
           ? NGX_PLATFORM_E_CLIENT_ERROR : NGX_PLATFORM_E_SERVER_ERROR;
}


/* milliseconds waited on a backend, to the microsecond: "12.345" */

static ngx_int_t
ngx_platform_variable_time(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data)
{
    u_char              *p;
    uint64_t             ns, us;
    ngx_uint_t           waits;
    ngx_platform_ctx_t  *ctx;

    ctx = ngx_platform_variable_ctx(r, 0);

    if (ctx == NULL) {
        v->not_found = 1;
        return NGX_OK;
    }

    if (data == NGX_PLATFORM_BACKEND_PG) {
        ns = ctx->pg_time;
        waits = ctx->pg_waits;

    } else {
        ns = ctx->redis_time;
        waits = ctx->redis_waits;
    }

    if (waits == 0) {
        v->not_found = 1;
        return NGX_OK;
    }

    p = ngx_pnalloc(r->pool, NGX_INT64_LEN + sizeof(".000") - 1);
    if (p == NULL) {
        return NGX_ERROR;
    }

    us = (ns + 500) / 1000;

    v->data = p;
    v->len = ngx_sprintf(p, "%uL.%03uL", us / 1000, us % 1000) - p;
    v->valid = 1;
    v->no_cacheable = 0;
    v->not_found = 0;

    return NGX_OK;
}
