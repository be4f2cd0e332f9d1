-- structured_requests.schema is written through the JSONB-safe codec
-- (internal/jsonb, EncodeDocument), so that a schema may hold U+0000: in
-- its strings and keys U+0000 is stored as U+E000 U+E001 and U+E000 as
-- U+E000 U+E000, and reading reverses both. A schema stored before holds
-- its U+E000 as it is: doubled here, it reads back unchanged. The
-- definition guard (chatd_requests_guard) refuses any change to a schema,
-- so it is off for this statement, which changes only the encoding.
-- Down halves them again; a schema holding U+0000, which no release
-- before could store, keeps U+E000 U+E001 in its place.

-- +goose Up
-- +goose StatementBegin
DO $$
DECLARE
    guarded boolean := EXISTS (SELECT 1 FROM pg_trigger
                                WHERE tgname = 'chatd_requests_guard' AND tgrelid = 'structured_requests'::regclass);
BEGIN
    IF guarded THEN
        ALTER TABLE structured_requests DISABLE TRIGGER chatd_requests_guard;
    END IF;
    UPDATE structured_requests SET schema = replace(schema::text, chr(57344), repeat(chr(57344), 2))::jsonb
     WHERE strpos(schema::text, chr(57344)) > 0;
    IF guarded THEN
        ALTER TABLE structured_requests ENABLE TRIGGER chatd_requests_guard;
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$
DECLARE
    guarded boolean := EXISTS (SELECT 1 FROM pg_trigger
                                WHERE tgname = 'chatd_requests_guard' AND tgrelid = 'structured_requests'::regclass);
BEGIN
    IF guarded THEN
        ALTER TABLE structured_requests DISABLE TRIGGER chatd_requests_guard;
    END IF;
    UPDATE structured_requests SET schema = replace(schema::text, repeat(chr(57344), 2), chr(57344))::jsonb
     WHERE strpos(schema::text, chr(57344)) > 0;
    IF guarded THEN
        ALTER TABLE structured_requests ENABLE TRIGGER chatd_requests_guard;
    END IF;
END
$$;
-- +goose StatementEnd
