//! `codex-relay mcp-server` against the real legacy `codex mcp-server`: one set of client
//! scenarios on the official Node MCP SDK, run against (a) `codex mcp-server` of Codex 0.98,
//! (b) `codex-relay mcp-server` on 0.98 and (c) on 0.169, all with the scripted model. What a
//! client sees is compared with ids, times and paths normalized; every accepted difference is
//! listed with its reason in `legacy_support::ACCEPTED`, which names the target, the scenario
//! and the part of it, and undoes exactly that difference on the relay's side before the rest
//! is compared. Also: reference 000's flow end to end, a client without
//! elicitation, and a client that disconnects mid-approval.

use crate::common;
use crate::legacy_support;

use std::collections::BTreeMap;

use crate::common::Bed;
use crate::legacy_support::{
    LegacyDriver, Target, elicitations, kill_leftovers, result, tool_list, types,
};
use codex_relay_testkit::{Item, Reply};
use serde_json::{Value, json};

const PATCH: &str = "*** Begin Patch\n*** Add File: hello.txt\n+hi there\n*** End Patch\n";

/// The same script on every target's model server; each scenario's prompt carries its marker.
fn script(bed: &Bed) {
    let m = &bed.model;
    m.route(
        "MARK-PLAIN",
        [
            Reply::text("plain one"),
            Reply::text("plain two"),
            Reply::text("plain three"),
        ],
    );
    m.route(
        "MARK-AP",
        [
            Reply::exec("touch ap.txt", "call-ap"),
            Reply::text("ap done"),
        ],
    );
    m.route(
        "MARK-AFS",
        [
            Reply::exec("touch afs.txt", "call-afs1"),
            Reply::text("afs one"),
            Reply::exec("touch afs.txt", "call-afs2"),
            Reply::text("afs two"),
        ],
    );
    m.route(
        "MARK-DN",
        [
            Reply::exec("touch dn.txt", "call-dn"),
            Reply::text("dn done"),
        ],
    );
    m.route(
        "MARK-AB",
        [
            Reply::exec("touch ab.txt", "call-ab"),
            Reply::text("ab after"),
        ],
    );
    m.route(
        "MARK-P",
        [
            Reply::items(vec![Item::function_call(
                "apply_patch",
                json!({"input": PATCH}),
                "call-p",
            )]),
            Reply::text("patched"),
        ],
    );
    m.route(
        "MARK-C",
        [
            Reply::exec("sleep 30", "call-c"),
            Reply::text("after cancel"),
        ],
    );
    m.route(
        "MARK-R",
        [
            Reply::exec("touch r.txt", "call-r"),
            Reply::text("r done"),
            Reply::text("r two"),
        ],
    );
}

/// What one target showed, scenario by scenario (normalized), for the comparison.
type Transcript = BTreeMap<&'static str, Value>;

fn thread(answer: &Value) -> String {
    answer["result"]["structuredContent"]["threadId"]
        .as_str()
        .unwrap_or_else(|| panic!("no threadId in {answer}"))
        .to_owned()
}

/// Runs every scenario on `target`, asserting what must hold there; returns the transcript.
async fn run(target: Target) -> Transcript {
    let bed = Bed::start(target.codex_version()).await;
    script(&bed);
    let ws = bed.home.workspace().to_path_buf();
    let mut t = Transcript::new();
    let mut d = LegacyDriver::spawn().await;
    let info = d.cmd(target.connect(&bed, 60_000, true)).await;
    t.insert("tools", tool_list(&info["tools"]));
    let base = json!({"cwd": ws, "approval-policy": "untrusted", "sandbox": "workspace-write"});
    let codex = |prompt: &str, extra: Value| {
        let mut a = base.clone();
        a["prompt"] = json!(prompt);
        a.as_object_mut()
            .unwrap()
            .extend(extra.as_object().cloned().unwrap_or_default());
        a
    };
    let none = json!({});

    // A plain prompt, then codex-reply by threadId and by conversationId.
    let one = d
        .call(
            "codex",
            codex("MARK-PLAIN first", none.clone()),
            &[],
            none.clone(),
        )
        .await;
    let id = thread(&one);
    let first_event = &one["events"][0];
    assert_eq!(
        first_event["msg"]["type"], "session_configured",
        "{target:?}: {one}"
    );
    assert_eq!(first_event["msg"]["session_id"], id.as_str(), "{target:?}");
    let two = d
        .call(
            "codex-reply",
            json!({"prompt": "MARK-PLAIN second", "threadId": id}),
            &[],
            none.clone(),
        )
        .await;
    let three = d
        .call(
            "codex-reply",
            json!({"prompt": "MARK-PLAIN third", "conversationId": id}),
            &[],
            none.clone(),
        )
        .await;
    assert_eq!(thread(&three), id, "{target:?}: the same thread continues");
    let last = bed
        .model
        .requests_with("MARK-PLAIN third")
        .pop()
        .expect("the third turn asked the model");
    let said = last.user_texts().join("\n");
    assert!(
        said.contains("MARK-PLAIN first") && said.contains("MARK-PLAIN second"),
        "{target:?}: the history reached the model: {said}"
    );
    for (k, a) in [
        ("plain", &one),
        ("reply by threadId", &two),
        ("reply by conversationId", &three),
    ] {
        t.insert(k, json!({"result": result(a), "events": types(a)}));
    }

    // approved: asked once, the command runs.
    let ap = d
        .call(
            "codex",
            codex("MARK-AP go", none.clone()),
            &["approved"],
            none.clone(),
        )
        .await;
    assert!(
        ws.join("ap.txt").exists(),
        "{target:?}: the approved command ran"
    );
    let e = &ap["elicitations"][0];
    assert_eq!(
        e["codex_command"],
        json!(["/bin/bash", "-lc", "touch ap.txt"]),
        "{target:?}"
    );
    assert_eq!(e["codex_call_id"], "call-ap", "{target:?}");
    assert_eq!(e["threadId"], thread(&ap).as_str(), "{target:?}");
    t.insert(
        "approved",
        json!({"result": result(&ap), "events": types(&ap), "asked": elicitations(&ap)}),
    );

    // approved_for_session: the same command later in the session is not asked again.
    let afs1 = d
        .call(
            "codex",
            codex("MARK-AFS go", none.clone()),
            &["approved_for_session"],
            none.clone(),
        )
        .await;
    let afs2 = d
        .call(
            "codex-reply",
            json!({"prompt": "MARK-AFS again", "threadId": thread(&afs1)}),
            &["denied"],
            none.clone(),
        )
        .await;
    assert_eq!(
        afs2["elicitations"],
        json!([]),
        "{target:?}: asked again after approved_for_session"
    );
    t.insert("approved_for_session", json!({"first": {"result": result(&afs1), "events": types(&afs1), "asked": elicitations(&afs1)},
        "second": {"result": result(&afs2), "events": types(&afs2), "asked": elicitations(&afs2)}}));

    // denied: the command does not run; the model is told and the turn goes on.
    let dn = d
        .call(
            "codex",
            codex("MARK-DN go", none.clone()),
            &["denied"],
            none.clone(),
        )
        .await;
    assert!(
        !ws.join("dn.txt").exists(),
        "{target:?}: a denied command ran"
    );
    let told = bed
        .model
        .requests_with("MARK-DN")
        .pop()
        .unwrap()
        .tool_output("call-dn")
        .unwrap_or_default();
    assert!(
        told.to_lowercase().contains("rejected"),
        "{target:?}: the model was told: {told}"
    );
    t.insert(
        "denied",
        json!({"result": result(&dn), "events": types(&dn), "asked": elicitations(&dn)}),
    );

    // abort: the turn is aborted; the command does not run.
    let ab = d
        .call(
            "codex",
            codex("MARK-AB go", none.clone()),
            &["abort"],
            json!({"timeoutMs": 8000, "settleMs": 1000}),
        )
        .await;
    assert!(
        !ws.join("ab.txt").exists(),
        "{target:?}: an aborted command ran"
    );
    assert!(
        types(&ab).contains(&"turn_aborted".to_owned()),
        "{target:?}: {ab}"
    );
    t.insert(
        "abort",
        json!({"result": result(&ab), "events": types(&ab), "asked": elicitations(&ab)}),
    );

    // A patch approval announces the changes (Codex 0.169 offers no apply_patch tool to the
    // scripted provider: Codex changed, so this runs where 0.98 runs).
    if target.codex_version() == "0.98.0" {
        let p = d
            .call(
                "codex",
                codex("MARK-P go", json!({"model": "gpt-5-codex"})),
                &["approved"],
                none.clone(),
            )
            .await;
        assert_eq!(
            std::fs::read_to_string(ws.join("hello.txt")).unwrap_or_default(),
            "hi there\n",
            "{target:?}"
        );
        let changes = p["elicitations"][0]["codex_changes"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        let (path, change) = changes
            .iter()
            .next()
            .unwrap_or_else(|| panic!("{target:?}: no changes announced: {p}"));
        assert!(path.ends_with("hello.txt"), "{target:?}: {path}");
        assert_eq!(
            change,
            &json!({"type": "add", "content": "hi there\n"}),
            "{target:?}"
        );
        t.insert(
            "patch",
            json!({"result": result(&p), "events": types(&p), "asked": elicitations(&p)}),
        );
    }

    // A cancelled call (notifications/cancelled) stops the turn; the next codex-reply works.
    let c = d
        .call(
            "codex",
            codex("MARK-C go", json!({"approval-policy": "never"})),
            &[],
            json!({"cancelOn": "exec_command_begin"}),
        )
        .await;
    assert!(
        c["thrown"].is_string(),
        "{target:?}: the cancelled call was answered: {c}"
    );
    assert!(
        types(&c).contains(&"turn_aborted".to_owned()),
        "{target:?}: {c}"
    );
    let c_id = c["events"]
        .as_array()
        .into_iter()
        .flatten()
        .find_map(|e| e["msg"]["session_id"].as_str())
        .unwrap_or_else(|| panic!("{target:?}: no session_configured in {c}"))
        .to_owned();
    let next = d
        .call(
            "codex-reply",
            json!({"prompt": "MARK-C next", "threadId": c_id}),
            &[],
            json!({"timeoutMs": 30000, "settleMs": 1000}),
        )
        .await;
    // The next turn runs on every target; only codex-relay is required to answer the call
    // (see `accept` for what the legacy server did).
    assert!(
        types(&next).contains(&"task_complete".to_owned()),
        "{target:?}: the turn after the cancelled one did not complete: {next}"
    );
    if target != Target::Legacy {
        assert_eq!(
            result(&next)["structured"]["content"],
            "after cancel",
            "{target:?}: {next}"
        );
    }
    t.insert(
        "cancelled",
        json!({"events": types(&c), "next": result(&next)}),
    );

    // Reference 000's flow: its config shape, ids from session_configured, then a reply
    // with {sessionId, conversationId, prompt}.
    let r = d
        .cmd(
            json!({"op": "reference000", "decisions": ["approved"], "next": "MARK-R more",
            "start": {"prompt": "MARK-R go", "cwd": ws, "sandbox": "workspace-write",
                      "approval-policy": "untrusted", "config": {"mcp_servers": {}}}}),
        )
        .await;
    assert!(
        ws.join("r.txt").exists(),
        "{target:?}: reference 000's approval ran the command"
    );
    assert_eq!(
        r["second"]["result"]["structuredContent"]["content"], "r two",
        "{target:?}: {r}"
    );
    assert_eq!(
        r["first"]["elicitations"][0]["codex_elicitation"],
        "exec-approval"
    );
    t.insert(
        "reference 000",
        json!({"first": legacy_support::known(&r["first"]["events"]), "second": legacy_support::known(&r["second"]["events"])}),
    );

    d.close().await;
    if target == Target::Legacy {
        kill_leftovers(&bed).await;
    } else {
        bed.assert_no_codex_left().await;
    }
    t
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_relay_shows_clients_what_the_legacy_server_showed() {
    let (legacy, old, new) = tokio::join!(
        run(Target::Legacy),
        run(Target::Relay("0.98.0")),
        run(Target::Relay(codex_relay_testkit::NEWEST)),
    );
    let mut unexplained = Vec::new();
    for (target, t) in [
        (Target::Relay("0.98.0"), &old),
        (Target::Relay(codex_relay_testkit::NEWEST), &new),
    ] {
        for (key, want) in &legacy {
            let got = t.get(key).unwrap_or(&Value::Null);
            match legacy_support::compare(target, key, want, got) {
                Ok(accepted) => {
                    for why in accepted {
                        eprintln!("accepted difference ({}, {key}): {why}", target.name());
                    }
                }
                Err(unexplained_here) => unexplained.push(unexplained_here),
            }
        }
        // Nothing the relay shows is left out of the comparison.
        for key in t.keys().filter(|k| !legacy.contains_key(*k)) {
            unexplained.push(format!(
                "{} / {key}: not shown by the legacy server",
                target.name()
            ));
        }
    }
    assert!(
        unexplained.is_empty(),
        "unexplained differences:\n{}",
        unexplained.join("\n")
    );
}

/// A client that goes away while an approval waits: nothing of Codex is left running, and the
/// approval is recorded as declined (not pending). The legacy server kept its turn (and
/// Codex) running after its client left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_disconnects_mid_approval_leaves_no_process_and_a_declined_approval() {
    let bed = Bed::start(codex_relay_testkit::NEWEST).await;
    script(&bed);
    let ws = bed.home.workspace().to_path_buf();
    let mut d = LegacyDriver::spawn().await;
    d.cmd(Target::Relay(codex_relay_testkit::NEWEST).connect(&bed, 60_000, true))
        .await;
    let gone = d
        .call(
            "codex",
            json!({"prompt": "MARK-AP go", "cwd": ws, "approval-policy": "untrusted", "sandbox": "workspace-write"}),
            &["hold"],
            json!({"closeOnElicitation": true}),
        )
        .await;
    assert_eq!(
        gone["elicitations"].as_array().map(Vec::len),
        Some(1),
        "{gone}"
    );
    bed.assert_no_codex_left().await;
    assert!(!bed.home.workspace().join("ap.txt").exists());
    let db = bed.home.root().join("relay.db");
    let store = codex_relay_core::store::Store::open(&db.display().to_string())
        .await
        .expect("the relay's store opens");
    let rows = store.pending(None, false).await.unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    let resolution: Value = serde_json::from_str(
        rows[0]
            .resolution
            .as_deref()
            .expect("resolved, not pending"),
    )
    .unwrap();
    assert_eq!(resolution["decision"], "deny", "{resolution}");
    assert_eq!(resolution["by"], "relay-shutdown", "{resolution}");
}

/// A client that did not declare elicitation: the legacy server sent the approval anyway, the
/// SDK answered it with an error, and the legacy call never returned. codex-relay also sends it
/// (the same request an old client may still handle); an error is not a decision, so the
/// approval waits and is declined at its deadline (fail closed), and the turn then finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_without_elicitation_gets_the_approval_declined_at_its_deadline() {
    let check = |target: Target| async move {
        let bed = Bed::start(target.codex_version()).await;
        script(&bed);
        let ws = bed.home.workspace().to_path_buf();
        let mut d = LegacyDriver::spawn().await;
        d.cmd(target.connect(&bed, 3_000, false)).await;
        let a = d
            .call(
                "codex",
                json!({"prompt": "MARK-DN go", "cwd": ws, "approval-policy": "untrusted", "sandbox": "workspace-write"}),
                &[],
                json!({"timeoutMs": 15000, "settleMs": 500}),
            )
            .await;
        assert!(
            types(&a).contains(&"exec_approval_request".to_owned()),
            "{target:?}: {a}"
        );
        assert!(
            !ws.join("dn.txt").exists(),
            "{target:?}: the command ran unapproved"
        );
        d.close().await;
        kill_leftovers(&bed).await;
        a
    };
    let (legacy, relay) = tokio::join!(
        check(Target::Legacy),
        check(Target::Relay(codex_relay_testkit::OLDEST))
    );
    assert!(
        legacy["thrown"].is_string(),
        "the legacy call returned: {legacy}"
    );
    assert!(!types(&legacy).contains(&"task_complete".to_owned()));
    assert_eq!(
        result(&relay)["structured"]["content"],
        "dn done",
        "{relay}"
    );
}

/// `codex-relay serve` offers the same contract at `/mcp-server`, with the six session tools
/// beside it when asked; an SDK answer `{action, content, decision}` counts by its decision.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_offers_the_legacy_contract_at_mcp_server() {
    let bed = Bed::start(codex_relay_testkit::OLDEST).await;
    script(&bed);
    let ws = bed.home.workspace().to_path_buf();
    let mut args = bed.args(60_000);
    args.push("--with-session-tools".into());
    let http = common::HttpRelay::start(args).await;
    let url = format!("{}-server", http.url);
    let mut d = LegacyDriver::spawn().await;
    let info = d
        .cmd(json!({"op": "connect", "url": url, "elicitation": true,
            "headers": {"Authorization": format!("Bearer {}", codex_relay_testkit::RELAY_TEST_TOKEN)}}))
        .await;
    let names: Vec<&str> = info["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&"codex") && names.contains(&"codex-reply") && names.contains(&"codex_list"),
        "{names:?}"
    );
    let ap = d
        .call(
            "codex",
            json!({"prompt": "MARK-AP go", "cwd": ws, "approval-policy": "untrusted", "sandbox": "workspace-write"}),
            &["approved"],
            json!({}),
        )
        .await;
    assert_eq!(result(&ap)["structured"]["content"], "ap done", "{ap}");
    assert!(ws.join("ap.txt").exists(), "the approved command ran");
    let listed = d.call("codex_list", json!({}), &[], json!({})).await;
    let id = thread(&ap);
    assert!(
        listed["result"]["structuredContent"]["sessions"]
            .to_string()
            .contains(&id),
        "codex_list sees the legacy thread: {listed}"
    );
    d.close().await;
    http.stop().await;
    bed.assert_no_codex_left().await;
}
