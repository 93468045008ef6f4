//! The bearer token callers of an authenticated service present, read once at start.

use std::path::Path;

use http::HeaderValue;

use super::ServeError;

/// The token of `server.auth.bearer_token_file`. Its `Debug` output leaves the token out.
pub(crate) struct BearerToken(Vec<u8>);

impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BearerToken(<{} bytes>)", self.0.len())
    }
}

impl BearerToken {
    /// The token in the file at `path`, whitespace around it trimmed.
    ///
    /// # Errors
    /// [`ServeError::Read`] when the file cannot be read, [`ServeError::EmptyToken`] when it
    /// holds no token, [`ServeError::TokenNotAHeader`] when no header could carry it. None
    /// shows what the file holds.
    pub(crate) fn load(path: &Path) -> Result<BearerToken, ServeError> {
        let text = std::fs::read_to_string(path).map_err(|source| ServeError::Read {
            path: path.to_owned(),
            source,
        })?;
        let token = text.trim();
        if token.is_empty() {
            return Err(ServeError::EmptyToken {
                path: path.to_owned(),
            });
        }
        if HeaderValue::from_str(token).is_err() {
            return Err(ServeError::TokenNotAHeader {
                path: path.to_owned(),
            });
        }
        Ok(BearerToken(token.as_bytes().to_vec()))
    }

    /// Whether `authorization` is `Bearer <the token>`, the scheme in any case and followed by
    /// one or more spaces (RFC 7235: auth schemes are case-insensitive). The comparison takes
    /// the same time wherever the first difference is, so that timing does not tell a caller
    /// how much of a guess was right.
    pub(crate) fn accepts(&self, authorization: Option<&HeaderValue>) -> bool {
        let Some(presented) = authorization.and_then(|value| bearer_credentials(value.as_bytes()))
        else {
            return false;
        };
        presented.len() == self.0.len()
            && presented
                .iter()
                .zip(&self.0)
                .fold(0u8, |differs, (left, right)| differs | (left ^ right))
                == 0
    }
}

/// The credentials after a `Bearer` scheme written in any case and one or more spaces;
/// `None` for another scheme or none.
fn bearer_credentials(value: &[u8]) -> Option<&[u8]> {
    const SCHEME: &[u8] = b"bearer";
    let scheme = value.get(..SCHEME.len())?;
    let rest = &value[SCHEME.len()..];
    if !scheme.eq_ignore_ascii_case(SCHEME) || rest.first() != Some(&b' ') {
        return None;
    }
    let start = rest.iter().position(|&byte| byte != b' ')?;
    Some(&rest[start..])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token() -> BearerToken {
        BearerToken(b"s3cret".to_vec())
    }

    #[test]
    fn only_the_exact_token_after_bearer_in_any_case_is_accepted() {
        let header = |text: &'static str| HeaderValue::from_static(text);
        for accepted in [
            "Bearer s3cret",
            "bearer s3cret",
            "BEARER s3cret",
            "bEaReR s3cret",
            "Bearer   s3cret",
        ] {
            assert!(token().accepts(Some(&header(accepted))), "{accepted}");
        }
        for refused in [
            "Bearers3cret",
            "Bearer ",
            "Bearer",
            "Bearer\ts3cret",
            "Bearerx s3cret",
            "Bearer s3cre",
            "Bearer s3cret2",
            "Bearer S3cret",
            "s3cret",
            "Basic s3cret",
        ] {
            assert!(!token().accepts(Some(&header(refused))), "{refused}");
        }
        assert!(!token().accepts(None));
    }

    #[test]
    fn debug_output_leaves_the_token_out() {
        assert_eq!(format!("{:?}", token()), "BearerToken(<6 bytes>)");
    }
}
