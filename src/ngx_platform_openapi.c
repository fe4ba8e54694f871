
/*
 * ngx_platform: the OpenAPI 3.1 document of the API (platform_openapi).
 *
 * The document is generated from what the module enforces: the endpoint
 * tables of every family (method, pattern and its typed captures, default
 * credentials, declared inputs, query arguments), the body fields the
 * validator checks (ngx_platform_schema.c), and the statements' declared
 * answers and outcomes (ngx_platform_op.h). A route added to a table is
 * in the document; one removed is gone.
 *
 * What the tables do not say is written beside them, in each family's
 * file: an endpoint's documentation (ngx_platform_doc_t: the shape of
 * its success data, an example on the demo data, the answers of its
 * code) and the family's shapes (docs/api.md). Nothing here knows an
 * endpoint or a family.
 *
 * What the tables say is derived: the statuses an operation can answer
 * (its credentials 401 and 403, its inputs and body 400, 413 and 415,
 * its statement's outcomes, its backends 429, 500 and 503, any rate
 * limit 429), and that every key of a shape is present ("required"),
 * unless the shape says which are ("required": [] for none). Components
 * nothing refers to are left out.
 *
 * nginx -t refuses an endpoint without its documentation. The document
 * is built with Jansson when the configuration loads, into the
 * configuration's memory; only the "servers" member is written per
 * request, from the location's platform_openapi_server (never from the
 * request: a Host header is the client's to choose).
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_platform.h"
#include "ngx_platform_op.h"
#include "ngx_platform_rate_limit.h"


/* an error a request may get: status, message and detail */
typedef struct {
    ngx_uint_t                 status;
    const char                *message;
    const char                *detail;
} ngx_platform_openapi_error_t;


#define NGX_PLATFORM_OPENAPI_ERRORS  64


typedef struct {
    ngx_platform_openapi_error_t  errors[NGX_PLATFORM_OPENAPI_ERRORS];
    ngx_uint_t                    n;
} ngx_platform_openapi_errors_t;


/* how a field's type is written in JSON Schema */
typedef struct {
    ngx_uint_t                 type;      /* NGX_PLATFORM_T_*; 0: ended */
    const char                *json;
    const char                *format;
    const char                *pattern;
    const char                *description;
} ngx_platform_openapi_type_t;


/* RFC 3986: unreserved, reserved (sub-delims, gen-delims) and "%" */
#define ngx_platform_openapi_url_char(c)                                     \
    (((c) >= '0' && (c) <= '9') || ((c) >= 'a' && (c) <= 'z')                \
     || ((c) >= 'A' && (c) <= 'Z')                                           \
     || ((c) != '\0' && ngx_strchr("-._~:/?#[]@!$&'()*+,;=%", c) != NULL))

#define ngx_platform_openapi_hex(c)                                          \
    (((c) >= '0' && (c) <= '9') || ((c) >= 'a' && (c) <= 'f')                \
     || ((c) >= 'A' && (c) <= 'F'))


#define NGX_PLATFORM_OPENAPI_HEAD                                            \
    "{\"openapi\":\"3.1.0\",\"servers\":[{\"url\":\""
#define NGX_PLATFORM_OPENAPI_TAIL     "\"}],"


static ngx_int_t ngx_platform_openapi_check(ngx_conf_t *cf,
    ngx_platform_family_t *family, ngx_platform_endpoint_t *ep);
static ngx_uint_t ngx_platform_openapi_is_object(const char *text,
    json_error_t *error);
static ngx_int_t ngx_platform_openapi_handler(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);
static const char *ngx_platform_openapi_server_fault(ngx_str_t *url);
static json_t *ngx_platform_openapi_build(ngx_log_t *log, json_t *schemas);
static json_t *ngx_platform_openapi_tags(void);
static ngx_int_t ngx_platform_openapi_prune(json_t *doc);
static void ngx_platform_openapi_refs(json_t *node, json_t *found);
static json_t *ngx_platform_openapi_resolve(json_t *doc, const char *ref);
static json_t *ngx_platform_openapi_paths(ngx_log_t *log);
static json_t *ngx_platform_openapi_components(json_t *schemas);
static json_t *ngx_platform_openapi_header_parameters(void);
static json_t *ngx_platform_openapi_schemas(ngx_log_t *log);
static ngx_int_t ngx_platform_openapi_schemas_add(json_t *schemas,
    ngx_platform_family_t *family, ngx_log_t *log);
static void ngx_platform_openapi_require(json_t *schema);
static ngx_int_t ngx_platform_openapi_endpoint(json_t *paths,
    ngx_platform_family_t *family, ngx_platform_endpoint_t *ep);
static json_t *ngx_platform_openapi_operation(ngx_platform_family_t *family,
    ngx_platform_endpoint_t *ep, const char *method);
static ngx_int_t ngx_platform_openapi_parameters(json_t *params,
    ngx_platform_family_t *family, ngx_platform_endpoint_t *ep,
    json_t *example);
static json_t *ngx_platform_openapi_user(json_t *example);
static ngx_int_t ngx_platform_openapi_query(json_t *params,
    ngx_platform_endpoint_t *ep, json_t *example);
static json_t *ngx_platform_openapi_security(ngx_platform_endpoint_t *ep);
static json_t *ngx_platform_openapi_request_body(ngx_platform_endpoint_t *ep,
    json_t *example);
static json_t *ngx_platform_openapi_head(json_t *op,
    ngx_platform_endpoint_t *ep);
static json_t *ngx_platform_openapi_path(ngx_platform_endpoint_t *ep,
    json_t *params, json_t *example);
static json_t *ngx_platform_openapi_field(ngx_platform_field_t *f,
    ngx_uint_t query);
static json_t *ngx_platform_openapi_enum(ngx_platform_field_t *f);
static const char *ngx_platform_openapi_bound_name(ngx_platform_field_t *f,
    ngx_uint_t max);
static json_t *ngx_platform_openapi_bound(ngx_platform_field_t *f,
    double bound);
static json_t *ngx_platform_openapi_object(ngx_platform_field_t *fields);
static json_t *ngx_platform_openapi_responses(ngx_platform_family_t *family,
    ngx_platform_endpoint_t *ep);
static json_t *ngx_platform_openapi_success(ngx_platform_family_t *family,
    ngx_platform_endpoint_t *ep);
static json_t *ngx_platform_openapi_envelope(ngx_platform_family_t *family,
    ngx_platform_endpoint_t *ep, json_t *data, const char *message);
static json_t *ngx_platform_openapi_error_response(
    ngx_platform_family_t *family, ngx_platform_openapi_errors_t *errors,
    ngx_uint_t status);
static json_t *ngx_platform_openapi_response_headers(
    ngx_platform_family_t *family, ngx_uint_t status);
static void ngx_platform_openapi_errors(ngx_platform_family_t *family,
    ngx_platform_endpoint_t *ep, ngx_platform_openapi_errors_t *e);
static void ngx_platform_openapi_load_errors(ngx_platform_family_t *family,
    ngx_platform_endpoint_t *ep, ngx_platform_openapi_errors_t *e);
static void ngx_platform_openapi_credential_errors(
    ngx_platform_endpoint_t *ep, ngx_platform_openapi_errors_t *e);
static void ngx_platform_openapi_input_errors(ngx_platform_endpoint_t *ep,
    ngx_platform_openapi_errors_t *e);
static void ngx_platform_openapi_body_errors(ngx_platform_endpoint_t *ep,
    ngx_platform_openapi_errors_t *e);
static void ngx_platform_openapi_statement_errors(ngx_platform_sql_t *sql,
    ngx_platform_openapi_errors_t *e);
static void ngx_platform_openapi_add_error(ngx_platform_openapi_errors_t *e,
    ngx_uint_t status, const char *message, const char *detail);
static json_t *ngx_platform_openapi_error_body(ngx_uint_t envelope,
    ngx_platform_openapi_error_t *err);
static json_t *ngx_platform_openapi_operation_id(ngx_platform_endpoint_t *ep,
    const char *method);
static json_t *ngx_platform_openapi_ref(const char *kind, const char *name);


static ngx_platform_endpoint_t  ngx_platform_openapi_endpoints[] = {
    { NGX_HTTP_GET, "*", NGX_PLATFORM_AUTH_NONE, 0, NULL, NULL, NULL, NULL,
      NULL, ngx_platform_openapi_handler,
      NULL },
    { 0, NULL, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL }
};


ngx_platform_family_t  ngx_platform_openapi_family = {
    ngx_string("openapi"),
    NGX_PLATFORM_ENVELOPE_B,
    0,
    ngx_platform_openapi_endpoints,
    NULL,
    0,
    NULL,
    NULL
};


/*
 * The error envelopes of ngx_platform_response.c; the shapes of the data
 * are the families' (ngx_platform_family_t schemas).
 */

static const char  ngx_platform_openapi_envelopes[] =
    "{"
    "\"EnvelopeAError\":{\"type\":\"object\","
     "\"description\":\"An error in Envelope A: errors holds the detail.\","
     "\"required\":[\"succeeded\",\"message\",\"errors\",\"data\"],"
     "\"properties\":{\"succeeded\":{\"const\":false},"
     "\"message\":{\"type\":\"string\"},"
     "\"errors\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},"
     "\"minItems\":1},"
     "\"data\":{\"type\":\"null\"}}},"
    "\"EnvelopeBError\":{\"type\":\"object\","
     "\"description\":\"An error in Envelope B: statusCode is the HTTP "
     "status, errors one item with the message and the detail.\","
     "\"required\":[\"status\",\"statusCode\",\"message\",\"data\","
     "\"errors\"],"
     "\"properties\":{\"status\":{\"const\":false},"
     "\"statusCode\":{\"type\":\"integer\"},"
     "\"message\":{\"type\":\"string\"},"
     "\"data\":{\"type\":\"object\",\"additionalProperties\":false},"
     "\"errors\":{\"type\":\"array\",\"minItems\":1,"
     "\"items\":{\"$ref\":\"#/components/schemas/EnvelopeBErrorItem\"}}"
     "}},"
    "\"EnvelopeBErrorItem\":{\"type\":\"object\","
     "\"required\":[\"message\",\"descriptiveMessage\"],"
     "\"properties\":{\"message\":{\"type\":\"string\"},"
     "\"descriptiveMessage\":{\"type\":\"string\"}}},"
    "\"SalesError\":{\"type\":\"object\","
     "\"description\":\"An error in the sales envelope: errors holds the "
     "detail.\","
     "\"required\":[\"message\",\"data\",\"errors\"],"
     "\"properties\":{\"message\":{\"type\":\"string\"},"
     "\"data\":{\"type\":\"null\"},"
     "\"errors\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},"
     "\"minItems\":1}}}"
    "}";


/* by type; the last row, a string, is also any type not listed */

static ngx_platform_openapi_type_t  ngx_platform_openapi_types[] = {

    { NGX_PLATFORM_T_UUID, "string", "uuid", NULL, NULL },
    { NGX_PLATFORM_T_INTEGER, "integer", NULL, NULL, NULL },
    { NGX_PLATFORM_T_NUMBER, "number", NULL, NULL, NULL },
    { NGX_PLATFORM_T_BOOLEAN, "boolean", NULL, NULL, NULL },
    { NGX_PLATFORM_T_OBJECT, "object", NULL, NULL, NULL },
    { NGX_PLATFORM_T_ARRAY, "array", NULL, NULL, NULL },
    { NGX_PLATFORM_T_ENUM, "string", NULL, NULL, NULL },
    { NGX_PLATFORM_T_DATE, "string", "date", NULL, NULL },

    { NGX_PLATFORM_T_DATETIME, "string", NULL,
      "^[0-9]{4}-[0-9]{2}-[0-9]{2}([Tt ][0-9]{2}:[0-9]{2}"
      "(:[0-9]{2}(\\.[0-9]{1,9})?)?([Zz]|[+-][0-9]{2}:[0-9]{2})?)?$",
      "An ISO 8601 date, or a date-time with an optional offset "
      "(none: UTC)." },

    { NGX_PLATFORM_T_IBAN, "string", NULL,
      "^([A-Z]{2}[0-9]{2}[A-Z0-9]{11,30})?$",
      "An IBAN (ISO 13616) in electronic format, or \"\": none." },

    { NGX_PLATFORM_T_BIC, "string", NULL,
      "^([A-Z]{6}[A-Z0-9]{2}([A-Z0-9]{3})?)?$",
      "A BIC (ISO 9362), or \"\": none." },

    /* NGX_PLATFORM_T_STRING */
    { 0, "string", NULL, NULL, NULL }
};


/*
 * Every family of the registry is checked, used by a location or not: the
 * document describes them all, and a row without its documentation is a
 * defect of the build that any nginx -t should tell. Operator families
 * ("*": every path of their location) are not in the document.
 */

ngx_int_t
ngx_platform_openapi_init(ngx_conf_t *cf)
{
    char                      *text;
    size_t                     len;
    json_t                    *doc, *schemas;
    ngx_uint_t                 f;
    ngx_platform_family_t     *family;
    ngx_platform_endpoint_t   *ep;
    ngx_platform_main_conf_t  *pmcf;

    for (f = 0; ngx_platform_families[f]; f++) {
        family = ngx_platform_families[f];

        for (ep = family->endpoints; ep->pattern; ep++) {
            if (ep->pattern[0] != '*'
                && ngx_platform_openapi_check(cf, family, ep) != NGX_OK)
            {
                return NGX_ERROR;
            }
        }
    }

    /* the shapes too: each family's text parsed, each name one family's */

    schemas = ngx_platform_openapi_schemas(cf->log);
    if (schemas == NULL) {
        return NGX_ERROR;
    }

    pmcf = ngx_http_conf_get_module_main_conf(cf, ngx_platform_module);

    if (pmcf->routes[ngx_platform_openapi_family.index] == NULL) {
        json_decref(schemas);
        return NGX_OK;
    }

    doc = ngx_platform_openapi_build(cf->log, schemas);
    if (doc == NULL) {
        return NGX_ERROR;
    }

    text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);

    if (text == NULL) {
        return NGX_ERROR;
    }

    /* the configuration's: a reload builds the new one's */

    len = ngx_strlen(text);

    pmcf->openapi.data = ngx_pnalloc(cf->pool, len);
    if (pmcf->openapi.data == NULL) {
        free(text);
        return NGX_ERROR;
    }

    ngx_memcpy(pmcf->openapi.data, text, len);
    pmcf->openapi.len = len;

    free(text);

    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, cf->log, 0,
                   "openapi: the document built, %uz bytes", len);

    return NGX_OK;
}


/* what the document needs of an endpoint beyond its row */

static ngx_int_t
ngx_platform_openapi_check(ngx_conf_t *cf, ngx_platform_family_t *family,
    ngx_platform_endpoint_t *ep)
{
    u_char               method[8];
    ngx_uint_t           i;
    const char          *name, *fault;
    json_error_t         error;
    ngx_platform_doc_t  *doc;

    doc = ep->doc;

    error.text[0] = '\0';

    if (doc == NULL) {
        fault = "has no documentation (ngx_platform_doc_t)";

    } else if (doc->summary == NULL || doc->summary[0] == '\0') {
        fault = "has no summary";

    } else if (doc->data == NULL
               && !(ep->sql && ep->sql->answer == NGX_PLATFORM_ANSWER_EMPTY))
    {
        fault = "has no success data shape";

    } else if (doc->example == NULL) {
        fault = "has no example";

    } else if (doc->data && !ngx_platform_openapi_is_object(doc->data, &error))
    {
        fault = "has a success data shape that is not a JSON object: ";

    } else if (!ngx_platform_openapi_is_object(doc->example, &error)) {
        fault = "has an example that is not a JSON object: ";

    } else {
        return NGX_OK;
    }

    /* "GET", as the method is written */

    name = ngx_platform_method_name(ep->method);

    for (i = 0; name && name[i] && i < sizeof(method) - 1; i++) {
        method[i] = ngx_toupper(name[i]);
    }

    method[i] = '\0';

    ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                  "platform_openapi: the endpoint %s \"%s\" of platform_%V "
                  "%s%s", method, ep->pattern, &family->name, fault,
                  error.text);

    return NGX_ERROR;
}


/* JSON text of an object; else why not in error->text */

static ngx_uint_t
ngx_platform_openapi_is_object(const char *text, json_error_t *error)
{
    json_t      *v;
    ngx_uint_t   object;

    v = json_loads(text, 0, error);
    if (v == NULL) {
        return 0;
    }

    object = json_is_object(v);

    if (!object) {
        ngx_cpystrn((u_char *) error->text, (u_char *) "another JSON value",
                    JSON_ERROR_TEXT_LENGTH);
    }

    json_decref(v);

    return object;
}


static ngx_int_t
ngx_platform_openapi_handler(ngx_http_request_t *r, ngx_platform_ctx_t *ctx)
{
    u_char                    *body, *p;
    ngx_str_t                 *text, *url;
    ngx_platform_loc_conf_t   *plcf;
    ngx_platform_main_conf_t  *pmcf;

    pmcf = ngx_http_get_module_main_conf(r, ngx_platform_module);
    plcf = ngx_http_get_module_loc_conf(r, ngx_platform_module);

    text = &pmcf->openapi;
    url = &plcf->openapi_server;

    if (text->len == 0) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    /* the URL needs no escaping: ngx_platform_openapi_server() saw it */

    body = ngx_pnalloc(r->pool, sizeof(NGX_PLATFORM_OPENAPI_HEAD) - 1
                                + url->len
                                + sizeof(NGX_PLATFORM_OPENAPI_TAIL) - 1
                                + text->len - 1);
    if (body == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    p = ngx_cpymem(body, NGX_PLATFORM_OPENAPI_HEAD,
                   sizeof(NGX_PLATFORM_OPENAPI_HEAD) - 1);
    p = ngx_cpymem(p, url->data, url->len);
    p = ngx_cpymem(p, NGX_PLATFORM_OPENAPI_TAIL,
                   sizeof(NGX_PLATFORM_OPENAPI_TAIL) - 1);

    /* the document past its "{" */
    p = ngx_cpymem(p, text->data + 1, text->len - 1);

    return ngx_platform_send_raw(r, NGX_HTTP_OK, body, p - body);
}


/*
 * platform_openapi_server URL: a path ("/", "/platform": relative to the
 * host the document was fetched from) or an http:// or https:// URL,
 * written into the document as it is; a trailing "/" is dropped, but of
 * "/", since the paths begin with one.
 */

char *
ngx_platform_openapi_server(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    char  *p = conf;

    ngx_str_t   *field, *value, url;
    const char  *fault;

    field = (ngx_str_t *) (p + cmd->offset);

    if (field->data) {
        return "is duplicate";
    }

    value = cf->args->elts;
    url = value[1];

    fault = ngx_platform_openapi_server_fault(&url);

    if (fault) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "platform_openapi_server \"%V\" %s", &url, fault);
        return NGX_CONF_ERROR;
    }

    while (url.len > 1 && url.data[url.len - 1] == '/') {
        url.len--;
    }

    *field = url;

    return NGX_CONF_OK;
}


/* why a server URL cannot be the document's, or NULL */

static const char *
ngx_platform_openapi_server_fault(ngx_str_t *url)
{
    u_char      *p, *last, *host;
    ngx_uint_t   i;

    p = url->data;
    last = p + url->len;

    if (url->len == 0) {
        return "is empty";
    }

    for (i = 0; i < url->len; i++) {
        if (p[i] == '?' || p[i] == '#') {
            return "has a query or a fragment: the paths are appended to it";
        }

        if (p[i] == '{' || p[i] == '}') {
            return "names a server variable, which the document does not "
                   "declare";
        }

        if (p[i] == '%'
            && (i + 2 >= url->len || !ngx_platform_openapi_hex(p[i + 1])
                || !ngx_platform_openapi_hex(p[i + 2])))
        {
            return "has a \"%\" that is not followed by two hexadecimal "
                   "digits";
        }

        if (!ngx_platform_openapi_url_char(p[i])) {
            return "has a character a URL does not hold as it is (a space, "
                   "a quote, a backslash, a control or non-ASCII character): "
                   "percent-encode it";
        }
    }

    if (p[0] == '/') {
        return (url->len > 1 && p[1] == '/')
               ? "begins with \"//\": write the scheme (https://...)"
               : NULL;
    }

    if (url->len >= 8 && ngx_strncasecmp(p, (u_char *) "https://", 8) == 0) {
        host = p + 8;

    } else if (url->len >= 7
               && ngx_strncasecmp(p, (u_char *) "http://", 7) == 0)
    {
        host = p + 7;

    } else {
        return "is neither a path beginning with \"/\" nor an http:// or "
               "https:// URL";
    }

    if (host == last || *host == '/') {
        return "has no host";
    }

    return NULL;
}


/* the document, every family of the registry, with their shapes (stolen) */

static json_t *
ngx_platform_openapi_build(ngx_log_t *log, json_t *schemas)
{
    json_t  *doc, *paths, *components, *tags;

    components = ngx_platform_openapi_components(schemas);
    if (components == NULL) {
        return NULL;
    }

    paths = ngx_platform_openapi_paths(log);
    if (paths == NULL) {
        json_decref(components);
        return NULL;
    }

    tags = ngx_platform_openapi_tags();
    if (tags == NULL) {
        json_decref(components);
        json_decref(paths);
        return NULL;
    }

    doc = json_pack("{s:{s:s, s:s, s:s, s:{s:s, s:s}}, s:o, s:o, s:o}",
        "info",
          "title", "ngx_platform API",
          "version", "1",
          "description",
          "The platform API served by ngx_platform, generated from the "
          "endpoint tables and body schemas the module enforces. Every "
          "response carries X-Request-Id. A known path asked with a method "
          "it does not serve is 405 with an Allow header, an unknown path "
          "inside a location of the module 404, in the family's envelope. "
          "Envelope A operations answer in French with Accept-Language: "
          "fr. Each location's platform_auth may replace an operation's "
          "credentials. Every key of a success's shapes is present (null "
          "where the type allows it), but in the stored documents of a "
          "sale, which are as the sale's makers stored them. The examples "
          "use the demo data (scripts/demo-data.sql); bearer tokens for "
          "its tenant-demo: scripts/dev token.",
          "license",
            "name", "Proprietary: all rights reserved",
            "identifier", "LicenseRef-Proprietary",
        "tags", tags,
        "paths", paths,
        "components", components);

    if (doc && ngx_platform_openapi_prune(doc) != NGX_OK) {
        json_decref(doc);
        return NULL;
    }

    return doc;
}


/* a tag per family in the document: what serves it, in which envelope */

static json_t *
ngx_platform_openapi_tags(void)
{
    u_char                  text[256], *p;
    json_t                 *tags;
    ngx_uint_t              f;
    const char             *envelope;
    ngx_platform_family_t  *family;

    tags = json_array();
    if (tags == NULL) {
        return NULL;
    }

    for (f = 0; ngx_platform_families[f]; f++) {
        family = ngx_platform_families[f];

        if (family->endpoints->pattern == NULL
            || family->endpoints->pattern[0] == '*')
        {
            continue;
        }

        envelope = (family->envelope == NGX_PLATFORM_ENVELOPE_A)
                   ? "Envelope A, in English or French"
                   : (family->envelope == NGX_PLATFORM_ENVELOPE_SALES)
                     ? "the sales envelope" : "Envelope B";

        p = ngx_snprintf(text, sizeof(text) - 1,
                         "Served by a location with platform_%V; answers "
                         "in %s.", &family->name, envelope);
        *p = '\0';

        if (json_array_append_new(tags,
                                  json_pack("{s:s#, s:s}",
                                            "name", family->name.data,
                                            (int) family->name.len,
                                            "description", (char *) text))
            != 0)
        {
            json_decref(tags);
            return NULL;
        }
    }

    return tags;
}


/*
 * Components nothing refers to are left out: those the operations name,
 * and those these name, and so on, stay (securitySchemes, named by the
 * operations' requirements, all stay).
 */

static ngx_int_t
ngx_platform_openapi_prune(json_t *doc)
{
    char         ref[256];
    void        *iter;
    json_t      *components, *used, *pending, *kind, *v;
    ngx_int_t    rc;
    ngx_uint_t   i;
    const char  *name;
    static char *kinds[] = { "schemas", "parameters", "headers" };

    components = json_object_get(doc, "components");
    used = json_object();
    pending = json_object();

    rc = NGX_ERROR;

    if (used == NULL || pending == NULL) {
        goto done;
    }

    ngx_platform_openapi_refs(json_object_get(doc, "paths"), pending);

    while ((iter = json_object_iter(pending)) != NULL) {
        ngx_cpystrn((u_char *) ref, (u_char *) json_object_iter_key(iter),
                    sizeof(ref));
        json_object_del(pending, ref);

        if (json_object_get(used, ref)) {
            continue;
        }

        json_object_set_new(used, ref, json_true());

        v = ngx_platform_openapi_resolve(doc, ref);
        if (v == NULL) {
            /* a reference to nothing: a defect of a family's shapes */
            goto done;
        }

        ngx_platform_openapi_refs(v, pending);
    }

    for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        kind = json_object_get(components, kinds[i]);

        json_object_foreach_safe(kind, iter, name, v) {
            ngx_snprintf((u_char *) ref, sizeof(ref), "#/components/%s/%s%Z",
                         kinds[i], name);

            if (json_object_get(used, ref) == NULL) {
                json_object_del(kind, name);
            }
        }

        if (kind && json_object_size(kind) == 0) {
            json_object_del(components, kinds[i]);
        }
    }

    rc = NGX_OK;

done:

    json_decref(used);
    json_decref(pending);

    return rc;
}


/* every "$ref" under node, as the keys of found */

static void
ngx_platform_openapi_refs(json_t *node, json_t *found)
{
    size_t       i;
    json_t      *v;
    const char  *key;

    if (json_is_array(node)) {
        json_array_foreach(node, i, v) {
            ngx_platform_openapi_refs(v, found);
        }

        return;
    }

    json_object_foreach(node, key, v) {
        if (ngx_strcmp(key, "$ref") == 0 && json_is_string(v)) {
            json_object_set_new(found, json_string_value(v), json_true());

        } else {
            ngx_platform_openapi_refs(v, found);
        }
    }
}


/* "#/components/schemas/Name" in the document, or NULL */

static json_t *
ngx_platform_openapi_resolve(json_t *doc, const char *ref)
{
    u_char  *p, *q, part[128];
    json_t  *node;

    if (ref[0] != '#' || ref[1] != '/') {
        return NULL;
    }

    node = doc;
    p = (u_char *) ref + 2;

    while (node && *p) {
        q = part;

        while (*p && *p != '/' && q < part + sizeof(part) - 1) {
            *q++ = *p++;
        }

        *q = '\0';

        if (*p == '/') {
            p++;
        }

        node = json_object_get(node, (char *) part);
    }

    return node;
}


/* every endpoint's operations, by path template */

static json_t *
ngx_platform_openapi_paths(ngx_log_t *log)
{
    json_t                   *paths;
    ngx_uint_t                f;
    ngx_platform_family_t    *family;
    ngx_platform_endpoint_t  *ep;

    paths = json_object();
    if (paths == NULL) {
        return NULL;
    }

    for (f = 0; ngx_platform_families[f]; f++) {
        family = ngx_platform_families[f];

        for (ep = family->endpoints; ep->pattern; ep++) {

            /* operator families answer every path of their location */
            if (ep->pattern[0] == '*') {
                continue;
            }

            if (ngx_platform_openapi_endpoint(paths, family, ep) != NGX_OK) {
                ngx_log_error(NGX_LOG_EMERG, log, 0,
                              "platform_openapi: the document of the "
                              "endpoint \"%s\" of platform_%V failed",
                              ep->pattern, &family->name);
                json_decref(paths);
                return NULL;
            }
        }
    }

    return paths;
}


/* the shapes (stolen), credentials, headers and responses' headers */

static json_t *
ngx_platform_openapi_components(json_t *schemas)
{
    return json_pack(
        "{s:o, s:{s:{s:s, s:s, s:s, s:s}, s:{s:s, s:s, s:s, s:s}}, s:o,"
        " s:{s:{s:s, s:{s:s}}, s:{s:s, s:{s:s}}, s:{s:s, s:{s:s}},"
        " s:{s:s, s:{s:s}}}}",

        "schemas", schemas,

        "securitySchemes",
          "bearerAuth",
            "type", "http", "scheme", "bearer", "bearerFormat", "JWT",
            "description", "A JWT whose tenantId claim is the caller's "
                           "tenant (sub: the user, merchantId: the "
                           "merchant).",
          "apiKey",
            "type", "apiKey", "in", "header", "name", "apiKey",
            "description", "An API key plk_<id>.<secret> made with "
                           "scripts/apikey.",

        "parameters", ngx_platform_openapi_header_parameters(),

        "headers",
          "X-Request-Id",
            "description", "The request's id.", "schema", "type", "string",
          "Retry-After",
            "description", "Seconds to wait before a retry.",
            "schema", "type", "string",
          "WWW-Authenticate",
            "description", "Bearer, or Bearer error=\"invalid_token\" "
                           "with why.",
            "schema", "type", "string",
          "Content-Language",
            "description", "en or fr.", "schema", "type", "string");
}


/* the headers the core reads, as components.parameters */

static json_t *
ngx_platform_openapi_header_parameters(void)
{
    return json_pack(
        "{s:{s:s, s:s, s:b, s:s, s:{s:s, s:i, s:i, s:s}, s:s},"
        " s:{s:s, s:s, s:b, s:s, s:{s:s, s:i, s:i, s:s}, s:s},"
        " s:{s:s, s:s, s:b, s:{s:s, s:i, s:i, s:s}, s:s},"
        " s:{s:s, s:s, s:b, s:s, s:{s:s, s:i, s:s}, s:s},"
        " s:o,"
        " s:{s:s, s:s, s:b, s:s, s:{s:s}, s:s},"
        " s:{s:s, s:s, s:b, s:s, s:{s:s, s:i, s:i, s:s}}}",

        "tenantId",
          "name", "tenantId", "in", "header", "required", 1,
          "description", "The caller's tenant; with a credential it must "
                         "be the credential's tenant.",
          "schema", "type", "string", "minLength", 1, "maxLength", 128,
          "pattern", "^[!-9;-~]+$",
          "example", "tenant-demo",

        "tenantIdOptional",
          "name", "tenantId", "in", "header", "required", 0,
          "description", "Optional: the tenant comes from the "
                         "credentials; when sent it must be theirs.",
          "schema", "type", "string", "minLength", 1, "maxLength", 128,
          "pattern", "^[!-9;-~]+$",
          "example", "tenant-demo",

        "countryCode",
          "name", "countryCode", "in", "header", "required", 1,
          "schema", "type", "string", "minLength", 1, "maxLength", 128,
          "pattern", "^[!-9;-~]+$",
          "example", "NG",

        "countryCodeOptional",
          "name", "countryCode", "in", "header", "required", 0,
          "description", "When sent, only the country's rows are "
                         "visible.",
          "schema", "type", "string", "maxLength", 128,
          "pattern", "^[!-9;-~]*$",
          "example", "NG",

        "userId", ngx_platform_openapi_user(json_string("lab-admin-1")),

        "acceptLanguage",
          "name", "Accept-Language", "in", "header", "required", 0,
          "description", "fr...: messages in French; else English.",
          "schema", "type", "string",
          "example", "fr",

        "requestId",
          "name", "X-Request-Id", "in", "header", "required", 0,
          "description", "Echoed in X-Request-Id and the error log; else "
                         "one is made.",
          "schema", "type", "string", "minLength", 1, "maxLength", 64,
          "pattern", "^[A-Za-z0-9._:-]+$");
}


/* the error envelopes, then the shapes of every family */

static json_t *
ngx_platform_openapi_schemas(ngx_log_t *log)
{
    json_t                 *schemas;
    ngx_uint_t              f;
    json_error_t            error;
    ngx_platform_family_t  *family;

    schemas = json_loads(ngx_platform_openapi_envelopes, 0, &error);
    if (schemas == NULL) {
        ngx_log_error(NGX_LOG_EMERG, log, 0,
                      "platform_openapi: the error envelopes: %s at %d",
                      error.text, error.position);
        return NULL;
    }

    for (f = 0; ngx_platform_families[f]; f++) {
        family = ngx_platform_families[f];

        if (family->schemas
            && ngx_platform_openapi_schemas_add(schemas, family, log)
               != NGX_OK)
        {
            json_decref(schemas);
            return NULL;
        }
    }

    return schemas;
}


/* a family's shapes among the document's: each name is one family's */

static ngx_int_t
ngx_platform_openapi_schemas_add(json_t *schemas,
    ngx_platform_family_t *family, ngx_log_t *log)
{
    json_t        *own, *v;
    const char    *name;
    json_error_t   error;

    own = json_loads(family->schemas, 0, &error);
    if (own == NULL || !json_is_object(own)) {
        ngx_log_error(NGX_LOG_EMERG, log, 0,
                      "platform_openapi: the schemas of platform_%V are "
                      "not a JSON object: %s", &family->name,
                      own ? "another JSON value" : error.text);
        json_decref(own);
        return NGX_ERROR;
    }

    json_object_foreach(own, name, v) {
        if (json_object_get(schemas, name)) {
            ngx_log_error(NGX_LOG_EMERG, log, 0,
                          "platform_openapi: the schema \"%s\" of "
                          "platform_%V is another's already",
                          name, &family->name);
            json_decref(own);
            return NGX_ERROR;
        }

        ngx_platform_openapi_require(v);

        json_object_set(schemas, name, v);
    }

    json_decref(own);

    return NGX_OK;
}


/*
 * Every key of a shape is present (docs/api.md): an object schema with
 * properties and no "required" requires them all; "required": [] (a
 * stored document's, whose keys are as stored) requires none and is
 * left out.
 */

static void
ngx_platform_openapi_require(json_t *schema)
{
    size_t       i;
    json_t      *props, *required, *v;
    const char  *key;

    if (json_is_array(schema)) {
        json_array_foreach(schema, i, v) {
            ngx_platform_openapi_require(v);
        }

        return;
    }

    if (!json_is_object(schema)) {
        return;
    }

    props = json_object_get(schema, "properties");
    required = json_object_get(schema, "required");

    if (json_is_object(props) && required == NULL) {
        required = json_array();

        json_object_foreach(props, key, v) {
            json_array_append_new(required, json_string(key));
        }

        json_object_set_new(schema, "required", required);
    }

    if (json_is_array(required) && json_array_size(required) == 0) {
        json_object_del(schema, "required");
    }

    json_object_foreach(props, key, v) {
        ngx_platform_openapi_require(v);
    }

    /* the keywords whose values are schemas, or arrays of them */

    ngx_platform_openapi_require(json_object_get(schema, "items"));
    ngx_platform_openapi_require(json_object_get(schema,
                                                 "additionalProperties"));
    ngx_platform_openapi_require(json_object_get(schema, "allOf"));
    ngx_platform_openapi_require(json_object_get(schema, "anyOf"));
    ngx_platform_openapi_require(json_object_get(schema, "oneOf"));
}


/*
 * One operation, and its HEAD when the GET has one. Its documentation is
 * there: ngx_platform_openapi_check() has seen it.
 */

static ngx_int_t
ngx_platform_openapi_endpoint(json_t *paths, ngx_platform_family_t *family,
    ngx_platform_endpoint_t *ep)
{
    json_t        *item, *op, *params, *example, *v;
    const char    *method, *template;
    json_error_t   error;

    method = ngx_platform_method_name(ep->method);
    if (method == NULL) {
        return NGX_ERROR;
    }

    example = json_loads(ep->doc->example, 0, &error);
    if (example == NULL) {
        return NGX_ERROR;
    }

    op = ngx_platform_openapi_operation(family, ep, method);
    params = json_array();

    if (op == NULL || params == NULL) {
        goto failed;
    }

    /* the path's parameters first, then the headers and the query's */

    v = ngx_platform_openapi_path(ep, params, example);
    if (v == NULL) {
        goto failed;
    }

    template = json_string_value(v);

    item = json_object_get(paths, template);
    if (item == NULL) {
        item = json_object();
        json_object_set_new(paths, template, item);
    }

    json_decref(v);

    if (item == NULL
        || ngx_platform_openapi_parameters(params, family, ep, example)
           != NGX_OK)
    {
        goto failed;
    }

    json_object_set_new(op, "parameters", params);
    params = NULL;

    json_object_set_new(op, "security", ngx_platform_openapi_security(ep));

    if (ep->body) {
        v = ngx_platform_openapi_request_body(ep, example);
        if (v == NULL) {
            goto failed;
        }

        json_object_set_new(op, "requestBody", v);
    }

    v = ngx_platform_openapi_responses(family, ep);
    if (v == NULL) {
        goto failed;
    }

    json_object_set_new(op, "responses", v);

    /* a HEAD is a GET without the body, unless the GET changes state */

    if (ep->method == NGX_HTTP_GET && !(ep->inputs & NGX_PLATFORM_IN_NO_HEAD))
    {
        json_object_set_new(item, "head",
                            ngx_platform_openapi_head(op, ep));
    }

    json_object_set_new(item, method, op);

    json_decref(example);

    return NGX_OK;

failed:

    json_decref(op);
    json_decref(params);
    json_decref(example);

    return NGX_ERROR;
}


/* the operation's tag (its family), operationId and summary */

static json_t *
ngx_platform_openapi_operation(ngx_platform_family_t *family,
    ngx_platform_endpoint_t *ep, const char *method)
{
    return json_pack("{s:[s#], s:o, s:s}",
                     "tags", family->name.data, (int) family->name.len,
                     "operationId",
                     ngx_platform_openapi_operation_id(ep, method),
                     "summary", ep->doc->summary);
}


/* the headers the core requires of the endpoint, then its query's */

static ngx_int_t
ngx_platform_openapi_parameters(json_t *params, ngx_platform_family_t *family,
    ngx_platform_endpoint_t *ep, json_t *example)
{
    json_t      *user;
    ngx_uint_t   auth, required;

    auth = ep->auth;

    if (ep->inputs & NGX_PLATFORM_IN_TENANT || auth & NGX_PLATFORM_AUTH_TENANT)
    {
        required = (auth & NGX_PLATFORM_AUTH_TENANT)
                   || !(auth & (NGX_PLATFORM_AUTH_BEARER
                                |NGX_PLATFORM_AUTH_APIKEY));

        json_array_append_new(params,
                              ngx_platform_openapi_ref("parameters",
                                  required ? "tenantId" : "tenantIdOptional"));
    }

    if (ep->inputs & NGX_PLATFORM_IN_COUNTRY) {
        json_array_append_new(params,
                              ngx_platform_openapi_ref("parameters",
                                                       "countryCode"));

    } else if (ep->inputs & NGX_PLATFORM_IN_COUNTRY_OPT) {
        json_array_append_new(params,
                              ngx_platform_openapi_ref("parameters",
                                                       "countryCodeOptional"));
    }

    if (ep->inputs & NGX_PLATFORM_IN_USER) {
        user = json_object_get(json_object_get(example, "headers"), "userId");

        /* an example of this operation's own: a parameter of its own */

        json_array_append_new(params,
                              user ? ngx_platform_openapi_user(
                                         json_incref(user))
                                   : ngx_platform_openapi_ref("parameters",
                                                              "userId"));
    }

    if (family->envelope == NGX_PLATFORM_ENVELOPE_A) {
        json_array_append_new(params,
                              ngx_platform_openapi_ref("parameters",
                                                       "acceptLanguage"));
    }

    json_array_append_new(params,
                          ngx_platform_openapi_ref("parameters",
                                                   "requestId"));

    return ngx_platform_openapi_query(params, ep, example);
}


/* the userId header with an example (stolen) */

static json_t *
ngx_platform_openapi_user(json_t *example)
{
    return json_pack("{s:s, s:s, s:b, s:s, s:{s:s, s:i, s:i, s:s}, s:o}",
                     "name", "userId", "in", "header", "required", 1,
                     "description", "Who makes the change.",
                     "schema", "type", "string", "minLength", 1,
                     "maxLength", 128, "pattern", "^[!-9;-~]+$",
                     "example", example);
}


static ngx_int_t
ngx_platform_openapi_query(json_t *params, ngx_platform_endpoint_t *ep,
    json_t *example)
{
    json_t                *schema, *param, *v;
    ngx_platform_field_t  *f;

    for (f = ep->query; f && f->name; f++) {
        schema = ngx_platform_openapi_field(f, 1);
        if (schema == NULL) {
            return NGX_ERROR;
        }

        param = json_pack("{s:s, s:s, s:b, s:o}", "name", f->name,
                          "in", "query",
                          "required",
                          (f->flags & NGX_PLATFORM_F_REQUIRED) != 0,
                          "schema", schema);
        if (param == NULL) {
            return NGX_ERROR;
        }

        v = json_object_get(json_object_get(example, "query"), f->name);
        if (v) {
            json_object_set(param, "example", v);
        }

        json_array_append_new(params, param);
    }

    return NGX_OK;
}


/* the credentials: one requirement, every scheme of it at once */

static json_t *
ngx_platform_openapi_security(ngx_platform_endpoint_t *ep)
{
    json_t  *security;

    security = json_object();

    if (ep->auth & NGX_PLATFORM_AUTH_BEARER) {
        json_object_set_new(security, "bearerAuth", json_array());
    }

    if (ep->auth & NGX_PLATFORM_AUTH_APIKEY) {
        json_object_set_new(security, "apiKey", json_array());
    }

    if (json_object_size(security) == 0) {
        json_decref(security);
        return json_array();
    }

    return json_pack("[o]", security);
}


static json_t *
ngx_platform_openapi_request_body(ngx_platform_endpoint_t *ep,
    json_t *example)
{
    json_t  *schema, *content, *body;

    schema = ngx_platform_openapi_object(ep->body);
    if (schema == NULL) {
        return NULL;
    }

    if (ep->body->name == NULL) {
        json_object_set_new(schema, "description",
                            json_string("Any JSON object."));
        json_object_set_new(schema, "additionalProperties", json_true());
    }

    content = json_pack("{s:o}", "schema", schema);
    if (content == NULL) {
        return NULL;
    }

    body = json_object_get(example, "body");
    if (body) {
        json_object_set(content, "example", body);
    }

    return json_pack("{s:b, s:s, s:{s:o}}",
                     "required", 1,
                     "description", "A JSON object (application/json; "
                                    "text/json, text/plain or no "
                                    "Content-Type are read as JSON too). "
                                    "Unknown fields are ignored.",
                     "content", "application/json", content);
}


/* the GET's operation, its answers without their bodies */

static json_t *
ngx_platform_openapi_head(json_t *op, ngx_platform_endpoint_t *ep)
{
    u_char      *p, summary[256];
    json_t      *head, *res;
    const char  *key;

    head = json_deep_copy(op);
    if (head == NULL) {
        return NULL;
    }

    p = ngx_snprintf(summary, sizeof(summary) - 1, "%s: the headers only",
                     ep->doc->summary);
    *p = '\0';

    json_object_set_new(head, "operationId",
                        ngx_platform_openapi_operation_id(ep, "head"));
    json_object_set_new(head, "summary", json_string((char *) summary));

    json_object_foreach(json_object_get(head, "responses"), key, res) {
        json_object_del(res, "content");
    }

    return head;
}


/*
 * The path template of a pattern ("v{version}" stays, "{uuid:name}" is
 * "{name}", a capture without a name "{id}") and its path parameters
 */

static json_t *
ngx_platform_openapi_path(ngx_platform_endpoint_t *ep, json_t *params,
    json_t *example)
{
    u_char      *p, *end, *seg, *colon, *q;
    u_char       path[1024], name[64];
    size_t       len;
    json_t      *param, *schema, *v;
    ngx_uint_t   uuid, version;

    p = (u_char *) ep->pattern;
    end = p + ngx_strlen(p);
    q = path;

    while (p < end) {
        seg = ++p;

        while (p < end && *p != '/') {
            p++;
        }

        len = p - seg;

        if ((size_t) (q - path) + len + 2 >= sizeof(path)) {
            return NULL;
        }

        *q++ = '/';

        if (len == 0 || seg[len - 1] != '}') {
            q = ngx_cpymem(q, seg, len);
            continue;
        }

        if (seg[0] == 'v') {
            *q++ = 'v';
            seg++;
            len--;
        }

        seg++;
        len -= 2;

        colon = ngx_strlchr(seg, seg + len, ':');
        version = (len == 7 && ngx_strncmp(seg, "version", 7) == 0);
        uuid = (ngx_strncmp(seg, "uuid", 4) == 0);

        if (version) {
            ngx_cpystrn(name, (u_char *) "version", sizeof(name));

        } else if (colon) {
            ngx_cpystrn(name, colon + 1,
                        ngx_min((size_t) (seg + len - colon), sizeof(name)));

        } else {
            ngx_cpystrn(name, (u_char *) "id", sizeof(name));
        }

        q = ngx_sprintf(q, "{%s}", name);

        if (version) {
            schema = json_pack("{s:s, s:[s, s]}", "type", "string",
                               "enum", "1", "1.0");

        } else if (uuid) {
            schema = json_pack("{s:s, s:s}", "type", "string",
                               "format", "uuid");

        } else {
            schema = json_pack("{s:s, s:i}", "type", "string",
                               "minLength", 1);
        }

        param = json_pack("{s:s, s:s, s:b, s:o}", "name", (char *) name,
                          "in", "path", "required", 1, "schema", schema);

        if (version) {
            json_object_set_new(param, "example", json_string("1"));

        } else if (example) {
            v = json_object_get(json_object_get(example, "path"),
                                (char *) name);
            if (v) {
                json_object_set(param, "example", v);
            }
        }

        json_array_append_new(params, param);
    }

    *q = '\0';

    return json_string((char *) path);
}


/* JSON Schema 2020-12 of a field as the validator checks it */

static json_t *
ngx_platform_openapi_field(ngx_platform_field_t *f, ngx_uint_t query)
{
    json_t                       *s, *v;
    const char                   *desc;
    ngx_platform_openapi_type_t  *t;

    for (t = ngx_platform_openapi_types; t->type; t++) {
        if (t->type == f->type) {
            break;
        }
    }

    s = (f->type == NGX_PLATFORM_T_OBJECT)
        ? ngx_platform_openapi_object(f->items) : json_object();
    if (s == NULL) {
        return NULL;
    }

    if (t->format) {
        json_object_set_new(s, "format", json_string(t->format));
    }

    if (t->pattern) {
        json_object_set_new(s, "pattern", json_string(t->pattern));
    }

    desc = t->description;

    if (f->type == NGX_PLATFORM_T_ARRAY && f->items) {
        json_object_set_new(s, "items", ngx_platform_openapi_object(f->items));

    } else if (f->type == NGX_PLATFORM_T_ENUM) {
        json_object_set_new(s, "enum", ngx_platform_openapi_enum(f));

    } else if (t->type == 0 && (f->flags & NGX_PLATFORM_F_TRIM)) {
        desc = "Leading and trailing spaces, tabs, CR and LF are trimmed; "
               "the length is counted trimmed.";
    }

    if (f->flags & NGX_PLATFORM_F_MIN) {
        json_object_set_new(s, ngx_platform_openapi_bound_name(f, 0),
                            ngx_platform_openapi_bound(f, f->min));
    }

    if (f->flags & NGX_PLATFORM_F_MAX) {
        json_object_set_new(s, ngx_platform_openapi_bound_name(f, 1),
                            ngx_platform_openapi_bound(f, f->max));
    }

    if (f->flags & NGX_PLATFORM_F_UNIQUE) {
        desc = "Each value once in the array.";
    }

    if (desc) {
        json_object_set_new(s, "description", json_string(desc));
    }

    /* a query argument is absent or a string: never null */

    v = ((f->flags & NGX_PLATFORM_F_NULLABLE) && !query)
        ? json_pack("[s, s]", t->json, "null") : json_string(t->json);

    json_object_set_new(s, "type", v);

    if (f->def) {
        v = (f->type == NGX_PLATFORM_T_INTEGER)
            ? json_integer(ngx_atoi((u_char *) f->def, ngx_strlen(f->def)))
            : json_string(f->def);

        json_object_set_new(s, "default", v);
    }

    return s;
}


/* the values of an enum, and null when it is nullable */

static json_t *
ngx_platform_openapi_enum(ngx_platform_field_t *f)
{
    char   **v;
    json_t  *values;

    values = json_array();

    for (v = f->values; v && *v; v++) {
        json_array_append_new(values, json_string(*v));
    }

    if (f->flags & NGX_PLATFORM_F_NULLABLE) {
        json_array_append_new(values, json_null());
    }

    return values;
}


/* F_MIN, F_MAX: of a number its value, of an array its items, else length */

static const char *
ngx_platform_openapi_bound_name(ngx_platform_field_t *f, ngx_uint_t max)
{
    switch (f->type) {

    case NGX_PLATFORM_T_INTEGER:
    case NGX_PLATFORM_T_NUMBER:
        return max ? "maximum" : "minimum";

    case NGX_PLATFORM_T_ARRAY:
        return max ? "maxItems" : "minItems";

    default:
        return max ? "maxLength" : "minLength";
    }
}


static json_t *
ngx_platform_openapi_bound(ngx_platform_field_t *f, double bound)
{
    if (f->type == NGX_PLATFORM_T_NUMBER) {
        return json_real(bound);
    }

    return json_integer((json_int_t) bound);
}


static json_t *
ngx_platform_openapi_object(ngx_platform_field_t *fields)
{
    json_t                *s, *props, *required;
    ngx_platform_field_t  *f;

    s = json_object();
    props = json_object();
    required = json_array();

    for (f = fields; f && f->name; f++) {
        json_object_set_new(props, f->name,
                            ngx_platform_openapi_field(f, 0));

        if (f->flags & NGX_PLATFORM_F_REQUIRED) {
            json_array_append_new(required, json_string(f->name));
        }
    }

    json_object_set_new(s, "type", json_string("object"));

    if (json_object_size(props)) {
        json_object_set_new(s, "properties", props);

    } else {
        json_decref(props);
    }

    if (json_array_size(required)) {
        json_object_set_new(s, "required", required);

    } else {
        json_decref(required);
    }

    return s;
}


/* the answers, by status: the success, then every refusal declared */

static json_t *
ngx_platform_openapi_responses(ngx_platform_family_t *family,
    ngx_platform_endpoint_t *ep)
{
    u_char                          key[NGX_INT_T_LEN + 1];
    json_t                         *responses, *res;
    ngx_uint_t                      s, i;
    ngx_platform_openapi_errors_t   errors;

    responses = json_object();
    if (responses == NULL) {
        return NULL;
    }

    res = ngx_platform_openapi_success(family, ep);
    if (res == NULL) {
        goto failed;
    }

    json_object_set_new(responses, "200", res);

    errors.n = 0;

    ngx_platform_openapi_errors(family, ep, &errors);

    for (s = 100; s < 600; s++) {

        for (i = 0; i < errors.n; i++) {
            if (errors.errors[i].status == s) {
                break;
            }
        }

        if (i == errors.n) {
            continue;
        }

        res = ngx_platform_openapi_error_response(family, &errors, s);
        if (res == NULL) {
            goto failed;
        }

        ngx_sprintf(key, "%ui%Z", s);
        json_object_set_new(responses, (char *) key, res);
    }

    return responses;

failed:

    json_decref(responses);

    return NULL;
}


/* 200: the data in the family's envelope, as the statement answers it */

static json_t *
ngx_platform_openapi_success(ngx_platform_family_t *family,
    ngx_platform_endpoint_t *ep)
{
    json_t              *data, *schema, *headers;
    const char          *message;
    json_error_t         error;
    ngx_platform_doc_t  *doc;

    doc = ep->doc;

    headers = ngx_platform_openapi_response_headers(family, NGX_HTTP_OK);
    if (headers == NULL) {
        return NULL;
    }

    if (ep->sql && ep->sql->answer == NGX_PLATFORM_ANSWER_EMPTY) {
        return json_pack("{s:s, s:o}", "description",
                         "Done: no body (Content-Length: 0).",
                         "headers", headers);
    }

    data = json_loads(doc->data, 0, &error);
    if (data == NULL) {
        json_decref(headers);
        return NULL;
    }

    ngx_platform_openapi_require(data);

    message = (ep->sql && ep->sql->ok) ? ep->sql->ok : doc->ok;

    if (doc->bare
        || family->envelope == NGX_PLATFORM_ENVELOPE_SALES
        || (ep->sql && ep->sql->answer == NGX_PLATFORM_ANSWER_RAW))
    {
        /* the document is the whole body */
        schema = data;

    } else {
        schema = ngx_platform_openapi_envelope(family, ep, data, message);
        if (schema == NULL) {
            json_decref(headers);
            return NULL;
        }
    }

    return json_pack("{s:s, s:o, s:{s:{s:o}}}",
                     "description", message ? message : "Success.",
                     "headers", headers,
                     "content", "application/json", "schema", schema);
}


/* the success envelope of the family around data (stolen) */

static json_t *
ngx_platform_openapi_envelope(ngx_platform_family_t *family,
    ngx_platform_endpoint_t *ep, json_t *data, const char *message)
{
    json_t      *props, *required, *v;
    const char  *key;

    if (family->envelope == NGX_PLATFORM_ENVELOPE_A) {
        props = json_pack("{s:{s:b}, s:{s:s}, s:{s:s, s:{s:s}, s:i}, s:o}",
                          "succeeded", "const", 1,
                          "message", "type", "string",
                          "errors", "type", "array",
                          "items", "type", "string", "maxItems", 0,
                          "data", data);

    } else {
        props = json_pack("{s:{s:b}, s:{s:i}, s:{s:s}, s:o, s:{s:s, s:o, s:i}}",
                          "status", "const", 1,
                          "statusCode", "const", 0,
                          "message", "type", "string",
                          "data", data,
                          "errors", "type", "array",
                          "items",
                          ngx_platform_openapi_ref("schemas",
                                                   "EnvelopeBErrorItem"),
                          "maxItems", 0);
    }

    if (props == NULL) {
        return NULL;
    }

    if (message) {
        json_object_set_new(json_object_get(props, "message"),
                            "example", json_string(message));
    }

    if (family->envelope == NGX_PLATFORM_ENVELOPE_A
        && ep->sql && ep->sql->answer == NGX_PLATFORM_ANSWER_PAGE)
    {
        json_object_set_new(props, "pageNumber",
                            json_pack("{s:s}", "type", "integer"));
        json_object_set_new(props, "pageSize",
                            json_pack("{s:s}", "type", "integer"));
        json_object_set_new(props, "total",
                            json_pack("{s:s, s:s}", "type", "integer",
                                      "description",
                                      "Items of every page."));
    }

    /* every key, always */

    required = json_array();

    json_object_foreach(props, key, v) {
        json_array_append_new(required, json_string(key));
    }

    return json_pack("{s:s, s:o, s:o}", "type", "object",
                     "required", required, "properties", props);
}


/* the refusals of one status: each an example, the schema the envelope's */

static json_t *
ngx_platform_openapi_error_response(ngx_platform_family_t *family,
    ngx_platform_openapi_errors_t *errors, ngx_uint_t status)
{
    u_char                         text[4096], *p, *last;
    u_char                         name[NGX_INT_T_LEN + 2];
    json_t                        *examples, *headers;
    ngx_uint_t                     i, n;
    const char                    *sep, *key;
    ngx_platform_openapi_error_t  *err;

    headers = ngx_platform_openapi_response_headers(family, status);
    examples = json_object();

    if (headers == NULL || examples == NULL) {
        goto failed;
    }

    /* the description: every message (and detail) of the status */

    n = 0;
    p = text;
    last = text + sizeof(text) - 1;

    for (i = 0; i < errors->n; i++) {
        err = &errors->errors[i];

        /* a status without a body (304) has no example */
        if (err->status != status || err->message == NULL) {
            continue;
        }

        sep = (p == text) ? "" : "; ";

        if (ngx_strcmp(err->message, err->detail) == 0) {
            p = ngx_slprintf(p, last, "%s%s", sep, err->message);

        } else {
            p = ngx_slprintf(p, last, "%s%s (%s)", sep, err->message,
                             err->detail);
        }

        ngx_sprintf(name, "e%ui%Z", ++n);

        json_object_set_new(examples, (char *) name,
                            json_pack("{s:s, s:o}",
                                      "summary", err->message,
                                      "value",
                                      ngx_platform_openapi_error_body(
                                          family->envelope, err)));
    }

    *p = '\0';

    if (n == 0) {
        json_decref(examples);

        return json_pack("{s:s, s:o}",
                         "description", status == NGX_HTTP_NOT_MODIFIED
                             ? "Not modified: If-None-Match holds the "
                               "ETag." : "No body.",
                         "headers", headers);
    }

    key = (family->envelope == NGX_PLATFORM_ENVELOPE_A)
          ? "EnvelopeAError"
          : (family->envelope == NGX_PLATFORM_ENVELOPE_SALES)
            ? "SalesError" : "EnvelopeBError";

    return json_pack("{s:s, s:o, s:{s:{s:o, s:o}}}",
                     "description", (char *) text,
                     "headers", headers,
                     "content", "application/json",
                       "schema", ngx_platform_openapi_ref("schemas", key),
                       "examples", examples);

failed:

    json_decref(headers);
    json_decref(examples);

    return NULL;
}


/* the headers of an answer of the status, as ngx_platform_answer() sends */

static json_t *
ngx_platform_openapi_response_headers(ngx_platform_family_t *family,
    ngx_uint_t status)
{
    json_t  *headers;

    headers = json_pack("{s:o}", "X-Request-Id",
                        ngx_platform_openapi_ref("headers", "X-Request-Id"));
    if (headers == NULL) {
        return NULL;
    }

    if (status == NGX_HTTP_SERVICE_UNAVAILABLE || status == 429) {
        json_object_set_new(headers, "Retry-After",
                            ngx_platform_openapi_ref("headers",
                                                     "Retry-After"));
    }

    if (status == NGX_HTTP_UNAUTHORIZED) {
        json_object_set_new(headers, "WWW-Authenticate",
                            ngx_platform_openapi_ref("headers",
                                                     "WWW-Authenticate"));
    }

    if (family->envelope == NGX_PLATFORM_ENVELOPE_A) {
        json_object_set_new(headers, "Content-Language",
                            ngx_platform_openapi_ref("headers",
                                                     "Content-Language"));
    }

    return headers;
}


/* every refusal the core, the statement and the code declare */

static void
ngx_platform_openapi_errors(ngx_platform_family_t *family,
    ngx_platform_endpoint_t *ep, ngx_platform_openapi_errors_t *e)
{
    ngx_platform_doc_answer_t  *a;

    /* the credentials, before anything else */
    ngx_platform_openapi_credential_errors(ep, e);

    ngx_platform_openapi_input_errors(ep, e);

    if (ep->body) {
        ngx_platform_openapi_body_errors(ep, e);
    }

    if (ep->sql) {
        ngx_platform_openapi_statement_errors(ep->sql, e);
    }

    /* what the endpoint's code answers itself */

    for (a = ep->doc->answers; a && a->status; a++) {
        ngx_platform_openapi_add_error(e, a->status, a->message, a->detail);
    }

    ngx_platform_openapi_load_errors(family, ep, e);
}


/*
 * What any operation may meet under load: a rate limit of its location,
 * its share of the database, its backends down or slow, a body the
 * worker cannot hold now (ngx_platform_op.c, _http.c, _thread.c)
 */

static void
ngx_platform_openapi_load_errors(ngx_platform_family_t *family,
    ngx_platform_endpoint_t *ep, ngx_platform_openapi_errors_t *e)
{
    /* platform_rate_limit may limit any location */
    ngx_platform_openapi_add_error(e, NGX_HTTP_TOO_MANY_REQUESTS,
                                   "Too many requests.",
                                   NGX_PLATFORM_RL_DETAIL);

    if (ep->body) {
        ngx_platform_openapi_add_error(e, NGX_HTTP_REQUEST_ENTITY_TOO_LARGE,
                                       "Request body too large.",
                                       "The body is larger than the server "
                                       "can hold at once.");
        ngx_platform_openapi_add_error(e, NGX_HTTP_SERVICE_UNAVAILABLE,
                                       "Service temporarily unavailable.",
                                       "The server holds too many large "
                                       "bodies; retry shortly.");
        ngx_platform_openapi_add_error(e, NGX_HTTP_SERVICE_UNAVAILABLE,
                                       "Service temporarily unavailable.",
                                       "The server is busy; retry shortly.");
    }

    if (family->backends == 0) {
        return;
    }

    if (family->backends & NGX_PLATFORM_BACKEND_PG) {
        ngx_platform_openapi_add_error(e, NGX_HTTP_TOO_MANY_REQUESTS,
                                       "Too many requests.",
                                       "Your share of the database "
                                       "connections is in use; retry "
                                       "shortly.");
    }

    ngx_platform_openapi_add_error(e, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                   "Internal server error.",
                                   "The request could not be completed.");
    ngx_platform_openapi_add_error(e, NGX_HTTP_SERVICE_UNAVAILABLE,
                                   "Service temporarily unavailable.",
                                   "A backend is unavailable; retry "
                                   "shortly.");
    ngx_platform_openapi_add_error(e, NGX_HTTP_SERVICE_UNAVAILABLE,
                                   "Service temporarily unavailable.",
                                   "A backend did not answer in time; "
                                   "retry shortly.");

    /* platform_pg_lock_timeout: a change waiting on another's row */

    if ((family->backends & NGX_PLATFORM_BACKEND_PG)
        && ep->method != NGX_HTTP_GET)
    {
        ngx_platform_openapi_add_error(e, NGX_HTTP_SERVICE_UNAVAILABLE,
                                       "Service temporarily unavailable.",
                                       "The resource is being changed by "
                                       "another request; retry shortly.");
    }
}


/* ngx_platform_auth.c: the credentials and the tenant they agree with */

static void
ngx_platform_openapi_credential_errors(ngx_platform_endpoint_t *ep,
    ngx_platform_openapi_errors_t *e)
{
    ngx_uint_t  auth;

    auth = ep->auth;

    if (auth & NGX_PLATFORM_AUTH_BEARER) {
        ngx_platform_openapi_add_error(e, NGX_HTTP_UNAUTHORIZED,
                                       "Authentication required.",
                                       "A bearer token is required.");
        ngx_platform_openapi_add_error(e, NGX_HTTP_UNAUTHORIZED,
                                       "Invalid token.",
                                       "The token has expired.");
    }

    if (auth & NGX_PLATFORM_AUTH_APIKEY) {
        ngx_platform_openapi_add_error(e, NGX_HTTP_UNAUTHORIZED,
                                       "Authentication required.",
                                       "An API key is required.");
        ngx_platform_openapi_add_error(e, NGX_HTTP_UNAUTHORIZED,
                                       "Invalid API key.",
                                       "The API key is not valid.");
        ngx_platform_openapi_add_error(e, NGX_HTTP_FORBIDDEN,
                                       "Access denied.",
                                       "The API key is not valid for this "
                                       "endpoint.");
    }

    if ((auth & NGX_PLATFORM_AUTH_BEARER) && (auth & NGX_PLATFORM_AUTH_APIKEY))
    {
        ngx_platform_openapi_add_error(e, NGX_HTTP_FORBIDDEN,
                                       "Access denied.",
                                       "The API key and the token belong "
                                       "to other tenants.");
    }

    if ((auth & (NGX_PLATFORM_AUTH_BEARER|NGX_PLATFORM_AUTH_APIKEY))
        && ((ep->inputs & NGX_PLATFORM_IN_TENANT)
            || (auth & NGX_PLATFORM_AUTH_TENANT)))
    {
        ngx_platform_openapi_add_error(e, NGX_HTTP_FORBIDDEN,
                                       "Access denied.",
                                       "The tenantId header does not match "
                                       "the credentials.");
    }
}


/* the declared inputs: headers, path captures, query arguments */

static void
ngx_platform_openapi_input_errors(ngx_platform_endpoint_t *ep,
    ngx_platform_openapi_errors_t *e)
{
    ngx_uint_t  credential;

    credential = ep->auth & (NGX_PLATFORM_AUTH_BEARER|NGX_PLATFORM_AUTH_APIKEY);

    if ((ep->auth & NGX_PLATFORM_AUTH_TENANT)
        || ((ep->inputs & NGX_PLATFORM_IN_TENANT) && !credential))
    {
        ngx_platform_openapi_add_error(e, NGX_HTTP_BAD_REQUEST,
                                       "tenantId header is required.",
                                       "tenantId header is required.");
    }

    if (ep->inputs & NGX_PLATFORM_IN_COUNTRY) {
        ngx_platform_openapi_add_error(e, NGX_HTTP_BAD_REQUEST,
                                       "countryCode header is required.",
                                       "countryCode header is required.");
    }

    if (ep->inputs & NGX_PLATFORM_IN_COUNTRY_OPT) {
        ngx_platform_openapi_add_error(e, NGX_HTTP_BAD_REQUEST,
                                       "countryCode header is invalid.",
                                       "countryCode header is invalid.");
    }

    if (ep->inputs & NGX_PLATFORM_IN_USER) {
        ngx_platform_openapi_add_error(e, NGX_HTTP_BAD_REQUEST,
                                       "userId header is required.",
                                       "userId header is required.");
    }

    if (ep->inputs & NGX_PLATFORM_IN_MERCHANT) {
        ngx_platform_openapi_add_error(e, NGX_HTTP_FORBIDDEN,
                                       "The token carries no merchantId.",
                                       "This operation acts for a "
                                       "merchant: its token needs a "
                                       "merchantId claim.");
    }

    if (ngx_strstr(ep->pattern, "{version}")) {
        ngx_platform_openapi_add_error(e, NGX_HTTP_NOT_FOUND,
                                       "API version not supported.",
                                       "Supported versions: 1, 1.0.");
    }

    if (ngx_strstr(ep->pattern, "{uuid")) {
        ngx_platform_openapi_add_error(e, NGX_HTTP_BAD_REQUEST,
                                       ep->invalid ? ep->invalid
                                                   : "Bad request.",
                                       ep->invalid_detail
                                       ? ep->invalid_detail
                                       : "The id must be a uuid.");
    }

    if (ep->query && ep->query->name) {
        ngx_platform_openapi_add_error(e, NGX_HTTP_BAD_REQUEST,
                                       "Bad request.",
                                       "<name> of the query argument at "
                                       "fault and why, e.g. \"<name> must "
                                       "be at most <n>.\"");
    }
}


/* ngx_platform_http.c and _schema.c: the body */

static void
ngx_platform_openapi_body_errors(ngx_platform_endpoint_t *ep,
    ngx_platform_openapi_errors_t *e)
{
    ngx_platform_openapi_add_error(e, NGX_HTTP_BAD_REQUEST,
                                   "The request body is not valid JSON.",
                                   "Malformed JSON at line <l>, column "
                                   "<c>: <why>");
    ngx_platform_openapi_add_error(e, NGX_HTTP_BAD_REQUEST,
                                   "The request body must be a JSON "
                                   "object.", "Expected a JSON object.");

    if (ep->body->name) {
        ngx_platform_openapi_add_error(e, NGX_HTTP_BAD_REQUEST,
                                       "Bad request.",
                                       "<name> of the field at fault "
                                       "and why, e.g. \"<name> is "
                                       "required.\"");
    }

    ngx_platform_openapi_add_error(e, NGX_HTTP_REQUEST_ENTITY_TOO_LARGE,
                                   "Request body too large.",
                                   "Request body too large.");
    ngx_platform_openapi_add_error(e, NGX_HTTP_UNSUPPORTED_MEDIA_TYPE,
                                   "Unsupported media type.",
                                   "Send the body as application/json.");
}


/* the statement's answers and named refusals */

static void
ngx_platform_openapi_statement_errors(ngx_platform_sql_t *sql,
    ngx_platform_openapi_errors_t *e)
{
    ngx_platform_outcome_t  *o;

    if (sql->missing) {
        ngx_platform_openapi_add_error(e, NGX_HTTP_NOT_FOUND,
                                       sql->missing, sql->missing_detail);
    }

    if (sql->conflict) {
        ngx_platform_openapi_add_error(e, NGX_HTTP_CONFLICT,
                                       sql->conflict, sql->conflict_detail);
    }

    if (sql->reference) {
        ngx_platform_openapi_add_error(e, sql->reference,
                                       sql->reference_message,
                                       sql->reference_detail);
    }

    if (sql->refused) {
        ngx_platform_openapi_add_error(e, NGX_HTTP_BAD_REQUEST,
                                       sql->refused, sql->refused_detail);
    }

    for (o = sql->outcomes; o && o->name; o++) {
        ngx_platform_openapi_add_error(e, o->status, o->message, o->detail);
    }
}


static void
ngx_platform_openapi_add_error(ngx_platform_openapi_errors_t *e,
    ngx_uint_t status, const char *message, const char *detail)
{
    ngx_uint_t                     i;
    ngx_platform_openapi_error_t  *err;

    if (detail == NULL) {
        detail = message;
    }

    for (i = 0; i < e->n; i++) {
        err = &e->errors[i];

        if (err->status == status
            && (err->message == message
                || (err->message && message
                    && ngx_strcmp(err->message, message) == 0))
            && (err->detail == detail
                || (err->detail && detail
                    && ngx_strcmp(err->detail, detail) == 0)))
        {
            return;
        }
    }

    if (e->n == NGX_PLATFORM_OPENAPI_ERRORS) {
        return;
    }

    err = &e->errors[e->n++];

    err->status = status;
    err->message = message;
    err->detail = detail;
}


/* an error as ngx_platform_answer() writes it */

static json_t *
ngx_platform_openapi_error_body(ngx_uint_t envelope,
    ngx_platform_openapi_error_t *err)
{
    switch (envelope) {

    case NGX_PLATFORM_ENVELOPE_A:
        return json_pack("{s:b, s:s, s:[s], s:n}",
                         "succeeded", 0, "message", err->message,
                         "errors", err->detail, "data");

    case NGX_PLATFORM_ENVELOPE_SALES:
        return json_pack("{s:s, s:n, s:[s]}",
                         "message", err->message, "data",
                         "errors", err->detail);

    default:
        return json_pack("{s:b, s:i, s:s, s:{}, s:[{s:s, s:s}]}",
                         "status", 0, "statusCode", (int) err->status,
                         "message", err->message, "data",
                         "errors", "message", err->message,
                         "descriptiveMessage", err->detail);
    }
}


/*
 * "getApiPersonAccountsGet": made by the routing (ngx_platform_route.c),
 * so that $platform_operation names the same operation
 */

static json_t *
ngx_platform_openapi_operation_id(ngx_platform_endpoint_t *ep,
    const char *method)
{
    ngx_str_t  *id;

    id = ngx_platform_operation_id(ep, ngx_strcmp(method, "head") == 0);

    if (id == NULL) {
        return NULL;
    }

    return json_stringn((char *) id->data, id->len);
}


static json_t *
ngx_platform_openapi_ref(const char *kind, const char *name)
{
    u_char  ref[128];

    ngx_snprintf(ref, sizeof(ref), "#/components/%s/%s%Z", kind, name);

    return json_pack("{s:s}", "$ref", (char *) ref);
}
