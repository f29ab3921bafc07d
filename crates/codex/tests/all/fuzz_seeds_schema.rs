//! The fuzz seed corpora (`crates/protocol/tests/fuzz-seeds/*.json`) are valid against the
//! schema the pinned Codex 0.169.0 generates, and each seed parses into its typed variant, so
//! the property tests start from what Codex really sends.

use crate::common;

use std::path::Path;

use codex_relay_protocol::v2::{ServerNotification, ServerRequest};
use serde_json::Value;

const SEEDS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../protocol/tests/fuzz-seeds");

fn seeds(file: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(Path::new(SEEDS).join(file)).expect("seed file");
    serde_json::from_str(&text).expect("seed file is a JSON array")
}

fn union(dir: &Path, file: &str) -> Value {
    let text = std::fs::read_to_string(dir.join(file)).expect("generated schema file");
    serde_json::from_str(&text).unwrap()
}

/// The `oneOf` branch of `union` for `method`, with the union's definitions.
fn branch(union: &Value, method: &str) -> Value {
    let b = union["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["properties"]["method"]["enum"][0] == method)
        .unwrap_or_else(|| panic!("{method} is not in the generated schema"));
    let mut schema = b.clone();
    schema["definitions"] = union["definitions"].clone();
    schema
}

fn errors(schema: &Value, instance: &Value) -> Vec<String> {
    let validator = jsonschema::draft7::new(schema).expect("schema compiles");
    validator
        .iter_errors(instance)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect()
}

#[test]
fn seed_corpora_are_valid_codex_0_169_messages_and_parse_typed() {
    let bin = common::codex_bin(codex_relay_testkit::NEWEST);
    let dir = tempfile::tempdir().unwrap();
    let status = std::process::Command::new(&bin)
        .args([
            "app-server",
            "generate-json-schema",
            "--experimental",
            "--out",
        ])
        .arg(dir.path())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .status()
        .expect("run generate-json-schema");
    assert!(status.success(), "generate-json-schema failed: {status}");

    let mut failures = Vec::new();
    let notifications = union(dir.path(), "ServerNotification.json");
    for seed in seeds("notifications.json") {
        let method = seed["method"].as_str().unwrap();
        for e in errors(&branch(&notifications, method), &seed) {
            failures.push(format!("{method}: {e}"));
        }
        let parsed = ServerNotification::parse(method, seed["params"].clone());
        if matches!(parsed, ServerNotification::Unknown { .. }) {
            failures.push(format!("{method}: the seed does not parse typed"));
        }
    }
    let requests = union(dir.path(), "ServerRequest.json");
    for seed in seeds("server_requests.json") {
        let method = seed["method"].as_str().unwrap();
        for e in errors(&branch(&requests, method), &seed) {
            failures.push(format!("{method}: {e}"));
        }
        let parsed = ServerRequest::parse(method, seed["params"].clone());
        if matches!(parsed, ServerRequest::Unknown { .. }) {
            failures.push(format!("{method}: the seed does not parse typed"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
