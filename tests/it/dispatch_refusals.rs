//! The built-in refusals that run before the token: the resource unit, the execution allowlist,
//! what Kubernetes accepts in the task's own fields, the image allowlist and the source-mode
//! size, their order, and the request a hook is shown.

use crate::common;
use crate::fakes;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use dexaflow_admission::admission::{
    ChangeError, Field, MAX_ANNOTATIONS_BYTES, QuantityError, ResourceList, TaintEffect,
    Toleration, TolerationOperator, image_allowed, image_repository,
};
use dexaflow_admission::dispatch::Settings;
use dexaflow_admission::dispatch::effective::{build_request, effective_execution};
use dexaflow_admission::dispatch::refusals::{
    MAX_TASK_INSTANCE_ID_BYTES, Refusal, refuse_before_token,
};
use dexaflow_admission::dispatch::settings::{
    AllowedFields, Enforce, ExecutorSettings, ResourceDefaults, ResourceUnit, SourceMode,
};
use dexaflow_admission::dispatch::task::State;
use dexaflow_admission::dispatch::task::Task;
use dexaflow_admission::dispatch::unit::{UnitError, cpu_quantity, memory_quantity};

const GI: u128 = 1 << 30;
const RUNTIME_IMAGE: &str = "ghcr.io/dexadata/runtime@sha256:0000000000000000000000000000000000000000000000000000000000000000";

/// The shared settings with warm pools off and the `lite` executor, as the refusals are
/// checked for an install that runs tasks as local processes.
fn settings() -> Settings {
    Settings {
        warm_pools: false,
        executor: ExecutorSettings::Lite {
            log_dir: PathBuf::from("/tmp/unused"),
            kill_grace: Duration::from_secs(10),
            max_parallel: 1,
        },
        ..fakes::settings()
    }
}

/// One unit of 1 CPU and 4Gi under `enforce`: twice the shared unit's memory, so that the
/// misfits below are misfits of memory as well as CPU.
fn unit(enforce: Enforce) -> ResourceUnit {
    ResourceUnit {
        memory: "4Gi".to_owned(),
        memory_milli: 4 * GI * 1000,
        enforce,
        ..fakes::unit()
    }
}

fn with_unit(enforce: Enforce) -> Settings {
    Settings {
        unit: Some(unit(enforce)),
        ..settings()
    }
}

fn task() -> Task {
    fakes::manual_task()
}

fn list(cpu: Option<&str>, memory: Option<&str>) -> ResourceList {
    ResourceList {
        cpu: cpu.map(str::to_owned),
        memory: memory.map(str::to_owned),
        ephemeral_storage: None,
    }
}

fn names(items: &[&str]) -> Option<BTreeSet<String>> {
    Some(items.iter().map(|item| (*item).to_owned()).collect())
}

fn refusal(task: &Task, settings: &Settings) -> String {
    match refuse_before_token(task, settings) {
        Ok(effective) => panic!("expected a refusal, got {effective:?}"),
        Err(refusal) => refusal.to_string(),
    }
}

// ---- the resource unit ------------------------------------------------------------------------

#[test]
fn a_declared_resource_that_is_no_quantity_is_refused_naming_it_before_the_unit_sees_it() {
    let mut task = task();
    task.resources.limits = list(Some(" 8"), None);
    let refusal = refuse_before_token(&task, &with_unit(Enforce::Refuse)).unwrap_err();
    assert_eq!(
        refusal,
        Refusal::NotAQuantity {
            field: "limits.cpu".to_owned(),
            error: QuantityError {
                quantity: " 8".to_owned()
            },
        }
    );
    assert_eq!(
        refusal.to_string(),
        r#"resources.limits.cpu: " 8" is not a Kubernetes quantity such as "500m", "2" or "512Mi""#
    );
}

#[test]
fn a_declared_resource_that_is_no_quantity_is_refused_without_a_unit_too() {
    let mut task = task();
    task.resources.requests.ephemeral_storage = Some("lots".to_owned());
    assert_eq!(
        refuse_before_token(&task, &settings()),
        Err(Refusal::NotAQuantity {
            field: "requests.ephemeral_storage".to_owned(),
            error: QuantityError {
                quantity: "lots".to_owned()
            },
        })
    );
}

#[test]
fn a_task_that_declares_nothing_gets_its_size_in_units_as_requests_and_limits() {
    let mut task = task();
    task.pool_slots = 2;
    let effective = refuse_before_token(&task, &with_unit(Enforce::Refuse)).unwrap();
    assert_eq!(effective.resources.requests, list(Some("2"), Some("8Gi")));
    assert_eq!(effective.resources.limits, list(Some("2"), Some("8Gi")));
    assert_eq!(effective.size, 2);
    assert_eq!(effective.unit_warning, None);
}

#[test]
fn pool_slots_zero_counts_as_size_one() {
    let mut task = task();
    task.pool_slots = 0;
    let effective = refuse_before_token(&task, &with_unit(Enforce::Refuse)).unwrap();
    assert_eq!(effective.size, 1);
    assert_eq!(effective.resources.limits, list(Some("1"), Some("4Gi")));
}

#[test]
fn a_missing_request_follows_the_declared_limit() {
    let mut task = task();
    task.resources.limits = list(Some("500m"), Some("1Gi"));
    let effective = refuse_before_token(&task, &with_unit(Enforce::Refuse)).unwrap();
    assert_eq!(
        effective.resources.requests,
        list(Some("500m"), Some("1Gi"))
    );
    assert_eq!(effective.resources.limits, list(Some("500m"), Some("1Gi")));
}

#[test]
fn a_missing_limit_is_size_times_unit_when_the_request_is_smaller() {
    let mut task = task();
    task.resources.requests = list(Some("250m"), Some("512Mi"));
    let effective = refuse_before_token(&task, &with_unit(Enforce::Refuse)).unwrap();
    assert_eq!(
        effective.resources.requests,
        list(Some("250m"), Some("512Mi"))
    );
    assert_eq!(effective.resources.limits, list(Some("1"), Some("4Gi")));
}

#[test]
fn a_missing_limit_is_the_request_when_a_tolerated_misfit_asks_for_more() {
    let mut task = task();
    task.resources.requests = list(Some("3"), None);
    let effective = refuse_before_token(&task, &with_unit(Enforce::Warn)).unwrap();
    assert_eq!(effective.resources.limits.cpu.as_deref(), Some("3"));
    assert_eq!(effective.resources.limits.memory.as_deref(), Some("4Gi"));
}

#[test]
fn declared_requests_and_limits_are_never_rewritten() {
    let mut task = task();
    task.resources.requests = list(Some("0.5"), Some("1000Mi"));
    task.resources.limits = list(Some("1000m"), Some("2G"));
    let effective = refuse_before_token(&task, &with_unit(Enforce::Refuse)).unwrap();
    assert_eq!(
        effective.resources.requests,
        list(Some("0.5"), Some("1000Mi"))
    );
    assert_eq!(effective.resources.limits, list(Some("1000m"), Some("2G")));
}

#[test]
fn ephemeral_storage_passes_through_the_unit_unchanged() {
    let mut task = task();
    task.resources.limits.ephemeral_storage = Some("10Gi".to_owned());
    let effective = refuse_before_token(&task, &with_unit(Enforce::Refuse)).unwrap();
    assert_eq!(
        effective.resources.limits.ephemeral_storage.as_deref(),
        Some("10Gi")
    );
    assert_eq!(effective.resources.requests.ephemeral_storage, None);
}

#[test]
fn a_task_over_max_size_is_refused_naming_the_largest_size() {
    let mut task = task();
    task.pool_slots = 65;
    assert_eq!(
        refusal(&task, &with_unit(Enforce::Refuse)),
        "task \"load\" is size 65, above this install's largest size 64 (executor.unit.max_size)"
    );
}

#[test]
fn a_task_at_max_size_is_allowed() {
    let mut task = task();
    task.pool_slots = 64;
    assert_eq!(
        refuse_before_token(&task, &with_unit(Enforce::Refuse))
            .unwrap()
            .size,
        64
    );
}

#[test]
fn a_task_over_max_size_is_refused_even_under_warn() {
    let mut task = task();
    task.pool_slots = 65;
    let refused = refuse_before_token(&task, &with_unit(Enforce::Warn)).unwrap_err();
    assert!(matches!(
        refused,
        Refusal::Unit(UnitError::TooLarge {
            size: 65,
            max_size: 64,
            ..
        })
    ));
}

#[test]
fn a_misfit_under_refuse_is_refused_naming_the_size_it_needs() {
    let mut task = task();
    task.resources.requests = list(Some("2500m"), Some("1Gi"));
    assert_eq!(
        refusal(&task, &with_unit(Enforce::Refuse)),
        "task \"load\" declares resources larger than its size: it is size 1, and one unit is 1 CPU \
         and 4Gi memory, so it needs size: 3 (set it in dexaflow.yaml tasks.load.size, or \
         pool_slots in dag.py)"
    );
}

#[test]
fn a_misfit_counts_limits_as_well_as_requests() {
    let mut task = task();
    task.pool_slots = 2;
    task.resources.limits = list(None, Some("9Gi"));
    let refused = refuse_before_token(&task, &with_unit(Enforce::Refuse)).unwrap_err();
    let Refusal::Unit(UnitError::Misfit(misfit)) = refused else {
        panic!("expected a misfit, got {refused:?}");
    };
    assert_eq!((misfit.size, misfit.need), (2, 3));
}

#[test]
fn a_misfit_under_warn_runs_and_returns_the_warning() {
    let mut task = task();
    task.resources.requests = list(None, Some("5Gi"));
    let effective = refuse_before_token(&task, &with_unit(Enforce::Warn)).unwrap();
    let warning = effective.unit_warning.expect("a warning");
    assert_eq!((warning.size, warning.need), (1, 2));
    assert!(warning.to_string().contains("so it needs size: 2"));
    assert_eq!(effective.size, 1);
}

#[test]
fn a_task_that_fits_its_size_has_no_warning_under_warn() {
    let mut task = task();
    task.resources.requests = list(Some("1"), Some("4Gi"));
    let effective = refuse_before_token(&task, &with_unit(Enforce::Warn)).unwrap();
    assert_eq!(effective.unit_warning, None);
}

#[test]
fn the_unit_in_a_message_is_written_as_kubernetes_writes_it() {
    assert_eq!(cpu_quantity(1000), "1");
    assert_eq!(cpu_quantity(1500), "1500m");
    assert_eq!(cpu_quantity(250), "250m");
    assert_eq!(memory_quantity(512 * (1 << 20) * 1000), "512Mi");
    assert_eq!(memory_quantity(4 * GI * 1000), "4Gi");
    assert_eq!(memory_quantity(1_000_000_000 * 1000), "1000000000");
}

#[test]
fn without_a_unit_a_task_keeps_its_own_resources() {
    let mut task = task();
    task.resources.requests = list(Some("100m"), None);
    let mut settings = settings();
    settings.defaults = ResourceDefaults {
        cpu: Some("250m".to_owned()),
        memory: Some("256Mi".to_owned()),
    };
    let effective = refuse_before_token(&task, &settings).unwrap();
    assert_eq!(effective.resources.requests, list(Some("100m"), None));
    assert_eq!(effective.resources.limits, ResourceList::default());
    assert_eq!(effective.size, 1);
}

#[test]
fn without_a_unit_a_task_that_declares_nothing_gets_the_executor_defaults() {
    let mut settings = settings();
    settings.defaults = ResourceDefaults {
        cpu: Some("250m".to_owned()),
        memory: Some("256Mi".to_owned()),
    };
    let effective = refuse_before_token(&task(), &settings).unwrap();
    assert_eq!(
        effective.resources.requests,
        list(Some("250m"), Some("256Mi"))
    );
    assert_eq!(
        effective.resources.limits,
        list(Some("250m"), Some("256Mi"))
    );
}

// ---- the execution allowlist ------------------------------------------------------------------

#[test]
fn fields_none_refuses_a_task_that_sets_a_node_selector() {
    let mut task = task();
    task.execution
        .node_selector
        .insert("pool".to_owned(), "gpu".to_owned());
    let mut settings = settings();
    settings.allowlist.fields = AllowedFields::None;
    assert_eq!(
        refusal(&task, &settings),
        "execution.node_selector is set but execution_allowlist.fields does not allow it"
    );
}

#[test]
fn fields_none_admits_a_task_that_sets_no_execution_field() {
    let mut settings = settings();
    settings.allowlist.fields = AllowedFields::None;
    assert!(refuse_before_token(&task(), &settings).is_ok());
}

#[test]
fn a_field_list_admits_the_listed_fields() {
    let mut task = task();
    task.execution
        .labels
        .insert("team".to_owned(), "data".to_owned());
    let mut settings = settings();
    settings.allowlist.fields = AllowedFields::Only(names(&["labels"]).unwrap());
    assert!(refuse_before_token(&task, &settings).is_ok());
}

#[test]
fn a_field_list_refuses_a_field_it_does_not_list() {
    let mut task = task();
    task.execution
        .labels
        .insert("team".to_owned(), "data".to_owned());
    task.execution.priority_class_name = "high".to_owned();
    let mut settings = settings();
    settings.allowlist.fields = AllowedFields::Only(names(&["labels"]).unwrap());
    assert_eq!(
        refusal(&task, &settings),
        "execution.priority_class_name is set but execution_allowlist.fields does not allow it"
    );
}

#[test]
fn a_service_account_outside_the_list_is_refused() {
    let mut task = task();
    task.execution.service_account = "admin".to_owned();
    let mut settings = settings();
    settings.allowlist.service_accounts = names(&["etl-runner"]);
    assert_eq!(
        refusal(&task, &settings),
        "execution.service_account \"admin\" is not in execution_allowlist.service_accounts"
    );
}

#[test]
fn a_service_account_in_the_list_is_admitted_as_chosen() {
    let mut task = task();
    task.execution.service_account = "etl-runner".to_owned();
    let mut settings = settings();
    settings.allowlist.service_accounts = names(&["etl-runner"]);
    let effective = refuse_before_token(&task, &settings).unwrap();
    assert_eq!(effective.service_account, "etl-runner");
    assert!(effective.service_account_chosen);
}

#[test]
fn the_default_task_service_account_is_exempt_from_the_list() {
    let mut task = task();
    task.execution.service_account = "dexaflow-task".to_owned();
    let mut settings = settings();
    settings.allowlist.service_accounts = names(&["etl-runner"]);
    let effective = refuse_before_token(&task, &settings).unwrap();
    assert_eq!(effective.service_account, "dexaflow-task");
}

#[test]
fn an_empty_service_account_takes_the_default_and_is_not_chosen() {
    let mut settings = settings();
    settings.allowlist.service_accounts = names(&[]);
    let effective = refuse_before_token(&task(), &settings).unwrap();
    assert_eq!(effective.service_account, "dexaflow-task");
    assert!(!effective.service_account_chosen);
}

#[test]
fn a_priority_class_outside_the_list_is_refused() {
    let mut task = task();
    task.execution.priority_class_name = "critical".to_owned();
    let mut settings = settings();
    settings.allowlist.priority_classes = names(&["batch"]);
    assert_eq!(
        refusal(&task, &settings),
        "execution.priority_class_name \"critical\" is not in execution_allowlist.priority_classes"
    );
}

#[test]
fn a_priority_class_in_the_list_is_admitted() {
    let mut task = task();
    task.execution.priority_class_name = "batch".to_owned();
    let mut settings = settings();
    settings.allowlist.priority_classes = names(&["batch"]);
    assert!(refuse_before_token(&task, &settings).is_ok());
}

// ---- what Kubernetes accepts in the task's own fields -----------------------------------------

fn with_label(key: &str, value: &str) -> Task {
    let mut task = task();
    task.execution
        .labels
        .insert(key.to_owned(), value.to_owned());
    task
}

fn with_annotation(key: &str, value: &str) -> Task {
    let mut task = task();
    task.execution
        .annotations
        .insert(key.to_owned(), value.to_owned());
    task
}

fn with_toleration(toleration: Toleration) -> Task {
    let mut task = task();
    task.execution.tolerations.push(toleration);
    task
}

fn kubernetes_settings() -> Settings {
    Settings {
        executor: ExecutorSettings::Kubernetes {
            namespace: "dexaflow".to_owned(),
            dry_run_dir: None,
            run_as_non_root: true,
        },
        ..settings()
    }
}

#[test]
fn a_label_key_kubernetes_rejects_is_refused_naming_the_field_and_the_key() {
    assert_eq!(
        refusal(&with_label("team name", "data"), &settings()),
        "execution.labels: label key \"team name\" is invalid: name part must be alphanumerics, \
         '-', '_' or '.', starting and ending with an alphanumeric"
    );
}

#[test]
fn a_label_value_kubernetes_rejects_is_refused_naming_the_value() {
    let refused = refuse_before_token(&with_label("team", "data team"), &settings());
    assert_eq!(
        refused,
        Err(Refusal::Invalid {
            field: "execution.labels",
            error: ChangeError::InvalidValue {
                field: Field::Label,
                key: "team".to_owned(),
                value: "data team".to_owned(),
                problem: "must be alphanumerics, '-', '_' or '.', starting and ending with an \
                          alphanumeric"
                    .to_owned(),
            },
        })
    );
}

#[test]
fn a_label_value_of_64_characters_is_refused_and_63_are_admitted() {
    assert!(refuse_before_token(&with_label("team", &"d".repeat(63)), &settings()).is_ok());
    assert_eq!(
        refusal(&with_label("team", &"d".repeat(64)), &settings()),
        format!(
            "execution.labels: label \"team\" value {:?} is invalid: must be at most 63 characters",
            "d".repeat(64)
        )
    );
}

#[test]
fn a_reserved_label_or_annotation_key_of_the_task_s_own_is_refused() {
    assert_eq!(
        refusal(&with_label("dexaflow.io/task-id", "forged"), &settings()),
        "execution.labels: label key \"dexaflow.io/task-id\" is reserved"
    );
    assert_eq!(
        refusal(&with_annotation("team.leoflow.io/x", "y"), &settings()),
        "execution.annotations: annotation key \"team.leoflow.io/x\" is reserved"
    );
}

#[test]
fn an_annotation_key_is_lower_cased_before_it_is_checked() {
    assert!(refuse_before_token(&with_annotation("Example.COM/Owner", "x"), &settings()).is_ok());
    assert_eq!(
        refusal(&with_annotation("Dexaflow.IO/pool", "gpu"), &settings()),
        "execution.annotations: annotation key \"Dexaflow.IO/pool\" is reserved"
    );
}

#[test]
fn an_annotation_key_kubernetes_rejects_is_refused_and_any_value_is_admitted() {
    assert_eq!(
        refusal(&with_annotation("note/", "x"), &settings()),
        "execution.annotations: annotation key \"note/\" is invalid: name part must not be empty"
    );
    let free_text = "any text: with spaces, \u{e9}, \"quotes\" and\nnewlines";
    assert!(refuse_before_token(&with_annotation("note", free_text), &settings()).is_ok());
}

#[test]
fn a_node_selector_entry_kubernetes_rejects_is_refused() {
    let mut task = task();
    task.execution
        .node_selector
        .insert("pool".to_owned(), "-gpu".to_owned());
    assert!(matches!(
        refuse_before_token(&task, &settings()),
        Err(Refusal::Invalid {
            field: "execution.node_selector",
            error: ChangeError::InvalidValue {
                field: Field::NodeSelector,
                ..
            },
        })
    ));
    let mut task = self::task();
    task.execution
        .node_selector
        .insert("kubernetes.io/os".to_owned(), "linux".to_owned());
    assert!(refuse_before_token(&task, &settings()).is_ok());
}

#[test]
fn a_toleration_kubernetes_rejects_is_refused_naming_its_position() {
    let seconds_without_no_execute = Toleration {
        key: "gpu".to_owned(),
        operator: TolerationOperator::Exists,
        value: String::new(),
        effect: Some(TaintEffect::NoSchedule),
        toleration_seconds: Some(30),
    };
    assert_eq!(
        refusal(&with_toleration(seconds_without_no_execute), &settings()),
        "execution.tolerations: toleration 0 (key \"gpu\") is invalid: toleration_seconds needs \
         effect NoExecute"
    );
    let empty_key_equal = Toleration {
        key: String::new(),
        operator: TolerationOperator::Equal,
        value: "x".to_owned(),
        effect: None,
        toleration_seconds: None,
    };
    assert!(matches!(
        refuse_before_token(&with_toleration(empty_key_equal), &settings()),
        Err(Refusal::Invalid {
            field: "execution.tolerations",
            error: ChangeError::InvalidToleration { index: 0, .. },
        })
    ));
}

#[test]
fn a_valid_toleration_is_admitted() {
    let toleration = Toleration {
        key: "nvidia.com/gpu".to_owned(),
        operator: TolerationOperator::Exists,
        value: String::new(),
        effect: Some(TaintEffect::NoExecute),
        toleration_seconds: Some(300),
    };
    assert!(refuse_before_token(&with_toleration(toleration), &settings()).is_ok());
}

#[test]
fn a_service_account_or_priority_class_name_kubernetes_rejects_is_refused() {
    let mut task = task();
    task.execution.service_account = "ETL_Runner".to_owned();
    assert_eq!(
        refusal(&task, &settings()),
        "execution.service_account: service account \"ETL_Runner\" is invalid: must be \
         lower-case alphanumerics, '-' or '.', each part starting and ending with an alphanumeric"
    );
    let mut task = self::task();
    task.execution.priority_class_name = "high priority".to_owned();
    assert!(matches!(
        refuse_before_token(&task, &settings()),
        Err(Refusal::Invalid {
            field: "execution.priority_class_name",
            error: ChangeError::InvalidName {
                field: "priority class",
                ..
            },
        })
    ));
}

#[test]
fn the_allowlist_is_reported_before_what_kubernetes_would_reject() {
    let mut task = with_label("bad key", "x");
    task.execution.service_account = "ETL_Runner".to_owned();
    let mut settings = settings();
    settings.allowlist.fields = AllowedFields::Only(names(&["service_account"]).unwrap());
    assert_eq!(
        refuse_before_token(&task, &settings),
        Err(Refusal::FieldNotAllowed { field: "labels" })
    );
}

#[test]
fn an_environment_variable_name_kubernetes_rejects_is_refused() {
    for name in ["A=B", "", "TAB\tHERE", "caf\u{e9}"] {
        let mut task = task();
        task.env.insert(name.to_owned(), "value".to_owned());
        assert!(
            matches!(
                refuse_before_token(&task, &settings()),
                Err(Refusal::InvalidEnvName { name: ref refused, .. }) if refused == name
            ),
            "{name:?}"
        );
    }
    let mut task = task();
    task.env.insert("my.var-1 x".to_owned(), "value".to_owned());
    assert!(refuse_before_token(&task, &settings()).is_ok());
}

#[test]
fn a_limit_below_its_request_is_refused_naming_both() {
    let mut task = task();
    task.resources.requests = list(Some("2"), Some("1Gi"));
    task.resources.limits = list(Some("1500m"), Some("1Gi"));
    assert_eq!(
        refusal(&task, &settings()),
        "resources.limits.cpu: \"1500m\" is below the request \"2\""
    );
}

#[test]
fn a_limit_below_its_request_is_refused_under_a_unit_too() {
    let mut task = task();
    task.resources.requests = list(None, Some("1Gi"));
    task.resources.limits = list(None, Some("1000Mi"));
    assert!(matches!(
        refuse_before_token(&task, &with_unit(Enforce::Refuse)),
        Err(Refusal::LimitBelowRequest {
            resource: "memory",
            ..
        })
    ));
}

#[test]
fn a_limit_equal_to_its_request_in_other_units_is_admitted() {
    let mut task = task();
    task.resources.requests = list(Some("0.5"), Some("1Gi"));
    task.resources.limits = list(Some("500m"), Some("1024Mi"));
    assert!(refuse_before_token(&task, &settings()).is_ok());
}

#[test]
fn on_the_kubernetes_executor_a_task_without_an_image_is_refused() {
    let mut task = task();
    task.image = String::new();
    assert_eq!(
        refusal(&task, &kubernetes_settings()),
        "image: \"\" is invalid: a pod needs an image"
    );
    assert!(
        refuse_before_token(&task, &settings()).is_ok(),
        "lite runs no image"
    );
    task.image = " ghcr.io/acme/etl:1.2".to_owned();
    assert!(matches!(
        refuse_before_token(&task, &kubernetes_settings()),
        Err(Refusal::InvalidImage { .. })
    ));
}

#[test]
fn annotations_over_256_kib_with_the_task_instance_id_are_refused() {
    // The pod's own annotation is `dexaflow.io/task-instance-id: acme.etl.manual__1.load`.
    let own = "dexaflow.io/task-instance-id".len() + "acme.etl.manual__1.load".len();
    let room = MAX_ANNOTATIONS_BYTES - own - "note".len();
    assert!(refuse_before_token(&with_annotation("note", &"n".repeat(room)), &settings()).is_ok());
    assert_eq!(
        refusal(&with_annotation("note", &"n".repeat(room + 1)), &settings()),
        "execution.annotations: annotations would take 262145 bytes, over the 262144 byte limit"
    );
}

#[test]
fn a_task_id_too_long_for_a_pod_is_refused_as_too_long_not_as_large_annotations() {
    let mut task = task();
    task.key.task_id = "t".repeat(1 << 20);

    let reason = refusal(&task, &settings());

    assert!(
        matches!(
            refuse_before_token(&task, &settings()),
            Err(Refusal::TaskInstanceIdTooLong {
                longest: "task_id",
                longest_bytes: 1_048_576,
                limit: MAX_TASK_INSTANCE_ID_BYTES,
                ..
            })
        ),
        "{reason}"
    );
    assert!(reason.contains("task instance id"), "{reason}");
    assert!(
        reason.contains(&format!("over the {MAX_TASK_INSTANCE_ID_BYTES} byte limit")),
        "{reason}"
    );
    assert!(!reason.contains("annotations"), "{reason}");
}

#[test]
fn a_task_instance_id_at_the_limit_passes_and_one_byte_more_is_refused() {
    let mut task = task();
    let others = task.key.tenant.len() + task.key.dag_id.len() + task.key.run_id.len() + 3;
    task.key.task_id = "t".repeat(MAX_TASK_INSTANCE_ID_BYTES - others);
    assert!(task.execution.annotations.is_empty());

    assert!(refuse_before_token(&task, &settings()).is_ok());

    task.key.task_id.push('t');
    assert!(matches!(
        refuse_before_token(&task, &settings()),
        Err(Refusal::TaskInstanceIdTooLong { bytes, .. }) if bytes == MAX_TASK_INSTANCE_ID_BYTES + 1
    ));
}

#[test]
fn the_annotation_total_counts_the_source_of_a_source_mode_attempt() {
    let mut task = source_task(131_072);
    let own = "dexaflow.io/task-instance-id".len()
        + "acme.etl.manual__1.load".len()
        + "dexaflow.io/dag-source".len()
        + 131_072;
    let room = MAX_ANNOTATIONS_BYTES - own - "note".len();
    task.execution
        .annotations
        .insert("note".to_owned(), "n".repeat(room));
    assert!(refuse_before_token(&task, &source_mode_settings()).is_ok());
    task.execution
        .annotations
        .insert("note".to_owned(), "n".repeat(room + 1));
    assert!(matches!(
        refuse_before_token(&task, &source_mode_settings()),
        Err(Refusal::Invalid {
            field: "execution.annotations",
            error: ChangeError::AnnotationsTooLarge { bytes: 262_145 },
        })
    ));
    // Outside source mode the source is not on the pod and does not count.
    assert!(refuse_before_token(&task, &settings()).is_ok());
}

/// Dispatches one source-mode task with a 128 KiB source through a hook that adds an annotation
/// of `bytes` bytes, and returns the harness.
async fn source_mode_task_with_a_hook_annotation_of(bytes: usize) -> fakes::Harness {
    let changes = common::annotation("example.com/big", &"x".repeat(bytes));
    let hook: Arc<dyn dexaflow_admission::admission::Hook> =
        common::FakeHook::changing("annotate", changes).shared();
    let settings = Settings {
        source_mode: source_mode_settings().source_mode,
        ..fakes::settings()
    };
    let harness = fakes::start(settings, fakes::supervision(), vec![hook]);
    let task = Task {
        image: String::new(),
        source: Some("s".repeat(131_072)),
        ..fakes::task("train")
    };
    harness.offer_and_tick(vec![task]).await;
    harness
}

#[actix::test]
async fn a_hook_s_annotations_too_large_with_the_pod_s_own_refuse_the_attempt_with_no_token() {
    // The pod's own: the task instance id (28 + 17 bytes) and the source (22 + 131072 bytes);
    // the hook's key takes 15. 131,000 bytes more make 262,154, over 262,144.
    let harness = source_mode_task_with_a_hook_annotation_of(131_000).await;

    let row = harness
        .store
        .get(&fakes::task("train").key)
        .expect("task stored");
    assert_eq!(row.state, State::Failed);
    assert_eq!(
        row.failure_reason.as_deref(),
        Some(
            "dispatch refused: admission: annotations would take 262154 bytes, over the 262144 byte limit"
        )
    );
    assert!(!row.token_minted);
    assert!(harness.minter.minted().is_empty());
    assert!(harness.executor.calls().is_empty());
}

#[actix::test]
async fn a_hook_s_annotations_that_fit_with_the_pod_s_own_are_admitted() {
    let harness = source_mode_task_with_a_hook_annotation_of(130_990).await;

    let calls = harness.executor.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(
        calls[0].execution.annotations["example.com/big"].len(),
        130_990
    );
    assert_eq!(harness.minter.minted().len(), 1);
}

// ---- the image allowlist ----------------------------------------------------------------------

fn images(entries: &[&str]) -> Vec<String> {
    entries.iter().map(|entry| (*entry).to_owned()).collect()
}

#[test]
fn a_prefix_entry_admits_every_image_under_it() {
    let allowed = images(&["ghcr.io/acme/"]);
    assert!(image_allowed("ghcr.io/acme/etl:1.2", &allowed));
    assert!(image_allowed("ghcr.io/acme/team/tool@sha256:abc", &allowed));
    assert!(!image_allowed("ghcr.io/acme-evil/etl:1.2", &allowed));
}

#[test]
fn a_repository_entry_admits_the_repository_with_a_tag_or_a_digest() {
    let allowed = images(&["ghcr.io/acme/etl"]);
    assert!(image_allowed("ghcr.io/acme/etl", &allowed));
    assert!(image_allowed("ghcr.io/acme/etl:1.2", &allowed));
    assert!(image_allowed(
        "ghcr.io/acme/etl@sha256:4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945",
        &allowed
    ));
    assert!(image_allowed("ghcr.io/acme/etl:1.2@sha256:abc", &allowed));
}

#[test]
fn a_repository_entry_refuses_a_longer_name_that_starts_with_it() {
    let mut task = task();
    task.image = "ghcr.io/acme/etl-evil:1.2".to_owned();
    let mut settings = settings();
    settings.allowlist.images = Some(images(&["ghcr.io/acme/etl"]));
    assert_eq!(
        refusal(&task, &settings),
        "image \"ghcr.io/acme/etl-evil:1.2\" is not in execution_allowlist.images"
    );
}

#[test]
fn a_registry_port_is_not_taken_for_a_tag() {
    assert_eq!(
        image_repository("localhost:5000/app:1"),
        "localhost:5000/app"
    );
    assert_eq!(image_repository("localhost:5000/app"), "localhost:5000/app");
    assert!(image_allowed(
        "localhost:5000/app:1",
        &images(&["localhost:5000/app"])
    ));
    assert!(!image_allowed(
        "localhost:5000/app:1",
        &images(&["localhost"])
    ));
}

#[test]
fn an_image_in_the_list_is_admitted() {
    let mut settings = settings();
    settings.allowlist.images = Some(images(&["ghcr.io/acme/etl"]));
    let effective = refuse_before_token(&task(), &settings).unwrap();
    assert_eq!(effective.image, "ghcr.io/acme/etl:1.2");
}

#[test]
fn the_runtime_image_of_source_mode_is_exempt_from_the_image_list() {
    let mut task = task();
    task.image = String::new();
    task.source = Some("print('hi')".to_owned());
    let mut settings = source_mode_settings();
    settings.allowlist.images = Some(images(&["ghcr.io/acme/"]));
    let effective = refuse_before_token(&task, &settings).unwrap();
    assert_eq!(effective.image, RUNTIME_IMAGE);
}

// ---- source mode ------------------------------------------------------------------------------

fn source_mode_settings() -> Settings {
    Settings {
        source_mode: SourceMode {
            enabled: true,
            image: RUNTIME_IMAGE.to_owned(),
            max_bytes: 131_072,
        },
        ..settings()
    }
}

fn source_task(bytes: usize) -> Task {
    Task {
        image: RUNTIME_IMAGE.to_owned(),
        source: Some("x".repeat(bytes)),
        ..task()
    }
}

#[test]
fn a_source_of_exactly_131072_bytes_runs_in_source_mode() {
    let effective = refuse_before_token(&source_task(131_072), &source_mode_settings()).unwrap();
    assert!(effective.source_mode);
}

#[test]
fn a_source_of_131073_bytes_is_refused() {
    assert_eq!(
        refusal(&source_task(131_073), &source_mode_settings()),
        "source mode: DAG \"etl\" source is 131073 bytes, over the 131072 byte limit; build an \
         image instead"
    );
}

#[test]
fn the_runtime_image_without_a_source_is_refused() {
    let mut task = source_task(0);
    task.source = None;
    assert_eq!(
        refusal(&task, &source_mode_settings()),
        "source mode: DAG \"etl\" uses the runtime image but has no source"
    );
}

#[test]
fn source_mode_does_not_apply_to_a_task_with_its_own_image() {
    let task = Task {
        source: Some("x".repeat(200_000)),
        ..task()
    };
    let effective = refuse_before_token(&task, &source_mode_settings()).unwrap();
    assert!(!effective.source_mode);
}

#[test]
fn source_mode_does_not_apply_while_it_is_disabled() {
    let effective = refuse_before_token(&source_task(200_000), &settings()).unwrap();
    assert!(!effective.source_mode);
}

// ---- order ------------------------------------------------------------------------------------

#[test]
fn a_task_failing_both_the_unit_and_the_image_list_reports_the_unit() {
    let mut task = task();
    task.pool_slots = 100;
    task.image = "evil.io/x:1".to_owned();
    let mut settings = with_unit(Enforce::Refuse);
    settings.allowlist.images = Some(images(&["ghcr.io/acme/"]));
    assert!(matches!(
        refuse_before_token(&task, &settings),
        Err(Refusal::Unit(_))
    ));
}

#[test]
fn a_task_failing_both_the_allowlist_and_the_image_list_reports_the_allowlist() {
    let mut task = task();
    task.execution.service_account = "admin".to_owned();
    task.image = "evil.io/x:1".to_owned();
    let mut settings = settings();
    settings.allowlist.service_accounts = names(&[]);
    settings.allowlist.images = Some(images(&["ghcr.io/acme/"]));
    assert!(matches!(
        refuse_before_token(&task, &settings),
        Err(Refusal::ServiceAccountNotAllowed { .. })
    ));
}

#[test]
fn a_task_failing_both_the_image_list_and_source_mode_reports_the_image() {
    let mut task = source_task(200_000);
    task.image = "evil.io/x:1".to_owned();
    let mut settings = source_mode_settings();
    settings.allowlist.images = Some(images(&["ghcr.io/acme/"]));
    assert!(matches!(
        refuse_before_token(&task, &settings),
        Err(Refusal::ImageNotAllowed { .. })
    ));
}

// ---- the request ------------------------------------------------------------------------------

#[test]
fn the_request_carries_the_effective_values() {
    let mut task = task();
    task.pool_slots = 2;
    task.execution
        .node_selector
        .insert("pool".to_owned(), "batch".to_owned());
    task.execution.priority_class_name = "batch".to_owned();
    let effective = refuse_before_token(&task, &with_unit(Enforce::Refuse)).unwrap();
    let request = build_request(&task, &effective, 3);
    assert_eq!(
        (
            request.tenant.as_str(),
            request.dag_id.as_str(),
            request.run_id.as_str(),
            request.task_id.as_str()
        ),
        ("acme", "etl", "manual__1", "load")
    );
    assert_eq!(request.try_number, 3);
    assert_eq!(request.operator, "BashOperator");
    assert_eq!(request.image, "ghcr.io/acme/etl:1.2");
    assert_eq!(request.size, 2);
    assert_eq!(request.resources, effective.resources);
    assert_eq!(request.execution.service_account, "dexaflow-task");
    assert!(!request.execution.service_account_chosen);
    assert_eq!(request.execution.priority_class, "batch");
    assert_eq!(request.execution.node_selector["pool"], "batch");
    assert_eq!(request.execution, effective_execution(&task, &effective));
    assert!(!request.source_mode);
}

#[test]
fn the_request_carries_no_environment_source_or_command() {
    let mut task = source_task(64);
    task.source = Some("SOURCE-MARKER".to_owned());
    task.command = vec!["COMMAND-MARKER".to_owned()];
    task.env
        .insert("ENV-KEY-MARKER".to_owned(), "ENV-VALUE-MARKER".to_owned());
    let effective = refuse_before_token(&task, &source_mode_settings()).unwrap();
    let request = build_request(&task, &effective, 1);
    let wire = serde_json::to_string(&request).unwrap();
    for marker in [
        "SOURCE-MARKER",
        "COMMAND-MARKER",
        "ENV-KEY-MARKER",
        "ENV-VALUE-MARKER",
    ] {
        assert!(!wire.contains(marker), "{marker} leaked into {wire}");
    }
    assert!(request.source_mode);
}

// ---- each refusal path end to end through the dispatcher ---------------------------------------

/// Dispatches `task` under `settings` through a dispatcher whose one hook admits everything, and
/// asserts the attempt was refused with a reason starting `reason`, before the hook, with no token
/// and no executor call.
async fn refused_before_any_hook(settings: Settings, task: Task, reason: &str) {
    let hook = common::FakeHook::admitting("quota").shared();
    let mut harness = fakes::start(settings, fakes::supervision(), vec![hook.clone()]);

    let row = harness.dispatch(task).await;

    assert_eq!(row.state, State::Failed);
    let text = row.failure_reason.expect("a refusal has a reason");
    assert!(text.starts_with(reason), "{text}");
    assert_eq!(hook.calls(), 0);
    assert!(!row.token_minted);
    assert!(harness.minter.minted().is_empty());
    assert!(harness.executor.calls().is_empty());
}

/// [`fakes::task`] `load` with `change` applied.
fn load(change: impl FnOnce(&mut Task)) -> Task {
    let mut task = fakes::task("load");
    change(&mut task);
    task
}

#[actix::test]
async fn resource_that_is_no_quantity_is_refused_end_to_end_with_no_token_and_no_executor_call() {
    let task = load(|task| task.resources.requests.cpu = Some("lots".to_owned()));
    refused_before_any_hook(
        fakes::settings(),
        task,
        "dispatch refused: resources.requests.cpu",
    )
    .await;
}

#[actix::test]
async fn misfit_of_the_unit_is_refused_end_to_end_with_no_token_and_no_executor_call() {
    let settings = Settings {
        unit: Some(fakes::unit()),
        ..fakes::settings()
    };
    let task = load(|task| task.resources.requests.cpu = Some("4".to_owned()));
    refused_before_any_hook(settings, task, "dispatch refused: task \"load\" declares").await;
}

#[actix::test]
async fn field_the_allowlist_does_not_allow_is_refused_end_to_end_with_no_token_and_no_executor_call()
 {
    let mut settings = fakes::settings();
    settings.allowlist.fields = AllowedFields::None;
    let task = load(|task| {
        task.execution
            .node_selector
            .insert("disk".to_owned(), "ssd".to_owned());
    });
    refused_before_any_hook(
        settings,
        task,
        "dispatch refused: execution.node_selector is set but",
    )
    .await;
}

#[actix::test]
async fn service_account_outside_the_allowlist_is_refused_end_to_end_with_no_token_and_no_executor_call()
 {
    let mut settings = fakes::settings();
    settings.allowlist.service_accounts = names(&["etl-runner"]);
    let task = load(|task| task.execution.service_account = "admin".to_owned());
    refused_before_any_hook(
        settings,
        task,
        "dispatch refused: execution.service_account \"admin\"",
    )
    .await;
}

#[actix::test]
async fn priority_class_outside_the_allowlist_is_refused_end_to_end_with_no_token_and_no_executor_call()
 {
    let mut settings = fakes::settings();
    settings.allowlist.priority_classes = names(&["batch"]);
    let task = load(|task| task.execution.priority_class_name = "critical".to_owned());
    refused_before_any_hook(
        settings,
        task,
        "dispatch refused: execution.priority_class_name \"critical\"",
    )
    .await;
}

#[actix::test]
async fn label_kubernetes_rejects_is_refused_end_to_end_with_no_token_and_no_executor_call() {
    let task = load(|task| {
        task.execution
            .labels
            .insert("bad key!".to_owned(), "v".to_owned());
    });
    refused_before_any_hook(
        fakes::settings(),
        task,
        "dispatch refused: execution.labels",
    )
    .await;
}

#[actix::test]
async fn limit_below_its_request_is_refused_end_to_end_with_no_token_and_no_executor_call() {
    let task = load(|task| {
        task.resources.requests = list(None, Some("1Gi"));
        task.resources.limits = list(None, Some("1000Mi"));
    });
    refused_before_any_hook(
        fakes::settings(),
        task,
        "dispatch refused: resources.limits.memory",
    )
    .await;
}

#[actix::test]
async fn invalid_env_name_is_refused_end_to_end_with_no_token_and_no_executor_call() {
    let task = load(|task| {
        task.env.insert("A=B".to_owned(), "value".to_owned());
    });
    refused_before_any_hook(
        fakes::settings(),
        task,
        "dispatch refused: env: variable name",
    )
    .await;
}

#[actix::test]
async fn image_outside_the_allowlist_is_refused_end_to_end_with_no_token_and_no_executor_call() {
    let mut settings = fakes::settings();
    settings.allowlist.images = Some(images(&["ghcr.io/other/"]));
    refused_before_any_hook(
        settings,
        fakes::task("load"),
        "dispatch refused: image \"ghcr.io/acme/etl:1.2\" is not in execution_allowlist.images",
    )
    .await;
}

#[actix::test]
async fn source_too_large_for_the_pod_is_refused_end_to_end_with_no_token_and_no_executor_call() {
    let settings = Settings {
        source_mode: source_mode_settings().source_mode,
        ..fakes::settings()
    };
    let task = Task {
        image: String::new(),
        source: Some("s".repeat(MAX_ANNOTATIONS_BYTES)),
        ..fakes::task("load")
    };
    refused_before_any_hook(settings, task, "dispatch refused: ").await;
}

/// Dispatches [`fakes::task`] `load` through `hook` alone and asserts the attempt was refused
/// after one call with a reason starting `reason`, with no token and no executor call.
async fn refused_by_the_hook(hook: common::FakeHook, reason: &str) {
    let hook = hook.shared();
    let mut harness = fakes::start(fakes::settings(), fakes::supervision(), vec![hook.clone()]);

    let row = harness.dispatch(fakes::task("load")).await;

    assert_eq!(row.state, State::Failed);
    let text = row.failure_reason.expect("a refusal has a reason");
    assert!(text.starts_with(reason), "{text}");
    assert_eq!(hook.calls(), 1);
    assert!(!row.token_minted);
    assert!(harness.minter.minted().is_empty());
    assert!(harness.executor.calls().is_empty());
}

#[actix::test]
async fn hook_refusal_is_final_end_to_end_with_no_token_and_no_executor_call() {
    let hook = common::FakeHook::refusing("quota", "over quota");
    refused_by_the_hook(hook, "dispatch refused: admission: over quota").await;
}

#[actix::test]
async fn invalid_change_by_a_hook_is_refused_end_to_end_with_no_token_and_no_executor_call() {
    let hook = common::FakeHook::changing("labeller", common::label("team", "bad value!"));
    refused_by_the_hook(hook, "dispatch refused: admission: hook \"labeller\"").await;
}
