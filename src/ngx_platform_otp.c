
/*
 * ngx_platform: OTP validation (Envelope B).
 *
 * GET /validate-otp/{code} with headers tenantId and countryCode. Codes
 * live in Redis under otp:{tenantId}:{countryCode}:{code}; a found code is
 * deleted as it is read (single use). Failed attempts (400 and 404) count
 * per tenant and client in otp:attempts:{tenantId}:{client}, where the
 * client is an IPv4 address or an IPv6 /64, and, unless the ceiling is
 * off, per tenant in otp:attempts:{tenantId}; each key expires with its
 * window, and past either limit every answer is 429.
 *
 * With a Redis Cluster the tenant is written between literal braces,
 * otp:{<tenant>}:..., a hash tag: the script's three keys are then on one
 * node, as the cluster requires.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_platform.h"
#include "ngx_platform_op.h"


#define NGX_PLATFORM_OTP_MIN_DIGITS  4
#define NGX_PLATFORM_OTP_MAX_DIGITS  8


static ngx_int_t ngx_platform_otp_validate(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);
static u_char *ngx_platform_otp_tenant(u_char *p, ngx_str_t *tenant,
    size_t tag);
static u_char *ngx_platform_otp_number(u_char *p, uint64_t n);
static ngx_uint_t ngx_platform_otp_code_valid(ngx_str_t *code);
static void ngx_platform_otp_done(void *data, redisReply *reply,
    ngx_int_t rc);
static ngx_int_t ngx_platform_otp_respond(ngx_http_request_t *r,
    redisReply *reply);
static ngx_int_t ngx_platform_otp_locked(ngx_http_request_t *r,
    long long ttl);


/*
 * One atomic round trip. The limits are checked first, so a locked-out
 * client learns nothing, not even about a valid code. DEL answers 1 only
 * for an existing key: the read and the delete are one step (the stored
 * value carries nothing we need, so no GETDEL). A failure counts against
 * the client and, with a ceiling, against the tenant; an attempt refused
 * with 429 counts against neither, so a window is never prolonged.
 *
 * KEYS[1] code key, KEYS[2] client attempts key, KEYS[3] tenant attempts key
 * ARGV[1] max attempts, ARGV[2] window (s), ARGV[3] "1" if well-formed,
 * ARGV[4] tenant max attempts ("0": no ceiling), ARGV[5] tenant window (s)
 * returns the status (200, 400, 404), or for 429 the seconds to wait,
 * negated: one integer, the cheapest reply to parse
 */

static ngx_platform_redis_script_t  ngx_platform_otp_script = {
    "local function wait(key, max, window)\n"
    "  local n = tonumber(redis.call('GET', key) or '0') or 0\n"
    "  if n < max then\n"
    "    return 0\n"
    "  end\n"
    "  local ttl = redis.call('PTTL', key)\n"
    "  if ttl < 0 then\n"
    "    redis.call('EXPIRE', key, window)\n"
    "    ttl = window * 1000\n"
    "  end\n"
    "  return math.ceil(ttl / 1000)\n"
    "end\n"
    "local function fail(key, window)\n"
    "  redis.call('INCR', key)\n"
    "  if redis.call('TTL', key) < 0 then\n"
    "    redis.call('EXPIRE', key, window)\n"
    "  end\n"
    "end\n"
    "local tmax = tonumber(ARGV[4])\n"
    "local t = wait(KEYS[2], tonumber(ARGV[1]), tonumber(ARGV[2]))\n"
    "if tmax > 0 then\n"
    "  t = math.max(t, wait(KEYS[3], tmax, tonumber(ARGV[5])))\n"
    "end\n"
    "if t > 0 then\n"
    "  return -t\n"
    "end\n"
    "if ARGV[3] == '1' and redis.call('DEL', KEYS[1]) == 1 then\n"
    "  return 200\n"
    "end\n"
    "fail(KEYS[2], ARGV[2])\n"
    "if tmax > 0 then\n"
    "  fail(KEYS[3], ARGV[5])\n"
    "end\n"
    "if ARGV[3] == '1' then\n"
    "  return 404\n"
    "end\n"
    "return 400\n",
    "",

    /* a code consumed (200) stays consumed after a failover */
    200
};


/* what the validation answers, sent and documented from here */

#define NGX_PLATFORM_OTP_VALIDATED         "OTP code validated"
#define NGX_PLATFORM_OTP_INVALID           "Invalid OTP Code."
#define NGX_PLATFORM_OTP_INVALID_DETAIL                                      \
    "The OTP code is not valid. Please check the code and try again."
#define NGX_PLATFORM_OTP_NOT_FOUND         "OTP Code not found."
#define NGX_PLATFORM_OTP_NOT_FOUND_DETAIL  "The OTP code was not found."
#define NGX_PLATFORM_OTP_LOCKED            "Too many attempts."
#define NGX_PLATFORM_OTP_LOCKED_DETAIL                                       \
    "Too many failed OTP attempts. Try again later."


static ngx_platform_doc_answer_t  ngx_platform_otp_validate_answers[] = {
    { NGX_HTTP_BAD_REQUEST, NGX_PLATFORM_OTP_INVALID,
      NGX_PLATFORM_OTP_INVALID_DETAIL },
    { NGX_HTTP_NOT_FOUND, NGX_PLATFORM_OTP_NOT_FOUND,
      NGX_PLATFORM_OTP_NOT_FOUND_DETAIL },
    { 429, NGX_PLATFORM_OTP_LOCKED, NGX_PLATFORM_OTP_LOCKED_DETAIL },
    { 0, NULL, NULL }
};


/* the code of the example: scripts/dev start and t/63 store it */

static ngx_platform_doc_t  ngx_platform_otp_validate_doc = {
    "Validate an OTP code",
    "{\"type\":\"object\",\"additionalProperties\":false}",
    "{\"path\":{\"otpCode\":\"123456\"}}",
    ngx_platform_otp_validate_answers, 0, NGX_PLATFORM_OTP_VALIDATED
};


/* validating consumes the code: a HEAD, which never changes state, is 405 */

static ngx_platform_endpoint_t  ngx_platform_otp_endpoints[] = {

    { NGX_HTTP_GET, "/validate-otp/{string:otpCode}",
      NGX_PLATFORM_AUTH_TENANT,
      NGX_PLATFORM_IN_TENANT|NGX_PLATFORM_IN_COUNTRY|NGX_PLATFORM_IN_NO_HEAD,
      NULL, NULL, NULL, NULL,
      NULL, ngx_platform_otp_validate,
      &ngx_platform_otp_validate_doc },

    { 0, NULL, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL }
};


ngx_platform_family_t  ngx_platform_otp_family = {
    ngx_string("otp"),
    NGX_PLATFORM_ENVELOPE_B,
    NGX_PLATFORM_BACKEND_REDIS,
    ngx_platform_otp_endpoints,
    NULL,
    0,
    NULL,
    NULL
};


static ngx_int_t
ngx_platform_otp_validate(ngx_http_request_t *r, ngx_platform_ctx_t *ctx)
{
    u_char                    *p;
    u_char                     max[NGX_INT_T_LEN];
    u_char                     window[NGX_TIME_T_LEN];
    u_char                     tmax[NGX_INT_T_LEN];
    u_char                     twindow[NGX_TIME_T_LEN];
    size_t                     argvlen[8], tag;
    ngx_str_t                  tenant, country, code, client;
    ngx_str_t                  otp_key, attempts_key, tenant_key;
    ngx_uint_t                 valid;
    const char                *argv[8];
    ngx_platform_loc_conf_t   *plcf;
    ngx_platform_main_conf_t  *pmcf;

    tenant = ctx->identity.tenant;
    country = ctx->identity.country;
    code = ctx->args[0];

    valid = ngx_platform_otp_code_valid(&code);

    if (!valid) {
        /* never looked up: keep arbitrary path bytes out of the key */
        ngx_str_null(&code);
    }

    plcf = ngx_http_get_module_loc_conf(r, ngx_platform_module);

    if (ngx_platform_client_address(r, &client) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    /* the tenant as a hash tag, {tenant}, for a cluster: 2 more bytes */

    pmcf = ngx_http_get_module_main_conf(r, ngx_platform_module);
    tag = (pmcf->redis_deployment == NGX_PLATFORM_REDIS_CLUSTER) ? 2 : 0;

    /*
     * A brace in the tenant would end or empty the hash tag: the keys
     * would fall in different slots (-CROSSSLOT). No issuing service can
     * write such a code to a cluster either: none is found.
     */

    if (tag
        && (ngx_strlchr(tenant.data, tenant.data + tenant.len, '{')
            || ngx_strlchr(tenant.data, tenant.data + tenant.len, '}')))
    {
        return ngx_platform_send_error(r, NGX_HTTP_NOT_FOUND,
                                       NGX_PLATFORM_OTP_NOT_FOUND,
                                       NGX_PLATFORM_OTP_NOT_FOUND_DETAIL);
    }

    /* both keys in one allocation */

    otp_key.len = sizeof("otp:::") - 1 + tag + tenant.len + country.len
                  + code.len;
    attempts_key.len = sizeof("otp:attempts::") - 1 + tag + tenant.len
                       + client.len;

    otp_key.data = ngx_pnalloc(r->pool, otp_key.len + attempts_key.len);
    if (otp_key.data == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    p = ngx_cpymem(otp_key.data, "otp:", sizeof("otp:") - 1);
    p = ngx_platform_otp_tenant(p, &tenant, tag);
    *p++ = ':';
    p = ngx_cpymem(p, country.data, country.len);
    *p++ = ':';
    p = ngx_cpymem(p, code.data, code.len);

    attempts_key.data = p;

    p = ngx_cpymem(p, "otp:attempts:", sizeof("otp:attempts:") - 1);
    p = ngx_platform_otp_tenant(p, &tenant, tag);
    *p++ = ':';
    ngx_memcpy(p, client.data, client.len);

    /*
     * Three parts, where a client key has four: a tenant id has no colon
     * (the request core refuses one), so no client key can be this one.
     */

    tenant_key.len = attempts_key.len - client.len - 1;
    tenant_key.data = attempts_key.data;

    argv[0] = (const char *) otp_key.data;
    argvlen[0] = otp_key.len;
    argv[1] = (const char *) attempts_key.data;
    argvlen[1] = attempts_key.len;
    argv[2] = (const char *) tenant_key.data;
    argvlen[2] = tenant_key.len;

    argv[3] = (const char *) max;
    argvlen[3] = ngx_platform_otp_number(max, plcf->otp_max_attempts) - max;

    argv[4] = (const char *) window;
    argvlen[4] = ngx_platform_otp_number(window, plcf->otp_attempts_window)
                 - window;

    argv[5] = valid ? "1" : "0";
    argvlen[5] = 1;

    argv[6] = (const char *) tmax;
    argvlen[6] = ngx_platform_otp_number(tmax, plcf->otp_tenant_attempts)
                 - tmax;

    argv[7] = (const char *) twindow;
    argvlen[7] = ngx_platform_otp_number(twindow, plcf->otp_tenant_window)
                 - twindow;

    /* the arguments are copied: the stack buffers may go */
    return ngx_platform_eval(r, &ngx_platform_otp_script, 3, 8, argv, argvlen,
                             ngx_platform_otp_done);
}


static u_char *
ngx_platform_otp_tenant(u_char *p, ngx_str_t *tenant, size_t tag)
{
    if (tag) {
        *p++ = '{';
    }

    p = ngx_cpymem(p, tenant->data, tenant->len);

    if (tag) {
        *p++ = '}';
    }

    return p;
}


/* a limit in decimal, without ngx_sprintf()'s format parsing */

static u_char *
ngx_platform_otp_number(u_char *p, uint64_t n)
{
    u_char  *d, digits[NGX_INT64_LEN];

    d = digits + NGX_INT64_LEN;

    do {
        *--d = (u_char) ('0' + n % 10);
        n /= 10;
    } while (n);

    return ngx_cpymem(p, d, digits + NGX_INT64_LEN - d);
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
    ngx_http_request_t *r = data;

    if (rc != NGX_OK) {
        ngx_platform_finalize(r, ngx_platform_backend_fail(r, rc));
        return;
    }

    ngx_platform_finalize(r, ngx_platform_otp_respond(r, reply));
}


static ngx_int_t
ngx_platform_otp_respond(ngx_http_request_t *r, redisReply *reply)
{
    long long  status;

    if (reply->type == REDIS_REPLY_ERROR) {
        return ngx_platform_redis_outcome(r, reply);
    }

    if (reply->type != REDIS_REPLY_INTEGER) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "otp: unexpected redis reply of type %d",
                      reply->type);
        goto failed;
    }

    status = reply->integer;

    if (status < 0) {
        return ngx_platform_otp_locked(r, -status);
    }

    switch (status) {

    case NGX_HTTP_OK:
        return ngx_platform_send_ok(r, NGX_PLATFORM_OTP_VALIDATED, NULL, 0);

    case NGX_HTTP_BAD_REQUEST:
        return ngx_platform_send_error(r, NGX_HTTP_BAD_REQUEST,
                                       NGX_PLATFORM_OTP_INVALID,
                                       NGX_PLATFORM_OTP_INVALID_DETAIL);

    case NGX_HTTP_NOT_FOUND:
        return ngx_platform_send_error(r, NGX_HTTP_NOT_FOUND,
                                       NGX_PLATFORM_OTP_NOT_FOUND,
                                       NGX_PLATFORM_OTP_NOT_FOUND_DETAIL);
    }

    ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                  "otp: unexpected status %L from the script", status);

failed:

    return ngx_platform_backend_fail(r, NGX_ERROR);
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

    return ngx_platform_send_error(r, 429, NGX_PLATFORM_OTP_LOCKED,
                                   NGX_PLATFORM_OTP_LOCKED_DETAIL);
}
