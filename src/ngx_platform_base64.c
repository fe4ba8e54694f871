
/*
 * ngx_platform: the one strict base64 decoder (RFC 4648), for a token's
 * base64url parts, a webhook's signatures and secrets, and a document's
 * content. One value has one spelling: nothing outside the alphabet,
 * '=' only at the end and only where the length calls for it, and the
 * unused bits of the last character zero. ngx_decode_base64() alone
 * stops at a '=' and ignores what follows it and those bits, letting
 * many strings pass for one value.
 *
 * It touches no pool and no log, so a thread may run it.
 */


#include <ngx_config.h>
#include <ngx_core.h>

#include "ngx_platform.h"


/* 0..63 the alphabet, 64 '=', 65 CR and LF, 99 anything else */

#define NGX_PLATFORM_B64_PAD    64
#define NGX_PLATFORM_B64_BREAK  65


static u_char  ngx_platform_base64_table[] = {
    99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 65, 99, 99, 65, 99, 99,
    99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99,
    99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 62, 99, 99, 99, 63,
    52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 99, 99, 99, 64, 99, 99,
    99,  0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14,
    15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 99, 99, 99, 99, 99,
    99, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40,
    41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 99, 99, 99, 99, 99,
    99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99,
    99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99,
    99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99,
    99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99,
    99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99,
    99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99,
    99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99,
    99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99
};


static ngx_uint_t ngx_platform_base64_tail(ngx_platform_base64_t *b,
    u_char *out, uint32_t acc, ngx_uint_t n);


ngx_uint_t
ngx_platform_base64_decode(ngx_platform_base64_t *b)
{
    u_char      *p, *end, *out, *last, *pad;
    size_t       chars;
    uint32_t     acc;
    ngx_uint_t   n, pads, c;

    out = b->buf;
    last = b->buf + b->cap;

    acc = 0;
    n = 0;
    chars = 0;
    pads = 0;
    pad = NULL;
    b->size = 0;

    end = b->src + b->len;

    for (p = b->src; p < end; p++) {
        c = ngx_platform_base64_table[*p];

        /* base64url: '-' and '_' in place of '+' and '/' */

        if (b->flags & NGX_PLATFORM_BASE64_URL) {
            c = (*p == '-') ? 62 : (*p == '_') ? 63
                : (c == 62 || c == 63) ? 99 : c;
        }

        if (c < 64) {
            if (pads) {
                /* data after '=': the padding was not at the end */
                b->position = pad - b->src + 1;
                return NGX_PLATFORM_BASE64_PAD;
            }

            chars++;
            acc = (acc << 6) | c;

            if (++n == 4) {
                if (out + 3 <= last) {
                    out[0] = (u_char) (acc >> 16);
                    out[1] = (u_char) (acc >> 8);
                    out[2] = (u_char) acc;
                    out += 3;
                }

                b->size += 3;
                acc = 0;
                n = 0;
            }

            continue;
        }

        if (c == NGX_PLATFORM_B64_BREAK
            && (b->flags & NGX_PLATFORM_BASE64_BREAKS))
        {
            continue;
        }

        if (c == NGX_PLATFORM_B64_PAD
            && !(b->flags & NGX_PLATFORM_BASE64_NO_PAD))
        {
            if (pads++ == 0) {
                pad = p;
            }

            chars++;
            continue;
        }

        /* every byte before p is a character: bytes and characters agree */

        b->position = p - b->src + 1;
        return NGX_PLATFORM_BASE64_CHARACTER;
    }

    if (chars == 0) {
        return NGX_PLATFORM_BASE64_EMPTY;
    }

    /* '=' fills the last group exactly, where padding is written at all */

    if (b->flags & NGX_PLATFORM_BASE64_PADDED) {
        if ((n + pads) % 4) {
            return NGX_PLATFORM_BASE64_LENGTH;
        }

    } else if (n == 1 || (pads && n + pads != 4)) {
        return NGX_PLATFORM_BASE64_LENGTH;
    }

    if (pads > 2) {
        b->position = pad - b->src + 1;
        return NGX_PLATFORM_BASE64_PAD;
    }

    return ngx_platform_base64_tail(b, out, acc, n);
}


/* the last group's 2 or 3 characters: 8 bits of 12, or 16 of 18 */

static ngx_uint_t
ngx_platform_base64_tail(ngx_platform_base64_t *b, u_char *out, uint32_t acc,
    ngx_uint_t n)
{
    u_char  *last;

    last = b->buf + b->cap;

    if (n == 3) {
        if (acc & 0x3) {
            return NGX_PLATFORM_BASE64_BITS;
        }

        if (out + 2 <= last) {
            out[0] = (u_char) (acc >> 10);
            out[1] = (u_char) (acc >> 2);
        }

        b->size += 2;

    } else if (n == 2) {
        if (acc & 0xf) {
            return NGX_PLATFORM_BASE64_BITS;
        }

        if (out + 1 <= last) {
            out[0] = (u_char) (acc >> 4);
        }

        b->size += 1;
    }

    return NGX_PLATFORM_BASE64_OK;
}


/* a whole value into dst (ngx_base64_decoded_length() bytes): NGX_OK */

ngx_int_t
ngx_platform_base64_value(ngx_str_t *dst, ngx_str_t *src, ngx_uint_t flags)
{
    ngx_platform_base64_t  b;

    b.src = src->data;
    b.len = src->len;
    b.buf = dst->data;
    b.cap = ngx_base64_decoded_length(src->len);
    b.flags = flags;

    if (ngx_platform_base64_decode(&b) != NGX_PLATFORM_BASE64_OK) {
        return NGX_ERROR;
    }

    dst->len = b.size;

    return NGX_OK;
}
