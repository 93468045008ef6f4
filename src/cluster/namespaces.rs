//! One namespace's annotation, read from the API server when a review needs it, within the
//! review's deadline.

use k8s_openapi::api::core::v1::Namespace;
use kube::api::Api;
use tokio::time::Instant;

use crate::volcano::dns_label;

/// Why a namespace's annotation could not be read.
#[derive(Debug, thiserror::Error)]
pub enum NamespaceError {
    /// The API server has no namespace of that name.
    #[error("namespace {namespace:?} not found")]
    NotFound {
        /// The namespace.
        namespace: String,
    },
    /// The name is no namespace's (not a DNS label): it is not read, since no API server has
    /// it, and it is never put in a request's path.
    #[error("namespace {namespace:?} is not a valid name: {problems}")]
    Invalid {
        /// The name.
        namespace: String,
        /// What is wrong with it, in Kubernetes' words.
        problems: String,
    },
    /// The API server did not answer before the review's deadline.
    #[error("reading namespace {namespace:?}: no answer from the API server in time")]
    TimedOut {
        /// The namespace.
        namespace: String,
    },
    /// The API server answered the read with an error status (403: the server's role lacks
    /// `get` on namespaces).
    #[error("reading namespace {namespace:?}: the API server answered {code}: {message}")]
    Refused {
        /// The namespace.
        namespace: String,
        /// The HTTP status code.
        code: u16,
        /// The API server's message.
        message: String,
    },
    /// The read failed on the way.
    #[error("reading namespace {namespace:?}")]
    Api {
        /// The namespace.
        namespace: String,
        /// What the client returned.
        #[source]
        source: kube::Error,
    },
}

/// Reads namespaces through a Kubernetes client.
#[derive(Clone)]
pub struct Namespaces {
    api: Api<Namespace>,
}

impl std::fmt::Debug for Namespaces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Namespaces").finish_non_exhaustive()
    }
}

impl Namespaces {
    /// Reads namespaces with `client`.
    pub fn new(client: kube::Client) -> Namespaces {
        Namespaces {
            api: Api::all(client),
        }
    }

    /// The value of the annotation `key` on `namespace` (`None` when the namespace has no such
    /// annotation), read with a GET that gives up at `deadline`.
    ///
    /// # Errors
    /// [`NamespaceError`], naming the namespace: not a valid name (nothing is read), missing,
    /// refused, failed, or not answered in time.
    pub async fn annotation(
        &self,
        namespace: &str,
        key: &str,
        deadline: Instant,
    ) -> Result<Option<String>, NamespaceError> {
        let problems = dns_label(namespace);
        if !problems.is_empty() {
            return Err(NamespaceError::Invalid {
                namespace: namespace.to_owned(),
                problems: problems.join("; "),
            });
        }
        let read = tokio::time::timeout_at(deadline, self.api.get(namespace)).await;
        match read {
            Err(_) => Err(NamespaceError::TimedOut {
                namespace: namespace.to_owned(),
            }),
            Ok(Err(kube::Error::Api(status))) if status.code == 404 => {
                Err(NamespaceError::NotFound {
                    namespace: namespace.to_owned(),
                })
            }
            Ok(Err(kube::Error::Api(status))) => Err(NamespaceError::Refused {
                namespace: namespace.to_owned(),
                code: status.code,
                message: status.message,
            }),
            Ok(Err(source)) => Err(NamespaceError::Api {
                namespace: namespace.to_owned(),
                source,
            }),
            Ok(Ok(found)) => Ok(found
                .metadata
                .annotations
                .and_then(|mut annotations| annotations.remove(key))),
        }
    }
}
