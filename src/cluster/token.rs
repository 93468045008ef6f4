//! A kubeconfig's `tokenFile`, sent as client-go sends it: the file's text with surrounding
//! whitespace trimmed, read again whenever the file changes.
//!
//! kube-rs sends the file's text as it is, so a token file that ends in a newline (one written
//! by `echo`, or by an editor) makes a header no request can carry, and the client never
//! authenticates. The client here takes the file over from kube-rs ([`take_token_file`]) and
//! sends its token through [`TokenFileLayer`], with the crate's one token file reader.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::Request;
use http::header::AUTHORIZATION;
use kube::config::AuthInfo;
use tower::{BoxError, Layer, Service};

use super::ClusterError;
use crate::token_file::TokenFile;

/// The token file kube-rs would send the token of for `auth`, taken out of it so that kube-rs
/// sends nothing and [`TokenFileLayer`] sends the token instead; `None` when `auth` names no
/// token file or another credential comes first (an auth provider, a user and password, an
/// inline token), which kube-rs then sends as before.
pub(super) fn take_token_file(auth: &mut AuthInfo) -> Option<PathBuf> {
    if credential_before_token_file(auth) {
        return None;
    }
    let path = auth.token_file.take()?;
    // kube-rs runs an exec plugin only for a user without a token file: not this one's
    // credential, and left, it would be run in the file's place.
    auth.exec = None;
    Some(PathBuf::from(path))
}

/// Whether `auth` holds a credential kube-rs uses before a token file (and so before an exec
/// plugin, which comes after it): kube-rs's order is an auth provider, a user and password, a
/// token, a token file, then exec.
pub(super) fn credential_before_token_file(auth: &AuthInfo) -> bool {
    auth.auth_provider.is_some()
        || (auth.username.is_some() && auth.password.is_some())
        || auth.token.is_some()
}

/// Sets every request's `Authorization` header from a token file, as it is when the request is
/// made.
#[derive(Debug, Clone)]
pub(super) struct TokenFileLayer {
    file: Arc<TokenFile>,
    origin: &'static str,
}

impl TokenFileLayer {
    /// The layer for the token file at `path`, named in errors after `origin` (the setting that
    /// gave the kubeconfig, or `KUBECONFIG`), its token read now.
    ///
    /// # Errors
    /// [`ClusterError::TokenFile`] when the file cannot be read or holds no token that can be
    /// sent; the token is never shown.
    pub(super) fn read(
        path: PathBuf,
        origin: &'static str,
    ) -> Result<TokenFileLayer, ClusterError> {
        let file = TokenFile::new(path);
        file.read()
            .map_err(|problem| token_error(origin, file.path(), problem))?;
        Ok(TokenFileLayer {
            file: Arc::new(file),
            origin,
        })
    }
}

fn token_error(
    origin: &'static str,
    path: &Path,
    problem: crate::token_file::TokenProblem,
) -> ClusterError {
    ClusterError::TokenFile {
        origin,
        path: path.to_owned(),
        problem,
    }
}

impl<S> Layer<S> for TokenFileLayer {
    type Service = WithTokenFile<S>;

    fn layer(&self, inner: S) -> WithTokenFile<S> {
        WithTokenFile {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service [`TokenFileLayer`] makes.
#[derive(Debug, Clone)]
pub(super) struct WithTokenFile<S> {
    inner: S,
    layer: TokenFileLayer,
}

impl<S, B> Service<Request<B>> for WithTokenFile<S>
where
    S: Service<Request<B>>,
    S::Response: Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        let TokenFileLayer { file, origin } = &self.layer;
        match file.header() {
            Ok(header) => {
                request.headers_mut().insert(AUTHORIZATION, header);
                let response = self.inner.call(request);
                Box::pin(async move { response.await.map_err(Into::into) })
            }
            Err(problem) => {
                let error = token_error(origin, file.path(), problem);
                Box::pin(std::future::ready(Err(error.into())))
            }
        }
    }
}
