//! [`AppState`]: what every HTTP handler and console page is given. It lives outside
//! [`crate::http`] and [`crate::console`] so that neither imports the other for it; the router
//! ([`crate::http::router`]) mounts the console's pages.

use std::sync::Arc;

use rakuten_types::Clock;

use crate::domain::{TaskTypes, TokenHash};
use crate::hints::Hints;
use crate::scheduler::Scheduler;
use crate::store::Store;

/// Shared state of the handlers.
#[derive(Clone)]
pub struct AppState {
    /// Storage.
    pub store: Arc<dyn Store>,
    /// Clock.
    pub clock: Arc<dyn Clock>,
    /// Configured task types.
    pub task_types: TaskTypes,
    /// Hash of the bootstrap admin token.
    pub admin_token_hash: Arc<TokenHash>,
    /// Where committed enqueues announce their items, and manual triggers queue.
    pub hints: Hints,
    /// The scheduler (last cycle, queue depths).
    pub scheduler: Scheduler,
    /// The schedule configuration check (`/health`'s `schedule_config`).
    pub schedule_config: crate::jobs::schedule_config::ScheduleConfigJob,
    /// Accepted ordinary manual triggers per operator per UTC day.
    pub manual_daily_quota: u32,
    /// Signs the console's session cookies.
    pub console_key: web_console::ConsoleKey,
    /// Keys the fingerprint of the credential each console session carries.
    pub credential_key: crate::console::CredentialKey,
}
