//! The scraper service's `POST {RAKUTEN_SCRAPER_BASE_URL}/api/item_detail` (spec §2): the item's
//! `purchase` block (item id, variants, price, shop). Not a site action on the account, so it takes
//! no account lock.

use std::time::Duration;

use serde_json::{Value, json};

use crate::settings::Secret;
use crate::site::{Purchase, SiteError, SiteErrorKind};

/// Client of the scraper's item detail.
#[derive(Debug, Clone)]
pub struct ScraperClient {
    base: Option<String>,
    token: Secret,
    http: reqwest::Client,
}

impl ScraperClient {
    /// A client for `base` (`None`: not configured, every call fails with 5006).
    ///
    /// # Errors
    /// The HTTP client cannot be built.
    pub fn new(
        base: Option<String>,
        token: Secret,
        timeout: Duration,
    ) -> Result<Self, reqwest::Error> {
        Ok(ScraperClient {
            base,
            token,
            http: reqwest::Client::builder().timeout(timeout).build()?,
        })
    }

    /// The purchase block of the item at `item_url`.
    ///
    /// # Errors
    /// 5006 when unconfigured, unreachable or answering 5xx, 5007 on a timeout, 5002 when the answer lacks a purchase block.
    pub async fn item_detail(&self, item_url: &str) -> Result<Purchase, SiteError> {
        let Some(base) = &self.base else {
            return Err(SiteError::new(
                SiteErrorKind::Unavailable,
                "RAKUTEN_SCRAPER_BASE_URL is empty: cannot fetch the item's purchase block",
            ));
        };
        let mut req = self
            .http
            .post(format!("{base}/api/item_detail"))
            .json(&json!({"url": item_url}));
        if !self.token.expose().is_empty() {
            req = req.bearer_auth(self.token.expose());
        }
        let transport = |e: reqwest::Error| {
            let kind = if e.is_timeout() {
                SiteErrorKind::Timeout
            } else {
                SiteErrorKind::Unavailable
            };
            SiteError::new(kind, format!("scraper item_detail: {e}"))
        };
        let resp = req.send().await.map_err(transport)?;
        let status = resp.status();
        if status.is_server_error() {
            // A 5xx is transient whatever its body says: retryable, not a changed page.
            return Err(SiteError::new(
                SiteErrorKind::Unavailable,
                format!("scraper item_detail: HTTP {status}"),
            ));
        }
        let bytes = resp.bytes().await.map_err(transport)?;
        let body: Value = serde_json::from_slice(&bytes).map_err(|e| {
            SiteError::new(
                SiteErrorKind::UnexpectedPage,
                format!("scraper item_detail: HTTP {status}: {e}"),
            )
        })?;
        if body["success"] != Value::Bool(true) {
            return Err(SiteError::new(
                SiteErrorKind::UnexpectedPage,
                format!(
                    "scraper item_detail: HTTP {status}: {}",
                    body["msg"].as_str().unwrap_or("error")
                ),
            ));
        }
        serde_json::from_value(body["data"]["purchase"].clone()).map_err(|e| {
            SiteError::new(
                SiteErrorKind::UnexpectedPage,
                format!("scraper item_detail: no purchase block: {e}"),
            )
        })
    }
}
