
/*
 * ngx_platform: bearer tokens (JWT, RFC 7519) verified with OpenSSL
 * against keys loaded at configuration time.
 */


#ifndef _NGX_PLATFORM_JWT_H_INCLUDED_
#define _NGX_PLATFORM_JWT_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_platform.h"


/* a longer token is refused before anything is decoded */
#define NGX_PLATFORM_JWT_MAX_SIZE  8192


typedef struct {
    ngx_str_t                  subject;     /* sub */
    ngx_str_t                  tenant;      /* tenantId */
    ngx_str_t                  merchant;    /* merchantId */
    time_t                     expires;     /* exp */
} ngx_platform_jwt_claims_t;


/*
 * Checks the token against the location's keys, issuer, audience and
 * leeway. Returns NULL when it is good, with the claims copied into the
 * request pool, else the reason given to the client.
 */
const char *ngx_platform_jwt_verify(ngx_http_request_t *r,
    ngx_platform_loc_conf_t *plcf, ngx_str_t *token,
    ngx_platform_jwt_claims_t *claims);


#endif /* _NGX_PLATFORM_JWT_H_INCLUDED_ */
