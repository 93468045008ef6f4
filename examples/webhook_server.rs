//! An operator's own admission rules, written in Rust and served as a `dexaflow.io/admission/v1`
//! webhook on `/tasks/admit` through the crate's front door (ADR 0100 §8). By tenant it admits,
//! changes (`gpu-lab` goes to the GPU pool), holds (`finance`, for three seconds after start)
//! and refuses (`umbrella`). It makes a self-signed certificate at start and writes it to
//! `--ca-out` for clients to trust (their `ca_bundle`), its key beside it.
//!
//! ```sh
//! cargo run --example webhook_server -- --listen 127.0.0.1:8443 --ca-out target/webhook-ca.pem
//! cargo run -- dispatch --config examples/webhook.yaml --workload examples/workload.yaml
//! ```

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use dexaflow_admission::admission::{Changes, Decision, Hook, HookFuture, Request};
use dexaflow_admission::loadtest::TimerThread;
use dexaflow_admission::serve::{Server, ServerBuilder, Settings, TlsFiles, admit};
use tokio::time::Instant;

/// How long after start the `finance` tenant is held (a quarter-end freeze).
const FREEZE: Duration = Duration::from_secs(3);

#[derive(Debug, Parser)]
struct Args {
    /// Where to listen.
    #[arg(long, default_value = "127.0.0.1:8443")]
    listen: SocketAddr,
    /// Where to write the server's certificate, for clients to trust (its key goes beside it,
    /// with the extension `.key`).
    #[arg(long, default_value = "target/webhook-ca.pem")]
    ca_out: PathBuf,
    /// How long each decision takes, standing for the work a real webhook does. It ends within
    /// microseconds of its deadline (a timer thread that spins through the last 200 µs of each
    /// wait, up to a core while waits are pending), where tokio's millisecond timer would add
    /// about 1.3 ms.
    #[arg(long, default_value = "0s", value_parser = humantime::parse_duration)]
    delay: Duration,
    /// Offer HTTP/1.1 only (by default HTTP/2 too, which clients prefer), to compare the two.
    #[arg(long)]
    http1_only: bool,
}

/// The operator's rules: one decision per tenant.
pub struct ByTenant {
    frozen_until: Instant,
    delay: Duration,
    /// Ends each delay within microseconds of its deadline, as a remote service's answer
    /// would: tokio's millisecond timer would make a 5 ms delay last about 6.3 ms. `None`
    /// without a delay.
    timer: Option<TimerThread>,
}

impl ByTenant {
    /// The rules, `finance` frozen from now for [`FREEZE`], each decision taking `delay`.
    pub fn new(delay: Duration) -> ByTenant {
        ByTenant {
            frozen_until: Instant::now() + FREEZE,
            delay,
            timer: (!delay.is_zero()).then(TimerThread::start),
        }
    }

    fn decide(&self, request: &Request) -> Decision {
        match request.tenant.as_str() {
            "gpu-lab" => {
                let mut changes = Changes::default();
                changes.node_selector.insert("pool".into(), "gpu".into());
                changes.labels.insert("team".into(), "gpu-lab".into());
                Decision::AdmitWith(Box::new(changes))
            }
            "finance" if Instant::now() < self.frozen_until => {
                Decision::Hold("quarter-end close: deploys frozen".into())
            }
            "umbrella" => {
                Decision::Refuse("tenant umbrella is suspended for unpaid invoices".into())
            }
            _ => Decision::Admit,
        }
    }
}

impl Hook for ByTenant {
    fn name(&self) -> &str {
        "by-tenant"
    }

    fn admit<'a>(&'a self, request: &'a Request) -> HookFuture<'a> {
        Box::pin(async move {
            if let Some(timer) = &self.timer {
                timer.sleep(self.delay).await;
            }
            Ok(self.decide(request))
        })
    }

    fn is_remote(&self) -> bool {
        false
    }
}

/// The server: `/tasks/admit` alone, answered by [`ByTenant`].
pub fn server(settings: Settings, delay: Duration) -> ServerBuilder {
    Server::builder(settings)
        .enabled([admit::PATH])
        .hook(Arc::new(ByTenant::new(delay)))
}

/// Writes `text` to `path`, readable by its owner only: it is a private key.
fn write_private(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?
        .write_all(text.as_bytes())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let made = rcgen::generate_simple_self_signed(["127.0.0.1".into(), "localhost".into()])?;
    let key_file = args.ca_out.with_extension("key");
    std::fs::write(&args.ca_out, made.cert.pem())?;
    write_private(&key_file, &made.key_pair.serialize_pem())?;
    let mut settings = Settings::new(TlsFiles {
        cert_file: args.ca_out.clone(),
        key_file,
    });
    settings.listen = args.listen;
    settings.http2 = !args.http1_only;
    let server = server(settings, args.delay).start().await?;
    eprintln!(
        "https://{}{} (clients trust {})",
        server.local_addr(),
        admit::PATH,
        args.ca_out.display()
    );
    server
        .run_until(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await;
    Ok(())
}
