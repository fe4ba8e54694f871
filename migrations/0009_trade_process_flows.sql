-- 0009: trade process flows (spec 2.11, listed by
-- GET /api/v1/trades/process-flows).
--
-- Applied by scripts/migrate inside one transaction, like every migration.
--
-- Flows are a tenant's own: each tenant describes the steps its trades go
-- through, and only the caller's tenant's flows are listed. The list is
-- ordered by name, then id; the index gives a tenant's flows in that
-- order, and the name filter (a substring, case-insensitive) is applied
-- to them as they come. description is '' rather than NULL when a flow
-- has none, so the document always carries a string.
CREATE TABLE trade_process_flows (
    id           uuid         PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id    text         NOT NULL,
    name         text         NOT NULL CHECK (name <> ''),
    description  text         NOT NULL DEFAULT '',
    created_at   timestamptz  NOT NULL DEFAULT now(),
    updated_at   timestamptz  NOT NULL DEFAULT now()
);

CREATE INDEX trade_process_flows_tenant_name_idx
    ON trade_process_flows (tenant_id, name, id);
