-- 0006: counterparties of merchants, their bank accounts (spec 2.2,
-- updated by PUT /api/v{version}/Counterparties/accounts) and groups of
-- them (spec 2.3, created by POST /api/v{version}/Counterparties/groups).
--
-- Applied by scripts/migrate inside one transaction, like every migration.
--
-- A merchant is the merchantId claim of the caller's token: a string, kept
-- as text (merchant_id), so a claim that is not a uuid can never make a
-- cast fail; it only finds nothing. There is no table of merchants: they
-- are named by the identity provider, as tenants are. Every table carries
-- tenant_id, and every statement is scoped by tenant and merchant.
--
-- The composite keys (tenant_id, merchant_id, id) exist so that rows that
-- point at a counterparty or a group can name the tenant and merchant
-- too: a member can only ever be a counterparty of its group's merchant.

-- A counterparty: someone a merchant pays or is paid by.
CREATE TABLE counterparties (
    id           uuid         PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id    text         NOT NULL,
    merchant_id  text         NOT NULL,
    name         text         NOT NULL DEFAULT '',
    created_at   timestamptz  NOT NULL DEFAULT now(),
    -- the targets of the foreign keys of accounts and of members; the
    -- second is also the index that finds a merchant's counterparty by id
    UNIQUE (tenant_id, id),
    UNIQUE (tenant_id, merchant_id, id)
);

-- A bank account of a counterparty. The integers (docs/api.md):
--   account            1 primary, 2 secondary
--   counterparty_type  1 individual, 2 business
--   account_type       1 current, 2 savings, 3 domiciliary (foreign
--                      currency)
-- The strings are NULL when the account has no such value (an update may
-- clear them with null); iban and swift_code, checked by the module, are
-- "" when a client sent "" (no value). The update finds the row by its
-- primary key and checks tenant and merchant through its counterparty.
CREATE TABLE counterparty_accounts (
    id                 uuid         PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id          text         NOT NULL,
    counterparty_id    uuid         NOT NULL,
    account            integer      NOT NULL DEFAULT 1
                                    CHECK (account BETWEEN 1 AND 2),
    counterparty_type  integer      NOT NULL DEFAULT 1
                                    CHECK (counterparty_type BETWEEN 1 AND 2),
    account_type       integer      NOT NULL DEFAULT 1
                                    CHECK (account_type BETWEEN 1 AND 3),
    bank_code          text,
    bank_name          text,
    account_number     text,
    account_name       text,
    iban               text,
    swift_code         text,
    bank_address       text,
    routing_number     text,
    created_at         timestamptz  NOT NULL DEFAULT now(),
    updated_at         timestamptz  NOT NULL DEFAULT now(),
    FOREIGN KEY (tenant_id, counterparty_id)
        REFERENCES counterparties (tenant_id, id) ON DELETE CASCADE
);

-- a counterparty's accounts (and the foreign key's checks on delete)
CREATE INDEX counterparty_accounts_counterparty_idx
    ON counterparty_accounts (tenant_id, counterparty_id);

-- A group of a merchant's counterparties. The name is stored trimmed and
-- is unique per merchant whatever its case: the unique index below makes
-- a second "Suppliers" (or " suppliers ") a unique violation, 409.
CREATE TABLE counterparty_groups (
    id           uuid         PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id    text         NOT NULL,
    merchant_id  text         NOT NULL,
    name         text         NOT NULL
                              CHECK (char_length(name) BETWEEN 1 AND 200),
    description  text,
    created_at   timestamptz  NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, merchant_id, id)
);

CREATE UNIQUE INDEX counterparty_groups_name_key
    ON counterparty_groups (tenant_id, merchant_id, lower(name));

-- A member of a group, in the order the request listed them (position,
-- from 1). Both foreign keys carry tenant and merchant: a member is a
-- counterparty of the group's own merchant, whatever a statement does.
-- The module checks that before it writes anything and answers 400 naming
-- the member; the foreign key is the durable guard (a counterparty deleted
-- meanwhile is 23503, also 400).
CREATE TABLE counterparty_group_members (
    group_id           uuid     NOT NULL,
    counterparty_id    uuid     NOT NULL,
    tenant_id          text     NOT NULL,
    merchant_id        text     NOT NULL,
    counterparty_name  text,
    position           integer  NOT NULL,
    PRIMARY KEY (group_id, counterparty_id),
    FOREIGN KEY (tenant_id, merchant_id, group_id)
        REFERENCES counterparty_groups (tenant_id, merchant_id, id)
        ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, merchant_id, counterparty_id)
        REFERENCES counterparties (tenant_id, merchant_id, id)
        ON DELETE CASCADE
);

-- the groups a counterparty is in (and the foreign key's checks when a
-- counterparty is deleted)
CREATE INDEX counterparty_group_members_counterparty_idx
    ON counterparty_group_members (tenant_id, merchant_id, counterparty_id);

-- a group's members, as its foreign key looks them up when the group is
-- deleted: without it each deleted group scans the merchant's members
CREATE INDEX counterparty_group_members_group_idx
    ON counterparty_group_members (tenant_id, merchant_id, group_id);
