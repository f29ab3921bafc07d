//! Nothing a session runs releases the human's brake, whichever way its process reaches the
//! relay. Over the real Codex with the scripted model, the relay, Codex and the commands all
//! the ordinary test user, the relay's token in the workspace's `.env`: a model-run command
//! (`attack.py`) connects from another address of the machine, passes its socket around, hops
//! it along a fork chain, hides its descriptors, calls a second relay, kills its own Codex to
//! leave its tree, or watches for its own approval request in the background. Every attempt
//! gets 403 `forbidden_peer`; no session is created and no approval is answered by it.

use std::time::Duration;

use crate::brake_support::{
    Brake, TURN, assert_refused, host_port, own_address, owned_sessions, sandboxed_with_network,
    start_relay, unsandboxed,
};
use crate::http_support::Client;
use codex_relay_testkit::{Item, Reply};
use serde_json::json;

/// Runs one way of `attack.py` against `b`'s relay in a session with `settings`; asserts it was
/// refused and that it created no session; returns the reasons.
async fn refused(
    b: &Brake,
    way: &str,
    extra: &[String],
    settings: serde_json::Value,
) -> Vec<String> {
    let (host, port) = b.host_port();
    let mut args = vec![host, port.to_string()];
    args.extend_from_slice(extra);
    let before = b.sessions().await;
    b.run(
        &format!("MARK-{}", way.to_uppercase()),
        &Brake::command(way, &args),
        settings,
    )
    .await;
    let out = b.output(&format!("{way}.txt"));
    eprintln!("--- {way}\n{out}");
    let why = assert_refused(&b.attempts(&format!("{way}.txt")), way, &out);
    assert_eq!(
        b.sessions().await,
        before + 1,
        "only the attacker's own session was added"
    );
    assert!(
        b.relay.log_text().contains("connection refused"),
        "the relay logs the refusal"
    );
    why
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_connecting_from_another_address_of_the_machine_is_refused() {
    let Some(source) = own_address(false) else {
        return codex_relay_testkit::skip::skip(
            "this machine has no IPv4 address beyond loopback to connect from",
        );
    };
    let Some(b) = Brake::start("127.0.0.1:0", 60_000).await else {
        return;
    };
    let why = refused(
        &b,
        "source",
        &[source.to_string()],
        sandboxed_with_network(),
    )
    .await;
    assert!(why[0].contains("started by Codex"), "{why:?}");
    b.relay.stop().await;
    b.bed.assert_no_codex_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_over_ipv6() {
    let Some(source) = own_address(true) else {
        return codex_relay_testkit::skip::skip(
            "this machine has no IPv6 address beyond loopback to connect from",
        );
    };
    let Some(b) = Brake::start("[::1]:0", 60_000).await else {
        return;
    };
    let why = refused(
        &b,
        "source",
        &[source.to_string()],
        sandboxed_with_network(),
    )
    .await;
    assert!(why[0].contains("started by Codex"), "{why:?}");
    b.relay.stop().await;
    b.bed.assert_no_codex_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_in_flight_between_processes_is_refused() {
    let Some(b) = Brake::start("127.0.0.1:0", 60_000).await else {
        return;
    };
    let why = refused(&b, "flight", &[], sandboxed_with_network()).await;
    // Checked while in flight (nobody holds it), or, if the relay looked first, found in the
    // command's hands: refused either way.
    eprintln!("refused because: {why:?}");
    b.relay.stop().await;
    b.bed.assert_no_codex_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_hopping_along_a_fork_chain_is_refused() {
    let Some(b) = Brake::start("127.0.0.1:0", 60_000).await else {
        return;
    };
    let why = refused(&b, "chain", &[], sandboxed_with_network()).await;
    eprintln!("refused because: {why:?}");
    b.relay.stop().await;
    b.bed.assert_no_codex_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_whose_descriptors_cannot_be_read_is_refused() {
    let Some(b) = Brake::start("127.0.0.1:0", 60_000).await else {
        return;
    };
    let why = refused(&b, "nodump", &[], unsandboxed()).await;
    assert!(
        b.output("nodump.txt").contains("dumpable 0"),
        "the process made itself not dumpable"
    );
    assert!(
        why[0].contains("cannot be read") && why[0].contains("python3"),
        "the reason names the unreadable process: {why:?}"
    );
    b.relay.stop().await;
    b.bed.assert_no_codex_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_of_one_relay_cannot_drive_another_relay_on_the_machine() {
    let Some(b) = Brake::start("127.0.0.1:0", 60_000).await else {
        return;
    };
    // Another relay of the same user, serving without a token ("processes Codex started are
    // still refused").
    let other = start_relay(&b.bed, "127.0.0.1:0", true, 60_000, "other-data").await;
    let (host, port) = host_port(&other);
    let other_client = Client::anonymous(&other.url);
    let before = owned_sessions(&other_client).await;
    b.run(
        "MARK-OTHER",
        &Brake::command("plain", &[host, port.to_string()]),
        sandboxed_with_network(),
    )
    .await;
    let out = b.output("plain.txt");
    eprintln!("--- other relay\n{out}");
    let why = assert_refused(&b.attempts("plain.txt"), "plain", &out);
    assert!(
        why[0].contains("another codex-relay") || why[0].contains("of a Codex tree"),
        "{why:?}"
    );
    assert_eq!(
        owned_sessions(&other_client).await,
        before,
        "no session was created on the other relay"
    );
    other.stop().await;
    b.relay.stop().await;
    b.bed.assert_no_codex_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_that_kills_its_codex_stays_inside_and_is_stopped() {
    let Some(b) = Brake::start("127.0.0.1:0", 60_000).await else {
        return;
    };
    let other = start_relay(&b.bed, "127.0.0.1:0", true, 60_000, "other-data").await;
    let (host, port) = b.host_port();
    let (_, other_port) = host_port(&other);
    // A daemon with a cleared environment in a session of its own, then every `app-server`
    // among the command's parents killed: the daemon loses its Codex.
    let command = format!(
        "( setsid env -i PATH=\"$PATH\" python3 attack.py orphan {host} {port} '' {other_port} > orphan.txt 2>&1 < /dev/null & ); \
         sleep 1; p=$PPID; \
         while [ \"$p\" -gt 1 ]; do \
           up=$(sed 's/.*) [A-Z] \\([0-9]*\\).*/\\1/' /proc/$p/stat); \
           if tr '\\0' ' ' < /proc/$p/cmdline | grep -q app-server; then kill -9 $p; fi; \
           p=$up; \
         done"
    );
    b.bed
        .model
        .route("MARK-ORPHAN", [Reply::exec(&command, "call-orphan")]);
    b.bed.model.allow_unscripted();
    // Unsandboxed: in the workspace sandbox a command runs in a process namespace of its own
    // and sees no Codex to kill.
    let mut body = unsandboxed();
    body["prompt"] = json!("MARK-ORPHAN: go");
    body["cwd"] = json!(b.ws);
    let r = b.client.post("/api/sessions", &body).await;
    assert_eq!(r.status, 201, "{}", r.text());
    // The daemon reports once it has tried both relays.
    let deadline = tokio::time::Instant::now() + TURN;
    let mut wait = Duration::from_millis(100);
    while !b.output("orphan.txt").contains("END orphan") {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the daemon did not finish: {}",
            b.output("orphan.txt")
        );
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(Duration::from_secs(1));
    }
    let out = b.output("orphan.txt");
    eprintln!("--- orphan\n{out}");
    let attempts = b.attempts("orphan.txt");
    let here = assert_refused(&attempts, "orphan-here", &out);
    let there = assert_refused(&attempts, "orphan-other", &out);
    assert!(here[0].contains("this relay"), "{here:?}");
    assert!(there[0].contains("another codex-relay"), "{there:?}");
    // The relay stops what the dead Codex left, SIGTERM ignored or not.
    let pid: u32 = out
        .lines()
        .find_map(|l| l.strip_prefix("pid "))
        .and_then(|p| p.trim().parse().ok())
        .expect("the daemon's pid");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut wait = Duration::from_millis(100);
    while std::path::Path::new(&format!("/proc/{pid}")).exists() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the daemon {pid} is still running"
        );
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(Duration::from_secs(1));
    }
    other.stop().await;
    b.relay.stop().await;
    b.bed.assert_no_codex_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_cannot_answer_its_own_escalation() {
    let Some(b) = Brake::start("127.0.0.1:0", 300_000).await else {
        return;
    };
    let (host, port) = b.host_port();
    // From the machine's own address where it has one (as the attacker did).
    let source = own_address(false)
        .map(|ip| ip.to_string())
        .unwrap_or_default();
    let outside = b.bed.home.root().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    codex_relay_testkit::ordinary::Ordinary::get()
        .unwrap()
        .chown(&outside);
    let target = outside.join("x");
    // The model starts a watcher that keeps running once its command yields (Codex keeps it
    // as a background terminal), then asks to write outside the workspace.
    let start = Item::function_call(
        "exec_command",
        json!({"cmd": format!("python3 attack.py poll {host} {port} {source} > poll.txt 2>&1"),
            "yield_time_ms": 1000}),
        "call-poll",
    );
    let escalate = Item::function_call(
        "exec_command",
        json!({"cmd": format!("touch {}", target.display()),
            "sandbox_permissions": "require_escalated",
            "justification": "May I write outside the workspace?"}),
        "call-escalate",
    );
    b.bed.model.route(
        "MARK-ESCALATE",
        [
            Reply::items(vec![start]),
            Reply::items(vec![escalate]),
            Reply::text("understood"),
        ],
    );
    let mut body = sandboxed_with_network();
    body["approvalPolicy"] = json!("on-request");
    body["prompt"] = json!("MARK-ESCALATE: go");
    body["cwd"] = json!(b.ws);
    let r = b.client.post("/api/sessions", &body).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let mut s = b
        .client
        .stream(&format!("/api/sessions/{id}/stream"), &[])
        .await;
    let asked = s
        .until(TURN, |e| e.event == "permission_request")
        .await
        .last()
        .unwrap()
        .json();
    let request = asked["id"].as_str().unwrap().to_owned();
    // The id leaks to the watcher (as a notification might); it tries to answer it.
    std::fs::write(b.ws.join("leaked-id.txt"), &request).unwrap();
    let deadline = tokio::time::Instant::now() + TURN;
    let mut wait = Duration::from_millis(100);
    while b
        .attempts("poll.txt")
        .iter()
        .filter(|a| a.label == "respond")
        .count()
        < 3
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the watcher did not try: {}",
            b.output("poll.txt")
        );
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(Duration::from_secs(1));
    }
    // Still pending: only a person answers it, and this one declines.
    let pending = b.client.get("/api/codex/permission/pending").await.json();
    assert!(
        pending
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["id"] == request.as_str()),
        "{pending}"
    );
    let r = b
        .client
        .post(
            "/api/codex/permission/respond",
            &json!({"id": request, "action": "deny", "message": "not from a session"}),
        )
        .await;
    assert_eq!(
        r.status,
        200,
        "the person's answer is the one that counts: {}",
        r.text()
    );
    std::fs::write(b.ws.join("stop-poll"), "").unwrap();
    s.until(TURN, |e| {
        e.event == "envelope"
            && e.json()["ev"]["t"] == "status"
            && e.json()["ev"]["status"] == "idle"
    })
    .await;
    let out = b.output("poll.txt");
    eprintln!(
        "--- poll\n{}",
        out.lines().take(12).collect::<Vec<_>>().join("\n")
    );
    let attempts = b.attempts("poll.txt");
    assert_refused(&attempts, "pending", &out);
    assert_refused(&attempts, "respond", &out);
    assert!(
        !target.exists(),
        "nothing was written outside the workspace"
    );
    b.relay.stop().await;
    b.bed.assert_no_codex_left().await;
}

/// What SECURITY.md tells users about the workspace sandbox (Codex 0.169 on Linux): without
/// network access a command cannot connect to the relay at all, and with it or without, it
/// runs in a process namespace of its own where the relay cannot be signalled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workspace_sandbox_keeps_commands_off_the_relay_and_out_of_its_processes() {
    let Some(b) = Brake::start("127.0.0.1:0", 60_000).await else {
        return;
    };
    let (host, port) = b.host_port();
    let relay = b.relay.pid();
    for (marker, settings) in [
        (
            "MARK-NONET",
            serde_json::json!({"approvalPolicy": "never", "sandbox": "workspace-write"}),
        ),
        ("MARK-NET", sandboxed_with_network()),
    ] {
        let command = format!(
            "{}; if kill -0 {relay} 2>/dev/null; then echo 'RELAY visible'; else echo 'RELAY out of reach'; fi",
            Brake::command("plain", &[host.clone(), port.to_string()])
        );
        let before = b.sessions().await;
        b.run(
            marker,
            &format!("({command}) > {marker}.txt 2>&1"),
            settings,
        )
        .await;
        let out = b.output(&format!("{marker}.txt"));
        eprintln!("--- {marker}\n{out}");
        assert!(out.contains("RELAY out of reach"), "{marker}: {out}");
        let attempts = b.attempts("plain.txt");
        if marker == "MARK-NONET" {
            assert!(
                attempts.iter().all(|a| a.status == "error"),
                "without network access the connection itself fails: {out}"
            );
        } else {
            assert_refused(&attempts, "plain", &out);
        }
        assert_eq!(b.sessions().await, before + 1);
    }
    b.relay.stop().await;
    b.bed.assert_no_codex_left().await;
}

/// The same check lets the user's own browser in: Debian's Chromium, run as the same ordinary
/// user as the relay (its network process holds the sockets, and its descriptors are
/// readable), opens the one-time login link and the UI, its scripts calling the API.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_users_own_browser_is_let_in() {
    let chromium = match crate::browser::chromium() {
        Ok(c) => c,
        Err(why) => return codex_relay_testkit::skip::skip(format_args!("no browser: {why}")),
    };
    let Some(b) = Brake::start("127.0.0.1:0", 60_000).await else {
        return;
    };
    // The banner's lines after the address arrive a moment later.
    let mut link = None;
    for _ in 0..100 {
        link = b
            .relay
            .log_text()
            .lines()
            .find_map(|l| l.split("one-time login link): ").nth(1).map(str::to_owned));
        if link.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let link = link.expect("the banner's login link");
    let home = b.bed.home.root().join("user-home");
    // The login link (its cookie kept in the profile), then the API with that login.
    let ui = dump_dom(&chromium, &home, link.trim()).await;
    assert!(
        ui.contains("class=\"logout\""),
        "the UI loaded after the login link: {ui}"
    );
    let api = format!("{}/api/sessions", link.split("/login").next().unwrap());
    let sessions = dump_dom(&chromium, &home, &api).await;
    assert!(
        sessions.contains("\"sessions\""),
        "the API answered: {sessions}"
    );
    for dom in [&ui, &sessions] {
        assert!(!dom.contains("forbidden_peer"), "{dom}");
    }
    let log = b.relay.log_text();
    assert!(
        !log.contains("connection refused"),
        "the browser's connections were refused: {log}"
    );
    b.relay.stop().await;
    b.bed.assert_no_codex_left().await;
}

/// What Chromium, run as the ordinary user with its profile in `home`, shows for `url`.
async fn dump_dom(chromium: &std::path::Path, home: &std::path::Path, url: &str) -> String {
    let user = codex_relay_testkit::ordinary::Ordinary::get().unwrap();
    let mut cmd = tokio::process::Command::new(chromium);
    cmd.args([
        "--headless=new",
        "--disable-gpu",
        "--no-first-run",
        "--dump-dom",
    ])
    .arg(format!(
        "--user-data-dir={}",
        home.join("chromium").display()
    ))
    .arg(url)
    .env_clear()
    .env("PATH", "/usr/local/bin:/usr/bin:/bin")
    .stdin(std::process::Stdio::null())
    .kill_on_drop(true);
    user.apply(&mut cmd, home);
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .expect("chromium finishes within 120 s")
        .expect("run chromium");
    let dom = String::from_utf8_lossy(&out.stdout).into_owned();
    if dom.trim().is_empty() {
        panic!(
            "chromium showed nothing for {url}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    dom
}
