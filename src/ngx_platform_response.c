
/*
 * ngx_platform: the response writer. The one envelope writer
 * (decisions.md section 1), the responses of the module with the headers
 * every response carries, and the end of a request: a bare status
 * settled into its family's envelope.
 *
 * Envelopes are written here as compact JSON; the data inside them is
 * JSON text that PostgreSQL built, spliced as it is, never parsed again.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_platform.h"


/* what an answer says, for the envelope writers */
typedef struct {
    ngx_uint_t                 status;
    ngx_str_t                  message;
    ngx_str_t                  detail;
    ngx_str_t                  json;
    ngx_platform_data_t       *data;
} ngx_platform_answer_t;


static u_char *ngx_platform_envelope_a(u_char *p, ngx_platform_answer_t *a);
static u_char *ngx_platform_envelope_sales(u_char *p,
    ngx_platform_answer_t *a);
static u_char *ngx_platform_envelope_b(u_char *p, ngx_platform_answer_t *a);
static ngx_int_t ngx_platform_common_headers(ngx_http_request_t *r);
static ngx_int_t ngx_platform_error_headers(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx, ngx_uint_t status);
static ngx_int_t ngx_platform_retry_after(ngx_http_request_t *r,
    time_t seconds);
static const char *ngx_platform_status_text(ngx_uint_t status);
static u_char *ngx_platform_json_escape(u_char *dst, u_char *src,
    size_t len);


#define ngx_platform_json_literal(p, s)                                    \
    ngx_cpymem(p, s, sizeof(s) - 1)






ngx_int_t
ngx_platform_answer(ngx_http_request_t *r, ngx_uint_t status,
    const char *message, const char *detail, ngx_platform_data_t *data)
{
    u_char                 *body, *p;
    size_t                  size, mlen, dlen;
    ngx_str_t               json;
    ngx_uint_t              ok;
    ngx_platform_ctx_t     *ctx;
    ngx_platform_answer_t   parts;

    ctx = ngx_platform_get_ctx(r);

    if (ctx == NULL) {
        return status;
    }

    ok = (status == NGX_HTTP_OK);

    if (ok) {
        if (message == NULL) {
            message = (ctx->family->envelope == NGX_PLATFORM_ENVELOPE_A)
                      ? "Request processed successfully." : "Success";
        }

        detail = "";

    } else {
        if (message == NULL) {
            message = ngx_platform_status_text(status);
        }

        if (detail == NULL) {
            detail = message;
        }

        if (ngx_platform_error_headers(r, ctx, status) != NGX_OK) {
            return NGX_ERROR;
        }
    }

    if (ctx->family->envelope == NGX_PLATFORM_ENVELOPE_A) {
        message = ngx_platform_text(ctx, message);
        detail = ngx_platform_text(ctx, detail);
    }

    if (data && data->json.len) {
        json = data->json;

    } else {
        ngx_str_null(&json);
    }

    mlen = ngx_strlen(message);
    dlen = ngx_strlen(detail);

    size = sizeof("{\"status\":false,\"statusCode\":000,\"message\":,"
                  "\"data\":{},\"errors\":[{\"message\":,"
                  "\"descriptiveMessage\":}]}")
           + 2 * (6 * mlen + 2) + 6 * dlen + 2 + json.len
           + sizeof(",\"pageNumber\":,\"pageSize\":,\"total\":") + 3 * 20;

    body = ngx_pnalloc(r->pool, size);
    if (body == NULL) {
        return NGX_ERROR;
    }

    parts.status = status;
    parts.message.data = (u_char *) message;
    parts.message.len = ngx_strlen(message);
    parts.detail.data = (u_char *) detail;
    parts.detail.len = ngx_strlen(detail);
    parts.json = json;
    parts.data = data;

    switch (ctx->family->envelope) {

    case NGX_PLATFORM_ENVELOPE_A:
        p = ngx_platform_envelope_a(body, &parts);
        break;

    case NGX_PLATFORM_ENVELOPE_SALES:
        p = ngx_platform_envelope_sales(body, &parts);
        break;

    default: /* NGX_PLATFORM_ENVELOPE_B, also the errors of bare families */
        p = ngx_platform_envelope_b(body, &parts);
        break;
    }

    return ngx_platform_send_raw(r, status, body, p - body);
}


/* {"succeeded", "message", "errors", [page figures,] "data"} */

static u_char *
ngx_platform_envelope_a(u_char *p, ngx_platform_answer_t *a)
{
    ngx_uint_t  ok;

    ok = (a->status == NGX_HTTP_OK);

    p = ok ? ngx_platform_json_literal(p, "{\"succeeded\":true")
           : ngx_platform_json_literal(p, "{\"succeeded\":false");
    p = ngx_platform_json_literal(p, ",\"message\":");
    p = ngx_platform_json_escape(p, a->message.data, a->message.len);
    p = ngx_platform_json_literal(p, ",\"errors\":[");

    if (!ok) {
        p = ngx_platform_json_escape(p, a->detail.data, a->detail.len);
    }

    p = ngx_platform_json_literal(p, "]");

    if (a->data && a->data->paged) {
        p = ngx_sprintf(p, ",\"pageNumber\":%V,\"pageSize\":%V,"
                        "\"total\":%V",
                        &a->data->page_number, &a->data->page_size,
                        &a->data->total);
    }

    p = ngx_platform_json_literal(p, ",\"data\":");
    p = a->json.len ? ngx_cpymem(p, a->json.data, a->json.len)
                    : ngx_platform_json_literal(p, "null");
    *p++ = '}';

    return p;
}


/* a success is the sales document itself; an error {message, errors} */

static u_char *
ngx_platform_envelope_sales(u_char *p, ngx_platform_answer_t *a)
{
    if (a->status == NGX_HTTP_OK) {
        return a->json.len ? ngx_cpymem(p, a->json.data, a->json.len)
                           : ngx_platform_json_literal(p, "{}");
    }

    p = ngx_platform_json_literal(p, "{\"message\":");
    p = ngx_platform_json_escape(p, a->message.data, a->message.len);
    p = ngx_platform_json_literal(p, ",\"data\":null,\"errors\":[");
    p = ngx_platform_json_escape(p, a->detail.data, a->detail.len);
    p = ngx_platform_json_literal(p, "]}");

    return p;
}


/* {"status", "statusCode", "message", "data", "errors"} */

static u_char *
ngx_platform_envelope_b(u_char *p, ngx_platform_answer_t *a)
{
    ngx_uint_t  ok, status;

    status = a->status;
    ok = (status == NGX_HTTP_OK);

    if (ok) {
        p = ngx_platform_json_literal(p,
                "{\"status\":true,\"statusCode\":0,\"message\":");

    } else {
        p = ngx_platform_json_literal(p,
                "{\"status\":false,\"statusCode\":");

        if (status >= 100 && status <= 999) {
            *p++ = (u_char) ('0' + status / 100);
            *p++ = (u_char) ('0' + status / 10 % 10);
            *p++ = (u_char) ('0' + status % 10);

        } else {
            p = ngx_sprintf(p, "%ui", status);
        }

        p = ngx_platform_json_literal(p, ",\"message\":");
    }

    p = ngx_platform_json_escape(p, a->message.data, a->message.len);
    p = ngx_platform_json_literal(p, ",\"data\":");
    p = a->json.len ? ngx_cpymem(p, a->json.data, a->json.len)
                    : ngx_platform_json_literal(p, "{}");

    if (ok) {
        return ngx_platform_json_literal(p, ",\"errors\":[]}");
    }

    p = ngx_platform_json_literal(p, ",\"errors\":[{\"message\":");
    p = ngx_platform_json_escape(p, a->message.data, a->message.len);
    p = ngx_platform_json_literal(p, ",\"descriptiveMessage\":");
    p = ngx_platform_json_escape(p, a->detail.data, a->detail.len);
    p = ngx_platform_json_literal(p, "}]}");

    return p;
}


ngx_int_t
ngx_platform_send_ok(ngx_http_request_t *r, const char *message,
    u_char *data, size_t len)
{
    ngx_platform_data_t  d;

    ngx_memzero(&d, sizeof(ngx_platform_data_t));

    d.json.data = data;
    d.json.len = len;

    return ngx_platform_answer(r, NGX_HTTP_OK, message, NULL, &d);
}


ngx_int_t
ngx_platform_send_error(ngx_http_request_t *r, ngx_uint_t status,
    const char *message, const char *detail)
{
    return ngx_platform_answer(r, status, message, detail, NULL);
}


/* Retry-After of a 503 or 429, WWW-Authenticate of a 401, Allow of a 405 */

void
ngx_platform_finalize(ngx_http_request_t *r, ngx_int_t rc)
{
    ngx_http_finalize_request(r, ngx_platform_settle(r, rc));
}


/*
 * A bare HTTP status that nothing was sent for becomes an error response
 * in the family's envelope, with the message recorded by
 * ngx_platform_fail() when there is one.
 */

ngx_int_t
ngx_platform_settle(ngx_http_request_t *r, ngx_int_t rc)
{
    ngx_platform_ctx_t  *ctx;

    if (rc < NGX_HTTP_SPECIAL_RESPONSE || r->header_sent
        || rc == NGX_HTTP_CLIENT_CLOSED_REQUEST
        || r->connection->error)
    {
        return rc;
    }

    if (rc == NGX_HTTP_INTERNAL_SERVER_ERROR) {
        /*
         * the line carries the request id the client was answered with,
         * and nginx's request line: a 500 is never silent
         */
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "platform: answered 500");
    }

    ctx = ngx_platform_get_ctx(r);

    if (ctx == NULL || ctx->error_status != (ngx_uint_t) rc) {
        return ngx_platform_send_error(r, rc, NULL, NULL);
    }

    return ngx_platform_send_error(r, rc, ctx->error_message,
                                   ctx->error_detail);
}


static ngx_int_t
ngx_platform_error_headers(ngx_http_request_t *r, ngx_platform_ctx_t *ctx,
    ngx_uint_t status)
{
    ngx_str_t  value;

    switch (status) {

    case NGX_HTTP_SERVICE_UNAVAILABLE:
        return ngx_platform_retry_after(r, ctx->retry_after ? ctx->retry_after
                                                            : 1);

    case 429:
        /* a rate limit's wait; code that knows another sends its own */
        if (ctx->retry_after) {
            return ngx_platform_retry_after(r, ctx->retry_after);
        }

        return NGX_OK;

    case NGX_HTTP_UNAUTHORIZED:
        if (ctx->challenge.len) {
            value = ctx->challenge;

        } else {
            ngx_str_set(&value, "Bearer");
        }

        return ngx_platform_add_header(r, "WWW-Authenticate", &value);

    case NGX_HTTP_NOT_ALLOWED:
        if (ctx->allow.len) {
            return ngx_platform_add_header(r, "Allow", &ctx->allow);
        }

        return NGX_OK;

    default:
        return NGX_OK;
    }
}


static ngx_int_t
ngx_platform_retry_after(ngx_http_request_t *r, time_t seconds)
{
    ngx_str_t  value;

    if (seconds == 1) {
        ngx_str_set(&value, "1");
        return ngx_platform_add_header(r, "Retry-After", &value);
    }

    value.data = ngx_pnalloc(r->pool, NGX_TIME_T_LEN);
    if (value.data == NULL) {
        return NGX_ERROR;
    }

    value.len = ngx_sprintf(value.data, "%T", seconds) - value.data;

    return ngx_platform_add_header(r, "Retry-After", &value);
}


ngx_int_t
ngx_platform_send_empty(ngx_http_request_t *r, ngx_uint_t status)
{
    ngx_int_t  rc;

    if (ngx_platform_common_headers(r) != NGX_OK) {
        return NGX_ERROR;
    }

    r->headers_out.status = status;
    r->headers_out.content_length_n = 0;
    r->header_only = 1;

    rc = ngx_http_send_header(r);

    if (rc == NGX_ERROR || rc > NGX_OK) {
        return rc;
    }

    return NGX_OK;
}


ngx_int_t
ngx_platform_send_raw(ngx_http_request_t *r, ngx_uint_t status,
    u_char *body, size_t len)
{
    static ngx_str_t  json = ngx_string("application/json; charset=utf-8");

    return ngx_platform_send_body(r, status, &json, body, len);
}


ngx_int_t
ngx_platform_send_body(ngx_http_request_t *r, ngx_uint_t status,
    ngx_str_t *type, u_char *body, size_t len)
{
    ngx_int_t     rc;
    ngx_buf_t    *b;
    ngx_chain_t   out;

    if (r->header_sent) {
        ngx_log_error(NGX_LOG_ALERT, r->connection->log, 0,
                      "platform: response header already sent");
        return NGX_ERROR;
    }

    if (ngx_platform_common_headers(r) != NGX_OK) {
        return NGX_ERROR;
    }

    r->headers_out.status = status;
    r->headers_out.content_length_n = len;

    /* the type without its parameters, for charset and filters */
    r->headers_out.content_type = *type;
    r->headers_out.content_type_len = 0;
    while (r->headers_out.content_type_len < type->len
           && type->data[r->headers_out.content_type_len] != ';')
    {
        r->headers_out.content_type_len++;
    }
    r->headers_out.content_type_lowcase = NULL;

    rc = ngx_http_send_header(r);

    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    b = ngx_calloc_buf(r->pool);
    if (b == NULL) {
        return NGX_ERROR;
    }

    b->pos = body;
    b->last = body + len;
    b->memory = 1;
    b->last_buf = (r == r->main) ? 1 : 0;
    b->last_in_chain = 1;

    out.buf = b;
    out.next = NULL;

    return ngx_http_output_filter(r, &out);
}


/*
 * Every response of the module: marked answered (the error page filter
 * leaves it alone), with X-Request-Id, traceresponse (W3C Trace Context
 * Level 2: the trace id and this request's span id), for Envelope A
 * Content-Language,
 * and where rate limits were checked their RateLimit-Policy and
 * RateLimit (draft-ietf-httpapi-ratelimit-headers-09)
 */

static ngx_int_t
ngx_platform_common_headers(ngx_http_request_t *r)
{
    ngx_str_t            lang, trace;
    ngx_platform_ctx_t  *ctx;

    ctx = ngx_platform_get_ctx(r);
    if (ctx == NULL) {
        return NGX_OK;
    }

    ctx->answered = 1;

    if (ngx_platform_add_header(r, "X-Request-Id", &ctx->request_id)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (ngx_platform_traceparent(r, ctx, &trace) != NGX_OK
        || ngx_platform_add_header(r, "traceresponse", &trace) != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (ctx->family && ctx->family->envelope == NGX_PLATFORM_ENVELOPE_A) {
        if (ctx->lang == NGX_PLATFORM_LANG_FR) {
            ngx_str_set(&lang, "fr");

        } else {
            ngx_str_set(&lang, "en");
        }

        if (ngx_platform_add_header(r, "Content-Language", &lang) != NGX_OK) {
            return NGX_ERROR;
        }
    }

    if (ctx->rate_policy.len) {
        if (ngx_platform_add_header(r, "RateLimit-Policy", &ctx->rate_policy)
            != NGX_OK
            || ngx_platform_add_header(r, "RateLimit", &ctx->rate_limit)
               != NGX_OK)
        {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


ngx_int_t
ngx_platform_add_header(ngx_http_request_t *r, char *name, ngx_str_t *value)
{
    ngx_table_elt_t  *h;

    h = ngx_list_push(&r->headers_out.headers);
    if (h == NULL) {
        return NGX_ERROR;
    }

    h->hash = 1;
    h->key.data = (u_char *) name;
    h->key.len = ngx_strlen(name);
    h->value = *value;

    return NGX_OK;
}


static const char *
ngx_platform_status_text(ngx_uint_t status)
{
    switch (status) {
    case NGX_HTTP_BAD_REQUEST:
        return "Bad request.";
    case NGX_HTTP_UNAUTHORIZED:
        return "Authentication required.";
    case NGX_HTTP_FORBIDDEN:
        return "Access denied.";
    case NGX_HTTP_NOT_FOUND:
        return "Resource not found.";
    case NGX_HTTP_NOT_ALLOWED:
        return "Method not allowed.";
    case NGX_HTTP_REQUEST_TIME_OUT:
        return "Request timeout.";
    case NGX_HTTP_CONFLICT:
        return "Conflict.";
    case NGX_HTTP_REQUEST_ENTITY_TOO_LARGE:
        return "Request body too large.";
    case NGX_HTTP_UNSUPPORTED_MEDIA_TYPE:
        return "Unsupported media type.";
    case 429:
        return "Too many requests.";
    case NGX_HTTP_BAD_GATEWAY:
        return "Bad gateway.";
    case NGX_HTTP_SERVICE_UNAVAILABLE:
        return "Service temporarily unavailable.";
    case NGX_HTTP_GATEWAY_TIME_OUT:
        return "Gateway timeout.";
    default:
        return "Internal server error.";
    }
}


/* a JSON string literal; dst needs 6 * len + 2 */

static u_char *
ngx_platform_json_escape(u_char *dst, u_char *src, size_t len)
{
    u_char            c, *end;
    static u_char     hex[] = "0123456789abcdef";

    *dst++ = '"';

    for (end = src + len; src < end; src++) {
        c = *src;

        if (c == '"' || c == '\\') {
            *dst++ = '\\';
            *dst++ = c;

        } else if (c < 0x20) {
            *dst++ = '\\';
            *dst++ = 'u';
            *dst++ = '0';
            *dst++ = '0';
            *dst++ = hex[c >> 4];
            *dst++ = hex[c & 0xf];

        } else {
            *dst++ = c;
        }
    }

    *dst++ = '"';

    return dst;
}
