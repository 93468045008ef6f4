//! Built-in hooks: those an operator declares in config, under `execution.admission.hooks`
//! (the webhook among them), and the executor policy, `executor.policy`, which is always the
//! chain's last hook ([`Policy`]).
//!
//! Each entry is tagged by `type`, has a `name` unique in the chain, and becomes one
//! [`crate::admission::Hook`]; the chain runs them in the order they are listed, each seeing the
//! earlier hooks' changes (ADR 0100 §6). They are registered unprivileged, like an operator's
//! hook ([`crate::admission::Privilege`]): they set only fields any hook may set. [`chain`]
//! registers them, then the executor policy when one is set, last and privileged.
//!
//! | `type` | hook | answers |
//! |---|---|---|
//! | `placement` | [`Placement`]: Volcano-style resource groups, the first match wins | `AdmitWith` |
//! | `freeze` | [`Freeze`]: a time window, per tenant | `Hold` |
//! | `deny` | [`Deny`]: a match | `Refuse` |
//! | `webhook` | [`Webhook`]: an HTTPS endpoint (ADR 0100 §8), see [`webhook`] | any |
//!
//! Which attempts a hook acts on is one shared rule, [`Matcher`].
//!
//! ```yaml
//! execution:
//!   admission:
//!     hooks:
//!       - type: freeze
//!         name: finance-freeze
//!         tenants: [finance]
//!         for: 3s
//!       - type: deny
//!         name: suspended-tenants
//!         match: {tenants: [umbrella]}
//!         reason: tenant umbrella is suspended for unpaid invoices
//!       - type: placement
//!         name: gpu-placement
//!         groups:
//!           - match: {tenants: [gpu-lab]}
//!             set: {node_selector: {pool: gpu}, priority_class: high-priority}
//! ```
//!
//! This module uses only [`crate::admission`] (and, for the webhook, its HTTP client); config
//! parsing and key names live in [`crate::config`].

mod deny;
mod freeze;
mod local;
mod matcher;
mod placement;
mod policy;
mod spec;
pub mod webhook;

pub use deny::{Deny, DenySpec};
pub(crate) use freeze::SystemClock;
pub use freeze::{Clock, Freeze, FreezeSpec, Window};
pub use local::LocalRule;
pub use matcher::Matcher;
pub use placement::{Placement, PlacementSpec, ResourceGroup};
pub use policy::{
    ImageRules, MetadataRules, POLICY_HOOK, PlacementRules, Policy, PolicyError, PolicySpec,
    Quantity, ResourceMax, ResourceRules, ServiceAccountRules,
};
pub use spec::{HookSpec, SpecError, build, build_with_clock, chain};
pub use webhook::{Webhook, WebhookError, WebhookSpec};
