//! The bearer token a webhook sends: the crate's token file reader ([`crate::token_file`]), with
//! its problems told as the webhook's errors.

use std::path::PathBuf;

use hyper::header::HeaderValue;

use super::super::SpecError;
use super::WebhookError;

use crate::token_file::{self, BEARER};

/// A webhook's token file, read again whenever the file changes (see
/// [`crate::token_file::TokenFile`]).
#[derive(Debug)]
pub(super) struct TokenFile(token_file::TokenFile);

/// `text` with the token of `sent` (an `Authorization` header made by [`TokenFile::header`])
/// written `<bearer token>`.
pub(super) fn hidden_in(sent: &HeaderValue, text: String) -> String {
    let token = sent
        .as_bytes()
        .strip_prefix(BEARER.as_bytes())
        .and_then(|token| std::str::from_utf8(token).ok())
        .filter(|token| !token.is_empty());
    match token {
        Some(token) if text.contains(token) => text.replace(token, "<bearer token>"),
        _ => text,
    }
}

impl TokenFile {
    pub(super) fn new(path: PathBuf) -> TokenFile {
        TokenFile(token_file::TokenFile::new(path))
    }

    /// Checks at boot that the file holds a token that can be sent.
    ///
    /// # Errors
    /// [`SpecError::File`] naming `bearer_token_file`; the token is never shown.
    pub(super) fn check(&self) -> Result<(), SpecError> {
        self.0.read().map(drop).map_err(|problem| SpecError::File {
            field: "bearer_token_file",
            path: self.0.path().to_owned(),
            problem: problem.to_string(),
        })
    }

    /// The `Authorization` header for a call, from the file as it is now.
    ///
    /// # Errors
    /// [`WebhookError::Token`] when the file cannot be read (or looked at) or holds no token
    /// that can be sent. The token is never in the error.
    pub(super) fn header(&self) -> Result<HeaderValue, WebhookError> {
        self.0.header().map_err(|problem| WebhookError::Token {
            path: self.0.path().to_owned(),
            problem,
        })
    }
}
