//! The TLS client settings of a webhook: whose certificates it trusts and what it presents.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore};

use super::super::SpecError;
use super::WebhookSpec;

/// The rustls client settings `spec` describes: the roots of `ca_bundle` (or the system's), and
/// `client_cert` with `client_key` for mutual TLS. Made once per webhook, when it is built.
///
/// The ring provider is named here rather than taken from the process default, which rustls
/// cannot choose when two providers are compiled in.
///
/// # Errors
/// Every problem found, each naming its field: a file that cannot be read or holds no PEM item
/// of its kind, half a client certificate, a key that does not fit.
pub(super) fn client_config(spec: &WebhookSpec) -> Result<ClientConfig, Vec<SpecError>> {
    let mut problems = Vec::new();
    let roots = match &spec.ca_bundle {
        Some(path) => bundle_roots(path),
        None if is_https(spec) => system_roots(),
        // A loopback http webhook has no server certificate to check.
        None => Ok(RootCertStore::empty()),
    }
    .unwrap_or_else(|problem| {
        problems.push(problem);
        RootCertStore::empty()
    });
    let identity = match (&spec.client_cert, &spec.client_key) {
        (Some(cert), Some(key)) => {
            let chain = certificates("client_cert", cert);
            let key = private_key(key);
            match (chain, key) {
                (Ok(chain), Ok(key)) => Some((chain, key)),
                (chain, key) => {
                    problems.extend(chain.err());
                    problems.extend(key.err());
                    None
                }
            }
        }
        (None, None) => None,
        _ => {
            problems.push(SpecError::ClientAuthHalf);
            None
        }
    };
    let builder =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("the ring provider supports TLS 1.2 and 1.3")
            .with_root_certificates(roots);
    let config = match identity {
        Some((chain, key)) => builder
            .with_client_auth_cert(chain, key)
            .map_err(|error| {
                problems.push(SpecError::ClientAuth {
                    problem: error.to_string(),
                });
            })
            .ok(),
        None => Some(builder.with_no_client_auth()),
    };
    match config {
        Some(config) if problems.is_empty() => Ok(config),
        _ => Err(problems),
    }
}

fn is_https(spec: &WebhookSpec) -> bool {
    // An unparsable URL is reported by the URL check; trusting the system roots is then moot.
    spec.endpoint().is_ok_and(|endpoint| endpoint.is_https)
}

fn bundle_roots(path: &Path) -> Result<RootCertStore, SpecError> {
    let mut roots = RootCertStore::empty();
    for certificate in certificates("ca_bundle", path)? {
        roots
            .add(certificate)
            .map_err(|error| file_problem("ca_bundle", path, error.to_string()))?;
    }
    Ok(roots)
}

fn system_roots() -> Result<RootCertStore, SpecError> {
    let mut roots = RootCertStore::empty();
    // Certificates the system holds that do not parse are skipped, as browsers do.
    roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    if roots.is_empty() {
        return Err(SpecError::NoRoots);
    }
    Ok(roots)
}

/// Every PEM certificate in the file `field` names; at least one.
fn certificates(
    field: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, SpecError> {
    let bytes = read(field, path)?;
    let certificates = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| file_problem(field, path, error.to_string()))?;
    if certificates.is_empty() {
        return Err(file_problem(
            field,
            path,
            "holds no PEM certificate".to_owned(),
        ));
    }
    Ok(certificates)
}

fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, SpecError> {
    let bytes = read("client_key", path)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|error| {
        let problem = match error {
            rustls::pki_types::pem::Error::NoItemsFound => "holds no PEM private key".to_owned(),
            other => other.to_string(),
        };
        file_problem("client_key", path, problem)
    })
}

fn read(field: &'static str, path: &Path) -> Result<Vec<u8>, SpecError> {
    std::fs::read(path).map_err(|error| file_problem(field, path, error.to_string()))
}

fn file_problem(field: &'static str, path: &Path, problem: String) -> SpecError {
    SpecError::File {
        field,
        path: path.to_owned(),
        problem,
    }
}
