//! The `auth.*` section: the agent token's secret and lifetime.

use std::time::Duration;

use serde_yaml_ng::Value;

use super::keys::{TOKEN_SECRET, TOKEN_TTL};
use super::reader::{Problem, Reader, expected};
use super::{ConfigError, Key};
use crate::dispatch::settings::{DEFAULT_TOKEN_TTL, MIN_SECRET_BYTES, TokenSettings};

impl Reader {
    /// The token TTL and the secret, `None` when none is set: a secret is generated only once
    /// the config is known to be good.
    pub(super) fn token(&mut self) -> (Option<Vec<u8>>, Duration) {
        let ttl = self.duration(TOKEN_TTL, DEFAULT_TOKEN_TTL, Duration::from_nanos(1));
        let secret = self.get(
            TOKEN_SECRET,
            None,
            |raw| {
                // The value is never quoted back, only its kind (`Reader::get` holds every
                // secret key to that): it may be most of a real secret. A secret of digits or
                // `0x…` is a number to YAML, and what YAML made of it is not the secret.
                let text = raw.value.as_str().ok_or_else(|| {
                    expected(
                        "text (quote a secret that YAML would read as a number or another value)",
                    )
                })?;
                if text.len() < MIN_SECRET_BYTES {
                    return Err(Problem {
                        at: String::new(),
                        expected: format!("a secret of at least {MIN_SECRET_BYTES} bytes"),
                        got: Some(format!("{} bytes", text.len())),
                    });
                }
                Ok(Some(text.as_bytes().to_vec()))
            },
            |_| Value::Null,
        );
        // Never rendered: `Config::to_yaml` says only whether it was set.
        self.effective.remove(TOKEN_SECRET);
        (secret, ttl)
    }

    /// The token settings, with a random secret when none was set, and whether one was set.
    pub(super) fn token_settings(
        &mut self,
        secret: Option<Vec<u8>>,
        ttl: Duration,
    ) -> (TokenSettings, bool) {
        let secret_is_set = secret.is_some();
        let secret = match secret {
            Some(secret) => secret,
            // Never a predictable key: without the generator, the install must set one.
            None => TokenSettings::random_secret().unwrap_or_else(|error| {
                self.errors.push(ConfigError::Required {
                    key: Key::file(TOKEN_SECRET),
                    when: format!("no random secret can be generated ({error})"),
                });
                Vec::new()
            }),
        };
        (TokenSettings { secret, ttl }, secret_is_set)
    }
}
