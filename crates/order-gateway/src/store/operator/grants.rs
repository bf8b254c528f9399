//! The lease history's types (table `lease_grants`, D-lease-grant-history): how each grant of a
//! task's lease came about and ended, and the token fingerprint kept instead of the token.

use rakuten_types::Timestamp;

/// The fingerprint of a lease token that the lease history keeps instead of the token: the first
/// 8 hex digits of its SHA-256 (the same form as card-polling's claim fingerprint). Enough to tell
/// grants apart on a page; useless to act with.
pub fn token_fingerprint(token: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(token.as_bytes())[..4]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// How a lease grant came about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantVia {
    /// A worker's poll: a claim of a queued task or a re-grant of its own.
    Poll,
    /// An operator's reclaim of a stale task to a named worker.
    Reclaim,
}

impl GrantVia {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            GrantVia::Poll => "poll",
            GrantVia::Reclaim => "reclaim",
        }
    }

    /// The stored name back; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        [GrantVia::Poll, GrantVia::Reclaim]
            .into_iter()
            .find(|v| v.as_str() == s)
    }
}

/// How a lease grant ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantEnd {
    /// The holder's final report (an outcome) ended the task.
    Reported,
    /// The lease lapsed and the sweeper made the task `stale`.
    Expired,
    /// The same worker polled again while holding it: a new grant replaced this one.
    Regranted,
    /// An operator resolved the task while this grant was open.
    Resolved,
    // No `Cancelled`: an operator may cancel only a queued task (D-resolve-and-cancel), and a queued task
    // never holds a grant — every grant leaves `queued` and nothing returns to it (spec §3, §5).
    // D-lease-grant-history.
}

impl GrantEnd {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            GrantEnd::Reported => "reported",
            GrantEnd::Expired => "expired",
            GrantEnd::Regranted => "regranted",
            GrantEnd::Resolved => "resolved",
        }
    }

    /// The stored name back; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        [
            GrantEnd::Reported,
            GrantEnd::Expired,
            GrantEnd::Regranted,
            GrantEnd::Resolved,
        ]
        .into_iter()
        .find(|v| v.as_str() == s)
    }
}

/// One grant of a task's lease, as the lease history keeps it (table `lease_grants`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseGrantRecord {
    /// The task's `lease_count` right after this grant.
    pub grant_no: i64,
    /// The worker it was granted to.
    pub worker_id: String,
    /// A poll or an operator's reclaim.
    pub via: GrantVia,
    /// [`token_fingerprint`] of the grant's lease token.
    pub token_fp: String,
    /// When it was granted.
    pub granted_at: Timestamp,
    /// When it expires (or expired): moved by each renewal and by clamping.
    pub expires_at: Timestamp,
    /// How often it was renewed.
    pub renewals: i64,
    /// The last renewal, if any.
    pub last_renewed_at: Option<Timestamp>,
    /// When it ended; `None` while open.
    pub ended_at: Option<Timestamp>,
    /// How it ended; `None` while open.
    pub ended_how: Option<GrantEnd>,
}
