-- Why a structured request's attempts were rejected, for its users: one
-- entry per rejected finalization batch, appended in the transaction that
-- counts the rejection (RequestRecordProgressIfPending), as
-- {attempt, reason, errors: [{instance_path, keyword, message}], errors_total,
-- truncated} (docs/structured-output.md, "Rejected attempts"). Rows from
-- before this migration keep an empty list.

-- +goose Up
ALTER TABLE structured_requests ADD COLUMN attempts jsonb NOT NULL DEFAULT '[]'
    CONSTRAINT structured_requests_attempts_list
        CHECK (jsonb_typeof(attempts) = 'array' AND jsonb_array_length(attempts) <= rejections);

-- +goose Down
ALTER TABLE structured_requests DROP COLUMN attempts;
