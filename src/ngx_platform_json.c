
/*
 * ngx_platform: a string of a request body read outside Jansson, for a
 * body field too large to go through its lexer (NGX_PLATFORM_F_RAW): its
 * key matched, its text checked and its refusal worded exactly as
 * Jansson 2.14 does it (lex_scan_string(), parse_value(), error_set()),
 * and its escapes undone in place. Escapes only shrink, so the text
 * becomes its UTF-8 value in its own bytes.
 *
 * It touches no pool and no log, so a thread may run it.
 */


#include <ngx_config.h>
#include <ngx_core.h>

#include "ngx_platform.h"


/* Jansson's context of an error: the token's text up to 20 bytes */
#define NGX_PLATFORM_JSON_NEAR_MAX  20


typedef struct {
    u_char                    *body;
    size_t                     start;      /* of the text, past the quote */
    size_t                     len;
    json_error_t              *error;
} ngx_platform_json_string_t;


static size_t ngx_platform_json_utf8_len(u_char *p, u_char *end);
static ngx_int_t ngx_platform_json_escape(ngx_platform_json_string_t *s,
    u_char **pos, u_char *late, size_t late_len, size_t *late_size);
static ngx_uint_t ngx_platform_json_is_escape(u_char c);
static ngx_uint_t ngx_platform_json_is_hex(u_char c);
static ngx_int_t ngx_platform_json_fail(ngx_platform_json_string_t *s,
    size_t read, size_t saved, u_char *msg, size_t len);
static u_char *ngx_platform_json_utf8(u_char *p, uint32_t u);


/*
 * Whether the text of a key (no quotes) spells the ASCII name: an
 * escaped spelling of it is the same key to Jansson
 */

ngx_uint_t
ngx_platform_json_key_is(u_char *p, u_char *end, const char *name)
{
    u_char     c;
    ngx_int_t  u;

    while (p < end) {
        c = *p++;

        if (c == '\\' && p < end) {
            c = *p++;

            if (c == 'u') {
                if (end - p < 4) {
                    return 0;
                }

                u = ngx_hextoi(p, 4);
                if (u == NGX_ERROR || u >= 0x80) {
                    return 0;
                }

                c = (u_char) u;
                p += 4;

            } else if (c != '"' && c != '\\' && c != '/') {
                return 0;
            }
        }

        if (*name == '\0' || c != (u_char) *name++) {
            return 0;
        }
    }

    return *name == '\0';
}


/*
 * The text of a string, len bytes at body + start (its quotes around
 * it): NGX_OK if Jansson would take it, else NGX_ERROR with error set
 * as Jansson sets it. Jansson first reads the whole string (UTF-8,
 * control characters, escapes' syntax), then decodes it (surrogates),
 * then refuses a NUL: so does this, in one pass that notes the first
 * problem of the later kinds and tells it only if the text has none of
 * the first.
 */

ngx_int_t
ngx_platform_json_string_check(u_char *body, size_t start, size_t len,
    json_error_t *error)
{
    u_char                      *p, *end;
    size_t                       n, late_size;
    ngx_int_t                    rc;
    u_char                       late[64];
    ngx_platform_json_string_t   s;

    s.body = body;
    s.start = start;
    s.len = len;
    s.error = error;

    late_size = 0;

    p = body + start;
    end = p + len;

    while (p < end) {

        if (*p >= 0x80) {
            n = ngx_platform_json_utf8_len(p, end);

            if (n == 0) {
                /* not read: the context stops before it */
                return ngx_platform_json_fail(&s, p - body - start,
                           p - body - start, late,
                           ngx_sprintf(late, "unable to decode byte 0x%xd",
                                       (int) *p) - late);
            }

            p += n;
            continue;
        }

        if (*p < 0x20) {
            n = p - body - start;

            if (*p == '\n') {
                return ngx_platform_json_fail(&s, n, n,
                                              (u_char *) "unexpected newline",
                                              sizeof("unexpected newline")
                                              - 1);
            }

            return ngx_platform_json_fail(&s, n, n, late,
                       ngx_sprintf(late, "control character 0x%xd",
                                   (int) *p) - late);
        }

        if (*p != '\\') {
            p++;
            continue;
        }

        rc = ngx_platform_json_escape(&s, &p, late, sizeof(late),
                                      &late_size);
        if (rc != NGX_OK) {
            return rc;
        }
    }

    if (late_size) {
        /* read up to the closing quote, then decoded */
        return ngx_platform_json_fail(&s, len + 1, len + 1, late, late_size);
    }

    return NGX_OK;
}


/* a lead byte and its continuation: the length Jansson takes, else 0 */

static size_t
ngx_platform_json_utf8_len(u_char *p, u_char *end)
{
    size_t    n, i;
    uint32_t  u;

    if (*p < 0xc2 || *p > 0xf4) {
        return 0;
    }

    n = (*p < 0xe0) ? 2 : (*p < 0xf0) ? 3 : 4;

    /* past the text is its closing quote, no continuation byte */

    if ((size_t) (end - p) < n) {
        return 0;
    }

    u = *p & (0xff >> (n + 1));

    for (i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80) {
            return 0;
        }

        u = (u << 6) | (p[i] & 0x3f);
    }

    if (u > 0x10ffff || (u >= 0xd800 && u <= 0xdfff)
        || (n == 3 && u < 0x800) || (n == 4 && u < 0x10000))
    {
        return 0;
    }

    return n;
}


/*
 * An escape at *pos: its syntax refused at once, a surrogate out of its
 * pair or a NUL noted in late (the first only)
 */

static ngx_int_t
ngx_platform_json_escape(ngx_platform_json_string_t *s, u_char **pos,
    u_char *late, size_t late_len, size_t *late_size)
{
    u_char     *p, *end, *text;
    size_t      i, n;
    ngx_int_t   u, u2;

    text = s->body + s->start;
    end = text + s->len;
    p = *pos + 1;

    /* the letter, then a 'u''s four hex digits */

    for (i = 0; i < 5; i++) {

        /* past the text is its closing quote */

        if (p + i < end && p[i] >= 0x80
            && ngx_platform_json_utf8_len(p + i, end) == 0)
        {
            n = p + i - text;
            return ngx_platform_json_fail(s, n, n, late,
                       ngx_snprintf(late, late_len,
                                    "unable to decode byte 0x%xd",
                                    (int) p[i]) - late);
        }

        if (p + i < end
            && (i == 0 ? ngx_platform_json_is_escape(p[i])
                       : ngx_platform_json_is_hex(p[i])))
        {
            if (i == 0 && p[i] != 'u') {
                *pos = p + 1;
                return NGX_OK;
            }

            continue;
        }

        n = p + i + 1 - text;

        return ngx_platform_json_fail(s, n, n, (u_char *) "invalid escape",
                                      sizeof("invalid escape") - 1);
    }

    u = ngx_hextoi(p + 1, 4);
    p += 5;
    *pos = p;

    if (*late_size) {
        return NGX_OK;
    }

    if (u >= 0xd800 && u <= 0xdbff) {

        if (end - p >= 2 && p[0] == '\\' && p[1] == 'u') {
            u2 = (end - p >= 6) ? ngx_hextoi(p + 2, 4) : NGX_ERROR;

            if (u2 == NGX_ERROR) {
                /* not four hex digits: refused as such when read */
                return NGX_OK;
            }

            if (u2 >= 0xdc00 && u2 <= 0xdfff) {
                *pos = p + 6;
                return NGX_OK;
            }

            *late_size = ngx_snprintf(late, late_len,
                                      "invalid Unicode '\\u%04Xd\\u%04Xd'",
                                      (int) u, (int) u2) - late;
            return NGX_OK;
        }

        *late_size = ngx_snprintf(late, late_len, "invalid Unicode '\\u%04Xd'",
                                  (int) u) - late;

    } else if (u >= 0xdc00 && u <= 0xdfff) {
        *late_size = ngx_snprintf(late, late_len, "invalid Unicode '\\u%04Xd'",
                                  (int) u) - late;

    } else if (u == 0) {
        *late_size = ngx_snprintf(late, late_len, "%s",
                          "\\u0000 is not allowed without JSON_ALLOW_NUL")
                     - late;
    }

    return NGX_OK;
}


static ngx_uint_t
ngx_platform_json_is_escape(u_char c)
{
    switch (c) {

    case '"':
    case '\\':
    case '/':
    case 'b':
    case 'f':
    case 'n':
    case 'r':
    case 't':
    case 'u':
        return 1;

    default:
        return 0;
    }
}


static ngx_uint_t
ngx_platform_json_is_hex(u_char c)
{
    return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f');
}


/*
 * Jansson's error: where it stood having read so many bytes of the text
 * (past its end: the closing quote), and the token's text it had kept
 * (the opening quote and saved bytes) as the context when short enough
 */

static ngx_int_t
ngx_platform_json_fail(ngx_platform_json_string_t *s, size_t read,
    size_t saved, u_char *msg, size_t len)
{
    u_char        *p, *last;
    json_error_t  *error;

    error = s->error;

    ngx_platform_json_where(error, s->body, s->start + read);

    p = (u_char *) error->text;
    last = p + JSON_ERROR_TEXT_LENGTH - 1;

    p = ngx_slprintf(p, last, "%*s", len, msg);

    if (saved + 1 <= NGX_PLATFORM_JSON_NEAR_MAX) {
        p = ngx_slprintf(p, last, " near '%*s'", saved + 1,
                         s->body + s->start - 1);
    }

    *p = '\0';

    return NGX_ERROR;
}


/*
 * The line and column of the offset's byte as Jansson counts them: the
 * column in characters (the bytes that begin one), from 0 at a line's
 * start
 */

void
ngx_platform_json_where(json_error_t *error, u_char *body, size_t offset)
{
    u_char  *p, *end;
    int      line, column;

    line = 1;
    column = 0;

    end = body + offset;

    for (p = body; p < end; p++) {
        if (*p == '\n') {
            line++;
            column = 0;

        } else if (*p < 0x80 || (*p >= 0xc2 && *p <= 0xf4)) {
            column++;
        }
    }

    error->line = line;
    error->column = column;
    error->position = (int) offset;
}


/*
 * The text of a checked string, its escapes undone where it is: its
 * length as UTF-8. Each escape is longer than what it stands for.
 */

size_t
ngx_platform_json_unescape(u_char *text, size_t len)
{
    u_char    *p, *d, *end;
    uint32_t   u, u2;

    p = text;
    d = text;
    end = text + len;

    while (p < end) {

        if (*p != '\\') {
            *d++ = *p++;
            continue;
        }

        switch (p[1]) {

        case 'b':
            *d++ = '\b';
            break;

        case 'f':
            *d++ = '\f';
            break;

        case 'n':
            *d++ = '\n';
            break;

        case 'r':
            *d++ = '\r';
            break;

        case 't':
            *d++ = '\t';
            break;

        case 'u':
            u = ngx_hextoi(p + 2, 4);
            p += 6;

            if (u >= 0xd800 && u <= 0xdbff) {
                u2 = ngx_hextoi(p + 2, 4);
                u = 0x10000 + ((u - 0xd800) << 10) + (u2 - 0xdc00);
                p += 6;
            }

            d = ngx_platform_json_utf8(d, u);
            continue;

        default: /* '"', '\\', '/' */
            *d++ = p[1];
            break;
        }

        p += 2;
    }

    return d - text;
}


static u_char *
ngx_platform_json_utf8(u_char *p, uint32_t u)
{
    if (u < 0x80) {
        *p++ = (u_char) u;

    } else if (u < 0x800) {
        *p++ = (u_char) (0xc0 | (u >> 6));
        *p++ = (u_char) (0x80 | (u & 0x3f));

    } else if (u < 0x10000) {
        *p++ = (u_char) (0xe0 | (u >> 12));
        *p++ = (u_char) (0x80 | ((u >> 6) & 0x3f));
        *p++ = (u_char) (0x80 | (u & 0x3f));

    } else {
        *p++ = (u_char) (0xf0 | (u >> 18));
        *p++ = (u_char) (0x80 | ((u >> 12) & 0x3f));
        *p++ = (u_char) (0x80 | ((u >> 6) & 0x3f));
        *p++ = (u_char) (0x80 | (u & 0x3f));
    }

    return p;
}
