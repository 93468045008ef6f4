//! Why a webhook call gave no decision.

use std::path::PathBuf;

use hyper::StatusCode;
use thiserror::Error;

use super::MAX_ANSWER_BYTES;
use crate::admission::AnswerError;
use crate::hooks::SpecError;
use crate::token_file::TokenProblem;

/// Why one call to a webhook gave no decision. Every variant is the hook failing: the attempt
/// waits (or is admitted unchanged under fail-open) and the hook's breaker counts it; none is
/// ever an admit.
///
/// The text says what was wrong, and the task instance shows it after
/// `admission hook unavailable: <hook>: `, cleaned and cut like a reason. It never holds the
/// bearer token.
#[derive(Debug, Error)]
pub enum WebhookError {
    /// The webhook's files could no longer be loaded when it was built, after they passed the
    /// boot check.
    #[error("not set up")]
    Setup(#[source] SpecError),
    /// The bearer token file cannot be read, or holds no token that can be sent.
    #[error("bearer_token_file {}", path.display())]
    Token {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        problem: TokenProblem,
    },
    /// No random uid could be drawn for the call.
    #[error("no random uid for the call")]
    Uid(#[source] getrandom::Error),
    /// The request did not get an answer: the connection, TLS or HTTP failed.
    #[error("request failed")]
    Send(#[source] hyper_util::client::legacy::Error),
    /// The server redirected, and redirects are never followed.
    #[error("answered {status}, a redirect, which is not followed")]
    Redirect {
        /// The status.
        status: StatusCode,
    },
    /// A status other than 200.
    #[error("answered {status}, expected 200 OK")]
    Status {
        /// The status.
        status: StatusCode,
    },
    /// A `Content-Type` other than `application/json` (with any parameters), or none.
    #[error("answer Content-Type is {}, expected application/json", got.as_deref().map_or_else(|| "missing".to_owned(), |got| format!("{got:?}")))]
    ContentType {
        /// The header's value; `None` when there is none.
        got: Option<String>,
    },
    /// An answer body over [`MAX_ANSWER_BYTES`]; reading stopped there.
    #[error("answer body is over {MAX_ANSWER_BYTES} bytes")]
    TooLarge,
    /// The answer body could not be read to its end.
    #[error("reading the answer failed")]
    Read(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The answer body is not JSON.
    #[error("answer is not JSON")]
    NotJson(#[source] serde_json::Error),
    /// The answer is JSON but not an answer: an unknown field, a missing one (such as `uid`),
    /// or a value of the wrong type.
    #[error("answer is not a dexaflow.io/admission/v1 answer")]
    Shape(#[source] serde_json::Error),
    /// The answer breaks a rule: another `api_version` or `uid`, a `reason` or `changes` where
    /// its decision needs none or lacks one.
    #[error("answer")]
    Answer(#[source] AnswerError),
}
