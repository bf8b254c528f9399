//! The HTTP carrier adapter, chosen by `RAKUTEN_POLL_CARRIER_URL`: every
//! poll and resume is one JSON `POST` to a carrier gateway. The contract is documented in
//! `docs/carrier-http-contract.md`; in short:
//!
//! - `POST {base}/poll` with [`PollBody`] `{"iccid", "task_type", "attempt", "request_id"}`;
//!   `POST {base}/resume` with [`ResumeBody`] `{"iccid", "request_id"}`.
//! - `Authorization: Bearer <RAKUTEN_POLL_CARRIER_TOKEN>` when a token is set.
//! - Success: HTTP 2xx with [`PollAnswer`] `{"summary": string, "suspended": bool}` (resume:
//!   any JSON object).
//! - Failure: any status with `{"error": {"kind", "message"}}` ([`ErrorBody`]); `kind` maps onto
//!   [`UpstreamError`] by [`error_of_kind`] and so onto the spec's retry rules ("上游调用超时、
//!   失败或响应无效" are recoverable; an unknown card is a business failure, never retried).
//! - No complete answer within the spec's upstream timeout ([`crate::priority::UPSTREAM_TIMEOUT`],
//!   30 s, below the 90 s claim lease; counted to the end of the body) is
//!   [`UpstreamError::Timeout`]; a 5xx/4xx without a typed body is [`UpstreamError::Failed`]; a
//!   2xx that is not the answer's shape is [`UpstreamError::InvalidResponse`].
//! - The answer is read in chunks and never past [`HttpCarrier::max_answer_bytes`]
//!   (`RAKUTEN_POLL_CARRIER_MAX_ANSWER_BYTES`, default [`DEFAULT_MAX_ANSWER_BYTES`]): a longer one
//!   (announced by `Content-Length` or found while reading) is
//!   [`UpstreamError::AnswerTooLarge`], recoverable, and its connection is dropped there, so a
//!   carrier that streams without end costs each call at most the cap (D-carrier-answer-cap).
//!
//! Credentials never leave this module: the token is a [`Secret`], the URL (which may carry
//! userinfo or an API key in its query) is kept private and only its redacted form
//! ([`redact_url`]: scheme, host, port, path) is ever printed; `reqwest`'s errors (which print the
//! full URL) are reduced to a fixed text; and carrier-supplied text is cleaned by
//! [`HttpCarrier::clean`] (secrets replaced by `***`, control characters dropped, at most
//! [`MAX_TEXT_CHARS`] characters) before it reaches an interaction log row or a failure reason.

use std::time::Duration;

use async_trait::async_trait;
use reqwest::Url;
use serde::{Deserialize, Serialize};

use super::{PollRequest, PollResponse, Upstream, UpstreamError};
use crate::priority::UPSTREAM_TIMEOUT;
use rakuten_types::Secret;

/// Longest carrier-supplied text (summary, error message) kept, in characters.
pub const MAX_TEXT_CHARS: usize = 200;

/// Largest answer body read by default, bytes (`RAKUTEN_POLL_CARRIER_MAX_ANSWER_BYTES`): the
/// contract's answers are a summary cut to [`MAX_TEXT_CHARS`] and a flag, a few hundred bytes;
/// 64 KiB leaves room for a verbose gateway and holds at most 8 MiB at the default 128 calls in
/// flight per task type.
pub const DEFAULT_MAX_ANSWER_BYTES: usize = 64 * 1024;

/// Reads a body from `chunks` into memory, at most `cap` bytes: the first chunk that would pass
/// it ends the read with [`UpstreamError::AnswerTooLarge`], and the rest is never pulled (the
/// caller then drops the connection). `announced` is the `Content-Length`, when sent: one above
/// the cap fails before anything is read, and a smaller one sizes the buffer (never above the
/// cap, whatever a carrier announces).
///
/// # Errors
/// [`UpstreamError::AnswerTooLarge`], or the stream's own error mapped by `transport`.
pub async fn read_capped<S, B, E>(
    mut chunks: S,
    cap: usize,
    announced: Option<u64>,
    transport: impl Fn(E) -> UpstreamError,
) -> Result<Vec<u8>, UpstreamError>
where
    S: futures::Stream<Item = Result<B, E>> + Unpin,
    B: AsRef<[u8]>,
{
    use futures::StreamExt;
    let too_large = UpstreamError::AnswerTooLarge { limit: cap };
    if announced.is_some_and(|n| n > cap as u64) {
        return Err(too_large);
    }
    let mut body = Vec::with_capacity(announced.map_or(0, |n| n as usize).min(cap));
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(&transport)?;
        let chunk = chunk.as_ref();
        if chunk.len() > cap - body.len() {
            return Err(too_large);
        }
        body.extend_from_slice(chunk);
    }
    Ok(body)
}

/// Body of `POST {base}/poll`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PollBody {
    /// ICCID of the card to poll.
    pub iccid: String,
    /// Task type name (`card_status`, `data_usage`, `package`, …): which poll content.
    pub task_type: String,
    /// 1-based attempt of this poll: a priority item's attempt (1..=3); 1 for an ordinary poll
    /// or ordinary manual trigger (each is a single try).
    pub attempt: u32,
    /// Unique id of this call (UUID v7), for the carrier's deduplication and correlation.
    pub request_id: String,
}

/// Body of `POST {base}/resume` (复机).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResumeBody {
    /// ICCID of the card to resume.
    pub iccid: String,
    /// Unique id of this call (UUID v7).
    pub request_id: String,
}

/// A successful poll answer (HTTP 2xx).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PollAnswer {
    /// Short, credential-free summary of the poll's content (kept up to [`MAX_TEXT_CHARS`]).
    pub summary: String,
    /// The carrier reports the card as suspended (停机); drives the resume decision of
    /// `card_status`.
    #[serde(default)]
    pub suspended: bool,
}

/// A typed carrier error, any HTTP status: `{"error": {"kind": …, "message": …}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// The error of an [`ErrorBody`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorDetail {
    /// One of `unknown_card`, `timeout`, `unavailable`, `rate_limited`, `failed`,
    /// `invalid_request` (see [`error_of_kind`]).
    pub kind: String,
    /// Safe-to-show text (cleaned and cut to [`MAX_TEXT_CHARS`] before use).
    #[serde(default)]
    pub message: String,
}

/// Maps a typed error onto the executor's error, hence onto the spec's retry rules:
///
/// | `kind` | error | retried (below 3 attempts) |
/// |---|---|---|
/// | `unknown_card` | [`UpstreamError::UnknownCard`] | no: business failure, failed at once |
/// | `timeout` | [`UpstreamError::Timeout`] | yes |
/// | `unavailable`, `rate_limited`, `failed`, `invalid_request` | [`UpstreamError::Failed`] | yes |
/// | anything else | [`UpstreamError::InvalidResponse`] | yes |
pub fn error_of_kind(kind: &str, message: String) -> UpstreamError {
    match kind {
        "unknown_card" => UpstreamError::UnknownCard,
        "timeout" => UpstreamError::Timeout,
        "unavailable" | "rate_limited" | "failed" | "invalid_request" => {
            UpstreamError::Failed(if message.is_empty() {
                kind.to_owned()
            } else {
                format!("{kind}: {message}")
            })
        }
        _ => UpstreamError::InvalidResponse,
    }
}

/// The URL without userinfo, query or fragment (`https://host:port/path`): the only form of the
/// carrier URL that may be printed.
pub fn redact_url(url: &Url) -> String {
    // A PostgreSQL URL may name its host in the query (`postgresql:///db?host=/run/postgresql`):
    // that parameter, never the rest of the query, stands in for the missing host.
    let host = match url.host_str() {
        Some(h) if !h.is_empty() => h.to_owned(),
        _ => url
            .query_pairs()
            .find(|(k, _)| k == "host")
            .map_or_else(|| "(default host)".to_owned(), |(_, v)| v.into_owned()),
    };
    let mut s = format!("{}://{host}", url.scheme());
    if let Some(p) = url.port() {
        s.push_str(&format!(":{p}"));
    }
    s.push_str(url.path());
    s
}

/// Parses and checks a carrier base URL (`http://` or `https://` with a host).
///
/// # Errors
/// Anything else; the message never repeats the URL (it may hold credentials).
pub fn parse_carrier_url(s: &str) -> Result<Url, String> {
    let url = Url::parse(s.trim()).map_err(|_| "not a URL".to_owned())?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err("an http:// or https:// URL with a host".into());
    }
    Ok(url)
}

/// The HTTP carrier.
pub struct HttpCarrier {
    client: reqwest::Client,
    poll_url: Url,
    resume_url: Url,
    redacted: String,
    token: Option<Secret>,
    // HTTP Basic from the URL's userinfo, used only when no token is set.
    basic: Option<(String, Option<String>)>,
    // Text that must never appear in a summary or reason: the token, the URL's password and
    // query string.
    secrets: Vec<String>,
    // The whole call (request, answer head, body) ends within this.
    timeout: Duration,
    // The largest answer body read, bytes.
    max_answer: usize,
}

impl std::fmt::Debug for HttpCarrier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpCarrier")
            .field("url", &self.redacted)
            .field("token", &self.token.as_ref().map(|_| "***"))
            .field("max_answer_bytes", &self.max_answer)
            .finish_non_exhaustive()
    }
}

fn join(base: &Url, leaf: &str) -> Url {
    let mut u = base.clone();
    let path = format!("{}/{leaf}", base.path().trim_end_matches('/'));
    u.set_path(&path);
    u
}

impl HttpCarrier {
    /// A carrier at `base` (`{base}/poll`, `{base}/resume`; a query string of `base` is kept on
    /// both), sending `token` as a Bearer header, bounded by the spec's
    /// [`UPSTREAM_TIMEOUT`] and reading answers up to [`DEFAULT_MAX_ANSWER_BYTES`]
    /// ([`Self::with_max_answer_bytes`] sets another cap).
    ///
    /// # Errors
    /// The HTTP client cannot be built (TLS roots).
    pub fn new(base: Url, token: Option<Secret>) -> anyhow::Result<Self> {
        Self::with_timeout(base, token, UPSTREAM_TIMEOUT)
    }

    /// The same with another timeout (tests: a fake carrier that never answers).
    ///
    /// # Errors
    /// The HTTP client cannot be built (TLS roots).
    pub fn with_timeout(
        base: Url,
        token: Option<Secret>,
        timeout: Duration,
    ) -> anyhow::Result<Self> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(5)))
            // A redirect could carry the Bearer token elsewhere; the contract has none.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|_| anyhow::anyhow!("building the carrier HTTP client failed"))?;
        let mut secrets: Vec<String> = Vec::new();
        if let Some(t) = &token {
            secrets.push(t.expose().to_owned());
        }
        // Userinfo leaves the URL: it is sent as HTTP Basic only when no token is set (one
        // Authorization header, never two), and never printed.
        let mut base = base;
        let basic = (!base.username().is_empty()).then(|| {
            let user = base.username().to_owned();
            let pass = base.password().map(str::to_owned);
            (user, pass)
        });
        if let Some((user, pass)) = &basic {
            if user.len() >= 4 {
                secrets.push(user.clone());
            }
            secrets.extend(pass.clone());
            let _ = base.set_username("");
            let _ = base.set_password(None);
        }
        let basic = if token.is_some() { None } else { basic };
        if let Some(q) = base.query().filter(|q| !q.is_empty()) {
            secrets.push(q.to_owned());
            secrets.extend(
                base.query_pairs()
                    .map(|(_, v)| v.into_owned())
                    .filter(|v| v.len() >= 4),
            );
        }
        secrets.retain(|s| !s.is_empty());
        // Longest first, so a secret that contains another is replaced whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        Ok(HttpCarrier {
            client,
            poll_url: join(&base, "poll"),
            resume_url: join(&base, "resume"),
            redacted: redact_url(&base),
            token,
            basic,
            secrets,
            timeout,
            max_answer: DEFAULT_MAX_ANSWER_BYTES,
        })
    }

    /// The same carrier reading answers up to `bytes` (at least 1).
    #[must_use]
    pub fn with_max_answer_bytes(mut self, bytes: usize) -> Self {
        self.max_answer = bytes.max(1);
        self
    }

    /// The largest answer body this carrier reads, bytes.
    pub fn max_answer_bytes(&self) -> usize {
        self.max_answer
    }

    /// The printable form of the carrier URL ([`redact_url`]).
    pub fn redacted_url(&self) -> &str {
        &self.redacted
    }

    /// Carrier-supplied text made safe for an interaction log row or a failure reason: every
    /// known secret replaced by `***`, control characters dropped, cut to [`MAX_TEXT_CHARS`].
    pub fn clean(&self, text: &str) -> String {
        let mut s = text.to_owned();
        for secret in &self.secrets {
            if s.contains(secret.as_str()) {
                s = s.replace(secret.as_str(), "***");
            }
        }
        s.chars()
            .filter(|c| !c.is_control())
            .take(MAX_TEXT_CHARS)
            .collect()
    }

    /// One POST; the typed error when the answer is one, else the 2xx body. The whole call, body
    /// included, ends within the timeout (the client's own bound says the same; this one does not
    /// depend on how the client counts), and the body is read only up to the cap
    /// ([`read_capped`]): past it the answer is dropped unread, which closes its connection.
    async fn call<B: Serialize + Sync>(
        &self,
        url: &Url,
        body: &B,
    ) -> Result<Vec<u8>, UpstreamError> {
        tokio::time::timeout(self.timeout, self.exchange(url, body))
            .await
            .unwrap_or(Err(UpstreamError::Timeout))
    }

    async fn exchange<B: Serialize + Sync>(
        &self,
        url: &Url,
        body: &B,
    ) -> Result<Vec<u8>, UpstreamError> {
        let mut req = self.client.post(url.clone()).json(body);
        if let Some(t) = &self.token {
            req = req.bearer_auth(t.expose());
        } else if let Some((user, pass)) = &self.basic {
            req = req.basic_auth(user, pass.as_deref());
        }
        let resp = req.send().await.map_err(transport_error)?;
        let status = resp.status();
        let announced = resp.content_length();
        let chunks = Box::pin(futures::stream::unfold(resp, |mut resp| async move {
            resp.chunk().await.transpose().map(|c| (c, resp))
        }));
        let bytes = read_capped(chunks, self.max_answer, announced, transport_error).await?;
        if let Ok(e) = serde_json::from_slice::<ErrorBody>(&bytes) {
            return Err(self.typed(e));
        }
        if !status.is_success() {
            return Err(UpstreamError::Failed(format!(
                "carrier HTTP {}",
                status.as_u16()
            )));
        }
        Ok(bytes.to_vec())
    }

    fn typed(&self, e: ErrorBody) -> UpstreamError {
        let kind = self.clean(&e.error.kind);
        error_of_kind(&kind, self.clean(&e.error.message))
    }
}

/// A transport failure reduced to a fixed text: `reqwest::Error`'s Display holds the URL.
fn transport_error(e: reqwest::Error) -> UpstreamError {
    if e.is_timeout() {
        UpstreamError::Timeout
    } else if e.is_connect() {
        UpstreamError::Failed("carrier unreachable".into())
    } else {
        UpstreamError::Failed("carrier request failed".into())
    }
}

#[async_trait]
impl Upstream for HttpCarrier {
    async fn poll(&self, req: &PollRequest) -> Result<PollResponse, UpstreamError> {
        let body = PollBody {
            iccid: req.iccid.clone(),
            task_type: req.task_type.clone(),
            attempt: req.attempt.max(1),
            request_id: uuid::Uuid::now_v7().to_string(),
        };
        let bytes = self.call(&self.poll_url, &body).await?;
        let answer: PollAnswer =
            serde_json::from_slice(&bytes).map_err(|_| UpstreamError::InvalidResponse)?;
        Ok(PollResponse {
            summary: self.clean(&answer.summary),
            suspended: answer.suspended,
        })
    }

    async fn resume(&self, iccid: &str) -> Result<(), UpstreamError> {
        let body = ResumeBody {
            iccid: iccid.to_owned(),
            request_id: uuid::Uuid::now_v7().to_string(),
        };
        let bytes = self.call(&self.resume_url, &body).await?;
        // Any JSON object is a success; anything else is not an answer.
        match serde_json::from_slice::<serde_json::Value>(&bytes) {
            Ok(serde_json::Value::Object(_)) => Ok(()),
            _ => Err(UpstreamError::InvalidResponse),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redact_url_drops_userinfo_query_and_fragment() {
        let u =
            parse_carrier_url("https://user:pw@carrier.example:8443/api/v1?key=abcd#x").unwrap();
        assert_eq!(redact_url(&u), "https://carrier.example:8443/api/v1");
        // A PostgreSQL URL with its host in the query showed `?` as host.
        let u = Url::parse("postgresql:///polls?host=/run/postgresql&password=SeCrEt77").unwrap();
        assert_eq!(redact_url(&u), "postgresql:///run/postgresql/polls");
        let u = Url::parse("postgresql:///polls?user=u").unwrap();
        assert_eq!(redact_url(&u), "postgresql://(default host)/polls");
    }

    #[test]
    fn parse_carrier_url_refuses_other_schemes_without_echoing_the_url() {
        let e = parse_carrier_url("ftp://user:hunter22@h/").unwrap_err();
        assert!(!e.contains("hunter22"), "{e}");
        assert!(
            parse_carrier_url("not a url hunter22")
                .unwrap_err()
                .find("hunter22")
                .is_none()
        );
    }

    #[test]
    fn poll_and_resume_paths_keep_the_base_path_and_query() {
        let c =
            HttpCarrier::new(parse_carrier_url("http://h:1/carrier/?k=v").unwrap(), None).unwrap();
        assert_eq!(c.poll_url.as_str(), "http://h:1/carrier/poll?k=v");
        assert_eq!(c.resume_url.as_str(), "http://h:1/carrier/resume?k=v");
    }

    #[test]
    fn clean_replaces_secrets_and_control_characters_and_cuts() {
        let c = HttpCarrier::new(
            parse_carrier_url("http://u:urlpass1@h/?api_key=querykey9").unwrap(),
            Some(Secret::new("tok-secret-123456")),
        )
        .unwrap();
        let s = c.clean("echo Bearer tok-secret-123456 urlpass1 querykey9\nnext");
        assert_eq!(s, "echo Bearer *** *** ***next");
        assert_eq!(c.clean(&"x".repeat(500)).chars().count(), MAX_TEXT_CHARS);
    }

    /// An answer without end is read up to the cap and no further: the error comes at the first
    /// chunk past it, and no chunk after that one is ever pulled.
    #[tokio::test]
    async fn an_endless_answer_is_read_only_up_to_the_cap() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let pulled = AtomicUsize::new(0);
        let chunks = futures::stream::repeat_with(|| {
            pulled.fetch_add(1, Ordering::SeqCst);
            Ok::<_, ()>(vec![b'x'; 1000])
        });
        let e = read_capped(chunks, 10_500, None, |()| UpstreamError::InvalidResponse)
            .await
            .unwrap_err();
        assert_eq!(e, UpstreamError::AnswerTooLarge { limit: 10_500 });
        assert_eq!(e.label(), "answer_too_large");
        assert!(e.is_retryable());
        // Ten chunks fit, the eleventh does not; nothing past it.
        assert_eq!(pulled.load(Ordering::SeqCst), 11);
        // An announced length past the cap fails before any chunk is pulled.
        let untouched = futures::stream::iter([Ok::<_, ()>(vec![b'x'; 10])]);
        let announced = read_capped(untouched, 100, Some(101), |()| UpstreamError::Timeout).await;
        assert_eq!(announced, Err(UpstreamError::AnswerTooLarge { limit: 100 }));
        // An answer of exactly the cap is read whole.
        let exact = futures::stream::iter([Ok::<_, ()>(vec![1u8; 60]), Ok(vec![2u8; 40])]);
        assert_eq!(
            read_capped(exact, 100, Some(100), |()| UpstreamError::Timeout)
                .await
                .unwrap()
                .len(),
            100
        );
    }

    #[test]
    fn error_kinds_map_onto_the_spec_retry_rules() {
        assert!(!error_of_kind("unknown_card", String::new()).is_retryable());
        assert_eq!(error_of_kind("timeout", "x".into()), UpstreamError::Timeout);
        for k in ["unavailable", "rate_limited", "failed", "invalid_request"] {
            let e = error_of_kind(k, "m".into());
            assert!(e.is_retryable(), "{k}");
            assert_eq!(e, UpstreamError::Failed(format!("{k}: m")));
        }
        assert_eq!(
            error_of_kind("martian", String::new()),
            UpstreamError::InvalidResponse
        );
    }
}
