-- pgbench script: the group creation's own statement (the module's
-- "platform_counterparties_group", src/ngx_platform_counterparties.c; keep
-- the two alike): a group of three consecutive counterparties of the bench
-- merchant, its name unique by the client and two random numbers. $1 (the
-- body, shaped like counterparty-group.lua's) is built here; $2 and $3, the
-- tenant and the merchant of the bench token, are written out. scripts/bench
-- deletes the bench merchant's groups after its runs.
-- As the module sends it: its hidden first call (the scope, the lock
-- timeout) and the statement in one pipeline, one sync point.
\set a random(1, 2000000000)
\set b random(1, 2000000000)
\set m random(1, 998)
\set m1 :m + 1
\set m2 :m + 2
\startpipeline
SELECT set_config('app.tenant_id', 'tenant-bench', true), set_config('lock_timeout', '500ms', true);
WITH p AS MATERIALIZED (SELECT ('{"name":"pg ' || :client_id || ' ' || :a || ' ' || :b || '","description":"Bench group","members":[{"counterpartyId":"88000000-0000-4000-8000-' || lpad(:m::text, 12, '0') || '","counterpartyName":"Bench member"},{"counterpartyId":"88000000-0000-4000-8000-' || lpad(:m1::text, 12, '0') || '","counterpartyName":"Bench member"},{"counterpartyId":"88000000-0000-4000-8000-' || lpad(:m2::text, 12, '0') || '","counterpartyName":"Bench member"}]}')::jsonb AS b), m AS MATERIALIZED (SELECT e.ord, e.v->>'counterpartyId' AS counterparty_id, e.v->>'counterpartyName' AS counterparty_name FROM p, jsonb_array_elements(CASE WHEN jsonb_typeof(p.b->'members') = 'array' THEN p.b->'members' ELSE '[]' END) WITH ORDINALITY AS e(v, ord)), f AS MATERIALIZED (SELECT 'members[' || (m.ord - 1) || '].counterpartyId ' || m.counterparty_id AS refusal FROM m WHERE (SELECT c.id FROM counterparties c WHERE c.tenant_id = 'tenant-bench' AND c.merchant_id = '93000000-0000-4000-8000-000000000001' AND c.id = m.counterparty_id::uuid) IS NULL ORDER BY m.ord LIMIT 1), g AS (INSERT INTO counterparty_groups (tenant_id, merchant_id, name, description) SELECT 'tenant-bench', '93000000-0000-4000-8000-000000000001', btrim(p.b->>'name', E' \t\r\n'), p.b->>'description' FROM p WHERE NOT EXISTS (SELECT 1 FROM f) RETURNING id, name, merchant_id), i AS (INSERT INTO counterparty_group_members (group_id, counterparty_id, tenant_id, merchant_id, counterparty_name, position) SELECT g.id, m.counterparty_id::uuid, 'tenant-bench', '93000000-0000-4000-8000-000000000001', m.counterparty_name, m.ord FROM g, m ON CONFLICT DO NOTHING) SELECT (SELECT refusal FROM f), (SELECT row_to_json(x)::text FROM (SELECT g.name, g.merchant_id AS "merchantId", g.id FROM g) x);
\endpipeline
