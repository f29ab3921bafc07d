//! Every row of the README's settings table, on `codex-relay serve`: each setting that has an
//! environment variable is set through it here and takes effect (seen in the `engine settings`
//! log line, or in what the relay does); with nothing set, the documented defaults apply. The
//! cluster rows need a Postgres store: they are `cluster_knobs.rs`; rules, notifications and
//! the login refresh are `rules_notify_knobs.rs`.
//!
//! Where each row is checked (a flag without a variable is checked through the flag):
//!
//! | row | here (from the variable) | also |
//! |---|---|---|
//! | `--codex` / `CODEX_CLI_PATH` | that Codex runs; default `codex` on PATH | every test passes `--codex` |
//! | `--codex-home` / `CODEX_HOME` | Codex keeps its sessions there; default `~/.codex` | |
//! | `--approval-timeout-ms` | declined at 2 s, both sides; default 300000 | |
//! | `--max-sessions` | the second session is refused; default 32 | `mcp_options.rs` |
//! | `--sessions-per-codex` | settings line; default 25 | pooling itself: core's `pool.rs` |
//! | `--event-buffer` | settings line; default 1000 | |
//! | `--codex-crash-limit`, `--codex-crash-window-ms` | the crash loop's count and window, and a start again once the window passed; defaults 5 and 60 s | `codex_faults.rs` (the limit) |
//! | `--api-key-env` | settings line, the key never printed | `fronts_auth.rs` (the flag: the model gets the key) |
//! | `--chatgpt-tokens` | settings line, the tokens never printed | `fronts_auth.rs` (the flag: read again on a 401) |
//! | `--log-level` | debug lines at `debug`; default `warn` | |
//! | `--data-dir`, `--db` | where the store is; defaults `~/.local/share/codex-relay/relay.db` | |
//! | `--instance-id`, `--advertise-url`, `--lease-ms`, `--no-cluster` | | `cluster_knobs.rs` (the variables and defaults); `cluster.rs` uses `--instance-id` and `--lease-ms` as flags |
//! | `--login-refresh`, `--rules`, `--notify` | | `rules_notify_knobs.rs` (the variables and defaults); `http_rules.rs`, `http_answer_links.rs` use `--rules` and `--notify`; core's `login.rs` the refresher itself |
//! | `--max-load` | | `cluster_knobs.rs` (the second session starts on the other instance; the default, no limit, is not checked) |
//! | `--listen` | port 0 on loopback; default `127.0.0.1:7878` | |
//! | `CODEX_RELAY_TOKEN` | no token: 401, the token: 200; default: made, shown once, hash kept | `secure_by_default.rs` (too short, never `--token`) |
//! | `--token-file` | the file's token works, the other does not | `secure_by_default.rs` (the flag) |
//! | `--no-auth` (no variable) | | `http_security.rs`, `secure_by_default.rs` |
//! | `--max-connections` | at the cap the longest-idle connection is closed | `slowloris.rs` (the default 1024) |
//! | `--header-timeout-ms` | half-sent headers are cut at the limit, not at the default 10 s | `slowloris.rs` (the flag) |
//! | `--max-streams`, `--max-streams-per-caller` | 429 past a caller's share, 503 past the total | `secure_by_default.rs` (the flags) |
//! | `--trusted-proxy` (no variable) | its `X-Forwarded-Proto: https` makes the login cookie `Secure`; not believed without it | |
//! | `--allow-cwd`, `--max-sandbox`, `--max-approval-policy`, `--allow-config-overrides` | settings line and a refusal each | `start_policy.rs` (the flags on every front; strict beyond loopback) |
//! | `--allow-host` (no variable) | | `http_security.rs` |
//! | `--cors-origin` (no variable) | | `http_security.rs`, `secure_by_default.rs` |
//! | `--max-body-bytes` / `CODEX_RELAY_MAX_BODY` | a larger body gets 413 | `secure_by_default.rs` (the flag, chunked), `http_security.rs` (the default) |

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::{Bed, Driver, GARBAGE, HttpRelay, RELAY, Sdk, Transport, fake_codex};
use crate::http_support::{self, Client};
use codex_relay_testkit::{NEWEST, RELAY_TEST_TOKEN, Reply};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

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
    let tokens = bed.home.root().join("chatgpt-tokens.json");
    std::fs::write(
        &tokens,
        json!({"accessToken": "knob-access-secret", "chatgptAccountId": "knob-account"})
            .to_string(),
    )
    .unwrap();
    let base_env = |db: Option<&Path>| {
        let mut env = vec![
            ("PATH", std::env::var("PATH").unwrap_or_default()),
            ("HOME", path_str(bed.home.root())),
            ("CODEX_CLI_PATH", path_str(&bed.codex)),
            ("CODEX_HOME", path_str(bed.home.path())),
            ("APPROVAL_TIMEOUT_MS", "10000".into()),
            ("MAX_SESSIONS", "1".into()),
            ("EVENT_BUFFER_SIZE", "37".into()),
            ("LOG_LEVEL", "debug".into()),
            ("CODEX_RELAY_DATA_DIR", path_str(&data)),
            ("CODEX_RELAY_LISTEN", "127.0.0.1:0".into()),
            ("CODEX_RELAY_TOKEN", RELAY_TEST_TOKEN.into()),
            ("SESSIONS_PER_CODEX", "3".into()),
            ("CODEX_RELAY_CODEX_MAX_RSS", "3GiB".into()),
            ("CODEX_RELAY_CODEX_MAX_TURNS", "40".into()),
            ("CODEX_RELAY_CODEX_MAX_AGE", "12h".into()),
            ("CODEX_RELAY_CODEX_OVER_LIMIT", "interrupt".into()),
        ];
        if let Some(db) = db {
            env.push(("CODEX_RELAY_DB", path_str(db)));
            // The credentials variables exclude each other: the tokens file on this start,
            // the API key on the next.
            env.push(("CODEX_RELAY_CHATGPT_TOKENS", path_str(&tokens)));
        } else {
            env.push(("CODEX_RELAY_API_KEY_ENV", "KNOB_API_KEY".into()));
            env.push(("KNOB_API_KEY", "sk-knob-secret-0123456789".into()));
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
    // CODEX_RELAY_CHATGPT_TOKENS: where the credentials come from, never what they are.
    let settings = settings_line(&relay.log_text());
    let from_file = format!(
        "credentials=ChatGPT tokens from {} (read again when Codex asks for fresh ones)",
        tokens.display()
    );
    assert!(settings.contains(&from_file), "{from_file} in {settings}");
    assert!(!relay.log_text().contains("knob-access-secret"));
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
        "approval_timeout_ms=10000".into(),
        "max_sessions=1".into(),
        "event_buffer=37".into(),
        "sessions_per_codex=3".into(),
        "codex_max_rss=Some(3221225472)".into(),
        "codex_max_turns=Some(40)".into(),
        "codex_max_age=Some(43200s)".into(),
        "codex_over_limit=Interrupt".into(),
        "credentials=an API key from $KNOB_API_KEY".into(),
    ] {
        assert!(settings.contains(&expected), "{expected} in {settings}");
    }
    // CODEX_RELAY_TOKEN: the token every request carries.
    let r = Client::anonymous(&relay.url).get("/api/sessions").await;
    assert_eq!(r.status, 401, "{}", r.text());
    let r = Client::new(&relay.url).get("/api/sessions").await;
    assert_eq!(r.status, 200, "{}", r.text());
    // No --trusted-proxy: a forwarded `https` is not believed (see the HTTP settings below).
    let cookie = login_cookie(&relay.url, RELAY_TEST_TOKEN, true).await;
    assert!(
        cookie.starts_with("codex_relay_login=") && !cookie.contains("Secure"),
        "{cookie}"
    );

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
    // APPROVAL_TIMEOUT_MS=10000: nobody answers, so it is declined by the timeout at its
    // deadline, not before. (Ten seconds: room to see it waiting on a loaded machine.)
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
    let deadline = request["deadline"].as_i64().unwrap();
    assert_eq!(
        deadline - request["createdAt"].as_i64().unwrap(),
        10_000,
        "{request}"
    );
    assert_eq!(
        pq["expiresAt"],
        codex_relay_mcp::view::iso8601(deadline),
        "{pq}"
    );
    // The deadline task runs on the monotonic clock, the times shown on the wall clock: a few
    // milliseconds of slack for reading the two at slightly different moments.
    let declined_at = resolved["time"].as_i64().unwrap();
    assert!(
        declined_at >= deadline - 10,
        "declined {} ms before its deadline",
        deadline - declined_at
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
    assert!(
        !relay.log_text().contains("sk-knob-secret"),
        "the API key is never printed"
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
    let echo = codex_relay_testkit::echo::Echo::new("relay");
    let mut seen = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            echo.line(&line);
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
            echo.line(&line);
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
        "sessions_per_codex=25".into(),
        "codex_max_rss=None".into(),
        "codex_over_limit=Wait".into(),
        "credentials=none".into(),
        "start_policy=any (no limits)".into(),
    ] {
        assert!(settings.contains(&expected), "{expected} in {settings}");
    }
    stop(child).await;
}

/// Logs a browser in with `token` through the login form, as if behind a proxy that says the
/// browser spoke HTTPS when `forwarded_https`; returns the whole `Set-Cookie` header.
async fn login_cookie(url: &str, token: &str, forwarded_https: bool) -> String {
    let mut headers = vec![
        ("Content-Type", "application/x-www-form-urlencoded"),
        ("Sec-Fetch-Site", "same-origin"),
    ];
    if forwarded_https {
        headers.push(("X-Forwarded-Proto", "https"));
    }
    let r = Client::anonymous(url)
        .send(
            "POST",
            "/login",
            &headers,
            format!("token={token}&next=/").as_bytes(),
        )
        .await;
    assert_eq!(r.status, 303, "login: {}", r.text());
    r.header("set-cookie").expect("a login cookie").to_owned()
}

/// Whether the relay closed `conn` within `within` (end of stream or reset), reading nothing.
async fn closed_within(conn: &mut TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 256];
    loop {
        match tokio::time::timeout(within, conn.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0) | Err(_)) => return true,
            // A response (408, 503) before the close: keep reading until it closes.
            Ok(Ok(_)) => continue,
        }
    }
}

/// The HTTP front's settings and the start policy, each from its environment variable (and
/// `--trusted-proxy`, which has none): the token file, the connection cap, the header
/// timeout, the stream caps, the body limit, a trusted proxy, and the four start limits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_http_and_policy_setting_from_the_environment_takes_effect() {
    let bed = Bed::start(NEWEST).await;
    let ws = bed.home.workspace().to_path_buf();
    let token_file = bed.home.root().join("token");
    let file_token = "knob-token-from-a-file-0123456789";
    std::fs::write(&token_file, format!("{file_token}\n")).unwrap();
    let env = vec![
        ("PATH", std::env::var("PATH").unwrap_or_default()),
        ("HOME", path_str(bed.home.root())),
        ("CODEX_CLI_PATH", path_str(&bed.codex)),
        ("CODEX_HOME", path_str(bed.home.path())),
        (
            "CODEX_RELAY_DATA_DIR",
            path_str(&bed.home.root().join("data")),
        ),
        ("CODEX_RELAY_LISTEN", "127.0.0.1:0".into()),
        ("LOG_LEVEL", "info".into()),
        // Empty is not set: the token comes from the file only.
        ("CODEX_RELAY_TOKEN", String::new()),
        ("CODEX_RELAY_TOKEN_FILE", path_str(&token_file)),
        ("CODEX_RELAY_MAX_CONNECTIONS", "6".into()),
        ("CODEX_RELAY_HEADER_TIMEOUT_MS", "6000".into()),
        ("CODEX_RELAY_MAX_STREAMS", "2".into()),
        ("CODEX_RELAY_MAX_STREAMS_PER_CALLER", "1".into()),
        ("CODEX_RELAY_MAX_BODY", "4096".into()),
        ("CODEX_RELAY_ALLOW_CWD", path_str(&ws)),
        ("CODEX_RELAY_MAX_SANDBOX", "read-only".into()),
        ("CODEX_RELAY_MAX_APPROVAL_POLICY", "untrusted".into()),
        ("CODEX_RELAY_ALLOW_CONFIG_OVERRIDES", "no".into()),
    ];
    let relay = HttpRelay::start_with_env(&["--trusted-proxy", "127.0.0.1"], &env).await;
    let addr = relay
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();

    // CODEX_RELAY_MAX_CONNECTIONS=6: the seventh connection closes the longest-idle one (the
    // first, idle longest by far), well before the header timeout; the others stay open.
    let mut conns = Vec::new();
    for i in 0..7 {
        conns.push(TcpStream::connect(&addr).await.unwrap());
        if i == 0 || i == 5 {
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
    assert!(
        closed_within(&mut conns[0], Duration::from_secs(3)).await,
        "the longest-idle connection made room"
    );
    for (i, conn) in conns.iter_mut().enumerate().skip(1) {
        assert!(
            !closed_within(conn, Duration::from_millis(100)).await,
            "connection {i} stays open"
        );
    }
    drop(conns);

    // CODEX_RELAY_HEADER_TIMEOUT_MS=6000: headers that never end are cut after 6 s, not 10 s.
    let mut slow = TcpStream::connect(&addr).await.unwrap();
    let started = Instant::now();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    assert!(closed_within(&mut slow, Duration::from_secs(20)).await);
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(5500) && took < Duration::from_millis(9500),
        "half-sent headers were cut after {took:?}"
    );

    // CODEX_RELAY_TOKEN_FILE: the file's first line is the token; no other is.
    let bearer =
        Client::anonymous(&relay.url).with_header("Authorization", &format!("Bearer {file_token}"));
    let r = bearer.get("/api/sessions").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = Client::new(&relay.url).get("/api/sessions").await;
    assert_eq!(r.status, 401, "the tests' usual token is not this relay's");

    // CODEX_RELAY_MAX_BODY=4096: a larger body is refused before it is read.
    let big = json!({"prompt": "x".repeat(8192), "cwd": ws});
    let r = bearer.post("/api/sessions", &big).await;
    assert_eq!(r.status, 413, "{}", r.text());

    // The start policy: in the settings line, and each limit refused.
    let settings = settings_line(&relay.log_text());
    let policy = format!(
        "start_policy=cwd under {}; sandbox up to ReadOnly; approval policy up to untrusted; config overrides refused",
        ws.display()
    );
    assert!(settings.contains(&policy), "{policy} in {settings}");
    for (body, says) in [
        (json!({"prompt": "p", "cwd": bed.home.root()}), "outside"),
        (
            json!({"prompt": "p", "cwd": ws, "sandbox": "workspace-write"}),
            "workspace-write",
        ),
        (
            json!({"prompt": "p", "cwd": ws, "sandbox": "read-only", "approvalPolicy": "on-request"}),
            "on-request",
        ),
        (
            json!({"prompt": "p", "cwd": ws, "sandbox": "read-only", "config": {"model_reasoning_effort": "low"}}),
            "config overrides",
        ),
    ] {
        let r = bearer.post("/api/sessions", &body).await;
        assert_eq!(r.status, 403, "{body}: {}", r.text());
        assert_eq!(r.json()["error"]["code"], "forbidden_option", "{body}");
        assert!(r.text().contains(says), "{body}: {}", r.text());
    }

    // --trusted-proxy 127.0.0.1: its X-Forwarded-Proto is believed, so the cookie is Secure.
    let cookie = login_cookie(&relay.url, file_token, true).await;
    assert!(
        cookie.starts_with("__Host-codex_relay_login=") && cookie.contains("; Secure"),
        "{cookie}"
    );

    // CODEX_RELAY_MAX_STREAMS_PER_CALLER=1 and CODEX_RELAY_MAX_STREAMS=2.
    let _a = bearer.stream("/api/stream", &[]).await;
    let (status, _) = bearer.try_stream("/api/stream", &[]).await;
    assert_eq!(status, 429, "past the caller's share");
    let first = http_support::login(&relay.url, file_token).await;
    let _b = Client::anonymous(&relay.url)
        .with_header("Cookie", &first)
        .stream("/api/stream", &[])
        .await;
    let second = http_support::login(&relay.url, file_token).await;
    let (status, _) = Client::anonymous(&relay.url)
        .with_header("Cookie", &second)
        .try_stream("/api/stream", &[])
        .await;
    assert_eq!(status, 503, "past the total");
    relay.stop().await;
}

/// `/healthz`'s Codex detail after one more call that needs Codex.
async fn codex_health(c: &Client) -> String {
    c.get("/healthz").await.json()["codex"]["detail"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// CODEX_CRASH_LIMIT and CODEX_CRASH_WINDOW_MS, on a Codex whose every start fails: the loop
/// is declared after that many failures, says the window, and once the window has passed one
/// more start is tried; with neither set, 5 failures within 60 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_crash_settings_from_the_environment_take_effect() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = fake_codex(dir.path(), "codex-garbage", GARBAGE, 0o755);
    let serve = |name: &str, extra: &[(&'static str, &str)]| {
        let mut env = vec![
            ("PATH", std::env::var("PATH").unwrap_or_default()),
            ("HOME", path_str(dir.path())),
            ("CODEX_CLI_PATH", path_str(&garbage)),
            ("CODEX_HOME", path_str(dir.path())),
            ("CODEX_RELAY_DB", path_str(&dir.path().join(name))),
            ("CODEX_RELAY_LISTEN", "127.0.0.1:0".into()),
        ];
        env.extend(extra.iter().map(|(k, v)| (*k, v.to_string())));
        async move { HttpRelay::start_with_env(&[], &env).await }
    };
    let looped = |detail: &str, crashes: u32, window: &str| {
        detail.contains("stopped restarting")
            && detail.contains(&format!("{crashes} times within {window}"))
            && detail.contains("Welcome to not-codex!")
    };

    let set = serve(
        "set.db",
        &[
            ("CODEX_CRASH_LIMIT", "2"),
            ("CODEX_CRASH_WINDOW_MS", "3000"),
        ],
    )
    .await;
    let limit_only = serve("limit.db", &[("CODEX_CRASH_LIMIT", "2")]).await;
    let (c_set, c_limit) = (Client::new(&set.url), Client::new(&limit_only.url));
    // `serve` tries one start itself when it begins (is Codex logged in?), which may or may
    // not have failed yet: the loop is declared at the second failed start, so after one or
    // two calls, never more.
    for (c, window) in [(&c_set, "3s"), (&c_limit, "60s")] {
        let (calls, detail) = until_looped(c, 4).await;
        assert!(
            (1..=2).contains(&calls),
            "declared after {calls} calls: {detail}"
        );
        assert!(looped(&detail, 2, window), "{detail}");
    }
    // Past the 3 s window one more start is tried (and fails again); the default window of
    // 60 s still refuses.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let detail = codex_health(&c_set).await;
    assert!(
        detail.contains("Welcome to not-codex!") && !detail.contains("stopped restarting"),
        "a start again after the window: {detail}"
    );
    let detail = codex_health(&c_limit).await;
    assert!(looped(&detail, 2, "60s"), "{detail}");
    drop((set, limit_only));

    // Neither set: the loop is declared at the fifth failed start within 60 s (after four or
    // five calls, as above).
    let defaults = serve("defaults.db", &[]).await;
    let c = Client::new(&defaults.url);
    let (calls, detail) = until_looped(&c, 8).await;
    assert!(
        (4..=5).contains(&calls),
        "declared after {calls} calls: {detail}"
    );
    assert!(looped(&detail, 5, "60s"), "{detail}");
}

/// Calls `/healthz` until it says the crash loop was declared (at most `max` calls), every
/// answer before showing a failed start; returns how many calls it took and the detail then.
async fn until_looped(c: &Client, max: usize) -> (usize, String) {
    for calls in 1..=max {
        let detail = codex_health(c).await;
        if detail.contains("stopped restarting") {
            return (calls, detail);
        }
        assert!(
            detail.contains("Welcome to not-codex!"),
            "call {calls}: a failed start: {detail}"
        );
    }
    panic!("no crash loop declared after {max} calls")
}
