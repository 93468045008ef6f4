//! The bearer token a webhook sends, read from a file and read again whenever the file changes,
//! so that a rotated token is used without a restart.

use std::fs::Metadata;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::SystemTime;

use hyper::header::HeaderValue;
use thiserror::Error;

use super::super::SpecError;
use super::WebhookError;

use crate::sync::lock;

/// What is wrong with a token file. Never holds the token.
#[derive(Debug, Error)]
pub enum TokenProblem {
    /// The file cannot be read, or looked at.
    #[error(transparent)]
    Read(std::io::Error),
    /// The file holds only whitespace.
    #[error("holds no token")]
    Empty,
    /// The token holds characters an HTTP header cannot carry.
    #[error("the token is not a valid HTTP header value")]
    NotAHeader,
}

/// What the `Authorization` header holds before the token.
const BEARER: &str = "Bearer ";

/// A token file and the `Authorization` header made from what it last held.
///
/// Each call looks at the file's metadata (one `stat`, following symlinks) and reads the file
/// again only when its size, modification time or inode changed. That sees an in-place write
/// as well as the symlink swap by which Kubernetes updates a mounted Secret, at the cost of a
/// `stat` per call, which is small next to a network round trip and needs no watcher thread.
#[derive(Debug)]
pub(super) struct TokenFile {
    path: PathBuf,
    last: Mutex<Option<(Stamp, HeaderValue)>>,
}

/// What tells one version of a file from another without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    inode: u64,
}

impl Stamp {
    fn of(metadata: &Metadata) -> Stamp {
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(metadata);
        #[cfg(not(unix))]
        let inode = 0;
        Stamp {
            len: metadata.len(),
            modified: metadata.modified().ok(),
            inode,
        }
    }
}

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
        TokenFile {
            path,
            last: Mutex::new(None),
        }
    }

    /// Checks at boot that the file holds a token that can be sent.
    ///
    /// # Errors
    /// [`SpecError::File`] naming `bearer_token_file`; the token is never shown.
    pub(super) fn check(&self) -> Result<(), SpecError> {
        self.read().map(drop).map_err(|problem| SpecError::File {
            field: "bearer_token_file",
            path: self.path.clone(),
            problem: problem.to_string(),
        })
    }

    /// The `Authorization` header for a call, from the file as it is now.
    ///
    /// # Errors
    /// [`WebhookError::Token`] when the file cannot be read (or looked at) or holds no token
    /// that can be sent. The token is never in the error.
    pub(super) fn header(&self) -> Result<HeaderValue, WebhookError> {
        self.current().map_err(|problem| WebhookError::Token {
            path: self.path.clone(),
            problem,
        })
    }

    fn current(&self) -> Result<HeaderValue, TokenProblem> {
        let metadata = std::fs::metadata(&self.path).map_err(TokenProblem::Read)?;
        let stamp = Stamp::of(&metadata);
        // A panic while the lock was held cannot leave a half-written entry: keep using it.
        let mut last = lock(&self.last);
        if let Some((seen, header)) = last.as_ref() {
            if *seen == stamp {
                return Ok(header.clone());
            }
        }
        let header = self.read()?;
        *last = Some((stamp, header.clone()));
        Ok(header)
    }

    fn read(&self) -> Result<HeaderValue, TokenProblem> {
        let text = std::fs::read_to_string(&self.path).map_err(TokenProblem::Read)?;
        let token = text.trim();
        if token.is_empty() {
            return Err(TokenProblem::Empty);
        }
        let mut header = HeaderValue::try_from(format!("{BEARER}{token}"))
            .map_err(|_| TokenProblem::NotAHeader)?;
        header.set_sensitive(true);
        Ok(header)
    }
}
