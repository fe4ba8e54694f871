
/*
 * ngx_platform: the one validator of what endpoints declare they take:
 * query arguments and JSON bodies (decisions.md section 1). Unknown body
 * fields are ignored; a field that is missing, of the wrong JSON type or
 * of a wrong value is 400 naming it, in the family's language.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_platform.h"


/* the whitespace that F_TRIM trims, as btrim(value, E' \t\r\n') does */
#define ngx_platform_is_space(c)                                            \
    ((c) == ' ' || (c) == '\t' || (c) == '\r' || (c) == '\n')


/* deepest array nesting of fields the validator descends */
#define NGX_PLATFORM_SCHEMA_DEPTH  4


/* what is wrong with a field, in English and French; %s is its name */
typedef enum {
    ngx_platform_problem_required = 0,
    ngx_platform_problem_null,
    ngx_platform_problem_string,
    ngx_platform_problem_uuid,
    ngx_platform_problem_integer,
    ngx_platform_problem_number,
    ngx_platform_problem_boolean,
    ngx_platform_problem_object,
    ngx_platform_problem_array,
    ngx_platform_problem_enum,
    ngx_platform_problem_date,
    ngx_platform_problem_datetime,
    ngx_platform_problem_min,
    ngx_platform_problem_max,
    ngx_platform_problem_shorter,
    ngx_platform_problem_longer,
    ngx_platform_problem_repeated,
    ngx_platform_problem_iban,
    ngx_platform_problem_iban_country,
    ngx_platform_problem_iban_length,
    ngx_platform_problem_iban_check,
    ngx_platform_problem_bic,
    ngx_platform_problem_utf8,
    ngx_platform_problem_nul,
    ngx_platform_problem_shorter_one,
    ngx_platform_problem_longer_one
} ngx_platform_problem_e;


static ngx_platform_text_t  ngx_platform_problems[] = {
    { "%s is required.", "%s est requis." },
    { "%s must not be null.", "%s ne doit pas être null." },
    { "%s must be a string.", "%s doit être une chaîne de caractères." },
    { "%s must be a uuid.", "%s doit être un uuid." },
    { "%s must be an integer.", "%s doit être un entier." },
    { "%s must be a number.", "%s doit être un nombre." },
    { "%s must be a boolean.", "%s doit être un booléen." },
    { "%s must be an object.", "%s doit être un objet." },
    { "%s must be an array.", "%s doit être un tableau." },
    { "%s must be one of: %s.", "%s doit valoir l'une de ces valeurs : %s." },
    { "%s must be an ISO 8601 date (YYYY-MM-DD).",
      "%s doit être une date ISO 8601 (AAAA-MM-JJ)." },
    { "%s must be an ISO 8601 date or date-time.",
      "%s doit être une date ou une date-heure ISO 8601." },
    { "%s must be at least %s.", "%s doit valoir au moins %s." },
    { "%s must be at most %s.", "%s doit valoir au plus %s." },
    { "%s must be at least %s characters long.",
      "%s doit compter au moins %s caractères." },
    { "%s must be at most %s characters long.",
      "%s doit compter au plus %s caractères." },
    { "%s appears more than once.", "%s apparaît plus d'une fois." },
    { "%s must be an IBAN in electronic format: upper case letters and "
      "digits, no spaces.",
      "%s doit être un IBAN au format électronique : lettres majuscules et "
      "chiffres, sans espaces." },
    { "%s does not start with the code of a country that uses IBANs.",
      "%s ne commence pas par le code d'un pays qui utilise l'IBAN." },
    { "%s does not have the length of an IBAN of its country.",
      "%s n'a pas la longueur d'un IBAN de son pays." },
    { "%s fails the IBAN check digits (ISO 13616, mod 97).",
      "%s échoue au contrôle de l'IBAN (ISO 13616, modulo 97)." },
    { "%s must be a BIC (ISO 9362): 8 or 11 upper case letters and digits, "
      "the first six letters.",
      "%s doit être un BIC (ISO 9362) : 8 ou 11 lettres majuscules et "
      "chiffres, dont six lettres au début." },
    { "%s must be valid UTF-8.", "%s doit être en UTF-8 valide." },
    { "%s must not contain a NUL character.",
      "%s ne doit pas contenir de caractère NUL." },
    { "%s must be at least 1 character long.",
      "%s doit compter au moins 1 caractère." },
    { "%s must be at most 1 character long.",
      "%s doit compter au plus 1 caractère." }
};


/*
 * Jansson's reasons for a malformed body, with the module's English (no
 * library flag names) and French. Its text is the reason, a value of the
 * body after some ("control character 0x1"), then " near '...'" quoting
 * the body or " near end of file". Longer reasons first, where one
 * begins another.
 */

typedef struct {
    const char                *jansson;
    const char                *en;
    const char                *fr;
} ngx_platform_json_reason_t;


static ngx_platform_json_reason_t  ngx_platform_json_reasons[] = {
    { "\\u0000 is not allowed without JSON_ALLOW_NUL",
      "\\u0000 is not allowed in a string",
      "\\u0000 n'est pas permis dans une chaîne" },
    { "NUL byte in object key not supported",
      "\\u0000 is not allowed in a member name",
      "\\u0000 n'est pas permis dans un nom de membre" },
    { "unable to decode byte", "not UTF-8: byte",
      "pas de l'UTF-8 : octet" },
    { "premature end of input", "premature end of input",
      "fin prématurée du texte" },
    { "unexpected newline", "unexpected newline in a string",
      "saut de ligne inattendu dans une chaîne" },
    { "control character", "control character",
      "caractère de contrôle" },
    { "invalid Unicode escape", "invalid Unicode escape",
      "échappement Unicode invalide" },
    { "invalid Unicode", "invalid Unicode",
      "Unicode invalide" },
    { "invalid escape", "invalid escape", "échappement invalide" },
    { "too big negative integer", "too big negative integer",
      "entier négatif trop grand" },
    { "too big integer", "too big integer", "entier trop grand" },
    { "real number overflow", "real number overflow",
      "nombre réel trop grand" },
    { "maximum parsing depth reached", "maximum nesting depth reached",
      "profondeur d'imbrication maximale atteinte" },
    { "string or '}' expected", "string or '}' expected",
      "chaîne ou '}' attendue" },
    { "duplicate object key", "duplicate object key",
      "clé d'objet en double" },
    { "':' expected", "':' expected", "':' attendu" },
    { "']' expected", "']' expected", "']' attendu" },
    { "'[' or '{' expected", "'[' or '{' expected",
      "'[' ou '{' attendu" },
    { "end of file expected", "end of file expected",
      "fin du texte attendue" },
    { "invalid token", "invalid token", "élément invalide" },
    { "unexpected token", "unexpected token", "élément inattendu" },
    { NULL, "invalid JSON", "JSON invalide" }
};


/*
 * IBAN lengths by country, ISO 13616 (the SWIFT IBAN registry), sorted
 * by country code
 */

typedef struct {
    char                       country[3];
    u_char                     length;
} ngx_platform_iban_country_t;


static ngx_platform_iban_country_t  ngx_platform_iban_countries[] = {
    { "AD", 24 }, { "AE", 23 }, { "AL", 28 }, { "AT", 20 }, { "AZ", 28 },
    { "BA", 20 }, { "BE", 16 }, { "BG", 22 }, { "BH", 22 }, { "BI", 27 },
    { "BR", 29 }, { "BY", 28 }, { "CH", 21 }, { "CR", 22 }, { "CY", 28 },
    { "CZ", 24 }, { "DE", 22 }, { "DJ", 27 }, { "DK", 18 }, { "DO", 28 },
    { "EE", 20 }, { "EG", 29 }, { "ES", 24 }, { "FI", 18 }, { "FK", 18 },
    { "FO", 18 }, { "FR", 27 }, { "GB", 22 }, { "GE", 22 }, { "GI", 23 },
    { "GL", 18 }, { "GR", 27 }, { "GT", 28 }, { "HN", 28 }, { "HR", 21 },
    { "HU", 28 }, { "IE", 22 }, { "IL", 23 }, { "IQ", 23 }, { "IS", 26 },
    { "IT", 27 }, { "JO", 30 }, { "KW", 30 }, { "KZ", 20 }, { "LB", 28 },
    { "LC", 32 }, { "LI", 21 }, { "LT", 20 }, { "LU", 20 }, { "LV", 21 },
    { "LY", 25 }, { "MC", 27 }, { "MD", 24 }, { "ME", 22 }, { "MK", 19 },
    { "MN", 20 }, { "MR", 27 }, { "MT", 31 }, { "MU", 30 }, { "NI", 28 },
    { "NL", 18 }, { "NO", 15 }, { "OM", 23 }, { "PK", 24 }, { "PL", 28 },
    { "PS", 29 }, { "QA", 29 }, { "RO", 24 }, { "RS", 22 }, { "RU", 33 },
    { "SA", 24 }, { "SC", 31 }, { "SD", 18 }, { "SE", 24 }, { "SI", 19 },
    { "SK", 24 }, { "SM", 27 }, { "SO", 23 }, { "ST", 25 }, { "SV", 28 },
    { "TL", 23 }, { "TN", 24 }, { "TR", 26 }, { "UA", 29 }, { "VA", 22 },
    { "VG", 24 }, { "XK", 20 }, { "YE", 30 }
};


static char *ngx_platform_json_error_detail(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx, json_error_t *error);
static ngx_int_t ngx_platform_field_fail(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx, ngx_str_t *name, ngx_platform_field_t *field,
    ngx_platform_problem_e problem);
static ngx_int_t ngx_platform_check_object(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx, json_t *object, ngx_platform_field_t *fields,
    ngx_str_t *path, ngx_uint_t depth);
static ngx_int_t ngx_platform_check_value(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx, json_t *value, ngx_platform_field_t *field,
    ngx_str_t *name, ngx_uint_t depth);
static ngx_int_t ngx_platform_check_type(ngx_platform_field_t *field,
    ngx_str_t *value, ngx_platform_problem_e *problem);
static ngx_int_t ngx_platform_check_bounds(ngx_platform_field_t *field,
    double v, ngx_platform_problem_e below, ngx_platform_problem_e above,
    ngx_platform_problem_e *problem);
static ngx_int_t ngx_platform_check_integer(ngx_str_t *value,
    int64_t *n);
static ngx_int_t ngx_platform_check_date(u_char *p, u_char *end,
    u_char **last);
static ngx_int_t ngx_platform_check_time(u_char *p, u_char *end);
static ngx_int_t ngx_platform_check_iban(ngx_str_t *value,
    ngx_platform_problem_e *problem);
static ngx_int_t ngx_platform_check_bic(ngx_str_t *value);
static ngx_int_t ngx_platform_check_unique(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx, json_t *array, ngx_platform_field_t *field,
    ngx_str_t *name);
static ngx_uint_t ngx_platform_same_value(ngx_platform_field_t *field,
    json_t *a, json_t *b);
static ngx_platform_problem_e ngx_platform_type_problem(ngx_uint_t type);
static size_t ngx_platform_utf8_length(u_char *p, size_t len);
static ngx_int_t ngx_platform_check_text(ngx_str_t *value,
    ngx_platform_problem_e *problem);
static ngx_int_t ngx_platform_query_decode(ngx_http_request_t *r,
    ngx_str_t *value);


ngx_int_t
ngx_platform_check_captures(ngx_http_request_t *r, ngx_platform_ctx_t *ctx)
{
    ngx_uint_t               i, n;
    ngx_platform_field_t     field;
    ngx_platform_segment_t  *s;
    ngx_platform_problem_e   problem;

    ngx_memzero(&field, sizeof(ngx_platform_field_t));
    n = 0;

    for (i = 0; i < ctx->route->nsegments; i++) {
        s = &ctx->route->segments[i];

        if (s->literal.len || s->version) {
            continue;
        }

        field.type = s->type;

        if (ngx_platform_check_type(&field, &ctx->args[n], &problem)
            != NGX_OK)
        {
            if (ctx->endpoint->invalid) {
                return ngx_platform_fail(r, NGX_HTTP_BAD_REQUEST,
                                         ctx->endpoint->invalid,
                                         ctx->endpoint->invalid_detail);
            }

            return ngx_platform_field_fail(r, ctx, &s->name, &field, problem);
        }

        /* a "{string}" capture: nginx decoded any byte into the path */

        if (ngx_platform_check_text(&ctx->args[n], &problem) != NGX_OK) {
            return ngx_platform_field_fail(r, ctx, &s->name, &field, problem);
        }

        n++;
    }

    return NGX_OK;
}


ngx_int_t
ngx_platform_check_query(ngx_http_request_t *r, ngx_platform_ctx_t *ctx)
{
    ngx_str_t                value, name;
    ngx_platform_field_t    *field;
    ngx_platform_problem_e   problem;

    for (field = ctx->endpoint->query; field && field->name; field++) {

        name.data = (u_char *) field->name;
        name.len = ngx_strlen(field->name);

        if (ngx_http_arg(r, name.data, name.len, &value) != NGX_OK
            || value.len == 0)
        {
            if (field->flags & NGX_PLATFORM_F_REQUIRED) {
                return ngx_platform_field_fail(r, ctx, &name, field,
                                               ngx_platform_problem_required);
            }

            if (field->def) {
                value.data = (u_char *) field->def;
                value.len = ngx_strlen(field->def);

            } else {
                /* absent: SQL NULL */
                ngx_str_null(&value);
            }

            ctx->args[ctx->nargs++] = value;
            continue;
        }

        if (ngx_platform_query_decode(r, &value) != NGX_OK) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        /* the type's problem first: a NUL is no digit of an integer */

        if (ngx_platform_check_type(field, &value, &problem) != NGX_OK
            || ngx_platform_check_text(&value, &problem) != NGX_OK)
        {
            return ngx_platform_field_fail(r, ctx, &name, field, problem);
        }

        ctx->args[ctx->nargs++] = value;
    }

    return NGX_OK;
}


/*
 * "+" and "%41" decoded into a copy in the request pool: the request
 * line, which the access log shows, stays as the client sent it
 */

static ngx_int_t
ngx_platform_query_decode(ngx_http_request_t *r, ngx_str_t *value)
{
    u_char  *copy, *src, *dst;
    size_t   i;

    copy = ngx_pnalloc(r->pool, value->len);
    if (copy == NULL) {
        return NGX_ERROR;
    }

    for (i = 0; i < value->len; i++) {
        copy[i] = (value->data[i] == '+') ? ' ' : value->data[i];
    }

    /* decoding never writes ahead of what it reads: one buffer serves */

    src = copy;
    dst = copy;
    ngx_unescape_uri(&dst, &src, value->len, 0);

    value->data = copy;
    value->len = dst - copy;

    return NGX_OK;
}


/*
 * Decoded text reaches PostgreSQL as text: a NUL would cut it short and
 * bytes that are not UTF-8 would be its error, not the client's
 */

static ngx_int_t
ngx_platform_check_text(ngx_str_t *value, ngx_platform_problem_e *problem)
{
    if (ngx_strlchr(value->data, value->data + value->len, '\0') != NULL) {
        *problem = ngx_platform_problem_nul;
        return NGX_DECLINED;
    }

    if (ngx_platform_utf8_valid(value->data, value->len) != value->len) {
        *problem = ngx_platform_problem_utf8;
        return NGX_DECLINED;
    }

    return NGX_OK;
}


/* the body as a JSON object matching the endpoint's fields */

ngx_int_t
ngx_platform_check_body(ngx_http_request_t *r, ngx_platform_ctx_t *ctx,
    json_t *json, json_error_t *error)
{
    char       *detail;
    ngx_str_t   path;

    if (json == NULL) {
        detail = ngx_platform_json_error_detail(r, ctx, error);
        if (detail == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        return ngx_platform_fail(r, NGX_HTTP_BAD_REQUEST,
                                 "The request body is not valid JSON.",
                                 detail);
    }

    ctx->json = json;

    if (!json_is_object(json)) {
        return ngx_platform_fail(r, NGX_HTTP_BAD_REQUEST,
                                 "The request body must be a JSON object.",
                                 "Expected a JSON object.");
    }

    ngx_str_null(&path);

    return ngx_platform_check_object(r, ctx, json, ctx->endpoint->body,
                                     &path, 0);
}


static ngx_int_t
ngx_platform_check_object(ngx_http_request_t *r, ngx_platform_ctx_t *ctx,
    json_t *object, ngx_platform_field_t *fields, ngx_str_t *path,
    ngx_uint_t depth)
{
    u_char                *p;
    json_t                *value;
    ngx_int_t              rc;
    ngx_str_t              name;
    ngx_platform_field_t  *field;

    for (field = fields; field && field->name; field++) {

        /* "members[2].counterpartyId" for a field inside an array */

        name.len = path->len + (path->len ? 1 : 0) + ngx_strlen(field->name);
        name.data = ngx_pnalloc(r->pool, name.len);
        if (name.data == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        p = name.data;

        if (path->len) {
            p = ngx_cpymem(p, path->data, path->len);
            *p++ = '.';
        }

        ngx_memcpy(p, field->name, ngx_strlen(field->name));

        value = json_object_get(object, field->name);

        if (value == NULL) {
            if (field->flags & NGX_PLATFORM_F_REQUIRED) {
                return ngx_platform_field_fail(r, ctx, &name, field,
                                               ngx_platform_problem_required);
            }

            continue;
        }

        rc = ngx_platform_check_value(r, ctx, value, field, &name, depth);
        if (rc != NGX_OK) {
            return rc;
        }
    }

    return NGX_OK;
}


static ngx_int_t
ngx_platform_check_value(ngx_http_request_t *r, ngx_platform_ctx_t *ctx,
    json_t *value, ngx_platform_field_t *field, ngx_str_t *name,
    ngx_uint_t depth)
{
    u_char                  *p;
    size_t                   i, len;
    double                   d;
    json_t                  *item;
    ngx_int_t                rc;
    ngx_str_t                s, item_name;
    ngx_platform_problem_e   problem;

    if (json_is_null(value)) {
        if (field->flags & NGX_PLATFORM_F_NULLABLE) {
            return NGX_OK;
        }

        return ngx_platform_field_fail(r, ctx, name, field,
                                       (field->flags & NGX_PLATFORM_F_REQUIRED)
                                       ? ngx_platform_problem_required
                                       : ngx_platform_problem_null);
    }

    switch (field->type) {

    case NGX_PLATFORM_T_BOOLEAN:
        if (!json_is_boolean(value)) {
            return ngx_platform_field_fail(r, ctx, name, field,
                                           ngx_platform_problem_boolean);
        }

        return NGX_OK;

    case NGX_PLATFORM_T_INTEGER:
    case NGX_PLATFORM_T_NUMBER:
        if (field->type == NGX_PLATFORM_T_INTEGER
            ? !json_is_integer(value) : !json_is_number(value))
        {
            return ngx_platform_field_fail(r, ctx, name, field,
                                    field->type == NGX_PLATFORM_T_INTEGER
                                    ? ngx_platform_problem_integer
                                    : ngx_platform_problem_number);
        }

        d = json_number_value(value);

        if (ngx_platform_check_bounds(field, d, ngx_platform_problem_min,
                                      ngx_platform_problem_max, &problem)
            != NGX_OK)
        {
            return ngx_platform_field_fail(r, ctx, name, field, problem);
        }

        return NGX_OK;

    case NGX_PLATFORM_T_OBJECT:
        if (!json_is_object(value)) {
            return ngx_platform_field_fail(r, ctx, name, field,
                                           ngx_platform_problem_object);
        }

        if (field->items == NULL || depth >= NGX_PLATFORM_SCHEMA_DEPTH) {
            return NGX_OK;
        }

        return ngx_platform_check_object(r, ctx, value, field->items, name,
                                         depth + 1);

    case NGX_PLATFORM_T_ARRAY:
        if (!json_is_array(value)) {
            return ngx_platform_field_fail(r, ctx, name, field,
                                           ngx_platform_problem_array);
        }

        len = json_array_size(value);

        if (ngx_platform_check_bounds(field, len, ngx_platform_problem_min,
                                      ngx_platform_problem_max, &problem)
            != NGX_OK)
        {
            return ngx_platform_field_fail(r, ctx, name, field, problem);
        }

        if (field->items == NULL || depth >= NGX_PLATFORM_SCHEMA_DEPTH) {
            return NGX_OK;
        }

        for (i = 0; i < len; i++) {
            item = json_array_get(value, i);

            item_name.data = ngx_pnalloc(r->pool, name->len + NGX_SIZE_T_LEN
                                                  + 2);
            if (item_name.data == NULL) {
                return NGX_HTTP_INTERNAL_SERVER_ERROR;
            }

            p = ngx_sprintf(item_name.data, "%V[%uz]", name, i);
            item_name.len = p - item_name.data;

            if (!json_is_object(item)) {
                return ngx_platform_field_fail(r, ctx, &item_name, field,
                                               ngx_platform_problem_object);
            }

            rc = ngx_platform_check_object(r, ctx, item, field->items,
                                           &item_name, depth + 1);
            if (rc != NGX_OK) {
                return rc;
            }
        }

        return ngx_platform_check_unique(r, ctx, value, field, name);

    default: /* the string types */
        if (!json_is_string(value)) {
            return ngx_platform_field_fail(r, ctx, name, field,
                                       ngx_platform_type_problem(field->type));
        }

        if ((field->flags & NGX_PLATFORM_F_RAW) && ctx->raw.data) {
            /* its value is kept out of Jansson's (ngx_platform_http.c) */
            s = ctx->raw;

        } else {
            s.data = (u_char *) json_string_value(value);
            s.len = json_string_length(value);
        }

        if (ngx_platform_check_type(field, &s, &problem) != NGX_OK) {
            return ngx_platform_field_fail(r, ctx, name, field, problem);
        }

        return NGX_OK;
    }
}


/* a value given as text: a query argument or a string of the body */

static ngx_int_t
ngx_platform_check_type(ngx_platform_field_t *field, ngx_str_t *value,
    ngx_platform_problem_e *problem)
{
    u_char   *last, *end, *p;
    char    **v;
    size_t    len;
    double    d;
    int64_t   n;
    u_char    buf[65];

    switch (field->type) {

    case NGX_PLATFORM_T_UUID:
        if (!ngx_platform_is_uuid(value)) {
            *problem = ngx_platform_problem_uuid;
            return NGX_DECLINED;
        }

        return NGX_OK;

    case NGX_PLATFORM_T_INTEGER:
        if (ngx_platform_check_integer(value, &n) != NGX_OK) {
            *problem = ngx_platform_problem_integer;
            return NGX_DECLINED;
        }

        d = (double) n;
        break;

    case NGX_PLATFORM_T_NUMBER:
        /* decimal notation: what PostgreSQL's numeric takes */

        if (value->len == 0 || value->len > 64) {
            *problem = ngx_platform_problem_number;
            return NGX_DECLINED;
        }

        /* no hexadecimal, infinity or NaN: only what numeric reads */

        for (p = value->data; p < value->data + value->len; p++) {
            if (!((*p >= '0' && *p <= '9') || *p == '-' || *p == '+'
                  || *p == '.' || *p == 'e' || *p == 'E'))
            {
                *problem = ngx_platform_problem_number;
                return NGX_DECLINED;
            }
        }

        ngx_memcpy(buf, value->data, value->len);
        buf[value->len] = '\0';

        errno = 0;
        d = strtod((char *) buf, (char **) &p);

        if (p != buf + value->len || errno || d != d
            || d > 1e300 || d < -1e300
            || !(buf[0] == '-' || (buf[0] >= '0' && buf[0] <= '9')))
        {
            *problem = ngx_platform_problem_number;
            return NGX_DECLINED;
        }

        break;

    case NGX_PLATFORM_T_BOOLEAN:
        if ((value->len == 4 && ngx_strncmp(value->data, "true", 4) == 0)
            || (value->len == 5 && ngx_strncmp(value->data, "false", 5) == 0))
        {
            return NGX_OK;
        }

        *problem = ngx_platform_problem_boolean;
        return NGX_DECLINED;

    case NGX_PLATFORM_T_ENUM:
        for (v = field->values; v && *v; v++) {
            if (ngx_strlen(*v) == value->len
                && ngx_strncmp(*v, value->data, value->len) == 0)
            {
                return NGX_OK;
            }
        }

        *problem = ngx_platform_problem_enum;
        return NGX_DECLINED;

    case NGX_PLATFORM_T_DATE:
    case NGX_PLATFORM_T_DATETIME:
        end = value->data + value->len;

        if (ngx_platform_check_date(value->data, end, &last) != NGX_OK
            || (last != end
                && (field->type == NGX_PLATFORM_T_DATE
                    || ngx_platform_check_time(last, end) != NGX_OK)))
        {
            *problem = (field->type == NGX_PLATFORM_T_DATE)
                       ? ngx_platform_problem_date
                       : ngx_platform_problem_datetime;
            return NGX_DECLINED;
        }

        return NGX_OK;

    case NGX_PLATFORM_T_IBAN:
        return ngx_platform_check_iban(value, problem);

    case NGX_PLATFORM_T_BIC:
        if (ngx_platform_check_bic(value) != NGX_OK) {
            *problem = ngx_platform_problem_bic;
            return NGX_DECLINED;
        }

        return NGX_OK;

    default: /* NGX_PLATFORM_T_STRING */
        if (!(field->flags & (NGX_PLATFORM_F_MIN|NGX_PLATFORM_F_MAX))) {
            /* a document's megabytes of base64 are not counted */
            return NGX_OK;
        }

        p = value->data;
        end = p + value->len;

        if (field->flags & NGX_PLATFORM_F_TRIM) {
            while (p < end && ngx_platform_is_space(*p)) {
                p++;
            }

            while (end > p && ngx_platform_is_space(end[-1])) {
                end--;
            }
        }

        len = ngx_platform_utf8_length(p, end - p);

        return ngx_platform_check_bounds(field, len,
                                         ngx_platform_problem_shorter,
                                         ngx_platform_problem_longer,
                                         problem);
    }

    /* numbers given as text: their bounds */

    return ngx_platform_check_bounds(field, d, ngx_platform_problem_min,
                                     ngx_platform_problem_max, problem);
}


/* F_MIN and F_MAX: a number's value, a string's or an array's length */

static ngx_int_t
ngx_platform_check_bounds(ngx_platform_field_t *field, double v,
    ngx_platform_problem_e below, ngx_platform_problem_e above,
    ngx_platform_problem_e *problem)
{
    if ((field->flags & NGX_PLATFORM_F_MIN) && v < field->min) {
        *problem = below;
        return NGX_DECLINED;
    }

    if ((field->flags & NGX_PLATFORM_F_MAX) && v > field->max) {
        *problem = above;
        return NGX_DECLINED;
    }

    return NGX_OK;
}


/* an optional '-' and at most 18 digits: no overflow anywhere after */

static ngx_int_t
ngx_platform_check_integer(ngx_str_t *value, int64_t *n)
{
    u_char      *p, *end;
    ngx_uint_t   negative;

    p = value->data;
    end = p + value->len;

    negative = (p < end && *p == '-');
    if (negative) {
        p++;
    }

    if (p == end || end - p > 18) {
        return NGX_DECLINED;
    }

    *n = 0;

    for ( /* void */ ; p < end; p++) {
        if (*p < '0' || *p > '9') {
            return NGX_DECLINED;
        }

        *n = *n * 10 + (*p - '0');
    }

    if (negative) {
        *n = -*n;
    }

    return NGX_OK;
}


/* YYYY-MM-DD, a real day of the Gregorian calendar */

static ngx_int_t
ngx_platform_check_date(u_char *p, u_char *end, u_char **last)
{
    ngx_uint_t  i, year, month, day, days;

    static ngx_uint_t  mdays[] = { 31, 28, 31, 30, 31, 30,
                                   31, 31, 30, 31, 30, 31 };

    if (end - p < 10 || p[4] != '-' || p[7] != '-') {
        return NGX_DECLINED;
    }

    for (i = 0; i < 10; i++) {
        if (i != 4 && i != 7 && (p[i] < '0' || p[i] > '9')) {
            return NGX_DECLINED;
        }
    }

    year = (p[0] - '0') * 1000 + (p[1] - '0') * 100 + (p[2] - '0') * 10
           + (p[3] - '0');
    month = (p[5] - '0') * 10 + (p[6] - '0');
    day = (p[8] - '0') * 10 + (p[9] - '0');

    if (year == 0 || month < 1 || month > 12 || day < 1) {
        return NGX_DECLINED;
    }

    days = mdays[month - 1];

    if (month == 2
        && ((year % 4 == 0 && year % 100 != 0) || year % 400 == 0))
    {
        days = 29;
    }

    if (day > days) {
        return NGX_DECLINED;
    }

    *last = p + 10;

    return NGX_OK;
}


/* "THH:MM[:SS[.fraction]]" then "Z" or "+HH:MM" / "-HH:MM", or nothing */

static ngx_int_t
ngx_platform_check_time(u_char *p, u_char *end)
{
    u_char      *digits;
    ngx_uint_t   hh, mm, ss;

    if (end - p < 6 || (*p != 'T' && *p != 't' && *p != ' ')
        || p[3] != ':')
    {
        return NGX_DECLINED;
    }

    p++;

    if (p[0] < '0' || p[0] > '9' || p[1] < '0' || p[1] > '9'
        || p[3] < '0' || p[3] > '9' || p[4] < '0' || p[4] > '9')
    {
        return NGX_DECLINED;
    }

    hh = (p[0] - '0') * 10 + (p[1] - '0');
    mm = (p[3] - '0') * 10 + (p[4] - '0');
    p += 5;

    if (hh > 23 || mm > 59) {
        return NGX_DECLINED;
    }

    if (p < end && *p == ':') {
        if (end - p < 3 || p[1] < '0' || p[1] > '9' || p[2] < '0'
            || p[2] > '9')
        {
            return NGX_DECLINED;
        }

        ss = (p[1] - '0') * 10 + (p[2] - '0');
        if (ss > 60) {
            return NGX_DECLINED;
        }

        p += 3;

        if (p < end && *p == '.') {
            p++;
            digits = p;

            while (p < end && *p >= '0' && *p <= '9') {
                p++;
            }

            /*
             * nanoseconds at most, and a leap second has none: PostgreSQL
             * refuses what is past either, and it must not see it
             */

            if (p == digits || p - digits > 9 || ss == 60) {
                return NGX_DECLINED;
            }
        }
    }

    if (p == end) {
        return NGX_OK;
    }

    if ((*p == 'Z' || *p == 'z') && p + 1 == end) {
        return NGX_OK;
    }

    /* offsets to +-15:59, what PostgreSQL reads (the world uses +-14) */

    if ((*p == '+' || *p == '-') && end - p == 6 && p[3] == ':'
        && p[1] >= '0' && p[1] <= '1' && p[2] >= '0' && p[2] <= '9'
        && (p[1] - '0') * 10 + (p[2] - '0') <= 15
        && p[4] >= '0' && p[4] <= '5' && p[5] >= '0' && p[5] <= '9')
    {
        return NGX_OK;
    }

    return NGX_DECLINED;
}


/*
 * ISO 13616 in electronic format: a country that uses IBANs, two check
 * digits, letters and digits to that country's length; moved four
 * characters to the end, letters as 10..35, the number mod 97 is 1
 */

static ngx_int_t
ngx_platform_check_iban(ngx_str_t *value, ngx_platform_problem_e *problem)
{
    u_char      *p, c;
    ngx_uint_t   i, lo, hi, mid, rest, length;
    ngx_int_t    cmp;

    if (value->len == 0) {
        /* no IBAN */
        return NGX_OK;
    }

    for (i = 0; i < value->len; i++) {
        c = value->data[i];

        if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
            || (i < 2 && !(c >= 'A' && c <= 'Z'))
            || (i >= 2 && i < 4 && !(c >= '0' && c <= '9')))
        {
            *problem = ngx_platform_problem_iban;
            return NGX_DECLINED;
        }
    }

    if (value->len < 4) {
        *problem = ngx_platform_problem_iban;
        return NGX_DECLINED;
    }

    length = 0;
    lo = 0;
    hi = sizeof(ngx_platform_iban_countries)
         / sizeof(ngx_platform_iban_country_t);

    while (lo < hi) {
        mid = (lo + hi) / 2;
        cmp = ngx_strncmp(value->data, ngx_platform_iban_countries[mid].country,
                          2);

        if (cmp == 0) {
            length = ngx_platform_iban_countries[mid].length;
            break;
        }

        if (cmp < 0) {
            hi = mid;

        } else {
            lo = mid + 1;
        }
    }

    if (length == 0) {
        *problem = ngx_platform_problem_iban_country;
        return NGX_DECLINED;
    }

    if (value->len != length) {
        *problem = ngx_platform_problem_iban_length;
        return NGX_DECLINED;
    }

    rest = 0;

    for (i = 0; i < length; i++) {
        p = &value->data[(i + 4) % length];

        if (*p >= 'A') {
            rest = (rest * 100 + (*p - 'A' + 10)) % 97;

        } else {
            rest = (rest * 10 + (*p - '0')) % 97;
        }
    }

    if (rest != 1) {
        *problem = ngx_platform_problem_iban_check;
        return NGX_DECLINED;
    }

    return NGX_OK;
}


/* ISO 9362: bank (4 letters), country (2), location (2), branch (3) */

static ngx_int_t
ngx_platform_check_bic(ngx_str_t *value)
{
    u_char      c;
    ngx_uint_t  i;

    if (value->len == 0) {
        /* no BIC */
        return NGX_OK;
    }

    if (value->len != 8 && value->len != 11) {
        return NGX_DECLINED;
    }

    for (i = 0; i < value->len; i++) {
        c = value->data[i];

        if (c >= 'A' && c <= 'Z') {
            continue;
        }

        if (i >= 6 && c >= '0' && c <= '9') {
            continue;
        }

        return NGX_DECLINED;
    }

    return NGX_OK;
}


/*
 * F_UNIQUE on a field of an array's items: each value once. The arrays
 * are bounded by their F_MAX, so comparing pairs is cheap enough.
 */

static ngx_int_t
ngx_platform_check_unique(ngx_http_request_t *r, ngx_platform_ctx_t *ctx,
    json_t *array, ngx_platform_field_t *field, ngx_str_t *name)
{
    u_char                *p;
    size_t                 i, j, len;
    json_t                *a, *b;
    ngx_str_t              item_name;
    ngx_platform_field_t  *f;

    len = json_array_size(array);

    for (f = field->items; f->name; f++) {

        if (!(f->flags & NGX_PLATFORM_F_UNIQUE)) {
            continue;
        }

        for (i = 1; i < len; i++) {
            a = json_object_get(json_array_get(array, i), f->name);

            if (a == NULL || json_is_null(a)) {
                continue;
            }

            for (j = 0; j < i; j++) {
                b = json_object_get(json_array_get(array, j), f->name);

                if (!ngx_platform_same_value(f, a, b)) {
                    continue;
                }

                item_name.data = ngx_pnalloc(r->pool, name->len
                                                      + NGX_SIZE_T_LEN + 3
                                                      + ngx_strlen(f->name));
                if (item_name.data == NULL) {
                    return NGX_HTTP_INTERNAL_SERVER_ERROR;
                }

                p = ngx_sprintf(item_name.data, "%V[%uz].%s", name, i,
                                f->name);
                item_name.len = p - item_name.data;

                return ngx_platform_field_fail(r, ctx, &item_name, f,
                                               ngx_platform_problem_repeated);
            }
        }
    }

    return NGX_OK;
}


/* uuids are the same in either case; other values as JSON compares */

static ngx_uint_t
ngx_platform_same_value(ngx_platform_field_t *field, json_t *a, json_t *b)
{
    if (b == NULL) {
        return 0;
    }

    if (field->type == NGX_PLATFORM_T_UUID && json_is_string(a)
        && json_is_string(b))
    {
        return json_string_length(a) == json_string_length(b)
               && ngx_strncasecmp((u_char *) json_string_value(a),
                                  (u_char *) json_string_value(b),
                                  json_string_length(a))
                  == 0;
    }

    return json_equal(a, b);
}


/* the problem of a value of the wrong JSON type for a string type */

static ngx_platform_problem_e
ngx_platform_type_problem(ngx_uint_t type)
{
    switch (type) {

    case NGX_PLATFORM_T_UUID:
        return ngx_platform_problem_uuid;

    case NGX_PLATFORM_T_ENUM:
        return ngx_platform_problem_enum;

    case NGX_PLATFORM_T_DATE:
        return ngx_platform_problem_date;

    case NGX_PLATFORM_T_DATETIME:
        return ngx_platform_problem_datetime;

    default:
        return ngx_platform_problem_string;
    }
}


/* characters, not bytes: a continuation byte does not count */

static size_t
ngx_platform_utf8_length(u_char *p, size_t len)
{
    size_t   n;
    u_char  *end;

    n = 0;

    for (end = p + len; p < end; p++) {
        if ((*p & 0xc0) != 0x80) {
            n++;
        }
    }

    return n;
}


/*
 * Where and why the body is not JSON, in the request's language: Jansson's
 * line and column, its reason in the module's words, and the body's text
 * it quotes, as is
 */

static char *
ngx_platform_json_error_detail(ngx_http_request_t *r, ngx_platform_ctx_t *ctx,
    json_error_t *error)
{
    u_char                      *p, *end, *near, *q;
    size_t                       len;
    ngx_str_t                    args[4];
    ngx_uint_t                   fr;
    ngx_platform_json_reason_t  *reason;

    fr = ngx_platform_text_french(ctx);

    p = (u_char *) error->text;
    end = p + ngx_strnlen(p, JSON_ERROR_TEXT_LENGTH - 1);

    for (reason = ngx_platform_json_reasons; reason->jansson; reason++) {
        len = ngx_strlen(reason->jansson);

        if ((size_t) (end - p) >= len
            && ngx_strncmp(p, reason->jansson, len) == 0)
        {
            break;
        }
    }

    /* a reason not known is left out: its words are Jansson's */

    p = reason->jansson ? p + len : end;

    near = ngx_strnstr(p, " near ", end - p);
    if (near == NULL) {
        near = end;
    }

    args[0].data = ngx_pnalloc(r->pool, 2 * NGX_INT_T_LEN
                                        + (end - p) + sizeof(" près de "));
    if (args[0].data == NULL) {
        return NULL;
    }

    args[0].len = ngx_sprintf(args[0].data, "%d", error->line) - args[0].data;

    args[1].data = args[0].data + args[0].len;
    args[1].len = ngx_sprintf(args[1].data, "%d", error->column)
                  - args[1].data;

    args[2].data = (u_char *) (fr ? reason->fr : reason->en);
    args[2].len = ngx_strlen(args[2].data);

    /* what follows the reason ("0x1"), then where: the body's own text */

    q = ngx_cpymem(args[1].data + args[1].len, p, near - p);
    args[3].data = args[1].data + args[1].len;

    if (near < end) {
        near += sizeof(" near ") - 1;

        if (!fr) {
            q = ngx_cpymem(q, " near ", sizeof(" near ") - 1);
            q = ngx_cpymem(q, near, end - near);

        } else if ((size_t) (end - near) == sizeof("end of file") - 1
                   && ngx_strncmp(near, "end of file", end - near) == 0)
        {
            q = ngx_cpymem(q, " à la fin du texte",
                           sizeof(" à la fin du texte") - 1);

        } else {
            q = ngx_cpymem(q, " près de ", sizeof(" près de ") - 1);
            q = ngx_cpymem(q, near, end - near);
        }
    }

    args[3].len = q - args[3].data;

    return ngx_platform_text_format(r,
               ngx_platform_text(ctx,
                                 "Malformed JSON at line %s, column %s: %s%s"),
               args, 4);
}


/* 400 naming the field, in the request's language */

static ngx_int_t
ngx_platform_field_fail(ngx_http_request_t *r, ngx_platform_ctx_t *ctx,
    ngx_str_t *name, ngx_platform_field_t *field,
    ngx_platform_problem_e problem)
{
    u_char       *p, *last;
    char         *detail;
    size_t        size;
    char        **v;
    double        d;
    u_char        bound[NGX_INT64_LEN + 32];
    ngx_str_t     extra, args[2];
    const char   *format;

    /* "at least 1 character", not "1 characters" */

    if (problem == ngx_platform_problem_shorter && field->min == 1) {
        problem = ngx_platform_problem_shorter_one;

    } else if (problem == ngx_platform_problem_longer && field->max == 1) {
        problem = ngx_platform_problem_longer_one;
    }

    format = ngx_platform_text_french(ctx) ? ngx_platform_problems[problem].fr
                                           : ngx_platform_problems[problem].en;

    ngx_str_null(&extra);

    switch (problem) {

    case ngx_platform_problem_min:
    case ngx_platform_problem_max:
    case ngx_platform_problem_shorter:
    case ngx_platform_problem_longer:
        d = (problem == ngx_platform_problem_min
             || problem == ngx_platform_problem_shorter)
            ? field->min : field->max;

        if (d == (double) (int64_t) d) {
            last = ngx_sprintf(bound, "%L", (int64_t) d);

        } else {
            last = ngx_sprintf(bound, "%.2f", d);
        }

        extra.data = bound;
        extra.len = last - bound;
        break;

    case ngx_platform_problem_enum:
        size = 0;
        for (v = field->values; v && *v; v++) {
            size += ngx_strlen(*v) + 2;
        }

        extra.data = ngx_pnalloc(r->pool, size + 1);
        if (extra.data == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        p = extra.data;
        for (v = field->values; v && *v; v++) {
            if (p != extra.data) {
                *p++ = ',';
                *p++ = ' ';
            }

            p = ngx_cpymem(p, *v, ngx_strlen(*v));
        }

        extra.len = p - extra.data;
        break;

    default:
        break;
    }

    args[0] = *name;
    args[1] = extra;

    /* the formats hold "%s" once or twice: name, then the extra */

    detail = ngx_platform_text_format(r, format, args, 2);
    if (detail == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_platform_fail(r, NGX_HTTP_BAD_REQUEST, "Bad request.",
                             detail);
}
