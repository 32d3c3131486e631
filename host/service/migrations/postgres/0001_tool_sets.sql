-- Tool sets, their tools and their events (the tool-set service model).
-- JSON columns hold the API's own objects (spec, labels, profiles) as text;
-- times are RFC 3339 UTC text, which sorts in time order.

CREATE TABLE tool_sets (
    id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    profile_id TEXT NOT NULL,
    name TEXT NOT NULL,
    external_id TEXT,
    labels TEXT NOT NULL,
    spec TEXT NOT NULL,
    created_by TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    -- The resource version: bumped by every change of the tool set itself
    -- (an update must name the version it read: If-Match).
    version BIGINT NOT NULL,
    -- Bumped by every change of the tool set or of its tools: instances
    -- sharing the store compare revisions to find what changed.
    revision BIGINT NOT NULL,
    tool_count BIGINT,
    last_sync TEXT,
    -- The instance that records this tool set's syncs, and until when.
    sync_owner TEXT,
    sync_until BIGINT,
    UNIQUE (workspace_id, name)
);

CREATE INDEX tool_sets_by_workspace ON tool_sets (workspace_id, id);

CREATE TABLE tools (
    id TEXT PRIMARY KEY,
    tool_set_id TEXT NOT NULL REFERENCES tool_sets (id) ON DELETE CASCADE,
    account_id TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    profile_id TEXT NOT NULL,
    name TEXT NOT NULL,
    external_id TEXT,
    labels TEXT NOT NULL,
    spec TEXT NOT NULL,
    created_by TEXT NOT NULL,
    -- `api`: created through the API (http tool sets); `sync`: found by a
    -- sync (mcp and uri tool sets).
    origin TEXT NOT NULL,
    -- Set through the API for a synced tool: 0 or 1 (NULL: as synced).
    enabled_override BIGINT,
    approval_override BIGINT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    version BIGINT NOT NULL,
    UNIQUE (tool_set_id, name)
);

-- Append-only: events outlive their tool set.
CREATE TABLE events (
    seq BIGSERIAL PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    tool_set_id TEXT NOT NULL,
    account_id TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    event TEXT NOT NULL,
    info TEXT NOT NULL,
    created_at TEXT NOT NULL
);

CREATE INDEX events_by_tool_set ON events (tool_set_id, seq);
