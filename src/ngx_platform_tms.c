
/*
 * ngx_platform: transport management under /tms (spec 2.7, 2.8 and 4.8,
 * decisions.md section 3 "TMS"). Envelope B; every call names its tenant
 * and country in the tenantId and countryCode headers, and only that
 * tenant's rows in that country are visible: another tenant's order,
 * vehicle or driver is 404 (or, named in a request, an invalid one), never
 * 403.
 *
 * Each operation is one statement. Those that change rows decide under
 * the rows' locks and answer a refusal (ANSWER_CHECKED) that the outcome
 * tables below turn into a status and texts.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_platform.h"
#include "ngx_platform_op.h"


static ngx_int_t ngx_platform_tms_assign_handler(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx);


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

      3, 0, 0 },

    { NGX_PLATFORM_P_ARG(0), NGX_PLATFORM_P_TENANT, NGX_PLATFORM_P_COUNTRY },
    NGX_PLATFORM_ANSWER_DOCUMENT,

    "Delivery order retrieved.",
    "Delivery order not found.",
    "No delivery order with this id exists.",
    NULL, NULL, 0, NULL, NULL,
    NULL, NULL, NULL
};


/*
 * The vehicle's own fields, as the vehicle document (docs/api.md) and the
 * available drivers' vehicles show them. year and capacity are strings,
 * as clients send them; capacity keeps the digits it was given.
 */

#define NGX_PLATFORM_TMS_VEHICLE(v)                                          \
    " " v ".id, " v ".tenant_id AS \"tenantId\","                             \
    " " v ".country_code AS \"countryCode\","                                 \
    " " v ".license_plate AS \"licensePlate\", " v ".model,"                  \
    " " v ".manufacturer, " v ".type, " v ".colour,"                          \
    " " v ".year::text AS year, " v ".capacity::text AS capacity,"            \
    " " v ".condition, " v ".image_url AS \"imageUrl\","                      \
    " " v ".carrier_id AS \"carrierId\","                                     \
    " " v ".carrier_phone_number AS \"carrierPhoneNumber\""


/*
 * PUT /tms/vehicles/{uuid}, one statement. c: the checks of values the
 * validator cannot make (year against the current date, capacity's
 * digits, driverUserId when assignDriver is true), decided before the
 * vehicle is looked at; d: the driver that assignDriver true links, by
 * user id among the tenant's drivers in the country; u: the update, on
 * the vehicle's row lock: fields present replace the stored ones, absent
 * ones keep theirs, null clears; m: the linked driver leaves the vehicle
 * he drove (a driver drives one vehicle; the unique constraint on
 * driver_id is checked at the end of the statement, so the move is not
 * a conflict). The answer is the vehicle as stored, with its driver.
 *
 * A refusal is the outcome named below; no row updated and no refusal is
 * an unknown vehicle (404). Two requests linking one driver to two
 * vehicles at once: the second is 409 (23505); a driver deleted meanwhile
 * is refused as unknown (23503).
 */

#define NGX_PLATFORM_TMS_SET(column, field, cast)                            \
    NGX_PLATFORM_SQL_SET("c.b", "v", column, field, cast)

static ngx_platform_outcome_t  ngx_platform_tms_vehicle_outcomes[] = {
    { "year", NGX_HTTP_BAD_REQUEST, "Bad request.",
      "year must be a 4-digit year, not after next year." },
    { "capacity", NGX_HTTP_BAD_REQUEST, "Bad request.",
      "capacity must be a non-negative decimal number in a string: at most "
      "9 digits before the point and 3 after it." },
    { "driverUserId", NGX_HTTP_BAD_REQUEST, "Bad request.",
      "driverUserId is required when assignDriver is true." },
    { "driver", NGX_HTTP_BAD_REQUEST, "invalid request",
      "driverUserId is not a driver of the tenant in this country." },
    { NULL, 0, NULL, NULL }
};

static ngx_platform_sql_t  ngx_platform_tms_vehicle = {
    { "platform_tms_vehicle",

      "WITH c AS MATERIALIZED (SELECT p.b,"
      " CASE WHEN jsonb_typeof(p.b->'year') = 'string'"
      " AND p.b->>'year' !~ '^[1-9][0-9]{3}$' THEN 'year'"
      " WHEN jsonb_typeof(p.b->'year') = 'string'"
      " AND (p.b->>'year')::int > extract(year FROM now())::int + 1"
      " THEN 'year'"
      " WHEN jsonb_typeof(p.b->'capacity') = 'string'"
      " AND p.b->>'capacity' !~ '^[0-9]{1,9}(\\.[0-9]{1,3})?$'"
      " THEN 'capacity'"
      " WHEN p.b->'assignDriver' = 'true'::jsonb"
      " AND coalesce(p.b->>'driverUserId', '') = '' THEN 'driverUserId'"
      " END AS refusal,"
      " coalesce(p.b->'assignDriver' = 'true'::jsonb, false) AS link,"
      " coalesce(p.b->'assignDriver' = 'false'::jsonb, false) AS unlink"
      " FROM (SELECT $1::jsonb AS b) p),"
      " d AS MATERIALIZED (SELECT r.id FROM c, drivers r"
      " WHERE c.link AND c.refusal IS NULL"
      " AND r.tenant_id = $3 AND r.country_code = $4"
      " AND r.user_id = c.b->>'driverUserId'),"
      " u AS (UPDATE vehicles v SET"
      NGX_PLATFORM_TMS_SET("license_plate", "licensePlate", "")
      NGX_PLATFORM_TMS_SET("model", "model", "")
      NGX_PLATFORM_TMS_SET("manufacturer", "manufacturer", "")
      NGX_PLATFORM_TMS_SET("type", "type", "")
      NGX_PLATFORM_TMS_SET("colour", "colour", "")
      NGX_PLATFORM_TMS_SET("year", "year", "::smallint")
      NGX_PLATFORM_TMS_SET("capacity", "capacity", "::numeric")
      NGX_PLATFORM_TMS_SET("condition", "condition", "")
      NGX_PLATFORM_TMS_SET("image_url", "imageUrl", "")
      NGX_PLATFORM_TMS_SET("carrier_id", "carrierId", "")
      NGX_PLATFORM_TMS_SET("carrier_phone_number", "carrierPhoneNumber", "")
      " driver_id = CASE WHEN c.link THEN (SELECT d.id FROM d)"
      " WHEN c.unlink THEN NULL ELSE v.driver_id END,"
      " updated_at = now()"
      " FROM c WHERE c.refusal IS NULL"
      " AND v.id = $2::uuid AND v.tenant_id = $3 AND v.country_code = $4"
      " AND (NOT c.link OR EXISTS (SELECT 1 FROM d))"
      " RETURNING v.*),"
      " m AS (UPDATE vehicles w SET driver_id = NULL, updated_at = now()"
      " FROM d WHERE w.driver_id = d.id AND w.id <> $2::uuid"
      " AND w.tenant_id = $3 AND w.country_code = $4"
      " AND EXISTS (SELECT 1 FROM u))"
      " SELECT CASE WHEN c.refusal IS NOT NULL THEN c.refusal"
      " WHEN EXISTS (SELECT 1 FROM u) THEN NULL"
      " WHEN c.link AND NOT EXISTS (SELECT 1 FROM d)"
      " AND EXISTS (SELECT 1 FROM vehicles x WHERE x.id = $2::uuid"
      " AND x.tenant_id = $3 AND x.country_code = $4) THEN 'driver' END,"
      " (SELECT row_to_json(x)::text FROM (SELECT"
      NGX_PLATFORM_TMS_VEHICLE("u") ","
      " r.user_id AS \"driverUserId\","
      " CASE WHEN r.id IS NOT NULL THEN"
      " (SELECT row_to_json(y) FROM (SELECT r.id, r.user_id AS \"userId\","
      " r.name, r.phone, r.vehicle_type AS \"vehicleType\", r.status) y)"
      " END AS driver,"
      " u.created_at AS \"createdAt\", u.updated_at AS \"updatedAt\""
      " FROM u LEFT JOIN drivers r"
      " ON r.id = u.driver_id AND r.tenant_id = u.tenant_id) x)"
      " FROM c",

      4, 0, 0 },

    { NGX_PLATFORM_P_BODY, NGX_PLATFORM_P_ARG(0), NGX_PLATFORM_P_TENANT,
      NGX_PLATFORM_P_COUNTRY },
    NGX_PLATFORM_ANSWER_CHECKED,

    "Vehicle updated.",
    "Vehicle not found.",
    "No vehicle with this id exists.",
    "Vehicle update conflict.",
    "The driver was linked to another vehicle at the same time; retry.",
    NGX_HTTP_BAD_REQUEST,
    "invalid request",
    "driverUserId is not a driver of the tenant in this country.",
    NULL, NULL,
    ngx_platform_tms_vehicle_outcomes
};


/*
 * GET /tms/drivers/available: the tenant's AVAILABLE drivers in the
 * country, of one vehicle type (compared case-insensitively) when
 * vehicleType is given, each with the vehicle he drives or null; by name,
 * then id. None is "[]". Two branches, one of which a one-time test of
 * $3 turns off: the prepared (generic) plan of each reads the partial
 * index drivers_available_idx, the second by the type too, which a single
 * "$3 IS NULL OR ..." test could not.
 */

static ngx_platform_sql_t  ngx_platform_tms_drivers = {
    { "platform_tms_drivers",

      "SELECT coalesce((SELECT '[' || string_agg(row_to_json(t)::text, ','"
      " ORDER BY t.name, t.id) || ']' FROM (SELECT r.id,"
      " r.user_id AS \"userId\", r.name, r.phone,"
      " r.vehicle_type AS \"vehicleType\", r.status,"
      " CASE WHEN v.id IS NOT NULL THEN"
      " (SELECT row_to_json(y) FROM (SELECT"
      NGX_PLATFORM_TMS_VEHICLE("v") ","
      " v.created_at AS \"createdAt\", v.updated_at AS \"updatedAt\") y)"
      " END AS vehicle"
      " FROM (SELECT d.id, d.tenant_id, d.user_id, d.name, d.phone,"
      " d.vehicle_type, d.status FROM drivers d"
      " WHERE d.tenant_id = $1 AND d.country_code = $2"
      " AND d.status = 'AVAILABLE' AND $3::text IS NULL"
      " UNION ALL SELECT d.id, d.tenant_id, d.user_id, d.name, d.phone,"
      " d.vehicle_type, d.status FROM drivers d"
      " WHERE d.tenant_id = $1 AND d.country_code = $2"
      " AND d.status = 'AVAILABLE'"
      " AND lower(d.vehicle_type) = lower($3::text)) r"
      " LEFT JOIN vehicles v"
      " ON v.driver_id = r.id AND v.tenant_id = r.tenant_id"
      ") t), '[]')",

      3, 0, 0 },

    { NGX_PLATFORM_P_TENANT, NGX_PLATFORM_P_COUNTRY, NGX_PLATFORM_P_ARG(0) },
    NGX_PLATFORM_ANSWER_DOCUMENT,

    "Available drivers retrieved.",
    NULL, NULL,
    NULL, NULL, 0, NULL, NULL,
    NULL, NULL, NULL
};


/*
 * PATCH /tms/delivery-orders/{uuid}/assign/{driverId}?shippingFee=, one
 * statement and so one transaction (decisions.md "TMS"):
 *
 * o: the order of the tenant in the country, locked first (a locking
 *    read gives its latest version, also when another assign changed it
 *    while this one waited); none is 404. same: it is already assigned to
 *    this driver (or picked up, in transit by him): nothing changes but
 *    the fee, when one is given.
 * k: the driver named, of the tenant in the country, locked whatever his
 *    status, and read as he is once the lock is had: of many assigns of
 *    one driver the first takes the lock; the others wait, then find him
 *    ON_DELIVERY. (A status test in d's WHERE would be made on the
 *    statement's snapshot, and a driver freed by the assign this one
 *    waited for would be refused.)
 * d: he becomes ON_DELIVERY if he was AVAILABLE; else nothing is taken,
 *    the request is refused, and only one order ever holds him.
 * u: the order becomes ASSIGNED with the driver, the fee (none given:
 *    the stored one stays) and the time, only if d took the driver.
 * f: the driver the order had is freed (AVAILABLE) when another takes
 *    it, unless he is not ON_DELIVERY or holds another open order. The
 *    SET reads his latest version, not the statement's snapshot.
 *
 * Locks are taken in one order, the order's row then the drivers'; a
 * deadlock all the same is retried once by the runner. They are NO KEY
 * UPDATE locks, as an UPDATE takes: a vehicle update that checks its
 * driver's foreign key (KEY SHARE) does not wait for them.
 */

static ngx_platform_outcome_t  ngx_platform_tms_assign_outcomes[] = {
    { "shippingFee", NGX_HTTP_BAD_REQUEST, "Bad request.",
      "shippingFee must have at most two decimal places." },
    { "closed", NGX_HTTP_CONFLICT, "Delivery order closed.",
      "A delivered or cancelled order cannot be assigned." },
    { "driver", NGX_HTTP_BAD_REQUEST, "invalid reference",
      "The driver is not an available driver of the tenant in this "
      "country." },
    { NULL, 0, NULL, NULL }
};

static ngx_platform_sql_t  ngx_platform_tms_assign = {
    { "platform_tms_assign",

      "WITH a AS MATERIALIZED (SELECT $3::numeric AS fee),"
      " o AS MATERIALIZED (SELECT x.id, x.status, x.driver_id,"
      " x.status IN ('DELIVERED', 'CANCELLED') AS closed,"
      " (x.driver_id IS NOT DISTINCT FROM $2::uuid"
      " AND x.status IN ('ASSIGNED', 'PICKED_UP', 'IN_TRANSIT')) AS same"
      " FROM delivery_orders x, a"
      " WHERE x.id = $1::uuid AND x.tenant_id = $4 AND x.country_code = $5"
      " AND (a.fee IS NULL OR a.fee = round(a.fee, 2))"
      " FOR NO KEY UPDATE OF x),"
      " k AS MATERIALIZED (SELECT r.id, r.status FROM drivers r, o"
      " WHERE NOT o.closed AND NOT o.same"
      " AND r.id = $2::uuid AND r.tenant_id = $4 AND r.country_code = $5"
      " FOR NO KEY UPDATE OF r),"
      " d AS (UPDATE drivers r SET status = 'ON_DELIVERY',"
      " updated_at = now()"
      " FROM k WHERE r.id = k.id AND k.status = 'AVAILABLE'"
      " RETURNING r.id),"
      " u AS (UPDATE delivery_orders x SET"
      " status = CASE WHEN o.same THEN x.status ELSE 'ASSIGNED' END,"
      " driver_id = $2::uuid,"
      " shipping_fee = coalesce($3::numeric, x.shipping_fee),"
      " assigned_at = CASE WHEN o.same THEN x.assigned_at ELSE now() END,"
      " updated_at = now()"
      " FROM o WHERE x.id = o.id AND NOT o.closed"
      " AND (o.same OR EXISTS (SELECT 1 FROM d))),"
      " f AS (UPDATE drivers r SET"
      " status = CASE WHEN r.status = 'ON_DELIVERY' AND NOT EXISTS"
      " (SELECT 1 FROM delivery_orders q WHERE q.driver_id = r.id"
      " AND q.tenant_id = $4 AND q.id <> o.id"
      " AND q.status IN ('ASSIGNED', 'PICKED_UP', 'IN_TRANSIT'))"
      " THEN 'AVAILABLE' ELSE r.status END,"
      " updated_at = now()"
      " FROM o WHERE NOT o.same"
      " AND o.status IN ('ASSIGNED', 'PICKED_UP', 'IN_TRANSIT')"
      " AND r.id = o.driver_id AND r.id <> $2::uuid AND r.tenant_id = $4"
      " AND EXISTS (SELECT 1 FROM d))"
      " SELECT CASE WHEN a.fee <> round(a.fee, 2) THEN 'shippingFee'"
      " WHEN o.id IS NULL THEN NULL"
      " WHEN o.closed THEN 'closed'"
      " WHEN NOT o.same AND NOT EXISTS (SELECT 1 FROM d) THEN 'driver'"
      " END,"
      " CASE WHEN o.id IS NOT NULL THEN '{}' END"
      " FROM a LEFT JOIN o ON true",

      5, 0, 0 },

    { NGX_PLATFORM_P_ARG(0), NGX_PLATFORM_P_ARG(1), NGX_PLATFORM_P_ARG(2),
      NGX_PLATFORM_P_TENANT, NGX_PLATFORM_P_COUNTRY },
    NGX_PLATFORM_ANSWER_CHECKED,

    "Delivery order assigned.",
    "Delivery order not found.",
    "No delivery order with this id exists.",
    NULL, NULL,
    NGX_HTTP_BAD_REQUEST,
    "invalid reference",
    "The driver is not an available driver of the tenant in this country.",
    NULL, NULL,
    ngx_platform_tms_assign_outcomes
};


/*
 * Spec 2.7: every field a string, assignDriver a boolean. null clears a
 * field (driverUserId aside: it only names the driver to link). Lengths
 * in characters; year and capacity are checked by the statement.
 */

static ngx_platform_field_t  ngx_platform_tms_vehicle_body[] = {
    { "driverUserId", NGX_PLATFORM_T_STRING,
      NGX_PLATFORM_F_NULLABLE|NGX_PLATFORM_F_MAX,
      0, 128, NULL, NULL, NULL },
    { "carrierPhoneNumber", NGX_PLATFORM_T_STRING,
      NGX_PLATFORM_F_NULLABLE|NGX_PLATFORM_F_MAX,
      0, 32, NULL, NULL, NULL },
    { "licensePlate", NGX_PLATFORM_T_STRING,
      NGX_PLATFORM_F_NULLABLE|NGX_PLATFORM_F_MAX,
      0, 20, NULL, NULL, NULL },
    { "model", NGX_PLATFORM_T_STRING,
      NGX_PLATFORM_F_NULLABLE|NGX_PLATFORM_F_MAX,
      0, 100, NULL, NULL, NULL },
    { "manufacturer", NGX_PLATFORM_T_STRING,
      NGX_PLATFORM_F_NULLABLE|NGX_PLATFORM_F_MAX,
      0, 100, NULL, NULL, NULL },
    { "capacity", NGX_PLATFORM_T_STRING,
      NGX_PLATFORM_F_NULLABLE|NGX_PLATFORM_F_MAX,
      0, 32, NULL, NULL, NULL },
    { "colour", NGX_PLATFORM_T_STRING,
      NGX_PLATFORM_F_NULLABLE|NGX_PLATFORM_F_MAX,
      0, 50, NULL, NULL, NULL },
    { "year", NGX_PLATFORM_T_STRING,
      NGX_PLATFORM_F_NULLABLE|NGX_PLATFORM_F_MAX,
      0, 32, NULL, NULL, NULL },
    { "type", NGX_PLATFORM_T_STRING,
      NGX_PLATFORM_F_NULLABLE|NGX_PLATFORM_F_MAX,
      0, 50, NULL, NULL, NULL },
    { "imageUrl", NGX_PLATFORM_T_STRING,
      NGX_PLATFORM_F_NULLABLE|NGX_PLATFORM_F_MAX,
      0, 2048, NULL, NULL, NULL },
    { "carrierId", NGX_PLATFORM_T_STRING,
      NGX_PLATFORM_F_NULLABLE|NGX_PLATFORM_F_MAX,
      0, 128, NULL, NULL, NULL },
    { "condition", NGX_PLATFORM_T_STRING,
      NGX_PLATFORM_F_NULLABLE|NGX_PLATFORM_F_MAX,
      0, 50, NULL, NULL, NULL },
    { "assignDriver", NGX_PLATFORM_T_BOOLEAN, 0,
      0, 0, NULL, NULL, NULL },
    { NULL, 0, 0, 0, 0, NULL, NULL, NULL }
};


static ngx_platform_field_t  ngx_platform_tms_drivers_query[] = {
    { "vehicleType", NGX_PLATFORM_T_STRING, NGX_PLATFORM_F_MAX,
      0, 50, NULL, NULL, NULL },
    { NULL, 0, 0, 0, 0, NULL, NULL, NULL }
};


/*
 * decisions.md: a finite number, at least 0; the most numeric(14,2)
 * holds. Absent: the order keeps its fee.
 */

static ngx_platform_field_t  ngx_platform_tms_assign_query[] = {
    { "shippingFee", NGX_PLATFORM_T_NUMBER,
      NGX_PLATFORM_F_MIN|NGX_PLATFORM_F_MAX,
      0, 999999999999.99, NULL, NULL, NULL },
    { NULL, 0, 0, 0, 0, NULL, NULL, NULL }
};


/*
 * The shapes of the data its endpoints answer (docs/api.md), every key
 * always present: the driver of an order (no userId), the driver of a
 * vehicle and the available driver (with it), the vehicle of an
 * available driver (without its driver) and the vehicle document
 */

#define NGX_PLATFORM_TMS_DRIVER_FIELDS                                       \
    "\"id\":{\"type\":\"string\",\"format\":\"uuid\"},"                      \
    "\"userId\":{\"type\":[\"string\",\"null\"]},"                           \
    "\"name\":{\"type\":\"string\"},"                                        \
    "\"phone\":{\"type\":[\"string\",\"null\"]},"                            \
    "\"vehicleType\":{\"type\":[\"string\",\"null\"]},"                      \
    "\"status\":{\"$ref\":\"#/components/schemas/DriverStatus\"}"

#define NGX_PLATFORM_TMS_VEHICLE_FIELDS                                      \
    "\"id\":{\"type\":\"string\",\"format\":\"uuid\"},"                      \
    "\"tenantId\":{\"type\":\"string\"},"                                    \
    "\"countryCode\":{\"type\":\"string\"},"                                 \
    "\"licensePlate\":{\"type\":[\"string\",\"null\"]},"                     \
    "\"model\":{\"type\":[\"string\",\"null\"]},"                            \
    "\"manufacturer\":{\"type\":[\"string\",\"null\"]},"                     \
    "\"type\":{\"type\":[\"string\",\"null\"]},"                             \
    "\"colour\":{\"type\":[\"string\",\"null\"]},"                           \
    "\"year\":{\"type\":[\"string\",\"null\"],\"pattern\":"                  \
    "\"^[1-9][0-9]{3}$\"},"                                                  \
    "\"capacity\":{\"type\":[\"string\",\"null\"],"                          \
    "\"pattern\":\"^[0-9]{1,9}(\\\\.[0-9]{1,3})?$\"},"                       \
    "\"condition\":{\"type\":[\"string\",\"null\"]},"                        \
    "\"imageUrl\":{\"type\":[\"string\",\"null\"]},"                         \
    "\"carrierId\":{\"type\":[\"string\",\"null\"]},"                        \
    "\"carrierPhoneNumber\":{\"type\":[\"string\",\"null\"]},"               \
    "\"createdAt\":{\"type\":\"string\",\"format\":\"date-time\"},"          \
    "\"updatedAt\":{\"type\":\"string\",\"format\":\"date-time\"}"

static const char  ngx_platform_tms_schemas[] =
    "{"
    "\"OrderAddress\":{\"type\":\"object\",\"properties\":{"
     "\"address\":{\"type\":[\"string\",\"null\"]},"
     "\"city\":{\"type\":[\"string\",\"null\"]},"
     "\"state\":{\"type\":[\"string\",\"null\"]},"
     "\"country\":{\"type\":[\"string\",\"null\"]},"
     "\"postalCode\":{\"type\":[\"string\",\"null\"]},"
     "\"contactName\":{\"type\":[\"string\",\"null\"]},"
     "\"contactPhone\":{\"type\":[\"string\",\"null\"]},"
     "\"latitude\":{\"type\":[\"number\",\"null\"]},"
     "\"longitude\":{\"type\":[\"number\",\"null\"]}}},"
    "\"DriverStatus\":{\"type\":\"string\",\"enum\":[\"AVAILABLE\","
     "\"ON_DELIVERY\",\"OFFLINE\"]},"
    "\"OrderDriver\":{\"type\":\"object\",\"properties\":{"
     "\"id\":{\"type\":\"string\",\"format\":\"uuid\"},"
     "\"name\":{\"type\":\"string\"},"
     "\"phone\":{\"type\":[\"string\",\"null\"]},"
     "\"vehicleType\":{\"type\":[\"string\",\"null\"]},"
     "\"status\":{\"$ref\":\"#/components/schemas/DriverStatus\"}}},"
    "\"Driver\":{\"type\":\"object\",\"properties\":{"
     NGX_PLATFORM_TMS_DRIVER_FIELDS "}},"
    "\"DeliveryOrder\":{\"type\":\"object\",\"properties\":{"
     "\"id\":{\"type\":\"string\",\"format\":\"uuid\"},"
     "\"orderNumber\":{\"type\":\"string\"},"
     "\"status\":{\"type\":\"string\",\"enum\":[\"PENDING\",\"ASSIGNED\","
     "\"PICKED_UP\",\"IN_TRANSIT\",\"DELIVERED\",\"CANCELLED\"]},"
     "\"tenantId\":{\"type\":\"string\"},"
     "\"countryCode\":{\"type\":\"string\"},"
     "\"pickupAddress\":{\"$ref\":\"#/components/schemas/OrderAddress\"},"
     "\"dropOffAddress\":{\"$ref\":\"#/components/schemas/OrderAddress\"},"
     "\"driver\":{\"anyOf\":["
     "{\"$ref\":\"#/components/schemas/OrderDriver\"},"
     "{\"type\":\"null\"}]},"
     "\"shippingFee\":{\"type\":[\"number\",\"null\"]},"
     "\"currency\":{\"type\":[\"string\",\"null\"]},"
     "\"assignedAt\":{\"type\":[\"string\",\"null\"],"
     "\"format\":\"date-time\"},"
     "\"createdAt\":{\"type\":\"string\",\"format\":\"date-time\"},"
     "\"updatedAt\":{\"type\":\"string\",\"format\":\"date-time\"}}},"
    "\"Vehicle\":{\"type\":\"object\",\"properties\":{"
     NGX_PLATFORM_TMS_VEHICLE_FIELDS ","
     "\"driverUserId\":{\"type\":[\"string\",\"null\"]},"
     "\"driver\":{\"anyOf\":[{\"$ref\":\"#/components/schemas/Driver\"},"
     "{\"type\":\"null\"}]}}},"
    "\"DriverVehicle\":{\"type\":\"object\",\"properties\":{"
     NGX_PLATFORM_TMS_VEHICLE_FIELDS "}},"
    "\"AvailableDriver\":{\"type\":\"object\",\"properties\":{"
     NGX_PLATFORM_TMS_DRIVER_FIELDS ","
     "\"vehicle\":{\"anyOf\":["
     "{\"$ref\":\"#/components/schemas/DriverVehicle\"},"
     "{\"type\":\"null\"}]}}}"
    "}";


/*
 * platform_openapi: each endpoint's success data, and an example on the
 * demo data
 */

static ngx_platform_doc_t  ngx_platform_tms_delivery_order_doc = {
    "Get a delivery order",
    ngx_platform_doc_schema("DeliveryOrder"),
    "{\"path\":{\"deliveryOrderUuid\":"
    "\"a1000000-0000-4000-8000-000000000001\"}}",
    NULL, 0, NULL
};


static ngx_platform_doc_t  ngx_platform_tms_vehicle_doc = {
    "Update a vehicle",
    ngx_platform_doc_schema("Vehicle"),
    "{\"path\":{\"uuid\":\"31000000-0000-4000-8000-000000000004\"},"
    "\"body\":{\"colour\":\"blue\",\"year\":\"2021\","
    "\"capacity\":\"1450.5\",\"assignDriver\":true,"
    "\"driverUserId\":\"user-demo-driver-5\"}}",
    NULL, 0, NULL
};


static ngx_platform_doc_t  ngx_platform_tms_drivers_doc = {
    "List the available drivers",
    ngx_platform_doc_list("AvailableDriver"),
    "{\"query\":{\"vehicleType\":\"VAN\"}}",
    NULL, 0, NULL
};


static ngx_platform_doc_t  ngx_platform_tms_assign_doc = {
    "Assign a delivery order to a driver",
    "{\"type\":\"object\",\"additionalProperties\":false}",
    "{\"path\":{\"deliveryOrderUuid\":"
    "\"a1000000-0000-4000-8000-000000000001\","
    "\"driverId\":\"d1000000-0000-4000-8000-000000000005\"},"
    "\"query\":{\"shippingFee\":2500}}",
    NULL, 0, NULL
};


static ngx_platform_endpoint_t  ngx_platform_tms_endpoints[] = {

    { NGX_HTTP_GET, "/tms/delivery-orders/{uuid:deliveryOrderUuid}",
      NGX_PLATFORM_AUTH_TENANT,
      NGX_PLATFORM_IN_TENANT|NGX_PLATFORM_IN_COUNTRY,
      NULL, NULL,
      "invalid delivery order id", "The delivery order id must be a uuid.",
      &ngx_platform_tms_delivery_order, NULL,
      &ngx_platform_tms_delivery_order_doc },

    { NGX_HTTP_PUT, "/tms/vehicles/{uuid:uuid}",
      NGX_PLATFORM_AUTH_BEARER|NGX_PLATFORM_AUTH_TENANT,
      NGX_PLATFORM_IN_TENANT|NGX_PLATFORM_IN_COUNTRY,
      NULL, ngx_platform_tms_vehicle_body,
      "invalid request", "The vehicle id must be a uuid.",
      &ngx_platform_tms_vehicle, NULL,
      &ngx_platform_tms_vehicle_doc },

    { NGX_HTTP_GET, "/tms/drivers/available",
      NGX_PLATFORM_AUTH_BEARER|NGX_PLATFORM_AUTH_TENANT,
      NGX_PLATFORM_IN_TENANT|NGX_PLATFORM_IN_COUNTRY,
      ngx_platform_tms_drivers_query, NULL,
      NULL, NULL,
      &ngx_platform_tms_drivers, NULL,
      &ngx_platform_tms_drivers_doc },

    /* the driver id is a "{string}": not a uuid is an invalid reference */

    { NGX_HTTP_PATCH, "/tms/delivery-orders/{uuid:deliveryOrderUuid}/assign/"
      "{string:driverId}",
      NGX_PLATFORM_AUTH_TENANT,
      NGX_PLATFORM_IN_TENANT|NGX_PLATFORM_IN_COUNTRY
      |NGX_PLATFORM_IN_NO_HEAD,
      ngx_platform_tms_assign_query, NULL,
      "invalid delivery order id", "The delivery order id must be a uuid.",
      &ngx_platform_tms_assign, ngx_platform_tms_assign_handler,
      &ngx_platform_tms_assign_doc },

    { 0, NULL, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL }
};


/* the assign's driver id (ctx->args[1]) must be a uuid, then the statement */

static ngx_int_t
ngx_platform_tms_assign_handler(ngx_http_request_t *r,
    ngx_platform_ctx_t *ctx)
{
    if (ctx->nargs < 3 || !ngx_platform_is_uuid(&ctx->args[1])) {
        return ngx_platform_fail(r, NGX_HTTP_BAD_REQUEST, "invalid reference",
                                 "The driver id must be a uuid.");
    }

    return ngx_platform_run_sql(r, ctx);
}


ngx_platform_family_t  ngx_platform_tms_family = {
    ngx_string("tms"),
    NGX_PLATFORM_ENVELOPE_B,
    NGX_PLATFORM_BACKEND_PG,
    ngx_platform_tms_endpoints,
    NULL,
    0,
    ngx_platform_tms_schemas,
    NULL
};
