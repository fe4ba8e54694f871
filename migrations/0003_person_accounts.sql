-- 0003: person accounts (spec 2.6), read by
-- GET /api/v{version}/PersonAccounts/{id}/get.
--
-- Applied by scripts/migrate inside one transaction, like every migration.
--
-- Columns are the fields of spec 2.6 in snake_case. Text fields that an
-- account may lack hold '' rather than NULL, so the document always carries
-- strings. The balances are numeric (exact; the document shows them as
-- JSON numbers). available_balance may be negative (an overdraft).
--
-- The module reads one account by id within the caller's tenant
-- (WHERE id = $1 AND tenant_id = $2): the primary key finds the row and
-- the tenant is checked on it, so no index on (tenant_id, id) is needed.

CREATE TABLE person_accounts (
    id                  uuid          PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id           text          NOT NULL,
    person_id           uuid          NOT NULL,
    account_id          text          NOT NULL DEFAULT '',
    account_bic         text          NOT NULL DEFAULT '',
    account_type        text          NOT NULL DEFAULT '',
    account_name        text          NOT NULL DEFAULT '',
    currency            text          NOT NULL DEFAULT '',
    available_balance   numeric(20,2) NOT NULL DEFAULT 0,
    account_limit       numeric(20,2) NOT NULL DEFAULT 0,
    status_description  text          NOT NULL DEFAULT '',
    created             timestamptz   NOT NULL DEFAULT now(),
    nuban_or_iban       text          NOT NULL DEFAULT '',
    purpose             text          NOT NULL DEFAULT '',
    comment             text          NOT NULL DEFAULT '',
    status              text          NOT NULL DEFAULT '',
    product_id          text          NOT NULL DEFAULT '',
    client_id           text          NOT NULL DEFAULT ''
);
