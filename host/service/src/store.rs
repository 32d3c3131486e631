//! Where tool sets, tools and events live: SQLite (a file, the embedded
//! default) or PostgreSQL (shared by many instances), through sqlx's Any
//! driver with SQL both understand. Every statement that changes a row
//! names the version it expects, so concurrent writers never overwrite each
//! other: one wins, the others get [`StoreError::Conflict`]. A write is
//! committed (SQLite: `synchronous = FULL`, WAL) before it is answered.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;
use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::{AnyPool, Row};

/// How long a request waits for a connection to the database.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(3);

/// A store's failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store URL is not one of `sqlite://PATH` or `postgres://...`.
    #[error("unsupported store `{0}`: give sqlite://PATH or postgres://USER@HOST/DB")]
    Unsupported(String),
    /// No such row in this workspace.
    #[error("not found")]
    NotFound,
    /// The row changed since the version given, or a unique name is taken.
    #[error("{0}")]
    Conflict(String),
    /// The database failed.
    #[error("the store failed: {0}")]
    Database(#[from] sqlx::Error),
    /// A migration failed.
    #[error("the store's migrations failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A quota of the workspace or tool set is used up.
    #[error("{0}")]
    Quota(String),
    /// A stored JSON column did not parse (the store was changed by hand).
    #[error("a stored value is corrupt: {0}")]
    Corrupt(String),
}

impl StoreError {
    /// Whether the database could not be reached (down, restarting, the
    /// connection lost, no connection free in time): worth retrying in a
    /// moment, unlike a refused or failed statement.
    pub fn is_unavailable(&self) -> bool {
        let StoreError::Database(error) = self else {
            return false;
        };
        match error {
            sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed => true,
            // Connection exceptions (class 08), and the server shutting
            // down or starting (57P01-57P03).
            sqlx::Error::Database(db) => {
                db.code().is_some_and(|code| code.starts_with("08") || matches!(&*code, "57P01" | "57P02" | "57P03"))
            }
            _ => false,
        }
    }
}

/// Which database a store is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// An SQLite file.
    Sqlite,
    /// A PostgreSQL server.
    Postgres,
}

/// A tool set as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSetRow {
    /// `toolset_01H...`.
    pub id: String,
    /// Its account.
    pub account_id: String,
    /// Its workspace.
    pub workspace_id: String,
    /// The profile that created it.
    pub profile_id: String,
    /// Its name, for people (unique in the workspace).
    pub name: String,
    /// The prefix of its tools over MCP (`<mcp_name>__<tool>`), derived
    /// from its name (unique in the workspace): its toolset's id.
    pub mcp_name: String,
    /// An id in the caller's system.
    pub external_id: Option<String>,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its spec, as the API took it.
    pub spec: Value,
    /// Its creator's profile.
    pub created_by: Value,
    /// When it was created.
    pub created_at: String,
    /// When it last changed.
    pub updated_at: String,
    /// Its resource version.
    pub version: i64,
    /// Bumped by every change of it or its tools.
    pub revision: i64,
    /// How many tools it has (not archived), once synced.
    pub tool_count: Option<i64>,
    /// Its last sync's outcome event.
    pub last_sync: Option<Value>,
}

/// A tool as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolRow {
    /// `tool_01H...`.
    pub id: String,
    /// Its tool set.
    pub tool_set_id: String,
    /// Its account.
    pub account_id: String,
    /// Its workspace.
    pub workspace_id: String,
    /// The profile that created it.
    pub profile_id: String,
    /// Its name (unique in its tool set).
    pub name: String,
    /// An id in the caller's system.
    pub external_id: Option<String>,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its spec.
    pub spec: Value,
    /// Its creator's profile.
    pub created_by: Value,
    /// `api` or `sync`.
    pub origin: String,
    /// For a synced tool: available (`true`) or filtered (`false`) as set
    /// through the API, whatever the sync found.
    pub enabled_override: Option<bool>,
    /// For a synced tool: whether calls need approval, as set through the
    /// API.
    pub approval_override: Option<bool>,
    /// When it was created.
    pub created_at: String,
    /// When it last changed.
    pub updated_at: String,
    /// Its resource version.
    pub version: i64,
}

/// An event as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRow {
    /// `event_01H...`.
    pub id: String,
    /// Its tool set.
    pub tool_set_id: String,
    /// Its account.
    pub account_id: String,
    /// Its workspace.
    pub workspace_id: String,
    /// `{"SyncStarted": {...}}` and the like.
    pub event: Value,
    /// Which instance.
    pub info: Value,
    /// When.
    pub created_at: String,
}

/// A tool a sync found, to be recorded.
#[derive(Debug, Clone)]
pub struct SyncedTool {
    /// Its name on the source.
    pub name: String,
    /// Its spec (status included).
    pub spec: Value,
}

/// The store.
#[derive(Debug, Clone)]
pub struct Store {
    pool: AnyPool,
    backend: Backend,
}

/// What claiming an idempotency key found.
#[derive(Debug)]
pub enum KeyClaim {
    /// The key is new: the request is this one's to make.
    Claimed,
    /// The key's first request was answered so.
    Answered(KeptAnswer),
    /// The key's first request is still under way.
    InProgress,
    /// The key was first used for another request.
    OtherRequest,
}

/// The answer kept for an idempotency key.
#[derive(Debug, Clone)]
pub struct KeptAnswer {
    /// Its HTTP status.
    pub status: i64,
    /// Its body.
    pub body: String,
    /// Its `Location` header.
    pub location: Option<String>,
    /// Its `ETag` header.
    pub etag: Option<String>,
}

/// The migrations of one database, in order, built into the binary: each
/// `(version, description, SQL)` as `migrations/<database>/<version>_<name>.sql`
/// has it. sqlx's `migrate!` macro does the same from the directory, but
/// needs sqlx's `macros` feature, which builds sqlx a second time for the
/// compiler (a tenth of the service's build); the checksums are sqlx's own
/// (`Migration::new`), so databases migrated either way agree.
#[derive(Debug, Clone, Copy)]
struct Migrations(&'static [(i64, &'static str, &'static str)]);

impl<'s> sqlx::migrate::MigrationSource<'s> for Migrations {
    fn resolve(
        self,
    ) -> std::pin::Pin<
        Box<dyn Future<Output = Result<Vec<sqlx::migrate::Migration>, sqlx::error::BoxDynError>> + Send + 's>,
    > {
        let migrations = (self.0.iter())
            .map(|&(version, description, sql)| {
                let no_tx = sql.starts_with("-- no-transaction");
                let kind = sqlx::migrate::MigrationType::Simple;
                sqlx::migrate::Migration::new(version, description.into(), kind, sql.into(), no_tx)
            })
            .collect();
        Box::pin(std::future::ready(Ok(migrations)))
    }
}

const SQLITE: Migrations = Migrations(&[
    (1, "tool sets", include_str!("../migrations/sqlite/0001_tool_sets.sql")),
    (2, "mcp names", include_str!("../migrations/sqlite/0002_mcp_names.sql")),
    (3, "idempotency keys", include_str!("../migrations/sqlite/0003_idempotency_keys.sql")),
]);
const POSTGRES: Migrations = Migrations(&[
    (1, "tool sets", include_str!("../migrations/postgres/0001_tool_sets.sql")),
    (2, "mcp names", include_str!("../migrations/postgres/0002_mcp_names.sql")),
    (3, "idempotency keys", include_str!("../migrations/postgres/0003_idempotency_keys.sql")),
]);

const TOOL_SET_COLUMNS: &str = "id, account_id, workspace_id, profile_id, name, external_id, labels, spec, created_by, \
     created_at, updated_at, version, revision, tool_count, last_sync, mcp_name";
const TOOL_COLUMNS: &str = "id, tool_set_id, account_id, workspace_id, profile_id, name, external_id, labels, spec, \
     created_by, origin, created_at, updated_at, version, enabled_override, approval_override";

impl Store {
    /// Open the store at `url` (`sqlite://PATH`, the file made if missing;
    /// `postgres://...`) and bring its schema up to date.
    pub async fn open(url: &str) -> Result<Store, StoreError> {
        sqlx::any::install_default_drivers();
        let (backend, url) = if let Some(path) = url.strip_prefix("sqlite://") {
            let path = path.split('?').next().unwrap_or(path);
            if path.is_empty() {
                return Err(StoreError::Unsupported(url.to_owned()));
            }
            (Backend::Sqlite, format!("sqlite://{path}?mode=rwc"))
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            (Backend::Postgres, url.to_owned())
        } else {
            return Err(StoreError::Unsupported(url.to_owned()));
        };
        let pool = AnyPoolOptions::new()
            // SQLite has one writer at a time: a few connections, each
            // waiting its turn rather than failing busy.
            .max_connections(if backend == Backend::Sqlite { 4 } else { 8 })
            // A store that cannot be reached fails a request in a few
            // seconds (`503`, `Retry-After`), rather than holding it for
            // half a minute; connections that broke meanwhile are tested
            // before use (sqlx's default) and made again once it is back.
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .after_connect(move |conn, _| {
                Box::pin(async move {
                    if backend == Backend::Sqlite {
                        use sqlx::Executor as _;
                        conn.execute("PRAGMA busy_timeout = 10000").await?;
                        conn.execute("PRAGMA journal_mode = WAL").await?;
                        conn.execute("PRAGMA synchronous = FULL").await?;
                        conn.execute("PRAGMA foreign_keys = ON").await?;
                    }
                    Ok(())
                })
            })
            .connect(&url)
            .await?;
        let migrations = match backend {
            Backend::Sqlite => SQLITE,
            Backend::Postgres => POSTGRES,
        };
        sqlx::migrate::Migrator::new(migrations).await?.run(&pool).await?;
        Ok(Store { pool, backend })
    }

    /// Which database it is.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// A page of a workspace's tool sets, by id, after `after`.
    pub async fn list_tool_sets(
        &self,
        workspace: &str,
        after: &str,
        limit: i64,
    ) -> Result<Vec<ToolSetRow>, StoreError> {
        let sql = format!(
            "SELECT {TOOL_SET_COLUMNS} FROM tool_sets WHERE workspace_id = $1 AND id > $2 ORDER BY id LIMIT $3"
        );
        let rows = sqlx::query(&sql).bind(workspace).bind(after).bind(limit).fetch_all(&self.pool).await?;
        rows.iter().map(tool_set_row).collect()
    }

    /// Every tool set of every workspace (to load them all at start).
    pub async fn all_tool_sets(&self) -> Result<Vec<ToolSetRow>, StoreError> {
        let sql = format!("SELECT {TOOL_SET_COLUMNS} FROM tool_sets ORDER BY workspace_id, id");
        let rows = sqlx::query(&sql).fetch_all(&self.pool).await?;
        rows.iter().map(tool_set_row).collect()
    }

    /// Every tool set of one workspace.
    pub async fn workspace_tool_sets(&self, workspace: &str) -> Result<Vec<ToolSetRow>, StoreError> {
        let sql = format!("SELECT {TOOL_SET_COLUMNS} FROM tool_sets WHERE workspace_id = $1 ORDER BY id");
        let rows = sqlx::query(&sql).bind(workspace).fetch_all(&self.pool).await?;
        rows.iter().map(tool_set_row).collect()
    }

    /// Each tool set's workspace and revision, by id: what instances
    /// sharing the store compare to find each other's changes.
    pub async fn revisions(&self) -> Result<BTreeMap<String, (String, i64)>, StoreError> {
        let rows = sqlx::query("SELECT id, workspace_id, revision FROM tool_sets").fetch_all(&self.pool).await?;
        rows.iter()
            .map(|row| Ok((row.try_get("id")?, (row.try_get("workspace_id")?, row.try_get("revision")?))))
            .collect()
    }

    /// One tool set of a workspace.
    pub async fn get_tool_set(&self, workspace: &str, id: &str) -> Result<ToolSetRow, StoreError> {
        let sql = format!("SELECT {TOOL_SET_COLUMNS} FROM tool_sets WHERE workspace_id = $1 AND id = $2");
        let row = sqlx::query(&sql).bind(workspace).bind(id).fetch_optional(&self.pool).await?;
        tool_set_row(&row.ok_or(StoreError::NotFound)?)
    }

    /// Claim `key` of `workspace` for `request` (first dropping the
    /// workspace's keys made before `expired`, and unanswered ones made
    /// before `abandoned`): the key is new, or the request it was first
    /// used for is answered, under way, or another request.
    pub async fn claim_key(
        &self,
        workspace: &str,
        key: &str,
        request: &str,
        now: &str,
        expired: &str,
        abandoned: &str,
    ) -> Result<KeyClaim, StoreError> {
        sqlx::query(
            "DELETE FROM idempotency_keys WHERE workspace_id = $1 \
             AND (created_at < $2 OR (status IS NULL AND created_at < $3))",
        )
        .bind(workspace)
        .bind(expired)
        .bind(abandoned)
        .execute(&self.pool)
        .await?;
        let inserted = sqlx::query(
            "INSERT INTO idempotency_keys (workspace_id, idempotency_key, request, created_at) \
             VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
        )
        .bind(workspace)
        .bind(key)
        .bind(request)
        .bind(now)
        .execute(&self.pool)
        .await?;
        if inserted.rows_affected() == 1 {
            return Ok(KeyClaim::Claimed);
        }
        let row = sqlx::query(
            "SELECT request, status, body, location, etag FROM idempotency_keys \
             WHERE workspace_id = $1 AND idempotency_key = $2",
        )
        .bind(workspace)
        .bind(key)
        .fetch_optional(&self.pool)
        .await?;
        // Dropped between the insert and the read: its time was up.
        let Some(row) = row else { return Ok(KeyClaim::InProgress) };
        if row.try_get::<String, _>("request")? != request {
            return Ok(KeyClaim::OtherRequest);
        }
        Ok(match row.try_get::<Option<i64>, _>("status")? {
            None => KeyClaim::InProgress,
            Some(status) => KeyClaim::Answered(KeptAnswer {
                status,
                body: row.try_get::<Option<String>, _>("body")?.unwrap_or_default(),
                location: row.try_get("location")?,
                etag: row.try_get("etag")?,
            }),
        })
    }

    /// Keep the answer to the request `key` was claimed for.
    pub async fn answer_key(&self, workspace: &str, key: &str, answer: &KeptAnswer) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE idempotency_keys SET status = $1, body = $2, location = $3, etag = $4 \
             WHERE workspace_id = $5 AND idempotency_key = $6",
        )
        .bind(answer.status)
        .bind(&answer.body)
        .bind(answer.location.as_deref())
        .bind(answer.etag.as_deref())
        .bind(workspace)
        .bind(key)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Give `key` up: its request made nothing, and may be sent again.
    pub async fn release_key(&self, workspace: &str, key: &str) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM idempotency_keys WHERE workspace_id = $1 AND idempotency_key = $2")
            .bind(workspace)
            .bind(key)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Add a tool set; its name must be free in its workspace.
    pub async fn create_tool_set(&self, row: &ToolSetRow, quota: i64) -> Result<(), StoreError> {
        // The count and the insert are one statement, in a transaction
        // that on PostgreSQL first takes the workspace's advisory lock:
        // concurrent creates cannot both see room for one (SQLite writes
        // one at a time anyway).
        let mut tx = self.pool.begin().await?;
        if self.backend == Backend::Postgres {
            sqlx::query("SELECT 1 AS locked FROM (SELECT pg_advisory_xact_lock(hashtext($1))) AS workspace_lock")
                .bind(&row.workspace_id)
                .execute(&mut *tx)
                .await?;
        }
        let sql = insert_within_quota_sql("tool_sets", TOOL_SET_COLUMNS, "workspace_id", 3);
        let insert = sqlx::query(&sql)
            .bind(&row.id)
            .bind(&row.account_id)
            .bind(&row.workspace_id)
            .bind(&row.profile_id)
            .bind(&row.name)
            .bind(row.external_id.as_deref())
            .bind(json_text(&row.labels))
            .bind(row.spec.to_string())
            .bind(row.created_by.to_string())
            .bind(&row.created_at)
            .bind(&row.updated_at)
            .bind(row.version)
            .bind(row.revision)
            .bind(row.tool_count)
            .bind(row.last_sync.as_ref().map(Value::to_string))
            .bind(&row.mcp_name)
            .bind(quota);
        let full = || format!("the workspace has {quota} tool sets, as many as it may have");
        commit_within_quota(tx, insert, &row.name, full).await
    }

    /// Change a tool set's name, external id, labels and spec, if its
    /// version is still `expected` (any version when `None`); returns it
    /// changed.
    pub async fn update_tool_set(
        &self,
        workspace: &str,
        id: &str,
        expected: Option<i64>,
        change: &ToolSetRow,
    ) -> Result<ToolSetRow, StoreError> {
        let done = sqlx::query(
            "UPDATE tool_sets SET name = $1, external_id = $2, labels = $3, spec = $4, updated_at = $5, \
             version = version + 1, revision = revision + 1, mcp_name = $9 \
             WHERE workspace_id = $6 AND id = $7 AND ($8 < 0 OR version = $8)",
        )
        .bind(&change.name)
        .bind(change.external_id.as_deref())
        .bind(json_text(&change.labels))
        .bind(change.spec.to_string())
        .bind(&change.updated_at)
        .bind(workspace)
        .bind(id)
        .bind(expected.unwrap_or(-1))
        .bind(&change.mcp_name)
        .execute(&self.pool)
        .await
        .map_err(|e| name_taken(e, &change.name))?;
        if done.rows_affected() == 0 {
            let current = self.get_tool_set(workspace, id).await?;
            return Err(changed_since(current.version, expected));
        }
        self.get_tool_set(workspace, id).await
    }

    /// Remove a tool set and (by `ON DELETE CASCADE`) its tools, if its
    /// version is still `expected`. The tool set's row is locked first, as
    /// every other write locks it first: no deadlock with a sync.
    pub async fn delete_tool_set(&self, workspace: &str, id: &str, expected: Option<i64>) -> Result<(), StoreError> {
        let done =
            sqlx::query("DELETE FROM tool_sets WHERE workspace_id = $1 AND id = $2 AND ($3 < 0 OR version = $3)")
                .bind(workspace)
                .bind(id)
                .bind(expected.unwrap_or(-1))
                .execute(&self.pool)
                .await?;
        if done.rows_affected() == 0 {
            let current = self.get_tool_set(workspace, id).await?;
            return Err(changed_since(current.version, expected));
        }
        Ok(())
    }

    /// The newest event of a tool set, if it has any.
    pub async fn latest_event(&self, tool_set: &str) -> Result<Option<Value>, StoreError> {
        let row = sqlx::query("SELECT event FROM events WHERE tool_set_id = $1 ORDER BY seq DESC LIMIT 1")
            .bind(tool_set)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|row| json_column(&row, "event")).transpose()
    }

    /// The MCP names (toolset ids) of a workspace's tool sets.
    pub async fn workspace_names(&self, workspace: &str) -> Result<std::collections::HashSet<String>, StoreError> {
        let rows = sqlx::query("SELECT name, mcp_name FROM tool_sets WHERE workspace_id = $1")
            .bind(workspace)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(mcp_name_column).collect()
    }

    /// The tool set of `workspace` (other than `except`) whose name or MCP
    /// name is one of these: its id and name.
    pub async fn name_holder(
        &self,
        workspace: &str,
        name: &str,
        mcp_name: &str,
        except: &str,
    ) -> Result<Option<(String, String)>, StoreError> {
        let row = sqlx::query(
            "SELECT id, name FROM tool_sets \
             WHERE workspace_id = $1 AND id <> $2 AND (name = $3 OR mcp_name = $4 OR (mcp_name IS NULL AND name = $4)) \
             LIMIT 1",
        )
        .bind(workspace)
        .bind(except)
        .bind(name)
        .bind(mcp_name)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|row| Ok((row.try_get("id")?, row.try_get("name")?))).transpose()
    }

    /// Whether `event` is an event of this tool set in this workspace.
    pub async fn event_exists(&self, workspace: &str, tool_set: &str, event: &str) -> Result<bool, StoreError> {
        let row = sqlx::query("SELECT seq FROM events WHERE workspace_id = $1 AND tool_set_id = $2 AND id = $3")
            .bind(workspace)
            .bind(tool_set)
            .bind(event)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.is_some())
    }

    /// A page of a tool set's tools, by id.
    pub async fn list_tools(
        &self,
        workspace: &str,
        tool_set: &str,
        after: &str,
        limit: i64,
    ) -> Result<Vec<ToolRow>, StoreError> {
        let sql = format!(
            "SELECT {TOOL_COLUMNS} FROM tools WHERE workspace_id = $1 AND tool_set_id = $2 AND id > $3 ORDER BY id LIMIT $4"
        );
        let rows =
            sqlx::query(&sql).bind(workspace).bind(tool_set).bind(after).bind(limit).fetch_all(&self.pool).await?;
        rows.iter().map(tool_row).collect()
    }

    /// Every tool of a tool set.
    pub async fn tools_of(&self, tool_set: &str) -> Result<Vec<ToolRow>, StoreError> {
        let sql = format!("SELECT {TOOL_COLUMNS} FROM tools WHERE tool_set_id = $1 ORDER BY id");
        let rows = sqlx::query(&sql).bind(tool_set).fetch_all(&self.pool).await?;
        rows.iter().map(tool_row).collect()
    }

    /// One tool of a tool set.
    pub async fn get_tool(&self, workspace: &str, tool_set: &str, id: &str) -> Result<ToolRow, StoreError> {
        let sql = format!("SELECT {TOOL_COLUMNS} FROM tools WHERE workspace_id = $1 AND tool_set_id = $2 AND id = $3");
        let row = sqlx::query(&sql).bind(workspace).bind(tool_set).bind(id).fetch_optional(&self.pool).await?;
        tool_row(&row.ok_or(StoreError::NotFound)?)
    }

    /// Add a tool to a tool set (its name free in the set); the tool set's
    /// revision moves.
    pub async fn create_tool(&self, row: &ToolRow, quota: i64) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        let bumped = sqlx::query("UPDATE tool_sets SET revision = revision + 1 WHERE id = $1 AND workspace_id = $2")
            .bind(&row.tool_set_id)
            .bind(&row.workspace_id)
            .execute(&mut *tx)
            .await?;
        if bumped.rows_affected() == 0 {
            return Err(StoreError::NotFound);
        }
        let sql = insert_within_quota_sql("tools", TOOL_COLUMNS, "tool_set_id", 2);
        let insert = sqlx::query(&sql)
            .bind(&row.id)
            .bind(&row.tool_set_id)
            .bind(&row.account_id)
            .bind(&row.workspace_id)
            .bind(&row.profile_id)
            .bind(&row.name)
            .bind(row.external_id.as_deref())
            .bind(json_text(&row.labels))
            .bind(row.spec.to_string())
            .bind(row.created_by.to_string())
            .bind(&row.origin)
            .bind(&row.created_at)
            .bind(&row.updated_at)
            .bind(row.version)
            .bind(row.enabled_override.map(i64::from))
            .bind(row.approval_override.map(i64::from))
            .bind(quota);
        let full = || format!("the tool set has {quota} tools, as many as it may have");
        commit_within_quota(tx, insert, &row.name, full).await
    }

    /// Change a tool, if its version is still `expected`.
    pub async fn update_tool(
        &self,
        workspace: &str,
        tool_set: &str,
        id: &str,
        expected: Option<i64>,
        change: &ToolRow,
    ) -> Result<ToolRow, StoreError> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("UPDATE tool_sets SET revision = revision + 1 WHERE id = $1 AND workspace_id = $2")
            .bind(tool_set)
            .bind(workspace)
            .execute(&mut *tx)
            .await?;
        let done = sqlx::query(
            "UPDATE tools SET name = $1, external_id = $2, labels = $3, spec = $4, updated_at = $5, version = version + 1, \
             enabled_override = $10, approval_override = $11 \
             WHERE workspace_id = $6 AND tool_set_id = $7 AND id = $8 AND ($9 < 0 OR version = $9)",
        )
        .bind(&change.name)
        .bind(change.external_id.as_deref())
        .bind(json_text(&change.labels))
        .bind(change.spec.to_string())
        .bind(&change.updated_at)
        .bind(workspace)
        .bind(tool_set)
        .bind(id)
        .bind(expected.unwrap_or(-1))
        .bind(change.enabled_override.map(i64::from))
        .bind(change.approval_override.map(i64::from))
        .execute(&mut *tx)
        .await
        .map_err(|e| name_taken(e, &change.name))?;
        if done.rows_affected() == 0 {
            tx.rollback().await?;
            let current = self.get_tool(workspace, tool_set, id).await?;
            return Err(changed_since(current.version, expected));
        }
        tx.commit().await?;
        self.get_tool(workspace, tool_set, id).await
    }

    /// Remove a tool, if its version is still `expected`.
    pub async fn delete_tool(
        &self,
        workspace: &str,
        tool_set: &str,
        id: &str,
        expected: Option<i64>,
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("UPDATE tool_sets SET revision = revision + 1 WHERE id = $1 AND workspace_id = $2")
            .bind(tool_set)
            .bind(workspace)
            .execute(&mut *tx)
            .await?;
        let done = sqlx::query(
            "DELETE FROM tools WHERE workspace_id = $1 AND tool_set_id = $2 AND id = $3 AND ($4 < 0 OR version = $4)",
        )
        .bind(workspace)
        .bind(tool_set)
        .bind(id)
        .bind(expected.unwrap_or(-1))
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            tx.rollback().await?;
            let current = self.get_tool(workspace, tool_set, id).await?;
            return Err(changed_since(current.version, expected));
        }
        tx.commit().await?;
        Ok(())
    }

    /// Take (or keep) the right to record `tool_set`'s syncs for `seconds`
    /// (by the database's clock, which every instance shares): whether this
    /// instance has it. The instance that changed a tool set has it first;
    /// after it lapses, the first instance to sync takes it. With `take`,
    /// the claim is taken whoever holds it (the instance that changed the
    /// tool set records the sync of its change).
    pub async fn claim_sync(
        &self,
        tool_set: &str,
        instance: &str,
        seconds: i64,
        take: bool,
    ) -> Result<bool, StoreError> {
        let now = match self.backend {
            Backend::Sqlite => "CAST(strftime('%s', 'now') AS INTEGER)",
            Backend::Postgres => "CAST(EXTRACT(EPOCH FROM now()) AS BIGINT)",
        };
        let sql = format!(
            "UPDATE tool_sets SET sync_owner = $1, sync_until = {now} + $2 \
             WHERE id = $3 AND ($4 = 1 OR sync_owner IS NULL OR sync_owner = $1 OR sync_until < {now})"
        );
        let done = sqlx::query(&sql)
            .bind(instance)
            .bind(seconds)
            .bind(tool_set)
            .bind(i64::from(take))
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Append an event.
    pub async fn record_event(&self, event: &EventRow) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO events (id, tool_set_id, account_id, workspace_id, event, info, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&event.id)
        .bind(&event.tool_set_id)
        .bind(&event.account_id)
        .bind(&event.workspace_id)
        .bind(event.event.to_string())
        .bind(event.info.to_string())
        .bind(&event.created_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// A page of a tool set's events, oldest first, after `after` (an
    /// event id).
    pub async fn list_events(
        &self,
        workspace: &str,
        tool_set: &str,
        after: &str,
        limit: i64,
    ) -> Result<Vec<EventRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, tool_set_id, account_id, workspace_id, event, info, created_at FROM events \
             WHERE workspace_id = $1 AND tool_set_id = $2 \
             AND seq > COALESCE((SELECT seq FROM events WHERE id = $3), 0) ORDER BY seq LIMIT $4",
        )
        .bind(workspace)
        .bind(tool_set)
        .bind(after)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(EventRow {
                    id: row.try_get("id")?,
                    tool_set_id: row.try_get("tool_set_id")?,
                    account_id: row.try_get("account_id")?,
                    workspace_id: row.try_get("workspace_id")?,
                    event: json_column(row, "event")?,
                    info: json_column(row, "info")?,
                    created_at: row.try_get("created_at")?,
                })
            })
            .collect()
    }

    /// Record a sync's outcome alone (one that failed: the tools recorded
    /// before stay as they were).
    pub async fn apply_sync_outcome(&self, tool_set: &str, last_sync: &Value) -> Result<(), StoreError> {
        sqlx::query("UPDATE tool_sets SET last_sync = $1, revision = revision + 1 WHERE id = $2")
            .bind(last_sync.to_string())
            .bind(tool_set)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Record what a sync of `tool_set` found: each tool's spec (status
    /// included), inserted or updated by name; tools of an earlier sync it
    /// did not find become archived, and of those the most recently
    /// archived `keep_archived` are kept, the rest deleted (a server that
    /// renamed its tools at every listing grew the store without end); the
    /// tool count and last sync are set. New tools are recorded as made by
    /// `creator` (the tool set's creator). Tools made through the API are
    /// left alone.
    pub async fn apply_sync(
        &self,
        tool_set: &ToolSetRow,
        found: &[SyncedTool],
        creator: &Value,
        last_sync: &Value,
        now: &str,
        keep_archived: usize,
    ) -> Result<(), StoreError> {
        let existing = self.tools_of(&tool_set.id).await?;
        let by_name: std::collections::HashMap<&str, &ToolRow> =
            existing.iter().map(|row| (row.name.as_str(), row)).collect();
        let found_names: std::collections::HashSet<&str> = found.iter().map(|tool| tool.name.as_str()).collect();
        let mut tx = self.pool.begin().await?;
        // Write first: SQLite takes its write lock here, not on a later
        // upgrade that could find the database busy.
        let bumped =
            sqlx::query("UPDATE tool_sets SET tool_count = $1, last_sync = $2, revision = revision + 1 WHERE id = $3")
                .bind(found.len() as i64)
                .bind(last_sync.to_string())
                .bind(&tool_set.id)
                .execute(&mut *tx)
                .await?;
        if bumped.rows_affected() == 0 {
            // Deleted meanwhile: nothing to record.
            return Ok(());
        }
        for tool in found {
            match by_name.get(tool.name.as_str()) {
                Some(row) if row.origin != "sync" => {}
                Some(row) if row.spec == tool.spec => {}
                Some(row) => {
                    sqlx::query("UPDATE tools SET spec = $1, updated_at = $2, version = version + 1 WHERE id = $3")
                        .bind(tool.spec.to_string())
                        .bind(now)
                        .bind(&row.id)
                        .execute(&mut *tx)
                        .await?;
                }
                None => {
                    let sql = format!(
                        "INSERT INTO tools ({TOOL_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, NULL, '{{}}', $7, $8, 'sync', $9, $9, 1, NULL, NULL)"
                    );
                    sqlx::query(&sql)
                        .bind(crate::new_id("tool"))
                        .bind(&tool_set.id)
                        .bind(&tool_set.account_id)
                        .bind(&tool_set.workspace_id)
                        .bind(&tool_set.profile_id)
                        .bind(&tool.name)
                        .bind(tool.spec.to_string())
                        .bind(creator.to_string())
                        .bind(now)
                        .execute(&mut *tx)
                        .await?;
                }
            }
        }
        // The synced tools it did not find, newest archived first: those
        // archived now, then those archived before, by when.
        let mut archived: Vec<(&str, &ToolRow)> = Vec::new();
        for row in existing.iter().filter(|row| row.origin == "sync" && !found_names.contains(row.name.as_str())) {
            if row.spec["status"] == "TOOL_STATUS_ARCHIVED" {
                archived.push((row.updated_at.as_str(), row));
                continue;
            }
            let mut spec = row.spec.clone();
            spec["status"] = Value::from("TOOL_STATUS_ARCHIVED");
            archived.push((now, row));
            sqlx::query("UPDATE tools SET spec = $1, updated_at = $2, version = version + 1 WHERE id = $3")
                .bind(spec.to_string())
                .bind(now)
                .bind(&row.id)
                .execute(&mut *tx)
                .await?;
        }
        archived.sort_by(|a, b| b.0.cmp(a.0).then_with(|| a.1.name.cmp(&b.1.name)));
        for (_, row) in archived.iter().skip(keep_archived) {
            sqlx::query("DELETE FROM tools WHERE id = $1").bind(&row.id).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }
}

fn json_text(labels: &BTreeMap<String, String>) -> String {
    serde_json::to_string(labels).unwrap_or_else(|_| "{}".to_owned())
}

fn json_column(row: &AnyRow, column: &str) -> Result<Value, StoreError> {
    let text: String = row.try_get(column)?;
    serde_json::from_str(&text).map_err(|e| StoreError::Corrupt(format!("{column}: {e}")))
}

fn labels_column(row: &AnyRow) -> Result<BTreeMap<String, String>, StoreError> {
    let text: String = row.try_get("labels")?;
    serde_json::from_str(&text).map_err(|e| StoreError::Corrupt(format!("labels: {e}")))
}

/// A row's MCP name (its name, for a row written before it had one).
fn mcp_name_column(row: &AnyRow) -> Result<String, StoreError> {
    let mcp_name: Option<String> = row.try_get("mcp_name")?;
    Ok(match mcp_name {
        Some(mcp_name) => mcp_name,
        None => row.try_get("name")?,
    })
}

fn tool_set_row(row: &AnyRow) -> Result<ToolSetRow, StoreError> {
    let last_sync: Option<String> = row.try_get("last_sync")?;
    Ok(ToolSetRow {
        id: row.try_get("id")?,
        account_id: row.try_get("account_id")?,
        workspace_id: row.try_get("workspace_id")?,
        profile_id: row.try_get("profile_id")?,
        name: row.try_get("name")?,
        mcp_name: mcp_name_column(row)?,
        external_id: row.try_get("external_id")?,
        labels: labels_column(row)?,
        spec: json_column(row, "spec")?,
        created_by: json_column(row, "created_by")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        version: row.try_get("version")?,
        revision: row.try_get("revision")?,
        tool_count: row.try_get("tool_count")?,
        last_sync: last_sync
            .map(|text| serde_json::from_str(&text).map_err(|e| StoreError::Corrupt(format!("last_sync: {e}"))))
            .transpose()?,
    })
}

fn tool_row(row: &AnyRow) -> Result<ToolRow, StoreError> {
    Ok(ToolRow {
        id: row.try_get("id")?,
        tool_set_id: row.try_get("tool_set_id")?,
        account_id: row.try_get("account_id")?,
        workspace_id: row.try_get("workspace_id")?,
        profile_id: row.try_get("profile_id")?,
        name: row.try_get("name")?,
        external_id: row.try_get("external_id")?,
        labels: labels_column(row)?,
        spec: json_column(row, "spec")?,
        created_by: json_column(row, "created_by")?,
        origin: row.try_get("origin")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        version: row.try_get("version")?,
        enabled_override: row.try_get::<Option<i64>, _>("enabled_override")?.map(|v| v != 0),
        approval_override: row.try_get::<Option<i64>, _>("approval_override")?.map(|v| v != 0),
    })
}

/// A unique-name violation as a conflict naming the name.
/// An insert of a row into `table` (its `columns`, bound in order) that
/// inserts nothing once the rows sharing its `scope` column (the
/// `scope_at`-th bound value) number the quota, bound last: the count and
/// the insert in one statement.
fn insert_within_quota_sql(table: &str, columns: &str, scope: &str, scope_at: usize) -> String {
    let count = columns.split(',').count();
    let values: Vec<String> = (1..=count).map(|n| format!("${n}")).collect();
    format!(
        "INSERT INTO {table} ({columns}) SELECT {} WHERE (SELECT COUNT(*) FROM {table} WHERE {scope} = ${scope_at}) < ${}",
        values.join(", "),
        count + 1
    )
}

/// Run a quota-checked insert ([`insert_within_quota_sql`]) in `tx` and
/// commit it: a name already taken is a conflict naming `name`, and no row
/// inserted means the quota is used up (`full` says whose).
async fn commit_within_quota<'q>(
    mut tx: sqlx::Transaction<'_, sqlx::Any>,
    insert: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>,
    name: &str,
    full: impl FnOnce() -> String,
) -> Result<(), StoreError> {
    let done = insert.execute(&mut *tx).await.map_err(|e| name_taken(e, name))?;
    if done.rows_affected() == 0 {
        tx.rollback().await?;
        return Err(StoreError::Quota(full()));
    }
    tx.commit().await?;
    Ok(())
}

fn name_taken(error: sqlx::Error, name: &str) -> StoreError {
    match &error {
        sqlx::Error::Database(db) if db.is_unique_violation() => {
            StoreError::Conflict(format!("the name `{name}` is taken"))
        }
        _ => StoreError::Database(error),
    }
}

fn changed_since(current: i64, expected: Option<i64>) -> StoreError {
    StoreError::Conflict(match expected {
        Some(expected) => format!("the resource is at version {current}, not {expected}: read it again"),
        None => "the resource changed meanwhile: read it again".to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_store_made_before_mcp_names_keeps_each_name_as_its_mcp_name() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("old.db").display());
        sqlx::any::install_default_drivers();
        {
            // The store as the first migration left it, with a tool set.
            let pool = sqlx::any::AnyPoolOptions::new().max_connections(1).connect(&url).await.unwrap();
            let first = Migrations(&SQLITE.0[..1]);
            sqlx::migrate::Migrator::new(first).await.unwrap().run(&pool).await.unwrap();
            sqlx::query(
                "INSERT INTO tool_sets (id, account_id, workspace_id, profile_id, name, labels, spec, created_by, \
                 created_at, updated_at, version, revision) \
                 VALUES ('toolset_1', 'a', 'w', 'p', 'calc-tools', '{}', '{}', '{}', 't', 't', 1, 1)",
            )
            .execute(&pool)
            .await
            .unwrap();
            pool.close().await;
        }
        let store = Store::open(&url.replace("?mode=rwc", "")).await.unwrap();
        let row = store.get_tool_set("w", "toolset_1").await.unwrap();
        assert_eq!((row.name.as_str(), row.mcp_name.as_str()), ("calc-tools", "calc-tools"));
        assert_eq!(store.workspace_names("w").await.unwrap(), ["calc-tools".to_owned()].into());
    }

    #[test]
    fn the_built_in_migrations_are_the_migration_files() {
        for (database, built_in) in [("sqlite", SQLITE), ("postgres", POSTGRES)] {
            let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations").join(database);
            let mut files: Vec<(i64, String, String)> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|entry| {
                    let path = entry.unwrap().path();
                    let stem = path.file_stem().unwrap().to_str().unwrap().to_owned();
                    let (version, name) = stem.split_once('_').unwrap();
                    (version.parse().unwrap(), name.replace('_', " "), std::fs::read_to_string(&path).unwrap())
                })
                .collect();
            files.sort();
            let built_in: Vec<(i64, String, String)> =
                built_in.0.iter().map(|&(v, d, sql)| (v, d.to_owned(), sql.to_owned())).collect();
            assert_eq!(built_in, files, "{database}: add each file of {} to `Migrations`", dir.display());
        }
    }

    #[test]
    fn a_quota_checked_insert_binds_every_column_then_the_quota() {
        assert_eq!(
            insert_within_quota_sql("tool_sets", TOOL_SET_COLUMNS, "workspace_id", 3),
            format!(
                "INSERT INTO tool_sets ({TOOL_SET_COLUMNS}) SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, \
                 $13, $14, $15, $16 WHERE (SELECT COUNT(*) FROM tool_sets WHERE workspace_id = $3) < $17"
            )
        );
        assert_eq!(
            insert_within_quota_sql("tools", TOOL_COLUMNS, "tool_set_id", 2),
            format!(
                "INSERT INTO tools ({TOOL_COLUMNS}) SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, \
                 $14, $15, $16 WHERE (SELECT COUNT(*) FROM tools WHERE tool_set_id = $2) < $17"
            )
        );
    }
}
