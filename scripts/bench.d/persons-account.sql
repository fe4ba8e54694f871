-- pgbench script: the person account GET's own statement (the module's
-- "platform_persons_account", src/ngx_platform_persons.c; keep the two
-- alike) for the demo account of tenant-demo (scripts/demo-data.sql), as
-- the persons rows ask the module. With -M prepared it is what the module
-- sends, minus HTTP.
-- As the module sends it: its hidden first call (the scope) and the statement
-- in one pipeline, one sync point.
\startpipeline
SELECT set_config('app.tenant_id', 'tenant-demo', true);
SELECT row_to_json(a)::text FROM (SELECT id, person_id AS "personId", account_id AS "accountId", account_bic AS "accountBIC", account_type AS "accountType", account_name AS "accountName", currency, available_balance AS "availableBalance", account_limit AS "accountLimit", status_description AS "statusDescription", created, nuban_or_iban AS "nubanOrIban", purpose, comment, status, product_id AS "productId", client_id AS "clientId" FROM person_accounts WHERE id = 'b1000000-0000-4000-8000-000000000001'::uuid AND tenant_id = 'tenant-demo') a;
\endpipeline
