//! Attaching is safe against other users and against what the daemon's Codex runs, with the
//! relay run as the ordinary test user (root ignores file modes and reads every `/proc`
//! entry, so as root these claims prove nothing):
//! - `codex-relay doctor` and `serve --attach`, run as that user, refuse with the reason a
//!   socket another user owns (root's), a socket in a directory others can enter, and a
//!   socket that passes both but is served by another user's process (`SO_PEERCRED`).
//! - A real Codex daemon of that user, attached by `serve --attach`: a command its Codex runs
//!   for another client's thread looks everywhere for the relay's token (its environment,
//!   every `/proc/*/environ` and `cmdline`, the relay's data directory, a token leaked into
//!   the workspace) and tries each, and none, on the API and MCP: every attempt is refused
//!   (403: the relay knows the connection comes from the daemon's process tree). The same
//!   from a process that left the daemon's tree (double fork, cleared environment) finds no
//!   token and gets nothing but refusals.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::{Bed, HttpRelay, RELAY};
use crate::http_support::Client;
use codex_relay_testkit::daemon::{TestDaemon, TuiClient};
use codex_relay_testkit::ordinary::Ordinary;
use codex_relay_testkit::{Item, NEWEST, RELAY_TEST_TOKEN, Reply};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(120);

/// A socket bound by this test (root when the tests switch users) in `dir` (made with
/// `mode`, owned by `user`); given to `user` when `give`. The listener is kept open.
fn socket_in(
    dir: &Path,
    mode: u32,
    user: &Ordinary,
    give: bool,
) -> (PathBuf, std::os::unix::net::UnixListener) {
    std::fs::create_dir_all(dir).unwrap();
    user.chown(dir);
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).unwrap();
    let path = dir.join("app-server-control.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    if give {
        user.chown(&path);
    }
    (path, listener)
}

/// A Codex home whose daemon socket (the link `app-server-control/app-server-control.sock`,
/// as the daemon makes it) leads to `target`.
fn home_linking_to(root: &Path, name: &str, target: &Path, user: &Ordinary) -> PathBuf {
    let home = root.join(name);
    std::fs::create_dir_all(home.join("app-server-control")).unwrap();
    std::os::unix::fs::symlink(target, home.join(codex_relay_codex::daemon::SOCKET_IN_HOME))
        .unwrap();
    user.chown(&home);
    home
}

/// `codex-relay doctor` as the ordinary user, on `codex_home`: its `codex daemon:` line.
fn doctor_line(bed: &Bed, user: &Ordinary, codex_home: &Path) -> String {
    let mut cmd = Command::new(user.exe(Path::new(RELAY)));
    cmd.arg("doctor")
        .arg("--codex")
        .arg(&bed.codex)
        .arg("--codex-home")
        .arg(codex_home)
        .arg("--db")
        .arg(bed.home.root().join("doctor.db"))
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin");
    user.apply_std(&mut cmd, &bed.home.root().join("user-home"));
    let out = cmd.output().expect("run codex-relay doctor");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .find(|l| l.starts_with("codex daemon:"))
        .unwrap_or_else(|| panic!("doctor says nothing of the daemon: {text}"))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_users_socket_an_open_directory_and_another_users_server_are_refused() {
    let bed = match Bed::ordinary(NEWEST, "").await {
        Ok(bed) => bed,
        Err(why) => return codex_relay_testkit::skip::skip(why),
    };
    let user = Ordinary::get().unwrap();
    if !user.switches() {
        // Run as an ordinary user already: no other user to own a socket.
        return codex_relay_testkit::skip::skip(
            "attach_security: another user's socket needs the tests to run as root (to be that other user)",
        );
    }
    let root = bed.home.root().to_owned();
    let me = user.uid;
    let (theirs, _l1) = socket_in(&root.join("theirs"), 0o700, user, false);
    let (open, _l2) = socket_in(&root.join("open"), 0o755, user, true);
    let (served, _l3) = socket_in(&root.join("served-by-root"), 0o700, user, true);

    let line = doctor_line(&bed, user, &home_linking_to(&root, "h1", &theirs, user));
    assert!(
        line.contains("REFUSED")
            && line.contains(&format!("belongs to uid 0, not to this user (uid {me})")),
        "{line}"
    );
    let line = doctor_line(&bed, user, &home_linking_to(&root, "h2", &open, user));
    assert!(
        line.contains("REFUSED")
            && line.contains("has mode 0755: other users can enter it; it must be 0700"),
        "{line}"
    );
    let line = doctor_line(&bed, user, &home_linking_to(&root, "h3", &served, user));
    assert!(
        line.contains("REFUSED")
            && line.contains(&format!(
                "the process serving the socket runs as uid 0, not as this user (uid {me})"
            )),
        "{line}"
    );

    // `serve --attach` says the same in its log, and keeps serving.
    let theirs_arg = theirs.display().to_string();
    let mut args: Vec<String> = bed.args(60_000);
    args.extend(["--listen", "127.0.0.1:0", "--attach", &theirs_arg].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let relay = HttpRelay::start_ordinary(&bed, &args, &[("LOG_LEVEL", "info".to_owned())]).await;
    let deadline = Instant::now() + WAIT;
    while !relay.log_text().contains("refused to attach") {
        assert!(Instant::now() < deadline, "{}", relay.log_text());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        relay
            .log_text()
            .contains(&format!("belongs to uid 0, not to this user (uid {me})")),
        "{}",
        relay.log_text()
    );
    let c = Client::new(&relay.url);
    assert_eq!(c.get("/api/sessions").await.status, 200);
    relay.stop().await;
}

/// Waits until the relay shows `thread` attached and followed (it then knows the daemon's
/// process, whose tree it refuses).
async fn until_followed(c: &Client, thread: &str) -> Value {
    let deadline = Instant::now() + WAIT;
    let mut wait = Duration::from_millis(50);
    loop {
        let view = c.get(&format!("/api/sessions/{thread}")).await.json();
        if view["attached"]["state"] == "live" && view["attached"]["daemonPid"].is_u64() {
            return view;
        }
        assert!(Instant::now() < deadline, "never followed: {view}");
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(Duration::from_secs(1));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_the_daemons_codex_runs_cannot_use_the_relays_api() {
    let bed = match Bed::ordinary(NEWEST, "").await {
        Ok(bed) => bed,
        Err(why) => return codex_relay_testkit::skip::skip(why),
    };
    let user = Ordinary::get().unwrap();
    let ws = bed.home.workspace().to_path_buf();
    let daemon = TestDaemon::start_as(NEWEST, &bed.home, user).expect("the user's daemon");
    let socket = daemon.socket().display().to_string();
    let data_dir = bed.home.root().join("relay-data");
    let mut args = bed.args(300_000);
    args.extend(["--listen", "127.0.0.1:0", "--attach", &socket].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let relay = HttpRelay::start_ordinary(&bed, &args, &[("LOG_LEVEL", "info".to_owned())]).await;
    let c = Client::new(&relay.url);

    let url = relay.url.trim_end_matches("/mcp").to_owned();
    let script =
        crate::self_approval::attack_script(&url, "req_none", &data_dir.display().to_string());
    std::fs::write(ws.join("attack.sh"), &script).unwrap();
    std::fs::write(ws.join("leaked-token.txt"), format!("{RELAY_TEST_TOKEN}\n")).unwrap();
    user.chown(&ws);
    // Inside the daemon's tree with the leaked token; then, the leak gone, from a process
    // that left the tree (the relay no longer sees it as the daemon's: it must find nothing).
    let command = "bash ./attack.sh direct > direct.txt 2>&1; : > leaked-token.txt; \
        ( setsid env -i PATH=\"$PATH\" bash ./attack.sh escape > escape.txt 2>&1 < /dev/null & ); \
        for i in $(seq 1 300); do grep -q 'escape finished' escape.txt 2>/dev/null && break; sleep 0.1; done; \
        cat direct.txt escape.txt";
    bed.model
        .route("MARK-HELLO", [Reply::text("hello from the daemon")]);
    bed.model.route(
        "MARK-ATTACK",
        [
            // The daemon's thread offers `exec_command` (the TUI's tools), not `shell`.
            Reply::items(vec![Item::function_call(
                "exec_command",
                json!({"cmd": command, "yield_time_ms": 60_000}),
                "call-attack",
            )]),
            Reply::text("tried"),
        ],
    );
    let mut tui = TuiClient::connect(&daemon.socket(), "tui-stand-in").await;
    let started = tui
        .request(
            "thread/start",
            json!({"cwd": ws, "approvalPolicy": "never", "sandbox": "danger-full-access"}),
        )
        .await
        .expect("thread/start");
    let thread = started["thread"]["id"].as_str().unwrap().to_owned();
    let is = |m: &'static str| move |v: &Value| v["method"] == m;
    tui.request(
        "turn/start",
        json!({"threadId": thread, "input": [{"type": "text", "text": "MARK-HELLO: hi"}]}),
    )
    .await
    .expect("turn/start");
    tui.until("the first turn's end", is("turn/completed"))
        .await;
    let view = until_followed(&c, &thread).await;
    assert_eq!(
        view["attached"]["daemonPid"].as_u64(),
        daemon.pid().map(u64::from),
        "{view}"
    );
    let before = c.get("/api/sessions").await.json()["sessions"]
        .as_array()
        .unwrap()
        .len();
    tui.request(
        "turn/start",
        json!({"threadId": thread, "input": [{"type": "text", "text": "MARK-ATTACK: go"}]}),
    )
    .await
    .expect("turn/start");
    tui.until("the attack's end", is("turn/completed")).await;
    let output = bed
        .model
        .requests_with("MARK-ATTACK")
        .iter()
        .find_map(|r| r.tool_output("call-attack"));
    let direct = std::fs::read_to_string(ws.join("direct.txt")).unwrap_or_default();
    eprintln!("--- the command's output\n{output:?}");
    let escape = std::fs::read_to_string(ws.join("escape.txt")).unwrap_or_default();
    eprintln!("--- direct\n{direct}\n--- escape\n{escape}");
    let tries = |run: &str, out: &str| -> Vec<String> {
        assert!(
            out.contains(&format!("{run} finished")),
            "the {run} run ran: {out}"
        );
        out.lines()
            .filter(|l| l.starts_with(&format!("{run} ")) && !l.ends_with("finished"))
            .map(str::to_owned)
            .collect()
    };
    let inside = tries("direct", &direct);
    assert!(
        inside.len() >= 8,
        "with no token and the leaked one: {direct}"
    );
    for t in &inside {
        assert!(
            t.ends_with(" 403"),
            "from the daemon's tree every attempt is refused, the leaked token too: {t}\n{direct}"
        );
    }
    assert!(
        direct.contains(&format!("candidate:leak {RELAY_TEST_TOKEN}")),
        "the direct run read the leaked token: {direct}"
    );
    let outside = tries("escape", &escape);
    assert!(outside.len() >= 4, "{escape}");
    for t in &outside {
        assert!(
            t.ends_with(" 401") || t.ends_with(" 403"),
            "outside the tree, no token found: refused all the same: {t}\n{escape}"
        );
    }
    for out in [&direct, &escape] {
        for line in out.lines().filter(|l| l.contains(RELAY_TEST_TOKEN)) {
            assert!(
                line.starts_with("candidate:leak "),
                "the token was found elsewhere: {line}"
            );
        }
    }
    assert!(
        relay
            .log_text()
            .contains("the Codex daemon this relay is attached to"),
        "the relay says why it refused: {}",
        relay.log_text()
    );
    let after = c.get("/api/sessions").await.json()["sessions"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(after, before, "the attack created no session");
    relay.stop().await;
    daemon.stop();
}
