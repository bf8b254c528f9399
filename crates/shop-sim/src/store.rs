//! The shop's in-memory state: catalog, the account's cart, orders, and the submission log.
//! One mutex: the shop is a test double, throughput does not matter, consistency does.

use std::io::Write;
use std::sync::Mutex;
use std::time::Duration;

use rakuten_types::Timestamp;
use serde::{Deserialize, Serialize};

use crate::catalog::{self, Item};
use crate::config::{Faults, PaymentMethod, ShopConfig};

/// Flat shipping fee, yen, charged below [`FREE_SHIPPING_FROM_YEN`].
pub const SHIPPING_YEN: i64 = 500;
/// Subtotal from which shipping is free, yen.
pub const FREE_SHIPPING_FROM_YEN: i64 = 3980;
/// Convenience-store payment deadline after the order (3 days, as §4.5 notes).
pub const KONBINI_DEADLINE: Duration = Duration::from_secs(3 * 24 * 3600);

/// A line of the cart.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CartLine {
    /// Item id.
    pub item_id: i64,
    /// Item name.
    pub item_name: String,
    /// Item URL.
    pub item_url: String,
    /// Variant, if the item has variants.
    pub variant_id: Option<String>,
    /// Units.
    pub quantity: i64,
    /// Unit price, yen: the price when the line was added (cart) or now (confirm).
    pub unit_price_yen: i64,
    /// `quantity * unit_price_yen`.
    pub line_total_yen: i64,
}

/// Where an order stands, the shop's own vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SimOrderStatus {
    /// Accepted, unpaid (card payment not done yet).
    Ordered,
    /// Waiting for a convenience-store payment.
    AwaitingPayment,
    /// Paid, being prepared.
    Paid,
    /// Shipped.
    Shipped,
    /// Delivered.
    Delivered,
    /// Cancelled.
    Cancelled,
}

impl SimOrderStatus {
    /// The delivery-stage label the order pages show (the labels of the real progress bar).
    pub const fn stage_label(self) -> &'static str {
        match self {
            SimOrderStatus::Ordered => "注文確認",
            SimOrderStatus::AwaitingPayment => "お支払い待ち",
            SimOrderStatus::Paid => "発送準備中",
            SimOrderStatus::Shipped => "出荷",
            SimOrderStatus::Delivered => "配達完了",
            SimOrderStatus::Cancelled => "キャンセル",
        }
    }
}

/// An order.
#[derive(Debug, Clone, Serialize)]
pub struct Order {
    /// Site order number `{shop_id}-{YYYYMMDD}-{10 digits}`.
    pub order_number: String,
    /// When it was created.
    pub order_date: Timestamp,
    /// Shop id.
    pub shop_id: i64,
    /// Shop name.
    pub shop_name: String,
    /// What was ordered.
    pub lines: Vec<CartLine>,
    /// Sum of lines, yen.
    pub subtotal_yen: i64,
    /// Shipping, yen.
    pub shipping_yen: i64,
    /// Total to pay, yen.
    pub payable_yen: i64,
    /// Payment method.
    pub payment_method: PaymentMethod,
    /// Payment deadline (convenience-store payment only).
    pub pay_deadline: Option<Timestamp>,
    /// Current status.
    pub status: SimOrderStatus,
    /// Buyer's remark (備考欄); the worker writes its task id here.
    pub note: Option<String>,
}

/// One `POST /order/submit` that created an order (the log tests count).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Submission {
    /// 1, 2, 3…
    pub seq: u64,
    /// When.
    pub at: Timestamp,
    /// The order created.
    pub order_number: String,
    /// Item ids ordered.
    pub item_ids: Vec<i64>,
    /// Payable amount, yen.
    pub payable_yen: i64,
    /// The buyer's remark (the worker's task id).
    pub note: Option<String>,
    /// Whether the connection was broken after creating the order (fault).
    pub dropped: bool,
}

/// Mutable shop state.
#[derive(Debug)]
pub struct Inner {
    /// Items.
    pub items: Vec<Item>,
    /// The account's cart.
    pub cart: Vec<CartLine>,
    /// Orders, oldest first.
    pub orders: Vec<Order>,
    /// Every submission, oldest first.
    pub submissions: Vec<Submission>,
    /// Active faults.
    pub faults: Faults,
    next_order_seq: u64,
}

/// The shop: config plus state.
#[derive(Debug)]
pub struct Shop {
    /// Configuration.
    pub config: ShopConfig,
    /// State.
    pub inner: Mutex<Inner>,
}

/// Why a shop action was refused; rendered as an error page.
#[derive(Debug, thiserror::Error)]
pub enum ShopError {
    /// Unknown item.
    #[error("商品が見つかりません (item not found)")]
    ItemNotFound,
    /// Variant missing or unknown.
    #[error("バリエーションを選択してください (variant missing or unknown)")]
    BadVariant,
    /// Quantity out of 1..=99.
    #[error("数量が不正です (quantity must be 1..=99)")]
    BadQuantity,
    /// Not enough stock.
    #[error("在庫が不足しています (out of stock)")]
    OutOfStock,
    /// Cart empty.
    #[error("買い物かごは空です (cart is empty)")]
    CartEmpty,
    /// The payable amount moved since the confirm page.
    #[error("金額が変更されました (payable changed: expected {expected}, now {actual})")]
    PriceChanged {
        /// What the client confirmed.
        expected: i64,
        /// What it is now.
        actual: i64,
    },
    /// No such order.
    #[error("注文が見つかりません (order not found)")]
    OrderNotFound,
    /// The order cannot be paid in its status.
    #[error("この注文は支払いできません (order status {0:?} cannot be paid)")]
    NotPayable(SimOrderStatus),
}

/// A past order to seed (`POST /admin/orders/seed`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedOrder {
    /// When it was ordered.
    pub order_date: Timestamp,
    /// Item code, default `sample-tea`.
    #[serde(default)]
    pub item_code: Option<String>,
    /// Status, default `delivered`.
    #[serde(default)]
    pub status: Option<SimOrderStatus>,
}

/// The confirm page's numbers.
#[derive(Debug, Clone, Serialize)]
pub struct Confirm {
    /// Lines at current prices.
    pub lines: Vec<CartLine>,
    /// Subtotal, yen.
    pub subtotal_yen: i64,
    /// Shipping, yen.
    pub shipping_yen: i64,
    /// Total payable, yen.
    pub payable_yen: i64,
    /// Payment method.
    pub payment_method: PaymentMethod,
    /// Deadline if the order were placed now (konbini only).
    pub pay_deadline: Option<Timestamp>,
}

/// What paying did.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum PayResult {
    /// Paid.
    Paid,
    /// A 3-D Secure challenge must be completed by a human; nothing was charged.
    ChallengeRequired {
        /// The challenge kind.
        challenge: String,
    },
    /// Convenience-store payment: pay at the store before the deadline.
    AwaitingPayment {
        /// Deadline.
        pay_deadline: Option<Timestamp>,
        /// Payment slip number (払込票番号).
        slip_number: String,
    },
}

impl Shop {
    /// A fresh shop with the seed catalog, empty cart and no orders.
    pub fn new(config: ShopConfig) -> Self {
        let faults = config.faults.clone();
        Shop {
            config,
            inner: Mutex::new(Inner {
                items: catalog::seed(),
                cart: Vec::new(),
                orders: Vec::new(),
                submissions: Vec::new(),
                faults,
                next_order_seq: 1,
            }),
        }
    }

    /// Locks the state (a poisoned lock is still usable: every write is a whole-value change).
    pub fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Current faults.
    pub fn faults(&self) -> Faults {
        self.lock().faults.clone()
    }

    /// Now, from the configured clock.
    pub fn now(&self) -> Timestamp {
        self.config.clock.now()
    }

    /// Sets the cart line for (item, variant) to `quantity` (idempotent: adding twice does not
    /// double it).
    ///
    /// # Errors
    /// Unknown item or variant, bad quantity, out of stock.
    pub fn cart_add(
        &self,
        item_id: i64,
        variant_id: Option<String>,
        quantity: i64,
    ) -> Result<Vec<CartLine>, ShopError> {
        let mut g = self.lock();
        let item = g
            .items
            .iter()
            .find(|i| i.item_id == item_id)
            .cloned()
            .ok_or(ShopError::ItemNotFound)?;
        check_variant(&item, variant_id.as_deref())?;
        if !(1..=99).contains(&quantity) {
            return Err(ShopError::BadQuantity);
        }
        if item.stock < quantity {
            return Err(ShopError::OutOfStock);
        }
        let line = CartLine {
            item_id,
            item_name: item.name.clone(),
            item_url: item.url.clone(),
            variant_id: variant_id.clone(),
            quantity,
            unit_price_yen: item.price_yen,
            line_total_yen: item.price_yen * quantity,
        };
        match g
            .cart
            .iter_mut()
            .find(|l| l.item_id == item_id && l.variant_id == variant_id)
        {
            Some(existing) => *existing = line,
            None => g.cart.push(line),
        }
        Ok(g.cart.clone())
    }

    /// Empties the cart.
    pub fn cart_clear(&self) {
        self.lock().cart.clear();
    }

    /// The confirm page for the current cart at current prices (plus the price-change fault).
    ///
    /// # Errors
    /// Empty cart.
    pub fn confirm(&self) -> Result<Confirm, ShopError> {
        let g = self.lock();
        self.confirm_locked(&g)
    }

    fn confirm_locked(&self, g: &Inner) -> Result<Confirm, ShopError> {
        if g.cart.is_empty() {
            return Err(ShopError::CartEmpty);
        }
        let lines: Vec<CartLine> = g
            .cart
            .iter()
            .map(|l| {
                let base = g
                    .items
                    .iter()
                    .find(|i| i.item_id == l.item_id)
                    .map_or(l.unit_price_yen, |i| i.price_yen);
                let unit = base + g.faults.price_change_yen;
                CartLine {
                    unit_price_yen: unit,
                    line_total_yen: unit * l.quantity,
                    ..l.clone()
                }
            })
            .collect();
        let subtotal_yen: i64 = lines.iter().map(|l| l.line_total_yen).sum();
        let shipping_yen = if subtotal_yen >= FREE_SHIPPING_FROM_YEN {
            0
        } else {
            SHIPPING_YEN
        };
        let payment_method = self.config.payment_method;
        Ok(Confirm {
            lines,
            subtotal_yen,
            shipping_yen,
            payable_yen: subtotal_yen + shipping_yen,
            payment_method,
            pay_deadline: (payment_method == PaymentMethod::Konbini)
                .then(|| self.now().plus(KONBINI_DEADLINE)),
        })
    }

    /// Places the order for the current cart if the payable amount is still `expected_payable_yen`;
    /// logs the submission (memory and JSONL file) before answering.
    ///
    /// # Errors
    /// Empty cart, price changed, out of stock.
    pub fn submit(
        &self,
        expected_payable_yen: i64,
        note: Option<String>,
        dropped: bool,
    ) -> Result<Order, ShopError> {
        let mut g = self.lock();
        let confirm = self.confirm_locked(&g)?;
        if confirm.payable_yen != expected_payable_yen {
            return Err(ShopError::PriceChanged {
                expected: expected_payable_yen,
                actual: confirm.payable_yen,
            });
        }
        for l in &confirm.lines {
            let item = g
                .items
                .iter()
                .find(|i| i.item_id == l.item_id)
                .ok_or(ShopError::ItemNotFound)?;
            if item.stock < l.quantity {
                return Err(ShopError::OutOfStock);
            }
        }
        for l in &confirm.lines {
            if let Some(item) = g.items.iter_mut().find(|i| i.item_id == l.item_id) {
                item.stock -= l.quantity;
            }
        }
        let now = self.now();
        let seq = g.next_order_seq;
        g.next_order_seq += 1;
        let jst = now.plus(Duration::from_secs(9 * 3600)).to_rfc3339();
        let ymd: String = jst[..10].chars().filter(|c| *c != '-').collect();
        let order = Order {
            order_number: format!("{}-{ymd}-{seq:010}", catalog::SHOP_ID),
            order_date: now,
            shop_id: catalog::SHOP_ID,
            shop_name: catalog::SHOP_NAME.into(),
            lines: confirm.lines.clone(),
            subtotal_yen: confirm.subtotal_yen,
            shipping_yen: confirm.shipping_yen,
            payable_yen: confirm.payable_yen,
            payment_method: confirm.payment_method,
            pay_deadline: confirm.pay_deadline,
            status: match confirm.payment_method {
                PaymentMethod::CreditCard => SimOrderStatus::Ordered,
                PaymentMethod::Konbini => SimOrderStatus::AwaitingPayment,
            },
            note,
        };
        g.cart.clear();
        g.orders.push(order.clone());
        let sub = Submission {
            seq: g.submissions.len() as u64 + 1,
            at: now,
            order_number: order.order_number.clone(),
            item_ids: order.lines.iter().map(|l| l.item_id).collect(),
            payable_yen: order.payable_yen,
            note: order.note.clone(),
            dropped,
        };
        g.submissions.push(sub.clone());
        if let Some(path) = &self.config.submission_log {
            // The log exists so that tests can count submissions across restarts of the worker:
            // append and flush before the client can see the answer.
            let line = serde_json::to_string(&sub).unwrap_or_default();
            let res = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .and_then(|mut f| {
                    writeln!(f, "{line}")?;
                    f.sync_data()
                });
            if let Err(e) = res {
                tracing::error!(error = %e, path = %path.display(), "cannot append to the submission log");
            }
        }
        tracing::info!(order_number = %order.order_number, payable_yen = order.payable_yen, "order submitted");
        Ok(order)
    }

    /// Pays an order.
    ///
    /// # Errors
    /// Unknown order, or an order that is not waiting for payment.
    pub fn pay(&self, order_number: &str) -> Result<(Order, PayResult), ShopError> {
        let mut g = self.lock();
        let three_ds = g.faults.three_d_secure;
        let order = g
            .orders
            .iter_mut()
            .find(|o| o.order_number == order_number)
            .ok_or(ShopError::OrderNotFound)?;
        let result = match (order.status, order.payment_method) {
            (SimOrderStatus::AwaitingPayment, PaymentMethod::Konbini) => {
                PayResult::AwaitingPayment {
                    pay_deadline: order.pay_deadline,
                    slip_number: format!("{:08}", order.payable_yen * 7 % 100_000_000),
                }
            }
            (SimOrderStatus::Ordered, _) if three_ds => PayResult::ChallengeRequired {
                challenge: "3d_secure".into(),
            },
            (SimOrderStatus::Ordered, _) => {
                order.status = SimOrderStatus::Paid;
                PayResult::Paid
            }
            (s, _) => return Err(ShopError::NotPayable(s)),
        };
        Ok((order.clone(), result))
    }

    /// One order by number.
    pub fn order(&self, order_number: &str) -> Option<Order> {
        self.lock()
            .orders
            .iter()
            .find(|o| o.order_number == order_number)
            .cloned()
    }

    /// Sets an order's status (admin; simulates shipping, delivery, cancellation, konbini payment).
    ///
    /// # Errors
    /// Unknown order.
    pub fn set_status(
        &self,
        order_number: &str,
        status: SimOrderStatus,
    ) -> Result<Order, ShopError> {
        let mut g = self.lock();
        let o = g
            .orders
            .iter_mut()
            .find(|o| o.order_number == order_number)
            .ok_or(ShopError::OrderNotFound)?;
        o.status = status;
        Ok(o.clone())
    }

    /// Adds past orders (admin seeding, for paging tests): each gets the next order number,
    /// `order_date` as given, one line of `item_code` (default `sample-tea`) and `status`
    /// (default `delivered`). Not counted as submissions. The list is kept in date order.
    ///
    /// # Errors
    /// An unknown item code.
    pub fn seed_orders(&self, seeds: Vec<SeedOrder>) -> Result<Vec<String>, ShopError> {
        let mut g = self.lock();
        let mut numbers = Vec::with_capacity(seeds.len());
        for s in seeds {
            let code = s.item_code.as_deref().unwrap_or("sample-tea");
            let item = g
                .items
                .iter()
                .find(|i| i.item_code == code)
                .cloned()
                .ok_or(ShopError::ItemNotFound)?;
            let seq = g.next_order_seq;
            g.next_order_seq += 1;
            let jst = s
                .order_date
                .plus(Duration::from_secs(9 * 3600))
                .to_rfc3339();
            let ymd: String = jst[..10].chars().filter(|c| *c != '-').collect();
            let line = CartLine {
                item_id: item.item_id,
                item_name: item.name.clone(),
                item_url: item.url.clone(),
                variant_id: item.variants.first().cloned(),
                quantity: 1,
                unit_price_yen: item.price_yen,
                line_total_yen: item.price_yen,
            };
            let shipping = if item.price_yen >= FREE_SHIPPING_FROM_YEN {
                0
            } else {
                SHIPPING_YEN
            };
            let order = Order {
                order_number: format!("{}-{ymd}-{seq:010}", catalog::SHOP_ID),
                order_date: s.order_date,
                shop_id: catalog::SHOP_ID,
                shop_name: catalog::SHOP_NAME.into(),
                lines: vec![line],
                subtotal_yen: item.price_yen,
                shipping_yen: shipping,
                payable_yen: item.price_yen + shipping,
                payment_method: self.config.payment_method,
                pay_deadline: None,
                status: s.status.unwrap_or(SimOrderStatus::Delivered),
                note: None,
            };
            numbers.push(order.order_number.clone());
            g.orders.push(order);
        }
        g.orders.sort_by_key(|o| o.order_date);
        Ok(numbers)
    }

    /// Every submission so far.
    pub fn submissions(&self) -> Vec<Submission> {
        self.lock().submissions.clone()
    }
}

fn check_variant(item: &Item, variant: Option<&str>) -> Result<(), ShopError> {
    match (item.variants.is_empty(), variant) {
        (true, None) => Ok(()),
        (false, Some(v)) if item.variants.iter().any(|x| x == v) => Ok(()),
        _ => Err(ShopError::BadVariant),
    }
}
