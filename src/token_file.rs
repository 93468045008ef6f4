//! A bearer token read from a file, and read again whenever the file changes, so that a rotated
//! token is used without a restart: the one reader of the webhook's `bearer_token_file` and of a
//! kubeconfig's `tokenFile`.
//!
//! The token is the file's text with surrounding whitespace trimmed, as client-go and kubectl
//! read a token file: a file written by `echo`, or by an editor, ends in a newline, which no
//! `Authorization` header could carry.

use std::fs::Metadata;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use http::HeaderValue;
use thiserror::Error;

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
pub(crate) const BEARER: &str = "Bearer ";

/// A token file and the `Authorization` header made from what it last held.
///
/// Each [`TokenFile::header`] looks at the file's metadata (one `stat`, following symlinks) and
/// reads the file again only when its size, modification time or inode changed. That sees an
/// in-place write as well as the symlink swap by which Kubernetes updates a mounted Secret, at
/// the cost of a `stat` per call, which is small next to a network round trip and needs no
/// watcher thread.
#[derive(Debug)]
pub(crate) struct TokenFile {
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

impl TokenFile {
    /// The token file at `path`, not read yet.
    pub(crate) fn new(path: PathBuf) -> TokenFile {
        TokenFile {
            path,
            last: Mutex::new(None),
        }
    }

    /// The file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The `Authorization` header for a request, from the file as it is now.
    ///
    /// # Errors
    /// [`TokenProblem`] when the file cannot be read (or looked at) or holds no token that can
    /// be sent. The token is never in the error.
    pub(crate) fn header(&self) -> Result<HeaderValue, TokenProblem> {
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

    /// The `Authorization` header from the file read now, whatever was read before: the check
    /// at start.
    ///
    /// # Errors
    /// As [`TokenFile::header`].
    pub(crate) fn read(&self) -> Result<HeaderValue, TokenProblem> {
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
