
/*
 * ngx_platform: the request core shared by every endpoint family: the
 * content handler, the inputs each endpoint declares (tenancy, captures,
 * query arguments, body), reading and parsing the body, and running the
 * endpoint's operation.
 *
 * A request goes: route (404, 405), the address's rate limits (429),
 * credentials and tenancy headers (ngx_platform_auth.c: 401, 403, 400),
 * the tenant's and the credential's rate limits (429), declared inputs
 * (400, 403), body (415, 413, 400), then the endpoint's operation.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_platform.h"
#include "ngx_platform_rate_limit.h"


/*
 * The steps of a request's admission, each of which may wait for a
 * backend: the address's rate limits, before anything else may cost a
 * backend anything (an API key's lookup); the credentials; the tenant's
 * and the credential's rate limits.
 */
#define NGX_PLATFORM_STEP_ADDRESS      0
#define NGX_PLATFORM_STEP_CREDENTIALS  1
#define NGX_PLATFORM_STEP_IDENTITY     2
#define NGX_PLATFORM_STEP_ADMITTED     3


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

/*
 * platform_body_memory: what a body costs the worker while it is held,
 * in times its length: the copy read whole, and as much again for what
 * is made of it (Jansson's values; a document's decoded bytes and
 * libpq's copy of them, its base64 kept out of Jansson: F_RAW)
 */
#define NGX_PLATFORM_BODY_COST         2

#define NGX_PLATFORM_BODY_BUSY                                               \
    "The server holds too many large bodies; retry shortly."
#define NGX_PLATFORM_BODY_TOO_LARGE                                          \
    "The body is larger than the server can hold at once."


/* a body being read into one buffer and parsed, perhaps in a thread */
struct ngx_platform_body_work_s {
    ngx_chain_t               *bufs;
    u_char                    *data;
    size_t                     len;
    json_t                    *json;
    json_error_t               error;
    ngx_err_t                  read_error;
    ngx_uint_t                 too_complex;   /* NGX_PLATFORM_JSON_TOO_* */
    size_t                     reserved;      /* of platform_body_memory */

    /* the F_RAW field's string: its text's place in data, un-escaped */
    const char                *raw_name;
    size_t                     raw_start;
    size_t                     raw_len;
    size_t                     pos;           /* what Jansson has read */

    unsigned                   read_failed:1;
    unsigned                   raw_found:1;
};


static ngx_int_t ngx_platform_admit(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);
static void ngx_platform_continue(ngx_http_request_t *r, ngx_int_t rc);
static ngx_int_t ngx_platform_check_inputs(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);
static ngx_int_t ngx_platform_check_content_type(ngx_http_request_t *r);
static void ngx_platform_body_handler(ngx_http_request_t *r);
static ngx_int_t ngx_platform_collect_body(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);
static void ngx_platform_body_work(void *data);
static ngx_uint_t ngx_platform_json_limits(ngx_platform_body_work_t *bw);
static void ngx_platform_body_parse_raw(ngx_platform_body_work_t *bw);
static size_t ngx_platform_body_read(void *buf, size_t size, void *data);
static ngx_int_t ngx_platform_body_raw(ngx_platform_ctx_t *ctx,
    ngx_platform_body_work_t *bw);
static ngx_int_t ngx_platform_body_done(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);
static void ngx_platform_body_cleanup(void *data);
static ngx_int_t ngx_platform_body_admit(ngx_http_request_t *r, off_t len,
    size_t *cost);
static ngx_int_t ngx_platform_refuse(ngx_http_request_t *r, ngx_int_t rc);
static ngx_int_t ngx_platform_proceed(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);
static ngx_int_t ngx_platform_run(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);


/* bytes of platform_body_memory the worker's requests hold */
static size_t  ngx_platform_body_held;






/*
 * Before limit_req, limit_conn and the access phase: a request of a
 * module location gets its context (request id, trace context) now, so
 * that their log lines name the request as the module's own do
 */

ngx_int_t
ngx_platform_preaccess_handler(ngx_http_request_t *r)
{
    ngx_platform_loc_conf_t  *plcf;

    plcf = ngx_http_get_module_loc_conf(r, ngx_platform_module);

    if (r != r->main || plcf->family == NULL
        || ngx_platform_get_ctx(r) != NULL)
    {
        return NGX_DECLINED;
    }

    if (ngx_platform_create_ctx(r, plcf->family) == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return NGX_DECLINED;
}


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

    /* made before the access phases, or by a variable read earlier */

    ctx = ngx_platform_get_ctx(r);

    if (ctx == NULL) {
        ctx = ngx_platform_create_ctx(r, plcf->family);
        if (ctx == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
    }

    rc = ngx_platform_route(r, ctx, plcf->routes);

    if (rc == NGX_OK) {
        rc = ngx_platform_admit(r, ctx);
    }

    if (rc == NGX_DONE) {
        /* a limit or an API key is looked up; ngx_platform_continue() */
        r->read_event_handler = ngx_platform_check_broken_connection;
        return NGX_DONE;
    }

    if (rc != NGX_OK) {
        return ngx_platform_refuse(r, rc);
    }

    return ngx_platform_proceed(r, ctx);
}


/*
 * The steps of admission from ctx->step on: NGX_OK once all have let
 * the request in, NGX_DONE when one waits for a backend (it then calls
 * ngx_platform_continue()), else what refused it.
 */

static ngx_int_t
ngx_platform_admit(ngx_http_request_t *r, ngx_platform_ctx_t *ctx)
{
    ngx_int_t  rc;

    rc = NGX_OK;

    while (rc == NGX_OK && ctx->step < NGX_PLATFORM_STEP_ADMITTED) {

        switch (ctx->step++) {

        case NGX_PLATFORM_STEP_ADDRESS:
            rc = ngx_platform_rate_limit(r, ctx, NGX_PLATFORM_RL_ANONYMOUS,
                                         ngx_platform_continue);
            break;

        case NGX_PLATFORM_STEP_CREDENTIALS:
            rc = ngx_platform_authenticate(r, ctx, ngx_platform_continue);
            break;

        default: /* NGX_PLATFORM_STEP_IDENTITY */
            rc = ngx_platform_rate_limit(r, ctx, NGX_PLATFORM_RL_IDENTIFIED,
                                         ngx_platform_continue);
            break;
        }
    }

    /*
     * a rate limit's wait is a wait on Redis, timed until it resumes (an
     * API key's lookup is timed by the runner)
     */

    if (rc == NGX_DONE && ctx->step - 1 != NGX_PLATFORM_STEP_CREDENTIALS) {
        ctx->limit_wait = ngx_platform_clock();
    }

    return rc;
}


/* what a step that waited resumes with: the next steps, or the refusal */

static void
ngx_platform_continue(ngx_http_request_t *r, ngx_int_t rc)
{
    ngx_platform_ctx_t  *ctx;

    ctx = ngx_platform_get_ctx(r);

    r->read_event_handler = ngx_http_block_reading;

    if (ctx->limit_wait) {
        ngx_platform_waited(r, NGX_PLATFORM_BACKEND_REDIS, ctx->limit_wait);
        ctx->limit_wait = 0;
    }

    if (rc == NGX_OK) {
        rc = ngx_platform_admit(r, ctx);
    }

    if (rc == NGX_DONE) {
        /* the next step waits with a count of its own; this one's goes */
        r->read_event_handler = ngx_platform_check_broken_connection;
        ngx_http_finalize_request(r, NGX_DONE);
        return;
    }

    if (rc != NGX_OK) {
        ngx_http_finalize_request(r, ngx_platform_refuse(r, rc));
        return;
    }

    rc = ngx_platform_proceed(r, ctx);

    /*
     * NGX_DONE: the body reader or a backend took a count of its own;
     * the wait's count is dropped either way
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
    size_t     cost;
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

    /* the family's limit: Content-Length now, chunks as they come */

    rc = ngx_platform_body_limit(r, ctx);
    if (rc != NGX_OK) {
        return ngx_platform_refuse(r, rc);
    }

    /*
     * A body whose length is known is refused before it is read when it
     * would not fit now; it reserves its share once read, so that slow
     * clients sending theirs hold none of it meanwhile
     */

    if (r->headers_in.content_length_n > 0) {
        rc = ngx_platform_body_admit(r, r->headers_in.content_length_n,
                                     &cost);
        if (rc != NGX_OK) {
            return ngx_platform_refuse(r, rc);
        }
    }

    rc = ngx_http_read_client_request_body(r, ngx_platform_body_handler);

    if (rc >= NGX_HTTP_SPECIAL_RESPONSE) {
        /* a body over client_max_body_size, a malformed chunked body */
        return ngx_platform_settle(r, rc);
    }

    return NGX_DONE;
}


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
    size_t                     cost;
    ngx_int_t                  rc;
    ngx_pool_cleanup_t        *cln;
    ngx_platform_field_t      *field;
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

    /* the body's share, held until the request's pool goes */

    rc = ngx_platform_body_admit(r, len, &cost);
    if (rc != NGX_OK) {
        return rc;
    }

    bw->reserved = cost;
    ngx_platform_body_held += cost;

    bw->data = ngx_pnalloc(r->pool, len + 1);
    if (bw->data == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    bw->len = len;

    ctx->body = bw->data;
    ctx->body_len = len;

    for (field = ctx->endpoint->body; field->name; field++) {
        if (field->flags & NGX_PLATFORM_F_RAW) {
            bw->raw_name = field->name;
            break;
        }
    }

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

    bw->too_complex = ngx_platform_json_limits(bw);

    if (bw->too_complex) {
        return;
    }

    if (bw->raw_found) {
        ngx_platform_body_parse_raw(bw);
        return;
    }

    /* a scalar is read too, to be told "must be a JSON object" */

    bw->json = json_loadb((char *) bw->data, bw->len,
                          JSON_REJECT_DUPLICATES|JSON_DECODE_ANY,
                          &bw->error);
}


/*
 * A body whose F_RAW field has a string: Jansson parses the body with
 * that string's text left out (so it reads "" there), the text is
 * checked as Jansson would and un-escaped where it is. A malformed body
 * is told by the first error Jansson would have met in the whole text.
 */

static void
ngx_platform_body_parse_raw(ngx_platform_body_work_t *bw)
{
    bw->pos = 0;
    bw->json = json_load_callback(ngx_platform_body_read, bw,
                                  JSON_REJECT_DUPLICATES|JSON_DECODE_ANY,
                                  &bw->error);

    if (bw->json == NULL && (size_t) bw->error.position <= bw->raw_start) {
        /* met before the string */
        return;
    }

    if (ngx_platform_json_string_check(bw->data, bw->raw_start, bw->raw_len,
                                       &bw->error)
        != NGX_OK)
    {
        if (bw->json) {
            json_decref(bw->json);
            bw->json = NULL;
        }

        return;
    }

    if (bw->json == NULL) {
        /* met after the string: where that is in the whole text */
        ngx_platform_json_where(&bw->error, bw->data,
                                bw->error.position + bw->raw_len);
        return;
    }

    bw->raw_len = ngx_platform_json_unescape(bw->data + bw->raw_start,
                                             bw->raw_len);
}


/* Jansson's input: the body without the text of the F_RAW string */

static size_t
ngx_platform_body_read(void *buf, size_t size, void *data)
{
    ngx_platform_body_work_t *bw = data;

    size_t  end, n;

    if (bw->pos == bw->raw_start) {
        bw->pos += bw->raw_len;
    }

    end = (bw->pos < bw->raw_start) ? bw->raw_start : bw->len;

    n = ngx_min(size, end - bw->pos);

    ngx_memcpy(buf, bw->data + bw->pos, n);
    bw->pos += n;

    return n;
}


/*
 * The JSON limits, in one pass over the bytes outside strings: each '{'
 * or '[' opens a level; a ':' in an object and each element of an array
 * (its first, then one per ',') is a member. Text that is not JSON may
 * be miscounted, but Jansson refuses it anyway. The same pass finds the
 * string of the F_RAW field: the first member of the top-level object
 * with its name whose value is a string.
 */

static ngx_uint_t
ngx_platform_json_limits(ngx_platform_body_work_t *bw)
{
    u_char      c, *p, *end, *text, *key, *key_end;
    u_char      open[NGX_PLATFORM_JSON_MAX_DEPTH];
    ngx_uint_t  depth, members, string, escape, first, raw, value;

    p = bw->data;
    end = p + bw->len;
    depth = 0;
    members = 0;
    string = 0;
    escape = 0;
    first = 0;      /* an array was just opened: its first element counts */

    raw = (bw->raw_name != NULL);
    value = 0;      /* 1: the raw field's ':' was met, 2: its string */
    text = NULL;
    key = NULL;
    key_end = NULL;

    for ( /* void */ ; p < end; p++) {
        c = *p;

        if (string) {
            if (escape) {
                escape = 0;

            } else if (c == '\\') {
                escape = 1;

            } else if (c == '"') {
                string = 0;

                if (raw && depth == 1 && value == 2) {
                    bw->raw_start = text - bw->data;
                    bw->raw_len = p - text;
                    bw->raw_found = 1;
                    raw = 0;

                } else if (raw && depth == 1) {
                    key = text;
                    key_end = p;
                }
            }

            continue;
        }

        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            continue;
        }

        /* in the top-level object: the raw field's key, ':', a string */

        if (raw && depth == 1) {
            if (c == ':' && key != NULL && open[0] == '{'
                && ngx_platform_json_key_is(key, key_end, bw->raw_name))
            {
                value = 1;

            } else {
                value = (c == '"' && value == 1) ? 2 : 0;
            }

            key = NULL;
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
            text = p + 1;
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
        return ngx_platform_fail_reason(r, NGX_HTTP_BAD_REQUEST,
                                 NGX_PLATFORM_E_BODY_TOO_COMPLEX,
                                 "The request body nests too deeply.",
                                 "JSON bodies nest at most 64 levels.");
    }

    if (bw->too_complex == NGX_PLATFORM_JSON_TOO_MANY) {
        return ngx_platform_fail_reason(r, NGX_HTTP_BAD_REQUEST,
                                 NGX_PLATFORM_E_BODY_TOO_COMPLEX,
                                 "The request body has too many members.",
                                 "JSON bodies hold at most 10000 members "
                                 "(object members and array elements).");
    }

    if (bw->json && bw->raw_name) {
        rc = ngx_platform_body_raw(ctx, bw);
        if (rc != NGX_OK) {
            return rc;
        }
    }

    rc = ngx_platform_check_body(r, ctx, bw->json, &bw->error);

    if (rc != NGX_OK) {
        if (bw->json == NULL && rc == (ngx_int_t) ctx->error_status) {
            /* not JSON at all: the validator told where */
            ctx->error_reason = NGX_PLATFORM_E_INVALID_JSON;
        }

        return rc;
    }

    return ngx_platform_run(r, ctx);
}


/*
 * The F_RAW field's value for the operation and the schema. Should
 * Jansson have read the string after all (its member not found by the
 * scan), its value takes the text's place in the body's buffer, which
 * holds it: the operation sees one form.
 */

static ngx_int_t
ngx_platform_body_raw(ngx_platform_ctx_t *ctx, ngx_platform_body_work_t *bw)
{
    json_t  *value;

    if (bw->raw_found) {
        ctx->raw.data = bw->data + bw->raw_start;
        ctx->raw.len = bw->raw_len;
        return NGX_OK;
    }

    value = json_is_object(bw->json)
            ? json_object_get(bw->json, bw->raw_name) : NULL;

    if (!json_is_string(value)) {
        return NGX_OK;
    }

    ctx->raw.len = json_string_length(value);
    ctx->raw.data = ngx_cpymem(bw->data, json_string_value(value),
                               ctx->raw.len)
                    - ctx->raw.len;

    if (json_object_set_new(bw->json, bw->raw_name, json_string("")) != 0) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return NGX_OK;
}


static void
ngx_platform_body_cleanup(void *data)
{
    ngx_platform_body_work_t *bw = data;

    if (bw->json) {
        json_decref(bw->json);
    }

    ngx_platform_body_held -= bw->reserved;
}


/*
 * Whether a body of len bytes fits in platform_body_memory beside those
 * held now: NGX_OK with its cost, else 503 (413 when it could never fit)
 */

static ngx_int_t
ngx_platform_body_admit(ngx_http_request_t *r, off_t len, size_t *cost)
{
    size_t                     budget;
    ngx_platform_main_conf_t  *pmcf;

    pmcf = ngx_http_get_module_main_conf(r, ngx_platform_module);
    budget = pmcf->body_memory;

    if (len > (off_t) (budget / NGX_PLATFORM_BODY_COST)) {
        return ngx_platform_fail(r, NGX_HTTP_REQUEST_ENTITY_TOO_LARGE,
                                 "Request body too large.",
                                 NGX_PLATFORM_BODY_TOO_LARGE);
    }

    *cost = (size_t) len * NGX_PLATFORM_BODY_COST;

    if (ngx_platform_body_held + *cost <= budget) {
        return NGX_OK;
    }

    ngx_platform_metric_inc(NGX_PLATFORM_M_BODY_MEMORY_REFUSED);

    ngx_platform_log_limited(NGX_PLATFORM_LOG_BODY_MEMORY, NGX_LOG_WARN,
                             r->connection->log, 0,
                             "platform: a body of %O bytes refused, %uz of "
                             "platform_body_memory %uz held", len,
                             ngx_platform_body_held, budget);

    return ngx_platform_fail_reason(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                                    NGX_PLATFORM_E_OVERLOADED,
                                    "Service temporarily unavailable.",
                                    NGX_PLATFORM_BODY_BUSY);
}


void
ngx_platform_body_drop(ngx_http_request_t *r, ngx_platform_ctx_t *ctx)
{
    ngx_platform_body_work_t  *bw;

    bw = ctx->body_work;

    /* the F_RAW field's value lives in the buffer */

    if (bw == NULL || bw->data == NULL || ctx->raw.data != NULL) {
        return;
    }

    /* a large allocation of the pool: ngx_pfree() gives it back */
    (void) ngx_pfree(r->pool, bw->data);

    bw->data = NULL;
    ctx->body = NULL;
    ctx->body_len = 0;
}


size_t
ngx_platform_body_reserved(void)
{
    return ngx_platform_body_held;
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


