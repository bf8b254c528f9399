//! Reading a JSON request body, the same way in both services (D-body-coding-type-and-size):
//! the checks before the bytes are parsed, and the words of each refusal. Each service maps a
//! [`BodyRefusal`] to its own error type and code scheme; what is refused, and why, is decided
//! here once, so the two services cannot drift apart again (the gateway read a gzip body as JSON
//! while card-polling answered 415).
//!
//! In order:
//! 1. a `Content-Encoding` other than `identity` is refused before the body is read: bodies are
//!    never decompressed (no decompression-bomb bound to keep), and reading compressed bytes as
//!    JSON blames the JSON for the client's choice of coding;
//! 2. the body is read within the route's limit; past it the refusal states the limit in bytes,
//!    read from the [`BodyLimit`] the route was built with;
//! 3. an empty body is handed back as it is (the caller decides: a required body is a 422, an
//!    optional one its default), whatever its `Content-Type`;
//! 4. a body that is not declared JSON (`application/json`, `application/*+json`; a `charset`
//!    parameter has no effect, D-body-coding-type-and-size) is refused: a body sent as `text/plain` or as a
//!    form is the wrong media type, not bad JSON.

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, Request};
use axum::http::{HeaderMap, StatusCode, header};
use tower::layer::util::Stack;

/// The body limit of a route, in bytes, as a request extension, so that a 413 can state it.
/// axum's own [`DefaultBodyLimit`] keeps its value private; [`BodyLimit::layer`] sets both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyLimit(pub usize);

/// What [`BodyLimit::layer`] returns: axum's limit and the extension that states it.
pub type BodyLimitLayer = Stack<axum::Extension<BodyLimit>, DefaultBodyLimit>;

/// axum's limit when a route sets none (2 MiB, `axum_core::extract::DEFAULT_LIMIT`).
pub const AXUM_DEFAULT_LIMIT: usize = 2_097_152;

impl BodyLimit {
    /// The layer to put on a router or a route in place of `DefaultBodyLimit::max(bytes)`: it
    /// limits the body and records the limit for the 413's message. An inner layer (a route's
    /// own limit) overrides an outer one (the router's), as with axum's.
    pub fn layer(bytes: usize) -> BodyLimitLayer {
        Stack::new(
            axum::Extension(BodyLimit(bytes)),
            DefaultBodyLimit::max(bytes),
        )
    }
}

/// Why a body was refused. Each service picks its status and code from the variant; the
/// message is [`BodyRefusal::message`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyRefusal {
    /// A content coding other than `identity` (415; the answer carries
    /// `Accept-Encoding: identity`). The first such coding, at most 64 characters.
    Encoded(String),
    /// Not declared JSON (415). The media type sent (at most 64 characters), `None` when the
    /// request had no `Content-Type` (or one that is not text).
    NotJson(Option<String>),
    /// Over the route's limit (413), in bytes.
    TooLarge(usize),
    /// The body could not be read (422): the connection's error, bounded.
    Unreadable(String),
}

impl BodyRefusal {
    /// The HTTP status of this refusal.
    pub fn status(&self) -> StatusCode {
        match self {
            BodyRefusal::Encoded(_) | BodyRefusal::NotJson(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            BodyRefusal::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            BodyRefusal::Unreadable(_) => StatusCode::UNPROCESSABLE_ENTITY,
        }
    }

    /// The message for the envelope's `msg`: what to send instead, and for a 413 the limit.
    pub fn message(&self) -> String {
        match self {
            BodyRefusal::Encoded(coding) => format!(
                "Content-Encoding {coding:?} is not supported: send the body uncompressed (identity)"
            ),
            BodyRefusal::NotJson(Some(sent)) => format!(
                "the request body must be JSON sent with `Content-Type: application/json`, not {sent:?}"
            ),
            BodyRefusal::NotJson(None) => "the request body must be JSON sent with \
                 `Content-Type: application/json`; the request had no Content-Type"
                .to_owned(),
            BodyRefusal::TooLarge(limit) => {
                format!("the request body is over this route's limit of {limit} bytes")
            }
            BodyRefusal::Unreadable(why) => format!("could not read the request body: {why}"),
        }
    }
}

/// The first content coding of the body other than `identity`, over every `Content-Encoding`
/// line and comma list (D-body-coding-type-and-size); a value that is not text counts as one.
pub fn content_coding(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::CONTENT_ENCODING)
        .iter()
        .flat_map(|v| match v.to_str() {
            Ok(text) => text.split(',').map(|c| c.trim().to_owned()).collect(),
            Err(_) => vec!["(not text)".to_owned()],
        })
        .find(|c| !c.is_empty() && !c.eq_ignore_ascii_case("identity"))
        .map(|c| c.chars().take(64).collect())
}

/// `Ok` when `Content-Type` declares JSON (`application/json` or `application/*+json`, any
/// parameters, any case); else the media type sent, `None` when there is none.
pub fn json_media_type(headers: &HeaderMap) -> Result<(), Option<String>> {
    let Some(value) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return Err(None);
    };
    let mime = value
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json")) {
        Ok(())
    } else {
        Err(Some(mime.chars().take(64).collect()))
    }
}

/// Reads the body of `req` for a JSON route, in the order of the module's list: coding, size,
/// emptiness, media type. An empty (or all-blank) body is returned as it is, unchecked.
///
/// # Errors
/// [`BodyRefusal`].
pub async fn json_bytes<S: Send + Sync>(req: Request, state: &S) -> Result<Bytes, BodyRefusal> {
    if let Some(coding) = content_coding(req.headers()) {
        return Err(BodyRefusal::Encoded(coding));
    }
    let media = json_media_type(req.headers());
    let limit = req
        .extensions()
        .get::<BodyLimit>()
        .map_or(AXUM_DEFAULT_LIMIT, |l| l.0);
    // A declared length over the limit is refused before a byte is read: waiting for a body that
    // will be refused anyway costs a connection for the body timeout (D-body-coding-type-and-size).
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(BodyRefusal::TooLarge(limit));
    }
    let bytes = Bytes::from_request(req, state).await.map_err(|r| {
        if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            BodyRefusal::TooLarge(limit)
        } else {
            BodyRefusal::Unreadable(r.body_text().chars().take(200).collect())
        }
    })?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(bytes);
    }
    media.map_err(BodyRefusal::NotJson)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use axum::Router;
    use axum::body::Body;
    use axum::routing::post;
    use tower::ServiceExt;

    use super::*;

    /// A route that answers the refusal's status and message, or 200 with the bytes' length.
    fn app() -> Router {
        async fn read(req: Request) -> (StatusCode, String) {
            match json_bytes(req, &()).await {
                Ok(b) => (StatusCode::OK, b.len().to_string()),
                Err(r) => (r.status(), r.message()),
            }
        }
        Router::new()
            .route("/small", post(read).layer(BodyLimit::layer(10)))
            .route("/big", post(read))
            .layer(BodyLimit::layer(100))
    }

    async fn send(path: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
        let mut req = Request::post(path);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = app()
            .oneshot(req.body(Body::from(body.to_owned())).unwrap())
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let bytes = axum::body::to_bytes(resp.into_body(), 10_000)
            .await
            .unwrap();
        (status, String::from_utf8_lossy(&bytes).into_owned())
    }

    /// D-body-coding-type-and-size: the gateway read a gzip body as
    /// JSON, `text/plain` was a 422 "invalid JSON" (card-polling) or read as JSON (gateway), and
    /// a 413 did not say the limit.
    #[tokio::test]
    async fn a_body_is_refused_for_its_coding_media_type_or_size_with_the_limit_in_bytes() {
        const JSON: (&str, &str) = ("content-type", "application/json");
        assert_eq!(send("/big", &[JSON], "{}").await, (200, "2".into()));
        assert_eq!(
            send(
                "/big",
                &[("content-type", "application/problem+json; charset=utf-8")],
                "{}"
            )
            .await
            .0,
            200
        );
        let (s, m) = send("/big", &[JSON, ("content-encoding", "gzip")], "{}").await;
        assert_eq!(s, 415);
        assert!(m.contains("Content-Encoding \"gzip\""), "{m}");
        let (s, m) = send("/big", &[("content-type", "text/plain")], "{}").await;
        assert_eq!(s, 415);
        assert!(
            m.contains("application/json") && m.contains("\"text/plain\""),
            "{m}"
        );
        let (s, m) = send("/big", &[], "{}").await;
        assert_eq!(s, 415);
        assert!(
            m.contains("application/json") && m.contains("no Content-Type"),
            "{m}"
        );
        // An empty body is the caller's to judge, whatever its type.
        assert_eq!(
            send("/big", &[("content-type", "text/plain")], " ").await.0,
            200
        );
        // The route's own limit overrides the router's, and each 413 states its own.
        let (s, m) = send("/small", &[JSON], "{\"a\": 1234567}").await;
        assert_eq!(s, 413);
        assert!(m.contains("limit of 10 bytes"), "{m}");
        let (s, m) = send(
            "/big",
            &[JSON],
            &format!("{{\"a\":\"{}\"}}", "x".repeat(200)),
        )
        .await;
        assert_eq!(s, 413);
        assert!(m.contains("limit of 100 bytes"), "{m}");
    }

    /// D-body-coding-type-and-size: a request declaring a body of a terabyte waited the
    /// whole body timeout (30 s) for a 408. The declared length alone is refused, at once.
    #[tokio::test]
    async fn a_declared_length_over_the_limit_is_refused_before_the_body_arrives() {
        let never = futures::stream::pending::<Result<Bytes, std::io::Error>>();
        let req = Request::post("/big")
            .header("content-type", "application/json")
            .header("content-length", "999999999999")
            .body(Body::from_stream(never))
            .unwrap();
        // The bound only stops a hang from stalling the suite; the answer needs no body at all.
        let resp = tokio::time::timeout(std::time::Duration::from_secs(20), app().oneshot(req))
            .await
            .expect("answered without the body")
            .unwrap();
        assert_eq!(resp.status(), 413);
        // At the limit exactly, the body is read (and the request waits for it).
        let at_limit = Request::post("/small")
            .header("content-type", "application/json")
            .header("content-length", "10")
            .body(Body::from("{\"a\":1234}"))
            .unwrap();
        assert_eq!(app().oneshot(at_limit).await.unwrap().status(), 200);
    }
}
