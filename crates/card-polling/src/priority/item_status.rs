//! The priority item state machine (spec "优先项尝试次数与出队").
//!
//! ```text
//! pending --claim--> running --success--> completed
//!    ^                  |  \--recoverable failure (attempts < 3)--> pending
//!    |                  |  \--attempts at 3 / business failure / out of scope--> failed
//!    +-- lease takeover-+
//! pending|running --close--> closed      pending|running --validity passed--> expired
//! ```
//! Terminal states never change again; a retrigger creates a new item instead.

use serde::{Deserialize, Serialize};

/// Status of a priority item. `pending` and `running` are the active states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemStatus {
    /// Waiting for its next run (`next_run_at`).
    Pending,
    /// Claimed by an executor holding a 90 s claim lease.
    Running,
    /// Executed successfully; dequeued.
    Completed,
    /// Failed for good (attempts exhausted, business check, out of polling scope); dequeued.
    Failed,
    /// Closed by an operator with a reason; dequeued.
    Closed,
    /// Unfinished past the validity period; dequeued by the expiry job.
    Expired,
}

/// What happens to an item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemEvent {
    /// An executor claims a pending item.
    Claim,
    /// An executor takes over a running item whose claim lease passed.
    TakeOver,
    /// The upstream poll succeeded.
    Succeed,
    /// A recoverable failure below the attempt limit: back to pending.
    Retry,
    /// A failure that dequeues the item.
    Fail,
    /// An operator closes the item.
    Close,
    /// The validity period passed.
    Expire,
}

/// An event that the current status does not allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("priority item in status {from:?} does not allow {event:?}")]
pub struct InvalidTransition {
    /// Status before.
    pub from: ItemStatus,
    /// The refused event.
    pub event: ItemEvent,
}

impl ItemStatus {
    /// Every status, for tables and tests.
    pub const ALL: [ItemStatus; 6] = [
        ItemStatus::Pending,
        ItemStatus::Running,
        ItemStatus::Completed,
        ItemStatus::Failed,
        ItemStatus::Closed,
        ItemStatus::Expired,
    ];

    /// The stored and wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            ItemStatus::Pending => "pending",
            ItemStatus::Running => "running",
            ItemStatus::Completed => "completed",
            ItemStatus::Failed => "failed",
            ItemStatus::Closed => "closed",
            ItemStatus::Expired => "expired",
        }
    }

    /// Parses a stored or wire name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// `pending` or `running`: holds the (card, task type) active slot.
    pub const fn is_active(self) -> bool {
        matches!(self, ItemStatus::Pending | ItemStatus::Running)
    }

    /// The only transition function. The SQL of each transition guards the same `from` states.
    ///
    /// # Errors
    /// [`InvalidTransition`] when `event` is not allowed from `self`.
    pub fn transition(self, event: ItemEvent) -> Result<ItemStatus, InvalidTransition> {
        use ItemEvent as E;
        use ItemStatus as S;
        let next = match (self, event) {
            (S::Pending, E::Claim) | (S::Running, E::TakeOver) => S::Running,
            (S::Running, E::Succeed) => S::Completed,
            (S::Running, E::Retry) => S::Pending,
            (S::Running, E::Fail) => S::Failed,
            (S::Pending | S::Running, E::Close) => S::Closed,
            (S::Pending | S::Running, E::Expire) => S::Expired,
            (from, event) => return Err(InvalidTransition { from, event }),
        };
        Ok(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_states_accept_nothing() {
        let events = [
            ItemEvent::Claim,
            ItemEvent::TakeOver,
            ItemEvent::Succeed,
            ItemEvent::Retry,
            ItemEvent::Fail,
            ItemEvent::Close,
            ItemEvent::Expire,
        ];
        for s in ItemStatus::ALL.into_iter().filter(|s| !s.is_active()) {
            for e in events {
                assert!(s.transition(e).is_err(), "{s:?} {e:?}");
            }
        }
        assert_eq!(
            ItemStatus::Pending.transition(ItemEvent::Claim),
            Ok(ItemStatus::Running)
        );
        assert!(ItemStatus::Pending.transition(ItemEvent::Succeed).is_err());
        for s in ItemStatus::ALL {
            assert_eq!(ItemStatus::parse(s.as_str()), Some(s));
        }
    }
}
