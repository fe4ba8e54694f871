-- pgbench script: the webhook intake's own insert (the module's
-- "platform_webhooks_insert", src/ngx_platform_webhooks.c; keep the two
-- alike), each transaction a new event of the bench source: its key
-- unique by the client and two random numbers, the body shaped like
-- webhook-new.lua's (as bytea), the headers the module stores for wrk's
-- requests. The table's trigger notifies each new row, as for the
-- module's. scripts/bench deletes the bench source's events after its
-- runs.
-- As the module sends it: its hidden first call (the scope, the lock
-- timeout) and the statement in one pipeline, one sync point.
\set a random(1, 2000000000)
\set b random(1, 2000000000)
\startpipeline
SELECT set_config('app.tenant_id', '', true), set_config('lock_timeout', '500ms', true);
INSERT INTO webhook_events (tenant_id, kind, name, event_key, headers, body, signed) VALUES (NULL, 'source', 'bench', 'pg-' || :client_id || '-' || :a || '-' || :b, '{"host":"127.0.0.1","content-type":"application/json","x-request-id":"0123456789abcdef0123456789abcdef"}'::jsonb, convert_to('{"id":"pg-' || :client_id || '-' || :a || '-' || :b || '","type":"payment.succeeded","amount":1250,"currency":"NGN","reference":"T-100245","customer":{"id":"c-1","email":"ada@example.com"}}', 'UTF8'), false) ON CONFLICT (kind, name, (coalesce(tenant_id, '')), event_key) DO NOTHING RETURNING id;
\endpipeline
