//! The cost of Volcano's rules, one bench per service family: each decodes the object into the
//! rule's type from a JSON value (the server decodes from text) and applies the rule, with 1,000
//! queues in the view where the rule reads queues. The HTTP around them is measured by `benches/serve_vs_bare.sh`.
//!
//! ```sh
//! cargo bench --bench volcano
//! ```

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use dexaflow_admission::volcano::{
    self, FeatureGates, HyperNode, Job, JobFlow, Operation, PodGroup, Queue, QueueSettings,
    QueueView, Review, ViewError,
};
use k8s_openapi::api::core::v1::Pod;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// How many queues the view holds: the size the issue's load target names.
const QUEUES: usize = 1_000;

/// A queue cache of [`QUEUES`] open queues, `team-0` to `team-999` under `root`, by name.
struct Queues {
    by_name: HashMap<String, Arc<Queue>>,
}

impl Queues {
    fn new() -> Queues {
        let by_name = (0..QUEUES)
            .map(|index| {
                let queue: Queue = serde_json::from_value(json!({
                    "metadata": {"name": format!("team-{index}")},
                    "spec": {"weight": 1, "parent": "root", "capability": {"cpu": "100", "memory": "400Gi"}},
                    "status": {"state": "Open"},
                }))
                .expect("a queue");
                (queue.name().to_owned(), Arc::new(queue))
            })
            .chain([("root".to_owned(), Arc::new(open_queue("root")))])
            .collect();
        Queues { by_name }
    }
}

fn open_queue(name: &str) -> Queue {
    serde_json::from_value(
        json!({"metadata": {"name": name}, "spec": {"weight": 1}, "status": {"state": "Open"}}),
    )
    .expect("a queue")
}

impl QueueView for Queues {
    fn queue(&self, name: &str) -> Result<Arc<Queue>, ViewError> {
        self.by_name
            .get(name)
            .cloned()
            .ok_or_else(|| ViewError::NotFound {
                name: name.to_owned(),
            })
    }

    fn children(&self, parent: &str) -> Result<Vec<Arc<Queue>>, ViewError> {
        Ok(self
            .by_name
            .values()
            .filter(|queue| queue.spec.parent == parent)
            .cloned()
            .collect())
    }

    fn queues_where(&self, keep: &dyn Fn(&Queue) -> bool) -> Result<Vec<Arc<Queue>>, ViewError> {
        Ok(self
            .by_name
            .values()
            .filter(|queue| keep(queue))
            .cloned()
            .collect())
    }
}

/// Decodes `object` as the server does, then applies `rule` to a CREATE of it.
fn create<T: DeserializeOwned, R>(object: &Value, rule: impl Fn(&Review<'_, T>) -> R) -> R {
    let decoded: Option<T> = volcano::decode("object", object).expect("decodes");
    rule(&Review {
        operation: Operation::Create,
        name: "bench",
        namespace: "team-a",
        object: decoded.as_ref(),
        old_object: None,
    })
}

fn job() -> Value {
    json!({
        "metadata": {"name": "train", "namespace": "team-a"},
        "spec": {
            "queue": "team-7",
            "minAvailable": 3,
            "schedulerName": "volcano",
            "plugins": {"svc": [], "ssh": []},
            "policies": [{"event": "PodEvicted", "action": "RestartJob"}],
            "tasks": [
                {"name": "master", "replicas": 1, "template": {"spec": {"containers": [
                    {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}}]}}},
                {"name": "worker", "replicas": 2, "template": {"spec": {"containers": [
                    {"name": "main", "image": "busybox", "ports": [{"containerPort": 8080, "name": "http"}]}]}}},
            ],
        },
    })
}

fn volcano_rules(c: &mut Criterion) {
    let queues = Queues::new();
    let scheduler_names = vec!["volcano".to_owned()];
    let settings = QueueSettings::default();
    let gates = FeatureGates::default();
    let job = job();
    let queue = json!({"metadata": {"name": "team-new"}, "spec": {"weight": 1, "parent": "root", "capability": {"cpu": "10"}}});
    let podgroup = json!({"metadata": {"name": "pg", "namespace": "team-a"}, "spec": {"queue": "team-7", "minMember": 3}});
    let pod = json!({"metadata": {"name": "p", "namespace": "team-a", "annotations": {"volcano.sh/jdb-min-available": "2"}},
        "spec": {"schedulerName": "volcano", "containers": [{"name": "main", "image": "busybox"}]}});
    let cronjob = json!({"metadata": {"name": "nightly", "namespace": "team-a"},
        "spec": {"schedule": "30 2 * * 1-5", "timeZone": "Europe/Berlin", "jobTemplate": {"spec": job["spec"]}}});
    let jobflow = json!({"metadata": {"name": "flow", "namespace": "team-a"}, "spec": {"flows": [
        {"name": "a"}, {"name": "b", "dependsOn": {"targets": ["a"]}}, {"name": "c", "dependsOn": {"targets": ["a", "b"]}}]}});
    let hypernode = json!({"metadata": {"name": "s0"}, "spec": {"tier": 1, "members": [
        {"type": "Node", "selector": {"regexMatch": {"pattern": "node-[0-9]+"}}},
        {"type": "Node", "selector": {"exactMatch": {"name": "node-a"}}}]}});

    let mut group = c.benchmark_group("volcano");
    group.bench_function("jobs/validate", |b| {
        b.iter(|| {
            create::<Job, _>(black_box(&job), |review| {
                volcano::validate_job(review, &queues, &gates)
            })
        })
    });
    group.bench_function("jobs/mutate", |b| {
        b.iter(|| {
            create::<Job, _>(black_box(&job), |review| {
                volcano::mutate_job(review, &scheduler_names)
            })
        })
    });
    group.bench_function("queues/validate", |b| {
        b.iter(|| {
            create::<Queue, _>(black_box(&queue), |review| {
                volcano::validate_queue(review, &queues, &settings)
            })
        })
    });
    group.bench_function("queues/mutate", |b| {
        b.iter(|| create::<Queue, _>(black_box(&queue), volcano::mutate_queue))
    });
    group.bench_function("podgroups/validate", |b| {
        b.iter(|| {
            create::<PodGroup, _>(black_box(&podgroup), |review| {
                volcano::validate_podgroup(review, &queues)
            })
        })
    });
    group.bench_function("podgroups/mutate", |b| {
        b.iter(|| {
            create::<PodGroup, _>(black_box(&podgroup), |review| {
                volcano::mutate_podgroup(review, Ok(Some("research".to_owned())))
            })
        })
    });
    group.bench_function("pods/validate", |b| {
        b.iter(|| {
            create::<Pod, _>(black_box(&pod), |review| {
                volcano::validate_pod(review, &scheduler_names)
            })
        })
    });
    group.bench_function("cronjobs/validate", |b| {
        b.iter(|| {
            create::<volcano::CronJob, _>(black_box(&cronjob), |review| {
                volcano::validate_cronjob(review, &gates)
            })
        })
    });
    group.bench_function("jobflows/validate", |b| {
        b.iter(|| create::<JobFlow, _>(black_box(&jobflow), volcano::validate_jobflow))
    });
    group.bench_function("hypernodes/validate", |b| {
        b.iter(|| create::<HyperNode, _>(black_box(&hypernode), volcano::validate_hypernode))
    });
    group.finish();
}

criterion_group!(benches, volcano_rules);
criterion_main!(benches);
