//! Ordinary polling as the store takes and answers it: shard batches, poll outcomes, the stored
//! schedule configuration and ordinary manual triggers ([`crate::store::ScheduleStore`]).

use serde::{Deserialize, Serialize};

use rakuten_types::Timestamp;

use crate::store::{CardScope, NewLog};

/// Ordinary cards taken from one shard of one task type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardBatch {
    /// Shard number (`0..shards`).
    pub shard: u32,
    /// Cards whose ordinary poll was due, with their polling scope read in the same statement
    /// (D-ordinary-scope-read-by-take); their `next_poll_at` already moved one interval ahead.
    pub cards: Vec<(String, CardScope)>,
}

/// The outcome of one ordinary (or ordinary manual trigger) poll; written in batches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PollRecord {
    /// Card.
    pub iccid: String,
    /// Task type.
    pub task_type: String,
    /// The ordinary manual trigger this poll served, if any.
    pub manual_trigger_id: Option<i64>,
    /// Short result (`ok`, an error label, `out_of_polling_scope`, …).
    pub result: String,
    /// Upstream calls made (interaction log rows, `item_id` empty).
    pub logs: Vec<NewLog>,
    /// When the poll ran.
    pub at: Timestamp,
    /// The card's next ordinary poll of this task type.
    pub next_poll_at: Timestamp,
}

/// An ordinary manual trigger request ("poll this card now").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManualTriggerRequest {
    /// Operator (account id).
    pub operator: String,
    /// Card.
    pub iccid: String,
    /// Task types (one queue entry each).
    pub task_types: Vec<String>,
    /// Accepted triggers per operator per UTC day.
    pub daily_quota: u32,
}

/// The ordinary polling schedule's configuration: the shard count and every task type with its
/// interval in seconds — as an instance is configured (`RAKUTEN_POLL_SHARDS`,
/// `RAKUTEN_POLL_TASK_TYPES`) or as the last schedule sync stored it for every instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScheduleConfig {
    /// Shards.
    pub shards: u32,
    /// Task type → interval, seconds.
    pub task_types: std::collections::BTreeMap<String, u64>,
}

impl ScheduleConfig {
    /// An instance's configuration.
    pub fn of(task_types: &crate::domain::TaskTypes, shards: u32) -> Self {
        ScheduleConfig {
            shards,
            task_types: task_types
                .all()
                .iter()
                .map(|t| (t.name.clone(), t.interval.as_secs()))
                .collect(),
        }
    }
}

/// In the settings' own words: `RAKUTEN_POLL_TASK_TYPES=card_status=300,… RAKUTEN_POLL_SHARDS=4`.
impl std::fmt::Display for ScheduleConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RAKUTEN_POLL_TASK_TYPES=")?;
        for (i, (name, secs)) in self.task_types.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            write!(f, "{sep}{name}={secs}")?;
        }
        write!(f, " RAKUTEN_POLL_SHARDS={}", self.shards)
    }
}

/// One accepted ordinary manual trigger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueuedTrigger {
    /// Trigger id.
    pub id: i64,
    /// Card.
    pub iccid: String,
    /// Task type.
    pub task_type: String,
}

/// What an ordinary manual trigger request did (refusals are recorded too).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum ManualTriggerOutcome {
    /// Accepted: one queued trigger per task type.
    Queued {
        /// The triggers.
        triggers: Vec<QueuedTrigger>,
    },
    /// The operator's daily quota does not cover the request.
    QuotaExceeded {
        /// Accepted triggers today (UTC).
        used: u32,
        /// The quota.
        quota: u32,
    },
    /// The card was already triggered for these task types within 24 h.
    Duplicate {
        /// The task types triggered within 24 h.
        task_types: Vec<String>,
    },
}
