//! Test support (feature `test-util`): a throw-away certificate authority and leaf certificates
//! for `localhost` and `127.0.0.1`, written as PEM files, so suites can serve and trust HTTPS
//! without touching the machine's trust store.

use std::path::Path;

use crate::TlsFiles;

/// A certificate authority made for one test.
pub struct TestCa {
    cert: rcgen::Certificate,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

impl std::fmt::Debug for TestCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TestCa")
    }
}

impl TestCa {
    /// A new CA with a fresh key.
    ///
    /// # Panics
    /// Key generation fails (does not happen with aws-lc-rs).
    pub fn new(name: &str) -> Self {
        let key = rcgen::KeyPair::generate().expect("CA key");
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let cert = params.self_signed(&key).expect("CA certificate");
        TestCa {
            cert,
            issuer: rcgen::Issuer::new(params, key),
        }
    }

    /// The CA certificate, PEM (what a client adds as its root).
    pub fn pem(&self) -> String {
        self.cert.pem()
    }

    /// Writes `cert.pem` and `key.pem` into `dir`: a leaf for `localhost` and `127.0.0.1`
    /// signed by this CA (overwriting earlier files, as a certificate renewal does).
    ///
    /// # Panics
    /// The files cannot be written.
    pub fn write_leaf(&self, dir: &Path) -> TlsFiles {
        let key = rcgen::KeyPair::generate().expect("leaf key");
        let params = rcgen::CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()])
            .expect("leaf params");
        let cert = params
            .signed_by(&key, &self.issuer)
            .expect("leaf certificate");
        let files = TlsFiles {
            cert: dir.join("cert.pem"),
            key: dir.join("key.pem"),
        };
        std::fs::write(&files.cert, cert.pem()).expect("write cert.pem");
        std::fs::write(&files.key, key.serialize_pem()).expect("write key.pem");
        files
    }
}

/// A request head that never ends (no blank line): what a slow or hostile client sends to hold a
/// connection open; the edge must drop it within its header-read timeout.
pub const INCOMPLETE_HEAD: &[u8] = b"GET /health HTTP/1.1\r\nHost: x\r\n";

/// `host:port` of a base URL such as `http://127.0.0.1:8080` (for raw TCP connections).
///
/// # Panics
/// `base` has no `://`.
pub fn host_port(base: &str) -> &str {
    base.split("://").nth(1).expect("a base URL has a scheme")
}

/// Reads (and discards) until the peer closes; `true` when it closed within `within`, `false`
/// when it was still open then. A read error counts as closed (a reset is a close).
pub async fn closed_within(
    stream: &mut tokio::net::TcpStream,
    within: std::time::Duration,
) -> bool {
    use tokio::io::AsyncReadExt;
    let mut buf = [0u8; 1024];
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0) | Err(_)) => return true,
            Ok(Ok(_)) => {}
        }
    }
}

/// A complete `POST path` head declaring a body of `declared` bytes, followed by `sent` of them:
/// what a client that trickles (or never sends) its body writes (without a body deadline
/// such connections stay open for 15 minutes and more).
pub fn head_with_partial_body(path: &str, token: &str, declared: u64, sent: &[u8]) -> Vec<u8> {
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: {declared}\r\n\r\n"
    )
    .into_bytes();
    request.extend_from_slice(sent);
    request
}

/// Reads what the peer sends until it closes or `within` passes; returns it as text.
pub async fn read_until_closed(
    stream: &mut tokio::net::TcpStream,
    within: std::time::Duration,
) -> String {
    use tokio::io::AsyncReadExt;
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + within;
    while let Ok(Ok(n @ 1..)) = tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
        all.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&all).into_owned()
}

/// The checks on the answer to [`head_with_partial_body`]: `status` `"408"` (a declared length
/// within the limit whose body never came: the envelope's code 1003) or `"413"` (a declared
/// length over the limit, refused before the body: the message states the limit,
/// D-body-coding-type-and-size).
///
/// # Panics
/// When `answer` is not that.
pub fn assert_body_refusal(answer: &str, status: &str) {
    assert!(
        answer.starts_with(&format!("HTTP/1.1 {status}")),
        "{answer}"
    );
    if status == "408" {
        assert!(answer.contains(r#""code":1003"#), "{answer}");
    } else {
        assert!(answer.contains("limit of"), "{answer}");
    }
}

/// Requests past the edge's bounds, as raw bytes for `path` with `token`: a request target of
/// 20,000 bytes (over [`crate::serve::MAX_URI_BYTES`]), a header section of 40,000 bytes (over
/// [`crate::serve::MAX_HEADER_BYTES`]) and one of 150 lines (over
/// [`crate::serve::MAX_HEADER_COUNT`]), each with the status it must be answered with.
pub fn oversized_heads(path: &str, token: &str) -> Vec<(&'static str, u16, Vec<u8>)> {
    let long_target = format!(
        "GET {path}?pad={} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n",
        "a".repeat(20_000)
    );
    let big_header = format!(
        "GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nX-Pad: {}\r\nConnection: close\r\n\r\n",
        "b".repeat(40_000)
    );
    let mut many = format!("GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n");
    for i in 0..150 {
        many.push_str(&format!("X-Pad-{i}: {i}\r\n"));
    }
    many.push_str("Connection: close\r\n\r\n");
    vec![
        (
            "a 20,000-byte request target",
            414,
            long_target.into_bytes(),
        ),
        ("a 40,000-byte header", 431, big_header.into_bytes()),
        ("150 header lines", 431, many.into_bytes()),
    ]
}

/// Sends each of [`oversized_heads`] to `base` (`http://host:port`) on a connection of its own
/// and checks the answer: its status, the JSON envelope with code 1004, and the connection closed.
pub async fn assert_oversized_heads_get_the_envelope(base: &str, path: &str, token: &str) {
    use tokio::io::AsyncWriteExt;
    for (what, status, request) in oversized_heads(path, token) {
        let mut s = tokio::net::TcpStream::connect(host_port(base))
            .await
            .unwrap();
        s.write_all(&request).await.unwrap();
        let answer = read_until_closed(&mut s, std::time::Duration::from_secs(10)).await;
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status} ")),
            "{what}: {answer}"
        );
        let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
        let v: serde_json::Value = serde_json::from_str(body)
            .unwrap_or_else(|e| panic!("{what}: the body is not JSON ({e}): {answer}"));
        assert_eq!(v["success"], false, "{what}: {v}");
        assert_eq!(v["code"], 1004, "{what}: {v}");
        assert!(v["data"].is_null(), "{what}: {v}");
        assert!(
            !v["msg"].as_str().unwrap_or_default().is_empty(),
            "{what}: {v}"
        );
    }
}
