//! Codex's own remembered prefix as an option every front shows (one `serve`, real Codex 0.169,
//! the scripted model): a command approval carrying Codex's proposal lists `approve with codex
//! rule` among its options; chosen through the HTTP API's `option`, Codex writes the prefix to
//! its rules file and runs the same command again without asking; an MCP client's form offers
//! the same word, and choosing it there does the same.

use std::time::{Duration, Instant};

use crate::common::{Bed, Driver, HttpRelay, Sdk, Transport};
use crate::http_support::Client;
use codex_relay_testkit::Reply;
use serde_json::{Value, json};

const TURN: Duration = Duration::from_secs(90);
const WORD: &str = "approve with codex rule";

async fn until_view(c: &Client, session: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + TURN;
    loop {
        let v = c.get(&format!("/api/sessions/{session}")).await.json();
        if done(&v) {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: {v}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn log(c: &Client, session: &str) -> Vec<Value> {
    c.get(&format!(
        "/api/sessions/{session}/events?after=0&limit=1000"
    ))
    .await
    .json()["events"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn of_type<'a>(events: &'a [Value], t: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["ev"]["t"] == t).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_s_remembered_prefix_is_an_option_on_the_api_and_on_mcp_forms() {
    let bed = Bed::start(codex_relay_testkit::NEWEST).await;
    let ws = bed.home.workspace().to_path_buf();
    bed.model.route(
        "CR-HTTP",
        [
            Reply::exec("git --version", "c1"),
            Reply::exec("git --version", "c2"),
            Reply::text("http done"),
        ],
    );
    bed.model.route(
        "CR-FORM",
        [
            Reply::exec("touch formed.txt", "f1"),
            Reply::exec("touch formed.txt", "f2"),
            Reply::text("form done"),
        ],
    );
    // An empty HOME, as the engine tests give Codex: a command Codex runs outside its sandbox
    // goes through the user's shell start-up files, and a stale pyenv lock there stalls it.
    let home = bed.home.root().join("empty-home");
    std::fs::create_dir_all(&home).unwrap();
    let mut args = vec!["--listen".to_owned(), "127.0.0.1:0".to_owned()];
    args.extend(bed.args(120_000));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut env: Vec<(&str, String)> = ["PATH", "TMPDIR", "RUST_LOG"]
        .into_iter()
        .filter_map(|k| Some((k, std::env::var(k).ok()?)))
        .collect();
    env.push(("HOME", home.display().to_string()));
    env.push((
        "LOG_LEVEL",
        std::env::var("LOG_LEVEL").unwrap_or_else(|_| "info".into()),
    ));
    let relay = HttpRelay::start_with_env(&args, &env).await;
    let c = Client::new(&relay.url);
    let start = |mark: &str| {
        json!({"prompt": format!("{mark}: go"), "cwd": ws, "approvalPolicy": "untrusted",
               "sandbox": "workspace-write"})
    };

    // Through the HTTP API: the option is listed with Codex's proposal, and taken by its word.
    let r = c.post("/api/sessions", &start("CR-HTTP")).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let v = until_view(&c, &id, "the approval", |v| {
        v["pending"][0]["id"].is_string()
    })
    .await;
    let p = &v["pending"][0];
    assert_eq!(
        p["details"]["codexRule"],
        json!(["git", "--version"]),
        "{p}"
    );
    assert_eq!(
        p["options"],
        json!(["approve", "approve for session", WORD, "deny", "cancel"]),
        "{p}"
    );
    let r = c
        .post(
            "/api/codex/permission/respond",
            &json!({"id": p["id"], "action": "allow", "option": WORD}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["decision"], WORD, "{}", r.text());
    until_view(&c, &id, "the turn's end", |v| v["status"] == "idle").await;
    let events = log(&c, &id).await;
    assert_eq!(
        of_type(&events, "request-opened").len(),
        1,
        "Codex ran the same command again without asking"
    );
    let resolved = of_type(&events, "request-resolved");
    assert_eq!(
        (&resolved[0]["ev"]["decision"], &resolved[0]["ev"]["by"]),
        (&json!(WORD), &json!("http"))
    );
    let ran = bed
        .model
        .requests()
        .iter()
        .find_map(|r| r.tool_output("c2"))
        .expect("the second command's output reached the model");
    let first = bed
        .model
        .requests()
        .iter()
        .find_map(|r| r.tool_output("c1"));
    assert!(ran.contains("git version"), "{ran} (first: {first:?})");
    let rules_file = bed.home.path().join("rules/default.rules");
    let kept = std::fs::read_to_string(&rules_file).expect("Codex wrote its rules file");
    assert!(kept.contains("\"git\", \"--version\""), "{kept}");

    // Through MCP: the form's decisions are the request's options; the word is taken there too.
    let mut mcp = Driver::spawn(Sdk::Node).await;
    mcp.connect(Transport::Http, &[], &relay.url).await;
    mcp.cmd(json!({"op": "policy", "acceptWhen": "touch formed.txt",
        "content": {"decision": WORD}}))
        .await;
    let started = mcp
        .ok(
            "codex_start",
            json!({"prompt": "CR-FORM: go", "workingDirectory": ws,
                   "approvalPolicy": "untrusted", "sandbox": "workspace-write"}),
        )
        .await;
    let formed = started["sessionId"].as_str().unwrap().to_owned();
    until_view(&c, &formed, "the form's turn to end", |v| {
        v["status"] == "idle" && v["turnCount"] == 1
    })
    .await;
    let asked = mcp.cmd(json!({"op": "elicitations"})).await;
    let forms = asked["elicitations"].as_array().unwrap();
    assert_eq!(forms.len(), 1, "asked once: {asked}");
    assert!(
        forms[0]["schema"]["properties"]["decision"]["enum"]
            .as_array()
            .is_some_and(|e| e.iter().any(|w| w == WORD)),
        "{asked}"
    );
    let events = log(&c, &formed).await;
    assert_eq!(of_type(&events, "request-opened").len(), 1);
    let resolved = of_type(&events, "request-resolved");
    assert_eq!(
        (&resolved[0]["ev"]["decision"], &resolved[0]["ev"]["by"]),
        (&json!(WORD), &json!("mcp-elicitation"))
    );
    assert!(ws.join("formed.txt").exists());
    let kept = std::fs::read_to_string(&rules_file).unwrap();
    assert!(kept.contains("\"touch\""), "{kept}");
    mcp.close().await;
    relay.stop().await;
    bed.assert_no_codex_left().await;
}
