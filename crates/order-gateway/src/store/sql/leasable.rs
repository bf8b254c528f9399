//! The SQL conditions under which a queued task may be leased: the lease gate its scope gives it
//! is free, and its deadline has not passed. Both the lease (`tasks/lease.rs`) and the long-poll's
//! "is anything leasable" probe (`reads.rs`) use them, so the two agree on what is leasable.

use crate::settings::LeaseScope;

/// `NOT EXISTS` an active task holding the gate `scope` gives task `t`: any active task for the
/// global gate, an active task of `t`'s site for per-site gates.
pub(crate) fn gate_free(scope: LeaseScope) -> &'static str {
    match scope {
        LeaseScope::Global => {
            "NOT EXISTS (SELECT 1 FROM tasks a WHERE a.status IN ('leased','running'))"
        }
        LeaseScope::Site => {
            "NOT EXISTS (SELECT 1 FROM tasks a WHERE a.status IN ('leased','running') \
             AND a.gate_key = t.site)"
        }
    }
}

/// A queued task `alias` may still be leased at `$n` (now): it has no `not_after`, or the
/// deadline has not passed (`not_after` is the last instant a lease may start). A task past it is
/// never leased, even before the sweeper ends it `expired` (D-task-not-after-expired).
pub(crate) fn before_deadline(alias: &str, n: usize) -> String {
    format!("({alias}.not_after IS NULL OR {alias}.not_after >= ${n})")
}
