//! The `dexaflow-admission` command: wiring only. Each subcommand loads its input, builds the
//! pieces from the library and prints what they return.

use std::io::{IsTerminal, Write as _};
use std::net::SocketAddr;
use std::num::{IntErrorKind, ParseIntError};
use std::path::PathBuf;
use std::process::ExitCode;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use dexaflow_admission::Install;
use dexaflow_admission::admission::{self, error_chain, escape_controls};
use dexaflow_admission::config::{self, Config};
use dexaflow_admission::dispatch::settings::{
    DEFAULT_BUFFER_SIZE, DEFAULT_WORKER_THREADS, DEFAULT_WORKERS,
};
use dexaflow_admission::dispatch::task::State;
use dexaflow_admission::dispatch::{self, TaskInstance};
use dexaflow_admission::loadtest::{self, Amount, HookTimer, Options, Plan, WebhookFiles};
use dexaflow_admission::metrics::{self, Metrics, ServerMetrics};
use dexaflow_admission::serve::{self, Server};
use dexaflow_admission::supervise::{self, BreakerSettings};
use dexaflow_admission::{report, workload};

// Every review decodes, checks and answers in a few dozen short-lived allocations; mimalloc's
// per-thread free lists serve them at a fraction of glibc's cost (docs/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Decides, for every task attempt a Dexaflow orchestrator dispatches, whether it runs, runs
/// changed, waits or is refused, before its agent token is minted (ADR 0100).
#[derive(Debug, Parser)]
#[command(name = "dexaflow-admission", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Offer every task of a workload to the dispatcher, tick until each task instance is
    /// settled, and print the task instances. Exits 0 when the run completed, whatever the
    /// tasks' outcomes.
    Dispatch {
        /// The YAML config (Dexaflow's key layout; `DEXAFLOW_*` variables override keys). Without
        /// it, the embedded default (examples/dexaflow.yaml) is used.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// The workload: DAG runs and their tasks, as in examples/workload.yaml.
        #[arg(long, value_name = "FILE")]
        workload: PathBuf,
        /// `table` for people, `json` for programs (an array of task instances).
        #[arg(long, value_enum, default_value_t = Output::Table)]
        output: Output,
        /// Where the Prometheus exporter listens, serving /metrics; overrides `metrics.listen`.
        /// Without either, a port of its own on 127.0.0.1, printed on stderr.
        #[arg(long, value_name = "ADDR")]
        metrics_listen: Option<SocketAddr>,
    },
    /// Load-test the dispatch path: offer synthetic attempts to the real dispatcher (null
    /// executor) through synthetic hooks, and print throughput, latency per outcome, breaker
    /// transitions and deferrals. Exits non-zero if any attempt was lost or executed twice.
    Loadtest(LoadtestArgs),
    /// Serve the admission webhooks over HTTPS (`/tasks/admit`, `/pods/mutate`,
    /// `/pods/validate`, `/dags/validate` and Volcano's services, such as `/jobs/validate`)
    /// until SIGTERM or Ctrl-C, then drain requests in flight. Configured by the `server` section of the config file; `/tasks/admit` runs the
    /// placement, freeze and deny hooks of `execution.admission.hooks`. Prints the addresses
    /// it listens on once it listens; /readyz says when it is ready.
    Serve {
        /// The YAML config with a `server` section (see examples/serve.yaml).
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
        /// The paths to serve, comma-separated (such as "/pods/mutate,/jobs/validate");
        /// overrides `server.enabled_admission`. Unset serves every service that reads no
        /// cluster; those that read queues or namespaces are served only when listed.
        #[arg(long, value_name = "LIST")]
        enabled_admission: Option<String>,
    },
    /// Print the effective config (file, defaults and `DEXAFLOW_*` overrides) as YAML, or every
    /// error in it, one per line, each naming its key.
    CheckConfig {
        /// The YAML config; without it, the embedded default.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
}

/// The flags of `loadtest`.
///
/// Every numeric flag takes a value that starts with `-` (`allow_hyphen_values`), so that
/// `--rate -5` reaches the value's own check, with the error `--rate=-5` gets, instead of
/// clap taking `-5` for an unknown flag.
#[derive(Debug, Args)]
struct LoadtestArgs {
    /// How many attempts to offer (default 10000).
    #[arg(
        long,
        value_name = "N",
        conflicts_with = "duration",
        value_parser = parse_whole::<u64>,
        allow_hyphen_values = true,
    )]
    attempts: Option<u64>,
    /// Offer attempts for this long instead of a fixed number (such as "30s").
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, allow_hyphen_values = true)]
    duration: Option<Duration>,
    /// Attempts per second (0.001 to 1000000), offered open loop: each attempt's latency runs
    /// from its intended start. 0 offers them as fast as the dispatcher settles them.
    #[arg(
        long,
        value_name = "R",
        default_value_t = 0.0,
        allow_hyphen_values = true
    )]
    rate: f64,
    /// The dispatch buffer's capacity (scheduler.dispatch.buffer_size, and its default); 0 runs
    /// the hook chain synchronously on the tick.
    #[arg(
        long,
        value_name = "B",
        default_value_t = DEFAULT_BUFFER_SIZE,
        value_parser = parse_whole::<usize>,
        allow_hyphen_values = true,
    )]
    buffer_size: usize,
    /// Admission workers draining the buffer (scheduler.dispatch.workers, and its default; 0 is
    /// taken as 1).
    #[arg(
        long,
        value_name = "W",
        default_value_t = DEFAULT_WORKERS,
        value_parser = parse_whole::<usize>,
        allow_hyphen_values = true,
    )]
    workers: usize,
    /// Threads the admission workers are spread over (scheduler.dispatch.worker_threads, and
    /// its default); 0 runs them on the dispatcher's thread.
    #[arg(
        long,
        value_name = "T",
        default_value_t = DEFAULT_WORKER_THREADS,
        value_parser = parse_whole::<usize>,
        allow_hyphen_values = true,
    )]
    worker_threads: usize,
    /// A hook, repeatable, in chain order: noop, sleep:DUR, jitter:MIN..MAX, spin:DUR (keeps
    /// the CPU busy for DUR, a CPU-bound hook), or error:P, panic:P, timeout:P, hold:P,
    /// refuse:P, change:P with P a probability from 0 to 1 (the hook misbehaves that way with
    /// probability P and admits otherwise); or webhook:URL, the real webhook hook at URL (https,
    /// or http to a loopback host).
    #[arg(long = "hook", value_name = "SPEC")]
    hooks: Vec<String>,
    /// The PEM bundle of the certificate authorities every webhook:URL hook trusts (its
    /// ca_bundle); the system's roots otherwise.
    #[arg(long, value_name = "FILE")]
    webhook_ca_bundle: Option<PathBuf>,
    /// The file every webhook:URL hook reads its bearer token from (its bearer_token_file).
    #[arg(long, value_name = "FILE")]
    webhook_bearer_token_file: Option<PathBuf>,
    /// How many tenants the attempts are spread over, round robin (1 to 100000).
    #[arg(
        long,
        value_name = "K",
        default_value_t = 1,
        value_parser = parse_whole::<usize>,
        allow_hyphen_values = true,
    )]
    tenants: usize,
    /// The most one hook call may take (execution.admission.timeout).
    #[arg(long, value_name = "DURATION", value_parser = parse_default_duration,
          default_value_t = supervise::Settings::default().timeout.into(),
          allow_hyphen_values = true)]
    timeout: humantime::Duration,
    /// The most the whole chain may take per attempt (execution.admission.chain_timeout).
    #[arg(long, value_name = "DURATION", value_parser = parse_default_duration,
          default_value_t = supervise::Settings::default().chain_timeout.into(),
          allow_hyphen_values = true)]
    chain_timeout: humantime::Duration,
    /// Consecutive failures that open a hook's breaker (execution.admission.breaker.failures).
    #[arg(long, value_name = "N", default_value_t = BreakerSettings::default().failures,
          value_parser = parse_whole::<u32>, allow_hyphen_values = true)]
    breaker_failures: u32,
    /// The first time an open breaker skips its hook (execution.admission.breaker.backoff).
    #[arg(long, value_name = "DURATION", value_parser = parse_default_duration,
          default_value_t = BreakerSettings::default().backoff.into(),
          allow_hyphen_values = true)]
    breaker_backoff: humantime::Duration,
    /// The longest time an open breaker skips its hook
    /// (execution.admission.breaker.max_backoff).
    #[arg(long, value_name = "DURATION", value_parser = parse_default_duration,
          default_value_t = BreakerSettings::default().max_backoff.into(),
          allow_hyphen_values = true)]
    breaker_max_backoff: humantime::Duration,
    /// Admit an attempt unchanged when a hook errors, times out, panics or is skipped
    /// (execution.admission.fail_open).
    #[arg(long)]
    fail_open: bool,
    /// Seeds the synthetic hooks' random draws, so that a run can be repeated.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 1,
        value_parser = parse_whole::<u64>,
        allow_hyphen_values = true,
    )]
    seed: u64,
    /// Also write the JSON report and SVG charts (latency per outcome, throughput over time)
    /// into this directory.
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,
    /// `table` for people, `json` for programs (one object).
    #[arg(long, value_enum, default_value_t = Output::Table)]
    output: Output,
    /// Where the Prometheus exporter listens while the test runs, serving /metrics; by default
    /// a port of its own on 127.0.0.1, printed on stderr.
    #[arg(long, value_name = "ADDR", default_value_t = config::BATCH_LISTEN)]
    metrics_listen: SocketAddr,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    admission::parse_duration(text).map_err(|reason| {
        format!(
            "expected a duration such as \"500ms\", got {}",
            reason.explained(format!("{text:?}"))
        )
    })
}

/// [`parse_duration`] for a flag whose default comes from the library's settings: clap shows a
/// default through `Display`, which `humantime::Duration` has and `Duration` lacks.
fn parse_default_duration(text: &str) -> Result<humantime::Duration, String> {
    parse_duration(text).map(humantime::Duration::from)
}

/// A whole number for a count flag: clap's own parser answers `-5` with "invalid digit found
/// in string", which says neither what the flag takes nor that the sign is the trouble.
fn parse_whole<T: FromStr<Err = ParseIntError>>(text: &str) -> Result<T, String> {
    text.trim()
        .parse()
        .map_err(|error: ParseIntError| match error.kind() {
            IntErrorKind::PosOverflow => format!("{text:?} is too large"),
            _ => format!("expected a whole number without a sign, got {text:?}"),
        })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Output {
    Table,
    Json,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(use_color(
            std::io::stderr().is_terminal(),
            std::env::var_os("NO_COLOR"),
        ))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => return usage(&error),
    };
    let result = match cli.command {
        Command::Dispatch {
            config,
            workload,
            output,
            metrics_listen,
        } => dispatch(config, workload, output, metrics_listen),
        Command::CheckConfig { config } => check_config(config),
        Command::Loadtest(args) => loadtest(args),
        Command::Serve {
            config,
            enabled_admission,
        } => serve(config, enabled_admission),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            // Errors quote keys, paths and values as given: none may drive the terminal.
            let lines: Vec<_> = message.lines().map(escape_controls).collect();
            write_stderr(&format!("dexaflow-admission: {}\n", lines.join("\n")));
            ExitCode::from(2)
        }
    }
}

/// Prints what clap made of the arguments instead of a command (the help, the version, or the
/// usage error) and the exit code it calls for; a help that cannot be written, to a full
/// device say, is an error as any other output is (a reader that stopped reading is not).
fn usage(error: &clap::Error) -> ExitCode {
    match error.print() {
        Err(failure) if failure.kind() != std::io::ErrorKind::BrokenPipe => {
            write_stderr(&format!(
                "dexaflow-admission: writing to standard output: {failure}\n"
            ));
            ExitCode::from(2)
        }
        _ => ExitCode::from(u8::try_from(error.exit_code()).unwrap_or(2)),
    }
}

/// Whether log lines may be coloured: only on a terminal, and never when `NO_COLOR` is set to
/// anything but the empty string (<https://no-color.org>).
fn use_color(stderr_is_terminal: bool, no_color: Option<std::ffi::OsString>) -> bool {
    stderr_is_terminal && no_color.is_none_or(|value| value.is_empty())
}

/// Writes `text` to standard output and flushes it.
///
/// A reader that stopped reading (`dispatch ... | head -1`) is no error: what it did not read
/// is dropped, and the command goes on to exit as it would have, quietly, as Unix tools do.
///
/// # Errors
/// A full device or any other failure to write, as one line for `main` to print; `print!`
/// would panic instead.
fn write_stdout(text: &str) -> Result<(), String> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(error) if error.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(format!("writing to standard output: {error}"))
        }
        _ => Ok(()),
    }
}

/// Writes `text` to standard error, where a failure has nowhere left to be reported.
fn write_stderr(text: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = stderr
        .write_all(text.as_bytes())
        .and_then(|()| stderr.flush());
}

/// Resolves at the first SIGINT (Ctrl-C) or SIGTERM (how Kubernetes stops a pod): both shut
/// `dispatch`, `serve` and `loadtest` down the same way. It listens from the call on, not from
/// the first poll: `serve` and `loadtest` call it before they say they started, so that a
/// signal sent after that is never lost. Call it inside a runtime. A signal whose handler
/// cannot be installed is never awaited.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{Signal, SignalKind, signal};
    async fn next(signal: Option<&mut Signal>) -> Option<()> {
        signal?.recv().await
    }
    let mut interrupt = signal(SignalKind::interrupt()).ok();
    let mut terminate = signal(SignalKind::terminate()).ok();
    async move {
        tokio::select! {
            Some(()) = next(interrupt.as_mut()) => {}
            Some(()) = next(terminate.as_mut()) => {}
            else => std::future::pending().await,
        }
    }
}

fn load_config(path: Option<PathBuf>) -> Result<Config, String> {
    let loaded = match &path {
        Some(path) => Config::load(path, std::env::vars_os()),
        None => Config::embedded_default(std::env::vars_os()),
    };
    loaded.map_err(|errors| {
        let origin = path.map_or_else(
            || "the embedded default config, with the DEXAFLOW_ variables over it,".to_owned(),
            |path| path.display().to_string(),
        );
        format!("{origin} is not valid:\n{errors}")
    })
}

fn check_config(path: Option<PathBuf>) -> Result<(), String> {
    let config = load_config(path)?;
    write_stdout(&config.to_yaml())
}

/// Starts the Prometheus exporter on `listen` and names the address it bound in one line on
/// stderr ([`announce_metrics`]). An error names `origin`, the flag or key the address came
/// from. Each hook's breaker gauge appears when its chain starts and tells the metrics its hooks.
fn start_metrics(listen: SocketAddr, origin: &str) -> Result<Metrics, String> {
    let installed = install_exporter(metrics::install, listen, origin)?;
    announce_metrics(&installed.exporter);
    Ok(installed.metrics)
}

/// Starts the exporter on `listen` with `install` choosing which metrics the process exports,
/// without saying so: a command that may still fail to start announces it once it has
/// ([`announce_metrics`]). An error names `origin`, the flag or key the address came from.
fn install_exporter(
    install: fn(SocketAddr) -> Result<metrics::Installed, metrics::MetricsError>,
    listen: SocketAddr,
    origin: &str,
) -> Result<metrics::Installed, String> {
    install(listen).map_err(|error| format!("{origin}: {}", error_chain(&error)))
}

/// Names the address `exporter` bound in one line on stderr (port 0 resolved: for whoever
/// started the command, a script or a test).
fn announce_metrics(exporter: &metrics::Exporter) {
    write_stderr(&format!("metrics: listening on {}\n", exporter.url()));
}

fn dispatch(
    config: Option<PathBuf>,
    workload: PathBuf,
    output: Output,
    metrics_listen: Option<SocketAddr>,
) -> Result<(), String> {
    let config = load_config(config)?;
    let tasks = workload::load(&workload, &config.dispatch.executor)
        .map_err(|errors| format!("workload {} is not valid:\n{errors}", workload.display()))?;
    if tasks.is_empty() {
        return print_instances(&[], output);
    }
    // Before anything starts: a directory that cannot be used fails every attempt otherwise.
    config
        .check_executor()
        .map_err(|errors| errors.to_string())?;
    let (listen, origin) = match metrics_listen {
        Some(listen) => (listen, "--metrics-listen"),
        None => (config.batch_metrics_listen(), config::METRICS_LISTEN),
    };
    let install = Install::from_config(config);
    let metrics = start_metrics(listen, origin)?;
    let install = install.observer(Arc::new(metrics));
    let show_progress = std::io::stderr().is_terminal();
    let (report, interrupted) = install
        .run_blocking(|handle| async move {
            let signal = shutdown_signal();
            let interrupt = async move {
                signal.await;
                // Below the progress line, which is not rewritten after this.
                let below = if show_progress { "\n" } else { "" };
                write_stderr(&format!(
                    "{below}{}",
                    stopping_line(
                        "handing back what is not launched and ending the running tasks",
                        "does not cut this short: no task outlives dispatch"
                    )
                ));
            };
            for task in tasks {
                // A workload's keys are unique: the loader refuses a repeated one.
                handle.offer(task).map_err(|error| error.to_string())?;
            }
            let mut shown = 0;
            let progress = |unsettled: usize| {
                if show_progress {
                    let mut progress = report::Progress::default();
                    handle.for_each_instance(|instance| progress.see(instance));
                    let text;
                    (text, shown) = report::Progress::rewrite(
                        &progress.line(unsettled),
                        shown,
                        report::terminal_columns(),
                    );
                    write_stderr(&text);
                }
            };
            let interrupted = handle.settle_all(interrupt, progress).await;
            Ok::<_, String>((handle.drain().await, interrupted))
        })
        .map_err(|error| error_chain(&error))??;
    if show_progress {
        write_stderr("\n");
    }
    print_instances(&report.instances, output)?;
    if interrupted {
        let left = report
            .instances
            .iter()
            .filter(|instance| instance.state == State::Scheduled)
            .count();
        return Err(if left == 0 {
            "interrupted: no task instance was left scheduled".to_owned()
        } else {
            format!("interrupted before every task instance settled ({left} left scheduled)")
        });
    }
    Ok(())
}

/// Prints the task instances as `output` asks: the table and its summary, or JSON.
fn print_instances(instances: &[TaskInstance], output: Output) -> Result<(), String> {
    match output {
        Output::Table => write_stdout(&format!(
            "{}{}\n",
            report::table(instances),
            report::summary(instances)
        )),
        Output::Json => {
            let json = report::json(instances).map_err(|error| error.to_string())?;
            write_stdout(&format!("{json}\n"))
        }
    }
}

/// The `loadtest` subcommand: turns the flags into the harness's options, runs it, prints the
/// report, writes `--report DIR`, and fails when an attempt was lost or executed twice.
fn loadtest(args: LoadtestArgs) -> Result<(), String> {
    let hooks = loadtest::parse_all(&args.hooks).map_err(|error| error.to_string())?;
    let plan = Plan {
        amount: match args.duration {
            Some(duration) => Amount::For(duration),
            None => Amount::Attempts(args.attempts.unwrap_or(10_000)),
        },
        rate: args.rate,
        buffer_size: args.buffer_size,
        workers: args.workers,
        worker_threads: args.worker_threads,
        hooks,
        webhook_files: WebhookFiles {
            ca_bundle: args.webhook_ca_bundle,
            bearer_token_file: args.webhook_bearer_token_file,
        },
        hook_timer: HookTimer::Thread,
        tenants: args.tenants,
        supervise: supervise::Settings {
            timeout: args.timeout.into(),
            chain_timeout: args.chain_timeout.into(),
            fail_open: args.fail_open,
            breaker: BreakerSettings {
                failures: args.breaker_failures,
                backoff: args.breaker_backoff.into(),
                max_backoff: args.breaker_max_backoff.into(),
                ..BreakerSettings::default()
            },
            hooks: Default::default(),
        },
        seed: args.seed,
    };
    // A bad plan, or a report directory that cannot be written, fails naming its flag before
    // the exporter takes its address and before the run.
    plan.validate().map_err(|error| error_chain(&error))?;
    if let Some(dir) = &args.report {
        loadtest::check_report_dir(dir).map_err(|error| error_chain(&error))?;
    }
    let listen = args.metrics_listen;
    // Listening before the exporter's line is printed, which tells a caller the run started.
    let stop = stop_on_signal();
    let metrics = start_metrics(listen, "--metrics-listen")?;
    let options = Options {
        plan,
        show_progress: std::io::stderr().is_terminal(),
        // The harness counts for itself; the exporter is told the same through a fan-out.
        observer: Some(Arc::new(metrics)),
        stop: Some(stop),
        attempts_limit: loadtest::memory::available_memory().map(loadtest::memory::attempts_limit),
    };
    let report = loadtest::run_blocking(options).map_err(|error| error_chain(&error))?;
    match args.output {
        Output::Table => write_stdout(&report.table())?,
        Output::Json => {
            let json = serde_json::to_string_pretty(&report.to_json())
                .map_err(|error| error.to_string())?;
            write_stdout(&format!("{json}\n"))?;
        }
    }
    if let Some(dir) = &args.report {
        report.write_to(dir).map_err(|error| error_chain(&error))?;
    }
    report
        .check_conservation()
        .map_err(|error| error_chain(&error))?;
    report.ended_early().map_or(Ok(()), Err)
}

/// A stop the first SIGINT or SIGTERM fires, watched on a thread of its own so that it works
/// whatever runtime the work runs on. A second signal exits at once (status 130): nothing the
/// load test runs outlives the process.
fn stop_on_signal() -> dispatch::Shutdown {
    let (trigger, stop) = dispatch::signal();
    let (listening, started) = std::sync::mpsc::channel();
    let watch = move || {
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        runtime.block_on(async {
            let first = shutdown_signal();
            let _ = listening.send(());
            first.await;
            let second = exit_at_second_signal("draining and reporting");
            trigger.fire();
            second.await;
        });
    };
    let spawned = std::thread::Builder::new()
        .name("signals".to_owned())
        .spawn(watch);
    // Returns once the handlers are in place, so that none of the run goes unwatched; if they
    // cannot be, a signal keeps its default action and ends the run without a report.
    if spawned.is_err() || started.recv().is_err() {
        write_stderr("warning: cannot listen for signals: Ctrl-C ends this run without a report\n");
    }
    stop
}

/// The `serve` subcommand: reads the config and its `server` section, checks the server's
/// files, starts the exporter (without the dispatcher's metrics) and the server on a
/// multi-threaded runtime, names the exporter's address once the server has started, and serves
/// until SIGTERM or Ctrl-C.
fn serve(path: PathBuf, enabled_admission: Option<String>) -> Result<(), String> {
    let (config, mut settings) = Config::load_with_server(&path, std::env::vars_os())
        .map_err(|errors| format!("{} is not valid:\n{errors}", path.display()))?;
    if let Some(list) = enabled_admission {
        settings.enabled_admission = Some(serve::parse_enabled(&list));
        settings.names.enabled_admission = "--enabled-admission";
    }
    // Every file serve would read is checked, and each bad one reported, before anything listens.
    config::check_server_files(&settings)
        .map_err(|errors| format!("{} names files serve cannot use:\n{errors}", path.display()))?;
    // No dispatcher runs here: its gauges would only ever read 0. The recorder is installed
    // before the server registers its metrics; the exporter is announced once the server has
    // started, so that a start that fails (an address in use, a kubeconfig) announces nothing.
    let metrics::Installed {
        metrics: hook_metrics,
        exporter,
    } = install_exporter(
        metrics::install_server,
        config.metrics_listen,
        config::METRICS_LISTEN,
    )?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(settings.threads())
        .enable_all()
        .build()
        .map_err(|error| format!("starting the runtime: {error}"))?;
    let grace = settings.shutdown_grace;
    runtime.block_on(async {
        let server = Server::builder(settings)
            .change_rules(config.dispatch.change_rules())
            .supervision(config.supervise)
            .hook_specs(&config.hooks)
            .hook_events(Arc::new(hook_metrics))
            .events(Arc::new(ServerMetrics::register()))
            .start()
            .await
            .map_err(|error| error_chain(&error))?;
        announce_metrics(&exporter);
        // Listening for signals before saying where it serves: a signal sent once the address
        // is known must stop it gracefully, never find the default action.
        let stop = stopping(grace);
        // Where it listens, port 0 resolved: for whoever started it (a script, a test).
        let mut bound = format!("serving https://{}\n", server.local_addr());
        if let Some(probes) = server.probe_addr() {
            bound.push_str(&format!("probes http://{probes}\n"));
        }
        write_stdout(&bound)?;
        server.run_until(stop).await;
        Ok(())
    })
}

/// Resolves at the first SIGINT or SIGTERM, saying how long `serve` may still take; from then
/// on a second one exits at once, dropping the requests still in flight.
fn stopping(grace: Duration) -> impl std::future::Future<Output = ()> {
    let first = shutdown_signal();
    async move {
        first.await;
        tokio::spawn(exit_at_second_signal(&format!(
            "answering the requests in flight for {} at most",
            humantime::format_duration(grace)
        )));
    }
}

/// The line a command prints at its first SIGINT or SIGTERM: `stopping: <what>`, and what a
/// second signal does.
fn stopping_line(what: &str, second: &str) -> String {
    format!("stopping: {what} (a second Ctrl-C {second})\n")
}

/// For a command the first SIGINT or SIGTERM is stopping: says `stopping: <what>` and that a
/// second signal exits at once, and listens for it from now on. The returned future exits the
/// process (status 130) at that second signal. Call it inside a runtime.
fn exit_at_second_signal(what: &str) -> impl std::future::Future<Output = ()> + use<> {
    let second = shutdown_signal();
    write_stderr(&stopping_line(what, "exits at once"));
    async move {
        second.await;
        std::process::exit(130);
    }
}
