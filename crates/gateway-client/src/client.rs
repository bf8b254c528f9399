//! [`Client`]: base URLs, the Bearer token, timeouts and the default retry; the one function that
//! sends a request and decodes the envelope.

use std::fmt;
use std::time::{Duration, Instant};

use rakuten_types::ErrorCode;
use reqwest::Method;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::{Error, Retry, backoff};

/// The envelope `{success, msg, data, code}` as the client reads it: any field may be missing or
/// of another type (then the answer is judged by its status), `data` kept as text.
#[derive(Default, serde::Deserialize)]
struct RawEnvelope {
    #[serde(default)]
    success: Value,
    #[serde(default)]
    msg: Value,
    #[serde(default)]
    code: Value,
    #[serde(default)]
    data: Option<Box<serde_json::value::RawValue>>,
}

/// A token that never prints.
#[derive(Clone)]
struct Token(String);

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// A typed client of one gateway (or of several instances on one queue, tried in turn after a
/// transient failure). Cheap to clone.
#[derive(Debug, Clone)]
pub struct Client {
    bases: Vec<String>,
    token: Token,
    http: reqwest::Client,
    pub(crate) timeout: Duration,
    retry_max: Duration,
    pub(crate) retry: Retry,
    shutdown: CancellationToken,
}

/// Settings of a [`Client`].
#[derive(Debug)]
pub struct Builder {
    bases: Vec<String>,
    token: Token,
    timeout: Duration,
    retry_max: Duration,
    retry: Retry,
    shutdown: CancellationToken,
    roots: Vec<reqwest::Certificate>,
}

impl Builder {
    /// Trusts `cert` as a root besides the system's (a private CA of the gateway's certificate;
    /// the server certificate is always verified).
    pub fn root_certificate(mut self, cert: reqwest::Certificate) -> Self {
        self.roots.push(cert);
        self
    }

    /// Timeout of one request, added to the `wait` of a long-poll (default 10 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Longest backoff between two attempts (default 30 s).
    pub fn retry_max(mut self, max: Duration) -> Self {
        self.retry_max = max;
        self
    }

    /// Retry policy of calls without their own (reads, submit, reclaim); default
    /// [`Retry::Never`]. Report and query result always retry until final; renew 4 attempts.
    pub fn retry(mut self, retry: Retry) -> Self {
        self.retry = retry;
        self
    }

    /// Cancelling `token` ends waits and backoffs with [`Error::ShuttingDown`].
    pub fn shutdown(mut self, token: CancellationToken) -> Self {
        self.shutdown = token;
        self
    }

    /// The client.
    ///
    /// # Errors
    /// The HTTP client cannot be built (TLS backend).
    pub fn build(self) -> Result<Client, reqwest::Error> {
        Ok(Client {
            bases: self.bases,
            token: self.token,
            // No client-wide timeout: each request sets its own (a long-poll needs longer).
            http: (self.roots.into_iter())
                .fold(reqwest::Client::builder(), |b, c| b.add_root_certificate(c))
                .build()?,
            timeout: self.timeout,
            retry_max: self.retry_max,
            retry: self.retry,
            shutdown: self.shutdown,
        })
    }
}

/// One request, before it is sent.
#[derive(Debug)]
pub(crate) struct Call {
    pub method: Method,
    pub path: String,
    pub query: Vec<(&'static str, String)>,
    /// The JSON body's bytes, encoded once: an intent's text goes out as it was given, never
    /// through a `Value` that would turn its large numbers into floats (D-intent-verbatim-text).
    pub body: Option<Vec<u8>>,
    pub timeout: Duration,
}

impl Call {
    pub fn new(client: &Client, method: Method, path: String) -> Self {
        Call {
            method,
            path,
            query: Vec::new(),
            body: None,
            timeout: client.timeout,
        }
    }

    pub fn query(mut self, name: &'static str, value: impl ToString) -> Self {
        self.query.push((name, value.to_string()));
        self
    }

    pub fn json<B: Serialize + ?Sized>(mut self, body: &B) -> Result<Self, Error> {
        let v = serde_json::to_vec(body)
            .map_err(|e| Error::Transient(format!("cannot encode the request body: {e}")))?;
        self.body = Some(v);
        Ok(self)
    }
}

impl Client {
    /// Settings for a client of the gateway at `base` (e.g. `http://127.0.0.1:31109`) with this
    /// Bearer token.
    pub fn builder(base: &str, token: &str) -> Builder {
        Self::builder_multi([base], token)
    }

    /// Settings for a client of several gateway instances sharing one queue: each retry goes to
    /// the next URL.
    ///
    /// # Panics
    /// When `bases` is empty.
    pub fn builder_multi<I, S>(bases: I, token: &str) -> Builder
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let bases: Vec<String> = bases
            .into_iter()
            .map(|b| b.as_ref().trim_end_matches('/').to_owned())
            .collect();
        assert!(!bases.is_empty(), "a gateway client needs a base URL");
        Builder {
            bases,
            token: Token(token.to_owned()),
            timeout: Duration::from_secs(10),
            retry_max: Duration::from_secs(30),
            retry: Retry::Never,
            shutdown: CancellationToken::new(),
            roots: Vec::new(),
        }
    }

    /// The first base URL.
    pub fn base(&self) -> &str {
        &self.bases[0]
    }

    /// Sends `call` once to `base`; `Ok(None)` is a success with `data: null`.
    async fn once<T: DeserializeOwned>(&self, base: &str, call: &Call) -> Result<Option<T>, Error> {
        let mut req = self
            .http
            .request(call.method.clone(), format!("{base}{}", call.path))
            .bearer_auth(&self.token.0)
            .timeout(call.timeout);
        if !call.query.is_empty() {
            req = req.query(&call.query);
        }
        if let Some(b) = &call.body {
            req = req
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(b.clone());
        }
        let resp = tokio::select! {
            r = req.send() => r.map_err(|e| Error::Transient(e.to_string()))?,
            () = self.shutdown.cancelled() => return Err(Error::ShuttingDown),
        };
        let status = resp.status().as_u16();
        let body = resp
            .bytes()
            .await
            .map_err(|e| Error::Transient(e.to_string()))?;
        if status >= 500 {
            return Err(Error::Transient(format!("HTTP {status}")));
        }
        // The envelope with `data` left as its text, decoded into `T` from that text: a `Value`
        // in between would turn an intent's large numbers into floats (D-intent-verbatim-text).
        let env: RawEnvelope = serde_json::from_slice(&body)
            // JSON that is not an object: no envelope fields, judged by the status below.
            .or_else(|e| {
                serde_json::from_slice::<Value>(&body)
                    .map(|_| RawEnvelope::default())
                    .map_err(|_| e)
            })
            .map_err(|e| {
                if status < 300 {
                    Error::Transient(format!("HTTP {status}: not JSON: {e}"))
                } else {
                    Error::Rejected {
                        status,
                        code: 0,
                        msg: format!("not an envelope: {e}"),
                    }
                }
            })?;
        let code = env
            .code
            .as_i64()
            .and_then(|c| i32::try_from(c).ok())
            .unwrap_or(0);
        let msg = env.msg.as_str().unwrap_or("").to_owned();
        if code == ErrorCode::LeaseInvalid.as_i32() {
            return Err(Error::LeaseLost(msg));
        }
        if !(200..300).contains(&status) || env.success != Value::Bool(true) {
            return Err(Error::Rejected { status, code, msg });
        }
        match env.data {
            None => Ok(None),
            Some(d) => serde_json::from_str(d.get())
                .map(Some)
                .map_err(|e| Error::Transient(format!("unexpected data shape: {e}"))),
        }
    }

    async fn pause(&self, attempt: u32) -> Result<(), Error> {
        tokio::select! {
            () = tokio::time::sleep(backoff(attempt, self.retry_max)) => Ok(()),
            () = self.shutdown.cancelled() => Err(Error::ShuttingDown),
        }
    }

    /// Sends `call`, retrying transient failures as `retry` allows (each retry to the next base
    /// URL). With `need_data`, a success without data counts as transient.
    async fn send<T: DeserializeOwned>(
        &self,
        call: &Call,
        retry: Retry,
        need_data: bool,
    ) -> Result<Option<T>, Error> {
        let started = Instant::now();
        let mut attempt: u32 = 0;
        loop {
            let base = &self.bases[attempt as usize % self.bases.len()];
            let err = match self.once::<T>(base, call).await {
                Ok(None) if need_data => Error::Transient(format!(
                    "{} {} answered success without data",
                    call.method, call.path
                )),
                Ok(v) => return Ok(v),
                Err(e @ Error::Transient(_)) => e,
                Err(e) => return Err(e),
            };
            if !retry.allows(attempt + 1, started.elapsed()) {
                return Err(err);
            }
            tracing::warn!(method = %call.method, path = %call.path, attempt, error = %err, "gateway call failed; retrying");
            self.pause(attempt).await?;
            attempt = attempt.saturating_add(1);
        }
    }

    /// A call whose success carries data.
    pub(crate) async fn data<T: DeserializeOwned>(
        &self,
        call: Call,
        retry: Retry,
    ) -> Result<T, Error> {
        self.send(&call, retry, true)
            .await?
            .ok_or_else(|| Error::Transient("answered without data".into()))
    }

    /// A call whose success may be `data: null` (a long-poll that found nothing).
    pub(crate) async fn maybe<T: DeserializeOwned>(
        &self,
        call: Call,
        retry: Retry,
    ) -> Result<Option<T>, Error> {
        self.send(&call, retry, false).await
    }
}

/// Percent-encodes a path segment.
pub(crate) fn seg(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_segment_is_percent_encoded_and_the_token_never_prints() {
        assert_eq!(seg("po-1_a.b~"), "po-1_a.b~");
        assert_eq!(seg("a/b c"), "a%2Fb%20c");
        let c = Client::builder("http://x/", "hunter2").build().unwrap();
        assert!(!format!("{c:?}").contains("hunter2"));
        assert_eq!(c.base(), "http://x");
    }
}
