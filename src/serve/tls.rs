//! TLS: the serving certificate, re-read when its files change, behind a resolver rustls asks
//! on every handshake; and the optional client CA for mutual TLS.
//!
//! A new pair replaces the old one only when both files have settled, parse and the key matches
//! the certificate; otherwise the old pair keeps serving and the failure is logged and counted
//! (`reload.rs`).
//! Connections already open keep the certificate they were made with.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::Guard;
use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::server::danger::ClientCertVerifier;
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::ServeError;
use super::reload::{Contents, Files, Reloading, read_file};
use super::settings::TlsFiles;
use crate::events::{ServerEvents, WatchedFile};

/// The crypto provider every TLS configuration here uses: ring.
pub(crate) fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The serving certificate in force; rustls asks it on every handshake.
#[derive(Debug)]
pub(crate) struct Resolver {
    current: Reloading<CertifiedKey>,
}

impl ResolvesServerCert for Resolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(Guard::into_inner(self.current.load()))
    }
}

/// The serving certificate, watched: the resolver keeps its files watched.
#[derive(Debug)]
pub(crate) struct Certificates {
    pub(crate) resolver: Arc<Resolver>,
}

impl Certificates {
    /// Loads the pair in `files` and watches both files. Call it inside a tokio runtime.
    ///
    /// # Errors
    /// [`ServeError::Read`], [`ServeError::Pem`] or [`ServeError::Key`] when the pair cannot be
    /// used now; [`ServeError::Watch`] when a directory cannot be watched.
    pub(crate) fn watch(
        files: &TlsFiles,
        poll: Duration,
        events: Arc<dyn ServerEvents>,
    ) -> Result<Certificates, ServeError> {
        let provider = provider();
        let pair = files.clone();
        let files = Files {
            name: "serving certificate",
            reported_as: WatchedFile::Certificates,
            paths: [files.cert_file.clone(), files.key_file.clone()],
            parse: Box::new(move |[cert, key]: &Contents<2>| {
                certified_key(&pair, cert, key, &provider)
            }),
        };
        let resolver = Arc::new(Resolver {
            current: Reloading::watch(files, poll, events)?,
        });
        Ok(Certificates { resolver })
    }
}

fn certificates(
    path: &Path,
    pem: &[u8],
    what: &'static str,
) -> Result<Vec<CertificateDer<'static>>, ServeError> {
    let pem_error = |source| ServeError::Pem {
        path: path.to_owned(),
        what,
        source,
    };
    let chain = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(pem_error)?;
    if chain.is_empty() {
        return Err(pem_error(rustls_pki_types::pem::Error::NoItemsFound));
    }
    Ok(chain)
}

/// The certified key the pair makes, the key checked against the certificate.
pub(super) fn certified_key(
    files: &TlsFiles,
    cert: &[u8],
    key: &[u8],
    provider: &CryptoProvider,
) -> Result<CertifiedKey, ServeError> {
    pair(
        files,
        chain(files, cert)?,
        private_key(files, key)?,
        provider,
    )
}

/// The certificate chain in `cert`, the contents of `files.cert_file`.
pub(super) fn chain(
    files: &TlsFiles,
    cert: &[u8],
) -> Result<Vec<CertificateDer<'static>>, ServeError> {
    const WHAT: &str = "a PEM certificate chain";
    certificates(&files.cert_file, cert, WHAT).map_err(|error| {
        if PrivateKeyDer::from_pem_slice(cert).is_ok() {
            ServeError::OtherHalf {
                path: files.cert_file.clone(),
                what: WHAT,
                found: "a private key",
            }
        } else {
            error
        }
    })
}

/// The private key in `key`, the contents of `files.key_file`.
pub(super) fn private_key(
    files: &TlsFiles,
    key: &[u8],
) -> Result<PrivateKeyDer<'static>, ServeError> {
    const WHAT: &str = "a PEM private key";
    PrivateKeyDer::from_pem_slice(key).map_err(|source| {
        if matches!(CertificateDer::pem_slice_iter(key).next(), Some(Ok(_))) {
            ServeError::OtherHalf {
                path: files.key_file.clone(),
                what: WHAT,
                found: "a certificate",
            }
        } else {
            ServeError::Pem {
                path: files.key_file.clone(),
                what: WHAT,
                source,
            }
        }
    })
}

/// `chain` and `key` as one certified key: an error when the key is not the certificate's or
/// the provider cannot use it.
pub(super) fn pair(
    files: &TlsFiles,
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    provider: &CryptoProvider,
) -> Result<CertifiedKey, ServeError> {
    CertifiedKey::from_der(chain, key, provider).map_err(|source| ServeError::Key {
        key: files.key_file.clone(),
        cert: files.cert_file.clone(),
        source,
    })
}

/// The verifier of client certificates that must chain to the CA bundle at `path`.
///
/// # Errors
/// [`ServeError::Read`], [`ServeError::Pem`], [`ServeError::UnusableCa`] or
/// [`ServeError::ClientCa`] for a bundle that cannot be used.
pub(super) fn client_verifier(
    path: &Path,
    provider: Arc<CryptoProvider>,
) -> Result<Arc<dyn ClientCertVerifier>, ServeError> {
    let mut roots = rustls::RootCertStore::empty();
    let pem = read_file(path)?;
    let (_, unusable) =
        roots.add_parsable_certificates(certificates(path, &pem, "PEM CA certificates")?);
    if unusable > 0 {
        return Err(ServeError::UnusableCa {
            path: path.to_owned(),
            unusable,
        });
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|source| ServeError::ClientCa {
            path: path.to_owned(),
            source,
        })
}

/// The server's TLS configuration: the certificate from `resolver`, client certificates
/// checked against `client_ca` when one is given, and ALPN offering HTTP/2 only when `http2`.
///
/// # Errors
/// [`ServeError::Read`], [`ServeError::Pem`] or [`ServeError::ClientCa`] for a bad CA bundle;
/// [`ServeError::Tls`] when the provider supports no safe protocol version.
pub(crate) fn server_config(
    resolver: Arc<Resolver>,
    client_ca: Option<&Path>,
    http2: bool,
) -> Result<Arc<ServerConfig>, ServeError> {
    let provider = provider();
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(ServeError::Tls)?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(path) => builder.with_client_cert_verifier(client_verifier(path, provider)?),
    };
    let mut config = builder.with_cert_resolver(resolver);
    config.alpn_protocols = if http2 {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    } else {
        vec![b"http/1.1".to_vec()]
    };
    Ok(Arc::new(config))
}
