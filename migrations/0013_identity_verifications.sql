-- 0013: business identity verifications (spec 2.10 and 4.5, decisions.md
-- section 3 "Identity verification" and section 5 "identity bureau"),
-- made by POST /api/v{version}/Identity/verification/business-credit-bureau.
--
-- Applied by scripts/migrate inside one transaction, like every migration.
--
-- One row per verification the module answered: the caller's tenant and
-- the token's sub, the RC number (trimmed) and the customer name as sent,
-- the status answered, the bureau's answer (its JSON object, as it came;
-- NULL when the bureau did not know the company or failed) and the time.
--
-- status: VERIFIED and NAME_MISMATCH (the bureau knew the company),
-- NOT_FOUND (the bureau answered 404), BUREAU_ERROR (unreachable, 5xx or
-- a malformed answer: the client got 502) and BUREAU_TIMEOUT (504).
--
-- cached_from: NULL when the bureau was asked for this row; else the row
-- whose answer was reused (a repeat within platform_identity_cache_time).
-- Only rows that asked the bureau and got an answer (VERIFIED,
-- NAME_MISMATCH, NOT_FOUND) answer repeats: the lifetime counts from the
-- bureau's answer, never from a reuse, and a failure is never reused.

CREATE TABLE identity_verifications (
    id             bigint       GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id      text         NOT NULL,
    rc_number      text         NOT NULL
                                CHECK (length(rc_number) BETWEEN 1 AND 64),
    customer_name  text,
    status         text         NOT NULL
                                CHECK (status IN ('VERIFIED', 'NAME_MISMATCH',
                                                  'NOT_FOUND', 'BUREAU_ERROR',
                                                  'BUREAU_TIMEOUT')),
    bureau         jsonb        CHECK (bureau IS NULL
                                       OR jsonb_typeof(bureau) = 'object'),
    requested_by   text,
    cached_from    bigint       REFERENCES identity_verifications (id),
    created_at     timestamptz  NOT NULL DEFAULT now()
);

-- the answers a repeat may reuse: the newest of a tenant's RC number
CREATE INDEX identity_verifications_answer_idx
    ON identity_verifications (tenant_id, rc_number, created_at DESC)
    WHERE cached_from IS NULL
      AND status IN ('VERIFIED', 'NAME_MISMATCH', 'NOT_FOUND');

-- the history of an RC number within a tenant, reuses included
CREATE INDEX identity_verifications_rc_idx
    ON identity_verifications (tenant_id, rc_number, id);

-- reuses point at their answer
CREATE INDEX identity_verifications_cached_from_idx
    ON identity_verifications (cached_from) WHERE cached_from IS NOT NULL;


-- A company name as compared with customer_name: Unicode compatibility
-- normalization (NFKC: full-width letters, ligatures), lower case by the
-- Unicode root locale of ICU (whatever the database's own collation: a
-- database in the C locale would lower only ASCII), then the two case
-- foldings that lower case leaves out (final sigma, sharp s), white space
-- (Unicode spaces included) collapsed to one space and trimmed. Requires
-- PostgreSQL built with ICU (Debian's and most packages are) and a UTF-8
-- database.

CREATE FUNCTION identity_name_fold(name text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN btrim(regexp_replace(
           replace(translate(lower(normalize(name, NFKC) COLLATE "und-x-icu"),
                             'ς', 'σ'),
                   'ß', 'ss'),
           '[[:space:]\u00a0\u1680\u2000-\u200b\u2028\u2029\u202f'
           '\u205f\u3000\ufeff]+',
           ' ', 'g'),
       ' ');
