-- Users come from two places: names an operator gives (chatd token create
-- --user NAME, the token API, X-Chatd-User without an identity provider)
-- and an application's identity provider, keyed by (issuer, subject) so
-- that the same subject at two issuers is two users. An identity
-- provider's user is named "idp:" and a digest of its key, a form a given
-- name cannot take, so the two kinds never share a name either.
--
-- Tokens carry scopes (read: GET routes and streams; write: everything a
-- user does; admin: the token and user API) and the act-as capability
-- (X-Chatd-User). Existing tokens keep what they could do: read and write.

-- +goose Up
ALTER TABLE users ADD COLUMN issuer text, ADD COLUMN subject text;
ALTER TABLE users
    ADD CONSTRAINT users_issuer_subject_key UNIQUE (issuer, subject),
    ADD CONSTRAINT users_identity_check CHECK ((issuer IS NULL) = (subject IS NULL)
        AND (issuer IS NULL OR (octet_length(issuer) BETWEEN 1 AND 1024 AND octet_length(subject) BETWEEN 1 AND 255))),
    DROP CONSTRAINT users_name_check,
    ADD CONSTRAINT users_name_check CHECK (CASE WHEN issuer IS NULL
        THEN name ~ '^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$'
        ELSE name ~ '^idp:[a-z2-7]{26}$' END);

ALTER TABLE api_tokens
    ADD COLUMN scopes text[] NOT NULL DEFAULT '{read,write}'
        CONSTRAINT api_tokens_scopes_check CHECK (cardinality(scopes) > 0 AND scopes <@ '{read,write,admin}'::text[]),
    ADD COLUMN act_as boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE api_tokens DROP COLUMN act_as, DROP COLUMN scopes;
UPDATE users SET name = 'idp-' || substr(name, 5) WHERE issuer IS NOT NULL;
ALTER TABLE users
    DROP CONSTRAINT users_name_check,
    ADD CONSTRAINT users_name_check CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$'),
    DROP CONSTRAINT users_identity_check,
    DROP CONSTRAINT users_issuer_subject_key,
    DROP COLUMN subject, DROP COLUMN issuer;
