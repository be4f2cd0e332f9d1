-- Stop hooks fail closed: a request whose candidate no hook could vet ends
-- with error_code hook_failed.

-- +goose Up
ALTER TABLE structured_requests DROP CONSTRAINT structured_requests_error_code_check;
ALTER TABLE structured_requests ADD CONSTRAINT structured_requests_error_code_check CHECK (error_code IN (
    'validation_exhausted', 'not_produced', 'configuration_error', 'provider_error', 'refused',
    'hook_failed', 'interrupted', 'queue_deleted', 'superseded'));

-- +goose Down
ALTER TABLE structured_requests DROP CONSTRAINT structured_requests_error_code_check;
ALTER TABLE structured_requests ADD CONSTRAINT structured_requests_error_code_check CHECK (error_code IN (
    'validation_exhausted', 'not_produced', 'configuration_error', 'provider_error', 'refused',
    'interrupted', 'queue_deleted', 'superseded'));
