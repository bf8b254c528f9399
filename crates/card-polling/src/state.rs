//! [`AppState`]: what every HTTP handler and console page is given. It lives outside
//! [`crate::http`] and [`crate::console`] so that neither imports the other for it; the router
//! ([`crate::http::router`]) mounts the console's pages.

use std::sync::Arc;

use rakuten_types::Clock;

use crate::domain::{Account, TaskTypes, TokenHash};
use crate::hints::Hints;
use crate::scheduler::Scheduler;
use crate::store::{Store, StoreError};

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
    pub credential_key: crate::console::credential_key::CredentialKey,
}

impl AppState {
    /// The account a Bearer token belongs to: the bootstrap admin
    /// ([`Account::bootstrap_admin`]) when its SHA-256 equals the admin token's (compared in
    /// constant time), else the stored account with that token hash (a revoked account's is not
    /// found). The API's authentication and the console's sign-in both ask it.
    ///
    /// # Errors
    /// The store failed.
    pub async fn account_of_token(&self, token: &str) -> Result<Option<Account>, StoreError> {
        let hash = TokenHash::of(token);
        if self.admin_token_hash.ct_eq(&hash.0) {
            return Ok(Some(Account::bootstrap_admin()));
        }
        self.store.account_find_by_token(&hash).await
    }
}
