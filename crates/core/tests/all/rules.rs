//! Approval rules over the real Codex (0.169.0 and 0.98.0) and the scripted model, on SQLite
//! and Postgres: a rule allows a command (it runs, nobody is asked, the log names the rule; the
//! rules say `outside_sandbox`, which a command under `untrusted` needs: see
//! crates/codex-relay/tests/all/rules_sandbox.rs),
//! a rule denies `rm -rf` (declined, and the model's next request carries the reason), a third
//! command still waits for a human; after a restart the rules (from the file and from the API)
//! are there and still answer. And a person's choice of Codex's own remembered prefix (its
//! exec-policy amendment): Codex stops asking for that command, without any relay rule.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use crate::common::{Backend, until};
use codex_relay_codex::AppServerConfig;
use codex_relay_core::rules::{RuleSpec, Source, parse_toml};
use codex_relay_core::{
    Answer, CreateOptions, Envelope, Ev, PendingDetails, PermissionMode, Relay, RelayConfig,
    SayInput, SessionStatus,
};
use codex_relay_testkit::{CodexHome, ModelServer, Reply};

crate::matrix!(rules_answer_before_a_human_and_survive_a_restart);
codex_relay_testkit::for_each_codex!(codex_remembers_the_prefix_a_person_chose);

const RULES: &str = r#"
# Under untrusted an approved command may run outside the sandbox (when the sandbox blocks
# it): a rule answers such requests only when it says so.
[[rule]]
name = "allow-git-status"
action = "allow"
argv = ["git", "status"]
outside_sandbox = true

[[rule]]
name = "no-rm-rf"
action = "deny"
argv = ["rm", "-rf"]
reason = "never delete build trees here; use `cargo clean`"
"#;

const REASON: &str = "never delete build trees here";

fn untrusted(cwd: &str, prompt: &str) -> CreateOptions {
    CreateOptions {
        prompt: Some(prompt.into()),
        cwd: Some(cwd.into()),
        mode: Some(PermissionMode::Default),
        labels: vec!["ci".into()],
        ..Default::default()
    }
}

/// The request-resolved events of a log: `(call it was about, by, decision, carried the request)`.
fn resolutions(events: &[Arc<Envelope>]) -> Vec<(String, String, String, bool)> {
    events
        .iter()
        .filter_map(|e| match &e.ev {
            Ev::RequestResolved {
                decision,
                by,
                request,
                ..
            } => Some((
                by.as_str().to_owned(),
                decision.as_str().to_owned(),
                request.is_some(),
                request.as_ref().map(|r| match &r.details {
                    PendingDetails::CommandApproval { command, .. } => command.clone(),
                    _ => String::new(),
                }),
            )),
            _ => None,
        })
        .map(|(by, decision, carried, command)| {
            (command.unwrap_or_default(), by, decision, carried)
        })
        .collect()
}

fn opened(events: &[Arc<Envelope>]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.ev {
            Ev::RequestOpened { request } => Some(request.question.clone()),
            _ => None,
        })
        .collect()
}

fn tool_end(events: &[Arc<Envelope>], call: &str) -> Option<String> {
    events.iter().find_map(|e| match &e.ev {
        Ev::ToolCallEnd {
            call: c, status, ..
        } if c == call => Some(
            serde_json::to_value(status)
                .unwrap()
                .as_str()
                .unwrap()
                .to_owned(),
        ),
        _ => None,
    })
}

async fn rules_answer_before_a_human_and_survive_a_restart(
    version: &'static str,
    backend: Backend,
) {
    common::init_tracing();
    let model = ModelServer::start().await;
    let home = CodexHome::new(model.url());
    let Some(target) = common::store_target(backend, &home).await else {
        return;
    };
    let ws = home.workspace().display().to_string();
    // A repository, so `git status` succeeds when it runs.
    let init = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(home.workspace())
        .status()
        .expect("git runs");
    assert!(init.success());
    let bin = codex_relay_testkit::codex_bin(version).expect("pinned Codex installs");
    let mut config = RelayConfig::new(AppServerConfig::new(bin).codex_home(home.path()), target);
    common::bare_home(&mut config, &home);
    config.approval_timeout = Duration::from_secs(120);
    config.rules_file = Some(parse_toml("rules.toml", RULES).unwrap());
    let relay = Relay::open(config.clone()).await.expect("relay opens");
    // One rule over the API, for labelled sessions in this workspace.
    let api_rule: RuleSpec = serde_json::from_value(serde_json::json!({
        "name": "allow-mkdir", "action": "allow", "argv": ["mkdir"],
        "cwd": ws, "labels": ["ci"], "outside_sandbox": true}))
    .unwrap();
    relay.put_rule(api_rule).await.unwrap();

    model.push([
        Reply::exec("git status", "c1"),
        Reply::exec("rm -rf build", "c2"),
        Reply::exec("touch notes.txt", "c3"),
        Reply::text("done"),
    ]);
    let (h, _) = relay
        .create(untrusted(&ws, "tidy up"))
        .await
        .expect("create");
    let id = h.id().to_owned();
    // Only the third command reaches a human.
    let snap = until(&relay, &id, "a request for a human", |s| {
        !s.pending.is_empty()
    })
    .await;
    assert_eq!(snap.pending.len(), 1);
    assert!(
        snap.pending[0].question.contains("touch notes.txt"),
        "{:?}",
        snap.pending[0]
    );
    let events = relay.events(&id, 0, 10_000).await.unwrap();
    assert_eq!(
        opened(&events),
        vec![snap.pending[0].question.clone()],
        "nobody was asked about the first two"
    );
    let ruled = resolutions(&events);
    let deny = (
        "/bin/bash -lc 'rm -rf build'".to_owned(),
        "rule:no-rm-rf".to_owned(),
        "deny".to_owned(),
        true,
    );
    if version != codex_relay_testkit::OLDEST {
        assert_eq!(
            ruled,
            vec![
                (
                    "/bin/bash -lc 'git status'".to_owned(),
                    "rule:allow-git-status".into(),
                    "approve".into(),
                    true
                ),
                deny
            ]
        );
    } else {
        // Codex 0.98 runs `git status` without asking (its own list of safe commands): there
        // is nothing for a rule to answer.
        assert_eq!(ruled, vec![deny]);
    }
    assert_eq!(tool_end(&events, "c1").as_deref(), Some("completed"));
    assert_eq!(tool_end(&events, "c2").as_deref(), Some("declined"));
    // The model's next request after the denial carries the rule's reason.
    let reqs = model.requests();
    let after_deny = reqs
        .iter()
        .find(|r| r.tool_output("c2").is_some())
        .expect("the model was called after the denial");
    assert!(
        after_deny.body.to_string().contains(REASON),
        "the reason reached the model: {}",
        after_deny.body
    );
    relay
        .respond(
            &id,
            &snap.pending[0].id,
            Answer::approve(),
            codex_relay_core::Decider::library("test"),
        )
        .await
        .unwrap();
    until(&relay, &id, "the turn's end", |s| {
        s.status == SessionStatus::Idle
    })
    .await;
    assert!(home.workspace().join("notes.txt").exists());
    let counts = relay.rule_counts();
    assert_eq!(counts.denied.load(std::sync::atomic::Ordering::Relaxed), 1);
    let allowed = if version != codex_relay_testkit::OLDEST {
        1
    } else {
        0
    };
    assert_eq!(
        counts.allowed.load(std::sync::atomic::Ordering::Relaxed),
        allowed
    );
    relay.shutdown().await;

    // After a restart (no rules file this time) the rules are still there and still answer.
    let config = RelayConfig {
        rules_file: None,
        ..config
    };
    let relay = Relay::open(config).await.expect("relay reopens");
    let names: Vec<(String, Source)> = relay
        .rules()
        .into_iter()
        .map(|r| (r.spec.name, r.source))
        .collect();
    assert_eq!(
        names,
        vec![
            ("allow-git-status".into(), Source::File),
            ("allow-mkdir".into(), Source::Api),
            ("no-rm-rf".into(), Source::File),
        ]
    );
    model.push([Reply::exec("mkdir -p out", "c4"), Reply::text("made")]);
    relay
        .say(
            &id,
            SayInput {
                text: "make the output directory".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    until(&relay, &id, "the second turn's end", |s| {
        s.status == SessionStatus::Idle && s.turn_count == 2
    })
    .await;
    let events = relay.events(&id, 0, 10_000).await.unwrap();
    assert!(
        resolutions(&events).contains(&(
            "/bin/bash -lc 'mkdir -p out'".to_owned(),
            "rule:allow-mkdir".into(),
            "approve".into(),
            true
        )),
        "{:?}",
        resolutions(&events)
    );
    assert_eq!(tool_end(&events, "c4").as_deref(), Some("completed"));
    assert_eq!(
        opened(&events).len(),
        1,
        "still only the one human question"
    );
    relay.shutdown().await;
}

async fn codex_remembers_the_prefix_a_person_chose(version: &'static str) {
    let Some(env) = common::Env::start(version, Backend::Sqlite, Duration::from_secs(120)).await
    else {
        return;
    };
    env.model.push([
        Reply::exec("git --version", "c1"),
        Reply::exec("git --version", "c2"),
        Reply::text("done"),
    ]);
    let (h, _) = env
        .relay
        .create(untrusted(&env.cwd(), "which git"))
        .await
        .unwrap();
    let id = h.id().to_owned();
    let snap = env
        .until(&id, "the first approval", |s| !s.pending.is_empty())
        .await;
    let p = &snap.pending[0];
    let PendingDetails::CommandApproval { codex_rule, .. } = &p.details else {
        panic!("{p:?}");
    };
    // Both pinned versions propose a prefix to remember (0.169 also lists it among the
    // decisions it offers).
    assert_eq!(
        codex_rule.as_deref(),
        Some(&["git".to_owned(), "--version".to_owned()][..]),
        "{p:?}"
    );
    let r = env
        .relay
        .respond(
            &id,
            &p.id,
            Answer::ApproveWithCodexRule,
            codex_relay_core::Decider::library("test"),
        )
        .await
        .unwrap();
    assert_eq!(r.decision.as_str(), "approve with codex rule");
    env.until(&id, "the turn's end", |s| s.status == SessionStatus::Idle)
        .await;
    let events = env.all_events(&id).await;
    assert_eq!(
        opened(&events).len(),
        1,
        "Codex did not ask again for the same command"
    );
    // It ran: the model got its output. (Codex sends no completed item for a command its own
    // policy let through, so the log shows its start only.)
    let output = env
        .model
        .requests()
        .iter()
        .find_map(|r| r.tool_output("c2"))
        .expect("the second command's output reached the model");
    assert!(output.contains("git version"), "{output}");
    // Codex keeps it in its own execution policy, beside its config: not a relay rule.
    let kept = std::fs::read_to_string(env.home.path().join("rules/default.rules"))
        .expect("Codex wrote its rules file");
    assert!(
        kept.contains("\"git\"") && kept.contains("\"--version\""),
        "{kept}"
    );
    assert!(env.relay.rules().is_empty());
}
