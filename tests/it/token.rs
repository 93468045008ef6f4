//! The agent token: an HS256 JWT whose signature verifies with the install's key only, and
//! whose claims name the attempt.

use crate::fakes;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use dexaflow_admission::dispatch::settings::TokenSettings;
use dexaflow_admission::dispatch::token::{
    AUDIENCE, AgentIdentity, Claims, Hs256Minter, Minter, TokenError,
};
use hmac::{Hmac, Mac};
use sha2::Sha256;

const KEY: &[u8] = b"the install's agent token key";
const ISSUED_AT: u64 = 1_700_000_000;

fn minter(secret: &[u8]) -> Hs256Minter {
    Hs256Minter::new(TokenSettings {
        secret: secret.to_vec(),
        ttl: Duration::from_secs(90),
    })
}

fn identity() -> AgentIdentity {
    let key = fakes::manual_task().key;
    AgentIdentity::new(&key, key.task_instance_id(), 2, 7)
}

/// The three parts of a compact JWT.
fn parts(token: &str) -> (&str, &str, &str) {
    let mut parts = token.split('.');
    let header = parts.next().unwrap();
    let payload = parts.next().unwrap();
    let signature = parts.next().unwrap();
    assert_eq!(parts.next(), None, "a JWT has three parts");
    (header, payload, signature)
}

/// Whether the token's signature is the HMAC-SHA256 of its first two parts under `key`.
fn verifies(token: &str, key: &[u8]) -> bool {
    let (header, payload, signature) = parts(token);
    let mut mac = Hmac::<Sha256>::new_from_slice(key).unwrap();
    mac.update(format!("{header}.{payload}").as_bytes());
    let signature = URL_SAFE_NO_PAD.decode(signature).unwrap();
    mac.verify_slice(&signature).is_ok()
}

fn claims(token: &str) -> Claims {
    let (_, payload, _) = parts(token);
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap()
}

#[test]
fn the_header_names_hs256() {
    let token = minter(KEY).mint_at(&identity(), ISSUED_AT).unwrap();
    let (header, _, _) = parts(&token);
    let header: serde_json::Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(header).unwrap()).unwrap();
    assert_eq!(header["alg"], "HS256");
    assert_eq!(header["typ"], "JWT");
}

#[test]
fn the_signature_verifies_with_the_same_key() {
    let token = minter(KEY).mint_at(&identity(), ISSUED_AT).unwrap();
    assert!(verifies(&token, KEY));
}

#[test]
fn the_signature_does_not_verify_with_another_key() {
    let token = minter(KEY).mint_at(&identity(), ISSUED_AT).unwrap();
    assert!(!verifies(&token, b"another key"));
}

#[test]
fn a_changed_payload_no_longer_verifies() {
    let token = minter(KEY).mint_at(&identity(), ISSUED_AT).unwrap();
    let (header, _, signature) = parts(&token);
    let mut forged = claims(&token);
    forged.tenant_id = "other".to_owned();
    let forged_payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&forged).unwrap());
    assert!(!verifies(
        &format!("{header}.{forged_payload}.{signature}"),
        KEY
    ));
}

#[test]
fn the_claims_name_the_attempt_and_the_audience() {
    let token = minter(KEY).mint_at(&identity(), ISSUED_AT).unwrap();
    assert_eq!(
        claims(&token),
        Claims {
            sub: "acme.etl.manual__1.load".to_owned(),
            aud: AUDIENCE.to_owned(),
            tenant_id: "acme".to_owned(),
            dag_id: "etl".to_owned(),
            run_id: "manual__1".to_owned(),
            task_id: "load".to_owned(),
            try_number: 2,
            attempt_epoch: 7,
            oiat: ISSUED_AT,
            iat: ISSUED_AT,
            exp: ISSUED_AT + 90,
        }
    );
    assert_eq!(AUDIENCE, "dexaflow-agent");
}

#[test]
fn mint_uses_the_wall_clock() {
    let before = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let token = minter(KEY).mint(&identity()).unwrap();
    let after = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let claims = claims(&token);
    assert!(before <= claims.iat && claims.iat <= after);
    assert_eq!(claims.exp, claims.iat + 90);
    assert!(verifies(&token, KEY));
}

#[test]
fn an_empty_key_mints_no_token() {
    let result = minter(b"").mint(&identity());
    assert!(matches!(result, Err(TokenError::EmptySecret)));
}

#[test]
fn the_minter_never_prints_its_key() {
    let printed = format!("{:?}", minter(KEY));
    assert!(!printed.contains("install's agent token key"), "{printed}");
    assert!(!printed.contains("116, 104, 101"), "{printed}");
}

#[test]
fn the_token_settings_never_print_their_key_only_its_length() {
    let settings = TokenSettings {
        secret: KEY.to_vec(),
        ttl: Duration::from_secs(90),
    };
    let printed = format!("{settings:?}");
    assert!(!printed.contains("116, 104, 101"), "{printed}");
    assert!(
        printed.contains(&format!("<{} bytes>", KEY.len())),
        "{printed}"
    );
    assert!(printed.contains("90s"), "{printed}");
}
