//! The JSON Schemas of `dexaflow.io/admission/v1` committed under `schemas/`: the ones the wire
//! types generate, holding every request the client sends and every answer the example server
//! gives, and refusing what the client refuses.
//!
//! After a change to the wire types, write the schemas again with
//! `UPDATE_SCHEMAS=1 cargo test --test it webhook_schema::`.

use crate::common;
use crate::webhook_fixture;

use std::path::PathBuf;

use common::{equal_toleration, sample_request};
use dexaflow_admission::admission::{
    AnswerEnvelope, Changes, Decision, Hook, Request, RequestEnvelope, ResourceList, answer_schema,
    request_schema,
};
use dexaflow_admission::hooks::Webhook;
use jsonschema::Validator;
use serde_json::{Value, json};
use webhook_fixture::{Certs, Server, Transport, deciding};

const UID: &str = "8d0f3a1e-5b7c-4d2a-9e61-0c4b7f2a9d13";

fn schema_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("schemas")
        .join(name)
}

fn committed(name: &str) -> Value {
    let text = std::fs::read_to_string(schema_path(name))
        .unwrap_or_else(|error| panic!("schemas/{name}: {error}"));
    serde_json::from_str(&text).unwrap_or_else(|error| panic!("schemas/{name}: {error}"))
}

pub fn validator(name: &str) -> Validator {
    jsonschema::validator_for(&committed(name)).expect("a valid draft 2020-12 schema")
}

pub fn assert_holds(validator: &Validator, instance: &Value) {
    if let Err(error) = validator.validate(instance) {
        panic!("{instance} does not hold: {error}");
    }
}

#[test]
fn committed_schemas_are_the_ones_the_wire_types_generate() {
    for (name, schema) in [
        ("request.schema.json", request_schema()),
        ("answer.schema.json", answer_schema()),
    ] {
        let generated = serde_json::to_string_pretty(&schema).expect("encodes") + "\n";
        let path = schema_path(name);
        if std::env::var_os("UPDATE_SCHEMAS").is_some() {
            std::fs::write(&path, &generated).expect("writes the schema");
        }
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            on_disk == generated,
            "schemas/{name} is stale: run UPDATE_SCHEMAS=1 cargo test --test it webhook_schema::"
        );
    }
}

/// A request with resources and execution fields set.
fn full_request() -> Request {
    let mut request = sample_request();
    request.resources.requests = ResourceList {
        cpu: Some("500m".into()),
        memory: Some("1Gi".into()),
        ephemeral_storage: None,
    };
    request.execution.tolerations = vec![equal_toleration("pool", "gpu")];
    request
}

#[actix::test]
async fn every_request_the_client_sends_holds_against_the_request_schema() {
    let certs = Certs::new();
    let server = Server::start(&certs, Transport::Tls, deciding(|_| Decision::Admit));
    let webhook = Webhook::new(&certs.webhook(&server.url())).expect("valid");

    for request in [Request::new("acme", "etl", "load"), full_request()] {
        assert_eq!(webhook.admit(&request).await, Ok(Decision::Admit));
    }

    let validator = validator("request.schema.json");
    let seen = server.seen();
    assert_eq!(seen.len(), 2);
    for call in seen {
        let body: Value = serde_json::from_slice(&call.body).expect("JSON");
        assert_holds(&validator, &body);
    }
}

#[test]
fn every_answer_a_server_can_build_holds_against_the_answer_schema() {
    let validator = validator("answer.schema.json");
    let mut changes = Changes::default();
    changes.node_selector.insert("pool".into(), "gpu".into());

    for decision in [
        Decision::Admit,
        Decision::AdmitWith(Box::new(changes)),
        Decision::AdmitWith(Box::default()),
        Decision::Hold("wait".into()),
        Decision::Refuse("no".into()),
    ] {
        let answer = serde_json::to_value(AnswerEnvelope::new(UID, decision)).expect("encodes");
        assert_holds(&validator, &answer);
    }
}

#[test]
fn answer_schema_refuses_what_the_client_refuses() {
    let validator = validator("answer.schema.json");
    let answer = |extra: Value| {
        let mut answer = json!({"api_version": "dexaflow.io/admission/v1", "uid": UID});
        for (key, value) in extra.as_object().expect("an object") {
            answer[key] = value.clone();
        }
        answer
    };

    for refused in [
        answer(json!({"decision": "hold"})),
        answer(json!({"decision": "refuse", "reason": "  "})),
        answer(json!({"decision": "admit", "reason": "fine"})),
        answer(json!({"decision": "admit_with"})),
        answer(json!({"decision": "admit", "changes": {}})),
        answer(json!({"decision": "admit", "allowed": true})),
        answer(json!({"decision": "allow"})),
        answer(json!({"decision": "admit_with", "changes": {"image": "x"}})),
        answer(json!({"decision": "admit", "api_version": "dexaflow.io/admission/v2"})),
        json!({"api_version": "dexaflow.io/admission/v1", "decision": "admit"}),
    ] {
        assert!(!validator.is_valid(&refused), "{refused} should not hold");
        let decoded: Result<AnswerEnvelope, _> = serde_json::from_value(refused.clone());
        assert!(
            decoded.map_or(true, |answer| answer.into_decision(UID).is_err()),
            "{refused}: the client refuses it too"
        );
    }
}

#[test]
fn request_schema_refuses_what_a_server_refuses() {
    let validator = validator("request.schema.json");
    let valid = serde_json::to_value(RequestEnvelope::new(UID, full_request())).expect("encodes");
    assert_holds(&validator, &valid);

    for (edit, decodes) in [
        (json!({"uid": null}), false),
        (json!({"env": {}}), false),
        (json!({"try_number": -1}), false),
        // Decodes, and a server refuses it for its version, as the client refuses an answer's.
        (json!({"api_version": "dexaflow.io/admission/v2"}), true),
    ] {
        let mut refused = valid.clone();
        for (key, value) in edit.as_object().expect("an object") {
            refused[key] = value.clone();
        }

        assert!(!validator.is_valid(&refused), "{edit} should not hold");
        let decoded: Result<RequestEnvelope, _> = serde_json::from_value(refused);
        assert_eq!(decoded.is_ok(), decodes, "{edit}");
    }
}
