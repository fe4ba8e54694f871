
/*
 * ngx_platform: the webhook names a location accepts and the signatures
 * of their events, shared by the intake (ngx_platform_webhooks.c), the
 * signatures (ngx_platform_webhook_signature.c) and the configuration
 * (ngx_platform_webhook_conf.c).
 */


#ifndef _NGX_PLATFORM_WEBHOOK_H_INCLUDED_
#define _NGX_PLATFORM_WEBHOOK_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>


#include <ngx_http.h>

#include "ngx_platform.h"


#define NGX_PLATFORM_WEBHOOK_NAME_MAX      64
#define NGX_PLATFORM_WEBHOOK_SECRET_MIN    16
#define NGX_PLATFORM_WEBHOOK_SIGNATURES    16
#define NGX_PLATFORM_WEBHOOK_MAC_LEN       32     /* HMAC-SHA256 */

/* a name's largest body unless max_body= says otherwise, and unknown's */
#define NGX_PLATFORM_WEBHOOK_MAX_BODY      (256 * 1024)

/* a signature refused: 401 with this message and the header's detail */
#define NGX_PLATFORM_WEBHOOK_BAD_SIGNATURE  "Invalid webhook signature."
#define NGX_PLATFORM_WEBHOOK_NO_SIGNATURE                                    \
    "The webhook-signature header is missing."


/* a source or payment method the operator accepts */
typedef struct {
    ngx_str_t                  name;
    ngx_array_t               *secrets;    /* of ngx_str_t; NULL: none */
    off_t                      max_body;   /* else 413 */

    /* where it is declared, for nginx -t */
    ngx_str_t                  file;
    ngx_uint_t                 line;
} ngx_platform_webhook_t;



/* a request's signature headers, and the MACs of the body to match them */
typedef struct {
    ngx_str_t                  msg_id;
    ngx_str_t                  timestamp;
    ngx_str_t                  signatures[NGX_PLATFORM_WEBHOOK_SIGNATURES];
    ngx_uint_t                 nsignatures;
    u_char                    *macs;       /* one per secret */
} ngx_platform_webhook_signature_t;


/* ngx_platform_webhook_signature.c */

/* the headers into s: NGX_OK, else 401 (recorded, with its challenge) */
ngx_int_t ngx_platform_webhook_signature_read(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx, ngx_platform_webhook_t *hook,
    ngx_platform_webhook_signature_t *s);

/* the MACs of the body, in the worker or a thread: NGX_OK or NGX_ERROR */
ngx_int_t ngx_platform_webhook_signature_macs(ngx_platform_webhook_t *hook,
    ngx_platform_webhook_signature_t *s, u_char *body, size_t len);

/* NGX_OK when a signature matches a MAC, else 401 */
ngx_int_t ngx_platform_webhook_signature_check(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx, ngx_platform_webhook_t *hook,
    ngx_platform_webhook_signature_t *s);


#endif /* _NGX_PLATFORM_WEBHOOK_H_INCLUDED_ */
