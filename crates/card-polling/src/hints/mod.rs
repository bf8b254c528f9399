//! Execution hint channels (spec "优先调度与执行提示通道") and the ordinary manual trigger queue.
//!
//! Two lanes per task type, under distinct keys: `{prefix}poll:hint:{task_type}` (priority
//! hints: item ids, pushed after an enqueue or merge commits) and `{prefix}poll:manual:{task_type}`
//! (ordinary manual triggers: `{trigger id}:{iccid}`). Both are FIFO lists. The scheduler drains
//! the hint lane first, then the manual lane, every cycle.
//!
//! Hints are advisory: the persisted items decide activity, permission and attempts (the executor
//! claims by conditional update), and a lost hint only delays its item until the scheduler's next
//! recovery read (one per cycle). A failed push is logged and never fails the request that
//! committed the fact.
//!
//! Backends behind [`QueueChannel`]: [`memory::MemoryChannel`] (default, in-process) and
//! [`redis::RedisChannel`] (`--hint-channel redis://…`).

pub mod memory;
pub mod redis;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::Serialize;

use crate::store::{EnqueueAction, EnqueuedItem, QueuedTrigger};

/// A hint channel failure (Redis unreachable, protocol error). Never decides anything.
#[derive(Debug, thiserror::Error)]
#[error("hint channel: {0}")]
pub struct ChannelError(pub String);

/// A FIFO list store keyed by name: the one interface both backends implement.
#[async_trait]
pub trait QueueChannel: Send + Sync + 'static {
    /// Appends values at the tail, in order.
    async fn push(&self, key: &str, values: &[String]) -> Result<(), ChannelError>;
    /// Removes and returns up to `max` values from the head.
    async fn pop(&self, key: &str, max: usize) -> Result<Vec<String>, ChannelError>;
    /// Number of values waiting.
    async fn len(&self, key: &str) -> Result<u64, ChannelError>;
    /// Drops everything under `key` (what a cache restart does; used by tests and operators).
    async fn clear(&self, key: &str) -> Result<(), ChannelError>;
    /// `memory` or `redis`.
    fn backend(&self) -> &'static str;
}

/// The two lanes a channel carries per task type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChannelLane {
    /// Priority hints (item ids).
    Hint,
    /// Ordinary manual triggers.
    Manual,
}

impl ChannelLane {
    const fn word(self) -> &'static str {
        match self {
            ChannelLane::Hint => "hint",
            ChannelLane::Manual => "manual",
        }
    }
}

/// Bound on one push, pop or length read, so a dead Redis never stalls a request or a cycle for
/// long (loopback Redis answers in well under a millisecond).
pub const CHANNEL_TIMEOUT: Duration = Duration::from_millis(500);

/// Bound on connecting to Redis at start.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// The hint and manual lanes over one [`QueueChannel`], with the key prefix.
#[derive(Clone)]
pub struct Hints {
    channel: Arc<dyn QueueChannel>,
    prefix: String,
}

impl std::fmt::Debug for Hints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hints")
            .field("backend", &self.channel.backend())
            .field("prefix", &self.prefix)
            .finish()
    }
}

async fn bounded<T>(
    f: impl std::future::Future<Output = Result<T, ChannelError>>,
) -> Result<T, ChannelError> {
    tokio::time::timeout(CHANNEL_TIMEOUT, f)
        .await
        .unwrap_or_else(|_| Err(ChannelError("timed out".into())))
}

impl Hints {
    /// Lanes over `channel`, keys starting with `prefix`.
    pub fn new(channel: Arc<dyn QueueChannel>, prefix: impl Into<String>) -> Self {
        Hints {
            channel,
            prefix: prefix.into(),
        }
    }

    /// In-process lanes (tests, default).
    pub fn in_memory() -> Self {
        Hints::new(Arc::new(memory::MemoryChannel::default()), "")
    }

    /// The key of a lane: `{prefix}poll:{hint|manual}:{task_type}`.
    pub fn key(&self, lane: ChannelLane, task_type: &str) -> String {
        format!("{}poll:{}:{task_type}", self.prefix, lane.word())
    }

    /// The backend's name.
    pub fn backend(&self) -> &'static str {
        self.channel.backend()
    }

    /// The underlying channel.
    pub fn channel(&self) -> &Arc<dyn QueueChannel> {
        &self.channel
    }

    /// Pushes one hint per created or merged item, after the enqueue committed. Replays push
    /// nothing (nothing changed). Failures are logged: the item is still found by the scheduler's
    /// recovery read.
    pub async fn push_items(&self, items: &[EnqueuedItem]) {
        let mut by_type: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for i in items.iter().filter(|i| i.action != EnqueueAction::Replayed) {
            by_type
                .entry(i.task_type.as_str())
                .or_default()
                .push(i.item_id.to_string());
        }
        for (tt, ids) in by_type {
            let key = self.key(ChannelLane::Hint, tt);
            if let Err(e) = bounded(self.channel.push(&key, &ids)).await {
                tracing::warn!(error = %e, key, "hint push failed; the recovery read will find the items");
            }
        }
    }

    /// Queues accepted ordinary manual triggers on their task types' manual lanes.
    pub async fn push_manual(&self, triggers: &[QueuedTrigger]) {
        let mut by_type: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for t in triggers {
            by_type
                .entry(t.task_type.as_str())
                .or_default()
                .push(format!("{}:{}", t.id, t.iccid));
        }
        for (tt, vals) in by_type {
            let key = self.key(ChannelLane::Manual, tt);
            if let Err(e) = bounded(self.channel.push(&key, &vals)).await {
                tracing::warn!(error = %e, key, "manual trigger push failed; recovered from the database");
            }
        }
    }

    /// Takes up to `max` hinted item ids of a task type (malformed values are dropped).
    ///
    /// # Errors
    /// The channel failed.
    pub async fn take_hints(&self, task_type: &str, max: usize) -> Result<Vec<i64>, ChannelError> {
        let key = self.key(ChannelLane::Hint, task_type);
        let vals = bounded(self.channel.pop(&key, max)).await?;
        Ok(vals.iter().filter_map(|v| v.parse().ok()).collect())
    }

    /// Takes up to `max` manual triggers of a task type as (trigger id, iccid).
    ///
    /// # Errors
    /// The channel failed.
    pub async fn take_manual(
        &self,
        task_type: &str,
        max: usize,
    ) -> Result<Vec<(i64, String)>, ChannelError> {
        let key = self.key(ChannelLane::Manual, task_type);
        let vals = bounded(self.channel.pop(&key, max)).await?;
        Ok(vals
            .iter()
            .filter_map(|v| {
                let (id, iccid) = v.split_once(':')?;
                Some((id.parse().ok()?, iccid.to_owned()))
            })
            .collect())
    }

    /// Values waiting in a lane.
    ///
    /// # Errors
    /// The channel failed.
    pub async fn depth(&self, lane: ChannelLane, task_type: &str) -> Result<u64, ChannelError> {
        bounded(self.channel.len(&self.key(lane, task_type))).await
    }

    /// Drops a lane's content (simulates a lost channel or a cache restart).
    ///
    /// # Errors
    /// The channel failed.
    pub async fn clear(&self, lane: ChannelLane, task_type: &str) -> Result<(), ChannelError> {
        bounded(self.channel.clear(&self.key(lane, task_type))).await
    }
}
