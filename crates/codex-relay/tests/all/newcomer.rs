//! A newcomer's first minutes, through the binary: an empty HOME, no `codex` on PATH, only the
//! pinned Codex the scripts install into the cache, and no login. Every command finds that
//! Codex and prints advice that runs; `run`, stdio MCP and `serve` say at once that Codex is
//! not logged in (and how to fix it) instead of retrying until a deadline; `--demo` on `run`
//! and `mcp` needs no account.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use codex_relay_testkit::skip::skip;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::common::{HttpRelay, RELAY};
use crate::http_support::Client;

/// A machine as a newcomer has it: an empty HOME, a PATH with `node` (the pinned Codex is a
/// Node script) and the system's directories but no `codex`, and the cache where the scripts
/// put the pinned Codex.
struct Newcomer {
    home: tempfile::TempDir,
    path: String,
    cache: PathBuf,
}

impl Newcomer {
    /// `None` (a loud skip) when the pinned Codex is not in the cache (CODEX_BIN overrides it).
    fn new() -> Option<Newcomer> {
        let codex =
            codex_relay_testkit::codex_bin(codex_relay_testkit::NEWEST).expect("pinned Codex");
        let cache = codex_relay_testkit::install::cache_root();
        let pinned = pinned_in(&cache);
        if !pinned.is_file() {
            skip(format_args!(
                "the newcomer tests: the pinned Codex is not in the cache ({} is used instead)",
                codex.display()
            ));
            return None;
        }
        // Not under /tmp: Codex refuses some helpers in temporary directories.
        let base = cache.join("test-homes");
        std::fs::create_dir_all(&base).unwrap();
        let home = tempfile::Builder::new()
            .prefix("newcomer-")
            .tempdir_in(&base)
            .unwrap();
        // `node` alone in a directory of its own, then the system's; none holds a `codex`.
        let bin = home.path().join("node-only");
        std::fs::create_dir_all(&bin).unwrap();
        let node = which("node").expect("node on PATH (the pinned Codex is a Node script)");
        std::os::unix::fs::symlink(node, bin.join("node")).unwrap();
        let path = format!("{}:/usr/bin:/bin", bin.display());
        for dir in std::env::split_paths(&path) {
            assert!(!dir.join("codex").exists(), "a codex in {}", dir.display());
        }
        Some(Newcomer { home, path, cache })
    }

    fn pinned(&self) -> PathBuf {
        pinned_in(&self.cache)
    }

    /// The environment: nothing inherited but what a login shell would have.
    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("HOME", self.home.path().display().to_string()),
            ("PATH", self.path.clone()),
            ("CODEX_RELAY_CACHE", self.cache.display().to_string()),
            // Info: the relay logs, so a log line in colour would be seen.
            ("LOG_LEVEL", "info".into()),
        ]
    }

    fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(RELAY);
        cmd.args(args)
            .env_clear()
            .envs(self.env())
            .current_dir(self.home.path())
            .stdin(Stdio::null())
            .kill_on_drop(true);
        cmd
    }

    async fn run(&self, args: &[&str]) -> Output {
        let out = tokio::time::timeout(Duration::from_secs(120), self.command(args).output())
            .await
            .unwrap_or_else(|_| panic!("codex-relay {args:?} ends within 120 s"))
            .expect("codex-relay starts");
        eprintln!(
            "codex-relay {args:?} → {:?}\nstdout:\n{}\nstderr:\n{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }
}

fn pinned_in(cache: &Path) -> PathBuf {
    cache
        .join("codex")
        .join(codex_relay_testkit::NEWEST)
        .join("node_modules")
        .join(".bin")
        .join("codex")
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The command quoted between backticks after `Log in with `.
fn login_advice(text: &str) -> String {
    text.split("Log in with `")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .unwrap_or_else(|| panic!("no login advice in: {text}"))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_finds_the_pinned_codex_and_its_login_advice_runs() {
    let Some(n) = Newcomer::new() else { return };
    let out = n.run(&["doctor"]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!(
            "codex binary:    {} (the pinned Codex",
            n.pinned().display()
        )),
        "{text}"
    );
    assert!(
        text.contains("login needed:    Codex is not logged in"),
        "{text}"
    );
    // A report: what is installed works, and the fix is named.
    assert_eq!(out.status.code(), Some(0), "{text}");
    // The advice is a command that works as printed: with `status` it asks the same Codex.
    let advice = login_advice(&text);
    assert!(
        advice.starts_with(&n.pinned().display().to_string()),
        "{advice}"
    );
    let status = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{advice} status"))
        .env_clear()
        .envs(n.env())
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&status.stdout),
        String::from_utf8_lossy(&status.stderr)
    );
    assert!(
        said.contains("Not logged in"),
        "`{advice} status` said: {said}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_any_codex_doctor_and_run_name_the_install_command() {
    let Some(mut n) = Newcomer::new() else { return };
    n.cache = n.home.path().join("empty-cache");
    let install = format!(
        "npm install -g @openai/codex@{}",
        codex_relay_testkit::NEWEST
    );
    let doctor = n.run(&["doctor"]).await;
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        text.contains("codex binary:    FAILED") && text.contains(&install),
        "{text}"
    );
    assert_eq!(doctor.status.code(), Some(1));
    let run = n.run(&["run", "hello"]).await;
    let text = String::from_utf8_lossy(&run.stderr);
    assert!(text.contains(&install), "{text}");
    assert_eq!(run.status.code(), Some(1), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_without_a_login_fails_at_once_saying_how_to_log_in() {
    let Some(n) = Newcomer::new() else { return };
    // A deadline far past the test's own bound: only an error before any turn ends it in time.
    let out = n.run(&["run", "--timeout", "10m", "hello"]).await;
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("Codex is not logged in"), "{text}");
    assert!(
        login_advice(&text).starts_with(&n.pinned().display().to_string()),
        "{text}"
    );
    assert_eq!(out.status.code(), Some(3), "a request error: {text}");
    // What `run` says (not its log lines, which list the engine's settings, budgets among
    // them): an error before any turn, not a deadline or budget that ran out.
    let said: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("codex-relay:"))
        .collect();
    assert!(
        !said.is_empty() && said.iter().all(|l| !l.contains("budget")),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_demo_needs_no_account_and_keeps_its_workspace() {
    let Some(n) = Newcomer::new() else { return };
    let out = n.run(&["run", "--demo", "show me"]).await;
    assert_eq!(out.status.code(), Some(0));
    let answer = String::from_utf8_lossy(&out.stdout);
    assert!(
        answer.contains("Hello from the codex-relay demo!"),
        "{answer}"
    );
    // Nobody can answer a question in `run`: the demo model asks none.
    assert!(!answer.contains("question"), "{answer}");
    let demo = n.home.path().join(".local/share/codex-relay/demo");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains(&format!(
            "keeps its sessions, token and login in {}",
            demo.display()
        )),
        "{said}"
    );
    assert!(demo.join("workspace/hello.py").is_file());
    // A second run finds the first one's session in the demo's own store.
    let session = said
        .split("codex-relay: session ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .expect("the run names its session")
        .to_owned();
    let again = n
        .run(&["run", "--demo", "--resume", &session, "what is there now?"])
        .await;
    assert_eq!(again.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&again.stdout).contains("hello.py"));
}

/// `codex-relay mcp` as an MCP client starts it: JSON-RPC lines on stdin and stdout.
struct StdioMcp {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    out: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    err: tokio::io::Lines<BufReader<tokio::process::ChildStderr>>,
}

impl StdioMcp {
    async fn start(n: &Newcomer, extra: &[&str]) -> StdioMcp {
        let mut args = vec!["mcp"];
        args.extend_from_slice(extra);
        let mut child = n
            .command(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut mcp = StdioMcp {
            stdin: child.stdin.take().unwrap(),
            out: BufReader::new(child.stdout.take().unwrap()).lines(),
            err: BufReader::new(child.stderr.take().unwrap()).lines(),
            child,
        };
        mcp.call(
            1,
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "newcomer", "version": "0"}}),
        )
        .await;
        mcp.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        mcp
    }

    async fn send(&mut self, msg: Value) {
        self.stdin
            .write_all(format!("{msg}\n").as_bytes())
            .await
            .unwrap();
    }

    async fn call(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(line) = self.out.next_line().await.unwrap() {
                let msg: Value = serde_json::from_str(&line).expect("JSON-RPC on stdout");
                if msg["id"] == id {
                    return msg;
                }
            }
            panic!("codex-relay mcp closed stdout")
        })
        .await
        .expect("an answer within 60 s")
    }

    /// Reads stderr until a line holds `text`; no line carries colour codes (stderr is a pipe,
    /// as where MCP clients keep server logs).
    async fn said(&mut self, text: &str) -> String {
        tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(line) = self.err.next_line().await.unwrap() {
                eprintln!("[mcp] {line}");
                assert!(!line.contains('\x1b'), "ANSI colour in a pipe: {line:?}");
                if line.contains(text) {
                    return line;
                }
            }
            panic!("codex-relay mcp closed stderr without saying {text:?}")
        })
        .await
        .unwrap_or_else(|_| panic!("stderr says {text:?} within 60 s"))
    }

    async fn close(mut self) {
        drop(self.stdin);
        let status = tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("codex-relay mcp ends when stdin closes")
            .unwrap();
        assert!(status.success(), "{status}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_mcp_without_a_login_says_so_and_codex_start_fails_at_once() {
    let Some(n) = Newcomer::new() else { return };
    let mut mcp = StdioMcp::start(&n, &[]).await;
    // Said on stderr (where MCP clients keep server logs) before any call.
    let line = mcp.said("Codex is not logged in").await;
    assert!(
        login_advice(&line).starts_with(&n.pinned().display().to_string()),
        "{line}"
    );
    let r = mcp
        .call(
            2,
            "tools/call",
            json!({"name": "codex_start", "arguments": {"prompt": "hello"}}),
        )
        .await;
    assert_eq!(r["result"]["isError"], true, "{r}");
    let text = r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.contains("Codex is not logged in") && text.contains(" login`"),
        "{r}"
    );
    mcp.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_demo_starts_a_session_on_the_scripted_model() {
    let Some(n) = Newcomer::new() else { return };
    let mut mcp = StdioMcp::start(&n, &["--demo"]).await;
    mcp.said("demo mode").await;
    let r = mcp
        .call(
            2,
            "tools/call",
            json!({"name": "codex_start", "arguments": {"prompt": "show me"}}),
        )
        .await;
    assert_ne!(r["result"]["isError"], true, "{r}");
    let started: Value =
        serde_json::from_str(r["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(started["model"], "codex-relay-demo", "{started}");
    mcp.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_without_a_login_says_so_and_refuses_new_sessions_with_the_fix() {
    let Some(n) = Newcomer::new() else { return };
    let relay =
        HttpRelay::start_with_env(&["--listen", "127.0.0.1:0", "--no-auth"], &n.env()).await;
    let c = Client::anonymous(&relay.url);
    let r = c.post("/api/sessions", &json!({"prompt": "hello"})).await;
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(
        r.json()["error"]["code"],
        "codex_not_logged_in",
        "{}",
        r.text()
    );
    let message = r.json()["error"]["message"].as_str().unwrap().to_owned();
    assert!(
        login_advice(&message).starts_with(&n.pinned().display().to_string()),
        "{message}"
    );
    // The same words in the log, for whoever started it.
    let logged = tokio::time::timeout(Duration::from_secs(60), async {
        let mut wait = Duration::from_millis(20);
        while !relay.log_text().contains("Codex is not logged in") {
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_secs(1));
        }
    })
    .await;
    assert!(logged.is_ok(), "{}", relay.log_text());
    let status = relay.stop().await;
    assert!(status.success(), "{status}");
}
