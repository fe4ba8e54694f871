-- pgbench script: the delivery order endpoint's own statement (the module's
-- "platform_tms_delivery_order"), for a random order of the bench tenant.
-- With -M prepared it is what the module sends, minus HTTP: the ratio of the
-- endpoint to this run is the module's own overhead.
\set n random(1, 10000)
SELECT json_build_object('id', o.id, 'orderNumber', o.order_number, 'status', o.status, 'tenantId', o.tenant_id, 'countryCode', o.country_code, 'pickupAddress', o.pickup_address, 'dropOffAddress', o.dropoff_address, 'driver', CASE WHEN d.id IS NULL THEN NULL ELSE json_build_object('id', d.id, 'name', d.name, 'phone', d.phone, 'vehicleType', d.vehicle_type, 'status', d.status) END, 'shippingFee', o.shipping_fee, 'currency', o.currency, 'assignedAt', o.assigned_at, 'createdAt', o.created_at, 'updatedAt', o.updated_at)::text FROM delivery_orders o LEFT JOIN drivers d ON d.id = o.driver_id AND d.tenant_id = o.tenant_id WHERE o.id = (SELECT (substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-4' || substr(h, 14, 3) || '-8' || substr(h, 18, 3) || '-' || substr(h, 21, 12))::uuid FROM md5('bench-order-' || :n) AS h) AND o.tenant_id = 'tenant-bench' AND o.country_code = 'NG';
