//! The web UI in a real browser: Debian's Chromium, driven by `playwright-core` from npm
//! (tests/browser/ui.mjs), through `codex-relay serve --demo` (the real Codex against the
//! built-in scripted model), on a desktop and on a phone-sized screen. Screenshots are kept
//! under `target/tmp/browser/<viewport>/`.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use codex_relay_testkit::clients::{node22, npm_ci};
use codex_relay_testkit::install::cache_root;
use codex_relay_testkit::skip::skip;
use codex_relay_testkit::{NEWEST, OLDEST, codex_bin};
use tokio::io::{AsyncBufReadExt, BufReader};

const RELAY: &str = env!("CARGO_BIN_EXE_codex-relay");
const CHROMIUM: &str = "/usr/bin/chromium";
/// The restart run's relays take this token from CODEX_RELAY_TOKEN (the page logs in once
/// with the form; the cookie carries on).
const TOKEN: &str = "browser-test-token-0123456789";

fn on_path(name: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
}

/// Debian's Chromium, installed with apt when it is missing and we may; `Err` says why not.
pub(crate) fn chromium() -> Result<PathBuf, String> {
    let path = PathBuf::from(CHROMIUM);
    if path.exists() {
        return Ok(path);
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || !on_path("apt-get") {
        return Err(format!(
            "{CHROMIUM} is missing and installing it needs root and apt-get (apt-get install chromium)"
        ));
    }
    std::fs::create_dir_all(cache_root()).expect("cache directory");
    let lock = File::create(cache_root().join("chromium.lock")).expect("chromium lock file");
    // SAFETY: a valid descriptor; the lock ends when `lock` is closed.
    unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) };
    if path.exists() {
        return Ok(path);
    }
    eprintln!("installing chromium from Debian's packages ...");
    for args in [
        &["update", "-qq"][..],
        &["install", "-y", "-qq", "chromium"][..],
    ] {
        let out = Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdin(Stdio::null())
            .output()
            .expect("run apt-get");
        assert!(
            out.status.success(),
            "apt-get {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(
        path.exists(),
        "apt-get installed chromium but {CHROMIUM} is missing"
    );
    Ok(path)
}

/// Chromium, playwright-core, Node 22 and the pinned Codex `version`; `None` (printed) when
/// the browser cannot be had here.
pub(crate) fn set_up(version: &str) -> Option<(PathBuf, PathBuf)> {
    let chromium = match chromium() {
        Ok(p) => p,
        Err(why) => {
            skip(format_args!("the browser test: {why}"));
            return None;
        }
    };
    if !on_path("npm") {
        skip("the browser test: npm is not on PATH (playwright-core comes from npm)");
        return None;
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("browser");
    npm_ci(&dir).expect("npm ci playwright-core");
    let node = node22().expect("node 22 from the npm registry");
    let codex = codex_bin(version).expect("the pinned Codex");
    eprintln!("chromium {}, codex {}", chromium.display(), codex.display());
    Some((node, codex))
}

/// What `serve --demo` prints when it listens.
#[derive(Default)]
struct Banner {
    url: Option<String>,
    workspace: Option<PathBuf>,
    link: Option<String>,
    token: Option<String>,
}

/// `codex-relay serve --demo` on a free loopback port, its stderr echoed.
struct DemoRelay {
    child: tokio::process::Child,
    url: String,
    workspace: PathBuf,
    /// The one-time login link the banner printed.
    login_link: String,
    /// The token, when serve made it now (shown once in the banner).
    fresh_token: Option<String>,
    /// The demo's data directory when the test gave none (removed at the end).
    _data: Option<tempfile::TempDir>,
}

impl DemoRelay {
    /// `listen` is `127.0.0.1:0` for a free port; `data_dir` keeps the demo across restarts;
    /// `token` makes the relay ask for one.
    async fn start(
        codex: &Path,
        listen: &str,
        data_dir: Option<&Path>,
        token: Option<&str>,
    ) -> DemoRelay {
        Self::start_with(codex, listen, data_dir, token, &[]).await
    }

    /// [`DemoRelay::start`] with more of serve's flags.
    async fn start_with(
        codex: &Path,
        listen: &str,
        data_dir: Option<&Path>,
        token: Option<&str>,
        flags: &[&str],
    ) -> DemoRelay {
        let mut cmd = tokio::process::Command::new(RELAY);
        cmd.args(["serve", "--demo", "--listen", listen, "--codex"])
            .arg(codex)
            .args(flags);
        // The demo is kept in the data directory: each test has its own.
        let own = data_dir.is_none().then(|| {
            tempfile::Builder::new()
                .prefix("browser-demo-")
                .tempdir_in(cache_root())
                .expect("a data directory")
        });
        let dir = data_dir
            .or(own.as_ref().map(|d| d.path()))
            .expect("one of them");
        cmd.arg("--data-dir").arg(dir);
        match token {
            Some(token) => cmd.env("CODEX_RELAY_TOKEN", token),
            None => cmd.env_remove("CODEX_RELAY_TOKEN"),
        };
        let mut child = cmd
            .env(
                "LOG_LEVEL",
                std::env::var("LOG_LEVEL").unwrap_or_else(|_| "info".into()),
            )
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn codex-relay serve --demo");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let echo = codex_relay_testkit::echo::Echo::new("relay");
        let banner = tokio::time::timeout(Duration::from_secs(60), async {
            let mut b = Banner::default();
            while let Some(line) = lines.next_line().await.unwrap() {
                echo.line(&line);
                if let Some(w) = line.split("sessions work in ").nth(1) {
                    b.workspace = Some(PathBuf::from(w.trim()));
                }
                if let Some(rest) = line.split("web UI and API at ").nth(1) {
                    b.url = rest.split_whitespace().next().map(str::to_owned);
                }
                if let Some(link) = line.split("one-time login link): ").nth(1) {
                    b.link = Some(link.trim().to_owned());
                }
                if line.contains("API token (shown only now") {
                    b.token = line.split_whitespace().last().map(str::to_owned);
                }
                // The banner's last line.
                if line.contains("MCP over HTTP") {
                    return b;
                }
            }
            panic!("codex-relay serve --demo exited before listening")
        })
        .await
        .expect("codex-relay serve --demo listens within 60 s");
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                echo.line(&line);
            }
        });
        DemoRelay {
            child,
            url: banner.url.expect("the banner names the address"),
            workspace: banner.workspace.expect("the demo names its workspace"),
            login_link: banner.link.expect("the banner has a login link"),
            fresh_token: banner.token,
            _data: own,
        }
    }

    /// SIGTERM, then the exit status.
    async fn stop(&mut self) -> std::process::ExitStatus {
        if let Some(pid) = self.child.id() {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(pid as i32, libc::SIGTERM) };
        }
        tokio::time::timeout(Duration::from_secs(20), self.child.wait())
            .await
            .expect("serve --demo stops within 20 s of SIGTERM")
            .expect("wait for serve")
    }
}

/// How a browser run logs in: the banner's one-time link (one click), or the token in the form.
#[derive(Clone)]
pub(crate) enum LogIn {
    Link(String),
    Token(String),
}

/// Runs the browser scenario for one viewport; returns its findings (one JSON line).
fn drive(node: &Path, url: &str, variant: &str, log_in: LogIn) -> serde_json::Value {
    drive_script(node, "ui.mjs", url, variant, log_in)
}

/// Runs `script` (in tests/browser) against `url`; returns its findings (one JSON line).
pub(crate) fn drive_script(
    node: &Path,
    script: &str,
    url: &str,
    variant: &str,
    log_in: LogIn,
) -> serde_json::Value {
    drive_script_with(node, script, url, variant, log_in, &[])
}

/// As [`drive_script`], with `env` added to the script's environment.
pub(crate) fn drive_script_with(
    node: &Path,
    script: &str,
    url: &str,
    variant: &str,
    log_in: LogIn,
    env: &[(&str, String)],
) -> serde_json::Value {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("browser");
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("browser")
        .join(variant);
    let _ = std::fs::remove_dir_all(&shots);
    let (key, value) = match log_in {
        LogIn::Link(l) => ("LOGIN_LINK", l),
        LogIn::Token(t) => ("RELAY_TOKEN", t),
    };
    let out = Command::new(node)
        .arg(dir.join(script))
        .arg(url)
        .arg(&shots)
        .arg(variant)
        .env("CHROMIUM", CHROMIUM)
        .env(key, value)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .current_dir(&dir)
        .stdin(Stdio::null())
        .output()
        .expect("run node ui.mjs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!(
        "[browser {variant}] {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("[browser {variant}] screenshots in {}", shots.display());
    let last = stdout.lines().last().unwrap_or_default();
    let findings: serde_json::Value = serde_json::from_str(last)
        .unwrap_or_else(|_| panic!("the {variant} run printed no findings: {stdout}"));
    assert!(
        out.status.success() && findings["ok"] == true,
        "the {variant} run failed: {findings}"
    );
    findings
}

/// A newcomer's first session in the UI, on a desktop and on a phone: start it, approve the
/// file change (its diff shown) and the command, reload while the turn waits (nothing lost,
/// nothing twice), see the output and the completed turn, follow up, find it in the list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_demo_session_in_the_browser_on_desktop_and_phone() {
    let Some((node, codex)) = set_up(NEWEST) else {
        return;
    };

    let mut relay = DemoRelay::start(&codex, "127.0.0.1:0", None, None).await;
    let url = relay.url.clone();
    let workspace = relay.workspace.clone();
    // The desktop opens the printed one-time link (one click); the phone, a second browser,
    // logs in with the token the banner showed.
    let token = relay
        .fresh_token
        .clone()
        .expect("a fresh demo shows its token");
    for (variant, log_in) in [
        ("desktop", LogIn::Link(relay.login_link.clone())),
        ("phone", LogIn::Token(token)),
    ] {
        let node = node.clone();
        let url = url.clone();
        let findings = tokio::task::spawn_blocking(move || drive(&node, &url, variant, log_in))
            .await
            .expect("the browser run");
        // The reload happened while the command waited: the history then had events in it.
        assert!(
            findings["reload"]["lastSeq"].as_u64() > Some(5),
            "{findings}"
        );
        assert!(
            findings["events"].as_u64() > findings["reload"]["lastSeq"].as_u64(),
            "{findings}"
        );
        // Options beyond the usual four are buttons of their own, as the API lists them.
        let extra = &findings["extraOptions"];
        assert!(extra["api"].is_array(), "{findings}");
        assert_eq!(extra["buttons"], extra["api"], "{findings}");
        // The demo's command comes with Codex's proposed prefix: its button warns before it
        // answers (the rule it writes runs matching commands unasked and unsandboxed).
        assert!(
            extra["api"]
                .as_array()
                .is_some_and(|a| a.iter().any(|o| o == "approve with codex rule")),
            "{findings}"
        );
        assert!(
            findings["codexRuleWarning"]
                .as_str()
                .is_some_and(|w| w.contains("outside the sandbox")),
            "{findings}"
        );
        eprintln!("[browser {variant}] extra options on the command card: {extra}");
    }
    assert!(
        workspace.join("hello.py").is_file(),
        "the approved patch wrote hello.py"
    );
    let status = relay.stop().await;
    assert!(status.success(), "serve --demo exited with {status}");
    assert!(
        workspace.join("hello.py").is_file(),
        "the demo is kept across restarts: {}",
        workspace.display()
    );
}

/// Runs the `restart` scenario: when the page asks, stops the relay and starts a new one at the
/// same address on the same data directory.
async fn drive_restart(node: &Path, codex: &Path, data_dir: &Path) -> serde_json::Value {
    use tokio::io::AsyncWriteExt;
    let mut relay = DemoRelay::start(codex, "127.0.0.1:0", Some(data_dir), Some(TOKEN)).await;
    let listen = relay
        .url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("browser");
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("browser")
        .join("restart");
    let _ = std::fs::remove_dir_all(&shots);
    let mut child = tokio::process::Command::new(node)
        .arg(dir.join("ui.mjs"))
        .arg(&relay.url)
        .arg(&shots)
        .arg("restart")
        .env("CHROMIUM", CHROMIUM)
        .env("RELAY_TOKEN", TOKEN)
        .current_dir(&dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("run node ui.mjs restart");
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut last = String::new();
    let run = async {
        while let Some(line) = out.next_line().await.unwrap() {
            eprintln!("[browser restart] {line}");
            if line == "restart-now" {
                let status = relay.stop().await;
                assert!(status.success(), "the first relay exited with {status}");
                relay = DemoRelay::start(codex, &listen, Some(data_dir), Some(TOKEN)).await;
                stdin.write_all(b"restarted\n").await.unwrap();
            }
            last = line;
        }
    };
    tokio::time::timeout(Duration::from_secs(300), run)
        .await
        .expect("the restart run ends within 300 s");
    let status = child.wait().await.expect("wait for node");
    eprintln!("[browser restart] screenshots in {}", shots.display());
    let findings: serde_json::Value = serde_json::from_str(&last)
        .unwrap_or_else(|_| panic!("the restart run printed no findings: {last}"));
    assert!(
        status.success() && findings["ok"] == true,
        "the restart run failed: {findings}"
    );
    let stopped = relay.stop().await;
    assert!(stopped.success(), "the second relay exited with {stopped}");
    findings
}

/// Behind a token: the page logs in through the form, then stays open across a relay restart
/// while a request waits: its stream reconnects (the cookie still valid) and resumes after the
/// last seq (the request declined on the way down, the turn's end), nothing lost or shown
/// twice; a follow-up then runs in the new relay on the same page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_open_page_survives_a_relay_restart() {
    let Some((node, codex)) = set_up(NEWEST) else {
        return;
    };
    // Not under /tmp: Codex refuses some helpers in temporary directories.
    let base = cache_root().join("test-homes");
    std::fs::create_dir_all(&base).unwrap();
    let data = tempfile::Builder::new()
        .prefix("browser-restart-")
        .tempdir_in(&base)
        .unwrap();
    let findings = drive_restart(&node, &codex, data.path()).await;
    assert!(
        findings["restart"]["after"].as_u64() > findings["restart"]["before"].as_u64(),
        "the relay's last events before the restart reached the page: {findings}"
    );
}

/// On Codex 0.98, which offers the model its plan tool: the plan shows with its first step in
/// progress and ends with every step done, kept in one place. The relay recycles a Codex
/// process after one turn (`--codex-max-turns 1`): once the turn is done, the page shows the
/// log's note that the process was replaced, and nothing else changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plan_on_codex_0_98_and_the_recycle_note() {
    let Some((node, codex)) = set_up(OLDEST) else {
        return;
    };
    let flags = ["--codex-max-turns", "1"];
    let mut relay = DemoRelay::start_with(&codex, "127.0.0.1:0", None, None, &flags).await;
    let url = relay.url.clone();
    let link = LogIn::Link(relay.login_link.clone());
    tokio::task::spawn_blocking(move || drive(&node, &url, "plan", link))
        .await
        .expect("the browser run");
    let status = relay.stop().await;
    assert!(status.success(), "serve --demo exited with {status}");
}

/// The UI as an installed app on a phone-sized screen (tests/browser/pwa.mjs): Chromium reports
/// nothing missing to install it; a push subscription made in the Notifications view gets a
/// Web Push at the push endpoint the script runs when a request opens (VAPID-signed,
/// RFC 8291-encrypted, decrypted there), which the service worker then shows; "Always allow…"
/// on the command's card saves a rule and approves, and the card says who answered. The
/// patch's card shows its delivery trail (accepted by the push service), and a test push from
/// the Notifications view shows its own. The cards
/// say what approving lets Codex do (the patch stays in the sandbox, the command under
/// `untrusted` may run outside it), and the rule is saved with "outside the sandbox" ticked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_app_installs_and_a_push_subscription_gets_a_push_when_a_request_opens() {
    let Some((node, codex)) = set_up(NEWEST) else {
        return;
    };
    let mut relay = DemoRelay::start(&codex, "127.0.0.1:0", None, None).await;
    let url = relay.url.clone();
    let link = LogIn::Link(relay.login_link.clone());
    let findings =
        tokio::task::spawn_blocking(move || drive_script(&node, "pwa.mjs", &url, "pwa", link))
            .await
            .expect("the browser run");
    assert_eq!(
        findings["notification"]["title"], "Codex asks to change files",
        "{findings}"
    );
    assert!(
        findings["answered"]
            .as_str()
            .is_some_and(|a| a.contains("by a person")),
        "{findings}"
    );
    let text = |k: &str| findings[k].as_str().unwrap_or_default().to_owned();
    assert_eq!(
        text("patchReach"),
        codex_relay_core::Reach::Sandboxed.text(),
        "{findings}"
    );
    assert_eq!(
        text("commandReach"),
        codex_relay_core::Reach::Outside.text(),
        "{findings}"
    );
    assert!(
        text("outsideHint").contains("if the sandbox blocks it")
            && text("ruleHint").contains("only if you tick"),
        "{findings}"
    );
    assert!(
        text("ruleWhen").contains("even outside the sandbox"),
        "{findings}"
    );
    // The request's card showed its delivery trail, and a test from Notifications its own.
    for key in ["trail", "testTrail"] {
        let steps: Vec<String> = findings[key]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        assert!(
            steps.iter().any(|s| s.contains("queued"))
                && steps
                    .iter()
                    .any(|s| s.contains("accepted by the push service") && s.contains("201")),
            "{key}: {findings}"
        );
    }
    let status = relay.stop().await;
    assert!(status.success(), "serve --demo exited with {status}");
}

/// A demo data directory of its own (not under /tmp: Codex refuses some helpers there).
fn demo_data(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(cache_root())
        .expect("a data directory")
}

/// `codex-relay run --demo PROMPT` kept in `data`: a finished run's session in its store.
async fn demo_run(codex: &Path, data: &Path, prompt: &str) {
    let out = tokio::process::Command::new(RELAY)
        .args(["run", "--demo", "--codex"])
        .arg(codex)
        .arg("--data-dir")
        .arg(data)
        .arg(prompt)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .expect("codex-relay run --demo");
    assert!(
        out.status.success(),
        "run --demo failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One variant of tests/browser/newcomer.mjs against `serve --demo` on `data` (a fresh one
/// when `None`), after the finished runs of `prompts`.
async fn newcomer_ui(variant: &'static str, prompts: &[&str]) -> Option<serde_json::Value> {
    let (node, codex) = set_up(NEWEST)?;
    let data = demo_data("browser-newcomer-");
    for prompt in prompts {
        demo_run(&codex, data.path(), prompt).await;
    }
    let mut relay = DemoRelay::start(&codex, "127.0.0.1:0", Some(data.path()), None).await;
    let url = relay.url.clone();
    let link = LogIn::Link(relay.login_link.clone());
    let findings = tokio::task::spawn_blocking(move || {
        drive_script(&node, "newcomer.mjs", &url, variant, link)
    })
    .await
    .expect("the browser run");
    let status = relay.stop().await;
    assert!(status.success(), "serve --demo exited with {status}");
    Some(findings)
}

/// A session page's thread operations, clicked: Model sets the next turns' model and effort,
/// Fork opens a new session whose log starts with where it came from and the copied turn, Roll
/// back drops that turn from the fork's history (one `rolled-back` event more, the log still
/// contiguous and shown seq for seq), and the source keeps its history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thread_operations_from_the_session_page() {
    let Some((node, codex)) = set_up(NEWEST) else {
        return;
    };
    let data = demo_data("browser-threads-");
    demo_run(&codex, data.path(), "a session to fork").await;
    let mut relay = DemoRelay::start(&codex, "127.0.0.1:0", Some(data.path()), None).await;
    let url = relay.url.clone();
    let link = LogIn::Link(relay.login_link.clone());
    let f = tokio::task::spawn_blocking(move || {
        drive_script(&node, "threads.mjs", &url, "threads", link)
    })
    .await
    .expect("the browser run");
    let status = relay.stop().await;
    assert!(status.success(), "serve --demo exited with {status}");
    let source_turns = f["sourceTurns"].as_array().expect("turns").clone();
    assert_eq!(source_turns.len(), 1, "{f}");
    assert_eq!(f["model"]["model"], "codex-relay-demo", "{f}");
    assert!(
        f["asked"][0]
            .as_str()
            .is_some_and(|q| q.contains("codex-relay-demo")),
        "the Model button offers the models Codex lists: {f}"
    );
    assert_eq!(f["model"]["effort"], "high", "{f}");
    assert_eq!(f["fork"]["turns"].as_array(), Some(&source_turns), "{f}");
    assert_eq!(
        f["fork"]["effort"], "high",
        "the fork keeps its source's settings: {f}"
    );
    assert_eq!(f["forkFirst"], "forked", "{f}");
    assert_eq!(f["afterRollback"], serde_json::json!([]), "{f}");
    // The log only grew: by the rolled-back event (and what Codex said of it).
    let new_kinds = f["newKinds"].as_array().expect("new kinds");
    assert_eq!(f["logGrew"].as_u64(), Some(new_kinds.len() as u64), "{f}");
    assert_eq!(
        new_kinds.iter().filter(|k| *k == "rolled-back").count(),
        1,
        "{f}"
    );
    assert_eq!(f["sourceAfter"].as_array(), Some(&source_turns), "{f}");
    assert_eq!(
        f["reviewTargets"],
        serde_json::json!([
            {"type": "uncommittedChanges"},
            {"type": "baseBranch", "branch": "main"},
            {"type": "commit", "sha": "abc123"},
            {"type": "custom", "instructions": "look for races"}
        ]),
        "{f}"
    );
}

/// "Enable push on this device" when the browser blocks notifications: the page says they are
/// blocked and where to allow them (the message used to be overwritten at once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_denied_says_so_and_how_to_allow_it() {
    newcomer_ui("push-denied", &[]).await;
}

/// On a phone every header link shows whole and none scrolls out of sight (Notifications was
/// a sliver, "New session" cut off).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_phone_header_shows_every_link_whole() {
    newcomer_ui("phone-header", &[]).await;
}

/// A view opens at its top: the Rules page after a session page scrolled to its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_view_opens_at_its_top() {
    newcomer_ui("scroll", &["a long session to scroll through"]).await;
}

/// Two finished `run --demo` sessions: listed as done (not idle), each with its own title in
/// the tab and the heading.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_runs_show_as_done_with_their_own_titles() {
    let Some(findings) = newcomer_ui("runs", &["first run", "second run"]).await else {
        return;
    };
    let titles = findings["titles"].to_string();
    assert!(
        titles.contains("first run") && titles.contains("second run"),
        "{findings}"
    );
}

/// No focus ring frames <main> after a navigation, by keyboard or mouse, though <main> takes
/// the focus (where a screen reader starts reading).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_focus_ring_frames_main_after_a_navigation() {
    newcomer_ui("focus", &[]).await;
}
