
/*
 * ngx_platform: JSON responses in the envelope of each family
 * (decisions.md section 1), and the headers every response carries.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_platform.h"


#define NGX_PLATFORM_DUMP_FLAGS  (JSON_COMPACT|JSON_REAL_PRECISION(17))


typedef struct {
    char       *en;
    char       *fr;
} ngx_platform_text_t;


static ngx_int_t ngx_platform_common_headers(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);
static const char *ngx_platform_text(ngx_platform_ctx_t *ctx,
    const char *en);
static const char *ngx_platform_status_text(ngx_uint_t status);
static ngx_uint_t ngx_platform_backend_error(ngx_int_t rc,
    const char **message, const char **detail);
static u_char *ngx_platform_json_escape(u_char *dst, const char *src);


/* French texts of the messages Envelope A families answer with */

static ngx_platform_text_t  ngx_platform_texts[] = {
    { "Request processed successfully.", "Requête traitée avec succès." },
    { "Bad request.", "Requête invalide." },
    { "Authentication required.", "Authentification requise." },
    { "Access denied.", "Accès refusé." },
    { "Resource not found.", "Ressource introuvable." },
    { "No such endpoint.", "Point de terminaison inconnu." },
    { "Method not allowed.", "Méthode non autorisée." },
    { "Conflict.", "Conflit." },
    { "Request body too large.", "Corps de requête trop volumineux." },
    { "Unsupported media type.", "Type de contenu non pris en charge." },
    { "Send the body as application/json.",
      "Envoyez le corps au format application/json." },
    { "Too many requests.", "Trop de requêtes." },
    { "Internal server error.", "Erreur interne du serveur." },
    { "Bad gateway.", "Passerelle incorrecte." },
    { "Service temporarily unavailable.",
      "Service temporairement indisponible." },
    { "Gateway timeout.", "Délai de la passerelle dépassé." },
    { "API version not supported.", "Version d'API non prise en charge." },
    { "Supported versions: 1, 1.0.", "Versions prises en charge : 1, 1.0." },
    { "The request body is not valid JSON.",
      "Le corps de la requête n'est pas un JSON valide." },
    { "The request body must be a JSON object.",
      "Le corps de la requête doit être un objet JSON." },
    { "A backend did not answer in time; retry shortly.",
      "Un service interne n'a pas répondu à temps ; réessayez bientôt." },
    { "A backend is unavailable; retry shortly.",
      "Un service interne est indisponible ; réessayez bientôt." },
    { "The request could not be completed.",
      "La requête n'a pas pu aboutir." },
    { "tenantId header is required.", "L'en-tête tenantId est requis." },
    { "tenantId header is invalid.", "L'en-tête tenantId est invalide." },

    /* authentication */
    { "Invalid token.", "Jeton invalide." },
    { "Invalid API key.", "Clé d'API invalide." },
    { "A bearer token is required.",
      "Un jeton d'accès (Bearer) est requis." },
    { "An API key is required.", "Une clé d'API est requise." },
    { "The API key is not valid.", "La clé d'API n'est pas valide." },
    { "The API key is not valid for this endpoint.",
      "La clé d'API n'est pas valable pour ce point de terminaison." },
    { "The tenantId header does not match the credentials.",
      "L'en-tête tenantId ne correspond pas aux identifiants." },
    { "The token is malformed.", "Le jeton est mal formé." },
    { "The token is too large.", "Le jeton est trop volumineux." },
    { "The token algorithm is not accepted.",
      "L'algorithme du jeton n'est pas accepté." },
    { "The token key is unknown.", "La clé du jeton est inconnue." },
    { "The token signature is invalid.",
      "La signature du jeton est invalide." },
    { "The token has no expiry.",
      "Le jeton n'a pas de date d'expiration." },
    { "The token has expired.", "Le jeton a expiré." },
    { "The token is not valid yet.", "Le jeton n'est pas encore valide." },
    { "The token issuer is not accepted.",
      "L'émetteur du jeton n'est pas accepté." },
    { "The token audience is not accepted.",
      "L'audience du jeton n'est pas acceptée." },
    { "The token has no tenant.", "Le jeton n'indique aucun locataire." },
    { "The token could not be checked.",
      "Le jeton n'a pas pu être vérifié." },
    { "The API key and the token belong to other tenants.",
      "La clé d'API et le jeton appartiennent à des locataires différents." },
    { "countryCode header is required.",
      "L'en-tête countryCode est requis." },
    { "countryCode header is invalid.",
      "L'en-tête countryCode est invalide." },

    /* person accounts */
    { "Person account retrieved.", "Compte de personne récupéré." },
    { "Invalid person account id.",
      "Identifiant de compte de personne invalide." },
    { "The id must be a uuid.", "L'identifiant doit être un uuid." },
    { "Person account not found.", "Compte de personne introuvable." },
    { "No person account with this id exists.",
      "Aucun compte de personne ne porte cet identifiant." },

    { NULL, NULL }
};


ngx_int_t
ngx_platform_send_json(ngx_http_request_t *r, ngx_uint_t status,
    json_t *body)
{
    u_char  *p;
    size_t   len, size;

    if (body == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    /* most bodies fit a first guess; else serialize again at its size */

    size = 4096;

    p = ngx_pnalloc(r->pool, size);
    if (p == NULL) {
        json_decref(body);
        return NGX_ERROR;
    }

    len = json_dumpb(body, (char *) p, size, NGX_PLATFORM_DUMP_FLAGS);

    if (len > size) {
        size = len;

        p = ngx_pnalloc(r->pool, size);
        if (p == NULL) {
            json_decref(body);
            return NGX_ERROR;
        }

        len = json_dumpb(body, (char *) p, size, NGX_PLATFORM_DUMP_FLAGS);
    }

    json_decref(body);

    if (len == 0 || len > size) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "platform: JSON serialization failed");
        return NGX_ERROR;
    }

    return ngx_platform_send_raw(r, status, p, len);
}


ngx_int_t
ngx_platform_send_ok(ngx_http_request_t *r, const char *message,
    json_t *data)
{
    json_t              *body;
    ngx_platform_ctx_t  *ctx;

    ctx = ngx_platform_get_ctx(r);

    switch (ctx->family->envelope) {

    case NGX_PLATFORM_ENVELOPE_A:
        body = json_pack("{s:b, s:s, s:[], s:o}",
                         "succeeded", 1,
                         "message", ngx_platform_text(ctx,
                                        message ? message
                                        : "Request processed successfully."),
                         "errors",
                         "data", data ? data : json_null());
        break;

    case NGX_PLATFORM_ENVELOPE_B:
        body = json_pack("{s:b, s:i, s:s, s:o, s:[]}",
                         "status", 1,
                         "statusCode", 0,
                         "message", message ? message : "Success",
                         "data", data ? data : json_object(),
                         "errors");
        break;

    default: /* NGX_PLATFORM_ENVELOPE_SALES and bare families */
        if (data == NULL) {
            return ngx_platform_send_empty(r, NGX_HTTP_OK);
        }

        return ngx_platform_send_json(r, NGX_HTTP_OK, data);
    }

    /* json_pack() steals data with "o", also when it fails */

    return ngx_platform_send_json(r, NGX_HTTP_OK, body);
}


ngx_int_t
ngx_platform_send_ok_raw(ngx_http_request_t *r, const char *message,
    u_char *data, size_t len)
{
    u_char              *p, *body;
    size_t               size;
    ngx_platform_ctx_t  *ctx;

    ctx = ngx_platform_get_ctx(r);

    if (ctx->family->envelope != NGX_PLATFORM_ENVELOPE_A
        && ctx->family->envelope != NGX_PLATFORM_ENVELOPE_B)
    {
        return ngx_platform_send_raw(r, NGX_HTTP_OK, data, len);
    }

    if (message == NULL) {
        message = (ctx->family->envelope == NGX_PLATFORM_ENVELOPE_A)
                  ? "Request processed successfully." : "Success";
    }

    message = ngx_platform_text(ctx, message);

    size = sizeof("{\"succeeded\":true,\"message\":,\"errors\":[],\"data\":}")
           + sizeof("{\"status\":true,\"statusCode\":0,\"message\":,"
                    "\"data\":,\"errors\":[]}")
           + 6 * ngx_strlen(message) + 2 + len;

    body = ngx_pnalloc(r->pool, size);
    if (body == NULL) {
        return NGX_ERROR;
    }

    if (ctx->family->envelope == NGX_PLATFORM_ENVELOPE_A) {
        p = ngx_cpymem(body, "{\"succeeded\":true,\"message\":",
                       sizeof("{\"succeeded\":true,\"message\":") - 1);
        p = ngx_platform_json_escape(p, message);
        p = ngx_cpymem(p, ",\"errors\":[],\"data\":",
                       sizeof(",\"errors\":[],\"data\":") - 1);
        p = ngx_cpymem(p, data, len);
        *p++ = '}';

    } else {
        p = ngx_cpymem(body, "{\"status\":true,\"statusCode\":0,\"message\":",
                   sizeof("{\"status\":true,\"statusCode\":0,\"message\":")
                   - 1);
        p = ngx_platform_json_escape(p, message);
        p = ngx_cpymem(p, ",\"data\":", sizeof(",\"data\":") - 1);
        p = ngx_cpymem(p, data, len);
        p = ngx_cpymem(p, ",\"errors\":[]}", sizeof(",\"errors\":[]}") - 1);
    }

    return ngx_platform_send_raw(r, NGX_HTTP_OK, body, p - body);
}


ngx_int_t
ngx_platform_send_error(ngx_http_request_t *r, ngx_uint_t status,
    const char *message, const char *detail)
{
    json_t              *body, *errors;
    ngx_str_t            value;
    ngx_platform_ctx_t  *ctx;

    ctx = ngx_platform_get_ctx(r);

    if (message == NULL) {
        message = ngx_platform_status_text(status);
    }

    if (detail == NULL) {
        detail = message;
    }

    if (status == NGX_HTTP_SERVICE_UNAVAILABLE) {
        ngx_str_set(&value, "1");
        if (ngx_platform_add_header(r, "Retry-After", &value) != NGX_OK) {
            return NGX_ERROR;
        }
    }

    if (status == NGX_HTTP_UNAUTHORIZED) {
        if (ctx && ctx->challenge.len) {
            value = ctx->challenge;

        } else {
            ngx_str_set(&value, "Bearer");
        }

        if (ngx_platform_add_header(r, "WWW-Authenticate", &value) != NGX_OK)
        {
            return NGX_ERROR;
        }
    }

    if (status == NGX_HTTP_NOT_ALLOWED && ctx && ctx->allow.len) {
        if (ngx_platform_add_header(r, "Allow", &ctx->allow) != NGX_OK) {
            return NGX_ERROR;
        }
    }

    if (ctx == NULL) {
        return status;
    }

    switch (ctx->family->envelope) {

    case NGX_PLATFORM_ENVELOPE_A:
        message = ngx_platform_text(ctx, message);
        detail = ngx_platform_text(ctx, detail);

        body = json_pack("{s:b, s:s, s:[s], s:n}",
                         "succeeded", 0,
                         "message", message,
                         "errors", detail,
                         "data");
        break;

    case NGX_PLATFORM_ENVELOPE_SALES:
        body = json_pack("{s:s, s:n, s:[s]}",
                         "message", message,
                         "data",
                         "errors", detail);
        break;

    default: /* NGX_PLATFORM_ENVELOPE_B, also for bare families */
        errors = json_pack("[{s:s, s:s}]",
                           "message", message,
                           "descriptiveMessage", detail);

        body = json_pack("{s:b, s:i, s:s, s:{}, s:o}",
                         "status", 0,
                         "statusCode", (json_int_t) status,
                         "message", message,
                         "data",
                         "errors", errors);
        break;
    }

    return ngx_platform_send_json(r, status, body);
}


ngx_int_t
ngx_platform_send_backend_error(ngx_http_request_t *r, ngx_int_t rc)
{
    ngx_uint_t   status;
    const char  *message, *detail;

    status = ngx_platform_backend_error(rc, &message, &detail);

    return ngx_platform_send_error(r, status, message, detail);
}


ngx_int_t
ngx_platform_backend_fail(ngx_http_request_t *r, ngx_int_t rc)
{
    ngx_uint_t   status;
    const char  *message, *detail;

    status = ngx_platform_backend_error(rc, &message, &detail);

    return ngx_platform_fail(r, status, message, detail);
}


static ngx_uint_t
ngx_platform_backend_error(ngx_int_t rc, const char **message,
    const char **detail)
{
    switch (rc) {

    case NGX_PLATFORM_TIMEOUT:
        *message = "Service temporarily unavailable.";
        *detail = "A backend did not answer in time; retry shortly.";
        return NGX_HTTP_SERVICE_UNAVAILABLE;

    case NGX_PLATFORM_UNAVAILABLE:
        *message = "Service temporarily unavailable.";
        *detail = "A backend is unavailable; retry shortly.";
        return NGX_HTTP_SERVICE_UNAVAILABLE;

    default:
        *message = "Internal server error.";
        *detail = "The request could not be completed.";
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
}


ngx_int_t
ngx_platform_send_empty(ngx_http_request_t *r, ngx_uint_t status)
{
    ngx_int_t            rc;
    ngx_platform_ctx_t  *ctx;

    ctx = ngx_platform_get_ctx(r);

    if (ctx && ngx_platform_common_headers(r, ctx) != NGX_OK) {
        return NGX_ERROR;
    }

    r->headers_out.status = status;
    r->headers_out.content_length_n = 0;
    r->header_only = 1;

    rc = ngx_http_send_header(r);

    if (rc == NGX_ERROR || rc > NGX_OK) {
        return rc;
    }

    return NGX_OK;
}


ngx_int_t
ngx_platform_send_raw(ngx_http_request_t *r, ngx_uint_t status,
    u_char *body, size_t len)
{
    static ngx_str_t  json = ngx_string("application/json; charset=utf-8");

    return ngx_platform_send_body(r, status, &json, body, len);
}


ngx_int_t
ngx_platform_send_body(ngx_http_request_t *r, ngx_uint_t status,
    ngx_str_t *type, u_char *body, size_t len)
{
    ngx_int_t            rc;
    ngx_buf_t           *b;
    ngx_chain_t          out;
    ngx_platform_ctx_t  *ctx;

    if (r->header_sent) {
        ngx_log_error(NGX_LOG_ALERT, r->connection->log, 0,
                      "platform: response header already sent");
        return NGX_ERROR;
    }

    ctx = ngx_platform_get_ctx(r);

    if (ctx && ngx_platform_common_headers(r, ctx) != NGX_OK) {
        return NGX_ERROR;
    }

    r->headers_out.status = status;
    r->headers_out.content_length_n = len;

    /* the type without its parameters, for charset and filters */
    r->headers_out.content_type = *type;
    r->headers_out.content_type_len = 0;
    while (r->headers_out.content_type_len < type->len
           && type->data[r->headers_out.content_type_len] != ';')
    {
        r->headers_out.content_type_len++;
    }
    r->headers_out.content_type_lowcase = NULL;

    rc = ngx_http_send_header(r);

    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    b = ngx_calloc_buf(r->pool);
    if (b == NULL) {
        return NGX_ERROR;
    }

    b->pos = body;
    b->last = body + len;
    b->memory = 1;
    b->last_buf = (r == r->main) ? 1 : 0;
    b->last_in_chain = 1;

    out.buf = b;
    out.next = NULL;

    return ngx_http_output_filter(r, &out);
}


static ngx_int_t
ngx_platform_common_headers(ngx_http_request_t *r, ngx_platform_ctx_t *ctx)
{
    ngx_str_t  lang;

    if (ngx_platform_add_header(r, "X-Request-Id", &ctx->request_id)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (ctx->family && ctx->family->envelope == NGX_PLATFORM_ENVELOPE_A) {
        if (ctx->lang == NGX_PLATFORM_LANG_FR) {
            ngx_str_set(&lang, "fr");

        } else {
            ngx_str_set(&lang, "en");
        }

        if (ngx_platform_add_header(r, "Content-Language", &lang) != NGX_OK) {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


ngx_int_t
ngx_platform_add_header(ngx_http_request_t *r, char *name, ngx_str_t *value)
{
    ngx_table_elt_t  *h;

    h = ngx_list_push(&r->headers_out.headers);
    if (h == NULL) {
        return NGX_ERROR;
    }

    h->hash = 1;
    h->key.data = (u_char *) name;
    h->key.len = ngx_strlen(name);
    h->value = *value;

    return NGX_OK;
}


static const char *
ngx_platform_text(ngx_platform_ctx_t *ctx, const char *en)
{
    ngx_platform_text_t  *t;

    if (ctx->lang != NGX_PLATFORM_LANG_FR) {
        return en;
    }

    for (t = ngx_platform_texts; t->en; t++) {
        if (ngx_strcmp(t->en, en) == 0) {
            return t->fr;
        }
    }

    return en;
}


static const char *
ngx_platform_status_text(ngx_uint_t status)
{
    switch (status) {
    case NGX_HTTP_BAD_REQUEST:
        return "Bad request.";
    case NGX_HTTP_UNAUTHORIZED:
        return "Authentication required.";
    case NGX_HTTP_FORBIDDEN:
        return "Access denied.";
    case NGX_HTTP_NOT_FOUND:
        return "Resource not found.";
    case NGX_HTTP_NOT_ALLOWED:
        return "Method not allowed.";
    case NGX_HTTP_CONFLICT:
        return "Conflict.";
    case NGX_HTTP_REQUEST_ENTITY_TOO_LARGE:
        return "Request body too large.";
    case NGX_HTTP_UNSUPPORTED_MEDIA_TYPE:
        return "Unsupported media type.";
    case 429:
        return "Too many requests.";
    case NGX_HTTP_BAD_GATEWAY:
        return "Bad gateway.";
    case NGX_HTTP_SERVICE_UNAVAILABLE:
        return "Service temporarily unavailable.";
    case NGX_HTTP_GATEWAY_TIME_OUT:
        return "Gateway timeout.";
    default:
        return "Internal server error.";
    }
}


/* a JSON string literal of a NUL-ended UTF-8 string; dst needs 6x+2 */

static u_char *
ngx_platform_json_escape(u_char *dst, const char *src)
{
    u_char            c;
    static u_char     hex[] = "0123456789abcdef";

    *dst++ = '"';

    while (*src) {
        c = (u_char) *src++;

        if (c == '"' || c == '\\') {
            *dst++ = '\\';
            *dst++ = c;

        } else if (c < 0x20) {
            *dst++ = '\\';
            *dst++ = 'u';
            *dst++ = '0';
            *dst++ = '0';
            *dst++ = hex[c >> 4];
            *dst++ = hex[c & 0xf];

        } else {
            *dst++ = c;
        }
    }

    *dst++ = '"';

    return dst;
}
