//! `03-order-confirm` and the amount guard (§6): the confirm page's payable amount must stay
//! within the limit and its items subtotal must equal the cart's; otherwise nothing is
//! submitted and the task needs a human.

use rakuten_types::{ErrorCode, OrderState, Outcome};

use super::{SEQ_CONFIRM, Stop, TaskRun};
use crate::intent::Intent;
use crate::site::ConfirmView;

impl TaskRun<'_> {
    /// Reads the confirm page and applies the amount guard. `Some(confirm)` when the submit may
    /// go ahead; `None` when the task ended here.
    pub(super) async fn confirm(
        &self,
        intent: &Intent,
        cart_subtotal: i64,
    ) -> Result<Option<ConfirmView>, Stop> {
        let task_id = self.task_id().clone();
        // 03 order confirm
        let Some(step) = self
            .site_step(
                Some(SEQ_CONFIRM),
                "order-confirm",
                true,
                OrderState::InCart,
                || self.ctx.site.order_confirm(),
            )
            .await?
        else {
            return Ok(None);
        };
        let confirm = step.value.clone();
        let detail = format!(
            "payable {} yen (items {} + shipping {}), payment {}",
            confirm.payable_yen, confirm.subtotal_yen, confirm.shipping_yen, confirm.payment_method
        );
        self.record_step(
            SEQ_CONFIRM,
            "order-confirm",
            OrderState::InCart,
            &step.page,
            detail,
            |r| {
                r.payable_yen = Some(confirm.payable_yen);
                r.pay_deadline = confirm.pay_deadline;
                r.payment_method = Some(confirm.payment_method.clone());
            },
        )
        .await?;

        // Amount guard: the confirm page's evidence is the guard's evidence.
        let limit = intent
            .max_total_yen
            .unwrap_or(self.ctx.settings.max_total_yen);
        let guard = if confirm.payable_yen > limit {
            Some(format!(
                "amount guard: payable {} yen exceeds the limit {limit} yen; nothing submitted",
                confirm.payable_yen
            ))
        } else if confirm.subtotal_yen != cart_subtotal {
            Some(format!(
                "amount guard: items subtotal changed between cart ({cart_subtotal} yen) and confirm ({} yen); nothing submitted",
                confirm.subtotal_yen
            ))
        } else {
            None
        };
        if let Some(msg) = guard {
            let mut rec = self.rec("amount-guard", OrderState::InCart);
            rec.finish = Some((
                Outcome::NeedsHuman,
                Some(ErrorCode::AmountOverLimit.as_i32()),
            ));
            rec.detail = Some(msg.clone());
            tracing::warn!(task_id = %task_id, detail = %msg, "amount guard stopped the task");
            // No new page: the report points at 03-order-confirm, already on disk.
            self.ctx
                .journal
                .step_record(&rec, &self.ctx.settings.worker_id)
                .await?;
            self.ctx.flush(&task_id).await?;
            return Ok(None);
        }
        Ok(Some(confirm))
    }
}
