
/*
 * ngx_platform: Standard Webhooks signatures. A name with signing secrets
 * takes an event only with webhook-id, webhook-timestamp within 300 s of
 * now, and a webhook-signature whose "v1,<base64>" entries hold the
 * HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<body>" under one of
 * its secrets. Everything else is 401 with the header that is wrong.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <openssl/evp.h>
#include <openssl/crypto.h>

#include "ngx_platform.h"
#include "ngx_platform_webhook.h"


/* Standard Webhooks: a signature's timestamp within 300 s of now */
#define NGX_PLATFORM_WEBHOOK_TOLERANCE     300
#define NGX_PLATFORM_WEBHOOK_ID_MAX        256


static ngx_int_t ngx_platform_webhook_refuse(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx, const char *detail);
static ngx_int_t ngx_platform_webhook_hmac(ngx_str_t *secret,
    ngx_platform_webhook_signature_t *s, u_char *body, size_t len,
    u_char *mac);


/*
 * Standard Webhooks: webhook-id, webhook-timestamp (seconds, within the
 * tolerance both ways) and webhook-signature, space-separated
 * "v1,<base64>" entries (others, such as "v1a", are ignored). Checked in
 * the worker before any digest; the MACs are compared afterwards.
 */

ngx_int_t
ngx_platform_webhook_signature_read(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx, ngx_platform_webhook_t *hook,
    ngx_platform_webhook_signature_t *s)
{
    u_char           *p, *end, *entry;
    time_t            ts, now;
    size_t            i;
    ngx_str_t         sig, mac;
    ngx_table_elt_t  *h;

    h = ngx_platform_header(r, "webhook-id");

    if (h == NULL || h->value.len == 0) {
        return ngx_platform_webhook_refuse(r, ctx,
                   "The webhook-id header is missing.");
    }

    if (h->value.len > NGX_PLATFORM_WEBHOOK_ID_MAX) {
        goto bad_id;
    }

    for (i = 0; i < h->value.len; i++) {
        if (h->value.data[i] < 0x21 || h->value.data[i] > 0x7e) {
            goto bad_id;
        }
    }

    s->msg_id = h->value;

    h = ngx_platform_header(r, "webhook-timestamp");

    if (h == NULL || h->value.len == 0) {
        return ngx_platform_webhook_refuse(r, ctx,
                   "The webhook-timestamp header is missing.");
    }

    ts = (h->value.len <= 12) ? ngx_atotm(h->value.data, h->value.len)
                              : NGX_ERROR;

    if (ts == NGX_ERROR) {
        return ngx_platform_webhook_refuse(r, ctx,
                   "The webhook-timestamp header is malformed: "
                   "it must be whole seconds since 1970.");
    }

    now = ngx_time();

    if (ts < now - NGX_PLATFORM_WEBHOOK_TOLERANCE) {
        return ngx_platform_webhook_refuse(r, ctx,
                   "The webhook-timestamp header is too old: "
                   "more than 300 seconds before the server's time.");
    }

    if (ts > now + NGX_PLATFORM_WEBHOOK_TOLERANCE) {
        return ngx_platform_webhook_refuse(r, ctx,
                   "The webhook-timestamp header is in the future: "
                   "more than 300 seconds after the server's time.");
    }

    s->timestamp = h->value;

    h = ngx_platform_header(r, "webhook-signature");

    if (h == NULL || h->value.len == 0) {
        return ngx_platform_webhook_refuse(r, ctx,
                   NGX_PLATFORM_WEBHOOK_NO_SIGNATURE);
    }

    p = h->value.data;
    end = p + h->value.len;

    while (p < end && s->nsignatures < NGX_PLATFORM_WEBHOOK_SIGNATURES) {

        while (p < end && *p == ' ') {
            p++;
        }

        entry = p;

        while (p < end && *p != ' ') {
            p++;
        }

        if (p - entry < 3 || ngx_strncmp(entry, "v1,", 3) != 0) {
            continue;
        }

        sig.data = entry + 3;
        sig.len = p - sig.data;

        mac.data = ngx_pnalloc(r->pool, ngx_base64_decoded_length(sig.len));
        if (mac.data == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        if (ngx_platform_base64_value(&mac, &sig, 0) != NGX_OK
            || mac.len != NGX_PLATFORM_WEBHOOK_MAC_LEN)
        {
            continue;
        }

        s->signatures[s->nsignatures++] = mac;
    }

    if (s->nsignatures == 0) {
        return ngx_platform_webhook_refuse(r, ctx,
                   "The webhook-signature header is malformed: it holds "
                   "no \"v1,<base64 HMAC-SHA256>\" signature.");
    }

    s->macs = ngx_pnalloc(r->pool, hook->secrets->nelts
                                   * NGX_PLATFORM_WEBHOOK_MAC_LEN);
    if (s->macs == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return NGX_OK;

bad_id:

    return ngx_platform_webhook_refuse(r, ctx,
               "The webhook-id header is malformed: 1 to 256 printable "
               "characters without spaces.");
}


static ngx_int_t
ngx_platform_webhook_refuse(ngx_http_request_t *r, ngx_platform_ctx_t *ctx,
    const char *detail)
{
    ngx_platform_log_limited(NGX_PLATFORM_LOG_SIGNATURE, NGX_LOG_INFO,
                             r->connection->log, 0,
                             "webhooks: signature refused: %s", detail);

    ngx_str_set(&ctx->challenge,
                "Webhook-Signature headers=\"webhook-id webhook-timestamp "
                "webhook-signature\"");

    return ngx_platform_fail(r, NGX_HTTP_UNAUTHORIZED,
                             NGX_PLATFORM_WEBHOOK_BAD_SIGNATURE, detail);
}


/*
 * Perhaps in a thread: only s, the body and the secrets (configuration
 * memory, read only), with OpenSSL. The MAC of each secret into s->macs.
 */

ngx_int_t
ngx_platform_webhook_signature_macs(ngx_platform_webhook_t *hook,
    ngx_platform_webhook_signature_t *s, u_char *body, size_t len)
{
    ngx_str_t   *secret;
    ngx_uint_t   i;

    secret = hook->secrets->elts;

    for (i = 0; i < hook->secrets->nelts; i++) {
        if (ngx_platform_webhook_hmac(&secret[i], s, body, len,
                                      s->macs
                                      + i * NGX_PLATFORM_WEBHOOK_MAC_LEN)
            != NGX_OK)
        {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


/* HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<body>" */

static ngx_int_t
ngx_platform_webhook_hmac(ngx_str_t *secret,
    ngx_platform_webhook_signature_t *s, u_char *body, size_t len,
    u_char *mac)
{
    size_t       n;
    ngx_int_t    rc;
    EVP_PKEY    *key;
    EVP_MD_CTX  *md;

    key = EVP_PKEY_new_raw_private_key(EVP_PKEY_HMAC, NULL, secret->data,
                                       secret->len);
    if (key == NULL) {
        return NGX_ERROR;
    }

    md = EVP_MD_CTX_new();
    if (md == NULL) {
        EVP_PKEY_free(key);
        return NGX_ERROR;
    }

    n = NGX_PLATFORM_WEBHOOK_MAC_LEN;

    rc = (EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, key) == 1
          && EVP_DigestSignUpdate(md, s->msg_id.data, s->msg_id.len) == 1
          && EVP_DigestSignUpdate(md, ".", 1) == 1
          && EVP_DigestSignUpdate(md, s->timestamp.data, s->timestamp.len)
             == 1
          && EVP_DigestSignUpdate(md, ".", 1) == 1
          && EVP_DigestSignUpdate(md, body, len) == 1
          && EVP_DigestSignFinal(md, mac, &n) == 1
          && n == NGX_PLATFORM_WEBHOOK_MAC_LEN)
         ? NGX_OK : NGX_ERROR;

    EVP_MD_CTX_free(md);
    EVP_PKEY_free(key);

    return rc;
}


/* back in the worker: a signature of the header is one of the MACs */

ngx_int_t
ngx_platform_webhook_signature_check(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx, ngx_platform_webhook_t *hook,
    ngx_platform_webhook_signature_t *s)
{
    ngx_uint_t  i, j, match;

    match = 0;

    /* every pair is compared, so the time says nothing of which */

    for (i = 0; i < hook->secrets->nelts; i++) {
        for (j = 0; j < s->nsignatures; j++) {
            match |= (CRYPTO_memcmp(s->macs + i * NGX_PLATFORM_WEBHOOK_MAC_LEN,
                                    s->signatures[j].data,
                                    NGX_PLATFORM_WEBHOOK_MAC_LEN)
                      == 0);
        }
    }

    if (!match) {
        return ngx_platform_webhook_refuse(r, ctx,
                   "The webhook-signature header matches none of the "
                   "signing secrets of this source.");
    }

    return NGX_OK;
}
