
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
#include "ngx_platform_op.h"


/*
 * The delivery order document of docs/api.md, built by the server. The
 * addresses come compact, with their documented keys in a fixed order,
 * from columns computed when the row is written (migration 0005).
 */

static ngx_platform_sql_t  ngx_platform_tms_delivery_order = {
    { "platform_tms_delivery_order",

      "SELECT row_to_json(x)::text FROM (SELECT o.id,"
      " o.order_number AS \"orderNumber\", o.status,"
      " o.tenant_id AS \"tenantId\", o.country_code AS \"countryCode\","
      " o.pickup_address_doc AS \"pickupAddress\","
      " o.dropoff_address_doc AS \"dropOffAddress\","
      " CASE WHEN dr.id IS NOT NULL THEN"
      " (SELECT row_to_json(d) FROM (SELECT dr.id, dr.name, dr.phone,"
      " dr.vehicle_type AS \"vehicleType\", dr.status) d) END AS driver,"
      " o.shipping_fee AS \"shippingFee\", o.currency,"
      " o.assigned_at AS \"assignedAt\", o.created_at AS \"createdAt\","
      " o.updated_at AS \"updatedAt\""
      " FROM delivery_orders o"
      " LEFT JOIN drivers dr"
      " ON dr.id = o.driver_id AND dr.tenant_id = o.tenant_id"
      " WHERE o.id = $1::uuid AND o.tenant_id = $2 AND o.country_code = $3"
      ") x",

      3, 0 },

    { NGX_PLATFORM_P_ARG(0), NGX_PLATFORM_P_TENANT, NGX_PLATFORM_P_COUNTRY },
    NGX_PLATFORM_ANSWER_DOCUMENT,

    "Delivery order retrieved.",
    "Delivery order not found.",
    "No delivery order with this id exists.",
    NULL, NULL, 0, NULL, NULL,
    NULL, NULL, NULL
};


static ngx_platform_endpoint_t  ngx_platform_tms_endpoints[] = {

    { NGX_HTTP_GET, "/tms/delivery-orders/{uuid}",
      NGX_PLATFORM_AUTH_TENANT,
      NGX_PLATFORM_IN_TENANT|NGX_PLATFORM_IN_COUNTRY,
      NULL, NULL,
      "invalid delivery order id", "The delivery order id must be a uuid.",
      &ngx_platform_tms_delivery_order, NULL },

    { 0, NULL, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL }
};


ngx_platform_family_t  ngx_platform_tms_family = {
    ngx_string("tms"),
    NGX_PLATFORM_ENVELOPE_B,
    NGX_PLATFORM_BACKEND_PG,
    ngx_platform_tms_endpoints,
    NULL,
    0
};
