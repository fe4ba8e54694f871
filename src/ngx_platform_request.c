
/*
 * ngx_platform: the floor under every layer. What a request carries (its
 * context, its recorded error) and the checks of request text that any
 * layer may use: headers, names, uuids, UTF-8. It uses no other file of
 * the module.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_platform.h"


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
    }

    return status;
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
