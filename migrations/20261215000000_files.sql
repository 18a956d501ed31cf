-- Files (`/v1/files`, OpenAI's Files API): a tenant's uploads, such as a Batch API input, and the
-- files the gateway writes for it. Every read and write names the tenant: another tenant's id finds
-- nothing. The rows here are the files' descriptions, whatever stores their bytes.
CREATE TABLE files (
    -- `file-…`.
    id          TEXT PRIMARY KEY,
    tenant_id   UUID NOT NULL REFERENCES tenants(id),
    filename    TEXT NOT NULL,
    -- `batch` (an upload: Batch API input), `batch_output` (what a batch wrote).
    purpose     TEXT NOT NULL,
    -- `uploading` while its bytes arrive (counted against the quota, listed to nobody), then `processed`.
    status      TEXT NOT NULL CHECK (status IN ('uploading', 'processed')),
    -- Bytes so far; the whole size once processed. What the file costs the tenant's quota.
    bytes       BIGINT NOT NULL DEFAULT 0 CHECK (bytes >= 0),
    -- Parts written to storage, numbered from 0.
    parts       INTEGER NOT NULL DEFAULT 0 CHECK (parts >= 0),
    -- Lines of a JSONL file (requests of a batch input).
    lines       INTEGER,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at  TIMESTAMPTZ NOT NULL
);

-- A tenant's listing (newest first) and its quota; the expiry sweep.
CREATE INDEX files_by_tenant ON files (tenant_id, created_at DESC, id DESC) INCLUDE (bytes);
CREATE INDEX files_by_expiry ON files (expires_at);

-- The bytes of files kept in the database (the embedded default storage): each part in order.
CREATE TABLE file_parts (
    file_id TEXT NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    seq     INTEGER NOT NULL CHECK (seq >= 0),
    data    BYTEA NOT NULL,
    PRIMARY KEY (file_id, seq)
);

-- A tenant's own file storage quota, where it differs from the gateway's default
-- (`--files-max-stored-bytes`).
CREATE TABLE file_storage_terms (
    tenant_id        UUID PRIMARY KEY REFERENCES tenants(id),
    max_stored_bytes BIGINT NOT NULL CHECK (max_stored_bytes >= 0),
    updated_at       TIMESTAMPTZ NOT NULL DEFAULT now()
);
