-- A tool set's name is for people ("Email Tool"); the prefix of its tools
-- over MCP (`<prefix>__<tool>`) is derived from it when it is written, and
-- is unique in the workspace. Tool sets named before keep their name as
-- their prefix (those names were all valid prefixes).
ALTER TABLE tool_sets ADD COLUMN mcp_name TEXT;
UPDATE tool_sets SET mcp_name = name;
CREATE UNIQUE INDEX tool_sets_mcp_name ON tool_sets (workspace_id, mcp_name);
