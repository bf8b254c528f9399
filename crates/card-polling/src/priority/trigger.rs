//! Trigger types (spec "优先轮询触发场景与入队事实"): a stable enum stored and sent as text.

use serde::{Deserialize, Serialize};

/// Why a priority item was enqueued. The names are a stable contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TriggerType {
    /// A main package paid and active at once, the asset had no earlier usage record.
    PurchaseActivated,
    /// Like purchase, but the asset already had an earlier usage record (re-purchase).
    RenewalActivated,
    /// A queued main package moved from pending to active (the conditional update hit one row).
    QueueActivated,
    /// An add-on package became active.
    AddonActivated,
    /// The package poll found no valid package while a pending usage record exists.
    NoValidPackage,
    /// An operator enqueued (or retriggered) by hand.
    ManualTrigger,
}

impl TriggerType {
    /// Every trigger type.
    pub const ALL: [TriggerType; 6] = [
        TriggerType::PurchaseActivated,
        TriggerType::RenewalActivated,
        TriggerType::QueueActivated,
        TriggerType::AddonActivated,
        TriggerType::NoValidPackage,
        TriggerType::ManualTrigger,
    ];

    /// The stored and wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            TriggerType::PurchaseActivated => "purchase_activated",
            TriggerType::RenewalActivated => "renewal_activated",
            TriggerType::QueueActivated => "queue_activated",
            TriggerType::AddonActivated => "addon_activated",
            TriggerType::NoValidPackage => "no_valid_package",
            TriggerType::ManualTrigger => "manual_trigger",
        }
    }

    /// Parses a stored or wire name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// The renewal-vs-purchase rule: a main package activated at once is a renewal when the
    /// asset had any usage record before this activation, a purchase otherwise.
    pub const fn for_main_activation(had_earlier_usage: bool) -> Self {
        if had_earlier_usage {
            TriggerType::RenewalActivated
        } else {
            TriggerType::PurchaseActivated
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_rule_holds() {
        for t in TriggerType::ALL {
            assert_eq!(TriggerType::parse(t.as_str()), Some(t));
        }
        assert_eq!(
            TriggerType::for_main_activation(true),
            TriggerType::RenewalActivated
        );
        assert_eq!(
            TriggerType::for_main_activation(false),
            TriggerType::PurchaseActivated
        );
    }
}
