//! `01-cart-add` and `02-cart-check` (§6): the intended line goes into the cart, and the cart
//! must then hold exactly that line.

use rakuten_types::{ErrorCode, OrderState, Outcome};

use super::{Ending, SEQ_CART_ADD, SEQ_CART_CHECK, Stop, TaskRun};
use crate::site::{CartLine, item_text};

impl TaskRun<'_> {
    /// Adds `line` to the cart and checks the cart. `Some(subtotal)` (yen, from the cart page)
    /// when both steps went well; `None` when the task ended here.
    pub(super) async fn cart(&self, line: &CartLine) -> Result<Option<i64>, Stop> {
        // 01 cart add
        let Some(step) = self
            .site_step(
                Some(SEQ_CART_ADD),
                "cart-add",
                true,
                OrderState::Created,
                || self.ctx.site.cart_add(line),
            )
            .await?
        else {
            return Ok(None);
        };
        let detail = format!(
            "added {} × {}",
            line.quantity,
            item_text(line.item_id, line.variant_id.as_deref())
        );
        // Journaled and evidenced, not reported: `in_cart` is reported once, by the last step in
        // that state (03-order-confirm, with the payable amount), so its evidence reference is
        // the same in every run (D-each-state-reported-once).
        self.record_step(
            SEQ_CART_ADD,
            "cart-add",
            OrderState::InCart,
            &step.page,
            detail,
            |r| r.report = false,
        )
        .await?;

        // 02 cart check
        let Some(step) = self
            .site_step(
                Some(SEQ_CART_CHECK),
                "cart-check",
                true,
                OrderState::InCart,
                || self.ctx.site.cart_check(),
            )
            .await?
        else {
            return Ok(None);
        };
        let cart = &step.value;
        let exact = cart.lines.len() == 1
            && cart.lines[0].0 == line.item_id
            && cart.lines[0].1 == line.variant_id
            && cart.lines[0].2 == line.quantity;
        if !exact {
            let held: Vec<String> = cart
                .lines
                .iter()
                .map(|(item, variant, qty, yen)| {
                    format!(
                        "{qty} × {} at {yen} yen",
                        item_text(*item, variant.as_deref())
                    )
                })
                .collect();
            let held = if held.is_empty() {
                "nothing".to_owned()
            } else {
                held.join("; ")
            };
            let msg = format!("cart does not hold exactly the intended line; it holds {held}");
            return self
                .finish(
                    Ending {
                        seq: Some(SEQ_CART_CHECK),
                        step: "cart-check",
                        page: Some(&step.page),
                        state: OrderState::InCart,
                        outcome: Outcome::Failed,
                        code: Some(ErrorCode::SiteUnexpectedPage),
                        detail: msg,
                    },
                    |_| {},
                )
                .await
                .map(|()| None);
        }
        let cart_subtotal = cart.subtotal_yen;
        let detail = format!("cart holds the intended line; subtotal {cart_subtotal} yen");
        self.record_step(
            SEQ_CART_CHECK,
            "cart-check",
            OrderState::InCart,
            &step.page,
            detail,
            |r| r.report = false,
        )
        .await?;
        Ok(Some(cart_subtotal))
    }
}
