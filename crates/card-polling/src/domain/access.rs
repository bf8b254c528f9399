//! Who may do what: every permission and scope rule of the service, once ([`authorize`]). The
//! API's extractors (`http::auth::Allowed`), the console's pages (`console::Signed::allowed`)
//! and the manual writes (`priority::manual`, `manual_trigger`) all ask it, so a read or a write
//! answers the same whichever entry it comes through (D-access-one-rule). The README's table
//! "Who may read and do what" says the same in words.
//!
//! | action | super_admin | platform | agent | enterprise |
//! |---|---|---|---|---|
//! | [`Action::ReadItems`], [`Action::Enqueue`] | with manual trigger permission, every shop | same | same, its shop tree | never |
//! | [`Action::Close`] | with card data permission, every shop | same | never | never |
//! | [`Action::ReadQueues`], [`Action::Administer`] | yes | yes | never | never |
//! | [`Action::ManageAccounts`] | yes | never | never | never |
//! | [`Action::ReadConfig`] | yes | yes | its shop tree | never |
//!
//! The spec: reading priority items carries the manual enqueue's permission ("权限 MUST 与人工入队
//! 一致"), held by any backend account given it, super_admin included; closing needs "具备卡数据
//! 权限的超级管理员与平台账号"; enterprise accounts are refused everywhere.

use super::account::{Account, Role, Scope};

/// What a request wants to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// List and read priority items, their audit trail and carrier calls: the API's list and
    /// detail, the console's items, exceptions and item pages.
    ReadItems,
    /// Manual enqueue, retrigger, the ordinary manual trigger.
    Enqueue,
    /// Close an active item.
    Close,
    /// The queues' state across every shop: `/health` in full, `/metrics`, the last scheduling
    /// cycle, the console overview's depths.
    ReadQueues,
    /// Change the host domain: orders, payments, package activations and polls, card and device
    /// switches, bindings.
    Administer,
    /// Import shops, accounts, cards, devices and bindings; replace or revoke an account's token.
    ManageAccounts,
    /// The service's own configuration (task types) and `/health`'s status line.
    ReadConfig,
}

/// The account may not do this (HTTP 403, the console's 403 page).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("this account may not do this")]
pub struct Denied;

/// Whether `who` may do `action`, and in which scope (the rows it may see or change, pushed down
/// into SQL by the store). Operator-only actions answer [`Scope::All`].
///
/// # Errors
/// [`Denied`].
pub fn authorize(who: &Account, action: Action) -> Result<Scope, Denied> {
    let scope = match who.role {
        Role::SuperAdmin | Role::Platform => Scope::All,
        Role::Agent => who.shop_id.clone().map(Scope::ShopTree).ok_or(Denied)?,
        Role::Enterprise => return Err(Denied),
    };
    let operator = matches!(who.role, Role::SuperAdmin | Role::Platform);
    let allowed = match action {
        Action::ReadItems | Action::Enqueue => who.perm_manual_trigger,
        Action::Close => operator && who.perm_card_data,
        Action::ReadQueues | Action::Administer => operator,
        Action::ManageAccounts => who.role == Role::SuperAdmin,
        Action::ReadConfig => true,
    };
    if allowed { Ok(scope) } else { Err(Denied) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn account(role: Role, manual: bool, card_data: bool) -> Account {
        Account {
            id: "x".into(),
            role,
            shop_id: (role == Role::Agent).then(|| "A".to_owned()),
            perm_manual_trigger: manual,
            perm_card_data: card_data,
        }
    }

    #[test]
    fn permissions_count_for_every_role_and_enterprise_gets_nothing() {
        let sa = |m, d| account(Role::SuperAdmin, m, d);
        assert_eq!(authorize(&sa(true, false), Action::Close), Err(Denied));
        assert_eq!(authorize(&sa(false, true), Action::Close), Ok(Scope::All));
        assert_eq!(authorize(&sa(false, true), Action::ReadItems), Err(Denied));
        let agent = account(Role::Agent, true, true);
        assert_eq!(
            authorize(&agent, Action::ReadItems),
            Ok(Scope::ShopTree("A".into()))
        );
        assert_eq!(authorize(&agent, Action::Close), Err(Denied));
        assert_eq!(authorize(&agent, Action::ReadQueues), Err(Denied));
        let platform = account(Role::Platform, true, true);
        assert_eq!(authorize(&platform, Action::ManageAccounts), Err(Denied));
        let enterprise = account(Role::Enterprise, true, true);
        for action in [
            Action::ReadItems,
            Action::Enqueue,
            Action::Close,
            Action::ReadQueues,
            Action::Administer,
            Action::ManageAccounts,
            Action::ReadConfig,
        ] {
            assert_eq!(authorize(&enterprise, action), Err(Denied), "{action:?}");
        }
    }
}
