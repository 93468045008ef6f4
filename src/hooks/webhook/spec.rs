//! A webhook as config declares it, and what is checked about it at boot: its URL, its files.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use hyper::Uri;
use serde::{Deserialize, Serialize};

use super::super::SpecError;
use super::super::freeze::{format_duration, parse_duration};

/// The config of a `webhook` hook (ADR 0100 §8): an HTTPS endpoint that is sent each attempt
/// and answers with the decision.
///
/// `timeout` and `fail_open` are the hook's own supervision settings; unset, the admission
/// settings (`execution.admission.timeout`, `execution.admission.fail_open`) apply. Durations
/// are written as `500ms` or `2s`.
///
/// ```
/// use dexaflow_admission::hooks::HookSpec;
///
/// let spec: HookSpec = serde_yaml_ng::from_str(
///     "type: webhook\nname: quota\nurl: https://quota.example.com/admit\ntimeout: 300ms\n",
/// )
/// .unwrap();
/// assert_eq!(spec.name(), "quota");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "WebhookFields", into = "WebhookFields")]
pub struct WebhookSpec {
    /// The hook's name, unique in the chain.
    pub name: String,
    /// Where each call is POSTed: `https`, or `http` to a loopback host only.
    pub url: String,
    /// A PEM file of the certificate authorities the server's certificate must chain to; the
    /// system's roots when `None`.
    pub ca_bundle: Option<PathBuf>,
    /// A file holding the bearer token sent with each call, read again whenever it changes
    /// (surrounding whitespace trimmed); no `Authorization` header when `None`.
    pub bearer_token_file: Option<PathBuf>,
    /// A PEM certificate chain to present to the server (mutual TLS), with `client_key`.
    pub client_cert: Option<PathBuf>,
    /// The PEM private key of `client_cert`.
    pub client_key: Option<PathBuf>,
    /// The most one call may take; `execution.admission.timeout` when `None`.
    pub timeout: Option<Duration>,
    /// Whether a broken call admits unchanged; `execution.admission.fail_open` when `None`.
    pub fail_open: Option<bool>,
}

/// The YAML shape of a [`WebhookSpec`], before its timeout is parsed.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WebhookFields {
    name: String,
    url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ca_bundle: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    bearer_token_file: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    client_cert: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    client_key: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    timeout: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fail_open: Option<bool>,
}

impl TryFrom<WebhookFields> for WebhookSpec {
    type Error = SpecError;

    fn try_from(fields: WebhookFields) -> Result<WebhookSpec, SpecError> {
        let timeout = fields
            .timeout
            .map(|text| parse_duration("timeout", &text))
            .transpose()?;
        if timeout.is_some_and(|timeout| timeout.is_zero()) {
            return Err(SpecError::ZeroTimeout);
        }
        Ok(WebhookSpec {
            name: fields.name,
            url: fields.url,
            ca_bundle: fields.ca_bundle,
            bearer_token_file: fields.bearer_token_file,
            client_cert: fields.client_cert,
            client_key: fields.client_key,
            timeout,
            fail_open: fields.fail_open,
        })
    }
}

impl From<WebhookSpec> for WebhookFields {
    fn from(spec: WebhookSpec) -> WebhookFields {
        WebhookFields {
            name: spec.name,
            url: spec.url,
            ca_bundle: spec.ca_bundle,
            bearer_token_file: spec.bearer_token_file,
            client_cert: spec.client_cert,
            client_key: spec.client_key,
            timeout: spec.timeout.map(format_duration),
            fail_open: spec.fail_open,
        }
    }
}

impl WebhookSpec {
    /// A webhook named `name` at `url`, with the system's roots, no token, no client
    /// certificate and the admission settings' timeout and fail-open.
    pub fn new(name: impl Into<String>, url: impl Into<String>) -> WebhookSpec {
        WebhookSpec {
            name: name.into(),
            url: url.into(),
            ca_bundle: None,
            bearer_token_file: None,
            client_cert: None,
            client_key: None,
            timeout: None,
            fail_open: None,
        }
    }

    /// Checks what deserializing cannot, so that a webhook that could never be called fails at
    /// boot: the URL (`https` unless its host is loopback), and that every file it names can
    /// be read and holds what it must (certificates, a key that fits the certificate, a token).
    ///
    /// # Errors
    /// Every [`SpecError`] found, each naming its field.
    pub fn check(&self) -> Result<(), Vec<SpecError>> {
        let mut problems = Vec::new();
        if let Err(problem) = self.endpoint() {
            problems.push(problem);
        }
        if let Err(more) = super::tls::client_config(self) {
            problems.extend(more);
        }
        if let Some(path) = &self.bearer_token_file {
            if let Err(problem) = super::token::TokenFile::new(path.clone()).check() {
                problems.push(problem);
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }

    /// Where calls go, once the URL has passed the rules.
    pub(super) fn endpoint(&self) -> Result<Endpoint, SpecError> {
        Endpoint::parse(&self.url)
    }
}

/// A webhook's URL, checked, and how each call's URL is made from it.
#[derive(Debug, Clone)]
pub(super) struct Endpoint {
    uri: Uri,
    /// Whether the URL has a query already, so that the deadline is added with `&`.
    has_query: bool,
    /// Whether it is `https`.
    pub(super) is_https: bool,
}

impl Endpoint {
    fn parse(url: &str) -> Result<Endpoint, SpecError> {
        let invalid = || SpecError::InvalidUrl {
            url: url.to_owned(),
        };
        let uri: Uri = url.parse().map_err(|_| invalid())?;
        let authority = uri.authority().ok_or_else(invalid)?;
        if authority.as_str().contains('@') {
            return Err(SpecError::UrlCredentials);
        }
        if authority.host().is_empty() {
            return Err(invalid());
        }
        let names_a_timeout = uri.query().is_some_and(|query| {
            query
                .split('&')
                .any(|pair| pair.split('=').next() == Some("timeout"))
        });
        if names_a_timeout {
            return Err(SpecError::UrlTimeout {
                url: url.to_owned(),
            });
        }
        let is_https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") if is_loopback(authority.host()) => false,
            Some("http") => {
                return Err(SpecError::InsecureUrl {
                    url: url.to_owned(),
                });
            }
            _ => return Err(invalid()),
        };
        Ok(Endpoint {
            has_query: uri.query().is_some(),
            uri,
            is_https,
        })
    }

    /// The URL of one call: with `?timeout=` the deadline in Go's duration syntax when the call
    /// has one, as the Kubernetes API server tells its webhooks, so that the server can give up
    /// before the caller does.
    pub(super) fn call_uri(&self, limit: Option<Duration>) -> Uri {
        let Some(limit) = limit else {
            return self.uri.clone();
        };
        let separator = if self.has_query { '&' } else { '?' };
        let with_deadline = format!("{}{separator}timeout={}", self.uri, go_duration(limit));
        // A checked URI with a query parameter of digits and a unit added is still a URI.
        with_deadline.parse().unwrap_or_else(|_| self.uri.clone())
    }
}

/// Whether `host`, as a URL spells it, is loopback: `127.0.0.0/8`, `::1` or `localhost`.
fn is_loopback(host: &str) -> bool {
    let bare = host
        .strip_prefix('[')
        .and_then(|inner| inner.strip_suffix(']'))
        .unwrap_or(host);
    host.eq_ignore_ascii_case("localhost")
        || bare
            .parse::<IpAddr>()
            .is_ok_and(|address| address.is_loopback())
}

/// `duration` in Go's duration syntax, rounded down so that the server never believes it has
/// longer than it has: whole milliseconds (`480ms`), or microseconds below one (`800us`).
pub(super) fn go_duration(duration: Duration) -> String {
    if duration >= Duration::from_millis(1) {
        format!("{}ms", duration.as_millis())
    } else {
        format!("{}us", duration.as_micros().max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadline_is_written_in_go_duration_syntax_rounded_down() {
        assert_eq!(go_duration(Duration::from_millis(480)), "480ms");
        assert_eq!(go_duration(Duration::from_micros(480_900)), "480ms");
        assert_eq!(go_duration(Duration::from_secs(2)), "2000ms");
        assert_eq!(go_duration(Duration::from_micros(800)), "800us");
        assert_eq!(go_duration(Duration::from_nanos(10)), "1us");
    }

    #[test]
    fn deadline_is_added_to_the_url_as_a_query_parameter() {
        let plain = Endpoint::parse("https://quota.example.com/admit").expect("valid");
        let with_query =
            Endpoint::parse("https://quota.example.com/admit?team=etl").expect("valid");

        assert_eq!(
            plain.call_uri(Some(Duration::from_millis(480))).to_string(),
            "https://quota.example.com/admit?timeout=480ms"
        );
        assert_eq!(
            with_query
                .call_uri(Some(Duration::from_millis(480)))
                .to_string(),
            "https://quota.example.com/admit?team=etl&timeout=480ms"
        );
        assert_eq!(
            plain.call_uri(None).to_string(),
            "https://quota.example.com/admit"
        );
    }

    #[test]
    fn plain_http_is_allowed_to_loopback_hosts_only() {
        for url in [
            "http://127.0.0.1:8443/admit",
            "http://127.1.2.3/admit",
            "http://[::1]:8443/admit",
            "http://localhost:8443/admit",
            "http://LOCALHOST/admit",
            "https://quota.example.com/admit",
        ] {
            assert!(Endpoint::parse(url).is_ok(), "{url}");
        }
        for url in [
            "http://quota.example.com/admit",
            "http://10.0.0.1/admit",
            "http://[::2]/admit",
            "http://localhost.example.com/admit",
        ] {
            assert!(
                matches!(Endpoint::parse(url), Err(SpecError::InsecureUrl { .. })),
                "{url}"
            );
        }
    }

    #[test]
    fn url_that_is_not_absolute_http_or_https_is_invalid() {
        for url in [
            "quota.example.com/admit",
            "/admit",
            "ftp://quota.example.com/",
            "",
        ] {
            assert!(
                matches!(Endpoint::parse(url), Err(SpecError::InvalidUrl { .. })),
                "{url}"
            );
        }
    }

    #[test]
    fn url_with_a_password_is_refused_without_showing_it() {
        let error = Endpoint::parse("https://svc:hunter2@quota.example.com/admit")
            .expect_err("credentials");

        assert_eq!(error, SpecError::UrlCredentials);
        assert!(!error.to_string().contains("hunter2"));
    }

    #[test]
    fn a_url_with_its_own_timeout_parameter_is_refused_naming_it() {
        for url in [
            "https://quota.example.com/admit?timeout=30s",
            "https://quota.example.com/admit?team=etl&timeout",
        ] {
            let error = Endpoint::parse(url).expect_err("a timeout parameter");

            assert_eq!(
                error,
                SpecError::UrlTimeout {
                    url: url.to_owned()
                }
            );
            assert!(
                error
                    .to_string()
                    .contains("must not carry a timeout parameter")
            );
        }
        assert!(Endpoint::parse("https://quota.example.com/admit?timeouts=2").is_ok());
    }
}
