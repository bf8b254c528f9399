//! Configuration of the simulated shop: the command line (`shop-sim serve …`) and the in-process
//! [`ShopConfig`], including the fault switches tests flip at run time (`POST /admin/faults`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use clap::{Parser, Subcommand, ValueEnum};
use rakuten_types::{Clock, SystemClock};
use serde::{Deserialize, Serialize};

/// How the account pays: decides what `POST /orders/{n}/pay` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ValueEnum, Default)]
#[serde(rename_all = "snake_case")]
pub enum PaymentMethod {
    /// Credit card: paying moves the order to paid (or asks for 3-D Secure).
    #[default]
    CreditCard,
    /// Convenience-store payment (コンビニ払い): the order waits for payment until a deadline
    /// three days after the order.
    Konbini,
}

impl PaymentMethod {
    /// The wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            PaymentMethod::CreditCard => "credit_card",
            PaymentMethod::Konbini => "konbini",
        }
    }
}

/// Fault injection switches. All off by default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Faults {
    /// Yen added to every unit price from the confirm page on (the cart keeps the price seen at
    /// cart-add time): simulates a price change between cart and confirm. 0 = off.
    pub price_change_yen: i64,
    /// Paying asks for a 3-D Secure challenge instead of paying.
    pub three_d_secure: bool,
    /// Every shop request (not `/admin`) waits this many milliseconds first.
    pub slow_ms: u64,
    /// `POST /order/submit` creates and logs the order, then breaks the connection: the order
    /// exists but the client sees a transport error.
    pub drop_after_order: bool,
    /// Every account page answers with the login page (`logged_in: false`).
    pub logged_out: bool,
    /// The order list page changes shape (`orderListDataV2`), so a parser for the known shape
    /// cannot read it.
    pub order_list_changed: bool,
    /// Order-list pages from this page number on answer the login page (the session is lost
    /// while paging); 0 = off.
    #[serde(default)]
    pub logged_out_from_page: u32,
    /// Order-list pages from this page number on change shape (like `order_list_changed`); 0 = off.
    #[serde(default)]
    pub order_list_changed_from_page: u32,
    /// Answer the next `times` shop requests to this path with 503 (a transient server error),
    /// then serve it normally again; `None` = off.
    #[serde(default)]
    pub fail_route: Option<FailRoute>,
}

/// A route that fails a bounded number of times ([`Faults::fail_route`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FailRoute {
    /// The request path, exactly (no query string), e.g. `/cart`; any method.
    pub path: String,
    /// How many more requests to that path fail.
    pub times: u32,
}

/// A partial update of [`Faults`] (`POST /admin/faults`): absent fields keep their value.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultsPatch {
    /// See [`Faults::price_change_yen`].
    pub price_change_yen: Option<i64>,
    /// See [`Faults::three_d_secure`].
    pub three_d_secure: Option<bool>,
    /// See [`Faults::slow_ms`].
    pub slow_ms: Option<u64>,
    /// See [`Faults::drop_after_order`].
    pub drop_after_order: Option<bool>,
    /// See [`Faults::logged_out`].
    pub logged_out: Option<bool>,
    /// See [`Faults::order_list_changed`].
    pub order_list_changed: Option<bool>,
    /// See [`Faults::logged_out_from_page`].
    pub logged_out_from_page: Option<u32>,
    /// See [`Faults::order_list_changed_from_page`].
    pub order_list_changed_from_page: Option<u32>,
    /// See [`Faults::fail_route`] (`null` or `times: 0` turns it off).
    #[serde(default, deserialize_with = "some")]
    pub fail_route: Option<Option<FailRoute>>,
}

/// Keeps an explicit `null` apart from an absent field (`Some(None)` vs `None`).
fn some<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

impl Faults {
    /// Applies a partial update.
    pub fn apply(&mut self, p: FaultsPatch) {
        if let Some(v) = p.price_change_yen {
            self.price_change_yen = v;
        }
        if let Some(v) = p.three_d_secure {
            self.three_d_secure = v;
        }
        if let Some(v) = p.slow_ms {
            self.slow_ms = v.min(60_000);
        }
        if let Some(v) = p.drop_after_order {
            self.drop_after_order = v;
        }
        if let Some(v) = p.logged_out {
            self.logged_out = v;
        }
        if let Some(v) = p.order_list_changed {
            self.order_list_changed = v;
        }
        if let Some(v) = p.logged_out_from_page {
            self.logged_out_from_page = v;
        }
        if let Some(v) = p.order_list_changed_from_page {
            self.order_list_changed_from_page = v;
        }
        if let Some(v) = p.fail_route {
            self.fail_route = v.filter(|f| f.times > 0);
        }
    }
}

/// Everything an in-process shop needs.
#[derive(Debug, Clone)]
pub struct ShopConfig {
    /// Listen address; port 0 picks a free port.
    pub addr: SocketAddr,
    /// The account's session cookie value (`Cookie: session=<token>`).
    pub session_token: String,
    /// Optional JSONL file every order submission is appended to (one line each, flushed).
    pub submission_log: Option<PathBuf>,
    /// How the account pays.
    pub payment_method: PaymentMethod,
    /// Orders per order-list page.
    pub page_size: usize,
    /// Initial faults.
    pub faults: Faults,
    /// Time source for order dates and deadlines.
    pub clock: Arc<dyn Clock>,
}

impl Default for ShopConfig {
    fn default() -> Self {
        ShopConfig {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            session_token: DEFAULT_SESSION_TOKEN.into(),
            submission_log: None,
            payment_method: PaymentMethod::CreditCard,
            page_size: 5,
            faults: Faults::default(),
            clock: Arc::new(SystemClock),
        }
    }
}

/// The session cookie value used when none is configured (the sim has one account).
pub const DEFAULT_SESSION_TOKEN: &str = "sim-session";

/// `shop-sim` command line.
#[derive(Debug, Parser)]
#[command(
    name = "shop-sim",
    version,
    about = "Simulated shop for the trading worker"
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the shop over HTTP.
    Serve(ServeArgs),
}

/// The shop-sim variables' names before they followed the `RAKUTEN_*` convention; still read,
/// with a warning, when the new name is not set (D-settings-convention).
pub const DEPRECATED_ENV: [rakuten_cli::Alias; 4] = [
    rakuten_cli::Alias {
        deprecated: "SHOP_SIM_HOST",
        current: "RAKUTEN_SHOP_SIM_HOST",
    },
    rakuten_cli::Alias {
        deprecated: "SHOP_SIM_PORT",
        current: "RAKUTEN_SHOP_SIM_PORT",
    },
    rakuten_cli::Alias {
        deprecated: "SHOP_SIM_SESSION_TOKEN",
        current: "RAKUTEN_SHOP_SIM_SESSION_TOKEN",
    },
    rakuten_cli::Alias {
        deprecated: "SHOP_SIM_SUBMISSION_LOG",
        current: "RAKUTEN_SHOP_SIM_SUBMISSION_LOG",
    },
];

/// `shop-sim serve` options.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Listen host.
    #[arg(long, env = "RAKUTEN_SHOP_SIM_HOST", default_value = "127.0.0.1")]
    pub host: std::net::IpAddr,
    /// Listen port (0 = any free port).
    #[arg(long, env = "RAKUTEN_SHOP_SIM_PORT", default_value_t = 31120)]
    pub port: u16,
    /// Once listening, write the bound address (`127.0.0.1:PORT`) to this file (start on port 0
    /// and read the port back).
    #[arg(long, env = "RAKUTEN_SHOP_SIM_ADDR_FILE")]
    pub addr_file: Option<PathBuf>,
    /// Session cookie value of the one account.
    #[arg(
        long,
        env = "RAKUTEN_SHOP_SIM_SESSION_TOKEN",
        default_value = DEFAULT_SESSION_TOKEN,
        hide_env_values = true
    )]
    pub session_token: String,
    /// Append every order submission to this JSONL file.
    #[arg(long, env = "RAKUTEN_SHOP_SIM_SUBMISSION_LOG")]
    pub submission_log: Option<PathBuf>,
    /// How the account pays.
    #[arg(
        long,
        env = "RAKUTEN_SHOP_SIM_PAYMENT_METHOD",
        value_enum,
        default_value = "credit-card"
    )]
    pub payment_method: PaymentMethod,
    /// Orders per order-list page.
    #[arg(long, env = "RAKUTEN_SHOP_SIM_PAGE_SIZE", default_value_t = 5)]
    pub page_size: usize,
    /// Fault: yen added to unit prices from the confirm page on.
    #[arg(long, env = "RAKUTEN_SHOP_SIM_PRICE_CHANGE_YEN", default_value_t = 0)]
    pub price_change_yen: i64,
    /// Fault: paying asks for 3-D Secure.
    #[arg(long, env = "RAKUTEN_SHOP_SIM_THREE_D_SECURE")]
    pub three_d_secure: bool,
    /// Fault: delay every shop response by this many milliseconds.
    #[arg(long, env = "RAKUTEN_SHOP_SIM_SLOW_MS", default_value_t = 0)]
    pub slow_ms: u64,
    /// Fault: break the connection after an order is created.
    #[arg(long, env = "RAKUTEN_SHOP_SIM_DROP_AFTER_ORDER")]
    pub drop_after_order: bool,
    /// Fault: every account page says "logged out".
    #[arg(long, env = "RAKUTEN_SHOP_SIM_LOGGED_OUT")]
    pub logged_out: bool,
    /// Fault: the order list page changes shape.
    #[arg(long, env = "RAKUTEN_SHOP_SIM_ORDER_LIST_CHANGED")]
    pub order_list_changed: bool,
}

impl ServeArgs {
    /// The in-process configuration these options describe.
    pub fn into_config(&self) -> ShopConfig {
        ShopConfig {
            addr: SocketAddr::new(self.host, self.port),
            session_token: self.session_token.clone(),
            submission_log: self.submission_log.clone(),
            payment_method: self.payment_method,
            page_size: self.page_size.clamp(1, 100),
            faults: Faults {
                price_change_yen: self.price_change_yen,
                three_d_secure: self.three_d_secure,
                slow_ms: self.slow_ms,
                drop_after_order: self.drop_after_order,
                logged_out: self.logged_out,
                order_list_changed: self.order_list_changed,
                logged_out_from_page: 0,
                order_list_changed_from_page: 0,
                fail_route: None,
            },
            clock: Arc::new(SystemClock),
        }
    }
}
