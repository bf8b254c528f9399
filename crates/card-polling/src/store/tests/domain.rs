//! The host domain in the store: payments, bindings, triggers and close, and when a package poll
//! writes.

use super::*;

both!(host_domain_payments_bindings_triggers_and_close,);

async fn host_domain_payments_bindings_triggers_and_close(h: &Harness) {
    use crate::domain::TokenHash;
    use crate::domain::account::Role;
    use crate::domain::asset::{BindingRow, DeviceRow};
    use crate::domain::package::{OrderStatus, PackageKind, PaymentStatus};
    use crate::store::{
        AccountImport, CardScope, ManualTriggerOutcome, ManualTriggerRequest, PaymentCallback,
    };

    // Accounts and devices.
    let batch = ImportBatch {
        accounts: vec![AccountImport {
            id: "ops".into(),
            role: Role::Platform,
            shop_id: None,
            token: "ops-token-0123456789".into(),
            perm_manual_trigger: true,
            perm_card_data: false,
        }],
        devices: vec![DeviceRow {
            device_no: "D1".into(),
            shop_id: "s1".into(),
            polling_enabled: true,
            reported_slot_iccid: None,
        }],
        ..Default::default()
    };
    h.store.domain_import(&batch, h.now()).await.unwrap();
    let acc = h
        .store
        .account_find_by_token(&TokenHash::of("ops-token-0123456789"))
        .await
        .unwrap()
        .expect("account");
    assert_eq!(acc.id, "ops");
    assert!(acc.perm_manual_trigger && !acc.perm_card_data);
    h.store
        .binding_upsert(&BindingRow {
            device_no: "D1".into(),
            iccid: "89860000".into(),
            active: true,
        })
        .await
        .unwrap();
    assert_eq!(
        h.store.card_polling_scope("89860000").await.unwrap(),
        CardScope::InScope { stop_locked: false }
    );
    h.store.device_set_polling("D1", false).await.unwrap();
    assert_eq!(
        h.store.card_polling_scope("89860000").await.unwrap(),
        CardScope::DevicePollingOff
    );
    h.store.card_set_stop_lock("89860001", true).await.unwrap();
    assert_eq!(
        h.store.card_polling_scope("89860001").await.unwrap(),
        CardScope::InScope { stop_locked: true }
    );
    h.store
        .device_report_slot("D1", Some("89860000"))
        .await
        .unwrap();

    // A paid main package on a card: a usage record and items in the same transaction.
    let order = h
        .store
        .order_create("O1", &card("89860002"), PackageKind::Main, h.now())
        .await
        .unwrap();
    assert_eq!(order.status, OrderStatus::Unpaid);
    let types = vec!["card_status".to_owned(), "package".to_owned()];
    let cb = PaymentCallback {
        payment_id: "P1".into(),
        order_id: "O1".into(),
        status: PaymentStatus::Paid,
    };
    let paid = h.store.payment_apply(&cb, &types, h.now()).await.unwrap();
    assert_eq!(paid.status, OrderStatus::Paid);
    assert!(!paid.replayed && paid.usage_active);
    assert_eq!(paid.items.len(), 2);
    let again = h.store.payment_apply(&cb, &types, h.now()).await.unwrap();
    assert!(again.replayed);
    let poll = h
        .store
        .package_poll_asset(&card("89860002"), &types, h.now())
        .await
        .unwrap();
    assert!(!poll.no_valid_package);

    // Ordinary manual triggers: quota, 24 h dedupe, recovery read.
    let req = ManualTriggerRequest {
        operator: "ops".into(),
        iccid: "89860003".into(),
        task_types: vec!["card_status".into()],
        daily_quota: 5,
    };
    match h
        .store
        .manual_trigger_request(&Scope::All, &req, h.now())
        .await
        .unwrap()
    {
        ManualTriggerOutcome::Queued { triggers } => assert_eq!(triggers.len(), 1),
        o => panic!("{o:?}"),
    }
    assert!(matches!(
        h.store
            .manual_trigger_request(&Scope::All, &req, h.now())
            .await
            .unwrap(),
        ManualTriggerOutcome::Duplicate { .. }
    ));
    let queued = h
        .store
        .manual_trigger_queued("card_status", h.now(), 10)
        .await
        .unwrap();
    assert_eq!(queued.len(), 1);

    // Close an active item; out of scope is not found.
    let id = paid.items[0].item_id;
    let other = Scope::ShopTree("nope".into());
    assert!(matches!(
        h.store.item_close(&other, id, "ops", "why", h.now()).await,
        Err(StoreError::NotFound)
    ));
    h.store
        .item_close(&Scope::All, id, "ops", "done by hand", h.now())
        .await
        .unwrap();
    let d = h.store.item_get(&Scope::All, id).await.unwrap().unwrap();
    assert_eq!(d.item.status, ItemStatus::Closed);
    assert_eq!(d.item.closed_by.as_deref(), Some("ops"));

    // Deleting a card keeps its items.
    h.store.card_delete("89860002").await.unwrap();
    assert_eq!(
        h.store.card_polling_scope("89860002").await.unwrap(),
        CardScope::Missing
    );
    assert!(h.store.item_get(&Scope::All, id).await.unwrap().is_some());
    assert!(matches!(
        h.store.card_delete("89860002").await,
        Err(StoreError::NotFound)
    ));
}

/// D-package-poll-verdict: a package poll writes only when it has something to change.
#[test]
fn a_package_poll_writes_only_for_a_lapsed_usage_or_a_waiting_one_without_a_valid_main() {
    use crate::store::PackageState;
    let state = |lapsed_usage, valid_main, pending_usage| PackageState {
        asset: card("89860000"),
        lapsed_usage,
        valid_main,
        pending_usage,
    };
    // (lapsed, valid main, pending) → needs the write transition
    for (l, v, p, write) in [
        (false, true, false, false),
        (false, true, true, false),
        (false, false, false, false),
        (false, false, true, true),
        (true, true, false, true),
        (true, false, false, true),
    ] {
        assert_eq!(state(l, v, p).needs_write(), write, "{l} {v} {p}");
    }
}
