
/*
 * ngx_platform: request entry shared by every endpoint family: request id,
 * language, routing, method and version checks, body reading, and the
 * completion of requests that waited on a backend.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_platform.h"
#include "ngx_platform_document.h"


#define NGX_PLATFORM_REQUEST_ID_MAX  64


static ngx_platform_ctx_t *ngx_platform_create_ctx(ngx_http_request_t *r,
    ngx_platform_loc_conf_t *plcf);
static void ngx_platform_request_id(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);
static u_char *ngx_platform_log_error(ngx_http_request_t *r,
    ngx_http_request_t *sr, u_char *buf, size_t len);
static ngx_uint_t ngx_platform_lang(ngx_http_request_t *r);
static ngx_int_t ngx_platform_route(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);
static ngx_int_t ngx_platform_match(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx, char *pattern, ngx_uint_t *bad_version);
static ngx_int_t ngx_platform_add_allow(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx, ngx_uint_t method);
static ngx_int_t ngx_platform_check_content_type(ngx_http_request_t *r);
static void ngx_platform_body_handler(ngx_http_request_t *r);
static ngx_int_t ngx_platform_collect_body(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);
static ngx_int_t ngx_platform_refuse(ngx_http_request_t *r, ngx_int_t rc);
static ngx_int_t ngx_platform_proceed(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);
static ngx_int_t ngx_platform_run(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);
static ngx_int_t ngx_platform_settle(ngx_http_request_t *r, ngx_int_t rc);
static void ngx_platform_check_broken_connection(ngx_http_request_t *r);


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

    ctx = ngx_platform_create_ctx(r, plcf);
    if (ctx == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    rc = ngx_platform_route(r, ctx);

    if (rc == NGX_OK) {
        rc = ngx_platform_authenticate(r, ctx);
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


void
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


/* an authenticated request: its body, if any, then its route */

static ngx_int_t
ngx_platform_proceed(ngx_http_request_t *r, ngx_platform_ctx_t *ctx)
{
    ngx_int_t  rc;

    if (!(r->method & (NGX_HTTP_POST|NGX_HTTP_PUT|NGX_HTTP_PATCH))) {
        rc = ngx_http_discard_request_body(r);
        if (rc != NGX_OK) {
            return rc;
        }

        return ngx_platform_run(r, ctx);
    }

    rc = ngx_platform_check_content_type(r);
    if (rc != NGX_OK) {
        return ngx_platform_refuse(r, rc);
    }

    rc = ngx_http_read_client_request_body(r, ngx_platform_body_handler);

    if (rc >= NGX_HTTP_SPECIAL_RESPONSE) {
        return rc;
    }

    return NGX_DONE;
}


ngx_platform_ctx_t *
ngx_platform_get_ctx(ngx_http_request_t *r)
{
    return ngx_http_get_module_ctx(r, ngx_platform_module);
}


static ngx_platform_ctx_t *
ngx_platform_create_ctx(ngx_http_request_t *r, ngx_platform_loc_conf_t *plcf)
{
    ngx_platform_ctx_t  *ctx;

    ctx = ngx_pcalloc(r->pool, sizeof(ngx_platform_ctx_t));
    if (ctx == NULL) {
        return NULL;
    }

    ctx->family = plcf->family;
    ctx->lang = ngx_platform_lang(r);

    ngx_http_set_ctx(r, ctx, ngx_platform_module);

    ngx_platform_request_id(r, ctx);

    ctx->log_handler = r->log_handler;
    r->log_handler = ngx_platform_log_error;

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
    uint32_t          rnd;
    ngx_uint_t        n;
    ngx_table_elt_t  *h;

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

    for (n = 0; n < 4; n++) {
        rnd = (uint32_t) ngx_random();
        rnd ^= (uint32_t) (r->connection->number << 16) ^ (uint32_t) n;
        p = ngx_sprintf(p, "%08xD", rnd);
    }
}


/* error log lines of a request name its request id */

static u_char *
ngx_platform_log_error(ngx_http_request_t *r, ngx_http_request_t *sr,
    u_char *buf, size_t len)
{
    u_char              *p;
    ngx_platform_ctx_t  *ctx;

    ctx = ngx_http_get_module_ctx(r, ngx_platform_module);

    p = buf;

    if (ctx == NULL) {
        return p;
    }

    if (ctx->log_handler) {
        p = ctx->log_handler(r, sr, p, len);
        len -= p - buf;
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


/*
 * Finds the route of the request: 404 for an unknown path or version, 405
 * (with Allow) for a known path with another method.
 */

static ngx_int_t
ngx_platform_route(ngx_http_request_t *r, ngx_platform_ctx_t *ctx)
{
    u_char                *detail;
    ngx_uint_t             method, bad_version, path_known;
    ngx_platform_route_t  *route;

    method = r->method;
    if (method == NGX_HTTP_HEAD) {
        method = NGX_HTTP_GET;
    }

    path_known = 0;
    bad_version = 0;

    for (route = ctx->family->routes; route->pattern; route++) {

        if (ngx_platform_match(r, ctx, route->pattern, &bad_version)
            != NGX_OK)
        {
            continue;
        }

        if (route->method == method) {

            if (bad_version) {
                return ngx_platform_fail(r, NGX_HTTP_NOT_FOUND,
                                         "API version not supported.",
                                         "Supported versions: 1, 1.0.");
            }

            ctx->route = route;
            return NGX_OK;
        }

        path_known = 1;

        if (ngx_platform_add_allow(r, ctx, route->method) != NGX_OK) {
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
    char *pattern, ngx_uint_t *bad_version)
{
    u_char      *u, *end, *seg;
    size_t       len;
    ngx_str_t    value;
    ngx_uint_t   nparams, version_ok;

    u = r->uri.data;
    end = r->uri.data + r->uri.len;

    nparams = 0;
    version_ok = 1;

    if (pattern[0] == '*' && pattern[1] == '\0') {
        ctx->nparams = 0;
        *bad_version = 0;
        return NGX_OK;
    }

    while (*pattern) {

        if (*pattern != '/' || u == end || *u != '/') {
            return NGX_DECLINED;
        }

        pattern++;
        u++;

        seg = u;
        while (u < end && *u != '/') {
            u++;
        }

        value.data = seg;
        value.len = u - seg;

        len = 0;
        while (pattern[len] && pattern[len] != '/') {
            len++;
        }

        if (len == 2 && pattern[0] == '{' && pattern[1] == '}') {

            if (value.len == 0 || nparams == NGX_PLATFORM_MAX_PARAMS) {
                return NGX_DECLINED;
            }

            ctx->params[nparams++] = value;

        } else if (len == 3 && ngx_strncmp(pattern, "v{}", 3) == 0) {

            if (value.len < 2 || value.data[0] != 'v') {
                return NGX_DECLINED;
            }

            value.data++;
            value.len--;

            if (!((value.len == 1 && value.data[0] == '1')
                  || (value.len == 3
                      && ngx_strncmp(value.data, "1.0", 3) == 0)))
            {
                version_ok = 0;
            }

        } else if (value.len != len
                   || ngx_strncmp(value.data, pattern, len) != 0)
        {
            return NGX_DECLINED;
        }

        pattern += len;
    }

    /* a single trailing slash is tolerated */

    if (u != end && !(u + 1 == end && *u == '/')) {
        return NGX_DECLINED;
    }

    ctx->nparams = nparams;
    *bad_version = !version_ok;

    return NGX_OK;
}


static ngx_int_t
ngx_platform_add_allow(ngx_http_request_t *r, ngx_platform_ctx_t *ctx,
    ngx_uint_t method)
{
    u_char     *p;
    ngx_str_t   name;

    switch (method) {
    case NGX_HTTP_GET:
        ngx_str_set(&name, "GET, HEAD");
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
    ngx_int_t            rc;
    ngx_platform_ctx_t  *ctx;

    ctx = ngx_platform_get_ctx(r);

    rc = ngx_platform_collect_body(r, ctx);
    if (rc == NGX_OK) {
        rc = ngx_platform_run(r, ctx);
    }

    if (rc == NGX_DONE) {
        /* the backend took its own count; drop the body reader's */
        ngx_http_finalize_request(r, NGX_DONE);
        return;
    }

    ngx_http_finalize_request(r, ngx_platform_settle(r, rc));
}


/* the whole body in one NUL-ended buffer, also when it went to a file */

static ngx_int_t
ngx_platform_collect_body(ngx_http_request_t *r, ngx_platform_ctx_t *ctx)
{
    off_t         len;
    u_char       *p;
    ssize_t       n;
    ngx_buf_t    *b;
    ngx_chain_t  *cl;

    if (r->request_body == NULL || r->request_body->bufs == NULL) {
        ctx->body = (u_char *) "";
        ctx->body_len = 0;
        return NGX_OK;
    }

    len = 0;

    for (cl = r->request_body->bufs; cl; cl = cl->next) {
        b = cl->buf;
        len += b->in_file ? b->file_last - b->file_pos : b->last - b->pos;
    }

    p = ngx_pnalloc(r->pool, len + 1);
    if (p == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ctx->body = p;
    ctx->body_len = len;

    for (cl = r->request_body->bufs; cl; cl = cl->next) {
        b = cl->buf;

        if (!b->in_file) {
            p = ngx_cpymem(p, b->pos, b->last - b->pos);
            continue;
        }

        n = ngx_read_file(b->file, p, b->file_last - b->file_pos,
                          b->file_pos);

        if (n != b->file_last - b->file_pos) {
            ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                          "platform: short read of the request body file");
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        p += n;
    }

    *p = '\0';

    return NGX_OK;
}


static ngx_int_t
ngx_platform_run(ngx_http_request_t *r, ngx_platform_ctx_t *ctx)
{
    ngx_int_t  rc;

    rc = ctx->route->handler(r, ctx);

    if (rc == NGX_DONE) {
        /* notice a client that goes away while a backend works */
        r->read_event_handler = ngx_platform_check_broken_connection;
        return NGX_DONE;
    }

    return ngx_platform_settle(r, rc);
}


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

static ngx_int_t
ngx_platform_settle(ngx_http_request_t *r, ngx_int_t rc)
{
    ngx_platform_ctx_t  *ctx;

    if (rc < NGX_HTTP_SPECIAL_RESPONSE || r->header_sent
        || rc == NGX_HTTP_CLIENT_CLOSED_REQUEST
        || r->connection->error)
    {
        return rc;
    }

    ctx = ngx_platform_get_ctx(r);

    if (ctx == NULL || ctx->error_status != (ngx_uint_t) rc) {
        return ngx_platform_send_error(r, rc, NULL, NULL);
    }

    return ngx_platform_send_error(r, rc, ctx->error_message,
                                   ctx->error_detail);
}


ngx_int_t
ngx_platform_fail(ngx_http_request_t *r, ngx_uint_t status,
    const char *message, const char *detail)
{
    ngx_platform_ctx_t  *ctx;

    ctx = ngx_platform_get_ctx(r);

    if (ctx) {
        ctx->error_status = status;
        ctx->error_message = message;
        ctx->error_detail = detail;
    }

    return status;
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


ngx_int_t
ngx_platform_parse_body(ngx_http_request_t *r, ngx_platform_ctx_t *ctx,
    json_t **object)
{
    u_char        *p;
    json_t        *json;
    json_error_t   error;

    json = json_loadb((char *) ctx->body, ctx->body_len, JSON_REJECT_DUPLICATES,
                      &error);

    if (json == NULL) {
        p = ngx_pnalloc(r->pool, JSON_ERROR_TEXT_LENGTH + 64);
        if (p == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        ngx_sprintf(p, "Malformed JSON at line %d, column %d: %s%Z",
                    error.line, error.column, error.text);

        return ngx_platform_fail(r, NGX_HTTP_BAD_REQUEST,
                                 "The request body is not valid JSON.",
                                 (char *) p);
    }

    if (!json_is_object(json)) {
        json_decref(json);
        return ngx_platform_fail(r, NGX_HTTP_BAD_REQUEST,
                                 "The request body must be a JSON object.",
                                 "Expected a JSON object.");
    }

    *object = json;

    return NGX_OK;
}


ngx_table_elt_t *
ngx_platform_header(ngx_http_request_t *r, char *name)
{
    size_t            len;
    ngx_uint_t        i;
    ngx_list_part_t  *part;
    ngx_table_elt_t  *h;

    len = ngx_strlen(name);

    part = &r->headers_in.headers.part;
    h = part->elts;

    for (i = 0; /* void */ ; i++) {

        if (i >= part->nelts) {
            if (part->next == NULL) {
                return NULL;
            }

            part = part->next;
            h = part->elts;
            i = 0;
        }

        if (h[i].hash == 0 || h[i].key.len != len) {
            continue;
        }

        if (ngx_strncasecmp(h[i].key.data, (u_char *) name, len) == 0) {
            return &h[i];
        }
    }
}


/*
 * A required tenancy header: present, 1 to 128 printable characters, no
 * colon.
 * Returns NGX_OK with the value, else 400 naming the header.
 */

ngx_int_t
ngx_platform_require_header(ngx_http_request_t *r, char *name,
    ngx_str_t *value)
{
    u_char           *p;
    char             *problem;
    size_t            i;
    ngx_table_elt_t  *h;

    h = ngx_platform_header(r, name);

    if (h == NULL || h->value.len == 0) {
        problem = "required";

    } else {
        /* ':' separates the parts of Redis keys built from these */

        for (i = 0; i < h->value.len; i++) {
            if (h->value.data[i] < 0x21 || h->value.data[i] > 0x7e
                || h->value.data[i] == ':')
            {
                break;
            }
        }

        if (h->value.len <= 128 && i == h->value.len) {
            *value = h->value;
            return NGX_OK;
        }

        problem = "invalid";
    }

    p = ngx_pnalloc(r->pool, ngx_strlen(name)
                             + sizeof(" header is required."));
    if (p == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ngx_sprintf(p, "%s header is %s.%Z", name, problem);

    return ngx_platform_fail(r, NGX_HTTP_BAD_REQUEST, (char *) p, (char *) p);
}


/* canonical 8-4-4-4-12 hex */

ngx_int_t
ngx_platform_is_uuid(ngx_str_t *s)
{
    u_char      c;
    ngx_uint_t  i;

    if (s->len != 36) {
        return 0;
    }

    for (i = 0; i < 36; i++) {
        c = s->data[i];

        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (c != '-') {
                return 0;
            }

            continue;
        }

        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')
              || (c >= 'A' && c <= 'F')))
        {
            return 0;
        }
    }

    return 1;
}


ngx_str_t *
ngx_platform_client_addr(ngx_http_request_t *r)
{
    return &r->connection->addr_text;
}


/* a document read: the request and what to answer, for the handler */

typedef struct {
    ngx_http_request_t           *request;
    ngx_platform_pg_document_t   *doc;
} ngx_platform_document_ctx_t;


static void ngx_platform_pg_document_done(void *data,
    ngx_platform_pg_op_t *op, PGresult *res, ngx_int_t rc);


ngx_int_t
ngx_platform_pg_document(ngx_http_request_t *r,
    ngx_platform_pg_document_t *doc, ngx_str_t *params)
{
    ngx_int_t                     rc;
    ngx_platform_document_ctx_t  *dc;

    dc = ngx_palloc(r->pool, sizeof(ngx_platform_document_ctx_t));
    if (dc == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    dc->request = r;
    dc->doc = doc;

    rc = ngx_platform_pg_query(r->pool, r->connection->log, &doc->stmt,
                               params, ngx_platform_pg_document_done, dc);

    if (rc != NGX_DONE) {
        return ngx_platform_send_backend_error(r, rc);
    }

    r->main->count++;

    return NGX_DONE;
}


static void
ngx_platform_pg_document_done(void *data, ngx_platform_pg_op_t *op,
    PGresult *res, ngx_int_t rc)
{
    ngx_platform_document_ctx_t *dc = data;

    ngx_http_request_t          *r;
    ngx_platform_pg_document_t  *doc;

    r = dc->request;
    doc = dc->doc;

    if (rc != NGX_OK) {
        ngx_platform_finalize(r, ngx_platform_send_backend_error(r, rc));
        return;
    }

    if (PQntuples(res) == 0) {
        ngx_platform_finalize(r, ngx_platform_fail(r, NGX_HTTP_NOT_FOUND,
                                                   doc->missing,
                                                   doc->missing_detail));
        return;
    }

    /* send_ok_raw() copies the document out of the result */

    ngx_platform_finalize(r, ngx_platform_send_ok_raw(r, doc->found,
                                  (u_char *) PQgetvalue(res, 0, 0),
                                  PQgetlength(res, 0, 0)));
}
