-- 0004: invoice tax settings (deleted by
-- DELETE /api/v{version}/InvoiceSetting/DeleteInvoiceTax) and bank
-- transfers (spec 2.4, listed by /api/v{version}/BankTransfers/all-account).
--
-- Applied by scripts/migrate inside one transaction, like every migration.
--
-- tenant_id is text, as in every table here ('tenant-demo'): the
-- specification shows tenantId as a uuid, but tenants are named by the
-- credentials, whose tenantId claims are strings.
--
-- Money is numeric(18,2): exact, and row_to_json writes it as a JSON number.

-- A tax an invoice may carry. The module deletes one by id within the
-- caller's tenant (WHERE id = $1 AND tenant_id = $2): the primary key finds
-- the row and the tenant is checked on it. The unique (tenant_id, name)
-- keeps a tenant from having two taxes of one name, and its index serves
-- listing a tenant's taxes.
CREATE TABLE invoice_tax_settings (
    id          uuid          PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id   text          NOT NULL,
    name        text          NOT NULL,
    rate        numeric(7,4)  NOT NULL CHECK (rate >= 0 AND rate <= 100),
    created_at  timestamptz   NOT NULL DEFAULT now(),
    updated_at  timestamptz   NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, name)
);

-- A transfer from one of the tenant's accounts (account_*) to a
-- beneficiary (beneficiary_*). Text fields a transfer may lack hold ''
-- rather than NULL, so the document always carries strings.
CREATE TABLE bank_transfers (
    id                          uuid          PRIMARY KEY
                                              DEFAULT gen_random_uuid(),
    tenant_id                   text          NOT NULL,
    reference                   text          NOT NULL DEFAULT '',
    amount                      numeric(18,2) NOT NULL,
    account_name                text          NOT NULL DEFAULT '',
    account_number              text          NOT NULL DEFAULT '',
    bank_name                   text          NOT NULL DEFAULT '',
    beneficiary_account_name    text          NOT NULL DEFAULT '',
    beneficiary_account_number  text          NOT NULL DEFAULT '',
    beneficiary_bank_name       text          NOT NULL DEFAULT '',
    status                      text          NOT NULL DEFAULT '',
    date                        timestamptz   NOT NULL DEFAULT now(),
    email                       text          NOT NULL DEFAULT '',
    currency                    text          NOT NULL DEFAULT '',
    created_at                  timestamptz   NOT NULL DEFAULT now()
);

-- The list: a tenant's transfers, newest date first, ties by id. One index
-- gives the page in order (a range scan from the tenant's first entry)
-- and the tenant's count (an index-only scan).
CREATE INDEX bank_transfers_tenant_date_idx
    ON bank_transfers (tenant_id, date DESC, id);
