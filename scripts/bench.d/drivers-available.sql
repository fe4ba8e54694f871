-- pgbench script: the available drivers endpoint's own statement (the
-- module's "platform_tms_drivers", src/ngx_platform_tms.c; keep the two
-- alike) for the bench tenant in NG without a vehicle type: its ten
-- AVAILABLE drivers, each with his vehicle (scripts/bench.d/seed.sql).
-- $1 and $2, the tenant and country headers, are written out; $3, the
-- absent vehicleType, is NULL.
-- As the module sends it: its hidden first call (the scope) and the statement
-- in one pipeline, one sync point.
\startpipeline
SELECT set_config('app.tenant_id', 'tenant-bench', true);
SELECT coalesce((SELECT '[' || string_agg(row_to_json(t)::text, ',' ORDER BY t.name, t.id) || ']' FROM (SELECT r.id, r.user_id AS "userId", r.name, r.phone, r.vehicle_type AS "vehicleType", r.status, CASE WHEN v.id IS NOT NULL THEN (SELECT row_to_json(y) FROM (SELECT v.id, v.tenant_id AS "tenantId", v.country_code AS "countryCode", v.license_plate AS "licensePlate", v.model, v.manufacturer, v.type, v.colour, v.year::text AS year, v.capacity::text AS capacity, v.condition, v.image_url AS "imageUrl", v.carrier_id AS "carrierId", v.carrier_phone_number AS "carrierPhoneNumber", v.created_at AS "createdAt", v.updated_at AS "updatedAt") y) END AS vehicle FROM (SELECT d.id, d.tenant_id, d.user_id, d.name, d.phone, d.vehicle_type, d.status FROM drivers d WHERE d.tenant_id = 'tenant-bench' AND d.country_code = 'NG' AND d.status = 'AVAILABLE' AND NULL::text IS NULL UNION ALL SELECT d.id, d.tenant_id, d.user_id, d.name, d.phone, d.vehicle_type, d.status FROM drivers d WHERE d.tenant_id = 'tenant-bench' AND d.country_code = 'NG' AND d.status = 'AVAILABLE' AND lower(d.vehicle_type) = lower(NULL::text)) r LEFT JOIN vehicles v ON v.driver_id = r.id AND v.tenant_id = r.tenant_id) t), '[]');
\endpipeline
