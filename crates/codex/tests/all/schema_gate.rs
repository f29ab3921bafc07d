//! The schema gate: each pinned Codex generates its app-server schema, and every server
//! request, notification, approval kind, approval decision and error kind it declares must be
//! classified in codex-relay's one list (`codex_relay_protocol::v2::surface`). A new Codex
//! release fails here, naming what it added, until each name is handled or classified.

use crate::common;
use crate::schema::generate_schema;

use std::collections::BTreeSet;
use std::path::Path;

use codex_relay_protocol::v2::surface;
use codex_relay_testkit::for_every_pinned_codex;
use serde_json::Value;

for_every_pinned_codex!(every_name_this_codex_declares_is_classified);

async fn every_name_this_codex_declares_is_classified(version: &'static str) {
    let bin = common::codex_bin(version);
    let dir = tempfile::tempdir().unwrap();
    generate_schema(&bin, dir.path());
    let declared = Declared::read(dir.path());
    let new = declared.unclassified();
    assert!(
        new.is_empty(),
        "Codex {version} declares names codex-relay does not handle yet; classify each in \
         crates/protocol/src/v2/surface.rs (and handle it where it needs more than a raw event):\n  {}",
        new.join("\n  ")
    );
    // The gate reads what it compares: a schema it cannot read would pass everything.
    assert!(
        declared
            .requests
            .contains("item/commandExecution/requestApproval")
            && declared.notifications.contains("turn/completed")
            && declared.errors.contains("unauthorized"),
        "the gate read too little of Codex {version}'s schema: {declared:?}"
    );
}

/// The names one Codex's schema declares, by what they are.
#[derive(Debug, Default)]
struct Declared {
    requests: BTreeSet<String>,
    notifications: BTreeSet<String>,
    approval_kinds: BTreeSet<String>,
    command_decisions: BTreeSet<String>,
    file_change_decisions: BTreeSet<String>,
    errors: BTreeSet<String>,
}

impl Declared {
    fn read(dir: &Path) -> Declared {
        let requests = load(dir, "ServerRequest.json").expect("ServerRequest.json");
        let notifications = load(dir, "ServerNotification.json").expect("ServerNotification.json");
        let command = load(dir, "CommandExecutionRequestApprovalResponse.json");
        let file_change = load(dir, "FileChangeRequestApprovalResponse.json");
        // 0.98 keeps its v2 types in the top-level files; later releases under v2/ as well.
        let error = load(dir, "v2/ErrorNotification.json").unwrap_or_else(|| notifications.clone());
        Declared {
            requests: methods(&requests),
            notifications: methods(&notifications),
            approval_kinds: variants(&requests, "CommandExecutionApprovalKind"),
            command_decisions: command
                .map(|c| variants(&c, "CommandExecutionApprovalDecision"))
                .unwrap_or_default(),
            file_change_decisions: file_change
                .map(|c| variants(&c, "FileChangeApprovalDecision"))
                .unwrap_or_default(),
            errors: variants(&error, "CodexErrorInfo"),
        }
    }

    /// Every declared name the list does not classify, as `what name`.
    fn unclassified(&self) -> Vec<String> {
        fn missing<'a, T>(
            what: &str,
            declared: &'a BTreeSet<String>,
            listed: &'a [(&'a str, T)],
        ) -> impl Iterator<Item = String> + 'a {
            let what = what.to_owned();
            declared
                .iter()
                .filter(|n| !listed.iter().any(|(l, _)| l == n))
                .map(move |n| format!("{what} {n}"))
        }
        let errors = self
            .errors
            .iter()
            .filter(|k| surface::error_class(k).is_none())
            .map(|k| format!("error kind (codexErrorInfo) {k}"));
        missing("server request", &self.requests, surface::SERVER_REQUESTS)
            .chain(missing(
                "notification",
                &self.notifications,
                surface::NOTIFICATIONS,
            ))
            .chain(missing(
                "command approval kind",
                &self.approval_kinds,
                surface::COMMAND_APPROVAL_KINDS,
            ))
            .chain(missing(
                "command approval decision",
                &self.command_decisions,
                surface::COMMAND_DECISIONS,
            ))
            .chain(missing(
                "file-change approval decision",
                &self.file_change_decisions,
                surface::FILE_CHANGE_DECISIONS,
            ))
            .chain(errors)
            .collect()
    }
}

fn load(dir: &Path, file: &str) -> Option<Value> {
    let text = std::fs::read_to_string(dir.join(file)).ok()?;
    Some(serde_json::from_str(&text).expect("schema is JSON"))
}

/// The `method` names of a `oneOf` union of messages.
fn methods(union: &Value) -> BTreeSet<String> {
    union["oneOf"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| b["properties"]["method"]["enum"].as_array())
        .flatten()
        .filter_map(|m| m.as_str().map(str::to_owned))
        .collect()
}

/// The variant names of the definition `name`: each string of its enums, and the one key of
/// each object variant (`{"httpConnectionFailed": {...}}`). An open catch-all (`{"type":
/// ["string", "object"]}`) names nothing.
fn variants(schema: &Value, name: &str) -> BTreeSet<String> {
    let def = &schema["definitions"][name];
    let alternatives: Vec<&Value> = ["oneOf", "anyOf"]
        .iter()
        .filter_map(|k| def[k].as_array())
        .flatten()
        .chain(def.get("enum").map(|_| def))
        .collect();
    let mut out = BTreeSet::new();
    for alt in alternatives {
        if let Some(values) = alt["enum"].as_array() {
            out.extend(values.iter().filter_map(|v| v.as_str().map(str::to_owned)));
        } else if let Some(required) = alt["required"].as_array() {
            out.extend(
                required
                    .iter()
                    .filter_map(|v| v.as_str().map(str::to_owned)),
            );
        }
    }
    out
}
