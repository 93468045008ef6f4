//! The `webhook` hook (ADR 0100 §8): admission over HTTPS, for installs without their own binary.
//!
//! A webhook is a hook like any other: in the chain, behind its own breaker, under its timeout
//! and the chain budget, with panic recovery, counted by outcome. Each call POSTs the attempt as
//! a [`crate::admission::RequestEnvelope`] and takes the decision from the
//! [`crate::admission::AnswerEnvelope`] that comes back; the wire types and their JSON Schemas
//! live in [`crate::admission`], this module only sends and receives them.
//!
//! - [`WebhookSpec`]: the declaration (`type: webhook` under `execution.admission.hooks`, or
//!   `execution.admission.webhook.*`) and what is checked about it at boot.
//! - [`Webhook`]: the hook, with [`CONNECTION_LANES`] connection pools (kept alive, HTTP/2 where
//!   the server offers it) for all its calls.
//! - [`WebhookError`]: every way a call can fail, each a hook failure, never an admit.
//!
//! ```yaml
//! execution:
//!   admission:
//!     hooks:
//!       - type: webhook
//!         name: quota
//!         url: https://quota.example.com/admit
//!         ca_bundle: /etc/dexaflow/quota-ca.pem
//!         bearer_token_file: /var/run/secrets/quota/token
//!         timeout: 300ms
//! ```

mod error;
mod hook;
mod spec;
mod tls;
mod token;

pub use crate::token_file::TokenProblem;
pub use error::WebhookError;
pub use hook::{CONNECTION_LANES, HttpClient, Webhook};
pub use spec::WebhookSpec;

/// The most bytes of an answer body a webhook reads; a longer answer is a failure, and reading
/// stops there.
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;
