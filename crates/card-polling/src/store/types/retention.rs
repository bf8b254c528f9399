//! The history tables the retention job prunes ([`crate::store::RetentionStore`]).

/// A history table the retention job prunes ([`crate::jobs::retention`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PruneTable {
    /// `integration_logs`: rows older than the log retention, unless their item is active.
    InteractionLogs,
    /// `priority_item_events`: audit facts of items that ended before the history retention.
    AuditFacts,
    /// `priority_trigger_events`: the replay memory of items that ended before it.
    TriggerEvents,
    /// `manual_triggers`: ordinary manual triggers requested before it, executed or refused.
    ManualTriggers,
    /// `priority_items` with their `priority_item_sources` rows: ended items whose end is before
    /// the history retention and whose audit facts and trigger events are gone, unless a later
    /// retrigger points at them (D-retention-batches, D-retrigger-predecessor-kept). Counted in items.
    Items,
}

impl PruneTable {
    /// The metric label (`cardpoll_pruned_rows_total{table}`).
    pub fn as_str(self) -> &'static str {
        match self {
            PruneTable::InteractionLogs => "interaction_logs",
            PruneTable::AuditFacts => "audit_facts",
            PruneTable::TriggerEvents => "trigger_events",
            PruneTable::ManualTriggers => "manual_triggers",
            PruneTable::Items => "priority_items",
        }
    }
}
