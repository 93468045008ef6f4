//! The integration tests, as one test binary: a module per area of behaviour, and the support
//! they share (`common`, `fakes`, `processes`, `serve_support`, `webhook_fixture`) declared once
//! here and reached as `crate::common` and so on. One binary links the crate once, where a
//! binary per file relinked it once per file after every change to `src/`.
//!
//! Run one area with a filter on its module: `cargo test --test it breaker::`.
//!
//! A test that changes something for its whole process stays a binary of its own in `tests/`,
//! reaching the support here by `#[path]`: `metrics_install` (the process-wide metrics
//! recorder), `executors` (an in-process `lite` executor makes the process the subreaper of its
//! descendants and, at shutdown, ends every child the process adopted), `lite_descendants` and
//! `shutdown` (what a dispatcher leaves must end with it, with no subreaper in the test process
//! to adopt and end it instead), and `conservation`, `conservation_threads` and `worker_threads`
//! (they swap the process-wide panic hook to keep their deliberate panics quiet, which would
//! hide the failures of tests running beside them).

mod apiserver;
mod common;
mod fakes;
mod processes;
mod serve_support;
mod webhook_fixture;

mod admission_chain;
mod admission_changes;
mod admission_properties;
mod admission_reason;
mod admission_wire;
mod breaker;
mod cluster;
mod commands;
mod config;
mod config_cli;
mod config_env;
mod config_executor;
mod config_worker_threads;
mod deploy;
mod deploy_volcano;
mod dispatch;
mod dispatch_errors;
mod dispatch_refusals;
mod docs;
mod drain;
mod embed_example;
mod example_servers;
mod front_door;
mod front_door_settled;
mod hooks;
mod imports;
mod launches;
mod loadtest;
mod metrics_events;
mod placement;
mod pod_validity;
mod pods;
mod policy;
mod policy_config;
mod policy_rules;
mod prometheus;
mod retries;
mod serve_admit;
mod serve_command;
mod serve_config;
mod serve_connections;
mod serve_dags;
mod serve_dispatch;
mod serve_http;
mod serve_lifecycle;
mod serve_pods;
mod serve_reload;
mod serve_volcano;
mod store;
mod supervised_dispatch;
mod token;
mod volcano_cronjobs;
mod volcano_e2e;
mod volcano_e2e_pods;
mod volcano_e2e_queues;
mod volcano_hypernodes;
mod volcano_jobflows;
mod volcano_jobs;
mod volcano_jobs_validate;
mod volcano_jobs_validate_tasks;
mod volcano_jobs_validate_template;
mod volcano_jobs_validate_update;
mod volcano_podgroups;
mod volcano_pods;
mod volcano_pods_mutate;
mod volcano_queues;
mod webhook;
mod webhook_config;
mod webhook_dispatch;
mod webhook_loadtest;
mod webhook_schema;
mod workload;
