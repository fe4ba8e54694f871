-- pgbench script: the webhook intake's insert of an event stored already
-- (evt-bench-duplicate, stored by scripts/bench before the runs): what
-- every duplicate would cost in PostgreSQL without the "stored" key in
-- Redis. ON CONFLICT finds the row; nothing is inserted.
-- As the module sends it: its hidden first call (the scope, the lock
-- timeout) and the statement in one pipeline, one sync point.
\startpipeline
SELECT set_config('app.tenant_id', '', true), set_config('lock_timeout', '500ms', true);
INSERT INTO webhook_events (tenant_id, kind, name, event_key, headers, body, signed) VALUES (NULL, 'source', 'bench', 'evt-bench-duplicate', '{"host":"127.0.0.1","content-type":"application/json","x-request-id":"0123456789abcdef0123456789abcdef"}'::jsonb, convert_to('{"id":"evt-bench-duplicate","type":"payment.succeeded","amount":1250,"currency":"NGN","reference":"T-100245","customer":{"id":"c-1","email":"ada@example.com"}}', 'UTF8'), false) ON CONFLICT (kind, name, (coalesce(tenant_id, '')), event_key) DO NOTHING RETURNING id;
\endpipeline
