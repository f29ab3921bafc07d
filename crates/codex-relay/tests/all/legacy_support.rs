//! Support for the legacy differential tests: the three servers a scenario runs against (the
//! real `codex mcp-server` of Codex 0.98, and `codex-relay mcp-server` on 0.98 and the newest pinned Codex), the
//! Node SDK client that drives them (`clients/node/legacy_driver.mjs`), and what of a call is
//! compared once ids, times and paths are normalized.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use tokio::process::Command;

use crate::common::{Bed, Driver, RELAY, Sdk, engine_args, relay_env};

/// Where a scenario runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The real legacy server: `codex mcp-server` of Codex 0.98.
    Legacy,
    /// `codex-relay mcp-server` on this Codex version.
    Relay(&'static str),
}

impl Target {
    pub fn codex_version(self) -> &'static str {
        match self {
            Target::Legacy => "0.98.0",
            Target::Relay(v) => v,
        }
    }

    pub fn name(self) -> String {
        match self {
            Target::Legacy => "legacy codex mcp-server 0.98".into(),
            Target::Relay(v) => format!("codex-relay mcp-server on {v}"),
        }
    }

    /// The `connect` command for the driver.
    pub fn connect(self, bed: &Bed, approval_timeout_ms: u64, elicitation: bool) -> Value {
        match self {
            Target::Legacy => {
                let mut env = relay_env();
                env["CODEX_HOME"] = json!(bed.home.path());
                json!({"op": "connect", "command": bed.codex, "args": ["mcp-server"], "env": env, "elicitation": elicitation})
            }
            Target::Relay(_) => {
                let mut args = vec!["mcp-server".to_owned()];
                args.extend(engine_args(&bed.codex, &bed.home, approval_timeout_ms));
                json!({"op": "connect", "command": RELAY, "args": args, "env": relay_env(), "elicitation": elicitation})
            }
        }
    }
}

fn driver_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/node")
}

/// The Node SDK client, one JSON command at a time (`clients/node/legacy_driver.mjs`).
pub struct LegacyDriver(Driver);

impl LegacyDriver {
    pub async fn spawn() -> LegacyDriver {
        let dir = driver_script();
        codex_relay_testkit::clients::npm_ci(&dir).expect("the Node MCP SDK installs");
        let mut cmd = Command::new("node");
        cmd.arg(dir.join("legacy_driver.mjs"));
        LegacyDriver(Driver::start(Sdk::Node, cmd))
    }

    /// Sends one command; returns its `value`, panicking on a driver error.
    pub async fn cmd(&mut self, command: Value) -> Value {
        self.0.cmd(command).await
    }

    /// Calls a tool with the decisions for its elicitations; `extra` adds driver options
    /// (`cancelOn`, `closeOnElicitation`, `timeoutMs`, `settleMs`).
    pub async fn call(
        &mut self,
        tool: &str,
        args: Value,
        decisions: &[&str],
        extra: Value,
    ) -> Value {
        let mut cmd = json!({"op": "call", "tool": tool, "args": args, "decisions": decisions});
        if let Some(extra) = extra.as_object() {
            cmd.as_object_mut().unwrap().extend(extra.clone());
        }
        self.cmd(cmd).await
    }

    pub async fn close(self) {
        self.0.close().await
    }
}

/// Event types no legacy client reads, which codex-relay does not synthesize. Each is named
/// with the reason the difference is acceptable.
pub const NOT_SYNTHESIZED: &[(&str, &str)] = &[
    (
        "raw_response_item",
        "Codex's raw Responses-API items; internal, not part of the app-server stream",
    ),
    (
        "item_started",
        "Codex-internal item lifecycle duplicated by the typed events",
    ),
    (
        "item_completed",
        "Codex-internal item lifecycle duplicated by the typed events",
    ),
    (
        "mcp_startup_complete",
        "Codex's own MCP client start-up; nothing to report for the relay",
    ),
    ("skills_update_available", "a TUI hint about skills"),
    (
        "exec_command_output_delta",
        "base64 output chunks; exec_command_end carries the whole output",
    ),
    (
        "turn_diff",
        "the running unified diff; patch_apply_end carries the changes",
    ),
    (
        "token_count",
        "counted differently: legacy sends one with `info: null` before the first model call and after each output item; the relay one per usage update Codex reports (the totals agree)",
    ),
];

/// A call's `codex/event` message types, without the ones in [`NOT_SYNTHESIZED`].
pub fn types(answer: &Value) -> Vec<String> {
    answer["events"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["msg"]["type"].as_str())
        .filter(|t| !NOT_SYNTHESIZED.iter().any(|(n, _)| n == t))
        .map(str::to_owned)
        .collect()
}

/// A list of event types without the ones in [`NOT_SYNTHESIZED`].
pub fn known(list: &Value) -> Vec<String> {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|t| !NOT_SYNTHESIZED.iter().any(|(n, _)| n == t))
        .map(str::to_owned)
        .collect()
}

/// A call's result as compared: the structured content with the thread id replaced.
pub fn result(answer: &Value) -> Value {
    let r = &answer["result"];
    if r.is_null() {
        return json!({"thrown": answer["thrown"].is_string()});
    }
    let mut s = r["structuredContent"].clone();
    if s["threadId"].is_string() {
        s["threadId"] = json!("<thread>");
    }
    json!({"structured": s, "isError": r["isError"].as_bool().unwrap_or(false),
           "text": r["content"][0]["text"]})
}

/// An elicitation as compared: its sorted keys (without `_meta`) and its kind.
pub fn elicitation(params: &Value) -> Value {
    let mut keys: Vec<&String> = params
        .as_object()
        .map(|o| o.keys().filter(|k| *k != "_meta").collect())
        .unwrap_or_default();
    keys.sort();
    json!({"keys": keys, "kind": params["codex_elicitation"]})
}

pub fn elicitations(answer: &Value) -> Vec<Value> {
    answer["elicitations"]
        .as_array()
        .into_iter()
        .flatten()
        .map(elicitation)
        .collect()
}

/// The tool list as compared: names, input property names and types, output schema.
pub fn tool_list(tools: &Value) -> Value {
    let mut out: Vec<Value> = tools
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            let props: serde_json::Map<String, Value> = t["inputSchema"]["properties"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v["type"].clone()))
                .collect();
            json!({"name": t["name"], "input": props, "required": t["inputSchema"]["required"],
                   "output": t["outputSchema"]})
        })
        .collect();
    out.sort_by_key(|t| t["name"].to_string());
    Value::Array(out)
}

/// Kills what a legacy server left behind (it does not stop a turn when its client goes).
pub async fn kill_leftovers(bed: &Bed) {
    let entry = format!("CODEX_HOME={}", bed.home.path().display());
    for pid in codex_relay_testkit::procs::pids_with_env(&entry) {
        // SAFETY: signalling a process this test started (it carries this test's CODEX_HOME).
        unsafe {
            libc::kill(pid as i32, libc::SIGKILL);
        }
    }
}

/// One accepted difference between what the legacy server showed and what codex-relay shows:
/// where it is (target, scenario, the parts of the scenario's transcript), why, and what
/// exactly the relay shows there instead.
pub struct Accepted {
    pub why: &'static str,
    pub applies: fn(Target, &str) -> bool,
    /// JSON pointers into the scenario's transcript ("" is the whole scenario).
    pub parts: &'static [&'static str],
    /// Given the legacy server's and the relay's value of a part that differ: the relay's value
    /// with this difference undone, when the relay shows exactly this difference; `None` when
    /// it shows something else (then nothing is accepted).
    pub undo: fn(legacy: &Value, relay: &Value) -> Option<Value>,
}

fn relay_on_newest(target: Target, _: &str) -> bool {
    target == Target::Relay(codex_relay_testkit::NEWEST)
}

/// The event lists of a scenario's calls that asked for a command approval.
const APPROVAL_EVENTS: &[&str] = &["/events", "/first/events", "/first"];

/// Every accepted difference, with its reason (docs/LEGACY.md lists them too). Everything not
/// undone by one of these must be equal.
pub const ACCEPTED: &[Accepted] = &[
    Accepted {
        why: "the legacy server never answers a call whose turn was aborted by the `abort` \
              decision (the client gives up at its own timeout); codex-relay answers it as an \
              error result saying the turn was aborted",
        applies: |target, key| matches!(target, Target::Relay(_)) && key == "abort",
        parts: &["/result"],
        undo: |legacy, relay| {
            let aborted = relay["isError"] == true
                && relay["structured"]["content"]
                    .as_str()
                    .is_some_and(|c| c.contains("aborted"))
                && relay["text"] == relay["structured"]["content"];
            (*legacy == json!({"thrown": true}) && aborted).then(|| legacy.clone())
        },
    },
    Accepted {
        why: "Codex 0.169 and later start the command item before it asks for approval, so \
              `exec_command_begin` comes just before `exec_approval_request`; 0.98 asks first. \
              Codex changed, not the relay",
        applies: relay_on_newest,
        parts: APPROVAL_EVENTS,
        undo: |_, relay| {
            let mut events = relay.as_array()?.clone();
            let mut swapped = false;
            let mut i = 0;
            while i + 1 < events.len() {
                if events[i] == "exec_command_begin" && events[i + 1] == "exec_approval_request" {
                    events.swap(i, i + 1);
                    swapped = true;
                    i += 1;
                }
                i += 1;
            }
            swapped.then_some(Value::Array(events))
        },
    },
    Accepted {
        why: "a command denied or aborted on Codex 0.169 and later was already started (above), so its \
              item also ends (declined): `exec_command_begin` and `exec_command_end` follow \
              the approval request where 0.98, which never started it, sends neither",
        applies: |target, key| relay_on_newest(target, key) && matches!(key, "denied" | "abort"),
        parts: &["/events"],
        undo: |_, relay| {
            let mut events = relay.as_array()?.clone();
            let at = events.windows(3).position(|w| {
                w[0] == "exec_approval_request"
                    && w[1] == "exec_command_begin"
                    && w[2] == "exec_command_end"
            })?;
            events.drain(at + 1..at + 3);
            Some(Value::Array(events))
        },
    },
    Accepted {
        why: "Codex 0.169 and later offer no apply_patch tool to the scripted provider, so there is no \
              patch to approve there (Codex changed); the patch scenario runs on 0.98 only",
        applies: |target, key| relay_on_newest(target, key) && key == "patch",
        parts: &[""],
        undo: |legacy, relay| relay.is_null().then(|| legacy.clone()),
    },
    Accepted {
        why: "after a call cancelled with notifications/cancelled, the legacy server (driven by \
              the Node SDK) ran the next codex-reply's turn to task_complete but did not always \
              answer that call; codex-relay answers it with {threadId, content}",
        applies: |target, key| matches!(target, Target::Relay(_)) && key == "cancelled",
        parts: &["/next"],
        undo: |legacy, relay| {
            let answered =
                relay["isError"] == false && relay["structured"]["content"] == "after cancel";
            (*legacy == json!({"thrown": true}) && answered).then(|| legacy.clone())
        },
    },
];

/// Compares one scenario: the relay's transcript with every accepted difference that it shows
/// undone must equal the legacy server's. `Ok` holds the reasons of the differences accepted.
pub fn compare(
    target: Target,
    key: &str,
    legacy: &Value,
    relay: &Value,
) -> Result<Vec<&'static str>, String> {
    let mut relay = relay.clone();
    let mut accepted = Vec::new();
    for a in ACCEPTED.iter().filter(|a| (a.applies)(target, key)) {
        for part in a.parts {
            let (Some(want), Some(got)) = (legacy.pointer(part), relay.pointer(part)) else {
                continue;
            };
            if want == got {
                continue;
            }
            if let Some(undone) = (a.undo)(want, got) {
                *relay.pointer_mut(part).expect("the part exists") = undone;
                accepted.push(a.why);
            }
        }
    }
    if relay == *legacy {
        Ok(accepted)
    } else {
        Err(format!(
            "{} / {key}:\n  legacy: {legacy}\n  relay (accepted differences undone): {relay}",
            target.name()
        ))
    }
}
