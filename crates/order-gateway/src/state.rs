//! [`AppState`], what every handler shares — the API's routes and the console's pages alike. It
//! lives outside [`crate::http`] so that the console and the router do not import each other
//! (the router mounts the console; the console needs only this).

use std::sync::Arc;

use rakuten_types::Clock;
use tokio_util::sync::CancellationToken;
use web_console::ConsoleKey;

use crate::lease::notify::LeaseNotifier;
use crate::roles::Credentials;
use crate::settings::Settings;
use crate::store::{OperatorStore, OrderStore, QueryStore};
use crate::telemetry::GatewayMetrics;

/// What every handler shares. Cheap to clone. New channels (e.g. the account-query channel) add
/// their own fields here.
#[derive(Debug, Clone)]
pub struct AppState {
    /// Order task storage.
    pub store: Arc<dyn OrderStore>,
    /// The injected clock.
    pub clock: Arc<dyn Clock>,
    /// Validated settings.
    pub settings: Arc<Settings>,
    /// Wakes waiting lease long-polls.
    pub lease_notifier: LeaseNotifier,
    /// Account-query storage (§11); the same SQLite store and writer as `store`.
    pub queries: Arc<dyn QueryStore>,
    /// Alerts, operator actions and workers; the same store as `store`.
    pub ops: Arc<dyn OperatorStore>,
    /// Wakes waiting query long-polls (its own signal: orders and queries never wake each other).
    pub query_notifier: LeaseNotifier,
    /// In-process metrics (`/metrics`, [`crate::telemetry`]).
    pub metrics: Arc<GatewayMetrics>,
    /// Every configured token (as digests) and the actor it names.
    pub credentials: Arc<Credentials>,
    /// Cancelled at shutdown: waiting long-polls return at once.
    pub shutdown: CancellationToken,
    /// Signs the console's session cookies.
    pub console_key: ConsoleKey,
}
