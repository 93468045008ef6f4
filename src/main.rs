//! The `dexaflow-admission` command: wiring only. Each subcommand loads its input, builds the
//! pieces from the library and prints what they return.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand, ValueEnum};
use dexaflow_admission::admission::{Chain, error_chain};
use dexaflow_admission::config::Config;
use dexaflow_admission::dispatch::executor;
use dexaflow_admission::dispatch::run::{Install, run};
use dexaflow_admission::dispatch::token::Hs256Minter;
use dexaflow_admission::supervise::Ignore;
use dexaflow_admission::{hooks, report, workload};

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
    },
    /// Print the effective config (file, defaults and `DEXAFLOW_*` overrides) as YAML, or every
    /// error in it, one per line, each naming its key.
    CheckConfig {
        /// The YAML config; without it, the embedded default.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Output {
    Table,
    Json,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Dispatch {
            config,
            workload,
            output,
        } => dispatch(config, workload, output),
        Command::CheckConfig { config } => check_config(config),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("dexaflow-admission: {message}");
            ExitCode::from(2)
        }
    }
}

fn load_config(path: Option<PathBuf>) -> Result<Config, String> {
    let loaded = match &path {
        Some(path) => Config::load(path, std::env::vars()),
        None => Config::embedded_default(std::env::vars()),
    };
    loaded.map_err(|errors| {
        let origin = path.map_or_else(
            || "the embedded default config".to_owned(),
            |path| path.display().to_string(),
        );
        format!("{origin} is not valid:\n{errors}")
    })
}

fn check_config(path: Option<PathBuf>) -> Result<(), String> {
    let config = load_config(path)?;
    print!("{}", config.to_yaml());
    Ok(())
}

fn dispatch(config: Option<PathBuf>, workload: PathBuf, output: Output) -> Result<(), String> {
    let config = load_config(config)?;
    let tasks = workload::load(&workload).map_err(|error| error_chain(&error))?;
    let settings = Arc::new(config.dispatch);
    let chain = hooks::build(&config.hooks)
        .into_iter()
        .fold(Chain::new(settings.change_rules()), Chain::with_hook);
    if config.supervise.fail_open && !chain.is_empty() {
        tracing::warn!(
            "execution.admission.fail_open is true: an attempt whose hook errors, times out, panics or is skipped by its breaker runs unchanged"
        );
    }
    let install = Install {
        minter: Arc::new(Hs256Minter::new(settings.token.clone())),
        executor: executor::from_settings(&settings.executor),
        settings,
        supervise: config.supervise,
        chain,
        observer: Arc::new(Ignore),
    };
    let show_progress = std::io::stderr().is_terminal();
    let progress = move |unsettled: usize| {
        if show_progress {
            eprint!("\rwaiting for {unsettled} task instances to settle ");
        }
    };
    let shutdown = async {
        // Without a signal handler, run until every task settles.
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    let system = actix::System::new();
    let report = system
        .block_on(run(install, tasks, shutdown, progress))
        .map_err(|error| error.to_string())?;
    if show_progress {
        eprintln!();
    }
    match output {
        Output::Table => {
            print!("{}", report::table(&report.instances));
            println!("{}", report::summary(&report.instances));
        }
        Output::Json => {
            let json = report::json(&report.instances).map_err(|error| error.to_string())?;
            println!("{json}");
        }
    }
    if report.interrupted {
        return Err(format!(
            "interrupted before every task instance settled ({} handed back)",
            report.drain.handed_back
        ));
    }
    Ok(())
}
