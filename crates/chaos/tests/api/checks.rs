//! The checks catch what they are for, on hand-made evidence (so that a passing chaos run means
//! something).

use chaos::checks::{Evidence, ShopSubmission, ViolationKind, check};
use chaos::proxy::ObservedAck;
use rakuten_types::order::{ReportView, TaskDetail};
use rakuten_types::{OrderState, Outcome, TaskId, TaskStatus, Timestamp};

fn ts() -> Timestamp {
    Timestamp::parse("2026-11-29T00:00:00.000Z").unwrap()
}

fn task(id: &str, status: TaskStatus, history: Vec<ReportView>) -> TaskDetail {
    TaskDetail {
        task_id: TaskId::parse(id).unwrap(),
        site: "rakuten".into(),
        intent: serde_json::json!({}).into(),
        intent_bytes: 2,
        status,
        lease_owner: None,
        lease_expires_at: None,
        lease_count: 1,
        outcome: match status {
            TaskStatus::Succeeded => Some(Outcome::Succeeded),
            TaskStatus::Failed => Some(Outcome::Failed),
            TaskStatus::NeedsHuman => Some(Outcome::NeedsHuman),
            _ => None,
        },
        latest_state: history.last().map(|r| r.state),
        created_at: ts(),
        updated_at: ts(),
        not_after: None,
        set_aside_reason: None,
        history,
        operator_actions: Vec::new(),
        evidence_queries: Vec::new(),
    }
}

fn report(state: OrderState, order: Option<&str>, detail: Option<&str>) -> ReportView {
    ReportView {
        state,
        payable_yen: None,
        pay_deadline: None,
        site_order_id: order.map(str::to_owned),
        evidence_ref: None,
        detail: detail.map(str::to_owned),
        error_code: None,
        worker_id: None,
        operator: None,
        reported_at: ts(),
    }
}

fn sub(seq: u64, order: &str, note: &str) -> ShopSubmission {
    ShopSubmission {
        seq,
        order_number: order.into(),
        item_ids: vec![1001],
        note: Some(note.into()),
        dropped: false,
    }
}

fn kinds(ev: &Evidence) -> Vec<ViolationKind> {
    let mut k: Vec<_> = check(ev).violations.iter().map(|v| v.kind).collect();
    k.sort();
    k
}

fn clean() -> Evidence {
    let mut ev = Evidence {
        submitted: vec!["t1".into(), "t2".into()],
        items: [("t1".to_owned(), 1001), ("t2".to_owned(), 1001)].into(),
        shop: vec![sub(1, "o-1", "t1")],
        ..Evidence::default()
    };
    ev.gateway.insert(
        "t1".into(),
        task(
            "t1",
            TaskStatus::Succeeded,
            vec![
                report(OrderState::Ordered, Some("o-1"), None),
                report(OrderState::Paid, Some("o-1"), None),
            ],
        ),
    );
    ev.gateway.insert(
        "t2".into(),
        task(
            "t2",
            TaskStatus::NeedsHuman,
            vec![report(OrderState::InCart, None, Some("amount guard"))],
        ),
    );
    ev.proxy_acks.push(ObservedAck {
        task_id: "t1".into(),
        state: "ordered".into(),
        site_order_id: Some("o-1".into()),
    });
    ev.journal_acks.push(("t1".into(), "paid".into()));
    ev
}

#[test]
fn consistent_evidence_has_no_violation() {
    assert_eq!(kinds(&clean()), vec![]);
}

#[test]
fn a_second_shop_order_for_one_task_is_a_duplicate() {
    let mut ev = clean();
    ev.shop.push(sub(2, "o-2", "t1"));
    let f = check(&ev);
    assert_eq!(f.duplicates, 1);
    assert!(kinds(&ev).contains(&ViolationKind::DuplicateSubmission));
}

#[test]
fn an_acknowledged_report_missing_from_the_mirror_is_lost() {
    let mut ev = clean();
    ev.journal_acks.push(("t1".into(), "shipped".into()));
    let f = check(&ev);
    assert_eq!(f.lost_reports, 1);
    assert_eq!(kinds(&ev), vec![ViolationKind::LostReport]);
}

#[test]
fn a_shop_order_unknown_to_the_gateway_is_flagged_unless_a_human_has_it() {
    let mut ev = clean();
    ev.shop.push(sub(2, "o-2", "t2"));
    // t2 is needs_human: allowed.
    assert_eq!(kinds(&ev), vec![]);
    ev.gateway.get_mut("t2").unwrap().status = TaskStatus::Failed;
    assert_eq!(kinds(&ev), vec![ViolationKind::OrderUnknownToGateway]);
}

#[test]
fn a_task_left_running_is_stuck_and_needs_human_needs_a_reason() {
    let mut ev = clean();
    ev.gateway.get_mut("t1").unwrap().status = TaskStatus::Running;
    ev.gateway.get_mut("t2").unwrap().history[0].detail = None;
    assert_eq!(
        kinds(&ev),
        vec![
            ViolationKind::StuckTask,
            ViolationKind::NeedsHumanWithoutReason
        ]
    );
}

#[test]
fn success_without_a_shop_order_is_a_phantom() {
    let mut ev = clean();
    ev.shop.clear();
    assert!(kinds(&ev).contains(&ViolationKind::PhantomOrder));
}

#[test]
fn an_order_with_a_leftover_cart_line_has_the_wrong_content() {
    let mut ev = clean();
    ev.shop[0].item_ids = vec![1001, 1002];
    assert_eq!(kinds(&ev), vec![ViolationKind::WrongOrderContent]);
}
