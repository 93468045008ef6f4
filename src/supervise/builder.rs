//! The one way a supervised chain is made, so that the dispatcher and the webhook server build
//! theirs alike: hooks in order, the install's change rules (its allowlists, default service
//! account and resource unit), the supervision settings, and who is told of every call.

use std::sync::Arc;

use super::{Settings, SupervisedChain};
use crate::admission::{Chain, ChangeRules, Hook};
use crate::events::{Ignore, SupervisionEvents};

/// What a [`SupervisedChain`] is made of, gathered before its breakers start.
///
/// ```
/// use std::sync::Arc;
/// use dexaflow_admission::Install;
/// use dexaflow_admission::admission::{Decision, Hook, HookFuture, Request, Verdict};
/// use dexaflow_admission::supervise::{ChainBuilder, Settings};
///
/// struct Allow;
/// impl Hook for Allow {
///     fn name(&self) -> &str { "allow" }
///     fn is_remote(&self) -> bool { false }
///     fn admit<'a>(&'a self, _: &'a Request) -> HookFuture<'a> {
///         Box::pin(async { Ok(Decision::Admit) })
///     }
/// }
///
/// // The install's own rules (allowlists, default service account, unit), never made-up ones.
/// let rules = Install::defaults().expect("valid defaults").settings().change_rules();
/// let builder = ChainBuilder::new(rules, Settings::default()).hook(Arc::new(Allow));
/// // The breakers are actors: start them inside an actix system.
/// dexaflow_admission::actix::System::new().block_on(async move {
///     let chain = builder.start().expect("one hook");
///     let verdict = chain.admit(Request::new("acme", "etl", "load")).await;
///     assert!(matches!(verdict, Verdict::Admit { .. }));
/// });
/// ```
#[derive(Clone)]
pub struct ChainBuilder {
    chain: Chain,
    settings: Settings,
    observer: Arc<dyn SupervisionEvents>,
}

impl std::fmt::Debug for ChainBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChainBuilder")
            .field("chain", &self.chain)
            .field("settings", &self.settings)
            .finish()
    }
}

impl ChainBuilder {
    /// A builder of a chain with no hook yet, whose hooks' changes must pass `rules` and whose
    /// calls are supervised by `settings`; nobody is told of the calls until
    /// [`ChainBuilder::observer`] says who.
    pub fn new(rules: ChangeRules, settings: Settings) -> ChainBuilder {
        ChainBuilder::from_chain(Chain::new(rules), settings)
    }

    /// A builder of `chain` as it is: for a chain the crate assembled with its privileged last
    /// hook (the executor policy, `crate::hooks::chain`), to which more hooks may still be added
    /// before that last one.
    pub(crate) fn from_chain(chain: Chain, settings: Settings) -> ChainBuilder {
        ChainBuilder {
            chain,
            settings,
            observer: Arc::new(Ignore),
        }
    }

    /// Adds `hook` after the hooks added so far (and before a privileged last hook).
    pub fn hook(mut self, hook: Arc<dyn Hook>) -> ChainBuilder {
        self.chain = self.chain.with_hook(hook);
        self
    }

    /// Adds `hooks`, in order, after the hooks added so far.
    pub fn hooks(self, hooks: impl IntoIterator<Item = Arc<dyn Hook>>) -> ChainBuilder {
        hooks.into_iter().fold(self, ChainBuilder::hook)
    }

    /// Tells `observer` of every hook call, chain and breaker change, and of the hooks' names
    /// when the chain starts.
    pub fn observer(mut self, observer: Arc<dyn SupervisionEvents>) -> ChainBuilder {
        self.observer = observer;
        self
    }

    /// Whether no hook was added: [`ChainBuilder::start`] then makes no chain.
    pub fn is_empty(&self) -> bool {
        self.chain.is_empty()
    }

    /// Starts one breaker per hook on the current arbiter and returns the supervised chain;
    /// `None` when no hook was added, so that the caller builds no request at all (ADR 0100 §6).
    ///
    /// # Panics
    /// Outside a running actix system, when there is a hook (the breakers are actors).
    pub fn start(self) -> Option<SupervisedChain> {
        (!self.chain.is_empty())
            .then(|| SupervisedChain::start(self.chain, &self.settings, self.observer))
    }
}
