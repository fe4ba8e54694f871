-- Row-level security: a second wall behind each statement's own
-- "WHERE tenant_id = $1". The module runs every request's statements after
-- "SELECT set_config('app.tenant_id', <the request's tenant>, true)" in the
-- same transaction, and connects as a role that owns no table and does not
-- bypass row-level security (scripts/migrate creates and grants it), so a
-- statement that forgot its tenant still sees, changes and inserts only the
-- request's tenant's rows.
--
-- FORCE makes the policies bind the tables' owner as well; only superusers
-- and roles with BYPASSRLS pass them, which the module's role must not be.
-- Without the setting (a connection that never set it, or a transaction of
-- another kind) current_setting(..., true) is NULL or '', and no row is
-- visible.
--
-- Not under row-level security:
--   api_keys                 read by key id before any tenant is known (it
--                            is what tells the tenant); the module's role
--                            may only read it
--   product_classifications  shared reference data, no tenant; read only
--   schema_migrations        the module's role has no access

ALTER TABLE delivery_orders ENABLE ROW LEVEL SECURITY;
ALTER TABLE delivery_orders FORCE ROW LEVEL SECURITY;
CREATE POLICY platform_tenant ON delivery_orders
    USING (tenant_id = current_setting('app.tenant_id', true));

ALTER TABLE drivers ENABLE ROW LEVEL SECURITY;
ALTER TABLE drivers FORCE ROW LEVEL SECURITY;
CREATE POLICY platform_tenant ON drivers
    USING (tenant_id = current_setting('app.tenant_id', true));

ALTER TABLE person_accounts ENABLE ROW LEVEL SECURITY;
ALTER TABLE person_accounts FORCE ROW LEVEL SECURITY;
CREATE POLICY platform_tenant ON person_accounts
    USING (tenant_id = current_setting('app.tenant_id', true));

ALTER TABLE invoice_tax_settings ENABLE ROW LEVEL SECURITY;
ALTER TABLE invoice_tax_settings FORCE ROW LEVEL SECURITY;
CREATE POLICY platform_tenant ON invoice_tax_settings
    USING (tenant_id = current_setting('app.tenant_id', true));

ALTER TABLE bank_transfers ENABLE ROW LEVEL SECURITY;
ALTER TABLE bank_transfers FORCE ROW LEVEL SECURITY;
CREATE POLICY platform_tenant ON bank_transfers
    USING (tenant_id = current_setting('app.tenant_id', true));

ALTER TABLE counterparties ENABLE ROW LEVEL SECURITY;
ALTER TABLE counterparties FORCE ROW LEVEL SECURITY;
CREATE POLICY platform_tenant ON counterparties
    USING (tenant_id = current_setting('app.tenant_id', true));

ALTER TABLE counterparty_accounts ENABLE ROW LEVEL SECURITY;
ALTER TABLE counterparty_accounts FORCE ROW LEVEL SECURITY;
CREATE POLICY platform_tenant ON counterparty_accounts
    USING (tenant_id = current_setting('app.tenant_id', true));

ALTER TABLE counterparty_groups ENABLE ROW LEVEL SECURITY;
ALTER TABLE counterparty_groups FORCE ROW LEVEL SECURITY;
CREATE POLICY platform_tenant ON counterparty_groups
    USING (tenant_id = current_setting('app.tenant_id', true));

ALTER TABLE counterparty_group_members ENABLE ROW LEVEL SECURITY;
ALTER TABLE counterparty_group_members FORCE ROW LEVEL SECURITY;
CREATE POLICY platform_tenant ON counterparty_group_members
    USING (tenant_id = current_setting('app.tenant_id', true));

ALTER TABLE person_documents ENABLE ROW LEVEL SECURITY;
ALTER TABLE person_documents FORCE ROW LEVEL SECURITY;
CREATE POLICY platform_tenant ON person_documents
    USING (tenant_id = current_setting('app.tenant_id', true));

ALTER TABLE vehicles ENABLE ROW LEVEL SECURITY;
ALTER TABLE vehicles FORCE ROW LEVEL SECURITY;
CREATE POLICY platform_tenant ON vehicles
    USING (tenant_id = current_setting('app.tenant_id', true));

ALTER TABLE trade_process_flows ENABLE ROW LEVEL SECURITY;
ALTER TABLE trade_process_flows FORCE ROW LEVEL SECURITY;
CREATE POLICY platform_tenant ON trade_process_flows
    USING (tenant_id = current_setting('app.tenant_id', true));

ALTER TABLE laboratories ENABLE ROW LEVEL SECURITY;
ALTER TABLE laboratories FORCE ROW LEVEL SECURITY;
CREATE POLICY platform_tenant ON laboratories
    USING (tenant_id = current_setting('app.tenant_id', true));

ALTER TABLE samplers ENABLE ROW LEVEL SECURITY;
ALTER TABLE samplers FORCE ROW LEVEL SECURITY;
CREATE POLICY platform_tenant ON samplers
    USING (tenant_id = current_setting('app.tenant_id', true));

ALTER TABLE task_requests ENABLE ROW LEVEL SECURITY;
ALTER TABLE task_requests FORCE ROW LEVEL SECURITY;
CREATE POLICY platform_tenant ON task_requests
    USING (tenant_id = current_setting('app.tenant_id', true));

ALTER TABLE task_request_history ENABLE ROW LEVEL SECURITY;
ALTER TABLE task_request_history FORCE ROW LEVEL SECURITY;
CREATE POLICY platform_tenant ON task_request_history
    USING (tenant_id = current_setting('app.tenant_id', true));

ALTER TABLE sales ENABLE ROW LEVEL SECURITY;
ALTER TABLE sales FORCE ROW LEVEL SECURITY;
CREATE POLICY platform_tenant ON sales
    USING (tenant_id = current_setting('app.tenant_id', true));

ALTER TABLE sale_details ENABLE ROW LEVEL SECURITY;
ALTER TABLE sale_details FORCE ROW LEVEL SECURITY;
CREATE POLICY platform_tenant ON sale_details
    USING (tenant_id = current_setting('app.tenant_id', true));

ALTER TABLE sales_tracking ENABLE ROW LEVEL SECURITY;
ALTER TABLE sales_tracking FORCE ROW LEVEL SECURITY;
CREATE POLICY platform_tenant ON sales_tracking
    USING (tenant_id = current_setting('app.tenant_id', true));

ALTER TABLE sale_payments ENABLE ROW LEVEL SECURITY;
ALTER TABLE sale_payments FORCE ROW LEVEL SECURITY;
CREATE POLICY platform_tenant ON sale_payments
    USING (tenant_id = current_setting('app.tenant_id', true));

ALTER TABLE identity_verifications ENABLE ROW LEVEL SECURITY;
ALTER TABLE identity_verifications FORCE ROW LEVEL SECURITY;
CREATE POLICY platform_tenant ON identity_verifications
    USING (tenant_id = current_setting('app.tenant_id', true));

-- a webhook event may have no tenant (a provider's event about no tenant
-- of ours): it is seen by statements whose tenant is "" and no other
ALTER TABLE webhook_events ENABLE ROW LEVEL SECURITY;
ALTER TABLE webhook_events FORCE ROW LEVEL SECURITY;
CREATE POLICY platform_tenant ON webhook_events
    USING (tenant_id IS NOT DISTINCT FROM
           nullif(current_setting('app.tenant_id', true), ''));

-- What the module's role may do, granted by scripts/migrate after every
-- run (so that it covers the tables of later migrations): read, insert,
-- change and delete the rows of the tables under row-level security, and
-- read the two tables above. A table with a tenant_id column that is not
-- under row-level security gets nothing, and scripts/migrate says so.
CREATE FUNCTION platform_grant_module(role name) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    t regclass;
BEGIN
    FOR t IN
        SELECT c.oid FROM pg_class c
         WHERE c.relnamespace = current_schema()::regnamespace
           AND c.relkind IN ('r', 'p')
           AND c.relrowsecurity AND c.relforcerowsecurity
    LOOP
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO %I',
                       t, role);
    END LOOP;

    EXECUTE format('GRANT SELECT ON api_keys, product_classifications'
                   ' TO %I', role);
END
$$;

-- the tables with tenant rows that row-level security does not guard
CREATE FUNCTION platform_unguarded_tables() RETURNS SETOF name
LANGUAGE sql STABLE AS $$
    SELECT c.relname FROM pg_class c
      JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'tenant_id'
                         AND NOT a.attisdropped
     WHERE c.relnamespace = current_schema()::regnamespace
       AND c.relkind IN ('r', 'p')
       AND c.relname <> 'api_keys'
       AND NOT (c.relrowsecurity AND c.relforcerowsecurity
                AND EXISTS (SELECT FROM pg_policy p WHERE p.polrelid = c.oid))
     ORDER BY 1
$$;
