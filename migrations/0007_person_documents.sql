-- 0007: person documents (spec 2.5), written by
-- PUT /api/v{version}/PersonDocuments/update and removed by
-- DELETE /api/v{version}/PersonDocuments/{id}/delete.
--
-- Applied by scripts/migrate inside one transaction, like every migration.
--
-- The content is kept in the row (decisions.md section 3) as bytea, with
-- its SHA-256 and its size, both computed by the module when it decodes
-- the upload. Documents are mostly scans and PDFs, already compressed:
-- STORAGE EXTERNAL keeps PostgreSQL from trying to compress them again,
-- and lets a read of a slice (substring) fetch only that slice. A document
-- without content yet has the empty one.
--
-- type: 1 national identity card, 2 passport, 3 driver's licence,
-- 4 proof of address, 5 other (docs/api.md). The path of the document
-- (persons/{personId}/documents/{id}/{fileName}) is derived, not stored.
--
-- Both statements find the row by its primary key and check the tenant
-- (and, for the update, the person) on it, so no other index is needed.

CREATE TABLE person_documents (
    id               uuid         PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id        text         NOT NULL,
    person_id        uuid         NOT NULL,
    type             integer      NOT NULL CHECK (type BETWEEN 1 AND 5),
    file_name        text         NOT NULL DEFAULT ''
                                  CHECK (length(file_name) <= 255),
    document_number  text         NOT NULL DEFAULT '',
    approved         boolean      NOT NULL DEFAULT false,
    content          bytea        NOT NULL DEFAULT '',
    content_sha256   bytea        NOT NULL DEFAULT sha256(''),
    content_size     bigint       NOT NULL DEFAULT 0,
    updated_at       timestamptz  NOT NULL DEFAULT now(),

    CHECK (octet_length(content_sha256) = 32),
    CHECK (content_size = octet_length(content))
);

ALTER TABLE person_documents ALTER COLUMN content SET STORAGE EXTERNAL;
