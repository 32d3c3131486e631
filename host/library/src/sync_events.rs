//! Sync events: what loading each toolset did, as the tool-set service
//! model names it (`SyncStarted`, `SyncCompleted` with `toolsSynced`,
//! `SyncFailed` with `errorType` and a message), and each tool's status
//! (`AVAILABLE` or `FILTERED`).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::time::SystemTime;

use serde::Serialize;

use crate::error::Error;

/// Events kept for [`Registry::sync_events`](crate::Registry::sync_events).
const KEPT: usize = 1024;

/// One sync event of one toolset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ToolsetEvent {
    /// The toolset's id.
    pub tool_set_id: String,
    /// When it happened.
    #[serde(with = "unix_millis")]
    pub at: SystemTime,
    /// What happened.
    pub event: SyncEvent,
}

/// What happened to a toolset's tools.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub enum SyncEvent {
    /// Loading (or connecting, listing) began.
    #[serde(rename_all = "camelCase")]
    SyncStarted {
        /// What is being loaded.
        message: String,
    },
    /// It loaded: its tools are in the registry.
    #[serde(rename_all = "camelCase")]
    SyncCompleted {
        /// A summary.
        message: String,
        /// The tools it has (available or filtered).
        tools_synced: u32,
    },
    /// It did not load: the toolset is not in the registry (or kept what it
    /// had, for a sync that failed to replace it).
    #[serde(rename_all = "camelCase")]
    SyncFailed {
        /// Always `true`.
        error: bool,
        /// What kind of failure: `READ_FAILED`, `LOAD_FAILED`,
        /// `INVALID_CONFIGURATION`, `CONFLICT`, `DESCRIBE_FAILED`,
        /// `INVALID_TOOLS`, `HOST_ERROR`.
        error_type: String,
        /// Why.
        message: String,
    },
}

impl SyncEvent {
    /// Its name: `SyncStarted`, `SyncCompleted` or `SyncFailed`.
    pub fn name(&self) -> &'static str {
        match self {
            SyncEvent::SyncStarted { .. } => "SyncStarted",
            SyncEvent::SyncCompleted { .. } => "SyncCompleted",
            SyncEvent::SyncFailed { .. } => "SyncFailed",
        }
    }

    /// The event of a failure to load.
    pub(crate) fn failed(error: &Error) -> SyncEvent {
        let error_type = match error {
            Error::Read { .. } => "READ_FAILED",
            Error::Load { .. } => "LOAD_FAILED",
            Error::Policy { .. } => "INVALID_CONFIGURATION",
            Error::Registry(_) => "CONFLICT",
            Error::PluginFailed { .. } => "DESCRIBE_FAILED",
            Error::InvalidOutput { .. } | Error::InvalidPlugin { .. } => "INVALID_TOOLS",
            _ => "HOST_ERROR",
        };
        SyncEvent::SyncFailed { error: true, error_type: error_type.to_owned(), message: error.to_string() }
    }
}

/// The status of a tool in the registry, as the service model has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub enum ToolStatus {
    /// Callers see it and may call it.
    #[serde(rename = "TOOL_STATUS_AVAILABLE")]
    Available,
    /// Disabled or left out by a filter: known, not callable.
    #[serde(rename = "TOOL_STATUS_FILTERED")]
    Filtered,
}

impl std::fmt::Display for ToolStatus {
    /// `AVAILABLE` or `FILTERED`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ToolStatus::Available => "AVAILABLE",
            ToolStatus::Filtered => "FILTERED",
        })
    }
}

/// The events of a registry: the recent ones, the last per toolset, and
/// subscribers.
pub(crate) struct SyncLog {
    recent: Mutex<VecDeque<ToolsetEvent>>,
    last: Mutex<BTreeMap<String, ToolsetEvent>>,
    sender: tokio::sync::broadcast::Sender<ToolsetEvent>,
}

impl Default for SyncLog {
    fn default() -> Self {
        SyncLog {
            recent: Mutex::new(VecDeque::new()),
            last: Mutex::new(BTreeMap::new()),
            sender: tokio::sync::broadcast::Sender::new(256),
        }
    }
}

impl SyncLog {
    /// Record an event of `toolset`.
    pub(crate) fn record(&self, toolset: &str, event: SyncEvent) {
        let event = ToolsetEvent { tool_set_id: toolset.to_owned(), at: SystemTime::now(), event };
        {
            let mut recent = self.recent.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            if recent.len() == KEPT {
                recent.pop_front();
            }
            recent.push_back(event.clone());
        }
        if !matches!(event.event, SyncEvent::SyncStarted { .. }) {
            self.last.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).insert(toolset.to_owned(), event.clone());
        }
        // No subscriber is fine.
        let _ = self.sender.send(event);
    }

    pub(crate) fn recent(&self) -> Vec<ToolsetEvent> {
        self.recent.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).iter().cloned().collect()
    }

    pub(crate) fn last(&self) -> Vec<ToolsetEvent> {
        self.last.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).values().cloned().collect()
    }

    pub(crate) fn last_of(&self, toolset: &str) -> Option<ToolsetEvent> {
        self.last.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).get(toolset).cloned()
    }

    pub(crate) fn subscribe(&self) -> tokio::sync::broadcast::Receiver<ToolsetEvent> {
        self.sender.subscribe()
    }
}

/// `SystemTime` as milliseconds since the Unix epoch.
mod unix_millis {
    use std::time::{SystemTime, UNIX_EPOCH};

    pub(super) fn serialize<S: serde::Serializer>(at: &SystemTime, serializer: S) -> Result<S::Ok, S::Error> {
        let millis = at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        serializer.serialize_u64(millis)
    }
}
