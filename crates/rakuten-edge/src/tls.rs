//! TLS serving from PEM files, reloadable: [`TlsReloader`] is the rustls certificate resolver,
//! so a new certificate applies to every handshake after [`TlsReloader::reload`] while open
//! connections keep the session they have. [`crate::serve::serve`] calls `reload` on SIGHUP.
//!
//! The crypto provider is aws-lc-rs, the one reqwest already brings: one provider for the whole
//! workspace (`cargo tree -i ring` stays empty).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// The PEM files a service serves HTTPS with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// Certificate chain, leaf first (PEM).
    pub cert: PathBuf,
    /// Private key of the leaf (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

impl TlsFiles {
    /// Both paths or neither: `Ok(None)` when neither is set.
    ///
    /// # Errors
    /// Only one of the two is set; the message names the variables given.
    pub fn from_pair(
        cert: Option<PathBuf>,
        key: Option<PathBuf>,
        names: (&str, &str),
    ) -> Result<Option<Self>, String> {
        match (cert, key) {
            (Some(cert), Some(key)) => Ok(Some(TlsFiles { cert, key })),
            (None, None) => Ok(None),
            _ => Err(format!("{} and {} must be set together", names.0, names.1)),
        }
    }

    /// Loads both files as start-up does, for a binary to refuse them as a bad setting (exit 2)
    /// before it starts anything: `Err` holds the variable of `names` (certificate, key) to blame
    /// and why — a missing, unreadable or empty file, or a key rustls refuses or that does not
    /// match the certificate (the key's variable).
    ///
    /// # Errors
    /// As above.
    pub fn check<'a>(&self, names: (&'a str, &'a str)) -> Result<(), (&'a str, String)> {
        match load(self) {
            Ok(_) => Ok(()),
            Err(TlsError::File { path, reason }) => {
                let name = if path == self.cert { names.0 } else { names.1 };
                Err((name, format!("{}: {reason}", path.display())))
            }
            Err(e @ TlsError::Rustls(_)) => Err((names.1, e.to_string())),
        }
    }
}

/// Why the PEM files could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read or holds no usable PEM section.
    #[error("{path}: {reason}")]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// rustls refused the key or the key does not match the certificate.
    #[error("TLS key: {0}")]
    Rustls(#[from] rustls::Error),
}

/// The process-wide crypto provider (aws-lc-rs).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

fn load(files: &TlsFiles) -> Result<Arc<CertifiedKey>, TlsError> {
    let file_err = |path: &Path, reason: String| TlsError::File {
        path: path.to_owned(),
        reason,
    };
    let certs = CertificateDer::pem_file_iter(&files.cert)
        .map_err(|e| file_err(&files.cert, e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_err(&files.cert, e.to_string()))?;
    if certs.is_empty() {
        return Err(file_err(&files.cert, "no CERTIFICATE section".into()));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .map_err(|e| file_err(&files.key, e.to_string()))?;
    Ok(Arc::new(CertifiedKey::from_der(certs, key, &provider())?))
}

/// The certificate resolver: the current certificate, swapped by [`reload`](Self::reload).
pub struct TlsReloader {
    files: TlsFiles,
    current: RwLock<Arc<CertifiedKey>>,
}

impl fmt::Debug for TlsReloader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsReloader")
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

impl TlsReloader {
    /// Loads the files once (start-up fails on a bad pair rather than serving without TLS).
    ///
    /// # Errors
    /// [`TlsError`] when a file is missing, malformed, or the key does not match.
    pub fn new(files: TlsFiles) -> Result<Arc<Self>, TlsError> {
        let current = RwLock::new(load(&files)?);
        Ok(Arc::new(TlsReloader { files, current }))
    }

    /// Reads the files again; on success new handshakes use them, on failure the previous
    /// certificate stays in use.
    ///
    /// # Errors
    /// [`TlsError`] of the new files.
    pub fn reload(&self) -> Result<(), TlsError> {
        let fresh = load(&self.files)?;
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = fresh;
        Ok(())
    }

    /// A rustls server configuration resolving through `self`, offering HTTP/1.1 only.
    ///
    /// # Errors
    /// rustls refuses the protocol versions (does not happen with the default provider).
    pub fn server_config(self: &Arc<Self>) -> Result<Arc<ServerConfig>, TlsError> {
        let mut config = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

impl ResolvesServerCert for TlsReloader {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(
            self.current
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
        )
    }
}
