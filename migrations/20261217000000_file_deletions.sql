-- Files whose bytes storage has yet to forget. A file is deleted in two steps: its description first
-- (from then on no reader finds it), its bytes after. Every deleted description leaves its id here, by
-- the trigger below, whatever deleted it; the id goes once storage has forgotten the bytes. A store that
-- could not be reached at the time (an object store down) is asked again by the sweep, so no file's
-- bytes outlive it in storage.
CREATE TABLE file_deletions (
    file_id    TEXT PRIMARY KEY,
    deleted_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE FUNCTION files_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO file_deletions (file_id) SELECT id FROM gone ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;

CREATE TRIGGER files_deleted AFTER DELETE ON files
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION files_deleted();
