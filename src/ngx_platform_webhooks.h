
/*
 * ngx_platform: the webhook names a location accepts, shared by the
 * intake (ngx_platform_webhooks.c) and their configuration
 * (ngx_platform_webhook_conf.c).
 */


#ifndef _NGX_PLATFORM_WEBHOOKS_H_INCLUDED_
#define _NGX_PLATFORM_WEBHOOKS_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>


#define NGX_PLATFORM_WEBHOOK_NAME_MAX      64
#define NGX_PLATFORM_WEBHOOK_SECRET_MIN    16


/* a source or payment method the operator accepts */
typedef struct {
    ngx_str_t                  name;
    ngx_array_t               *secrets;    /* of ngx_str_t; NULL: none */

    /* where it is declared, for nginx -t */
    ngx_str_t                  file;
    ngx_uint_t                 line;
} ngx_platform_webhook_t;


#endif /* _NGX_PLATFORM_WEBHOOKS_H_INCLUDED_ */
