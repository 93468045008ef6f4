//! The admission contract of ADR 0100: what a hook sees, what it may answer, and the chain that
//! turns the answers of every registered hook into one verdict per attempt.
//!
//! Nothing here does I/O, spawns, logs or knows about actors, HTTP or telemetry: the module returns
//! facts, and the dispatcher and the supervisor act on them. It also holds the webhook's wire
//! types, so that the client and any server share one definition of the protocol.
//!
//! | ADR 0100 | here |
//! |---|---|
//! | §1 the contract | [`Request`], [`Decision`], [`Changes`], [`Toleration`], [`Hook`] |
//! | §3, §4, §7 what a hook may change | [`ChangeRules`], [`ChangeError`], [`apply_changes`], [`Privilege`] |
//! | §4 the image allowlist rule | [`image_allowed`] |
//! | §4 what Kubernetes accepts (a hook's changes and a DAG's own fields) | `check_entries`, `check_tolerations`, `check_name`, `check_annotations_size` |
//! | §5 reasons | [`clean_reason`], and [`escape_controls`] for ids and text printed on a line |
//! | §6 the chain | [`Chain`], [`ChainRun`], [`Verdict`] |
//! | §7 the executor policy's refusals | [`PolicyRefusal`], [`PolicyRule`], `refuse_dag_placement` |
//! | durations in config, specs, flags and `?timeout=` | [`parse_duration`], `parse_nanos` |
//! | §8 the webhook's wire format | [`RequestEnvelope`], [`AnswerEnvelope`], [`request_schema`], [`answer_schema`], `is_json_content_type` |
//! | JSON read as Go reads it: no object from an array | [`strict_from_str`], `Strict` |

mod chain;
mod changes;
mod decision;
mod duration;
mod hook;
mod image;
mod names;
mod outcome;
mod policy;
mod quantity;
mod reason;
mod request;
mod strict;
mod toleration;
mod wire;

pub use chain::{Chain, ChainRun, Recorded, Verdict};
pub(crate) use changes::annotations_bytes;
pub(crate) use changes::check_annotations_size;
pub(crate) use changes::check_entries;
pub(crate) use changes::check_name;
pub(crate) use changes::check_tolerations;
pub use changes::{ChangeError, ChangeRules, Field, MAX_ANNOTATIONS_BYTES, Unit, apply_changes};
pub use decision::{Changes, Decision};
pub(crate) use duration::Grammar;
pub(crate) use duration::parse_nanos;
pub use duration::{DurationError, parse_duration};
pub use hook::{Hook, HookError, HookFuture, Privilege};
pub use image::{image_allowed, image_repository};
pub(crate) use names::dns_label_problem;
pub(crate) use names::env_name_problem;
pub(crate) use names::subdomain_problem;
pub use names::{MAX_NAME, is_reserved_key, label_value_problem, qualified_name_problem};
pub use outcome::Outcome;
pub(crate) use policy::refuse_dag_placement;
pub use policy::{PolicyRefusal, PolicyRule};
pub(crate) use quantity::{MAX_QUANTITY, is_below, is_capped, parse_capped};
pub use quantity::{QuantityError, cpu_quantity, memory_quantity, parse_milli};
pub(crate) use reason::display_duration;
pub(crate) use reason::error_lines;
pub use reason::{
    MAX_REASON_BYTES, clean_reason, error_chain, escape_controls, is_control_or_format,
};
pub use request::{API_VERSION, Execution, Request, ResourceList, Resources};
pub(crate) use strict::{Strict, deserialize_strictly, error_path};
pub use strict::{strict_from_slice, strict_from_str};
pub use toleration::{TaintEffect, Toleration, TolerationOperator};
pub(crate) use wire::Key;
pub(crate) use wire::is_json_content_type;
pub use wire::{
    AnswerEnvelope, AnswerError, DecisionKind, RequestEnvelope, answer_schema, request_schema,
};
