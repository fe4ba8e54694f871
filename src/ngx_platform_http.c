
/*
 * ngx_platform: the request core shared by every endpoint family: the
 * content handler, the inputs each endpoint declares (tenancy, captures,
 * query arguments, body), reading and parsing the body, and running the
 * endpoint's operation.
 *
 * A request goes: route (404, 405), credentials and tenancy headers
 * (ngx_platform_auth.c: 401, 403, 400), declared inputs (400, 403),
 * body (415, 413, 400), then the endpoint's operation.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_platform.h"


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

    /* the family's limit: Content-Length now, chunks as they come */

    rc = ngx_platform_body_limit(r, ctx);
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


