//! The cost of the webhook hook (ADR 0100 §8) over the HTTP exchange it makes: one call through
//! the supervised chain (breaker gate, timeout, panic recovery, the request envelope, a fresh
//! uid, strict decoding of the answer) against one bare POST of the same body with the same HTTP
//! client to the same HTTPS server on 127.0.0.1. The target is at most 1.3 times the bare POST.
//!
//! ```sh
//! cargo bench --bench webhook
//! ```

#[path = "../tests/it/common/mod.rs"]
mod common;
#[path = "../tests/it/webhook_fixture/mod.rs"]
mod webhook_fixture;

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use dexaflow_admission::admission::{Chain, ChangeRules, Decision, RequestEnvelope, Verdict};
use dexaflow_admission::events::Ignore;
use dexaflow_admission::hooks::Webhook;
use dexaflow_admission::supervise::{self, SupervisedChain};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use webhook_fixture::{Certs, Server, Transport, deciding};

fn webhook(c: &mut Criterion) {
    let certs = Certs::new();
    let server = Server::start(&certs, Transport::Tls, deciding(|_| Decision::Admit));
    let spec = certs.webhook(&server.url());
    let system = actix::System::new();
    let webhook = Arc::new(Webhook::new(&spec).expect("a valid webhook"));
    let client = webhook.client().expect("built").clone();
    let chain = system.block_on(async {
        let chain = Chain::new(ChangeRules::default()).with_hook(webhook.clone());
        SupervisedChain::start(chain, &supervise::Settings::default(), Arc::new(Ignore))
    });
    let request = common::sample_request();
    let body = Bytes::from(
        serde_json::to_vec(&RequestEnvelope::new(
            "00000000-0000-4000-8000-000000000000",
            request.clone(),
        ))
        .expect("encodes"),
    );
    let uri: hyper::Uri = format!("{}?timeout=500ms", server.url())
        .parse()
        .expect("a URI");

    let mut group = c.benchmark_group("webhook");
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("bare_post", |b| {
        b.iter_custom(|iters| {
            system.block_on(async {
                let started = Instant::now();
                for _ in 0..iters {
                    let post = hyper::Request::post(uri.clone())
                        .header("content-type", "application/json")
                        .header("accept", "application/json")
                        .body(Full::new(body.clone()))
                        .expect("a request");
                    let answer = client.request(post).await.expect("answered");
                    let bytes = answer.into_body().collect().await.expect("read").to_bytes();
                    assert!(!bytes.is_empty());
                }
                started.elapsed()
            })
        });
    });
    group.bench_function("hook_call_supervised", |b| {
        b.iter_custom(|iters| {
            system.block_on(async {
                let started = Instant::now();
                for _ in 0..iters {
                    let verdict = chain.admit(request.clone()).await;
                    assert!(matches!(verdict, Verdict::Admit { .. }), "{verdict:?}");
                }
                started.elapsed()
            })
        });
    });
    group.finish();
    drop(server);
}

criterion_group!(benches, webhook);
criterion_main!(benches);
