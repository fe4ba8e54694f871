
/*
 * ngx_platform: transport management under /tms (spec 4.8, decisions.md
 * section 3 "TMS"). Envelope B; every call names its tenant and country in
 * the tenantId and countryCode headers, and only that tenant's rows in
 * that country are visible: another tenant's order is 404.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_platform.h"
#include "ngx_platform_document.h"


static ngx_int_t ngx_platform_tms_delivery_order(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);


static ngx_platform_route_t  ngx_platform_tms_routes[] = {

    { NGX_HTTP_GET, "/tms/delivery-orders/{}", NGX_PLATFORM_AUTH_TENANT,
      ngx_platform_tms_delivery_order },

    { 0, NULL, 0, NULL }
};


ngx_platform_family_t  ngx_platform_tms_family = {
    ngx_string("tms"),
    NGX_PLATFORM_ENVELOPE_B,
    NGX_PLATFORM_BACKEND_PG,
    NGX_PLATFORM_HEADER_TENANT|NGX_PLATFORM_HEADER_COUNTRY,
    ngx_platform_tms_routes
};


/* the delivery order document of docs/api.md, built by the server */

static ngx_platform_pg_document_t  ngx_platform_tms_delivery_order_doc = {
    { "platform_tms_delivery_order",

    "SELECT json_build_object("
    "'id', o.id,"
    " 'orderNumber', o.order_number,"
    " 'status', o.status,"
    " 'tenantId', o.tenant_id,"
    " 'countryCode', o.country_code,"
    " 'pickupAddress', o.pickup_address,"
    " 'dropOffAddress', o.dropoff_address,"
    " 'driver', CASE WHEN d.id IS NULL THEN NULL ELSE json_build_object("
    "'id', d.id, 'name', d.name, 'phone', d.phone,"
    " 'vehicleType', d.vehicle_type, 'status', d.status) END,"
    " 'shippingFee', o.shipping_fee,"
    " 'currency', o.currency,"
    " 'assignedAt', o.assigned_at,"
    " 'createdAt', o.created_at,"
    " 'updatedAt', o.updated_at)::text"
    " FROM delivery_orders o"
    " LEFT JOIN drivers d ON d.id = o.driver_id AND d.tenant_id = o.tenant_id"
    " WHERE o.id = $1::uuid AND o.tenant_id = $2 AND o.country_code = $3",

    3 },

    "Delivery order retrieved.",
    "Delivery order not found.",
    "No delivery order with this id exists."
};


static ngx_int_t
ngx_platform_tms_delivery_order(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx)
{
    ngx_int_t  rc;
    ngx_str_t  params[3];

    rc = ngx_platform_require_tenant(r, ctx);
    if (rc != NGX_OK) {
        return rc;
    }

    rc = ngx_platform_require_country(r, ctx);
    if (rc != NGX_OK) {
        return rc;
    }

    params[0] = ctx->params[0];
    params[1] = ctx->identity.tenant;
    params[2] = ctx->identity.country;

    if (!ngx_platform_is_uuid(&params[0])) {
        return ngx_platform_fail(r, NGX_HTTP_BAD_REQUEST,
                                 "invalid delivery order id",
                                 "The delivery order id must be a uuid.");
    }

    return ngx_platform_pg_document(r, &ngx_platform_tms_delivery_order_doc,
                                    params);
}
