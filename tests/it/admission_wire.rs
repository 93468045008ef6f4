//! The webhook wire format `dexaflow.io/admission/v1` (ADR 0100 §8): the request envelope (`uid`
//! and every field of `Request` at the top level, snake_case) and the answer envelope
//! (`api_version`, `uid`, `decision`, `reason`, `changes`), each decoded strictly, and the rules
//! of an answer, each a typed error.

use crate::common;

use common::{equal_toleration, sample_request};
use dexaflow_admission::admission::{
    API_VERSION, AnswerEnvelope, AnswerError, Changes, Decision, DecisionKind, Request,
    RequestEnvelope, ResourceList, TaintEffect, Toleration, TolerationOperator,
};
use serde_json::{Value, json};

const UID: &str = "8d0f3a1e-5b7c-4d2a-9e61-0c4b7f2a9d13";

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

fn envelope_json() -> Value {
    serde_json::to_value(RequestEnvelope::new(UID, full_request()))
        .expect("an envelope always serializes")
}

/// Decodes `value` as a `T`, returning the error text when decoding fails.
fn decode<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, String> {
    serde_json::from_value(value).map_err(|error| error.to_string())
}

/// An answer to the call [`UID`] with `decision` and whatever else `extra` sets.
fn answer(decision: &str, extra: Value) -> Value {
    let mut answer = json!({"api_version": API_VERSION, "uid": UID, "decision": decision});
    for (key, value) in extra.as_object().expect("extra is an object") {
        answer[key] = value.clone();
    }
    answer
}

/// What the client makes of an answer: decoded, then checked against the call [`UID`].
fn decide(answer: Value) -> Result<Result<Decision, AnswerError>, String> {
    decode::<AnswerEnvelope>(answer).map(|envelope| envelope.into_decision(UID))
}

#[test]
fn request_envelope_round_trips() {
    let envelope = RequestEnvelope::new(UID, full_request());

    let text = serde_json::to_string(&envelope).expect("an envelope always serializes");
    let decoded: RequestEnvelope = serde_json::from_str(&text).expect("its own JSON decodes");

    assert_eq!(decoded, envelope);
}

#[test]
fn borrowed_wire_form_encodes_exactly_as_the_envelope() {
    let request = full_request();

    let borrowed = serde_json::to_string(&RequestEnvelope::wire(UID, &request)).expect("encodes");
    let owned = serde_json::to_string(&RequestEnvelope::new(UID, request)).expect("encodes");

    assert_eq!(borrowed, owned);
}

#[test]
fn request_envelope_puts_uid_and_every_request_field_at_the_top_level_in_snake_case() {
    let json = envelope_json();

    assert_eq!(json["api_version"], "dexaflow.io/admission/v1");
    assert_eq!(json["uid"], UID);
    let mut keys: Vec<&str> = json
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "api_version",
            "dag_id",
            "execution",
            "image",
            "operator",
            "resources",
            "run_id",
            "size",
            "source_mode",
            "task_id",
            "tenant",
            "try_number",
            "uid",
        ],
        "no nesting under a `request` key, no other field"
    );
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
    assert_eq!(json["resources"]["requests"]["ephemeral_storage"], "1Gi");
    assert_eq!(
        json["execution"]["tolerations"][1]["toleration_seconds"],
        300
    );
}

#[test]
fn request_envelope_never_carries_the_environment_the_source_or_a_token() {
    let json = envelope_json();

    for key in ["env", "environment", "source", "command", "token", "secret"] {
        assert!(json.get(key).is_none(), "{key}");
        assert!(json["execution"].get(key).is_none(), "execution.{key}");
    }
}

#[test]
fn toleration_uses_the_kubernetes_spelling_of_operator_and_effect() {
    let json = envelope_json();

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
fn request_envelope_with_an_unknown_top_level_field_is_rejected() {
    let mut json = envelope_json();
    json["namespace"] = json!("other");

    let error = decode::<RequestEnvelope>(json).expect_err("unknown field");

    assert!(error.contains("unknown field `namespace`"), "{error}");
}

#[test]
fn an_unknown_top_level_field_is_refused_listing_uid_among_the_fields_expected() {
    let mut json = envelope_json();
    json["uuid"] = json["uid"].take();
    json.as_object_mut().expect("an object").remove("uid");

    let error = decode::<RequestEnvelope>(json).expect_err("unknown field");

    assert!(
        error.starts_with("unknown field `uuid`, expected one of `uid`, `api_version`, "),
        "{error}"
    );
    assert!(!error.contains("missing field"), "{error}");
}

#[test]
fn request_envelope_with_an_unknown_nested_field_is_rejected() {
    let nested = [
        ("/execution", "env"),
        ("/resources", "gpus"),
        ("/resources/requests", "nvidia_gpu"),
        ("/execution/tolerations/0", "tolerationSeconds"),
    ];
    for (pointer, field) in nested {
        let mut json = envelope_json();
        json.pointer_mut(pointer)
            .and_then(Value::as_object_mut)
            .expect("the pointer names an object")
            .insert(field.into(), json!("x"));

        let error = decode::<RequestEnvelope>(json).expect_err("unknown field");

        assert!(
            error.contains(&format!("unknown field `{field}`")),
            "{pointer}: {error}"
        );
    }
}

#[test]
fn request_envelope_without_a_uid_or_a_request_field_is_rejected() {
    for missing in ["uid", "api_version", "tenant", "try_number"] {
        let mut json = envelope_json();
        json.as_object_mut()
            .expect("an object")
            .remove(missing)
            .expect("the field was there");

        let error = decode::<RequestEnvelope>(json).expect_err("missing field");

        assert!(
            error.contains(&format!("missing field `{missing}`")),
            "{missing}: {error}"
        );
    }
}

#[test]
fn request_envelope_with_a_repeated_field_is_rejected() {
    let text = serde_json::to_string(&envelope_json()).expect("encodes");
    for repeated in [
        format!(r#"{{"uid":"other",{}"#, &text[1..]),
        format!(r#"{{"tenant":"other",{}"#, &text[1..]),
    ] {
        let error = serde_json::from_str::<RequestEnvelope>(&repeated).expect_err("repeated");

        assert!(error.to_string().contains("duplicate field"), "{error}");
    }
}

#[test]
fn request_envelope_keys_written_with_escapes_decode_as_the_plain_keys() {
    let text = serde_json::to_string(&envelope_json()).expect("encodes");
    let escaped = text.replacen(r#""uid":"#, r#""u\u0069d":"#, 1).replacen(
        r#""tenant":"#,
        r#""t\u0065nant":"#,
        1,
    );
    assert_ne!(escaped, text, "both keys were rewritten");

    let decoded: RequestEnvelope = serde_json::from_str(&escaped).expect("escaped keys decode");

    assert_eq!(decoded, RequestEnvelope::new(UID, full_request()));
}

#[test]
fn request_envelope_with_a_uid_repeated_once_escaped_is_rejected() {
    let text = serde_json::to_string(&envelope_json()).expect("encodes");
    let repeated = format!(r#"{{"u\u0069d":"other",{}"#, &text[1..]);

    let error = serde_json::from_str::<RequestEnvelope>(&repeated).expect_err("repeated");

    assert!(
        error.to_string().contains("duplicate field `uid`"),
        "{error}"
    );
}

#[test]
fn request_envelope_with_a_key_repeated_in_a_map_is_rejected_naming_the_key() {
    for map in ["node_selector", "labels", "annotations"] {
        let mut envelope = envelope_json();
        envelope["execution"][map] = json!({});
        let text = serde_json::to_string(&envelope).expect("encodes");
        let empty = format!(r#""{map}":{{}}"#);
        assert!(text.contains(&empty), "{text}");
        let repeated = text.replace(
            &empty,
            &format!(r#""{map}":{{"team":"a","other":"b","team":"c"}}"#),
        );

        let error = serde_json::from_str::<RequestEnvelope>(&repeated).expect_err(map);

        assert!(
            error.to_string().contains(r#"duplicate key "team""#),
            "{map}: {error}"
        );
    }
}

#[test]
fn answer_with_a_key_repeated_in_a_changes_map_is_rejected_naming_the_key() {
    for map in ["node_selector", "labels", "annotations"] {
        let text = format!(
            r#"{{"api_version":"{API_VERSION}","uid":"{UID}","decision":"admit_with","changes":{{"{map}":{{"pool":"gpu","pool":"cpu"}}}}}}"#
        );

        let error = serde_json::from_str::<AnswerEnvelope>(&text).expect_err(map);

        assert!(
            error.to_string().contains(r#"duplicate key "pool""#),
            "{map}: {error}"
        );
    }
}

#[test]
fn maps_without_a_repeated_key_still_decode() {
    let text = format!(
        r#"{{"api_version":"{API_VERSION}","uid":"{UID}","decision":"admit_with","changes":{{"labels":{{"a":"1","b":"2"}}}}}}"#
    );

    let decision = decide(serde_json::from_str(&text).expect("JSON")).expect("decodes");

    let Ok(Decision::AdmitWith(changes)) = decision else {
        panic!("{decision:?}");
    };
    assert_eq!(changes.labels.len(), 2);
}

#[test]
fn request_envelope_uid_must_be_text() {
    let mut json = envelope_json();
    json["uid"] = json!(42);

    let error = decode::<RequestEnvelope>(json).expect_err("a number is no uid");
    assert!(
        error.starts_with("invalid type: integer `42`, expected a string"),
        "{error}"
    );
}

#[test]
fn each_decision_round_trips_through_its_answer() {
    for decision in [
        Decision::Admit,
        Decision::AdmitWith(Box::new(full_changes())),
        Decision::AdmitWith(Box::default()),
        Decision::Hold("frozen until 18:00".into()),
        Decision::Refuse("tenant acme is over budget".into()),
    ] {
        let text = serde_json::to_string(&AnswerEnvelope::new(UID, decision.clone()))
            .expect("an answer always serializes");
        let decoded: AnswerEnvelope = serde_json::from_str(&text).expect("its own JSON decodes");

        assert_eq!(decoded.into_decision(UID), Ok(decision), "{text}");
    }
}

#[test]
fn answer_json_has_the_version_the_uid_the_decision_and_only_the_detail_it_needs() {
    let encode =
        |decision: Decision| serde_json::to_value(AnswerEnvelope::new(UID, decision)).expect("ok");

    assert_eq!(
        encode(Decision::Admit),
        json!({"api_version": API_VERSION, "uid": UID, "decision": "admit"})
    );
    assert_eq!(
        encode(Decision::Hold("wait".into())),
        json!({"api_version": API_VERSION, "uid": UID, "decision": "hold", "reason": "wait"})
    );
    assert_eq!(
        encode(Decision::Refuse("no".into())),
        json!({"api_version": API_VERSION, "uid": UID, "decision": "refuse", "reason": "no"})
    );
    assert_eq!(
        encode(Decision::AdmitWith(Box::default())),
        json!({"api_version": API_VERSION, "uid": UID, "decision": "admit_with", "changes": {}}),
        "unset changes are left out"
    );
}

#[test]
fn changes_field_names_are_snake_case() {
    let json = serde_json::to_value(AnswerEnvelope::new(
        UID,
        Decision::AdmitWith(Box::new(full_changes())),
    ))
    .expect("serializes");
    let changes = &json["changes"];

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
        assert!(changes.get(key).is_some(), "changes.{key}");
    }
    assert_eq!(changes["fill_limits"]["ephemeral_storage"], "2Gi");
}

#[test]
fn webhook_answer_with_changes_decodes_into_admit_with() {
    let answer = answer(
        "admit_with",
        json!({"changes": {
            "node_selector": {"pool": "gpu"},
            "tolerations": [{"key": "pool", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}],
        }}),
    );

    let decision = decide(answer).expect("decodes").expect("valid");

    let mut expected = Changes {
        tolerations: vec![equal_toleration("pool", "gpu")],
        ..Changes::default()
    };
    expected.node_selector.insert("pool".into(), "gpu".into());
    assert_eq!(decision, Decision::AdmitWith(Box::new(expected)));
}

#[test]
fn answer_with_an_unknown_field_is_rejected_at_every_level() {
    for (answer, field) in [
        (answer("admit", json!({"detail": "x"})), "detail"),
        (answer("admit", json!({"allowed": true})), "allowed"),
        (
            answer("admit_with", json!({"changes": {"image": "x"}})),
            "image",
        ),
        (
            answer("admit_with", json!({"changes": {"nodeSelector": {}}})),
            "nodeSelector",
        ),
        (
            answer(
                "admit_with",
                json!({"changes": {"tolerations": [{"key": "pool", "operator": "Exists", "extra": true}]}}),
            ),
            "extra",
        ),
    ] {
        let error = decide(answer.clone()).expect_err("unknown field");

        assert!(
            error.contains(&format!("unknown field `{field}`")),
            "{answer}: {error}"
        );
    }
}

#[test]
fn answer_without_its_version_uid_or_decision_is_rejected() {
    for missing in ["api_version", "uid", "decision"] {
        let mut answer = answer("admit", json!({}));
        answer.as_object_mut().expect("an object").remove(missing);

        let error = decide(answer).expect_err("missing field");

        assert!(
            error.contains(&format!("missing field `{missing}`")),
            "{missing}: {error}"
        );
    }
}

#[test]
fn unknown_decision_or_spelling_is_rejected() {
    for decision in ["allow", "Admit", "admitWith", "deny", ""] {
        assert!(decide(answer(decision, json!({}))).is_err(), "{decision}");
    }
}

#[test]
fn unknown_toleration_operator_or_effect_is_rejected() {
    for toleration in [
        json!({"key": "pool", "operator": "exists"}),
        json!({"key": "pool", "operator": "In"}),
        json!({"key": "pool", "effect": "NoEvict"}),
    ] {
        let answer = answer(
            "admit_with",
            json!({"changes": {"tolerations": [toleration]}}),
        );

        assert!(decide(answer.clone()).is_err(), "{answer}");
    }
}

#[test]
fn answer_of_another_version_is_an_api_version_error() {
    let mut answer = answer("admit", json!({}));
    answer["api_version"] = json!("dexaflow.io/admission/v2");

    assert_eq!(
        decide(answer).expect("decodes"),
        Err(AnswerError::ApiVersion {
            got: "dexaflow.io/admission/v2".into()
        })
    );
}

#[test]
fn answer_echoing_another_uid_is_a_uid_error() {
    let mut answer = answer("admit", json!({}));
    answer["uid"] = json!("someone-else");

    assert_eq!(
        decide(answer).expect("decodes"),
        Err(AnswerError::Uid {
            sent: UID.into(),
            got: "someone-else".into()
        })
    );
}

#[test]
fn hold_and_refuse_need_a_reason_that_is_not_blank() {
    for decision in [DecisionKind::Hold, DecisionKind::Refuse] {
        for extra in [
            json!({}),
            json!({"reason": null}),
            json!({"reason": ""}),
            json!({"reason": " \n\t"}),
        ] {
            assert_eq!(
                decide(answer(decision.as_str(), extra.clone())).expect("decodes"),
                Err(AnswerError::MissingReason { decision }),
                "{decision} {extra}"
            );
        }
    }
}

#[test]
fn admit_and_admit_with_take_no_reason() {
    for (decision, extra) in [
        (DecisionKind::Admit, json!({"reason": "fine"})),
        (
            DecisionKind::AdmitWith,
            json!({"reason": "", "changes": {}}),
        ),
    ] {
        assert_eq!(
            decide(answer(decision.as_str(), extra)).expect("decodes"),
            Err(AnswerError::UnexpectedReason { decision })
        );
    }
}

#[test]
fn admit_with_needs_changes() {
    for extra in [json!({}), json!({"changes": null})] {
        assert_eq!(
            decide(answer("admit_with", extra)).expect("decodes"),
            Err(AnswerError::MissingChanges)
        );
    }
}

#[test]
fn only_admit_with_takes_changes() {
    for (decision, extra) in [
        (DecisionKind::Admit, json!({"changes": {}})),
        (DecisionKind::Hold, json!({"reason": "wait", "changes": {}})),
        (DecisionKind::Refuse, json!({"reason": "no", "changes": {}})),
    ] {
        assert_eq!(
            decide(answer(decision.as_str(), extra)).expect("decodes"),
            Err(AnswerError::UnexpectedChanges { decision })
        );
    }
}

#[test]
fn absent_or_null_reason_and_changes_are_the_same() {
    assert_eq!(
        decide(answer("admit", json!({"reason": null, "changes": null}))).expect("decodes"),
        Ok(Decision::Admit)
    );
}
