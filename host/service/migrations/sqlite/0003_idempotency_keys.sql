-- The keys of creates sent with `Idempotency-Key`: the request each was
-- first used for, and once it is answered, its answer (status NULL while
-- the first request is under way). Kept 24 hours.
CREATE TABLE idempotency_keys (
    workspace_id TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    request TEXT NOT NULL,
    status BIGINT,
    body TEXT,
    location TEXT,
    etag TEXT,
    created_at TEXT NOT NULL,
    PRIMARY KEY (workspace_id, idempotency_key)
);
