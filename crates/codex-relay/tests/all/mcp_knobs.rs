//! Every setting in the README's table, as an environment variable, on `codex-relay serve` with
//! the real Codex: each one takes effect (the binary, CODEX_HOME, the approval timeout checked
//! from both sides, the session cap, the event buffer, the log level, the data directory, the
//! store, the listen address); and with nothing set, the documented defaults apply
//! (`codex` on PATH, `~/.codex`, `~/.local/share/codex-relay/relay.db`, `127.0.0.1:7878`, `warn`,
//! a buffer of 1000, 32 sessions, 300000 ms).

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use crate::common::{Bed, Driver, HttpRelay, RELAY, Sdk, Transport};
use codex_relay_testkit::{NEWEST, Reply};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};

const TURN: Duration = Duration::from_secs(90);

/// Log text without terminal colour codes.
fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn path_str(p: &Path) -> String {
    p.display().to_string()
}

/// The `engine settings` log line, which says what the relay runs with.
fn settings_line(log: &str) -> String {
    plain(log)
        .lines()
        .find(|l| l.contains("engine settings"))
        .unwrap_or_else(|| panic!("no engine settings line in {log}"))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_setting_from_the_environment_takes_effect() {
    let bed = Bed::start(NEWEST).await;
    let ws = bed.home.workspace().to_path_buf();
    bed.model.route(
        "KNOB-A",
        [
            Reply::exec("touch knob.txt", "call-k"),
            Reply::text("went on without it"),
        ],
    );
    let data = bed.home.root().join("data-from-env");
    let db = bed.home.root().join("db-from-env").join("store.db");
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    let base_env = |db: Option<&Path>| {
        let mut env = vec![
            ("PATH", std::env::var("PATH").unwrap_or_default()),
            ("HOME", path_str(bed.home.root())),
            ("CODEX_CLI_PATH", path_str(&bed.codex)),
            ("CODEX_HOME", path_str(bed.home.path())),
            ("APPROVAL_TIMEOUT_MS", "2000".into()),
            ("MAX_SESSIONS", "1".into()),
            ("EVENT_BUFFER_SIZE", "37".into()),
            ("LOG_LEVEL", "debug".into()),
            ("CODEX_RELAY_DATA_DIR", path_str(&data)),
            ("CODEX_RELAY_LISTEN", "127.0.0.1:0".into()),
        ];
        if let Some(db) = db {
            env.push(("CODEX_RELAY_DB", path_str(db)));
        }
        env
    };

    // CODEX_RELAY_DB wins over the data directory.
    let relay = HttpRelay::start_with_env(&[], &base_env(Some(&db))).await;
    assert!(db.is_file(), "the store is where CODEX_RELAY_DB says");
    assert!(
        !data.join("relay.db").exists(),
        "with CODEX_RELAY_DB the data directory is not used"
    );
    drop(relay);

    let relay = HttpRelay::start_with_env(&[], &base_env(None)).await;
    // CODEX_RELAY_LISTEN: port 0 means any free port, on loopback.
    assert!(relay.url.starts_with("http://127.0.0.1:"), "{}", relay.url);
    assert!(!relay.url.contains(":7878/"), "{}", relay.url);
    assert!(data.join("relay.db").is_file(), "CODEX_RELAY_DATA_DIR");
    let settings = settings_line(&relay.log_text());
    for expected in [
        format!("codex={}", bed.codex.display()),
        format!("codex_home=Some({:?})", bed.home.path()),
        format!("store={}", data.join("relay.db").display()),
        "approval_timeout_ms=2000".into(),
        "max_sessions=1".into(),
        "event_buffer=37".into(),
    ] {
        assert!(settings.contains(&expected), "{expected} in {settings}");
    }

    let mut d = Driver::spawn(Sdk::Node).await;
    d.connect(Transport::Http, &[], &relay.url).await;
    let a = d
        .ok(
            "codex_start",
            json!({"prompt": "KNOB-A: touch it", "workingDirectory": ws,
                   "approvalPolicy": "untrusted", "sandbox": "workspace-write"}),
        )
        .await;
    let a = a["sessionId"].as_str().unwrap().to_owned();
    // MAX_SESSIONS=1: a second session is refused.
    let refused = d
        .call(
            "codex_start",
            json!({"prompt": "KNOB-NONE", "workingDirectory": ws}),
        )
        .await;
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(
        refused["text"].as_str().unwrap().contains("MAX_SESSIONS"),
        "{refused}"
    );
    // APPROVAL_TIMEOUT_MS=2000: nobody answers, so it is declined at 2 s, not before and not
    // long after.
    let (waiting, _) = d
        .status_until(&a, TURN, |s| !s["pendingQuestion"].is_null())
        .await;
    let pq = &waiting["pendingQuestion"];
    let (done, events) = d.status_until(&a, TURN, |s| s["status"] == "done").await;
    assert_eq!(done["result"], "went on without it", "{done}");
    assert!(!ws.join("knob.txt").exists());
    let opened = events
        .iter()
        .find(|e| e["ev"]["t"] == "request-opened")
        .expect("request-opened");
    let resolved = events
        .iter()
        .find(|e| e["ev"]["t"] == "request-resolved")
        .expect("request-resolved");
    assert_eq!(resolved["ev"]["by"], "timeout", "{resolved}");
    let request = &opened["ev"]["request"];
    assert_eq!(
        request["deadline"].as_i64().unwrap() - request["createdAt"].as_i64().unwrap(),
        2000,
        "{request}"
    );
    assert_eq!(
        pq["expiresAt"],
        codex_relay_mcp::view::iso8601(request["deadline"].as_i64().unwrap()),
        "{pq}"
    );
    let waited = resolved["time"].as_i64().unwrap() - opened["time"].as_i64().unwrap();
    assert!(
        (2000..3000).contains(&waited),
        "declined {waited} ms after it was asked"
    );
    // CODEX_HOME and CODEX_CLI_PATH: that Codex ran, and kept its session files there.
    assert!(
        bed.home.path().join("sessions").is_dir(),
        "Codex wrote its sessions into CODEX_HOME"
    );
    // LOG_LEVEL=debug: debug lines are logged.
    assert!(
        plain(&relay.log_text()).contains("DEBUG"),
        "LOG_LEVEL=debug logs debug lines"
    );
    d.close().await;
    drop(relay);
    bed.assert_no_codex_left().await;
}

/// Starts `codex-relay serve` with only `env`; returns the child and its stderr once it
/// listens or fails, whichever it does first (later lines are echoed, not kept).
async fn serve_until_ready(env: &[(&str, String)]) -> (tokio::process::Child, Vec<String>) {
    let mut cmd = tokio::process::Command::new(RELAY);
    cmd.arg("serve").env_clear();
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            eprintln!("[relay] {line}");
            seen.push(plain(&line));
            // The banner ends with the MCP snippet (or the --no-auth warning).
            if line.contains("MCP over HTTP")
                || line.contains("WARNING: --no-auth")
                || line.starts_with("error:")
            {
                break;
            }
        }
    })
    .await
    .expect("serve listens or fails within 30 s");
    // Keep reading, so that what it writes later never meets a closed pipe.
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            eprintln!("[relay] {line}");
        }
    });
    (child, seen)
}

async fn stop(mut child: tokio::process::Child) {
    if let Some(pid) = child.id() {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    }
    let _ = tokio::time::timeout(Duration::from_secs(10), child.wait()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_nothing_set_the_documented_defaults_apply() {
    let bed = Bed::start(NEWEST).await;
    bed.model.route("KNOB-D", [Reply::text("defaults work")]);
    // HOME is the test's directory: ~/.codex is this test's CODEX_HOME, and `codex` is on PATH.
    let home = bed.home.root();
    std::os::unix::fs::symlink(bed.home.path(), home.join(".codex")).unwrap();
    let path = format!(
        "{}:{}",
        bed.codex.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let env = vec![("PATH", path), ("HOME", path_str(home))];

    let (child, seen) = serve_until_ready(&env).await;
    let text = seen.join("\n");
    // --listen: 127.0.0.1:7878 (another process may hold the port: then the error names it).
    assert!(text.contains("127.0.0.1:7878"), "{text}");
    // --data-dir and --db: relay.db in ~/.local/share/codex-relay.
    assert!(
        home.join(".local/share/codex-relay/relay.db").is_file(),
        "the default store"
    );
    // --log-level: warn, so no info lines.
    assert!(
        !text.contains("INFO") && !text.contains("DEBUG"),
        "default log level is warn: {text}"
    );
    if text.contains("MCP at ") {
        // The token: made now, shown once, only its hash kept in the data directory.
        let token = seen
            .iter()
            .find(|l| l.contains("API token (shown only now"))
            .and_then(|l| l.split_whitespace().last())
            .unwrap_or_else(|| panic!("a made token in the banner: {text}"))
            .to_owned();
        let kept =
            std::fs::read_to_string(home.join(".local/share/codex-relay/serve-token.sha256"))
                .expect("the token's hash in the data directory");
        assert!(kept.starts_with("sha256:") && !kept.contains(&token));
        assert!(
            text.contains("/login?once="),
            "a one-time login link: {text}"
        );
        // The defaults for the Codex binary (on PATH) and CODEX_HOME (~/.codex) run a turn.
        let mut d = Driver::spawn(Sdk::Node).await;
        d.connect_http_with_token("http://127.0.0.1:7878/mcp", &token)
            .await;
        let s = d
            .ok(
                "codex_start",
                json!({"prompt": "KNOB-D: hi", "workingDirectory": bed.home.workspace(),
                       "approvalPolicy": "never", "sandbox": "read-only"}),
            )
            .await;
        let s = s["sessionId"].as_str().unwrap().to_owned();
        let (done, _) = d.status_until(&s, TURN, |s| s["status"] == "done").await;
        assert_eq!(done["result"], "defaults work", "{done}");
        d.close().await;
    } else {
        codex_relay_testkit::skip::skip(
            "port 7878 is taken on this machine: the turn with the default Codex and CODEX_HOME was not run",
        );
    }
    stop(child).await;

    // The numbers, as the relay reports them at info level.
    let mut env = env.clone();
    env.push(("LOG_LEVEL", "info".into()));
    let (child, seen) = serve_until_ready(&env).await;
    let settings = settings_line(&seen.join("\n"));
    for expected in [
        format!("codex={}", bed.codex.display()),
        "codex_home=None".into(),
        format!(
            "store={}",
            home.join(".local/share/codex-relay/relay.db").display()
        ),
        "approval_timeout_ms=300000".into(),
        "max_sessions=32".into(),
        "event_buffer=1000".into(),
    ] {
        assert!(settings.contains(&expected), "{expected} in {settings}");
    }
    stop(child).await;
}
