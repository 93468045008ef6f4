//! The server's front door: settings, hooks, services and observers in, a running [`Server`]
//! out. `main`'s `serve` command, the tests and the examples all assemble the server here, so
//! there is one way to do it.

use std::sync::Arc;

use super::admit::{TaskAdmission, served_hooks};
use super::registry::{Service, check_enabled};
use super::server::{ReadyCondition, Server};
use super::{ServeError, Settings, builtin, services};
use crate::admission::{ChangeRules, Hook};
use crate::events::{Ignore, ServerEvents, SupervisionEvents};
use crate::hooks::HookSpec;
use crate::supervise::{self, ChainBuilder};

/// Assembles and starts the server: made by [`Server::builder`], started by
/// [`ServerBuilder::start`].
///
/// What it serves:
/// - the built-in services, `/pods/mutate` (with `settings.resource_groups_file`'s groups),
///   `/pods/validate` and `/dags/validate`;
/// - `/tasks/admit`, a supervised chain of the hooks given here, in order: those of
///   [`ServerBuilder::hook_specs`] (a config's `execution.admission.hooks`) and those of
///   [`ServerBuilder::hook`] (a library user's own Rust hooks), their changes checked against
///   [`ServerBuilder::change_rules`];
/// - every [`Service`] given to [`ServerBuilder::service`];
///
/// of which `settings.enabled_admission` (or [`ServerBuilder::enabled`]) picks those served.
///
/// # Example
/// ```no_run
/// use std::sync::Arc;
/// use dexaflow_admission::admission::{Decision, Hook, HookFuture, Request};
/// use dexaflow_admission::serve::{Server, Settings, TlsFiles};
///
/// struct NoFridays;
///
/// impl Hook for NoFridays {
///     fn name(&self) -> &str {
///         "no-fridays"
///     }
///
///     fn admit<'a>(&'a self, _request: &'a Request) -> HookFuture<'a> {
///         Box::pin(async { Ok(Decision::Admit) })
///     }
///
///     fn is_remote(&self) -> bool {
///         false
///     }
/// }
///
/// # async fn run() -> Result<(), dexaflow_admission::serve::ServeError> {
/// let settings = Settings::new(TlsFiles {
///     cert_file: "tls.crt".into(),
///     key_file: "tls.key".into(),
/// });
/// let server = Server::builder(settings).hook(Arc::new(NoFridays)).start().await?;
/// println!("serving https://{}", server.local_addr());
/// server.run_until(async { let _ = tokio::signal::ctrl_c().await; }).await;
/// # Ok(())
/// # }
/// ```
pub struct ServerBuilder {
    settings: Settings,
    rules: ChangeRules,
    supervision: supervise::Settings,
    hooks: Vec<Arc<dyn Hook>>,
    hook_events: Option<Arc<dyn SupervisionEvents>>,
    services: Vec<Service>,
    events: Arc<dyn ServerEvents>,
    conditions: Vec<ReadyCondition>,
}

impl std::fmt::Debug for ServerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hooks: Vec<&str> = self.hooks.iter().map(|hook| hook.name()).collect();
        let services: Vec<&str> = self.services.iter().map(Service::path).collect();
        f.debug_struct("ServerBuilder")
            .field("settings", &self.settings)
            .field("rules", &self.rules)
            .field("supervision", &self.supervision)
            .field("hooks", &hooks)
            .field("services", &services)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// The front door: a server of `settings`, with the built-in services, `/tasks/admit`
    /// admitting every attempt until hooks are added, default change rules and supervision,
    /// observed by nobody.
    pub fn builder(settings: Settings) -> ServerBuilder {
        ServerBuilder {
            settings,
            rules: ChangeRules::default(),
            supervision: supervise::Settings::default(),
            hooks: Vec::new(),
            hook_events: None,
            services: Vec::new(),
            events: Arc::new(Ignore),
            conditions: Vec::new(),
        }
    }
}

impl ServerBuilder {
    /// The rules every change a `/tasks/admit` hook makes must pass (a config's
    /// `dispatch.change_rules()`): what the chain answers is checked as a dispatcher checks it.
    pub fn change_rules(mut self, rules: ChangeRules) -> ServerBuilder {
        self.rules = rules;
        self
    }

    /// How each `/tasks/admit` hook call is supervised: timeouts, the chain's budget, breakers.
    pub fn supervision(mut self, supervision: supervise::Settings) -> ServerBuilder {
        self.supervision = supervision;
        self
    }

    /// Adds the hooks of `specs` that the server runs, after those added so far: every one but
    /// a `webhook`, which is how a dispatcher calls a server like this one (each left out is
    /// logged). Relative freeze windows start counting here.
    pub fn hook_specs(mut self, specs: &[HookSpec]) -> ServerBuilder {
        self.hooks.extend(served_hooks(specs));
        self
    }

    /// Adds `hook` to the `/tasks/admit` chain, after the hooks added so far.
    pub fn hook(mut self, hook: Arc<dyn Hook>) -> ServerBuilder {
        self.hooks.push(hook);
        self
    }

    /// Tells `observer` of every `/tasks/admit` hook call and breaker change, and of the
    /// chain's hook names when it starts.
    pub fn hook_events(mut self, observer: Arc<dyn SupervisionEvents>) -> ServerBuilder {
        self.hook_events = Some(observer);
        self
    }

    /// Registers `service` beside the built-in ones; a path already taken fails
    /// [`ServerBuilder::start`] with [`ServeError::DuplicatePath`].
    pub fn service(mut self, service: Service) -> ServerBuilder {
        self.services.push(service);
        self
    }

    /// Serves only `paths` (a registered path each), in place of
    /// `settings.enabled_admission`.
    pub fn enabled<P: Into<String>>(mut self, paths: impl IntoIterator<Item = P>) -> ServerBuilder {
        self.settings.enabled_admission = Some(paths.into_iter().map(Into::into).collect());
        self
    }

    /// Keeps `/readyz` at 503 while `holds` returns false (a cache a service of yours reads
    /// has not synced, say), its body saying `not ready: waiting for <what>`. Checked on each
    /// probe: keep it to an atomic load.
    pub fn ready_when(
        mut self,
        what: impl Into<String>,
        holds: impl Fn() -> bool + Send + Sync + 'static,
    ) -> ServerBuilder {
        self.conditions.push(ReadyCondition {
            name: what.into(),
            holds: Arc::new(holds),
        });
        self
    }

    /// Tells `events` of requests, connections and reloads.
    pub fn events(mut self, events: Arc<dyn ServerEvents>) -> ServerBuilder {
        self.events = events;
        self
    }

    /// Starts everything: the `/tasks/admit` chain and its breakers, the watched files, the
    /// router, both listeners and the threads connections are served on. Readiness is true once
    /// it returns. Call it inside a multi-threaded tokio runtime.
    ///
    /// # Errors
    /// Any [`ServeError`]: a duplicate path, an enabled path no service has, a file that
    /// cannot be used, an address that cannot be bound, or a service for authenticated callers
    /// that would answer anyone.
    pub async fn start(self) -> Result<Server, ServeError> {
        let ServerBuilder {
            settings,
            rules,
            supervision,
            hooks,
            hook_events,
            services,
            events,
            conditions,
        } = self;
        let mut chain = ChainBuilder::new(rules, supervision).hooks(hooks);
        if let Some(observer) = hook_events {
            chain = chain.observer(observer);
        }
        // Before any file is read or the cluster is reached: a mistyped path is the error a
        // user must see first.
        let known = services::builtin_paths().chain(services.iter().map(Service::path));
        check_enabled(
            settings.enabled_admission.as_deref(),
            known,
            settings.names.enabled_admission,
        )?;
        let admission = TaskAdmission::start(chain).await?;
        let builtin = builtin(&settings, &events).await?;
        let registry = services.into_iter().try_fold(
            builtin.registry.register(admission.into_service())?,
            |registry, service| registry.register(service),
        )?;
        let router = registry.route(
            settings.enabled_admission.as_deref(),
            settings.names.enabled_admission,
            events.as_ref(),
        )?;
        let conditions = builtin.conditions.into_iter().chain(conditions).collect();
        Server::start(&settings, router, events, conditions, builtin.watching).await
    }
}
