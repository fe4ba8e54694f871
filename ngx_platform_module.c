
/*
 * ngx_platform_module: the business platform's HTTP/JSON API served
 * in-process. Module definition, directives, configuration and the
 * per-worker lifecycle of the PostgreSQL pool and the Redis client.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_platform.h"
#include "ngx_platform_op.h"
#include "ngx_platform_pg.h"
#include "ngx_platform_redis.h"
#include "ngx_platform_rate_limit.h"

#if (NGX_LINUX)
#include <malloc.h>
#endif


/*
 * glibc serves an allocation this large or larger with its own mapping,
 * returned to the system when freed
 */
#define NGX_PLATFORM_MMAP_THRESHOLD  (128 * 1024)


static ngx_int_t ngx_platform_preconfiguration(ngx_conf_t *cf);
static ngx_int_t ngx_platform_postconfiguration(ngx_conf_t *cf);
static ngx_int_t ngx_platform_init_process(ngx_cycle_t *cycle);
static void ngx_platform_exit_process(ngx_cycle_t *cycle);
static void *ngx_platform_create_main_conf(ngx_conf_t *cf);
static char *ngx_platform_init_main_conf(ngx_conf_t *cf, void *conf);
static char *ngx_platform_init_thread_pool(ngx_conf_t *cf,
    ngx_platform_main_conf_t *pmcf);
static char *ngx_platform_check_backends(ngx_conf_t *cf,
    ngx_platform_main_conf_t *pmcf);
static ngx_platform_pg_options_t *ngx_platform_parse_conninfo(ngx_conf_t *cf,
    ngx_str_t *value, char *name);
static void ngx_platform_free_pg_options(void *data);
static void *ngx_platform_create_loc_conf(ngx_conf_t *cf);
static char *ngx_platform_merge_loc_conf(ngx_conf_t *cf, void *parent,
    void *child);
static char *ngx_platform_check_texts(ngx_conf_t *cf,
    ngx_platform_family_t *family);
static char *ngx_platform_check_text(ngx_conf_t *cf,
    ngx_platform_family_t *family, const char *en);
static char *ngx_platform_check_doc_text(ngx_conf_t *cf,
    ngx_platform_family_t *family, const char *doc);
static char *ngx_platform_family(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_platform_otp_attempts(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_platform_otp_tenant_attempts(ngx_conf_t *cf,
    ngx_command_t *cmd, void *conf);
static char *ngx_platform_parse_attempts(ngx_conf_t *cf, ngx_str_t *value,
    ngx_uint_t *attempts, time_t *window);
static char *ngx_platform_body_memory(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_platform_jwt_leeway_check(ngx_conf_t *cf, void *post,
    void *data);
static char *ngx_platform_pg_tenant_share(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_platform_apikey_unknown_cache(ngx_conf_t *cf,
    ngx_command_t *cmd, void *conf);


static ngx_conf_num_bounds_t  ngx_platform_pool_size_bounds = {
    ngx_conf_check_num_bounds, 1, 1024
};

static ngx_conf_num_bounds_t  ngx_platform_pipeline_depth_bounds = {
    ngx_conf_check_num_bounds, 1, 1024
};

static ngx_conf_num_bounds_t  ngx_platform_queue_size_bounds = {
    ngx_conf_check_num_bounds, 0, 65536
};

static ngx_conf_num_bounds_t  ngx_platform_redis_db_bounds = {
    ngx_conf_check_num_bounds, 0, 65535
};

static ngx_conf_num_bounds_t  ngx_platform_redis_wait_bounds = {
    ngx_conf_check_num_bounds, 0, 16
};

static ngx_conf_num_bounds_t  ngx_platform_auth_cache_size_bounds = {
    ngx_conf_check_num_bounds, 1, 1048576
};

static ngx_conf_post_handler_pt  ngx_platform_jwt_leeway_post =
    ngx_platform_jwt_leeway_check;


static ngx_command_t  ngx_platform_commands[] = {

    { ngx_string("platform_pg"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_str_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_platform_main_conf_t, pg_conninfo),
      NULL },

    { ngx_string("platform_pg_pool_size"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_platform_main_conf_t, pg_pool_size),
      &ngx_platform_pool_size_bounds },

    { ngx_string("platform_pg_queue_size"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_platform_main_conf_t, pg_queue_size),
      &ngx_platform_queue_size_bounds },

    { ngx_string("platform_pg_queue_timeout"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_msec_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_platform_main_conf_t, pg_queue_timeout),
      NULL },

    { ngx_string("platform_pg_connect_timeout"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_msec_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_platform_main_conf_t, pg_connect_timeout),
      NULL },

    { ngx_string("platform_pg_query_timeout"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_msec_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_platform_main_conf_t, pg_query_timeout),
      NULL },

    { ngx_string("platform_pg_idle_timeout"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_msec_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_platform_main_conf_t, pg_idle_timeout),
      NULL },

    { ngx_string("platform_pg_max_uses"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_platform_main_conf_t, pg_max_uses),
      NULL },

    { ngx_string("platform_pg_pipeline_depth"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_platform_main_conf_t, pg_pipeline_depth),
      &ngx_platform_pipeline_depth_bounds },

    { ngx_string("platform_pg_tenant_share"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_platform_pg_tenant_share,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_platform_main_conf_t, pg_tenant_share),
      NULL },

    { ngx_string("platform_pg_lock_timeout"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_msec_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_platform_main_conf_t, pg_lock_timeout),
      NULL },

    { ngx_string("platform_pg_read"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_str_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_platform_main_conf_t, pg_read_conninfo),
      NULL },

    { ngx_string("platform_pg_prepare"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_FLAG,
      ngx_conf_set_flag_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_platform_main_conf_t, pg_prepare),
      NULL },

    { ngx_string("platform_pg_coalesce"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_FLAG,
      ngx_conf_set_flag_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_platform_main_conf_t, pg_coalesce),
      NULL },

    { ngx_string("platform_pg_row_security"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_FLAG,
      ngx_conf_set_flag_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_platform_main_conf_t, pg_row_security),
      NULL },

    { ngx_string("platform_redis"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_str_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_platform_main_conf_t, redis_addr),
      NULL },

    { ngx_string("platform_redis_sentinel"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_2MORE,
      ngx_platform_redis_sentinel_conf,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("platform_redis_cluster"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_1MORE,
      ngx_platform_redis_cluster_conf,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("platform_redis_wait_replicas"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_platform_main_conf_t, redis_wait_replicas),
      &ngx_platform_redis_wait_bounds },

    { ngx_string("platform_redis_password"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_str_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_platform_main_conf_t, redis_password),
      NULL },

    { ngx_string("platform_redis_db"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_platform_main_conf_t, redis_db),
      &ngx_platform_redis_db_bounds },

    { ngx_string("platform_redis_connect_timeout"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_msec_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_platform_main_conf_t, redis_connect_timeout),
      NULL },

    { ngx_string("platform_redis_timeout"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_msec_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_platform_main_conf_t, redis_timeout),
      NULL },

    /* platform_otp; platform_tms; ...: one per family of the registry */

#define NGX_PLATFORM_FAMILY(name)                                           \
    { ngx_string("platform_" #name),                                        \
      NGX_HTTP_LOC_CONF|NGX_CONF_NOARGS,                                    \
      ngx_platform_family,                                                  \
      NGX_HTTP_LOC_CONF_OFFSET,                                             \
      0,                                                                    \
      &ngx_platform_##name##_family },
#include "ngx_platform_families.h"
#undef NGX_PLATFORM_FAMILY

    { ngx_string("platform_auth"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_1MORE,
      ngx_platform_auth_policy,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("platform_apikey_unknown_cache"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE12,
      ngx_platform_apikey_unknown_cache,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("platform_auth_cache_size"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_platform_main_conf_t, auth_cache_size),
      &ngx_platform_auth_cache_size_bounds },

    { ngx_string("platform_jwt_key"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE2,
      ngx_platform_jwt_key,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("platform_jwt_jwks"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_platform_jwt_jwks,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("platform_jwt_issuer"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_str_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_platform_loc_conf_t, jwt_issuer),
      NULL },

    { ngx_string("platform_jwt_audience"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_str_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_platform_loc_conf_t, jwt_audience),
      NULL },

    { ngx_string("platform_jwt_leeway"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_sec_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_platform_loc_conf_t, jwt_leeway),
      &ngx_platform_jwt_leeway_post },

    { ngx_string("platform_jwt_cache"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_FLAG,
      ngx_conf_set_flag_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_platform_loc_conf_t, jwt_cache),
      NULL },

    { ngx_string("platform_apikey_cache_time"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_msec_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_platform_loc_conf_t, apikey_cache_time),
      NULL },

    { ngx_string("platform_apikey_scope"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_1MORE,
      ngx_conf_set_str_array_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_platform_loc_conf_t, apikey_scopes),
      NULL },

    { ngx_string("platform_otp_attempts"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE2,
      ngx_platform_otp_attempts,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("platform_otp_tenant_attempts"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE12,
      ngx_platform_otp_tenant_attempts,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("platform_metrics_buckets"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_1MORE,
      ngx_platform_metrics_buckets,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("platform_thread_pool"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_str_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_platform_main_conf_t, thread_pool_name),
      NULL },

    { ngx_string("platform_body_memory"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_platform_body_memory,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("platform_document_max_size"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_size_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_platform_loc_conf_t, document_max_size),
      NULL },

    { ngx_string("platform_cache_max_age"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_sec_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_platform_loc_conf_t, cache_max_age),
      NULL },

    { ngx_string("platform_cache_time"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_msec_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_platform_loc_conf_t, cache_time),
      NULL },

    { ngx_string("platform_webhook_source"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_1MORE,
      ngx_platform_webhook_conf,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_platform_loc_conf_t, webhook_sources),
      NULL },

    { ngx_string("platform_webhook_payment_method"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_1MORE,
      ngx_platform_webhook_conf,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_platform_loc_conf_t, webhook_methods),
      NULL },

    { ngx_string("platform_identity_bureau"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_str_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_platform_loc_conf_t, identity_bureau),
      NULL },

    { ngx_string("platform_identity_cache_time"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_sec_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_platform_loc_conf_t, identity_cache_time),
      NULL },

    { ngx_string("platform_identity_bureau_rate"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE12,
      ngx_platform_rate_limit_bureau_conf,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("platform_rate_limit"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE23,
      ngx_platform_rate_limit_conf,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("platform_openapi_server"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_platform_openapi_server,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_platform_loc_conf_t, openapi_server),
      NULL },

      ngx_null_command
};


static ngx_http_module_t  ngx_platform_module_ctx = {
    ngx_platform_preconfiguration,         /* preconfiguration */
    ngx_platform_postconfiguration,        /* postconfiguration */

    ngx_platform_create_main_conf,         /* create main configuration */
    ngx_platform_init_main_conf,           /* init main configuration */

    NULL,                                  /* create server configuration */
    NULL,                                  /* merge server configuration */

    ngx_platform_create_loc_conf,          /* create location configuration */
    ngx_platform_merge_loc_conf            /* merge location configuration */
};


ngx_module_t  ngx_platform_module = {
    NGX_MODULE_V1,
    &ngx_platform_module_ctx,              /* module context */
    ngx_platform_commands,                 /* module directives */
    NGX_HTTP_MODULE,                       /* module type */
    NULL,                                  /* init master */
    NULL,                                  /* init module */
    ngx_platform_init_process,             /* init process */
    NULL,                                  /* init thread */
    NULL,                                  /* exit thread */
    ngx_platform_exit_process,             /* exit process */
    NULL,                                  /* exit master */
    NGX_MODULE_V1_PADDING
};


/* the registry: every family of ngx_platform_families.h, in its order */

ngx_platform_family_t  *ngx_platform_families[] = {
#define NGX_PLATFORM_FAMILY(name)  &ngx_platform_##name##_family,
#include "ngx_platform_families.h"
#undef NGX_PLATFORM_FAMILY
    NULL
};


static ngx_int_t
ngx_platform_preconfiguration(ngx_conf_t *cf)
{
    ngx_uint_t  i;

    for (i = 0; ngx_platform_families[i]; i++) {

        if (i == NGX_PLATFORM_FAMILIES_MAX) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "more than %d platform families",
                               NGX_PLATFORM_FAMILIES_MAX);
            return NGX_ERROR;
        }

        ngx_platform_families[i]->index = i;
    }

    if (ngx_platform_operation_ids_init(cf->log) != NGX_OK) {
        return NGX_ERROR;
    }

    if (ngx_platform_variables_add(cf) != NGX_OK) {
        return NGX_ERROR;
    }

    return NGX_OK;
}


static ngx_int_t
ngx_platform_postconfiguration(ngx_conf_t *cf)
{
    ngx_http_handler_pt        *h;
    ngx_http_core_main_conf_t  *cmcf;

    cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);

    h = ngx_array_push(&cmcf->phases[NGX_HTTP_LOG_PHASE].handlers);
    if (h == NULL) {
        return NGX_ERROR;
    }

    *h = ngx_platform_metrics_log_handler;

    /* pushed last, it runs before limit_req and limit_conn */

    h = ngx_array_push(&cmcf->phases[NGX_HTTP_PREACCESS_PHASE].handlers);
    if (h == NULL) {
        return NGX_ERROR;
    }

    *h = ngx_platform_preaccess_handler;

    if (ngx_platform_filter_init(cf) != NGX_OK) {
        return NGX_ERROR;
    }

    /* after every location is merged: what each webhook location serves */

    if (ngx_platform_webhooks_check_locations(cf) != NGX_OK) {
        return NGX_ERROR;
    }

    if (ngx_platform_openapi_init(cf) != NGX_OK) {
        return NGX_ERROR;
    }

    return ngx_platform_metrics_add_zone(cf);
}


static ngx_int_t
ngx_platform_init_process(ngx_cycle_t *cycle)
{
    ngx_platform_main_conf_t  *pmcf;

    if (ngx_process != NGX_PROCESS_WORKER
        && ngx_process != NGX_PROCESS_SINGLE)
    {
        return NGX_OK;
    }

    pmcf = ngx_http_cycle_get_module_main_conf(cycle, ngx_platform_module);
    if (pmcf == NULL) {
        return NGX_OK;
    }

#if (NGX_LINUX && defined M_MMAP_THRESHOLD)

    /*
     * glibc raises its threshold each time such a mapping is freed, up to
     * 32 MB, after which the megabytes of later bodies and documents come
     * from the heap and stay resident: a fixed threshold keeps giving
     * them back
     */

    if (mallopt(M_MMAP_THRESHOLD, NGX_PLATFORM_MMAP_THRESHOLD) != 1) {
        ngx_log_error(NGX_LOG_NOTICE, cycle->log, 0,
                      "platform: mallopt(M_MMAP_THRESHOLD) failed");
    }

#endif

    /* connect only to what the configured locations use */

    if ((pmcf->backends & NGX_PLATFORM_BACKEND_PG)
        && ngx_platform_pg_init_process(cycle, pmcf) != NGX_OK)
    {
        return NGX_ERROR;
    }

    if ((pmcf->backends & NGX_PLATFORM_BACKEND_REDIS)
        && ngx_platform_redis_init_process(cycle, pmcf) != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (ngx_platform_auth_init_process(cycle) != NGX_OK) {
        return NGX_ERROR;
    }

    ngx_platform_metrics_init_process(cycle);

    ngx_platform_rate_limit_init_process(cycle);

    return NGX_OK;
}


static void
ngx_platform_exit_process(ngx_cycle_t *cycle)
{
    ngx_platform_main_conf_t  *pmcf;

    pmcf = ngx_http_cycle_get_module_main_conf(cycle, ngx_platform_module);
    if (pmcf == NULL) {
        return;
    }

    ngx_platform_redis_exit_process(cycle, pmcf);
    ngx_platform_rate_limit_exit_process(cycle);
    ngx_platform_pg_exit_process(cycle, pmcf);
    ngx_platform_auth_exit_process(cycle);
}


static void *
ngx_platform_create_main_conf(ngx_conf_t *cf)
{
    ngx_platform_main_conf_t  *pmcf;

    pmcf = ngx_pcalloc(cf->pool, sizeof(ngx_platform_main_conf_t));
    if (pmcf == NULL) {
        return NULL;
    }

    /*
     * set by ngx_pcalloc():
     *
     *     pmcf->pg_conninfo = { 0, NULL };
     *     pmcf->redis_addr = { 0, NULL };
     *     pmcf->redis_password = { 0, NULL };
     *     pmcf->pg = NULL;
     *     pmcf->redis = NULL;
     */

    pmcf->pg_pool_size = NGX_CONF_UNSET_UINT;
    pmcf->pg_queue_size = NGX_CONF_UNSET_UINT;
    pmcf->pg_queue_timeout = NGX_CONF_UNSET_MSEC;
    pmcf->pg_connect_timeout = NGX_CONF_UNSET_MSEC;
    pmcf->pg_query_timeout = NGX_CONF_UNSET_MSEC;
    pmcf->pg_idle_timeout = NGX_CONF_UNSET_MSEC;
    pmcf->pg_max_uses = NGX_CONF_UNSET_UINT;
    pmcf->pg_pipeline_depth = NGX_CONF_UNSET_UINT;
    pmcf->pg_tenant_share = NGX_CONF_UNSET_UINT;
    pmcf->pg_lock_timeout = NGX_CONF_UNSET_MSEC;
    pmcf->pg_row_security = NGX_CONF_UNSET;
    pmcf->pg_prepare = NGX_CONF_UNSET;
    pmcf->pg_coalesce = NGX_CONF_UNSET;
    pmcf->redis_db = NGX_CONF_UNSET;
    pmcf->redis_wait_replicas = NGX_CONF_UNSET;
    pmcf->redis_connect_timeout = NGX_CONF_UNSET_MSEC;
    pmcf->redis_timeout = NGX_CONF_UNSET_MSEC;
    pmcf->auth_cache_size = NGX_CONF_UNSET_UINT;
    pmcf->body_memory = NGX_CONF_UNSET_SIZE;
    pmcf->apikey_unknown_size = NGX_CONF_UNSET_UINT;
    pmcf->apikey_unknown_time = NGX_CONF_UNSET_MSEC;

    return pmcf;
}


static char *
ngx_platform_init_main_conf(ngx_conf_t *cf, void *conf)
{
    ngx_platform_main_conf_t *pmcf = conf;

    ngx_conf_init_uint_value(pmcf->pg_pool_size, 8);
    ngx_conf_init_uint_value(pmcf->pg_queue_size, 128);
    ngx_conf_init_msec_value(pmcf->pg_queue_timeout, 3000);
    ngx_conf_init_msec_value(pmcf->pg_connect_timeout, 3000);
    ngx_conf_init_msec_value(pmcf->pg_query_timeout, 10000);
    ngx_conf_init_msec_value(pmcf->pg_idle_timeout, 60000);
    ngx_conf_init_uint_value(pmcf->pg_max_uses, 10000);
    ngx_conf_init_uint_value(pmcf->pg_pipeline_depth, 8);
    ngx_conf_init_uint_value(pmcf->pg_tenant_share, 50);
    ngx_conf_init_msec_value(pmcf->pg_lock_timeout, 500);
    ngx_conf_init_value(pmcf->pg_row_security, 1);
    ngx_conf_init_value(pmcf->pg_prepare, 1);
    ngx_conf_init_value(pmcf->pg_coalesce, 1);
    ngx_conf_init_value(pmcf->redis_db, 0);
    ngx_conf_init_msec_value(pmcf->redis_connect_timeout, 1000);
    ngx_conf_init_msec_value(pmcf->redis_timeout, 1000);
    ngx_conf_init_uint_value(pmcf->auth_cache_size, 1024);
    ngx_conf_init_size_value(pmcf->body_memory, 256 * 1024 * 1024);
    ngx_conf_init_uint_value(pmcf->apikey_unknown_size, 10000);
    ngx_conf_init_msec_value(pmcf->apikey_unknown_time, 10000);

    ngx_platform_metrics_init_buckets(pmcf);

    if (pmcf->redis_deployment != NGX_PLATFORM_REDIS_SINGLE
        && pmcf->redis_addr.data != NULL)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"platform_redis\" and \"%s\" both set: "
                           "the module uses one Redis deployment",
                           pmcf->redis_deployment
                           == NGX_PLATFORM_REDIS_CLUSTER
                           ? "platform_redis_cluster"
                           : "platform_redis_sentinel");
        return NGX_CONF_ERROR;
    }

    if (pmcf->redis_addr.data == NULL) {
        ngx_str_set(&pmcf->redis_addr, "127.0.0.1:6379");
    }

    /* a deployment that fails over has replicas to wait for */
    ngx_conf_init_value(pmcf->redis_wait_replicas,
                        pmcf->redis_deployment != NGX_PLATFORM_REDIS_SINGLE);

    if (ngx_platform_init_thread_pool(cf, pmcf) != NGX_CONF_OK) {
        return NGX_CONF_ERROR;
    }

    return ngx_platform_check_backends(cf, pmcf);
}


/*
 * The thread pool that parses large bodies and decodes documents: nginx's
 * "default" pool (32 threads unless a "thread_pool default" directive
 * says otherwise) or the one named; only when a configured family takes
 * bodies. An unknown name fails "nginx -t" with nginx's own message.
 */

static char *
ngx_platform_init_thread_pool(ngx_conf_t *cf, ngx_platform_main_conf_t *pmcf)
{
    if (pmcf->thread_pool_name.len == 3
        && ngx_strncmp(pmcf->thread_pool_name.data, "off", 3) == 0)
    {
        return NGX_CONF_OK;
    }

#if (NGX_THREADS)

    if (!pmcf->bodies) {
        return NGX_CONF_OK;
    }

    pmcf->thread_pool = ngx_thread_pool_add(cf, pmcf->thread_pool_name.len
                                                ? &pmcf->thread_pool_name
                                                : NULL);
    if (pmcf->thread_pool == NULL) {
        return NGX_CONF_ERROR;
    }

#else

    if (pmcf->thread_pool_name.len) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"platform_thread_pool %V\" needs nginx built "
                           "--with-threads; use \"off\"",
                           &pmcf->thread_pool_name);
        return NGX_CONF_ERROR;
    }

#endif

    return NGX_CONF_OK;
}


/* "nginx -t" tells about backend settings that cannot work */

static char *
ngx_platform_check_backends(ngx_conf_t *cf, ngx_platform_main_conf_t *pmcf)
{
    if (pmcf->pg_read_conninfo.len == 3
        && ngx_strncmp(pmcf->pg_read_conninfo.data, "off", 3) == 0)
    {
        ngx_str_null(&pmcf->pg_read_conninfo);
    }

    if (pmcf->pg_conninfo.len) {
        pmcf->pg_options = ngx_platform_parse_conninfo(cf,
                                                       &pmcf->pg_conninfo,
                                                       "platform_pg");
        if (pmcf->pg_options == NULL) {
            return NGX_CONF_ERROR;
        }

    } else if (pmcf->backends & NGX_PLATFORM_BACKEND_PG) {
        ngx_conf_log_error(NGX_LOG_WARN, cf, 0,
                           "\"platform_pg\" is not set: the locations that "
                           "need PostgreSQL will answer 503");
    }

    if (pmcf->pg_read_conninfo.len) {
        if (pmcf->pg_conninfo.len == 0) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "\"platform_pg_read\" needs \"platform_pg\": "
                               "reads fall back to the primary");
            return NGX_CONF_ERROR;
        }

        pmcf->pg_read_options = ngx_platform_parse_conninfo(cf,
                                                  &pmcf->pg_read_conninfo,
                                                  "platform_pg_read");
        if (pmcf->pg_read_options == NULL) {
            return NGX_CONF_ERROR;
        }
    }

    return ngx_platform_redis_check_conf(cf, pmcf);
}


/* parsed once here; the workers build their connections from it */

static ngx_platform_pg_options_t *
ngx_platform_parse_conninfo(ngx_conf_t *cf, ngx_str_t *value, char *name)
{
    char                       *err, *conninfo;
    ngx_pool_cleanup_t         *cln;
    ngx_platform_pg_options_t  *options;

    conninfo = ngx_pnalloc(cf->pool, value->len + 1);
    if (conninfo == NULL) {
        return NULL;
    }

    (void) ngx_cpystrn((u_char *) conninfo, value->data, value->len + 1);

    cln = ngx_pool_cleanup_add(cf->pool, 0);
    if (cln == NULL) {
        return NULL;
    }

    err = NULL;
    options = PQconninfoParse(conninfo, &err);

    if (options == NULL) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid \"%s\": %s",
                           name, err ? err : "out of memory");
        if (err) {
            PQfreemem(err);
        }

        return NULL;
    }

    cln->handler = ngx_platform_free_pg_options;
    cln->data = options;

    return options;
}


static void *
ngx_platform_create_loc_conf(ngx_conf_t *cf)
{
    ngx_platform_loc_conf_t  *plcf;

    plcf = ngx_pcalloc(cf->pool, sizeof(ngx_platform_loc_conf_t));
    if (plcf == NULL) {
        return NULL;
    }

    /*
     * set by ngx_pcalloc():
     *
     *     plcf->family = NULL;
     *     plcf->jwt_issuer = { 0, NULL };
     *     plcf->jwt_audience = { 0, NULL };
     */

    plcf->otp_max_attempts = NGX_CONF_UNSET_UINT;
    plcf->otp_attempts_window = NGX_CONF_UNSET;
    plcf->otp_tenant_attempts = NGX_CONF_UNSET_UINT;
    plcf->otp_tenant_window = NGX_CONF_UNSET;
    plcf->document_max_size = NGX_CONF_UNSET_SIZE;
    plcf->cache_max_age = NGX_CONF_UNSET;
    plcf->cache_time = NGX_CONF_UNSET_MSEC;
    plcf->auth = NGX_CONF_UNSET_UINT;
    plcf->jwt = NGX_CONF_UNSET_PTR;
    plcf->jwt_leeway = NGX_CONF_UNSET;
    plcf->jwt_cache = NGX_CONF_UNSET;
    plcf->apikey_cache_time = NGX_CONF_UNSET_MSEC;
    plcf->apikey_scopes = NGX_CONF_UNSET_PTR;
    plcf->webhook_sources = NGX_CONF_UNSET_PTR;
    plcf->webhook_methods = NGX_CONF_UNSET_PTR;
    plcf->identity_cache_time = NGX_CONF_UNSET;
    plcf->identity_bureau_rate = NGX_CONF_UNSET_PTR;
    plcf->rate_limits = NGX_CONF_UNSET_PTR;

    return plcf;
}


static char *
ngx_platform_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child)
{
    ngx_platform_loc_conf_t *prev = parent;
    ngx_platform_loc_conf_t *conf = child;

    char                      *rv;
    ngx_http_core_loc_conf_t  *clcf;

    /*
     * "if", "limit_except" and nested locations have configurations of
     * their own, filled only here: they serve the family of the location
     * around them, unless they name a content handler of their own.
     */

    if (conf->family == NULL && prev->family) {
        conf->family = prev->family;
        conf->routes = prev->routes;

        clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);

        if (clcf->handler == NULL) {
            clcf->handler = ngx_platform_handler;
        }
    }

    ngx_conf_merge_uint_value(conf->otp_max_attempts,
                              prev->otp_max_attempts, 10);
    ngx_conf_merge_value(conf->otp_attempts_window,
                         prev->otp_attempts_window, 300);

    /*
     * a tenant ceiling unless "off": 100 wrong guesses per 5 minutes
     * across every client find a 4-digit code with a chance of 1 in 100
     * per window (docs/directives.md has the arithmetic)
     */
    ngx_conf_merge_uint_value(conf->otp_tenant_attempts,
                              prev->otp_tenant_attempts, 100);
    ngx_conf_merge_value(conf->otp_tenant_window,
                         prev->otp_tenant_window, 300);

    ngx_conf_merge_size_value(conf->document_max_size,
                              prev->document_max_size, 10 * 1024 * 1024);
    ngx_conf_merge_value(conf->cache_max_age, prev->cache_max_age, 60);
    ngx_conf_merge_msec_value(conf->cache_time, prev->cache_time, 1000);
    ngx_conf_merge_ptr_value(conf->webhook_sources, prev->webhook_sources,
                             NULL);
    ngx_conf_merge_ptr_value(conf->webhook_methods, prev->webhook_methods,
                             NULL);
    ngx_conf_merge_str_value(conf->identity_bureau, prev->identity_bureau,
                             "");
    ngx_conf_merge_value(conf->identity_cache_time,
                         prev->identity_cache_time, 86400);
    ngx_conf_merge_ptr_value(conf->identity_bureau_rate,
                             prev->identity_bureau_rate, NULL);

    /* as limit_req: the limits of the nearest level that declares any */
    ngx_conf_merge_ptr_value(conf->rate_limits, prev->rate_limits, NULL);

    /* relative: the host the document was fetched from */
    ngx_conf_merge_str_value(conf->openapi_server, prev->openapi_server, "/");

    if (conf->family == &ngx_platform_identity_family
        && conf->identity_bureau.len == 0)
    {
        ngx_conf_log_error(NGX_LOG_WARN, cf, 0,
                           "platform_identity without "
                           "platform_identity_bureau: verifications not "
                           "answered from the record will be 500");
    }

    rv = ngx_platform_auth_merge(cf, prev, conf);
    if (rv != NGX_CONF_OK) {
        return rv;
    }

    return ngx_platform_webhooks_record_location(cf, conf);
}


static void
ngx_platform_free_pg_options(void *data)
{
    PQconninfoFree(data);
}


/* platform_otp; platform_tms; ...: the location serves that family */

/*
 * nginx -t: an Envelope A family answers French clients in French, so
 * each of its texts has a French version, and each message its endpoint
 * tables declare, or its documentation says its code answers, is among
 * its texts or the core's.
 */

static char *
ngx_platform_check_texts(ngx_conf_t *cf, ngx_platform_family_t *family)
{
    char                     *rv;
    const char               *m[11];
    ngx_uint_t                i;
    ngx_platform_sql_t         *sql;
    ngx_platform_text_t        *t;
    ngx_platform_outcome_t     *o;
    ngx_platform_endpoint_t    *ep;
    ngx_platform_doc_answer_t  *a;

    if (family->envelope != NGX_PLATFORM_ENVELOPE_A) {
        return NGX_CONF_OK;
    }

    for (t = family->texts; t && t->en; t++) {
        if (t->fr == NULL || t->fr[0] == '\0') {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "platform_%V: the message \"%s\" has no "
                               "French text", &family->name, t->en);
            return NGX_CONF_ERROR;
        }
    }

    for (ep = family->endpoints; ep->pattern; ep++) {
        sql = ep->sql;

        ngx_memzero(m, sizeof(m));

        m[0] = ep->invalid;
        m[1] = ep->invalid_detail;

        if (sql) {
            m[2] = sql->ok;
            m[3] = sql->missing;
            m[4] = sql->missing_detail;
            m[5] = sql->conflict;
            m[6] = sql->conflict_detail;
            m[7] = sql->reference_message;
            m[8] = sql->reference_detail;
            m[9] = sql->refused;
            m[10] = sql->refused_detail;
        }

        for (i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
            if (m[i] == NULL) {
                continue;
            }

            rv = ngx_platform_check_text(cf, family, m[i]);
            if (rv != NGX_CONF_OK) {
                return rv;
            }
        }

        for (o = sql ? sql->outcomes : NULL; o && o->name; o++) {
            rv = ngx_platform_check_text(cf, family, o->message);
            if (rv != NGX_CONF_OK) {
                return rv;
            }

            if (o->detail) {
                rv = ngx_platform_check_text(cf, family, o->detail);
                if (rv != NGX_CONF_OK) {
                    return rv;
                }
            }
        }

        if (ep->doc == NULL) {
            continue;
        }

        if (ep->doc->ok) {
            rv = ngx_platform_check_text(cf, family, ep->doc->ok);
            if (rv != NGX_CONF_OK) {
                return rv;
            }
        }

        for (a = ep->doc->answers; a && a->status; a++) {
            m[0] = a->message;
            m[1] = a->detail;

            for (i = 0; i < 2; i++) {
                if (m[i] == NULL) {
                    continue;
                }

                rv = ngx_platform_check_doc_text(cf, family, m[i]);
                if (rv != NGX_CONF_OK) {
                    return rv;
                }
            }
        }
    }

    return NGX_CONF_OK;
}


/*
 * A text of the documentation: "<n>" where the code puts a value is
 * "%s" in the texts
 */

static char *
ngx_platform_check_doc_text(ngx_conf_t *cf, ngx_platform_family_t *family,
    const char *doc)
{
    u_char      *p, *en;
    const char  *d, *close;

    en = ngx_pnalloc(cf->temp_pool, 2 * ngx_strlen(doc) + 1);
    if (en == NULL) {
        return NGX_CONF_ERROR;
    }

    p = en;

    for (d = doc; *d; d++) {
        close = (*d == '<') ? ngx_strchr(d, '>') : NULL;

        if (close) {
            *p++ = '%';
            *p++ = 's';
            d = close;
            continue;
        }

        *p++ = *d;
    }

    *p = '\0';

    return ngx_platform_check_text(cf, family, (char *) en);
}


static char *
ngx_platform_check_text(ngx_conf_t *cf, ngx_platform_family_t *family,
    const char *en)
{
    if (ngx_platform_text_known(family, en)) {
        return NGX_CONF_OK;
    }

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "platform_%V: the message \"%s\" has no French "
                       "text", &family->name, en);

    return NGX_CONF_ERROR;
}


static char *
ngx_platform_family(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_platform_loc_conf_t *plcf = conf;

    char                      *rv;
    ngx_platform_family_t     *family;
    ngx_platform_endpoint_t   *ep;
    ngx_platform_main_conf_t  *pmcf;
    ngx_http_core_loc_conf_t  *clcf;

    if (plcf->family) {
        return "is duplicate";
    }

    family = cmd->post;
    pmcf = ngx_http_conf_get_module_main_conf(cf, ngx_platform_module);

    /* the first location of a family compiles its routes for all */

    if (pmcf->routes[family->index] == NULL) {
        rv = ngx_platform_check_texts(cf, family);
        if (rv != NGX_CONF_OK) {
            return rv;
        }

        pmcf->routes[family->index] = ngx_platform_compile_routes(cf, family);
        if (pmcf->routes[family->index] == NULL) {
            return NGX_CONF_ERROR;
        }
    }

    plcf->family = family;
    plcf->routes = pmcf->routes[family->index];

    pmcf->backends |= family->backends;

    for (ep = family->endpoints; ep->pattern; ep++) {
        if (ep->body) {
            pmcf->bodies = 1;
        }
    }

    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    clcf->handler = ngx_platform_handler;

    return NGX_CONF_OK;
}


/* platform_otp_attempts 10 5m; */

static char *
ngx_platform_otp_attempts(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_platform_loc_conf_t *plcf = conf;

    ngx_str_t  *value;

    if (plcf->otp_max_attempts != NGX_CONF_UNSET_UINT) {
        return "is duplicate";
    }

    value = cf->args->elts;

    return ngx_platform_parse_attempts(cf, &value[1], &plcf->otp_max_attempts,
                                       &plcf->otp_attempts_window);
}


/* platform_otp_tenant_attempts 1000 5m; platform_otp_tenant_attempts off; */

static char *
ngx_platform_otp_tenant_attempts(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf)
{
    ngx_platform_loc_conf_t *plcf = conf;

    ngx_str_t  *value;

    if (plcf->otp_tenant_attempts != NGX_CONF_UNSET_UINT) {
        return "is duplicate";
    }

    value = cf->args->elts;

    if (cf->args->nelts == 2) {

        /* "off" lifts a ceiling set at an outer level */
        if (ngx_strcmp(value[1].data, "off") == 0) {
            plcf->otp_tenant_attempts = 0;
            plcf->otp_tenant_window = 0;
            return NGX_CONF_OK;
        }

        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"%V\" needs a number of attempts and a window, "
                           "or \"off\"", &cmd->name);
        return NGX_CONF_ERROR;
    }

    return ngx_platform_parse_attempts(cf, &value[1],
                                       &plcf->otp_tenant_attempts,
                                       &plcf->otp_tenant_window);
}


/* "<number> <time>": attempts allowed in a window, both positive */

static char *
ngx_platform_parse_attempts(ngx_conf_t *cf, ngx_str_t *value,
    ngx_uint_t *attempts, time_t *window)
{
    ngx_int_t  n;

    n = ngx_atoi(value[0].data, value[0].len);
    if (n <= 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid number of attempts \"%V\"", &value[0]);
        return NGX_CONF_ERROR;
    }

    *attempts = n;

    *window = ngx_parse_time(&value[1], 1);
    if (*window == (time_t) NGX_ERROR || *window == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid attempts window \"%V\"", &value[1]);
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


/*
 * platform_body_memory SIZE: the bytes of request bodies and documents a
 * worker holds at once; a body larger than it could never be served
 */

static char *
ngx_platform_body_memory(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_platform_main_conf_t *pmcf = conf;

    ssize_t     size;
    ngx_str_t  *value;

    if (pmcf->body_memory != NGX_CONF_UNSET_SIZE) {
        return "is duplicate";
    }

    value = cf->args->elts;

    size = ngx_parse_size(&value[1]);

    if (size == NGX_ERROR) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"platform_body_memory %V\": not a size "
                           "(bytes, or with k or m, as 256m)", &value[1]);
        return NGX_CONF_ERROR;
    }

    if (size < 1024 * 1024) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"platform_body_memory %V\": at least 1m, so "
                           "that a body of some size can be served at all",
                           &value[1]);
        return NGX_CONF_ERROR;
    }

    pmcf->body_memory = size;

    return NGX_CONF_OK;
}


/* platform_jwt_leeway: decisions.md allows at most a minute */

static char *
ngx_platform_jwt_leeway_check(ngx_conf_t *cf, void *post, void *data)
{
    time_t  *leeway = data;

    if (*leeway > 60) {
        return "must be at most 60s";
    }

    return NGX_CONF_OK;
}


/* platform_pg_tenant_share 50%; the sign is optional */

static char *
ngx_platform_pg_tenant_share(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_platform_main_conf_t *pmcf = conf;

    ngx_int_t   n;
    ngx_str_t  *value;

    if (pmcf->pg_tenant_share != NGX_CONF_UNSET_UINT) {
        return "is duplicate";
    }

    value = cf->args->elts;

    n = value[1].len;

    if (n && value[1].data[n - 1] == '%') {
        n--;
    }

    n = ngx_atoi(value[1].data, n);

    if (n < 1 || n > 100) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid share \"%V\": a percentage of the pool "
                           "from 1 to 100 (100: no limit) is expected",
                           &value[1]);
        return NGX_CONF_ERROR;
    }

    pmcf->pg_tenant_share = n;

    return NGX_CONF_OK;
}


/* platform_apikey_unknown_cache 10000 10s; platform_apikey_unknown_cache off; */

static char *
ngx_platform_apikey_unknown_cache(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf)
{
    ngx_platform_main_conf_t *pmcf = conf;

    ngx_int_t   n;
    ngx_msec_t  time;
    ngx_str_t  *value;

    if (pmcf->apikey_unknown_size != NGX_CONF_UNSET_UINT) {
        return "is duplicate";
    }

    value = cf->args->elts;

    if (cf->args->nelts == 2 && ngx_strcmp(value[1].data, "off") == 0) {
        pmcf->apikey_unknown_size = 0;
        pmcf->apikey_unknown_time = 0;
        return NGX_CONF_OK;
    }

    n = ngx_atoi(value[1].data, value[1].len);

    if (n < 1 || n > 1048576) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid number of entries \"%V\": 1 to 1048576, "
                           "then a time, or \"off\", is expected",
                           &value[1]);
        return NGX_CONF_ERROR;
    }

    time = 10000;

    if (cf->args->nelts == 3) {
        time = ngx_parse_time(&value[2], 0);

        if (time == (ngx_msec_t) NGX_ERROR || time == 0) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid time \"%V\": a time of at least "
                               "1ms, as \"10s\", is expected", &value[2]);
            return NGX_CONF_ERROR;
        }
    }

    pmcf->apikey_unknown_size = n;
    pmcf->apikey_unknown_time = time;

    return NGX_CONF_OK;
}
