
/*
 * ngx_platform: the configuration of webhooks. platform_webhook_source
 * and platform_webhook_payment_method name what a location accepts, with
 * the files of their signing secrets; once every location is merged,
 * nginx -t refuses a name that one location serves without a credential
 * and another with one, since its events could then be posted without
 * the key, and warns of a location that accepts no name at all.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_platform.h"
#include "ngx_platform_webhook.h"


/* a location that serves the webhooks family, as merged */
typedef struct {
    ngx_http_core_loc_conf_t  *clcf;
    ngx_platform_loc_conf_t   *plcf;
} ngx_platform_webhook_location_t;


/* a name that a route serves in a location, with or without a key */
typedef struct {
    ngx_platform_webhook_t    *hook;
    char                      *kind;       /* "source", "payment method" */
    ngx_http_core_loc_conf_t  *clcf;
    ngx_platform_endpoint_t   *endpoint;
    ngx_uint_t                 keyed;      /* an API key or a token */
} ngx_platform_webhook_use_t;


static char *ngx_platform_webhooks_check_name(ngx_conf_t *cf,
    ngx_array_t *hooks, ngx_str_t *name);
static char *ngx_platform_webhooks_max_body(ngx_conf_t *cf,
    ngx_platform_webhook_t *hook, ngx_str_t *size);
static char *ngx_platform_webhooks_read_secrets(ngx_conf_t *cf,
    ngx_platform_webhook_t *hook, ngx_str_t *file);
static char *ngx_platform_webhooks_add_secret(ngx_conf_t *cf,
    ngx_platform_webhook_t *hook, ngx_str_t *text, ngx_str_t *file,
    ngx_uint_t lineno);
static ngx_uint_t ngx_platform_webhooks_serves(ngx_http_core_loc_conf_t *clcf,
    ngx_platform_endpoint_t *ep);
static ngx_int_t ngx_platform_webhooks_check_route(ngx_conf_t *cf,
    ngx_array_t *uses, ngx_platform_webhook_location_t *loc,
    ngx_platform_endpoint_t *ep);
static void ngx_platform_webhooks_log_mixed(ngx_conf_t *cf,
    ngx_platform_webhook_use_t *a, ngx_platform_webhook_use_t *b);
static ngx_uint_t ngx_platform_webhooks_shadowed(ngx_array_t *locations,
    ngx_platform_webhook_location_t *loc, ngx_platform_endpoint_t *ep);
static size_t ngx_platform_webhooks_literal_len(ngx_platform_endpoint_t *ep);
static ngx_array_t *ngx_platform_webhooks_route_names(
    ngx_platform_webhook_location_t *loc, ngx_platform_endpoint_t *ep);
static void ngx_platform_webhooks_warn_unnamed(ngx_conf_t *cf,
    ngx_platform_webhook_location_t *loc, ngx_uint_t matched);


/*
 * platform_webhook_source NAME [secret=FILE ...] [max_body=SIZE];
 * platform_webhook_payment_method NAME [secret=FILE ...] [max_body=SIZE];
 *
 * A secret file holds one secret per line: "whsec_<base64>" (Standard
 * Webhooks) or the secret's bytes as they are; empty lines and lines that
 * start with '#' are skipped. Several secrets (in one file or several)
 * are all accepted, for rotation. max_body bounds the name's bodies
 * (256k by default): anyone may post to a keyless route.
 */

char *
ngx_platform_webhook_conf(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    char  *p = conf;

    char                     *rv;
    ngx_str_t                *value, file;
    ngx_uint_t                a;
    ngx_array_t             **hooks;
    ngx_platform_webhook_t   *hook;

    hooks = (ngx_array_t **) (p + cmd->offset);
    value = cf->args->elts;

    if (*hooks == NGX_CONF_UNSET_PTR) {
        *hooks = ngx_array_create(cf->pool, 4,
                                  sizeof(ngx_platform_webhook_t));
        if (*hooks == NULL) {
            return NGX_CONF_ERROR;
        }
    }

    rv = ngx_platform_webhooks_check_name(cf, *hooks, &value[1]);
    if (rv != NGX_CONF_OK) {
        return rv;
    }

    hook = ngx_array_push(*hooks);
    if (hook == NULL) {
        return NGX_CONF_ERROR;
    }

    hook->name = value[1];
    hook->secrets = NULL;
    hook->max_body = NGX_CONF_UNSET;
    hook->file = cf->conf_file->file.name;
    hook->line = cf->conf_file->line;

    for (a = 2; a < cf->args->nelts; a++) {

        if (ngx_strncmp(value[a].data, "max_body=", sizeof("max_body=") - 1)
            == 0)
        {
            file.data = value[a].data + sizeof("max_body=") - 1;
            file.len = value[a].len - (sizeof("max_body=") - 1);

            rv = ngx_platform_webhooks_max_body(cf, hook, &file);
            if (rv != NGX_CONF_OK) {
                return rv;
            }

            continue;
        }

        if (value[a].len <= sizeof("secret=") - 1
            || ngx_strncmp(value[a].data, "secret=", sizeof("secret=") - 1)
               != 0)
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid parameter \"%V\": expected "
                               "\"secret=<file>\" or \"max_body=<size>\"",
                               &value[a]);
            return NGX_CONF_ERROR;
        }

        file.data = value[a].data + sizeof("secret=") - 1;
        file.len = value[a].len - (sizeof("secret=") - 1);

        rv = ngx_platform_webhooks_read_secrets(cf, hook, &file);
        if (rv != NGX_CONF_OK) {
            return rv;
        }
    }

    if (hook->max_body == NGX_CONF_UNSET) {
        hook->max_body = NGX_PLATFORM_WEBHOOK_MAX_BODY;
    }

    return NGX_CONF_OK;
}


/*
 * max_body=SIZE: bytes, or with k, m or g; at least the 2 bytes of "{}"
 * (client_max_body_size still bounds every body of the location)
 */

static char *
ngx_platform_webhooks_max_body(ngx_conf_t *cf, ngx_platform_webhook_t *hook,
    ngx_str_t *size)
{
    off_t  n;

    if (hook->max_body != NGX_CONF_UNSET) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"max_body=\" is given twice for \"%V\"",
                           &hook->name);
        return NGX_CONF_ERROR;
    }

    n = ngx_parse_offset(size);

    if (n == NGX_ERROR) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid size \"max_body=%V\": a number of "
                           "bytes, or with \"k\", \"m\" or \"g\" "
                           "(\"256k\")", size);
        return NGX_CONF_ERROR;
    }

    if (n < 2) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"max_body=%V\" is too small: the shortest "
                           "body, \"{}\", is 2 bytes", size);
        return NGX_CONF_ERROR;
    }

    hook->max_body = n;

    return NGX_CONF_OK;
}


/* 1 to 64 letters, digits, '-', '_' or '.', once at this level */

static char *
ngx_platform_webhooks_check_name(ngx_conf_t *cf, ngx_array_t *hooks,
    ngx_str_t *name)
{
    size_t                   i;
    ngx_uint_t               a;
    ngx_platform_webhook_t  *hook;

    for (i = 0; i < name->len; i++) {
        if (!((name->data[i] >= 'a' && name->data[i] <= 'z')
              || (name->data[i] >= 'A' && name->data[i] <= 'Z')
              || (name->data[i] >= '0' && name->data[i] <= '9')
              || name->data[i] == '-' || name->data[i] == '_'
              || name->data[i] == '.'))
        {
            break;
        }
    }

    if (name->len == 0 || name->len > NGX_PLATFORM_WEBHOOK_NAME_MAX
        || i < name->len)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid name \"%V\": 1 to %d letters, digits, "
                           "\"-\", \"_\" or \".\"", name,
                           NGX_PLATFORM_WEBHOOK_NAME_MAX);
        return NGX_CONF_ERROR;
    }

    hook = hooks->elts;

    for (a = 0; a < hooks->nelts; a++) {
        if (hook[a].name.len == name->len
            && ngx_strncmp(hook[a].name.data, name->data, name->len) == 0)
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "\"%V\" is configured twice at this level",
                               name);
            return NGX_CONF_ERROR;
        }
    }

    return NGX_CONF_OK;
}


/*
 * A secret file: one secret per line, "whsec_<base64>" (Standard
 * Webhooks) or the secret's bytes as they are; empty lines and lines
 * that start with '#' are skipped.
 */

static char *
ngx_platform_webhooks_read_secrets(ngx_conf_t *cf,
    ngx_platform_webhook_t *hook, ngx_str_t *file)
{
    char        *rv;
    u_char      *end, *line, *eol;
    ngx_str_t    content, text;
    ngx_uint_t   lineno, found;

    if (ngx_conf_full_name(cf->cycle, file, 1) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    rv = ngx_platform_conf_read_file(cf, file, 64 * 1024, "a secret file",
                                     &content);
    if (rv != NGX_CONF_OK) {
        return rv;
    }

    if (hook->secrets == NULL) {
        hook->secrets = ngx_array_create(cf->pool, 2, sizeof(ngx_str_t));
        if (hook->secrets == NULL) {
            return NGX_CONF_ERROR;
        }
    }

    end = content.data + content.len;
    lineno = 0;
    found = 0;

    for (line = content.data; line < end; line = eol + 1) {
        lineno++;

        eol = ngx_strlchr(line, end, '\n');
        if (eol == NULL) {
            eol = end;
        }

        text.data = line;
        text.len = eol - line;

        while (text.len && (text.data[0] == ' ' || text.data[0] == '\t')) {
            text.data++;
            text.len--;
        }

        while (text.len && (text.data[text.len - 1] == ' '
                            || text.data[text.len - 1] == '\t'
                            || text.data[text.len - 1] == '\r'))
        {
            text.len--;
        }

        if (text.len == 0 || text.data[0] == '#') {
            continue;
        }

        rv = ngx_platform_webhooks_add_secret(cf, hook, &text, file, lineno);
        if (rv != NGX_CONF_OK) {
            return rv;
        }

        found++;
    }

    if (found == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"%V\" holds no secret", file);
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


static char *
ngx_platform_webhooks_add_secret(ngx_conf_t *cf, ngx_platform_webhook_t *hook,
    ngx_str_t *text, ngx_str_t *file, ngx_uint_t lineno)
{
    ngx_str_t  *secret;

    secret = ngx_array_push(hook->secrets);
    if (secret == NULL) {
        return NGX_CONF_ERROR;
    }

    if (text->len > sizeof("whsec_") - 1
        && ngx_strncmp(text->data, "whsec_", sizeof("whsec_") - 1) == 0)
    {
        text->data += sizeof("whsec_") - 1;
        text->len -= sizeof("whsec_") - 1;

        secret->data = ngx_pnalloc(cf->pool,
                                   ngx_base64_decoded_length(text->len));
        if (secret->data == NULL) {
            return NGX_CONF_ERROR;
        }

        if (ngx_platform_base64_value(secret, text, 0) != NGX_OK) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "line %ui of \"%V\": what follows "
                               "\"whsec_\" is not base64", lineno, file);
            return NGX_CONF_ERROR;
        }

    } else {
        *secret = *text;
    }

    if (secret->len < NGX_PLATFORM_WEBHOOK_SECRET_MIN) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "line %ui of \"%V\": the secret is shorter "
                           "than %d bytes", lineno, file,
                           NGX_PLATFORM_WEBHOOK_SECRET_MIN);
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


/*
 * A location that serves webhooks, as merged, for
 * ngx_platform_webhooks_check_locations()
 */

char *
ngx_platform_webhooks_record_location(ngx_conf_t *cf,
    ngx_platform_loc_conf_t *plcf)
{
    ngx_platform_main_conf_t         *pmcf;
    ngx_http_core_loc_conf_t         *clcf;
    ngx_platform_webhook_location_t  *loc;

    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);

    /* "if" and "limit_except" have their location's names and policy */

    if (plcf->family != &ngx_platform_webhooks_family
        || clcf->handler != ngx_platform_handler
        || clcf->noname)
    {
        return NGX_CONF_OK;
    }

    pmcf = ngx_http_conf_get_module_main_conf(cf, ngx_platform_module);

    if (pmcf->webhook_locations == NULL) {
        pmcf->webhook_locations = ngx_array_create(cf->pool, 4,
                                      sizeof(ngx_platform_webhook_location_t));
        if (pmcf->webhook_locations == NULL) {
            return NGX_CONF_ERROR;
        }
    }

    loc = ngx_array_push(pmcf->webhook_locations);
    if (loc == NULL) {
        return NGX_CONF_ERROR;
    }

    loc->clcf = clcf;
    loc->plcf = plcf;

    return NGX_CONF_OK;
}


/*
 * nginx -t, once every location is merged: a name that a route without
 * a credential serves must not be served by a route with one (an API
 * key or a bearer token) anywhere, or its events could be posted without
 * the key. Sources and payment methods are checked apart.
 */

ngx_int_t
ngx_platform_webhooks_check_locations(ngx_conf_t *cf)
{
    ngx_uint_t                        i, matched, reachable, named;
    ngx_array_t                       uses, *names;
    ngx_platform_endpoint_t          *ep;
    ngx_platform_main_conf_t         *pmcf;
    ngx_platform_webhook_location_t  *loc;

    pmcf = ngx_http_conf_get_module_main_conf(cf, ngx_platform_module);

    if (pmcf->webhook_locations == NULL) {
        return NGX_OK;
    }

    if (ngx_array_init(&uses, cf->temp_pool, 8,
                       sizeof(ngx_platform_webhook_use_t))
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    loc = pmcf->webhook_locations->elts;

    for (i = 0; i < pmcf->webhook_locations->nelts; i++) {
        matched = 0;
        reachable = 0;
        named = 0;

        for (ep = ngx_platform_webhooks_family.endpoints; ep->pattern; ep++) {

            if (!ngx_platform_webhooks_serves(loc[i].clcf, ep)) {
                continue;
            }

            matched++;
            names = ngx_platform_webhooks_route_names(&loc[i], ep);

            if (names != NULL
                && ngx_platform_webhooks_check_route(cf, &uses, &loc[i], ep)
                   != NGX_OK)
            {
                return NGX_ERROR;
            }

            if (!ngx_platform_webhooks_shadowed(pmcf->webhook_locations,
                                                &loc[i], ep))
            {
                reachable++;
                named += (names != NULL);
            }
        }

        if (matched == 0 || (reachable > 0 && named == 0)) {
            ngx_platform_webhooks_warn_unnamed(cf, &loc[i], matched);
        }
    }

    return NGX_OK;
}


/*
 * Whether another webhooks location takes all of a route's requests from
 * this one: a longer prefix that the route's literal start begins with
 * (as the development configuration's "/api/v1/webhooks/public/" does
 * for the "/api/v1/webhooks/" of the included platform.conf), so that
 * this location's lack of names there is no mistake.
 */

static ngx_uint_t
ngx_platform_webhooks_shadowed(ngx_array_t *locations,
    ngx_platform_webhook_location_t *loc, ngx_platform_endpoint_t *ep)
{
    size_t                            len;
    ngx_uint_t                        i;
    ngx_http_core_loc_conf_t         *other;
    ngx_platform_webhook_location_t  *all;

    len = ngx_platform_webhooks_literal_len(ep);
    all = locations->elts;

    for (i = 0; i < locations->nelts; i++) {
        other = all[i].clcf;

        if (other == loc->clcf
#if (NGX_PCRE)
            || other->regex
#endif
            || other->named
            || other->name.len <= loc->clcf->name.len
            || other->name.len > len)
        {
            continue;
        }

        if (ngx_filename_cmp((u_char *) ep->pattern, other->name.data,
                             other->name.len)
            == 0)
        {
            return 1;
        }
    }

    return 0;
}


/* the length of a route's literal start, before its first capture */

static size_t
ngx_platform_webhooks_literal_len(ngx_platform_endpoint_t *ep)
{
    char  *capture;

    capture = ngx_strchr(ep->pattern, '{');

    return capture ? (size_t) (capture - ep->pattern)
                   : ngx_strlen(ep->pattern);
}


/* the names a route accepts in a location: its sources or payment methods */

static ngx_array_t *
ngx_platform_webhooks_route_names(ngx_platform_webhook_location_t *loc,
    ngx_platform_endpoint_t *ep)
{
    if (ngx_strstr(ep->pattern, "{string:source}")) {
        return loc->plcf->webhook_sources;
    }

    return loc->plcf->webhook_methods;
}


/*
 * nginx -t's warning for a webhooks location that accepts no name: every
 * call it takes is 404, which is easy to miss when the example
 * configuration's names are left commented out
 */

static void
ngx_platform_webhooks_warn_unnamed(ngx_conf_t *cf,
    ngx_platform_webhook_location_t *loc, ngx_uint_t matched)
{
    if (matched == 0) {
        ngx_log_error(NGX_LOG_WARN, cf->log, 0,
                      "location \"%V\" serves webhooks but its path matches "
                      "none of their routes (POST /api/v1/webhooks/public/"
                      "{source}/events, /api/webhooks/public/{source}/events, "
                      "/webhooks/{paymentmethod}): every call to it is 404",
                      &loc->clcf->name);
        return;
    }

    ngx_log_error(NGX_LOG_WARN, cf->log, 0,
                  "location \"%V\" serves webhooks but accepts no name: "
                  "declare its sources with platform_webhook_source or its "
                  "payment methods with platform_webhook_payment_method "
                  "(in it or around it), or every call to it is 404",
                  &loc->clcf->name);
}


/*
 * Whether a location may take a route's requests: a regular expression
 * or a named location may take any; a prefix or exact one only when its
 * name and the route's literal start are prefixes of one another,
 * compared as nginx compares locations.
 */

static ngx_uint_t
ngx_platform_webhooks_serves(ngx_http_core_loc_conf_t *clcf,
    ngx_platform_endpoint_t *ep)
{
    size_t  len;

#if (NGX_PCRE)
    if (clcf->regex) {
        return 1;
    }
#endif

    if (clcf->named) {
        return 1;
    }

    len = ngx_min(ngx_platform_webhooks_literal_len(ep), clcf->name.len);

    return ngx_filename_cmp((u_char *) ep->pattern, clcf->name.data, len)
           == 0;
}


/*
 * The names of one route in one location, with the route's policy there
 * (platform_auth replaces the route's default), each checked against
 * those recorded before it.
 */

static ngx_int_t
ngx_platform_webhooks_check_route(ngx_conf_t *cf, ngx_array_t *uses,
    ngx_platform_webhook_location_t *loc, ngx_platform_endpoint_t *ep)
{
    char                        *kind;
    ngx_uint_t                   i, j, auth, keyed;
    ngx_array_t                 *hooks;
    ngx_platform_webhook_t      *hook;
    ngx_platform_webhook_use_t  *use, *seen;

    hooks = ngx_platform_webhooks_route_names(loc, ep);
    kind = ngx_strstr(ep->pattern, "{string:source}") ? "source"
                                                      : "payment method";

    auth = (loc->plcf->auth != NGX_CONF_UNSET_UINT) ? loc->plcf->auth
                                                      : ep->auth;
    keyed = (auth & (NGX_PLATFORM_AUTH_APIKEY|NGX_PLATFORM_AUTH_BEARER))
            != 0;

    hook = hooks->elts;

    for (i = 0; i < hooks->nelts; i++) {
        use = ngx_array_push(uses);
        if (use == NULL) {
            return NGX_ERROR;
        }

        use->hook = &hook[i];
        use->kind = kind;
        use->clcf = loc->clcf;
        use->endpoint = ep;
        use->keyed = keyed;

        seen = uses->elts;

        for (j = 0; j < uses->nelts - 1; j++) {
            if (seen[j].keyed != keyed
                && ngx_strcmp(seen[j].kind, kind) == 0
                && seen[j].hook->name.len == hook[i].name.len
                && ngx_strncmp(seen[j].hook->name.data, hook[i].name.data,
                               hook[i].name.len)
                   == 0)
            {
                ngx_platform_webhooks_log_mixed(cf, &seen[j], use);
                return NGX_ERROR;
            }
        }
    }

    return NGX_OK;
}


/*
 * nginx -t's refusal: the name, the two locations with their routes, and
 * where the name is declared (once, or once for each of them)
 */

static void
ngx_platform_webhooks_log_mixed(ngx_conf_t *cf, ngx_platform_webhook_use_t *a,
    ngx_platform_webhook_use_t *b)
{
    u_char                      *p, *last;
    u_char                       where[NGX_MAX_ERROR_STR];
    ngx_platform_webhook_use_t  *keyless, *keyed;

    keyless = a->keyed ? b : a;
    keyed = a->keyed ? a : b;

    last = where + sizeof(where);
    p = ngx_slprintf(where, last, "%V:%ui", &keyless->hook->file,
                     keyless->hook->line);

    if (keyed->hook != keyless->hook) {
        p = ngx_slprintf(p, last, " and %V:%ui", &keyed->hook->file,
                         keyed->hook->line);
    }

    ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                  "%s \"%V\" is served without a credential by location "
                  "\"%V\" (POST %s) and with one by location \"%V\" "
                  "(POST %s), so its events could be posted without the "
                  "key: declare it only in locations that serve it one "
                  "way (it is declared in %*s)",
                  keyless->kind, &keyless->hook->name,
                  &keyless->clcf->name, keyless->endpoint->pattern,
                  &keyed->clcf->name, keyed->endpoint->pattern,
                  p - where, where);
}
