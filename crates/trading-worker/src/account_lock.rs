//! The account lock (spec §11.1): one async mutex per site account. Every site action, order steps
//! and account queries alike, holds it while it talks to the site, so the account's
//! session never sees two interleaved actions. It is taken per site action, not per task: a
//! read-only query may run between two order steps but never inside one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::OwnedMutexGuard;

/// The per-account locks of this process.
#[derive(Debug, Clone, Default)]
pub struct AccountLocks(Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>);

impl AccountLocks {
    /// Waits for and takes the lock of `account`.
    pub async fn lock(&self, account: &str) -> OwnedMutexGuard<()> {
        let m = {
            let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
            map.entry(account.to_owned()).or_default().clone()
        };
        m.lock_owned().await
    }
}
