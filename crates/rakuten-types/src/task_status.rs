//! The order task state machine (spec §3 and §5): who holds the task and whether it is done.
//!
//! ```text
//! queued ──Lease──> leased ──Report──> running ──Finish──> succeeded | failed | needs_human
//!                     │  ▲                │  ▲   (Finish also allowed straight from leased)
//!                     │  └───Regrant──────┘  │  (same owner asks again: new grant, count + 1)
//!                     └──────Expire──────────┴──> stale ──Reclaim──> leased
//! queued ──SetAside──> needs_human   (the gateway cannot decode the stored row: a poison row)
//! queued ──NotAfterPassed──> expired  (the upstream's deadline passed before any lease; the
//!                                      sweeper's transition, D-task-not-after-expired)
//!
//! Operator actions, each audited in `operator_actions`:
//!   stale | needs_human ──Resolve(succeeded|failed)──> succeeded | failed
//!   queued ──Cancel──> failed
//!   succeeded | failed ──Correct(succeeded|failed)──> succeeded | failed
//!       (only while the latest reported state contradicts the outcome: a late report after the
//!        verdict, D-late-report-contradiction-alert; the store checks that)
//! ```
//!
//! Nothing ever goes back to `queued`: an order may already be placed when a lease lapses (§5).
//! [`TaskStatus::transition`] is the only place that decides what may follow what; storage drivers
//! repeat the same guard in SQL (`UPDATE … WHERE status IN (…)`), so a race loses with a typed
//! conflict instead of a silent no-op.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::OrderState;

/// Who holds a task and whether it is done (§3, left column).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Waiting for a worker.
    Queued,
    /// Handed to a worker, no report yet.
    Leased,
    /// The worker has reported at least once.
    Running,
    /// Terminal: the order went through.
    Succeeded,
    /// Terminal: the worker gave up (nothing or a cancelled order on the site).
    Failed,
    /// Terminal: a human must look (challenge, amount guard, unverifiable recovery).
    NeedsHuman,
    /// The lease lapsed. Never handed out again except by an explicit reclaim (§5).
    Stale,
    /// Terminal: the upstream's `not_after` passed while the task was still queued; it was never
    /// handed to a worker, so nothing was ordered (D-task-not-after-expired). No outcome: no
    /// worker or person concluded anything about an order.
    Expired,
}

/// What happens to a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskEvent {
    /// A worker's long-poll takes a queued task.
    Lease,
    /// The lease holder asks again (crash/restart, lost response): a new grant of the same task.
    Regrant,
    /// A non-terminal report from the holder.
    Report,
    /// A terminal report from the holder.
    Finish(Outcome),
    /// The lease lapsed (sweeper).
    Expire,
    /// An operator hands a stale task to a named worker.
    Reclaim,
    /// The gateway cannot decode a queued task's stored row (a poison row): it is set aside for a
    /// human instead of blocking the queue.
    SetAside,
    /// An operator who checked the site by hand ends a `stale` or `needs_human` task. Only
    /// `succeeded` or `failed`: a person's verdict is final, never "a human must look".
    Resolve(Outcome),
    /// An operator withdraws a task no worker has taken yet.
    Cancel,
    /// An operator gives a new verdict on a task that ended `succeeded` or `failed` while a
    /// report appended after the end contradicts it (D-late-report-contradiction-alert). Only
    /// `succeeded` or `failed`; the store allows it only while the contradiction stands.
    Correct(Outcome),
    /// The upstream's `not_after` passed before any worker leased the task (the sweeper).
    NotAfterPassed,
}

/// The explicit terminal outcome of a task (§4.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The order went through.
    Succeeded,
    /// The worker failed; see the report's detail.
    Failed,
    /// A human must look.
    NeedsHuman,
}

impl Outcome {
    /// The terminal task status this outcome leads to.
    pub const fn status(self) -> TaskStatus {
        match self {
            Outcome::Succeeded => TaskStatus::Succeeded,
            Outcome::Failed => TaskStatus::Failed,
            Outcome::NeedsHuman => TaskStatus::NeedsHuman,
        }
    }

    /// The wire name.
    pub const fn as_str(self) -> &'static str {
        self.status().as_str()
    }

    /// The outcome implied by a terminal report without an explicit `outcome` (§4.5, tightened:
    /// D-report-rules): paid/shipped/delivered → succeeded, cancelled → failed, anything else → `None`
    /// (the request is refused with 422).
    pub const fn implied_by(state: OrderState) -> Option<Outcome> {
        match state {
            OrderState::Paid | OrderState::Shipped | OrderState::Delivered => {
                Some(Outcome::Succeeded)
            }
            OrderState::Cancelled => Some(Outcome::Failed),
            _ => None,
        }
    }

    /// Checks that a verdict fits the order state it is given with, on every path that ends a
    /// task with both: an operator's resolve (the state the person says they saw) and a worker's
    /// terminal report (D-resolve-outcome-must-fit-state, D-report-outcome-must-fit-state). Where
    /// the state implies a verdict ([`Outcome::implied_by`]) the outcome must be that one: a
    /// `paid` order is not a `failed` task, a `cancelled` one not a `succeeded` task (the state
    /// joins the mirror the upstream reads beside the outcome); nor is a `created` or `in_cart`
    /// one, where nothing was ordered yet, a `succeeded` task. `needs_human` is no verdict (a
    /// person must look), so it fits every state; a resolve refuses it on its own.
    ///
    /// # Errors
    /// The message for the caller's 422 (1003).
    pub fn check_fits_state(self, state: Option<OrderState>) -> Result<(), String> {
        if self == Outcome::NeedsHuman {
            return Ok(());
        }
        // Nothing was ordered yet in these, so the purchase cannot have succeeded.
        if let (Outcome::Succeeded, Some(s @ (OrderState::Created | OrderState::InCart))) =
            (self, state)
        {
            return Err(format!(
                "outcome succeeded contradicts state {}: no order was placed in that state",
                s.as_str()
            ));
        }
        match state.and_then(Outcome::implied_by) {
            Some(implied) if implied != self => Err(format!(
                "outcome {} contradicts state {}: an order in that state makes the task {}",
                self.as_str(),
                state.map_or("", OrderState::as_str),
                implied.as_str()
            )),
            _ => Ok(()),
        }
    }
}

impl FromStr for Outcome {
    type Err = UnknownTaskStatus;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "succeeded" => Ok(Outcome::Succeeded),
            "failed" => Ok(Outcome::Failed),
            "needs_human" => Ok(Outcome::NeedsHuman),
            _ => Err(UnknownTaskStatus(s.chars().take(64).collect())),
        }
    }
}

/// A transition the state machine does not allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("task in status {from} cannot take event {event:?}")]
pub struct InvalidTransition {
    /// The status the task was in.
    pub from: TaskStatus,
    /// The event refused.
    pub event: TaskEvent,
}

impl TaskStatus {
    /// Every status.
    pub const ALL: [TaskStatus; 8] = [
        TaskStatus::Queued,
        TaskStatus::Leased,
        TaskStatus::Running,
        TaskStatus::Succeeded,
        TaskStatus::Failed,
        TaskStatus::NeedsHuman,
        TaskStatus::Stale,
        TaskStatus::Expired,
    ];

    /// The single transition function of the order task state machine.
    ///
    /// # Errors
    /// [`InvalidTransition`] for every pair the diagram in the module docs does not draw.
    pub fn transition(self, event: TaskEvent) -> Result<TaskStatus, InvalidTransition> {
        use TaskEvent as E;
        use TaskStatus as S;
        let next = match (self, event) {
            (S::Queued, E::Lease) => S::Leased,
            (S::Leased | S::Running, E::Regrant) => S::Leased,
            (S::Leased | S::Running, E::Report) => S::Running,
            (S::Leased | S::Running, E::Finish(outcome)) => outcome.status(),
            (S::Leased | S::Running, E::Expire) => S::Stale,
            (S::Stale, E::Reclaim) => S::Leased,
            (S::Queued, E::SetAside) => S::NeedsHuman,
            (S::Stale | S::NeedsHuman, E::Resolve(o @ (Outcome::Succeeded | Outcome::Failed))) => {
                o.status()
            }
            (S::Queued, E::Cancel) => S::Failed,
            (S::Succeeded | S::Failed, E::Correct(o @ (Outcome::Succeeded | Outcome::Failed))) => {
                o.status()
            }
            (S::Queued, E::NotAfterPassed) => S::Expired,
            (from, event) => return Err(InvalidTransition { from, event }),
        };
        Ok(next)
    }

    /// `leased` or `running`: the task holds the concurrency gate.
    pub const fn is_active(self) -> bool {
        matches!(self, TaskStatus::Leased | TaskStatus::Running)
    }

    /// `succeeded`, `failed`, `needs_human` or `expired`.
    pub const fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskStatus::Succeeded
                | TaskStatus::Failed
                | TaskStatus::NeedsHuman
                | TaskStatus::Expired
        )
    }

    /// Whether a task in this status carries an [`Outcome`]: the terminal statuses a worker or a
    /// person concluded (`expired` concluded nothing about an order).
    pub const fn has_outcome(self) -> bool {
        matches!(
            self,
            TaskStatus::Succeeded | TaskStatus::Failed | TaskStatus::NeedsHuman
        )
    }

    /// The wire and storage name.
    pub const fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Queued => "queued",
            TaskStatus::Leased => "leased",
            TaskStatus::Running => "running",
            TaskStatus::Succeeded => "succeeded",
            TaskStatus::Failed => "failed",
            TaskStatus::NeedsHuman => "needs_human",
            TaskStatus::Stale => "stale",
            TaskStatus::Expired => "expired",
        }
    }
}

impl fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A status name outside the vocabulary.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown status {0:?}")]
pub struct UnknownTaskStatus(pub String);

impl FromStr for TaskStatus {
    type Err = UnknownTaskStatus;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| UnknownTaskStatus(s.chars().take(64).collect()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_returns_to_queued() {
        let events = [
            TaskEvent::Lease,
            TaskEvent::Regrant,
            TaskEvent::Report,
            TaskEvent::Finish(Outcome::Failed),
            TaskEvent::Expire,
            TaskEvent::Reclaim,
            TaskEvent::SetAside,
            TaskEvent::Resolve(Outcome::Succeeded),
            TaskEvent::Cancel,
            TaskEvent::NotAfterPassed,
        ];
        for from in TaskStatus::ALL {
            for e in events {
                if let Ok(to) = from.transition(e) {
                    assert_ne!(to, TaskStatus::Queued, "{from} --{e:?}--> queued");
                }
            }
        }
    }

    #[test]
    fn expired_lease_goes_stale_and_only_reclaim_leaves_stale() {
        assert_eq!(
            TaskStatus::Running.transition(TaskEvent::Expire),
            Ok(TaskStatus::Stale)
        );
        assert!(TaskStatus::Stale.transition(TaskEvent::Lease).is_err());
        assert_eq!(
            TaskStatus::Stale.transition(TaskEvent::Reclaim),
            Ok(TaskStatus::Leased)
        );
    }

    #[test]
    fn terminal_states_take_no_event() {
        for s in [
            TaskStatus::Succeeded,
            TaskStatus::Failed,
            TaskStatus::NeedsHuman,
            TaskStatus::Expired,
        ] {
            assert!(s.transition(TaskEvent::Report).is_err());
            assert!(s.transition(TaskEvent::Expire).is_err());
            assert!(s.transition(TaskEvent::Reclaim).is_err());
            assert!(s.transition(TaskEvent::NotAfterPassed).is_err());
        }
        assert!(
            TaskStatus::Expired
                .transition(TaskEvent::Resolve(Outcome::Failed))
                .is_err()
        );
        assert!(TaskStatus::Expired.transition(TaskEvent::Cancel).is_err());
    }

    #[test]
    fn only_a_queued_task_expires_by_its_not_after() {
        for from in TaskStatus::ALL {
            assert_eq!(
                from.transition(TaskEvent::NotAfterPassed).ok(),
                (from == TaskStatus::Queued).then_some(TaskStatus::Expired),
                "{from}"
            );
        }
        assert!(TaskStatus::Expired.is_terminal());
        assert!(!TaskStatus::Expired.has_outcome());
    }

    #[test]
    fn operators_resolve_only_stale_or_needs_human_and_cancel_only_queued() {
        for from in TaskStatus::ALL {
            let resolvable = matches!(from, TaskStatus::Stale | TaskStatus::NeedsHuman);
            for o in [Outcome::Succeeded, Outcome::Failed] {
                assert_eq!(
                    from.transition(TaskEvent::Resolve(o)).is_ok(),
                    resolvable,
                    "{from} resolve {o:?}"
                );
            }
            assert!(
                from.transition(TaskEvent::Resolve(Outcome::NeedsHuman))
                    .is_err()
            );
            assert_eq!(
                from.transition(TaskEvent::Cancel).ok(),
                (from == TaskStatus::Queued).then_some(TaskStatus::Failed)
            );
        }
    }

    #[test]
    fn implied_outcomes_follow_the_issue() {
        assert_eq!(
            Outcome::implied_by(OrderState::Paid),
            Some(Outcome::Succeeded)
        );
        assert_eq!(
            Outcome::implied_by(OrderState::Cancelled),
            Some(Outcome::Failed)
        );
        assert_eq!(Outcome::implied_by(OrderState::AwaitingPayment), None);
        assert_eq!(
            Outcome::Failed
                .check_fits_state(Some(OrderState::Paid))
                .unwrap_err(),
            "outcome failed contradicts state paid: an order in that state makes the task succeeded"
        );
        assert!(
            Outcome::Succeeded
                .check_fits_state(Some(OrderState::Cancelled))
                .is_err()
        );
        assert!(
            Outcome::Failed
                .check_fits_state(Some(OrderState::Cancelled))
                .is_ok()
        );
        assert!(
            Outcome::Succeeded
                .check_fits_state(Some(OrderState::InCart))
                .is_err()
        );
        assert!(
            Outcome::Succeeded
                .check_fits_state(Some(OrderState::AwaitingPayment))
                .is_ok()
        );
        assert!(
            Outcome::Failed
                .check_fits_state(Some(OrderState::InCart))
                .is_ok()
        );
        assert!(
            Outcome::Succeeded
                .check_fits_state(Some(OrderState::Ordered))
                .is_ok()
        );
        assert!(Outcome::Succeeded.check_fits_state(None).is_ok());
    }
}
