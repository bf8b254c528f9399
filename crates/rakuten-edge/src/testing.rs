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
