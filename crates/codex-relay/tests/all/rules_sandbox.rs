//! An allow rule never lets Codex out of its sandbox unless it says so (issue 28). Over the
//! real Codex (0.169 and 0.98) with `serve`, Codex and its commands run as an ordinary user,
//! sandbox `workspace-write` with `/tmp` and `$TMPDIR` excluded so that a write outside the
//! workspace is blocked (a control session under `never` shows it is), and a rules file that
//! allows `touch` and patches under `notes/`, each session showing where the file ended up:
//! - `touch <outside>/w3.txt` asking to escalate, under `untrusted`: 0.169 asks, and the rule
//!   does not answer (approving may run it outside the sandbox at once); 0.98 refuses the
//!   escalation itself. Nothing is written.
//! - plain `touch <outside>/w1.txt` under `untrusted`: the rule does not answer (Codex would
//!   run it again outside the sandbox when the sandbox blocks it); a person is asked, nobody
//!   answers, it is declined at the approval timeout: nothing is written.
//! - the escalated `touch` under `on-request` waits for a person likewise.
//! - a patch under `notes/` that goes through a link to outside the workspace: not answered.
//!
//! And what is documented: a rule with `outside_sandbox = true` answers an escalated `mkdir`
//! and the directory is made outside the workspace; a person's Approve of a patch outside the
//! workspace under `untrusted` (the request says approving may run it outside the sandbox if
//! the sandbox blocks it) writes the file there, asking nobody again; a patch inside the
//! workspace is still answered by the rule. (Codex 0.169 runs an approved command again
//! outside the sandbox only when it sees the sandbox's refusal within its first moments, so a
//! command's second run is not asserted; patches are checked when they finish.)

use std::time::Duration;

use crate::common::{Bed, HttpRelay};
use crate::http_support::{Client, Event};
use codex_relay_testkit::ordinary::Ordinary;
use codex_relay_testkit::{Item, Reply};
use serde_json::json;

const TURN: Duration = Duration::from_secs(180);
/// Long enough for the test to answer the one request a person answers; the others are
/// declined when it passes.
const APPROVAL_TIMEOUT_MS: u64 = 30_000;

const RULES: &str = r#"
[[rule]]
name = "allow-touch"
action = "allow"
argv = ["touch"]

[[rule]]
name = "mkdir-anywhere"
action = "allow"
argv = ["mkdir"]
outside_sandbox = true

[[rule]]
name = "notes"
action = "allow"
paths = ["notes/**"]
"#;

/// `exec_command` asking to run outside the sandbox.
fn escalated(cmd: &str, call: &str) -> Reply {
    Reply::items(vec![Item::function_call(
        "exec_command",
        json!({"cmd": cmd, "sandbox_permissions": "require_escalated",
            "justification": "the file must go there"}),
        call,
    )])
}

/// A patch adding `file`, the way both versions take one from the shell tool.
fn patch(file: &str, call: &str) -> Reply {
    Reply::exec(
        &format!(
            "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: {file}\n+hello\n*** End Patch\nEOF\n"
        ),
        call,
    )
}

fn ev_t(e: &Event) -> String {
    e.json()["ev"]["t"].as_str().unwrap_or_default().to_owned()
}

/// What happened to a session's requests: `(opened?, who resolved, decision, reach kind)`.
#[derive(Debug, PartialEq)]
struct Asked {
    opened: bool,
    by: String,
    decision: String,
    reach: String,
}

fn asked(events: &[Event]) -> Vec<Asked> {
    let mut out: Vec<Asked> = Vec::new();
    for e in events.iter().filter(|e| e.event == "envelope") {
        let ev = e.json()["ev"].clone();
        match ev_t(e).as_str() {
            "request-opened" => out.push(Asked {
                opened: true,
                by: String::new(),
                decision: String::new(),
                reach: ev["request"]["reach"]["kind"]
                    .as_str()
                    .unwrap_or_default()
                    .into(),
            }),
            "request-resolved" => {
                let (by, decision) = (
                    ev["by"].as_str().unwrap_or_default().to_owned(),
                    ev["decision"].as_str().unwrap_or_default().to_owned(),
                );
                // A ruled request was never opened: it carries itself.
                if let Some(reach) = ev["request"]["reach"]["kind"].as_str() {
                    out.push(Asked {
                        opened: false,
                        by,
                        decision,
                        reach: reach.into(),
                    });
                } else if let Some(last) = out.last_mut() {
                    last.by = by;
                    last.decision = decision;
                }
            }
            _ => {}
        }
    }
    out
}

fn by_person(reach: &str, by: &str, decision: &str) -> Asked {
    Asked {
        opened: true,
        by: by.into(),
        decision: decision.into(),
        reach: reach.into(),
    }
}

fn by_rule(rule: &str, reach: &str) -> Asked {
    Asked {
        opened: false,
        by: format!("rule:{rule}"),
        decision: "approve".into(),
        reach: reach.into(),
    }
}

struct Case {
    marker: &'static str,
    policy: &'static str,
    replies: Vec<Reply>,
}

async fn an_allow_rule_keeps_codex_in_its_sandbox(version: &'static str) {
    let bed = match Bed::ordinary(version, "").await {
        Ok(bed) => bed,
        Err(why) => return codex_relay_testkit::skip::skip(why),
    };
    let user = Ordinary::get().unwrap();
    let ws = bed.home.workspace().to_path_buf();
    let out = bed.home.root().join("outside");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::create_dir_all(ws.join("notes")).unwrap();
    // Inside `notes/` by its name, outside the workspace where it leads.
    std::os::unix::fs::symlink(&out, ws.join("notes/out")).unwrap();
    user.chown(&out);
    user.chown(&ws);
    let rules_file = bed.home.root().join("rules.toml");
    std::fs::write(&rules_file, RULES).unwrap();
    let o = out.display();
    let cases = [
        Case {
            marker: "MARK-CONTROL",
            policy: "never",
            replies: vec![
                Reply::exec(&format!("touch {o}/w0.txt"), "c0"),
                Reply::exec("touch in0.txt", "c0b"),
                Reply::text("done"),
            ],
        },
        Case {
            marker: "MARK-ESCALATED",
            policy: "untrusted",
            replies: vec![
                escalated(&format!("touch {o}/w3.txt"), "c3"),
                Reply::text("done"),
            ],
        },
        Case {
            marker: "MARK-PLAIN",
            policy: "untrusted",
            replies: vec![
                Reply::exec(&format!("touch {o}/w1.txt"), "c1"),
                Reply::text("done"),
            ],
        },
        Case {
            marker: "MARK-ON-REQUEST",
            policy: "on-request",
            replies: vec![
                escalated(&format!("touch {o}/w2.txt"), "c2"),
                Reply::text("done"),
            ],
        },
        Case {
            marker: "MARK-OPTED-IN",
            policy: "on-request",
            replies: vec![
                escalated(&format!("mkdir {o}/d4"), "c4"),
                Reply::text("done"),
            ],
        },
        Case {
            marker: "MARK-PERSON",
            policy: "untrusted",
            replies: vec![patch(&format!("{o}/p5.txt"), "c5"), Reply::text("done")],
        },
        Case {
            marker: "MARK-NOTES",
            policy: "untrusted",
            replies: vec![patch("notes/today.md", "c6"), Reply::text("done")],
        },
        Case {
            marker: "MARK-LINK",
            policy: "untrusted",
            replies: vec![patch("notes/out/leak.md", "c7"), Reply::text("done")],
        },
    ];
    for case in &cases {
        bed.model.route(case.marker, case.replies.clone());
    }
    let mut args = bed.args(APPROVAL_TIMEOUT_MS);
    args.extend(["--listen", "127.0.0.1:0", "--rules"].map(String::from));
    args.push(rules_file.display().to_string());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let relay = HttpRelay::start_ordinary(&bed, &args, &[]).await;
    let c = Client::new(&relay.url);

    // Every session at once: the requests nobody answers time out together.
    fn idle(e: &Event) -> bool {
        e.event == "envelope" && ev_t(e) == "status" && e.json()["ev"]["status"] == "idle"
    }
    let mut streams = Vec::new();
    let mut person = None;
    for case in &cases {
        let body = json!({"prompt": format!("{}: go", case.marker), "cwd": ws,
            "approvalPolicy": case.policy, "sandbox": "workspace-write",
            "config": {"sandbox_workspace_write.exclude_slash_tmp": true,
                "sandbox_workspace_write.exclude_tmpdir_env_var": true}});
        let r = c.post("/api/sessions", &body).await;
        assert_eq!(r.status, 201, "{}", r.text());
        let id = r.json()["sessionId"].as_str().unwrap().to_owned();
        let mut stream = c.stream(&format!("/api/sessions/{id}/stream"), &[]).await;
        if case.marker == "MARK-PERSON" {
            // A person approves as soon as the card shows (while the other sessions start;
            // the card said what that lets Codex do).
            let c = c.clone();
            person = Some(tokio::spawn(async move {
                let opened = stream
                    .until(TURN, |e| e.event == "permission_request")
                    .await;
                let p = opened.last().unwrap().json();
                let text = p["reach"]["text"].as_str().unwrap_or_default();
                assert!(
                    text.contains("may run it outside the sandbox")
                        && text.contains("if the sandbox blocks it"),
                    "{p}"
                );
                let r = c
                    .post(
                        "/api/codex/permission/respond",
                        &json!({"id": p["id"], "action": "allow"}),
                    )
                    .await;
                assert_eq!(r.status, 200, "{}", r.text());
                let mut all = opened;
                all.append(&mut stream.until(TURN, idle).await);
                all
            }));
            streams.push(None);
        } else {
            streams.push(Some(stream));
        }
    }
    let mut seen = Vec::new();
    for stream in &mut streams {
        match stream {
            Some(stream) => seen.push(stream.until(TURN, idle).await),
            None => seen.push(
                person
                    .take()
                    .expect("the person's session")
                    .await
                    .expect("the person's answer"),
            ),
        }
    }
    let of = |marker: &str| {
        let i = cases.iter().position(|c| c.marker == marker).unwrap();
        asked(&seen[i])
    };
    let here = |p: &str| ws.join(p).exists();
    let there = |p: &str| out.join(p).exists();
    // Where Codex 0.169 may run an approved command outside at once, 0.98 only when blocked.
    let command_reach = if version == "0.98.0" {
        "outside_if_blocked"
    } else {
        "outside"
    };

    // The sandbox blocks writes outside the workspace (and allows them inside).
    assert_eq!(of("MARK-CONTROL"), vec![]);
    assert!(!there("w0.txt") && here("in0.txt"), "the control session");

    // (a) An escalated touch under untrusted: 0.169 asks a person, 0.98 refuses it.
    if version == "0.98.0" {
        assert_eq!(of("MARK-ESCALATED"), vec![]);
        assert_output(&bed, "c3", "cannot ask for escalated permissions");
    } else {
        assert_eq!(
            of("MARK-ESCALATED"),
            vec![by_person("outside", "timeout", "deny")]
        );
    }
    assert!(!there("w3.txt"), "the escalated touch wrote nothing");
    // (b) A plain touch under untrusted: a person is asked, nobody answers.
    assert_eq!(
        of("MARK-PLAIN"),
        vec![by_person(command_reach, "timeout", "deny")]
    );
    assert!(!there("w1.txt"), "the plain touch wrote nothing");
    // (c) An escalated touch under on-request.
    assert_eq!(
        of("MARK-ON-REQUEST"),
        vec![by_person("outside", "timeout", "deny")]
    );
    assert!(!there("w2.txt"), "the on-request touch wrote nothing");
    // A patch inside `notes/` by name, outside by the link it goes through.
    assert_eq!(
        of("MARK-LINK"),
        vec![by_person("outside_if_blocked", "timeout", "deny")]
    );
    assert!(!there("leak.md"), "nothing written through the link");

    // The rule that opted in answers an escalation, and Codex makes the directory outside.
    assert_eq!(
        of("MARK-OPTED-IN"),
        vec![by_rule("mkdir-anywhere", "outside")]
    );
    assert!(out.join("d4").is_dir(), "the opted-in rule let mkdir out");
    // A person's Approve under untrusted: the sandbox blocks the write, and Codex writes it
    // again outside the sandbox, asking nobody.
    assert_eq!(
        of("MARK-PERSON"),
        vec![by_person("outside_if_blocked", "http", "approve")]
    );
    assert_eq!(
        std::fs::read_to_string(out.join("p5.txt")).unwrap().trim(),
        "hello",
        "an approved patch left the sandbox"
    );
    // A patch inside the workspace stays in the sandbox: the rule answers it.
    assert_eq!(of("MARK-NOTES"), vec![by_rule("notes", "sandboxed")]);
    assert_eq!(
        std::fs::read_to_string(ws.join("notes/today.md"))
            .unwrap()
            .trim(),
        "hello"
    );

    drop(streams);
    relay.stop().await;
    bed.assert_no_codex_left().await;
}

/// Asserts the model was told `needle` in the output of call `call`.
fn assert_output(bed: &Bed, call: &str, needle: &str) {
    let output = bed
        .model
        .requests()
        .iter()
        .find_map(|r| r.tool_output(call))
        .unwrap_or_default();
    assert!(output.contains(needle), "{call}: {output}");
}

codex_relay_testkit::for_each_codex!(an_allow_rule_keeps_codex_in_its_sandbox);
