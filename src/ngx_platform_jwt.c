
/*
 * ngx_platform: bearer tokens (JWT, RFC 7519 and 7515, compact form).
 *
 * Keys are loaded once, at configuration time: a shared secret file for
 * HS256/384/512, a PEM public key for RS256/384/512 and ES256/384/512, or
 * a JWKS file whose keys are picked by the token's "kid". Every key has
 * one algorithm; a token naming another one is refused before its
 * signature is looked at, which closes "alg: none" and the confusion of
 * an RSA public key used as an HMAC secret.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/objects.h>
#include <openssl/pem.h>

#if (OPENSSL_VERSION_NUMBER >= 0x30000000L)
#include <openssl/core_names.h>
#include <openssl/param_build.h>
#endif

#include "ngx_platform.h"
#include "ngx_platform_jwt.h"


#define NGX_PLATFORM_JWT_HMAC   1
#define NGX_PLATFORM_JWT_RSA    2
#define NGX_PLATFORM_JWT_ECDSA  3


/* latest representable exp: 9999-12-31T23:59:59Z */
#define NGX_PLATFORM_JWT_MAX_TIME  253402300799.0


/* the size of r and of s of ES512: 521 bits */
#define NGX_PLATFORM_JWT_EC_MAX_SIZE  66


typedef struct {
    ngx_str_t                  name;
    ngx_uint_t                 type;      /* NGX_PLATFORM_JWT_* */
    const EVP_MD            *(*md)(void);

    /*
     * HMAC: shortest secret (RFC 7518 3.2: at least the hash size);
     * ECDSA: size of r and of s in the signature
     */
    size_t                     size;

    char                      *curve;     /* ECDSA: JWK "crv" */
    char                      *group;     /* ECDSA: OpenSSL group name */
    int                        bits;      /* ECDSA: the curve's size */
} ngx_platform_jwt_alg_t;


typedef struct {
    ngx_str_t                  kid;
    ngx_platform_jwt_alg_t    *alg;
    ngx_str_t                  secret;    /* HMAC */
    EVP_PKEY                  *pkey;      /* RSA, ECDSA */

    /*
     * RSA, ECDSA: a context initialized for verification once; each
     * token gets a copy, which spares OpenSSL's lookups of the algorithm
     */
    EVP_MD_CTX                *verify;

    /* ECDSA: the curve's order halved, big-endian, of the size of s */
    u_char                     half_order[NGX_PLATFORM_JWT_EC_MAX_SIZE];
} ngx_platform_jwt_key_t;


struct ngx_platform_jwt_conf_s {
    ngx_array_t                keys;      /* of ngx_platform_jwt_key_t */
    ngx_uint_t                 by_kid;    /* a JWKS: the token's kid picks */
};


static ngx_platform_jwt_alg_t  ngx_platform_jwt_algs[] = {
    { ngx_string("HS256"), NGX_PLATFORM_JWT_HMAC, EVP_sha256, 32,
      NULL, NULL, 0 },
    { ngx_string("HS384"), NGX_PLATFORM_JWT_HMAC, EVP_sha384, 48,
      NULL, NULL, 0 },
    { ngx_string("HS512"), NGX_PLATFORM_JWT_HMAC, EVP_sha512, 64,
      NULL, NULL, 0 },
    { ngx_string("RS256"), NGX_PLATFORM_JWT_RSA, EVP_sha256, 0,
      NULL, NULL, 0 },
    { ngx_string("RS384"), NGX_PLATFORM_JWT_RSA, EVP_sha384, 0,
      NULL, NULL, 0 },
    { ngx_string("RS512"), NGX_PLATFORM_JWT_RSA, EVP_sha512, 0,
      NULL, NULL, 0 },
    { ngx_string("ES256"), NGX_PLATFORM_JWT_ECDSA, EVP_sha256, 32,
      "P-256", "prime256v1", 256 },
    { ngx_string("ES384"), NGX_PLATFORM_JWT_ECDSA, EVP_sha384, 48,
      "P-384", "secp384r1", 384 },
    { ngx_string("ES512"), NGX_PLATFORM_JWT_ECDSA, EVP_sha512, 66,
      "P-521", "secp521r1", 521 },
    { ngx_null_string, 0, NULL, 0, NULL, NULL, 0 }
};


#define NGX_PLATFORM_JWT_RSA_MIN_BITS  2048


/* a JWK of a kind not served here is passed over, not an error */
static char  ngx_platform_jwt_unsupported[] = "unsupported";


static char *ngx_platform_jwt_conf(ngx_conf_t *cf,
    ngx_platform_loc_conf_t *plcf, ngx_platform_jwt_conf_t **jwtp);
static ngx_platform_jwt_alg_t *ngx_platform_jwt_alg(u_char *name,
    size_t len);
static char *ngx_platform_jwt_set_secret(ngx_platform_jwt_key_t *key,
    u_char *secret, size_t len);
static char *ngx_platform_jwt_check_pkey(ngx_conf_t *cf,
    ngx_platform_jwt_key_t *key);
static char *ngx_platform_jwt_half_order(ngx_platform_jwt_key_t *key);
static ngx_int_t ngx_platform_jwt_track(ngx_conf_t *cf, void *object,
    ngx_pool_cleanup_pt free);
static void ngx_platform_jwt_free_pkey(void *data);
static void ngx_platform_jwt_free_md_ctx(void *data);
static char *ngx_platform_jwt_jwk(ngx_conf_t *cf, json_t *jwk,
    ngx_platform_jwt_key_t *key);
static char *ngx_platform_jwt_jwk_b64(ngx_conf_t *cf, json_t *jwk,
    const char *member, ngx_str_t *value);
#if (OPENSSL_VERSION_NUMBER >= 0x30000000L)
static char *ngx_platform_jwt_jwk_rsa(ngx_conf_t *cf, json_t *jwk,
    ngx_platform_jwt_key_t *key);
static char *ngx_platform_jwt_jwk_ec(ngx_conf_t *cf, json_t *jwk,
    ngx_platform_jwt_key_t *key);
static ngx_int_t ngx_platform_jwt_fromdata(OSSL_PARAM_BLD *bld, char *type,
    EVP_PKEY **pkey);
#endif
/* RFC 7515 base64url: no padding, and one spelling of each value */
#define NGX_PLATFORM_JWT_BASE64                                              \
    (NGX_PLATFORM_BASE64_URL|NGX_PLATFORM_BASE64_NO_PAD)
static json_t *ngx_platform_jwt_decode_json(ngx_http_request_t *r,
    u_char *start, u_char *end);
static ngx_int_t ngx_platform_jwt_check_signature(ngx_http_request_t *r,
    ngx_platform_jwt_key_t *key, ngx_str_t *input, ngx_str_t *signature);
static ngx_int_t ngx_platform_jwt_check_ecdsa(ngx_platform_jwt_key_t *key,
    ngx_str_t *input, ngx_str_t *signature);
static ngx_int_t ngx_platform_jwt_verify_digest(ngx_platform_jwt_key_t *key,
    ngx_str_t *input, u_char *sig, size_t len);
static const char *ngx_platform_jwt_check_claims(ngx_http_request_t *r,
    ngx_platform_loc_conf_t *plcf, json_t *claims,
    ngx_platform_jwt_claims_t *out);
static ngx_int_t ngx_platform_jwt_audience(json_t *aud, ngx_str_t *want);
static ngx_int_t ngx_platform_jwt_copy(ngx_http_request_t *r, json_t *value,
    ngx_str_t *dst);


/* configuration */

/* the keys of one level: platform_jwt_key or platform_jwt_jwks, once */

static char *
ngx_platform_jwt_conf(ngx_conf_t *cf, ngx_platform_loc_conf_t *plcf,
    ngx_platform_jwt_conf_t **jwtp)
{
    ngx_platform_jwt_conf_t  *jwt;

    if (plcf->jwt != NGX_CONF_UNSET_PTR) {
        return "is duplicate: one platform_jwt_key or platform_jwt_jwks "
               "per level";
    }

    jwt = ngx_pcalloc(cf->pool, sizeof(ngx_platform_jwt_conf_t));
    if (jwt == NULL) {
        return NGX_CONF_ERROR;
    }

    if (ngx_array_init(&jwt->keys, cf->pool, 1,
                       sizeof(ngx_platform_jwt_key_t))
        != NGX_OK)
    {
        return NGX_CONF_ERROR;
    }

    plcf->jwt = jwt;
    *jwtp = jwt;

    return NGX_CONF_OK;
}


/* platform_jwt_key RS256 /etc/nginx/jwt.pem; */

char *
ngx_platform_jwt_key(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_platform_loc_conf_t *plcf = conf;

    BIO                      *bio;
    char                     *rv;
    ngx_str_t                *value, content;
    ngx_platform_jwt_key_t   *key;
    ngx_platform_jwt_conf_t  *jwt;

    rv = ngx_platform_jwt_conf(cf, plcf, &jwt);
    if (rv != NGX_CONF_OK) {
        return rv;
    }

    value = cf->args->elts;

    key = ngx_array_push(&jwt->keys);
    if (key == NULL) {
        return NGX_CONF_ERROR;
    }

    ngx_memzero(key, sizeof(ngx_platform_jwt_key_t));

    key->alg = ngx_platform_jwt_alg(value[1].data, value[1].len);
    if (key->alg == NULL) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "unknown JWT algorithm \"%V\", expected HS256, "
                           "HS384, HS512, RS256, RS384, RS512, ES256, "
                           "ES384 or ES512", &value[1]);
        return NGX_CONF_ERROR;
    }

    if (ngx_conf_full_name(cf->cycle, &value[2], 1) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    rv = ngx_platform_conf_read_file(cf, &value[2], 1024 * 1024,
                                     "a key file", &content);
    if (rv != NGX_CONF_OK) {
        return rv;
    }

    if (key->alg->type == NGX_PLATFORM_JWT_HMAC) {

        /* one trailing newline is an editor's, not the secret's */

        if (content.len && content.data[content.len - 1] == '\n') {
            content.len--;

            if (content.len && content.data[content.len - 1] == '\r') {
                content.len--;
            }
        }

        rv = ngx_platform_jwt_set_secret(key, content.data, content.len);
        if (rv != NGX_CONF_OK) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%s in \"%V\"",
                               rv, &value[2]);
            return NGX_CONF_ERROR;
        }

        return NGX_CONF_OK;
    }

    bio = BIO_new_mem_buf(content.data, (int) content.len);
    if (bio == NULL) {
        return NGX_CONF_ERROR;
    }

    key->pkey = PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL);
    BIO_free(bio);

    if (key->pkey == NULL) {
        ERR_clear_error();
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "no PEM public key (\"BEGIN PUBLIC KEY\") "
                           "in \"%V\"", &value[2]);
        return NGX_CONF_ERROR;
    }

    if (ngx_platform_jwt_track(cf, key->pkey, ngx_platform_jwt_free_pkey)
        != NGX_OK)
    {
        EVP_PKEY_free(key->pkey);
        return NGX_CONF_ERROR;
    }

    rv = ngx_platform_jwt_check_pkey(cf, key);
    if (rv != NGX_CONF_OK) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%s in \"%V\"",
                           rv, &value[2]);
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


/* platform_jwt_jwks /etc/nginx/jwks.json; */

char *
ngx_platform_jwt_jwks(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_platform_loc_conf_t *plcf = conf;

    char                     *rv;
    size_t                    i;
    json_t                   *doc, *keys, *jwk, *use;
    ngx_str_t                *value, content;
    ngx_uint_t                n;
    json_error_t              error;
    ngx_platform_jwt_key_t   *key, *k;
    ngx_platform_jwt_conf_t  *jwt;

    rv = ngx_platform_jwt_conf(cf, plcf, &jwt);
    if (rv != NGX_CONF_OK) {
        return rv;
    }

    value = cf->args->elts;

    jwt->by_kid = 1;

    if (ngx_conf_full_name(cf->cycle, &value[1], 1) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    rv = ngx_platform_conf_read_file(cf, &value[1], 1024 * 1024,
                                     "a key set file", &content);
    if (rv != NGX_CONF_OK) {
        return rv;
    }

    doc = json_loadb((char *) content.data, content.len,
                     JSON_REJECT_DUPLICATES, &error);
    if (doc == NULL) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid JSON in JWKS \"%V\" at line %d: %s",
                           &value[1], error.line, error.text);
        return NGX_CONF_ERROR;
    }

    rv = NGX_CONF_OK;

    keys = json_object_get(doc, "keys");
    if (!json_is_array(keys)) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "JWKS \"%V\" has no \"keys\" array", &value[1]);
        rv = NGX_CONF_ERROR;
        goto done;
    }

    json_array_foreach(keys, i, jwk) {

        use = json_object_get(jwk, "use");
        if (json_is_string(use) && ngx_strcmp(json_string_value(use), "sig"))
        {
            continue;   /* an encryption key */
        }

        key = ngx_array_push(&jwt->keys);
        if (key == NULL) {
            rv = NGX_CONF_ERROR;
            goto done;
        }

        ngx_memzero(key, sizeof(ngx_platform_jwt_key_t));

        rv = ngx_platform_jwt_jwk(cf, jwk, key);

        if (rv == ngx_platform_jwt_unsupported) {
            ngx_conf_log_error(NGX_LOG_WARN, cf, 0,
                               "JWKS \"%V\", key \"%V\": algorithm or key "
                               "type not supported, skipped",
                               &value[1], &key->kid);
            jwt->keys.nelts--;
            rv = NGX_CONF_OK;
            continue;
        }

        if (rv != NGX_CONF_OK) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "JWKS \"%V\", key %uz: %s",
                               &value[1], i + 1, rv);
            rv = NGX_CONF_ERROR;
            goto done;
        }

        k = jwt->keys.elts;

        for (n = 0; n < jwt->keys.nelts - 1; n++) {
            if (k[n].kid.len == key->kid.len
                && ngx_strncmp(k[n].kid.data, key->kid.data, key->kid.len)
                   == 0)
            {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "JWKS \"%V\": duplicate kid \"%V\"",
                                   &value[1], &key->kid);
                rv = NGX_CONF_ERROR;
                goto done;
            }
        }
    }

    if (jwt->keys.nelts == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "JWKS \"%V\" has no signing key", &value[1]);
        rv = NGX_CONF_ERROR;
    }

done:

    json_decref(doc);

    return rv;
}


static ngx_platform_jwt_alg_t *
ngx_platform_jwt_alg(u_char *name, size_t len)
{
    ngx_platform_jwt_alg_t  *alg;

    for (alg = ngx_platform_jwt_algs; alg->name.len; alg++) {
        if (alg->name.len == len
            && ngx_strncmp(alg->name.data, name, len) == 0)
        {
            return alg;
        }
    }

    return NULL;
}


static char *
ngx_platform_jwt_set_secret(ngx_platform_jwt_key_t *key, u_char *secret,
    size_t len)
{
    if (len < key->alg->size) {
        switch (key->alg->size) {
        case 32:
            return "secret shorter than 32 bytes, the least for HS256";
        case 48:
            return "secret shorter than 48 bytes, the least for HS384";
        default:
            return "secret shorter than 64 bytes, the least for HS512";
        }
    }

    /* the buffer is the configuration pool's already */

    key->secret.data = secret;
    key->secret.len = len;

    return NGX_CONF_OK;
}


/* a public key must be of the kind and size its algorithm needs */

static char *
ngx_platform_jwt_check_pkey(ngx_conf_t *cf, ngx_platform_jwt_key_t *key)
{
    int    id;
    char  *rv;
#if (OPENSSL_VERSION_NUMBER >= 0x30000000L)
    char   group[64];
#endif

    id = EVP_PKEY_base_id(key->pkey);

    switch (key->alg->type) {

    case NGX_PLATFORM_JWT_RSA:

        if (id != EVP_PKEY_RSA) {
            return "not an RSA public key";
        }

        if (EVP_PKEY_bits(key->pkey) < NGX_PLATFORM_JWT_RSA_MIN_BITS) {
            return "RSA key shorter than 2048 bits";
        }

        break;

    case NGX_PLATFORM_JWT_ECDSA:

        if (id != EVP_PKEY_EC) {
            return "not an EC public key";
        }

#if (OPENSSL_VERSION_NUMBER >= 0x30000000L)
        if (EVP_PKEY_get_utf8_string_param(key->pkey,
                                           OSSL_PKEY_PARAM_GROUP_NAME,
                                           group, sizeof(group), NULL)
            != 1
            || ngx_strcmp(group, key->alg->group) != 0)
        {
            return "EC key not on the curve of its algorithm "
                   "(ES256: P-256, ES384: P-384, ES512: P-521)";
        }
#else
        if (EVP_PKEY_bits(key->pkey) != key->alg->bits) {
            return "EC key not on the curve of its algorithm "
                   "(ES256: P-256, ES384: P-384, ES512: P-521)";
        }
#endif

        rv = ngx_platform_jwt_half_order(key);
        if (rv != NGX_CONF_OK) {
            return rv;
        }

        break;

    default:
        return "not a public key algorithm";
    }

    key->verify = EVP_MD_CTX_new();

    if (key->verify == NULL
        || ngx_platform_jwt_track(cf, key->verify,
                                  ngx_platform_jwt_free_md_ctx)
           != NGX_OK)
    {
        EVP_MD_CTX_free(key->verify);
        return "out of memory";
    }

    if (EVP_DigestVerifyInit(key->verify, NULL, key->alg->md(), NULL,
                             key->pkey)
        != 1)
    {
        ERR_clear_error();
        return "the key cannot verify signatures";
    }

    return NGX_CONF_OK;
}


/*
 * n / 2 of the key's curve: an s above it is refused, since (r, n - s)
 * verifies as well as (r, s) and a token must have one spelling
 */

static char *
ngx_platform_jwt_half_order(ngx_platform_jwt_key_t *key)
{
    int        nid;
    char      *rv;
    BIGNUM    *half;
    EC_GROUP  *group;

    rv = "the order of the EC key's curve is unknown";

    nid = OBJ_sn2nid(key->alg->group);

    group = (nid == NID_undef) ? NULL : EC_GROUP_new_by_curve_name(nid);
    half = BN_new();

    if (group && half
        && BN_rshift1(half, EC_GROUP_get0_order(group)) == 1
        && BN_bn2binpad(half, key->half_order, (int) key->alg->size)
           == (int) key->alg->size)
    {
        rv = NGX_CONF_OK;
    }

    BN_free(half);
    EC_GROUP_free(group);

    ERR_clear_error();

    return rv;
}


/* OpenSSL objects of the configuration go with its pool */

static ngx_int_t
ngx_platform_jwt_track(ngx_conf_t *cf, void *object,
    ngx_pool_cleanup_pt free)
{
    ngx_pool_cleanup_t  *cln;

    cln = ngx_pool_cleanup_add(cf->pool, 0);
    if (cln == NULL) {
        return NGX_ERROR;
    }

    cln->handler = free;
    cln->data = object;

    return NGX_OK;
}


static void
ngx_platform_jwt_free_pkey(void *data)
{
    EVP_PKEY_free(data);
}


static void
ngx_platform_jwt_free_md_ctx(void *data)
{
    EVP_MD_CTX_free(data);
}


/* one JWK of a JWKS (RFC 7517, 7518 section 6) */

static char *
ngx_platform_jwt_jwk(ngx_conf_t *cf, json_t *jwk, ngx_platform_jwt_key_t *key)
{
    char        *rv;
    json_t      *kid, *alg, *crv;
    ngx_str_t    secret;
    const char  *kty;

    if (!json_is_object(jwk)) {
        return "not a JSON object";
    }

    kid = json_object_get(jwk, "kid");
    if (!json_is_string(kid) || json_string_length(kid) == 0) {
        return "no \"kid\"";
    }

    key->kid.len = json_string_length(kid);
    key->kid.data = ngx_pnalloc(cf->pool, key->kid.len);
    if (key->kid.data == NULL) {
        return "out of memory";
    }

    ngx_memcpy(key->kid.data, json_string_value(kid), key->kid.len);

    kty = json_string_value(json_object_get(jwk, "kty"));
    if (kty == NULL) {
        return "no \"kty\"";
    }

    alg = json_object_get(jwk, "alg");

    if (alg) {
        if (!json_is_string(alg)) {
            return "\"alg\" is not a string";
        }

        key->alg = ngx_platform_jwt_alg((u_char *) json_string_value(alg),
                                        json_string_length(alg));
        if (key->alg == NULL) {
            return ngx_platform_jwt_unsupported;
        }

    } else if (ngx_strcmp(kty, "RSA") == 0) {
        key->alg = ngx_platform_jwt_alg((u_char *) "RS256", 5);

    } else if (ngx_strcmp(kty, "EC") == 0) {
        crv = json_object_get(jwk, "crv");

        for (key->alg = ngx_platform_jwt_algs; key->alg->name.len; key->alg++)
        {
            if (key->alg->curve && json_is_string(crv)
                && ngx_strcmp(key->alg->curve, json_string_value(crv)) == 0)
            {
                break;
            }
        }

        if (key->alg->name.len == 0) {
            return ngx_platform_jwt_unsupported;
        }

    } else if (ngx_strcmp(kty, "oct") == 0) {
        return "an \"oct\" key needs \"alg\"";

    } else {
        return ngx_platform_jwt_unsupported;
    }

    if (ngx_strcmp(kty, "oct") == 0) {

        if (key->alg->type != NGX_PLATFORM_JWT_HMAC) {
            return "an \"oct\" key with a public key \"alg\"";
        }

        rv = ngx_platform_jwt_jwk_b64(cf, jwk, "k", &secret);
        if (rv != NGX_CONF_OK) {
            return rv;
        }

        return ngx_platform_jwt_set_secret(key, secret.data, secret.len);
    }

#if (OPENSSL_VERSION_NUMBER >= 0x30000000L)

    if (ngx_strcmp(kty, "RSA") == 0) {
        if (key->alg->type != NGX_PLATFORM_JWT_RSA) {
            return "an \"RSA\" key with another \"alg\"";
        }

        rv = ngx_platform_jwt_jwk_rsa(cf, jwk, key);

    } else if (ngx_strcmp(kty, "EC") == 0) {
        if (key->alg->type != NGX_PLATFORM_JWT_ECDSA) {
            return "an \"EC\" key with another \"alg\"";
        }

        rv = ngx_platform_jwt_jwk_ec(cf, jwk, key);

    } else {
        return ngx_platform_jwt_unsupported;
    }

    if (rv != NGX_CONF_OK) {
        return rv;
    }

    if (ngx_platform_jwt_track(cf, key->pkey, ngx_platform_jwt_free_pkey)
        != NGX_OK)
    {
        EVP_PKEY_free(key->pkey);
        return "out of memory";
    }

    return ngx_platform_jwt_check_pkey(cf, key);

#else

    return "RSA and EC keys in a JWKS need OpenSSL 3.0 or later";

#endif
}


static char *
ngx_platform_jwt_jwk_b64(ngx_conf_t *cf, json_t *jwk, const char *member,
    ngx_str_t *value)
{
    json_t     *v;
    ngx_str_t   src;

    v = json_object_get(jwk, member);
    if (!json_is_string(v) || json_string_length(v) == 0) {
        return "a member is missing (\"k\"; \"n\", \"e\"; or \"x\", \"y\")";
    }

    src.data = (u_char *) json_string_value(v);
    src.len = json_string_length(v);

    value->data = ngx_pnalloc(cf->pool, ngx_base64_decoded_length(src.len));
    if (value->data == NULL) {
        return "out of memory";
    }

    /* padding is not base64url's, but harmless where keys are written */

    if (ngx_platform_base64_value(value, &src, NGX_PLATFORM_BASE64_URL)
        != NGX_OK)
    {
        return "a member is not base64url";
    }

    return NGX_CONF_OK;
}


#if (OPENSSL_VERSION_NUMBER >= 0x30000000L)

static char *
ngx_platform_jwt_jwk_rsa(ngx_conf_t *cf, json_t *jwk,
    ngx_platform_jwt_key_t *key)
{
    char            *rv;
    BIGNUM          *n, *e;
    ngx_str_t        nv, ev;
    OSSL_PARAM_BLD  *bld;

    rv = ngx_platform_jwt_jwk_b64(cf, jwk, "n", &nv);
    if (rv != NGX_CONF_OK) {
        return rv;
    }

    rv = ngx_platform_jwt_jwk_b64(cf, jwk, "e", &ev);
    if (rv != NGX_CONF_OK) {
        return rv;
    }

    rv = "invalid RSA key";

    n = BN_bin2bn(nv.data, (int) nv.len, NULL);
    e = BN_bin2bn(ev.data, (int) ev.len, NULL);
    bld = OSSL_PARAM_BLD_new();

    if (n && e && bld
        && OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, n)
        && OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, e)
        && ngx_platform_jwt_fromdata(bld, "RSA", &key->pkey) == NGX_OK)
    {
        rv = NGX_CONF_OK;
    }

    OSSL_PARAM_BLD_free(bld);
    BN_free(n);
    BN_free(e);

    return rv;
}


static char *
ngx_platform_jwt_jwk_ec(ngx_conf_t *cf, json_t *jwk,
    ngx_platform_jwt_key_t *key)
{
    char            *rv;
    u_char          *point;
    json_t          *crv;
    ngx_str_t        x, y;
    OSSL_PARAM_BLD  *bld;

    crv = json_object_get(jwk, "crv");
    if (!json_is_string(crv)
        || ngx_strcmp(json_string_value(crv), key->alg->curve) != 0)
    {
        return "\"crv\" does not match \"alg\"";
    }

    rv = ngx_platform_jwt_jwk_b64(cf, jwk, "x", &x);
    if (rv != NGX_CONF_OK) {
        return rv;
    }

    rv = ngx_platform_jwt_jwk_b64(cf, jwk, "y", &y);
    if (rv != NGX_CONF_OK) {
        return rv;
    }

    if (x.len != key->alg->size || y.len != key->alg->size) {
        return "\"x\" or \"y\" is not of the curve's size";
    }

    /* an uncompressed point: 0x04 x y */

    point = ngx_pnalloc(cf->pool, 1 + x.len + y.len);
    if (point == NULL) {
        return "out of memory";
    }

    point[0] = 0x04;
    ngx_memcpy(point + 1, x.data, x.len);
    ngx_memcpy(point + 1 + x.len, y.data, y.len);

    rv = "invalid EC key";

    bld = OSSL_PARAM_BLD_new();

    if (bld
        && OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME,
                                           key->alg->group, 0)
        && OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY,
                                            point, 1 + x.len + y.len)
        && ngx_platform_jwt_fromdata(bld, "EC", &key->pkey) == NGX_OK)
    {
        rv = NGX_CONF_OK;
    }

    OSSL_PARAM_BLD_free(bld);

    return rv;
}


/* a public key of the type from the parameters built */

static ngx_int_t
ngx_platform_jwt_fromdata(OSSL_PARAM_BLD *bld, char *type, EVP_PKEY **pkey)
{
    ngx_int_t      rc;
    OSSL_PARAM    *params;
    EVP_PKEY_CTX  *ctx;

    params = OSSL_PARAM_BLD_to_param(bld);
    ctx = EVP_PKEY_CTX_new_from_name(NULL, type, NULL);

    rc = (params && ctx
          && EVP_PKEY_fromdata_init(ctx) == 1
          && EVP_PKEY_fromdata(ctx, pkey, EVP_PKEY_PUBLIC_KEY, params) == 1)
         ? NGX_OK : NGX_ERROR;

    EVP_PKEY_CTX_free(ctx);
    OSSL_PARAM_free(params);

    return rc;
}

#endif


/* verification */

const char *
ngx_platform_jwt_verify(ngx_http_request_t *r, ngx_platform_loc_conf_t *plcf,
    ngx_str_t *token, ngx_platform_jwt_claims_t *claims)
{
    u_char                   *dot1, *dot2, *end;
    json_t                   *header, *payload, *alg, *kid;
    ngx_str_t                 input, sig, encoded;
    ngx_uint_t                i;
    const char               *err;
    ngx_platform_jwt_key_t   *key, *keys;
    ngx_platform_jwt_conf_t  *jwt;

    if (token->len > NGX_PLATFORM_JWT_MAX_SIZE) {
        return "The token is too large.";
    }

    end = token->data + token->len;

    dot1 = ngx_strlchr(token->data, end, '.');
    dot2 = dot1 ? ngx_strlchr(dot1 + 1, end, '.') : NULL;

    if (dot1 == NULL || dot2 == NULL || ngx_strlchr(dot2 + 1, end, '.')
        || dot1 == token->data || dot2 == dot1 + 1)
    {
        return "The token is malformed.";
    }

    header = ngx_platform_jwt_decode_json(r, token->data, dot1);
    if (header == NULL) {
        return "The token is malformed.";
    }

    err = NULL;
    payload = NULL;
    key = NULL;

    alg = json_object_get(header, "alg");

    if (!json_is_string(alg) || ngx_strcmp(json_string_value(alg), "none") == 0)
    {
        err = "The token algorithm is not accepted.";
        goto done;
    }

    if (json_object_get(header, "crit")) {
        /* no extension is understood, so none may be critical */
        err = "The token is malformed.";
        goto done;
    }

    jwt = plcf->jwt;
    keys = jwt->keys.elts;

    if (jwt->by_kid) {
        kid = json_object_get(header, "kid");

        if (json_is_string(kid)) {
            for (i = 0; i < jwt->keys.nelts; i++) {
                if (keys[i].kid.len == json_string_length(kid)
                    && ngx_memcmp(keys[i].kid.data, json_string_value(kid),
                                  keys[i].kid.len)
                       == 0)
                {
                    key = &keys[i];
                    break;
                }
            }
        }

        if (key == NULL) {
            err = "The token key is unknown.";
            goto done;
        }

    } else {
        key = &keys[0];
    }

    /* the key's algorithm, never the token's choice */

    if (key->alg->name.len != json_string_length(alg)
        || ngx_strncmp(key->alg->name.data, json_string_value(alg),
                       key->alg->name.len)
           != 0)
    {
        err = "The token algorithm is not accepted.";
        goto done;
    }

    encoded.data = dot2 + 1;
    encoded.len = end - encoded.data;

    sig.data = ngx_pnalloc(r->pool, ngx_base64_decoded_length(encoded.len)
                                    + 1);
    if (sig.data == NULL) {
        err = "The token could not be checked.";
        goto done;
    }

    if (encoded.len == 0
        || ngx_platform_base64_value(&sig, &encoded, NGX_PLATFORM_JWT_BASE64)
           != NGX_OK)
    {
        err = "The token is malformed.";
        goto done;
    }

    input.data = token->data;
    input.len = dot2 - token->data;

    if (ngx_platform_jwt_check_signature(r, key, &input, &sig) != NGX_OK) {
        err = "The token signature is invalid.";
        goto done;
    }

    payload = ngx_platform_jwt_decode_json(r, dot1 + 1, dot2);
    if (payload == NULL) {
        err = "The token is malformed.";
        goto done;
    }

    err = ngx_platform_jwt_check_claims(r, plcf, payload, claims);

done:

    json_decref(header);

    if (payload) {
        json_decref(payload);
    }

    if (err) {
        ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                       "platform jwt: %s", err);
    }

    return err;
}


/* a base64url part of the token holding a JSON object, or NULL */

static json_t *
ngx_platform_jwt_decode_json(ngx_http_request_t *r, u_char *start,
    u_char *end)
{
    json_t     *json;
    ngx_str_t   src, dst;

    src.data = start;
    src.len = end - start;

    dst.data = ngx_pnalloc(r->pool, ngx_base64_decoded_length(src.len) + 1);
    if (dst.data == NULL) {
        return NULL;
    }

    if (ngx_platform_base64_value(&dst, &src, NGX_PLATFORM_JWT_BASE64)
        != NGX_OK)
    {
        return NULL;
    }

    json = json_loadb((char *) dst.data, dst.len, JSON_REJECT_DUPLICATES,
                      NULL);

    if (json && !json_is_object(json)) {
        json_decref(json);
        return NULL;
    }

    return json;
}


static ngx_int_t
ngx_platform_jwt_check_signature(ngx_http_request_t *r,
    ngx_platform_jwt_key_t *key, ngx_str_t *input, ngx_str_t *signature)
{
    u_char         mac[EVP_MAX_MD_SIZE];
    unsigned int   len;

    switch (key->alg->type) {

    case NGX_PLATFORM_JWT_HMAC:

        if (HMAC(key->alg->md(), key->secret.data, (int) key->secret.len,
                 input->data, input->len, mac, &len)
            == NULL)
        {
            return NGX_ERROR;
        }

        if (signature->len != len
            || CRYPTO_memcmp(mac, signature->data, len) != 0)
        {
            return NGX_DECLINED;
        }

        return NGX_OK;

    case NGX_PLATFORM_JWT_RSA:

        return ngx_platform_jwt_verify_digest(key, input, signature->data,
                                              signature->len);

    default: /* NGX_PLATFORM_JWT_ECDSA */
        return ngx_platform_jwt_check_ecdsa(key, input, signature);
    }
}


/* JWS carries r and s side by side (RFC 7518 3.4); OpenSSL wants DER */

static ngx_int_t
ngx_platform_jwt_check_ecdsa(ngx_platform_jwt_key_t *key, ngx_str_t *input,
    ngx_str_t *signature)
{
    int           len;
    u_char        der[256], *p, *s, r0, s0;
    size_t        i, size;
    BIGNUM       *br, *bs;
    ECDSA_SIG    *sig;

    size = key->alg->size;

    if (signature->len != 2 * size) {
        return NGX_DECLINED;
    }

    /*
     * s above n / 2 is refused: its twin n - s verifies too; so are r and
     * s of zero, whatever OpenSSL would say of them
     */

    s = signature->data + size;

    if (ngx_memcmp(s, key->half_order, size) > 0) {
        return NGX_DECLINED;
    }

    r0 = 0;
    s0 = 0;

    for (i = 0; i < size; i++) {
        r0 |= signature->data[i];
        s0 |= s[i];
    }

    if (r0 == 0 || s0 == 0) {
        return NGX_DECLINED;
    }

    sig = ECDSA_SIG_new();
    br = BN_bin2bn(signature->data, (int) size, NULL);
    bs = BN_bin2bn(s, (int) size, NULL);

    if (sig == NULL || br == NULL || bs == NULL
        || ECDSA_SIG_set0(sig, br, bs) != 1)
    {
        ECDSA_SIG_free(sig);
        BN_free(br);
        BN_free(bs);
        return NGX_ERROR;
    }

    /* sig owns br and bs now */

    len = i2d_ECDSA_SIG(sig, NULL);

    if (len <= 0 || len > (int) sizeof(der)) {
        ECDSA_SIG_free(sig);
        return NGX_ERROR;
    }

    p = der;
    len = i2d_ECDSA_SIG(sig, &p);

    ECDSA_SIG_free(sig);

    return ngx_platform_jwt_verify_digest(key, input, der, len);
}


static ngx_int_t
ngx_platform_jwt_verify_digest(ngx_platform_jwt_key_t *key, ngx_str_t *input,
    u_char *sig, size_t len)
{
    int          ok;
    EVP_MD_CTX  *md;

    md = EVP_MD_CTX_new();
    if (md == NULL) {
        return NGX_ERROR;
    }

    ok = EVP_MD_CTX_copy_ex(md, key->verify) == 1
         && EVP_DigestVerify(md, sig, len, input->data, input->len) == 1;

    EVP_MD_CTX_free(md);

    /* a failed verification leaves its reasons in the error queue */
    ERR_clear_error();

    return ok ? NGX_OK : NGX_DECLINED;
}


static const char *
ngx_platform_jwt_check_claims(ngx_http_request_t *r,
    ngx_platform_loc_conf_t *plcf, json_t *claims,
    ngx_platform_jwt_claims_t *out)
{
    double   now, exp, nbf, leeway;
    json_t  *v;

    now = (double) ngx_time();
    leeway = (double) plcf->jwt_leeway;

    v = json_object_get(claims, "exp");
    if (!json_is_number(v)) {
        return "The token has no expiry.";
    }

    exp = json_number_value(v);

    if (now >= exp + leeway) {
        return "The token has expired.";
    }

    v = json_object_get(claims, "nbf");

    if (v) {
        if (!json_is_number(v)) {
            return "The token is malformed.";
        }

        nbf = json_number_value(v);

        if (now + leeway < nbf) {
            return "The token is not valid yet.";
        }
    }

    if (plcf->jwt_issuer.len) {
        v = json_object_get(claims, "iss");

        if (!json_is_string(v)
            || json_string_length(v) != plcf->jwt_issuer.len
            || ngx_memcmp(json_string_value(v), plcf->jwt_issuer.data,
                          plcf->jwt_issuer.len)
               != 0)
        {
            return "The token issuer is not accepted.";
        }
    }

    if (plcf->jwt_audience.len
        && ngx_platform_jwt_audience(json_object_get(claims, "aud"),
                                     &plcf->jwt_audience)
           != NGX_OK)
    {
        return "The token audience is not accepted.";
    }

    v = json_object_get(claims, "tenantId");

    if (!json_is_string(v)
        || !ngx_platform_name_valid((u_char *) json_string_value(v),
                                        json_string_length(v)))
    {
        return "The token has no tenant.";
    }

    if (ngx_platform_jwt_copy(r, v, &out->tenant) != NGX_OK) {
        return "The token could not be checked.";
    }

    v = json_object_get(claims, "sub");

    if (v && !json_is_string(v)) {
        return "The token is malformed.";
    }

    if (ngx_platform_jwt_copy(r, v, &out->subject) != NGX_OK) {
        return "The token could not be checked.";
    }

    v = json_object_get(claims, "merchantId");

    if (v && !json_is_string(v)) {
        return "The token is malformed.";
    }

    if (ngx_platform_jwt_copy(r, v, &out->merchant) != NGX_OK) {
        return "The token could not be checked.";
    }

    /* what a cache may keep it for: until it expires, leeway included */

    exp += leeway;

    out->expires = exp > NGX_PLATFORM_JWT_MAX_TIME
                   ? (time_t) NGX_PLATFORM_JWT_MAX_TIME : (time_t) exp;

    return NULL;
}


static ngx_int_t
ngx_platform_jwt_audience(json_t *aud, ngx_str_t *want)
{
    size_t   i;
    json_t  *v;

    if (json_is_string(aud)) {
        return (json_string_length(aud) == want->len
                && ngx_memcmp(json_string_value(aud), want->data, want->len)
                   == 0)
               ? NGX_OK : NGX_DECLINED;
    }

    if (!json_is_array(aud)) {
        return NGX_DECLINED;
    }

    json_array_foreach(aud, i, v) {
        if (json_is_string(v)
            && json_string_length(v) == want->len
            && ngx_memcmp(json_string_value(v), want->data, want->len) == 0)
        {
            return NGX_OK;
        }
    }

    return NGX_DECLINED;
}


static ngx_int_t
ngx_platform_jwt_copy(ngx_http_request_t *r, json_t *value, ngx_str_t *dst)
{
    if (value == NULL) {
        ngx_str_null(dst);
        return NGX_OK;
    }

    dst->len = json_string_length(value);
    dst->data = ngx_pnalloc(r->pool, dst->len + 1);
    if (dst->data == NULL) {
        return NGX_ERROR;
    }

    ngx_memcpy(dst->data, json_string_value(value), dst->len);
    dst->data[dst->len] = '\0';

    return NGX_OK;
}
