-- 0002: API keys.
--
-- A key is "plk_<id>.<secret>": the id is public and finds the row, the
-- secret never leaves the caller. Only the SHA-256 digest of the whole key
-- is stored; the module hashes a presented key and compares digests in
-- constant time. scripts/apikey creates (printing the key once) and
-- revokes keys. A revoked key stays, for the record.

CREATE TABLE api_keys (
    id          text        PRIMARY KEY CHECK (id ~ '^[0-9a-f]{16}$'),
    tenant_id   text        NOT NULL,
    scope       text        NOT NULL,
    key_digest  bytea       NOT NULL CHECK (length(key_digest) = 32),
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);

CREATE INDEX api_keys_tenant_idx ON api_keys (tenant_id);
