
/*
 * ngx_platform: OTP validation (Envelope B).
 *
 * GET /validate-otp/{code} with headers tenantId and countryCode. Codes
 * live in Redis under otp:{tenantId}:{countryCode}:{code}; a found code is
 * deleted as it is read (single use). Failed attempts (400 and 404) count
 * per tenant and client address in otp:attempts:{tenantId}:{addr}, which
 * expires with the window; past the limit every answer is 429.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_platform.h"
#include "ngx_platform_redis.h"


#define NGX_PLATFORM_OTP_MIN_DIGITS  4
#define NGX_PLATFORM_OTP_MAX_DIGITS  8


static ngx_int_t ngx_platform_otp_validate(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);
static ngx_uint_t ngx_platform_otp_code_valid(ngx_str_t *code);
static void ngx_platform_otp_done(void *data, redisReply *reply,
    ngx_int_t rc);
static ngx_int_t ngx_platform_otp_respond(ngx_http_request_t *r,
    redisReply *reply);
static ngx_int_t ngx_platform_otp_locked(ngx_http_request_t *r,
    long long ttl);


/*
 * One atomic round trip. The limit is checked first, so a locked-out
 * client learns nothing, not even about a valid code. DEL answers 1 only
 * for an existing key: the read and the delete are one step (the stored
 * value carries nothing we need, so no GETDEL).
 *
 * KEYS[1] code key, KEYS[2] attempts key
 * ARGV[1] max attempts, ARGV[2] window (s), ARGV[3] "1" if well-formed
 * returns {status, retry-after seconds}
 */

static ngx_platform_redis_script_t  ngx_platform_otp_script = {
    "local n = tonumber(redis.call('GET', KEYS[2]) or '0') or 0\n"
    "if n >= tonumber(ARGV[1]) then\n"
    "  local ttl = redis.call('PTTL', KEYS[2])\n"
    "  if ttl < 0 then\n"
    "    redis.call('EXPIRE', KEYS[2], ARGV[2])\n"
    "    ttl = tonumber(ARGV[2]) * 1000\n"
    "  end\n"
    "  return {429, math.ceil(ttl / 1000)}\n"
    "end\n"
    "if ARGV[3] == '1' and redis.call('DEL', KEYS[1]) == 1 then\n"
    "  return {200, 0}\n"
    "end\n"
    "redis.call('INCR', KEYS[2])\n"
    "if redis.call('TTL', KEYS[2]) < 0 then\n"
    "  redis.call('EXPIRE', KEYS[2], ARGV[2])\n"
    "end\n"
    "if ARGV[3] == '1' then\n"
    "  return {404, 0}\n"
    "end\n"
    "return {400, 0}\n",
    ""
};


static ngx_platform_route_t  ngx_platform_otp_routes[] = {

    { NGX_HTTP_GET, "/validate-otp/{}", NGX_PLATFORM_AUTH_TENANT,
      ngx_platform_otp_validate },

    { 0, NULL, 0, NULL }
};


ngx_platform_family_t  ngx_platform_otp_family = {
    ngx_string("otp"),
    NGX_PLATFORM_ENVELOPE_B,
    NGX_PLATFORM_BACKEND_REDIS,
    NGX_PLATFORM_HEADER_TENANT|NGX_PLATFORM_HEADER_COUNTRY,
    ngx_platform_otp_routes
};


static ngx_int_t
ngx_platform_otp_validate(ngx_http_request_t *r, ngx_platform_ctx_t *ctx)
{
    u_char                   *p;
    u_char                    max[NGX_INT_T_LEN];
    u_char                    window[NGX_TIME_T_LEN];
    size_t                    argvlen[5];
    ngx_int_t                 rc;
    ngx_str_t                 tenant, country, code, *addr;
    ngx_str_t                 otp_key, attempts_key;
    ngx_uint_t                valid;
    const char               *argv[5];
    ngx_platform_loc_conf_t  *plcf;

    rc = ngx_platform_require_tenant(r, ctx);
    if (rc != NGX_OK) {
        return rc;
    }

    rc = ngx_platform_require_country(r, ctx);
    if (rc != NGX_OK) {
        return rc;
    }

    tenant = ctx->identity.tenant;
    country = ctx->identity.country;

    if (ctx->nparams > 0) {
        code = ctx->params[0];

    } else {
        ngx_str_null(&code);
    }

    valid = ngx_platform_otp_code_valid(&code);

    if (!valid) {
        /* never looked up: keep arbitrary path bytes out of the key */
        ngx_str_null(&code);
    }

    plcf = ngx_http_get_module_loc_conf(r, ngx_platform_module);
    addr = ngx_platform_client_addr(r);

    otp_key.len = sizeof("otp:::") - 1 + tenant.len + country.len + code.len;
    otp_key.data = ngx_pnalloc(r->pool, otp_key.len);
    if (otp_key.data == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    p = ngx_sprintf(otp_key.data, "otp:%V:%V:%V", &tenant, &country, &code);
    otp_key.len = p - otp_key.data;

    attempts_key.len = sizeof("otp:attempts::") - 1 + tenant.len + addr->len;
    attempts_key.data = ngx_pnalloc(r->pool, attempts_key.len);
    if (attempts_key.data == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    p = ngx_sprintf(attempts_key.data, "otp:attempts:%V:%V", &tenant, addr);
    attempts_key.len = p - attempts_key.data;

    argv[0] = (const char *) otp_key.data;
    argvlen[0] = otp_key.len;
    argv[1] = (const char *) attempts_key.data;
    argvlen[1] = attempts_key.len;

    argv[2] = (const char *) max;
    argvlen[2] = ngx_sprintf(max, "%ui", plcf->otp_max_attempts) - max;

    argv[3] = (const char *) window;
    argvlen[3] = ngx_sprintf(window, "%T", plcf->otp_attempts_window)
                 - window;

    argv[4] = valid ? "1" : "0";
    argvlen[4] = 1;

    /* the arguments are copied: the stack buffers may go */
    rc = ngx_platform_redis_eval(r->pool, r->connection->log,
                                 &ngx_platform_otp_script, 2, 5, argv,
                                 argvlen, ngx_platform_otp_done, r);

    if (rc == NGX_DONE) {
        r->main->count++;
        return NGX_DONE;
    }

    return ngx_platform_send_backend_error(r, rc);
}


/* 4 to 8 ASCII digits */

static ngx_uint_t
ngx_platform_otp_code_valid(ngx_str_t *code)
{
    size_t  i;

    if (code->len < NGX_PLATFORM_OTP_MIN_DIGITS
        || code->len > NGX_PLATFORM_OTP_MAX_DIGITS)
    {
        return 0;
    }

    for (i = 0; i < code->len; i++) {
        if (code->data[i] < '0' || code->data[i] > '9') {
            return 0;
        }
    }

    return 1;
}


static void
ngx_platform_otp_done(void *data, redisReply *reply, ngx_int_t rc)
{
    ngx_http_request_t  *r = data;

    if (rc != NGX_OK) {
        ngx_platform_finalize(r, ngx_platform_send_backend_error(r, rc));
        return;
    }

    ngx_platform_finalize(r, ngx_platform_otp_respond(r, reply));
}


static ngx_int_t
ngx_platform_otp_respond(ngx_http_request_t *r, redisReply *reply)
{
    long long  status, ttl;

    if (reply->type == REDIS_REPLY_ERROR) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "otp: redis error: %*s", reply->len, reply->str);
        goto failed;
    }

    if (reply->type != REDIS_REPLY_ARRAY
        || reply->elements != 2
        || reply->element[0]->type != REDIS_REPLY_INTEGER
        || reply->element[1]->type != REDIS_REPLY_INTEGER)
    {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "otp: unexpected redis reply of type %d",
                      reply->type);
        goto failed;
    }

    status = reply->element[0]->integer;
    ttl = reply->element[1]->integer;

    switch (status) {

    case NGX_HTTP_OK:
        return ngx_platform_send_ok(r, "OTP code validated", NULL);

    case NGX_HTTP_BAD_REQUEST:
        return ngx_platform_send_error(r, NGX_HTTP_BAD_REQUEST,
                   "Invalid OTP Code.",
                   "The OTP code is not valid. "
                   "Please check the code and try again.");

    case NGX_HTTP_NOT_FOUND:
        return ngx_platform_send_error(r, NGX_HTTP_NOT_FOUND,
                   "OTP Code not found.",
                   "The OTP code was not found.");

    case 429:
        return ngx_platform_otp_locked(r, ttl);
    }

    ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                  "otp: unexpected status %L from the script", status);

failed:

    return ngx_platform_send_error(r, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                   "Internal server error.",
                                   "The request could not be completed.");
}


static ngx_int_t
ngx_platform_otp_locked(ngx_http_request_t *r, long long ttl)
{
    ngx_str_t  value;

    if (ttl < 1) {
        ttl = 1;
    }

    value.data = ngx_pnalloc(r->pool, NGX_INT64_LEN);
    if (value.data == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    value.len = ngx_sprintf(value.data, "%L", (int64_t) ttl) - value.data;

    if (ngx_platform_add_header(r, "Retry-After", &value) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_platform_send_error(r, 429, "Too many attempts.",
                                   "Too many failed OTP attempts. "
                                   "Try again later.");
}
