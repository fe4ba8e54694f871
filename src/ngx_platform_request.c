
/*
 * ngx_platform: the floor under every layer. What a request carries (its
 * context with its request id, trace context and language, its recorded
 * error, its waits on the backends), a client that leaves while the
 * request waits, and the checks of request text that any layer may use:
 * headers, names, uuids, UTF-8. It uses no other file of the module.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <openssl/rand.h>

#include "ngx_platform.h"


#define NGX_PLATFORM_REQUEST_ID_MAX  64

/* random bytes drawn at a time for trace and span ids: 42 requests' */
#define NGX_PLATFORM_RANDOM_AHEAD    1024


static void ngx_platform_request_id(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);
static void ngx_platform_trace(ngx_http_request_t *r, ngx_platform_ctx_t *ctx);
static ngx_uint_t ngx_platform_traceparent_valid(ngx_str_t *value);
static ngx_uint_t ngx_platform_hex_id(u_char *p, size_t len);
static void ngx_platform_random_id(u_char *p, size_t len);
static ngx_int_t ngx_platform_random_bytes(u_char *p, size_t n);
static ngx_uint_t ngx_platform_headers(ngx_http_request_t *r, char *name,
    ngx_str_t *value);
static void ngx_platform_xorshift_hex(u_char *p, size_t len);
static u_char *ngx_platform_log_error(ngx_http_request_t *r,
    ngx_http_request_t *sr, u_char *buf, size_t len);
static ngx_uint_t ngx_platform_lang(ngx_http_request_t *r);
static ngx_int_t ngx_platform_lang_range(u_char **pos, u_char *end,
    ngx_str_t *range);
static ngx_int_t ngx_platform_lang_weight(u_char **pos, u_char *end);
static ngx_uint_t ngx_platform_lang_is(ngx_str_t *range, const char *lang);


/* nginx's own log handler of requests, the same for all of them */
static ngx_http_log_handler_pt  ngx_platform_http_log_handler;

/* the state of the request ids' generator, and whose it is */
static uint64_t                 ngx_platform_rid[2];
static ngx_pid_t                ngx_platform_rid_pid;

/* OpenSSL's random bytes not used yet, and whose they are */
static u_char                   ngx_platform_random[NGX_PLATFORM_RANDOM_AHEAD];
static size_t                   ngx_platform_random_left;
static ngx_pid_t                ngx_platform_random_pid;


ngx_platform_ctx_t *
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
    ngx_platform_trace(r, ctx);

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

    ngx_platform_xorshift_hex(p, 32);
}


/*
 * len hex digits (a multiple of 16) of xorshift128+, seeded from
 * random() once per process: an id must not repeat, it need not be
 * secret, and random() takes a lock per call
 */

static void
ngx_platform_xorshift_hex(u_char *p, size_t len)
{
    size_t         i, n;
    uint64_t       x, y;
    static u_char  hex[] = "0123456789abcdef";

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

    for (n = 0; n < len / 16; n++) {
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


/*
 * W3C Trace Context: the caller's traceparent when it is one well-formed
 * header of version 00 (lower-case hex, trace id and parent id not all
 * zeros), with its tracestate; else a new trace, without the
 * tracestate, which belongs to the trace it came with. The request's
 * own span id is new either way.
 */

static void
ngx_platform_trace(ngx_http_request_t *r, ngx_platform_ctx_t *ctx)
{
    ngx_str_t  value;

    if (ngx_platform_headers(r, "traceparent", &value) == 1
        && ngx_platform_traceparent_valid(&value))
    {
        ngx_memcpy(ctx->trace_id, value.data + 3, NGX_PLATFORM_TRACE_ID_LEN);
        ngx_memcpy(ctx->trace_flags, value.data + 53, 2);

        if (ngx_platform_headers(r, "tracestate", &value)) {
            ctx->tracestate = value;
        }

    } else {
        ngx_platform_random_id(ctx->trace_id, NGX_PLATFORM_TRACE_ID_LEN);

        /* nothing of this request is recorded: not sampled */
        ctx->trace_flags[0] = '0';
        ctx->trace_flags[1] = '0';
    }

    ngx_platform_random_id(ctx->span_id, NGX_PLATFORM_SPAN_ID_LEN);
}


/* "00-" 32 hex "-" 16 hex "-" 2 hex, nothing after */

static ngx_uint_t
ngx_platform_traceparent_valid(ngx_str_t *value)
{
    u_char  *p;

    p = value->data;

    if (value->len != NGX_PLATFORM_TRACEPARENT_LEN
        || p[0] != '0' || p[1] != '0' || p[2] != '-'
        || p[35] != '-' || p[52] != '-')
    {
        return 0;
    }

    return ngx_platform_hex_id(p + 3, NGX_PLATFORM_TRACE_ID_LEN) == 1
           && ngx_platform_hex_id(p + 36, NGX_PLATFORM_SPAN_ID_LEN) == 1
           && ngx_platform_hex_id(p + 53, 2) != 0;
}


/* 0: not lower-case hex; 1: an id; 2: all zeros, an invalid id */

static ngx_uint_t
ngx_platform_hex_id(u_char *p, size_t len)
{
    size_t      i;
    ngx_uint_t  zero;

    zero = 1;

    for (i = 0; i < len; i++) {
        if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f'))) {
            return 0;
        }

        if (p[i] != '0') {
            zero = 0;
        }
    }

    return zero ? 2 : 1;
}


/*
 * len random hex digits, not all zeros: from OpenSSL's generator, so
 * that ids made by the servers of a fleet never meet
 */

static void
ngx_platform_random_id(u_char *p, size_t len)
{
    u_char         bytes[NGX_PLATFORM_TRACE_ID_LEN / 2];
    size_t         i;
    static u_char  hex[] = "0123456789abcdef";

    do {
        if (ngx_platform_random_bytes(bytes, len / 2) != NGX_OK) {
            ngx_platform_xorshift_hex(p, len);
            continue;
        }

        for (i = 0; i < len / 2; i++) {
            p[2 * i] = hex[bytes[i] >> 4];
            p[2 * i + 1] = hex[bytes[i] & 0xf];
        }

    } while (ngx_platform_hex_id(p, len) != 1);
}


/*
 * n bytes of OpenSSL's generator, drawn a kilobyte at a time: each call
 * costs a lock, a getpid() and a parameter look-up, as much as the rest
 * of a small request's work in the module. A process never uses bytes
 * drawn by another: a worker forked with some starts afresh.
 */

static ngx_int_t
ngx_platform_random_bytes(u_char *p, size_t n)
{
    if (ngx_platform_random_pid != ngx_pid) {
        ngx_platform_random_pid = ngx_pid;
        ngx_platform_random_left = 0;
    }

    if (ngx_platform_random_left < n) {
        if (RAND_bytes(ngx_platform_random, NGX_PLATFORM_RANDOM_AHEAD) != 1) {
            return NGX_ERROR;
        }

        ngx_platform_random_left = NGX_PLATFORM_RANDOM_AHEAD;
    }

    ngx_platform_random_left -= n;
    ngx_memcpy(p, ngx_platform_random + ngx_platform_random_left, n);

    return NGX_OK;
}


/*
 * The headers of a name: how many, and their values, joined with ", "
 * when there are several (RFC 9110, section 5.3)
 */

static ngx_uint_t
ngx_platform_headers(ngx_http_request_t *r, char *name, ngx_str_t *value)
{
    u_char           *p;
    size_t            len, size;
    ngx_uint_t        i, n, pass;
    ngx_list_part_t  *part;
    ngx_table_elt_t  *h;

    len = ngx_strlen(name);
    size = 0;
    n = 0;
    p = NULL;

    ngx_str_null(value);

    /* counted and measured, then copied when there are several */

    for (pass = 0; pass < 2; pass++) {

        part = &r->headers_in.headers.part;
        h = part->elts;

        for (i = 0; /* void */ ; i++) {

            if (i >= part->nelts) {
                if (part->next == NULL) {
                    break;
                }

                part = part->next;
                h = part->elts;
                i = 0;
            }

            if (h[i].hash == 0 || h[i].key.len != len
                || ngx_strncasecmp(h[i].key.data, (u_char *) name, len) != 0)
            {
                continue;
            }

            if (pass == 0) {
                *value = h[i].value;
                size += h[i].value.len + 2;
                n++;
                continue;
            }

            if (p != value->data) {
                *p++ = ',';
                *p++ = ' ';
            }

            p = ngx_cpymem(p, h[i].value.data, h[i].value.len);
        }

        if (n < 2) {
            return n;
        }

        if (pass == 0) {
            p = ngx_pnalloc(r->pool, size);
            if (p == NULL) {
                ngx_str_null(value);
                return 0;
            }

            value->data = p;
        }
    }

    value->len = p - value->data;

    return n;
}


ngx_int_t
ngx_platform_traceparent(ngx_http_request_t *r, ngx_platform_ctx_t *ctx,
    ngx_str_t *value)
{
    u_char  *p;

    p = ngx_pnalloc(r->pool, NGX_PLATFORM_TRACEPARENT_LEN);
    if (p == NULL) {
        return NGX_ERROR;
    }

    value->data = p;
    value->len = NGX_PLATFORM_TRACEPARENT_LEN;

    p = ngx_cpymem(p, "00-", 3);
    p = ngx_cpymem(p, ctx->trace_id, NGX_PLATFORM_TRACE_ID_LEN);
    *p++ = '-';
    p = ngx_cpymem(p, ctx->span_id, NGX_PLATFORM_SPAN_ID_LEN);
    *p++ = '-';
    *p++ = ctx->trace_flags[0];
    *p = ctx->trace_flags[1];

    return NGX_OK;
}


/* error log lines of a request name its request id and trace id */

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

    return ngx_snprintf(p, len, ", request_id: \"%V\", trace_id: \"%*s\"",
                        &ctx->request_id, (size_t) NGX_PLATFORM_TRACE_ID_LEN,
                        ctx->trace_id);
}


/*
 * The answer's language from Accept-Language, read as RFC 9110 says: a
 * list of language ranges, each with an optional weight "q=" from 0 to
 * 1 (1 when absent). French when a range of French ("fr", "fr-CA") or
 * "*" weighs more than every range of English, and more than 0; at equal
 * weights the one listed first. English otherwise, also for a header
 * that names neither or cannot be read.
 */

static ngx_uint_t
ngx_platform_lang(ngx_http_request_t *r)
{
    u_char      *p, *end;
    ngx_int_t    q, fr, en, any;
    ngx_str_t    value, range;
    ngx_uint_t   fr_at, en_at, any_at, n;

    /* several header lines are one list (RFC 9110, section 5.3) */

    if (ngx_platform_headers(r, "Accept-Language", &value) == 0) {
        return NGX_PLATFORM_LANG_EN;
    }

    fr = -1;
    en = -1;
    any = -1;
    fr_at = 0;
    en_at = 0;
    any_at = 0;

    p = value.data;
    end = p + value.len;

    for (n = 0; p < end; n++) {
        q = ngx_platform_lang_range(&p, end, &range);

        if (q == NGX_ERROR) {
            continue;
        }

        if (range.len == 1 && range.data[0] == '*') {
            if (q > any) {
                any = q;
                any_at = n;
            }

        } else if (ngx_platform_lang_is(&range, "fr")) {
            if (q > fr) {
                fr = q;
                fr_at = n;
            }

        } else if (ngx_platform_lang_is(&range, "en")) {
            if (q > en) {
                en = q;
                en_at = n;
            }
        }
    }

    /* "*" stands for a language not named in the list */

    if (fr == -1) {
        fr = any;
        fr_at = any_at;
    }

    if (en == -1) {
        en = any;
        en_at = any_at;
    }

    if (fr > 0 && (fr > en || (fr == en && fr_at < en_at))) {
        return NGX_PLATFORM_LANG_FR;
    }

    return NGX_PLATFORM_LANG_EN;
}


/*
 * One element of the list at *pos: its range, and its weight in
 * thousandths; NGX_ERROR for an empty or malformed element, which is
 * skipped. *pos is left past the element's comma.
 */

static ngx_int_t
ngx_platform_lang_range(u_char **pos, u_char *end, ngx_str_t *range)
{
    u_char     *p, *next;
    ngx_int_t   q;

    p = *pos;

    next = ngx_strlchr(p, end, ',');
    if (next == NULL) {
        next = end;
    }

    *pos = (next < end) ? next + 1 : end;

    while (p < next && (*p == ' ' || *p == '\t')) {
        p++;
    }

    range->data = p;

    while (p < next
           && (*p == '*' || *p == '-' || (*p >= '0' && *p <= '9')
               || ((*p | 0x20) >= 'a' && (*p | 0x20) <= 'z')))
    {
        p++;
    }

    range->len = p - range->data;

    if (range->len == 0 || range->len > 64) {
        return NGX_ERROR;
    }

    while (p < next && (*p == ' ' || *p == '\t')) {
        p++;
    }

    if (p == next) {
        return 1000;
    }

    /* ";" OWS "q=" weight OWS: other parameters are not allowed */

    if (*p++ != ';') {
        return NGX_ERROR;
    }

    while (p < next && (*p == ' ' || *p == '\t')) {
        p++;
    }

    if (next - p < 3 || (p[0] | 0x20) != 'q' || p[1] != '=') {
        return NGX_ERROR;
    }

    p += 2;

    q = ngx_platform_lang_weight(&p, next);

    while (p < next && (*p == ' ' || *p == '\t')) {
        p++;
    }

    return (p == next) ? q : NGX_ERROR;
}


/* qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] ) */

static ngx_int_t
ngx_platform_lang_weight(u_char **pos, u_char *end)
{
    u_char      *p;
    ngx_int_t    q, unit;

    p = *pos;

    if (p == end || (*p != '0' && *p != '1')) {
        return NGX_ERROR;
    }

    q = (*p++ - '0') * 1000;

    if (p < end && *p == '.') {
        p++;

        for (unit = 100; p < end && *p >= '0' && *p <= '9'; unit /= 10) {
            if (unit == 0) {
                return NGX_ERROR;
            }

            q += (*p++ - '0') * unit;
        }
    }

    *pos = p;

    return (q > 1000) ? NGX_ERROR : q;
}


/* whether a language range is of a language: "fr", "fr-CA", "FR-ca" */

static ngx_uint_t
ngx_platform_lang_is(ngx_str_t *range, const char *lang)
{
    size_t  len;

    len = ngx_strlen(lang);

    return range->len >= len
           && ngx_strncasecmp(range->data, (u_char *) lang, len) == 0
           && (range->len == len || range->data[len] == '-');
}


ngx_platform_ctx_t *
ngx_platform_get_ctx(ngx_http_request_t *r)
{
    return ngx_http_get_module_ctx(r, ngx_platform_module);
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
        ctx->error_reason = NGX_PLATFORM_E_NONE;
    }

    return status;
}


ngx_int_t
ngx_platform_fail_reason(ngx_http_request_t *r, ngx_uint_t status,
    ngx_uint_t reason, const char *message, const char *detail)
{
    ngx_platform_ctx_t  *ctx;

    (void) ngx_platform_fail(r, status, message, detail);

    ctx = ngx_platform_get_ctx(r);

    if (ctx) {
        ctx->error_reason = reason;
    }

    return status;
}


uint64_t
ngx_platform_clock(void)
{
    struct timespec  ts;

    (void) clock_gettime(CLOCK_MONOTONIC, &ts);

    return (uint64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}


void
ngx_platform_waited(ngx_http_request_t *r, ngx_uint_t backend, uint64_t start)
{
    uint64_t             t;
    ngx_platform_ctx_t  *ctx;

    ctx = ngx_http_get_module_ctx(r->main, ngx_platform_module);

    if (ctx == NULL) {
        return;
    }

    t = ngx_platform_clock() - start;

    if (backend == NGX_PLATFORM_BACKEND_PG) {
        ctx->pg_time += t;
        ctx->pg_waits++;

    } else {
        ctx->redis_time += t;
        ctx->redis_waits++;
    }
}


/* from nginx's upstream: a client that closed while we wait is let go */

void
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
 * A required tenancy header: present, and a name.
 * Returns NGX_OK with the value, else 400 naming the header.
 */

ngx_int_t
ngx_platform_require_header(ngx_http_request_t *r, char *name,
    ngx_str_t *value)
{
    u_char           *p;
    char             *problem;
    ngx_table_elt_t  *h;

    h = ngx_platform_header(r, name);

    if (h == NULL || h->value.len == 0) {
        problem = "required";

    } else if (ngx_platform_name_valid(h->value.data, h->value.len)) {
        *value = h->value;
        return NGX_OK;

    } else {
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


/*
 * Whose requests these are, for OTP attempts and rate limits: an IPv4
 * address, or the /64 of an IPv6 one, since one host often holds a whole
 * /64; an IPv4-mapped address is its IPv4 address. Read from the
 * sockaddr, which the realip module replaces, so the address an operator
 * trusts is the one counted.
 */

ngx_int_t
ngx_platform_client_address(ngx_http_request_t *r, ngx_str_t *client)
{
    u_char               *p;
    ngx_connection_t     *c;
    struct sockaddr_in   *sin;
#if (NGX_HAVE_INET6)
    size_t                n;
    u_char                prefix[16];
    struct sockaddr_in6  *sin6;
#endif

    c = r->connection;

    switch (c->sockaddr->sa_family) {

    case AF_INET:
        if (c->addr_text.len) {
            /* the address as text, set on accept and by realip alike */
            *client = c->addr_text;
            return NGX_OK;
        }

        sin = (struct sockaddr_in *) c->sockaddr;
        p = (u_char *) &sin->sin_addr;
        break;

#if (NGX_HAVE_INET6)
    case AF_INET6:
        sin6 = (struct sockaddr_in6 *) c->sockaddr;

        if (IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr)) {
            p = &sin6->sin6_addr.s6_addr[12];
            break;
        }

        client->data = ngx_pnalloc(r->pool,
                                   NGX_INET6_ADDRSTRLEN + sizeof("/64") - 1);
        if (client->data == NULL) {
            return NGX_ERROR;
        }

        ngx_memcpy(prefix, sin6->sin6_addr.s6_addr, 8);
        ngx_memzero(&prefix[8], 8);

        n = ngx_inet6_ntop(prefix, client->data, NGX_INET6_ADDRSTRLEN);
        client->len = ngx_cpymem(client->data + n, "/64", 3) - client->data;

        return NGX_OK;
#endif

    default:
        /* a unix socket: every client is the same one */
        *client = c->addr_text;
        return NGX_OK;
    }

    client->data = ngx_pnalloc(r->pool, NGX_INET_ADDRSTRLEN);
    if (client->data == NULL) {
        return NGX_ERROR;
    }

    client->len = ngx_sprintf(client->data, "%ud.%ud.%ud.%ud",
                              p[0], p[1], p[2], p[3])
                  - client->data;

    return NGX_OK;
}


/*
 * A tenant, country or user: 1 to 128 printable ASCII characters, no
 * space and no ':', the separator of the Redis keys built from them (so
 * that no name can spell another's key). The same rule for a header and
 * for a credential's claim.
 */

ngx_int_t
ngx_platform_name_valid(u_char *p, size_t len)
{
    size_t  i;

    if (len == 0 || len > 128) {
        return 0;
    }

    for (i = 0; i < len; i++) {
        if (p[i] < 0x21 || p[i] > 0x7e || p[i] == ':') {
            return 0;
        }
    }

    return 1;
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


/*
 * Strict UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing past
 * U+10FFFF. Returns the length of the valid prefix: len when all of it is
 * valid. nginx's ngx_utf8_decode() takes any byte over 0x7f for a
 * continuation, which PostgreSQL and Jansson then refuse.
 */

size_t
ngx_platform_utf8_valid(u_char *p, size_t len)
{
    u_char  *start, *end;
    size_t   n;
    u_char   c, lo, hi;

    start = p;
    end = p + len;

    while (p < end) {
        c = *p;

        if (c < 0x80) {
            p++;
            continue;
        }

        lo = 0x80;
        hi = 0xbf;

        if (c >= 0xc2 && c <= 0xdf) {
            n = 1;

        } else if (c >= 0xe0 && c <= 0xef) {
            n = 2;
            lo = (c == 0xe0) ? 0xa0 : 0x80;    /* overlong */
            hi = (c == 0xed) ? 0x9f : 0xbf;    /* surrogates */

        } else if (c >= 0xf0 && c <= 0xf4) {
            n = 3;
            lo = (c == 0xf0) ? 0x90 : 0x80;    /* overlong */
            hi = (c == 0xf4) ? 0x8f : 0xbf;    /* past U+10FFFF */

        } else {
            break;
        }

        if ((size_t) (end - p) <= n || p[1] < lo || p[1] > hi) {
            break;
        }

        if ((n > 1 && (p[2] & 0xc0) != 0x80)
            || (n > 2 && (p[3] & 0xc0) != 0x80))
        {
            break;
        }

        p += n + 1;
    }

    return p - start;
}
