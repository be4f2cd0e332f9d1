-- name: RequestInsert :one
INSERT INTO structured_requests (request_id, chat_id, name, description, schema, admitted_by, trace_parent)
VALUES (@request_id, @chat_id, @name, @description, @schema, sqlc.narg(admitted_by), sqlc.narg(trace_parent))
RETURNING *;

-- name: RequestGet :one
SELECT * FROM structured_requests WHERE request_id = @request_id;

-- name: RequestGetForOwner :one
SELECT r.* FROM structured_requests r JOIN chats c ON c.id = r.chat_id
WHERE r.request_id = @request_id AND c.owner_id = @owner_id;

-- name: RequestRecordProgressIfPending :one
-- Adds a step and/or a rejection (with its entry in attempts) to a pending
-- request and, when asked, replaces or clears its candidate, in the
-- transaction that commits the evidence. With @sum_usage (the same
-- transaction writes the receipt) it also returns the usage sum the receipt
-- keeps (chatd_request_usage), the steps this transaction inserted
-- included, without a round trip of its own; otherwise usage is null.
UPDATE structured_requests
SET steps = steps + @add_steps::integer,
    rejections = rejections + @add_rejections::integer,
    attempts = attempts || coalesce(sqlc.narg(add_attempts)::jsonb, '[]'),
    validation_rejections = validation_rejections + @add_validation_rejections::integer,
    candidate = CASE WHEN @set_candidate::boolean THEN sqlc.narg(candidate)::jsonb ELSE candidate END,
    candidate_tool_call_id = CASE WHEN @set_candidate::boolean THEN sqlc.narg(candidate_tool_call_id)::text ELSE candidate_tool_call_id END
WHERE request_id = @request_id AND status = 'pending'
RETURNING sqlc.embed(structured_requests),
    (CASE WHEN @sum_usage::boolean THEN chatd_request_usage(@request_id) END)::jsonb AS usage;

-- name: RequestFinishIfPending :one
-- Closes a pending request with its receipt, inserted earlier in the same
-- transaction: the request's one receipt (chat_messages_one_receipt_per_request),
-- found here so that the two statements can be sent together. The guard
-- trigger refuses a finish without it and any change to a finished row.
-- finished_by names the committing process (chatd_finish_announced).
UPDATE structured_requests
SET status = @status,
    finished_by = sqlc.narg(finished_by),
    receipt_message_id = (SELECT m.id FROM chat_messages m
                          WHERE m.structured_request_id = @request_id::uuid AND m.kind = 'receipt'),
    error_code = sqlc.narg(error_code),
    error_message = sqlc.narg(error_message),
    candidate = NULL,
    candidate_tool_call_id = NULL
WHERE request_id = @request_id AND status = 'pending'
RETURNING *;

-- name: RequestListPendingFrom :many
-- Pending requests an edit from message @from_id discards: those whose input
-- is at or after it in history, and those still queued. Oldest first.
SELECT r.* FROM structured_requests r
WHERE r.chat_id = @chat_id AND r.status = 'pending'
  AND (EXISTS (SELECT 1 FROM chat_messages m
               WHERE m.structured_request_id = r.request_id AND m.kind = 'message' AND m.role = 'user'
                 AND NOT m.deleted AND m.id >= @from_id)
       OR EXISTS (SELECT 1 FROM chat_queued_messages q WHERE q.structured_request_id = r.request_id))
ORDER BY r.created_at, r.request_id;

-- name: RequestListPendingForChat :many
SELECT * FROM structured_requests WHERE chat_id = @chat_id AND status = 'pending' ORDER BY created_at, request_id;

-- name: RequestGetForOwnerWithReceipt :one
-- A request of the owner's and, once it finished, its receipt, in one
-- snapshot (the long poll's read), with the chat's provider retry while
-- the request is pending.
SELECT r.*, m.id AS receipt_id, coalesce(m.role, '')::text AS receipt_role, coalesce(m.kind, '')::text AS receipt_kind,
       m.content AS receipt_content, m.created_at AS receipt_created_at,
       (CASE WHEN r.status = 'pending' AND c.status IN ('running', 'interrupting') THEN c.provider_retry END)::jsonb AS provider_retry
FROM structured_requests r
JOIN chats c ON c.id = r.chat_id AND c.owner_id = @owner_id
LEFT JOIN chat_messages m ON m.id = r.receipt_message_id
WHERE r.request_id = @request_id;

-- name: RequestGoverning :many
-- The request that governs a chat's turn: the one the latest real user
-- request (client-visible user input, not model-only feedback) asked for,
-- if it is still pending. At most one row.
SELECT r.* FROM structured_requests r
WHERE r.status = 'pending' AND r.request_id = (
    SELECT m.structured_request_id FROM chat_messages m
    WHERE m.chat_id = @chat_id AND NOT m.deleted AND m.kind = 'message' AND m.role = 'user' AND m.visibility IN ('user', 'both')
    ORDER BY m.id DESC
    LIMIT 1);

-- name: RequestLatestOfChat :one
-- A spawned child's request: the one it was created with, or the one an
-- edit of its message replaced it with (the API admits no other in a child).
SELECT * FROM structured_requests WHERE chat_id = @chat_id ORDER BY created_at DESC, request_id DESC LIMIT 1;

-- name: RequestCountPending :one
-- Structured requests not finished, queued ones included: a migration is
-- reverted only once there are none (docs/operations.md, Rolling back).
SELECT count(*)::bigint FROM structured_requests WHERE status = 'pending';

-- name: RequestListPendingInChats :many
-- The pending requests of chats a delete holds, which it cancels first.
SELECT * FROM structured_requests WHERE chat_id = ANY (@chat_ids::uuid[]) AND status = 'pending'
ORDER BY created_at, request_id;

-- name: RequestListForChats :many
SELECT * FROM structured_requests WHERE chat_id = ANY (@chat_ids::uuid[]) ORDER BY chat_id, created_at, request_id;

-- name: RequestImportMany :exec
-- An imported chat's requests, pending until RequestImportFinishMany: rows
-- is a JSON array of objects with the columns as keys.
INSERT INTO structured_requests (request_id, chat_id, name, description, schema, trace_parent, created_at)
SELECT (r->>'request_id')::uuid, @chat_id::uuid, r->>'name', coalesce(r->>'description', ''), r->'schema',
       r->>'trace_parent', (r->>'created_at')::timestamptz
FROM jsonb_array_elements(@rows::jsonb) r;

-- name: RequestImportFinishMany :many
-- Finishes imported requests as the export had them, with the receipts
-- inserted before in the same transaction; in an import (ImportBegin) they
-- keep their finish time.
UPDATE structured_requests r
SET status = f.status, error_code = f.error_code, error_message = f.error_message, rejections = f.rejections,
    validation_rejections = f.validation_rejections, steps = f.steps, attempts = coalesce(f.attempts, '[]'),
    finished_at = f.finished_at,
    receipt_message_id = (SELECT m.id FROM chat_messages m WHERE m.structured_request_id = r.request_id AND m.kind = 'receipt')
FROM jsonb_to_recordset(@rows::jsonb) AS f(request_id uuid, status text, error_code text, error_message text, rejections integer,
                                             validation_rejections integer, steps integer, attempts jsonb, finished_at timestamptz)
WHERE r.request_id = f.request_id AND r.chat_id = @chat_id AND r.status = 'pending'
RETURNING r.request_id;
