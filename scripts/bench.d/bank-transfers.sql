-- pgbench script: the bank transfers page's own statement (the module's
-- "platform_transfers_list", src/ngx_platform_transfers.c; keep the two
-- alike): page 1 of ten of tenant-demo's transfers and their count, as the
-- bank-transfers row asks the module. With -M prepared it is what the
-- module sends, minus HTTP.
-- As the module sends it: its hidden first call (the scope) and the statement
-- in one pipeline, one sync point.
\startpipeline
SELECT set_config('app.tenant_id', 'tenant-demo', true);
SELECT 1::int AS page_number, 10::int AS page_size, (SELECT count(*) FROM bank_transfers WHERE tenant_id = 'tenant-demo') AS total, coalesce((SELECT '[' || string_agg(row_to_json(t)::text, ',' ORDER BY t.date DESC, t.id) || ']' FROM (SELECT b.id, b.reference, b.amount, (SELECT row_to_json(a) FROM (SELECT b.account_name AS "accountName", b.account_number AS "accountNumber", b.bank_name AS "bankName") a) AS account, (SELECT row_to_json(a) FROM (SELECT b.beneficiary_account_name AS "accountName", b.beneficiary_account_number AS "accountNumber", b.beneficiary_bank_name AS "bankName") a) AS beneficiary, b.status, b.date, b.tenant_id AS "tenantId", b.email, b.currency FROM bank_transfers b WHERE b.tenant_id = 'tenant-demo' ORDER BY b.date DESC, b.id LIMIT 10::int OFFSET (1::int - 1)::bigint * 10::int) t), '[]') AS data;
\endpipeline
