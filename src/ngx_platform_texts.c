
/*
 * ngx_platform: the text service. Every message the module answers is
 * written in English where it is raised; Envelope A families answer
 * French clients in French, from the family's own texts, then the
 * core's below.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_platform.h"


static const char *ngx_platform_find_text(ngx_platform_text_t *t,
    const char *en);


/* French texts of the messages of the core, for Envelope A families */

static ngx_platform_text_t  ngx_platform_core_texts[] = {
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
    { "The rate limit is reached. Retry after the time Retry-After gives.",
      "La limite de débit est atteinte. Réessayez après le délai indiqué "
      "par Retry-After." },
    { "The tenant's budget of credit bureau calls is spent. Retry after "
      "the time Retry-After gives.",
      "Le budget d'appels au bureau de crédit du locataire est épuisé. "
      "Réessayez après le délai indiqué par Retry-After." },
    { "Internal server error.", "Erreur interne du serveur." },
    { "Bad gateway.", "Passerelle incorrecte." },
    { "Service temporarily unavailable.",
      "Service temporairement indisponible." },
    { "The server holds too many large bodies; retry shortly.",
      "Le serveur traite trop de corps volumineux ; réessayez bientôt." },
    { "The body is larger than the server can hold at once.",
      "Le corps dépasse ce que le serveur peut traiter à la fois." },
    { "Gateway timeout.", "Délai de la passerelle dépassé." },
    { "API version not supported.", "Version d'API non prise en charge." },
    { "Supported versions: 1, 1.0.", "Versions prises en charge : 1, 1.0." },
    { "This endpoint accepts %s.",
      "Ce point de terminaison accepte %s." },
    { "Malformed JSON at line %s, column %s: %s%s",
      "JSON mal formé à la ligne %s, colonne %s : %s%s" },
    { "Expected a JSON object.", "Un objet JSON est attendu." },
    { "This route accepts a body of at most %s bytes.",
      "Cette route accepte un corps d'au plus %s octets." },
    { "This route accepts a body of at most 1 byte.",
      "Cette route accepte un corps d'au plus 1 octet." },
    { "The server is busy; retry shortly.",
      "Le serveur est occupé ; réessayez bientôt." },
    { "The request body is not valid JSON.",
      "Le corps de la requête n'est pas un JSON valide." },
    { "The request body must be a JSON object.",
      "Le corps de la requête doit être un objet JSON." },
    { "A backend did not answer in time; retry shortly.",
      "Un service interne n'a pas répondu à temps ; réessayez bientôt." },
    { "A backend is unavailable; retry shortly.",
      "Un service interne est indisponible ; réessayez bientôt." },
    { "Your share of the database connections is in use; retry shortly.",
      "Votre part des connexions à la base de données est utilisée ;"
      " réessayez bientôt." },
    { "The resource is being changed by another request; retry shortly.",
      "La ressource est en cours de modification par une autre requête ;"
      " réessayez bientôt." },
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

    /* the JSON limits of every body */
    { "The request body nests too deeply.",
      "Le corps de la requête est trop imbriqué." },
    { "JSON bodies nest at most 64 levels.",
      "Un corps JSON compte au plus 64 niveaux d'imbrication." },
    { "The request body has too many members.",
      "Le corps de la requête a trop de membres." },
    { "JSON bodies hold at most 10000 members "
      "(object members and array elements).",
      "Un corps JSON compte au plus 10000 membres "
      "(membres d'objets et éléments de tableaux)." },

    /* declared inputs and body fields */
    { "The token carries no merchantId.",
      "Le jeton ne porte aucun merchantId." },
    { "This operation acts for a merchant: its token needs a merchantId "
      "claim.",
      "Cette opération agit pour un marchand : son jeton doit porter "
      "l'attribut merchantId." },
    { "userId header is required.", "L'en-tête userId est requis." },
    { "userId header is invalid.", "L'en-tête userId est invalide." },
    { "The userId header does not match the token's sub.",
      "L'en-tête userId ne correspond pas à l'attribut sub du jeton." },
    { "Request timeout.", "Délai de la requête dépassé." },

    { NULL, NULL }
};


/* whether the request's answer speaks French: only Envelope A does */

ngx_uint_t
ngx_platform_text_french(ngx_platform_ctx_t *ctx)
{
    return ctx->lang == NGX_PLATFORM_LANG_FR
           && ctx->family != NULL
           && ctx->family->envelope == NGX_PLATFORM_ENVELOPE_A;
}


/*
 * The text in the request's language: the family's texts first, then
 * the core's. Only Envelope A speaks French.
 */

const char *
ngx_platform_text(ngx_platform_ctx_t *ctx, const char *en)
{
    const char  *fr;

    if (!ngx_platform_text_french(ctx)) {
        return en;
    }

    fr = ngx_platform_find_text(ctx->family->texts, en);

    if (fr == NULL) {
        fr = ngx_platform_find_text(ngx_platform_core_texts, en);
    }

    return fr ? fr : en;
}


static const char *
ngx_platform_find_text(ngx_platform_text_t *t, const char *en)
{
    if (t == NULL) {
        return NULL;
    }

    for ( /* void */ ; t->en; t++) {
        if (ngx_strcmp(t->en, en) == 0) {
            return t->fr;
        }
    }

    return NULL;
}


/* nginx -t: the message has a French text, the family's or the core's */

ngx_int_t
ngx_platform_text_known(ngx_platform_family_t *family, const char *en)
{
    return ngx_platform_find_text(family->texts, en) != NULL
           || ngx_platform_find_text(ngx_platform_core_texts, en) != NULL;
}


/*
 * text with each "%s" replaced, in order, by args[0], args[1], ...: a
 * NUL-ended string in the request pool, or NULL. text is already in the
 * request's language (ngx_platform_text()), so that a translation keeps
 * its own word order around the values.
 */

char *
ngx_platform_text_format(ngx_http_request_t *r, const char *text,
    ngx_str_t *args, ngx_uint_t nargs)
{
    u_char      *buf, *p;
    size_t       len;
    ngx_uint_t   i, n;
    const char  *t;

    len = ngx_strlen(text) + 1;

    for (i = 0; i < nargs; i++) {
        len += args[i].len;
    }

    buf = ngx_pnalloc(r->pool, len);
    if (buf == NULL) {
        return NULL;
    }

    p = buf;
    n = 0;

    for (t = text; *t; t++) {
        if (t[0] == '%' && t[1] == 's' && n < nargs) {
            p = ngx_cpymem(p, args[n].data, args[n].len);
            n++;
            t++;
            continue;
        }

        *p++ = *t;
    }

    *p = '\0';

    return (char *) buf;
}
