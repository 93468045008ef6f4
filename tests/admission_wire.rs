//! The JSON wire shape (ADR 0100 §8): `api_version: dexaflow.io/admission/v1`, snake_case
//! fields, round trips, and strict decoding that refuses unknown fields at every level.

mod common;

use common::{equal_toleration, sample_request};
use dexaflow_admission::admission::{
    API_VERSION, Changes, Decision, Request, ResourceList, TaintEffect, Toleration,
    TolerationOperator,
};
use serde_json::{Value, json};

/// A request with every field set, so that a round trip covers all of them.
fn full_request() -> Request {
    let mut request = sample_request();
    request.try_number = 3;
    request.size = 2;
    request.source_mode = true;
    request.resources.requests = ResourceList {
        cpu: Some("500m".into()),
        memory: Some("512Mi".into()),
        ephemeral_storage: Some("1Gi".into()),
    };
    request.resources.limits.cpu = Some("1".into());
    request.execution.service_account_chosen = true;
    request.execution.priority_class = "batch-low".into();
    request.execution.runtime_class_name = "gvisor".into();
    request
        .execution
        .annotations
        .insert("example.com/note".into(), "hello".into());
    request.execution.tolerations = vec![
        equal_toleration("pool", "gpu"),
        Toleration {
            key: "node.kubernetes.io/unreachable".into(),
            operator: TolerationOperator::Exists,
            value: String::new(),
            effect: Some(TaintEffect::NoExecute),
            toleration_seconds: Some(300),
        },
    ];
    request
}

/// Changes with every field set.
fn full_changes() -> Changes {
    let mut changes = Changes {
        tolerations: vec![equal_toleration("pool", "gpu")],
        priority_class: Some("batch-high".into()),
        service_account: Some("etl-runner".into()),
        runtime_class_name: Some("gvisor".into()),
        fill_limits: Some(ResourceList {
            cpu: Some("2".into()),
            memory: None,
            ephemeral_storage: Some("2Gi".into()),
        }),
        ..Changes::default()
    };
    changes.node_selector.insert("pool".into(), "gpu".into());
    changes.labels.insert("tier".into(), "gold".into());
    changes
        .annotations
        .insert("example.com/note".into(), "hi".into());
    changes
}

fn request_json() -> Value {
    serde_json::to_value(full_request()).expect("a request always serializes")
}

/// Decodes `value` as a `T`, returning the error text when decoding fails.
fn decode<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, String> {
    serde_json::from_value(value).map_err(|error| error.to_string())
}

#[test]
fn request_json_round_trips() {
    let request = full_request();

    let text = serde_json::to_string(&request).expect("a request always serializes");
    let decoded: Request = serde_json::from_str(&text).expect("its own JSON decodes");

    assert_eq!(decoded, request);
}

#[test]
fn each_decision_round_trips() {
    let decisions = [
        Decision::Admit,
        Decision::AdmitWith(full_changes()),
        Decision::AdmitWith(Changes::default()),
        Decision::Hold("frozen until 18:00".into()),
        Decision::Refuse("tenant acme is over budget".into()),
    ];

    for decision in decisions {
        let text = serde_json::to_string(&decision).expect("a decision always serializes");
        let decoded: Decision = serde_json::from_str(&text).expect("its own JSON decodes");

        assert_eq!(decoded, decision, "{text}");
    }
}

#[test]
fn request_carries_the_api_version() {
    assert_eq!(API_VERSION, "dexaflow.io/admission/v1");
    assert_eq!(Request::new("acme", "etl", "load").api_version, API_VERSION);
    assert_eq!(request_json()["api_version"], "dexaflow.io/admission/v1");
}

#[test]
fn request_field_names_are_snake_case() {
    let json = request_json();

    for key in [
        "api_version",
        "tenant",
        "dag_id",
        "run_id",
        "task_id",
        "try_number",
        "operator",
        "image",
        "resources",
        "execution",
        "size",
        "source_mode",
    ] {
        assert!(json.get(key).is_some(), "top-level {key}");
    }
    for key in [
        "service_account",
        "service_account_chosen",
        "node_selector",
        "tolerations",
        "priority_class",
        "runtime_class_name",
        "labels",
        "annotations",
    ] {
        assert!(json["execution"].get(key).is_some(), "execution.{key}");
    }
    assert_eq!(
        json["resources"]["requests"]["ephemeral_storage"], "1Gi",
        "resources.requests.ephemeral_storage"
    );
    assert_eq!(
        json["execution"]["tolerations"][1]["toleration_seconds"],
        300
    );
    for camel in ["dagId", "tryNumber", "apiVersion", "sourceMode"] {
        assert!(json.get(camel).is_none(), "{camel}");
    }
}

#[test]
fn toleration_uses_the_kubernetes_spelling_of_operator_and_effect() {
    let json = request_json();

    assert_eq!(
        json["execution"]["tolerations"][1],
        json!({
            "key": "node.kubernetes.io/unreachable",
            "operator": "Exists",
            "value": "",
            "effect": "NoExecute",
            "toleration_seconds": 300,
        })
    );
}

#[test]
fn decision_json_names_the_decision_and_carries_its_detail() {
    let encode = |decision: &Decision| serde_json::to_value(decision).expect("serializes");

    assert_eq!(encode(&Decision::Admit), json!({"decision": "admit"}));
    assert_eq!(
        encode(&Decision::Hold("wait".into())),
        json!({"decision": "hold", "detail": "wait"})
    );
    assert_eq!(
        encode(&Decision::Refuse("no".into())),
        json!({"decision": "refuse", "detail": "no"})
    );
    assert_eq!(
        encode(&Decision::AdmitWith(Changes::default())),
        json!({"decision": "admit_with", "detail": {}}),
        "unset changes are left out"
    );
}

#[test]
fn changes_field_names_are_snake_case() {
    let json = serde_json::to_value(Decision::AdmitWith(full_changes())).expect("serializes");
    let detail = &json["detail"];

    for key in [
        "node_selector",
        "tolerations",
        "priority_class",
        "service_account",
        "labels",
        "annotations",
        "runtime_class_name",
        "fill_limits",
    ] {
        assert!(detail.get(key).is_some(), "detail.{key}");
    }
    assert_eq!(detail["fill_limits"]["ephemeral_storage"], "2Gi");
}

#[test]
fn webhook_answer_decodes_into_a_decision() {
    let answer = json!({
        "decision": "admit_with",
        "detail": {
            "node_selector": {"pool": "gpu"},
            "tolerations": [{"key": "pool", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}],
        },
    });

    let decoded: Decision = decode(answer).expect("a valid answer decodes");

    let mut expected = Changes {
        tolerations: vec![equal_toleration("pool", "gpu")],
        ..Changes::default()
    };
    expected.node_selector.insert("pool".into(), "gpu".into());
    assert_eq!(decoded, Decision::AdmitWith(expected));
}

#[test]
fn request_with_an_unknown_top_level_field_is_rejected() {
    let mut json = request_json();
    json["namespace"] = json!("other");

    let error = decode::<Request>(json).expect_err("unknown field");

    assert!(error.contains("unknown field `namespace`"), "{error}");
}

#[test]
fn request_with_an_unknown_nested_field_is_rejected() {
    let nested = [
        ("/execution", "env"),
        ("/resources", "gpus"),
        ("/resources/requests", "nvidia_gpu"),
        ("/execution/tolerations/0", "tolerationSeconds"),
    ];
    for (pointer, field) in nested {
        let mut json = request_json();
        json.pointer_mut(pointer)
            .and_then(Value::as_object_mut)
            .expect("the pointer names an object")
            .insert(field.into(), json!("x"));

        let error = decode::<Request>(json).expect_err("unknown field");

        assert!(
            error.contains(&format!("unknown field `{field}`")),
            "{pointer}: {error}"
        );
    }
}

#[test]
fn request_missing_a_field_is_rejected() {
    let mut json = request_json();
    json.as_object_mut()
        .expect("a request is an object")
        .remove("api_version");

    let error = decode::<Request>(json).expect_err("missing field");

    assert!(error.contains("missing field `api_version`"), "{error}");
}

#[test]
fn decision_with_an_unknown_field_is_rejected() {
    let answer = json!({"decision": "admit", "uid": "1234"});

    let error = decode::<Decision>(answer).expect_err("unknown field");

    assert!(error.contains(r#""uid""#), "{error}");
}

#[test]
fn changes_with_an_unknown_field_are_rejected() {
    for field in ["image", "resources", "namespace", "nodeSelector"] {
        let answer = json!({"decision": "admit_with", "detail": {field: "x"}});

        let error = decode::<Decision>(answer).expect_err("unknown field");

        assert!(
            error.contains(&format!("unknown field `{field}`")),
            "{field}: {error}"
        );
    }
}

#[test]
fn toleration_in_changes_with_an_unknown_field_is_rejected() {
    let answer = json!({
        "decision": "admit_with",
        "detail": {"tolerations": [{"key": "pool", "operator": "Exists", "extra": true}]},
    });

    let error = decode::<Decision>(answer).expect_err("unknown field");

    assert!(error.contains("unknown field `extra`"), "{error}");
}

#[test]
fn unknown_decision_or_spelling_is_rejected() {
    for answer in [
        json!({"decision": "allow"}),
        json!({"decision": "Admit"}),
        json!({"decision": "admitWith", "detail": {}}),
        json!({"decision": "refuse"}),
        json!({"detail": "no"}),
    ] {
        assert!(decode::<Decision>(answer.clone()).is_err(), "{answer}");
    }
}

#[test]
fn unknown_toleration_operator_or_effect_is_rejected() {
    for toleration in [
        json!({"key": "pool", "operator": "exists"}),
        json!({"key": "pool", "operator": "In"}),
        json!({"key": "pool", "effect": "NoEvict"}),
    ] {
        let answer = json!({"decision": "admit_with", "detail": {"tolerations": [toleration]}});

        assert!(decode::<Decision>(answer.clone()).is_err(), "{answer}");
    }
}
