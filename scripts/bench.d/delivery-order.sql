-- pgbench script: the delivery order endpoint's own statement (the module's
-- "platform_tms_delivery_order"), for a random order of the bench tenant.
-- With -M prepared it is what the module sends, minus HTTP: the ratio of the
-- endpoint to this run is the module's own overhead.
-- As the module sends it: its hidden first call (the scope) and the statement
-- in one pipeline, one sync point.
\set n random(1, 10000)
\startpipeline
SELECT set_config('app.tenant_id', 'tenant-bench', true);
SELECT row_to_json(x)::text FROM (SELECT o.id, o.order_number AS "orderNumber", o.status, o.tenant_id AS "tenantId", o.country_code AS "countryCode", o.pickup_address_doc AS "pickupAddress", o.dropoff_address_doc AS "dropOffAddress", CASE WHEN dr.id IS NOT NULL THEN (SELECT row_to_json(d) FROM (SELECT dr.id, dr.name, dr.phone, dr.vehicle_type AS "vehicleType", dr.status) d) END AS driver, o.shipping_fee AS "shippingFee", o.currency, o.assigned_at AS "assignedAt", o.created_at AS "createdAt", o.updated_at AS "updatedAt" FROM delivery_orders o LEFT JOIN drivers dr ON dr.id = o.driver_id AND dr.tenant_id = o.tenant_id WHERE o.id = (SELECT (substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-4' || substr(h, 14, 3) || '-8' || substr(h, 18, 3) || '-' || substr(h, 21, 12))::uuid FROM md5('bench-order-' || :n) AS h) AND o.tenant_id = 'tenant-bench' AND o.country_code = 'NG') x;
\endpipeline
