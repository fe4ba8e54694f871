-- pgbench script: the identity verification answered from the record, the
-- module's "platform_identity_cached" (src/ngx_platform_identity.c; keep
-- the two alike): the newest bureau answer of a random one of
-- tenant-bench's 100 RC numbers within the cache time (24h) looked up and
-- recorded again as a reuse, the name compared (alternately the same name
-- folded, and another). $1 tenant, $2 sub, $3 RC number, $4 customer name
-- and $5 the cache time are written out.
-- As the module sends it: its hidden first call (the scope, the lock
-- timeout) and the statement in one pipeline, one sync point.
\set n random(1, 100)
\set v random(0, 1)
\startpipeline
SELECT set_config('app.tenant_id', 'tenant-bench', true), set_config('lock_timeout', '500ms', true);
WITH c AS (SELECT v.id, v.bureau FROM identity_verifications v WHERE v.tenant_id = 'tenant-bench' AND v.rc_number = 'BENCH' || lpad(:n::text, 3, '0') AND v.cached_from IS NULL AND v.status IN ('VERIFIED', 'NAME_MISMATCH', 'NOT_FOUND') AND v.created_at > now() - make_interval(secs => 86400::float8) ORDER BY v.created_at DESC LIMIT 1), i AS (INSERT INTO identity_verifications (tenant_id, rc_number, customer_name, status, bureau, requested_by, cached_from) SELECT 'tenant-bench', 'BENCH' || lpad(:n::text, 3, '0'), CASE WHEN :v = 0 THEN 'BENCH  company ' || :n || ' limited' ELSE 'Another Company' END, CASE WHEN c.bureau IS NULL THEN 'NOT_FOUND' WHEN identity_name_fold(CASE WHEN :v = 0 THEN 'BENCH  company ' || :n || ' limited' ELSE 'Another Company' END) = identity_name_fold(c.bureau->>'companyName') THEN 'VERIFIED' ELSE 'NAME_MISMATCH' END, c.bureau, 'bench', c.id FROM c RETURNING status, bureau) SELECT CASE WHEN i.status IN ('VERIFIED', 'NAME_MISMATCH') THEN NULL ELSE i.status END, (SELECT row_to_json(x)::text FROM (SELECT i.bureau->>'companyName' AS "companyName", i.bureau->>'address' AS address, i.status AS "verificationStatus") x) FROM i;
\endpipeline
