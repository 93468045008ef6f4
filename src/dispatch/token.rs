//! The agent token: an HS256 JWT minted for each admitted attempt, after every refusal and hook
//! (ADR 0100 §2), so a refused or held attempt never gets one.
//!
//! The JWT is built by hand (HMAC-SHA256 over base64url without padding): the claims are fixed
//! and few, and a JWT library would bring parsing and algorithm negotiation the minter never
//! needs.

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use thiserror::Error;

use super::settings::TokenSettings;
use super::task::TaskKey;

/// The audience every agent token carries.
pub const AUDIENCE: &str = "dexaflow-agent";

/// The JOSE header of every agent token: `{"alg":"HS256","typ":"JWT"}`.
const HEADER: &str = r#"{"alg":"HS256","typ":"JWT"}"#;

/// Who a token is for: one attempt of one task instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentIdentity {
    /// The task instance id; the token's `sub`.
    pub task_instance_id: String,
    /// The tenant that owns the DAG.
    pub tenant_id: String,
    /// The DAG id.
    pub dag_id: String,
    /// The DAG run id.
    pub run_id: String,
    /// The task id.
    pub task_id: String,
    /// The try number of the attempt.
    pub try_number: u32,
    /// The attempt epoch claimed when the attempt was resolved, which tells two executions of
    /// one try apart.
    pub attempt_epoch: u64,
}

impl AgentIdentity {
    /// The identity of one attempt of the task instance `key`.
    pub fn new(
        key: &TaskKey,
        task_instance_id: impl Into<String>,
        try_number: u32,
        attempt_epoch: u64,
    ) -> AgentIdentity {
        AgentIdentity {
            task_instance_id: task_instance_id.into(),
            tenant_id: key.tenant.clone(),
            dag_id: key.dag_id.clone(),
            run_id: key.run_id.clone(),
            task_id: key.task_id.clone(),
            try_number,
            attempt_epoch,
        }
    }
}

/// The claims of an agent token, as they appear in its payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// The task instance id.
    pub sub: String,
    /// Always [`AUDIENCE`].
    pub aud: String,
    /// The tenant.
    pub tenant_id: String,
    /// The DAG id.
    pub dag_id: String,
    /// The DAG run id.
    pub run_id: String,
    /// The task id.
    pub task_id: String,
    /// The try number.
    pub try_number: u32,
    /// The attempt epoch.
    pub attempt_epoch: u64,
    /// When the attempt's first token was issued (seconds since the Unix epoch); renewals keep
    /// it, so the credential's total lifetime can be bounded.
    pub oiat: u64,
    /// When this token was issued (seconds since the Unix epoch).
    pub iat: u64,
    /// When this token expires (seconds since the Unix epoch).
    pub exp: u64,
}

/// Why a token could not be minted. The attempt is then not launched and spends a dispatch
/// attempt.
#[derive(Debug, Error)]
pub enum TokenError {
    /// The signing key is empty, so any token would be forgeable.
    #[error("agent token secret is empty")]
    EmptySecret,
    /// The system clock reads before the Unix epoch.
    #[error("system clock is before the unix epoch")]
    Clock,
    /// The claims could not be encoded.
    #[error("encoding agent token claims")]
    Encode(#[source] serde_json::Error),
}

/// Mints agent tokens; a trait so that tests can record what would have been minted.
pub trait Minter: Send + Sync {
    /// Mints a token for one attempt.
    ///
    /// # Errors
    /// A [`TokenError`] when no token can be minted.
    fn mint(&self, identity: &AgentIdentity) -> Result<String, TokenError>;
}

/// Mints HS256 agent tokens with the install's key. Its `Debug` shows the key's length only,
/// as [`TokenSettings`]' does.
#[derive(Debug, Clone)]
pub struct Hs256Minter {
    settings: TokenSettings,
}

impl Hs256Minter {
    /// A minter signing with `settings.secret`; each token lives `settings.ttl`.
    pub fn new(settings: TokenSettings) -> Hs256Minter {
        Hs256Minter { settings }
    }

    /// Mints a token as if it were `issued_at` (seconds since the Unix epoch), which also
    /// becomes its `oiat`.
    ///
    /// [`Minter::mint`] calls it with the wall clock; tests call it with a fixed time.
    ///
    /// # Errors
    /// [`TokenError::EmptySecret`] for an empty key, [`TokenError::Encode`] when the claims do
    /// not encode.
    pub fn mint_at(&self, identity: &AgentIdentity, issued_at: u64) -> Result<String, TokenError> {
        if self.settings.secret.is_empty() {
            return Err(TokenError::EmptySecret);
        }
        let claims = Claims {
            sub: identity.task_instance_id.clone(),
            aud: AUDIENCE.to_owned(),
            tenant_id: identity.tenant_id.clone(),
            dag_id: identity.dag_id.clone(),
            run_id: identity.run_id.clone(),
            task_id: identity.task_id.clone(),
            try_number: identity.try_number,
            attempt_epoch: identity.attempt_epoch,
            oiat: issued_at,
            iat: issued_at,
            exp: issued_at.saturating_add(self.settings.ttl.as_secs()),
        };
        let payload = serde_json::to_vec(&claims).map_err(TokenError::Encode)?;
        // Header (36), payload (4/3 of its bytes), signature (43) and the two dots.
        let mut token = String::with_capacity(36 + payload.len().div_ceil(3) * 4 + 43 + 2);
        URL_SAFE_NO_PAD.encode_string(HEADER, &mut token);
        token.push('.');
        URL_SAFE_NO_PAD.encode_string(&payload, &mut token);
        let signature = sign(&self.settings.secret, token.as_bytes());
        token.push('.');
        URL_SAFE_NO_PAD.encode_string(signature, &mut token);
        Ok(token)
    }
}

impl Minter for Hs256Minter {
    fn mint(&self, identity: &AgentIdentity) -> Result<String, TokenError> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_err(|_| TokenError::Clock)?;
        self.mint_at(identity, now.as_secs())
    }
}

/// HMAC-SHA256 of `message` under `key`.
fn sign(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(message);
    mac.finalize().into_bytes().into()
}
