//! A git worktree per session, on the real Codex (0.171 and 0.169) over HTTP: a session made
//! with `worktree` works in a new worktree of the test's repository (under the relay's
//! worktree directory) on its own branch; the repository's checkout is untouched; the diff
//! shows the changed and the new file (and, on 0.171, the session view shows it in real
//! Chromium); the branch is exported into a bare repository the test made, and as a patch;
//! it merges back into `main`; names that could be options or transports are refused; closing
//! the session removes the worktree and keeps the branch.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::common::{Bed, HttpRelay};
use crate::http_support::{Client, Event};
use codex_relay_testkit::{RELAY_TEST_TOKEN, Reply};
use serde_json::{Value, json};

const TURN: Duration = Duration::from_secs(120);

mod a_worktree_session {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn codex_0_171_0() {
        super::a_worktree_session_diffs_exports_merges_and_goes_on_close("0.171.0", true).await
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn codex_0_169_0() {
        super::a_worktree_session_diffs_exports_merges_and_goes_on_close("0.169.0", false).await
    }
}

fn is_end(e: &Event) -> bool {
    e.event == "envelope" && e.json()["ev"]["t"] == "turn-end"
}

/// `git -C dir args...`; its stdout (panics when git fails).
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "test")
        .env("GIT_AUTHOR_EMAIL", "test@example.com")
        .env("GIT_COMMITTER_NAME", "test")
        .env("GIT_COMMITTER_EMAIL", "test@example.com")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

async fn a_worktree_session_diffs_exports_merges_and_goes_on_close(
    version: &'static str,
    in_browser: bool,
) {
    let bed = Bed::start(version).await;
    let root = bed.home.root().to_path_buf();
    let repo = root.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("README.md"), "hello\n").unwrap();
    git(&repo, &["add", "README.md"]);
    git(&repo, &["commit", "-q", "-m", "first"]);
    let trees = root.join("worktrees");
    let marker = format!("WT-{version}");
    bed.model.route(
        &marker,
        [
            Reply::exec(
                "echo 'changed by codex' >> README.md && echo 'a new file' > added.txt",
                "call-wt",
            ),
            Reply::text("edited"),
        ],
    );
    let mut args = bed.args(120_000);
    args.extend(["--worktree-dir".into(), trees.display().to_string()]);
    let relay = HttpRelay::start(args).await;
    let c = Client::new(&relay.url);

    // Names that could be options are refused before anything is made.
    let bad = c
        .post(
            "/api/sessions",
            &json!({"prompt": "never runs", "cwd": repo, "approvalPolicy": "never",
                    "worktree": {"branch": "--upload-pack=touch /tmp/x"}}),
        )
        .await;
    assert_eq!(bad.status, 422, "{}", bad.text());
    assert_eq!(bad.json()["error"]["code"], "worktree_failed");

    let branch = format!("codex/test-{}", version.replace('.', "-"));
    let r = c
        .post(
            "/api/sessions",
            &json!({"prompt": format!("{marker}: edit"), "cwd": repo, "approvalPolicy": "never",
                    "sandbox": "workspace-write",
                    "worktree": {"base": "main", "branch": branch}}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let mut s = c.stream(&format!("/api/sessions/{id}/stream"), &[]).await;
    let end = s.until(TURN, is_end).await.pop().unwrap().json();
    assert_eq!(end["ev"]["status"], "completed", "{end}");

    let view = c.get(&format!("/api/sessions/{id}")).await.json();
    let path = view["worktree"]["path"].as_str().unwrap().to_owned();
    assert!(Path::new(&path).starts_with(&trees), "{view}");
    assert_eq!(
        view["cwd"],
        path.as_str(),
        "the session works in its worktree"
    );
    assert_eq!(view["worktree"]["branch"], branch.as_str());
    assert_eq!(
        std::fs::read_to_string(repo.join("README.md")).unwrap(),
        "hello\n",
        "the repository's own checkout is untouched"
    );

    let diff = c.get(&format!("/api/sessions/{id}/worktree")).await;
    assert_eq!(diff.status, 200, "{}", diff.text());
    let diff = diff.json();
    let files: Vec<(String, String)> = diff["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().to_owned(),
                f["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(files.contains(&("README.md".into(), "M".into())), "{diff}");
    assert!(files.contains(&("added.txt".into(), "A".into())), "{diff}");
    assert!(
        diff["patch"]
            .as_str()
            .unwrap()
            .contains("+changed by codex"),
        "{diff}"
    );

    if in_browser {
        shown_in_the_browser(&relay.url, &id).await;
    }

    // Exported as a branch into a bare repository the test made.
    let bare = root.join("exported.git");
    git(&root, &["init", "-q", "--bare", bare.to_str().unwrap()]);
    let refused = c
        .post(
            &format!("/api/sessions/{id}/worktree/export"),
            &json!({"as": "branch", "to": "ext::sh -c touch% /tmp/pwned"}),
        )
        .await;
    assert_eq!(refused.status, 422, "{}", refused.text());
    let exported = c
        .post(
            &format!("/api/sessions/{id}/worktree/export"),
            &json!({"as": "branch", "to": bare, "name": "from-codex"}),
        )
        .await;
    assert_eq!(exported.status, 200, "{}", exported.text());
    let commit = exported.json()["commit"].as_str().unwrap().to_owned();
    assert_eq!(
        git(&bare, &["rev-parse", "refs/heads/from-codex"]).trim(),
        commit
    );
    assert_eq!(
        git(&bare, &["show", "from-codex:added.txt"]),
        "a new file\n"
    );
    let patch = c
        .post(
            &format!("/api/sessions/{id}/worktree/export"),
            &json!({"as": "patch"}),
        )
        .await
        .json();
    let text = patch["patch"]
        .as_str()
        .unwrap_or_else(|| panic!("no patch: {patch}"));
    assert!(text.contains("added.txt"), "{patch}");

    // Merged back into main (checked out, clean, in the repository): a fast-forward.
    let merged = c
        .post(&format!("/api/sessions/{id}/worktree/merge"), &json!({}))
        .await;
    assert_eq!(merged.status, 200, "{}", merged.text());
    assert_eq!(merged.json()["into"], "main");
    assert_eq!(
        std::fs::read_to_string(repo.join("added.txt")).unwrap(),
        "a new file\n"
    );

    // Closed: the worktree goes, the branch (with its commit) stays.
    let closed = c.delete(&format!("/api/sessions/{id}")).await;
    assert!(closed.status < 300, "{}", closed.text());
    assert!(!Path::new(&path).exists(), "the worktree was removed");
    let listed = git(&repo, &["worktree", "list", "--porcelain"]);
    assert!(!listed.contains(&path), "{listed}");
    assert_eq!(
        git(&repo, &["rev-parse", &format!("refs/heads/{branch}")]).trim(),
        commit
    );
    drop(relay);
    bed.assert_no_codex_left().await;
}

/// The session view in real Chromium shows the worktree's diff; skipped (counted) where the
/// browser cannot be had.
async fn shown_in_the_browser(url: &str, id: &str) {
    let Some((node, _codex)) = crate::browser::set_up(codex_relay_testkit::NEWEST) else {
        return;
    };
    let url = url.trim_end_matches("/mcp").to_owned();
    let env = vec![
        ("SESSION_ID", id.to_owned()),
        ("WANT_FILES", "README.md,added.txt".to_owned()),
        ("WANT_LINE", "changed by codex".to_owned()),
    ];
    let findings: Value = tokio::task::spawn_blocking(move || {
        crate::browser::drive_script_with(
            &node,
            "worktree.mjs",
            &url,
            "worktree",
            crate::browser::LogIn::Token(RELAY_TEST_TOKEN.to_owned()),
            &env,
        )
    })
    .await
    .unwrap();
    assert!(
        findings["title"]
            .as_str()
            .unwrap_or_default()
            .contains("codex/test-"),
        "{findings}"
    );
}

/// The other fronts on the real Codex 0.171: `codex_start` with `worktree` over MCP (the
/// official Rust SDK) and `codex_worktree`'s diff; `codex-relay run --worktree` leaves its work
/// committed on its branch and removes the worktree when the run ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_and_run_start_worktree_sessions() {
    use rmcp::ServiceExt;
    let bed = Bed::start(codex_relay_testkit::NEWEST).await;
    let root = bed.home.root().to_path_buf();
    let repo = root.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("README.md"), "hello\n").unwrap();
    git(&repo, &["add", "README.md"]);
    git(&repo, &["commit", "-q", "-m", "first"]);
    let trees = root.join("worktrees");
    let edit = |file: &str| {
        [
            Reply::exec(
                &format!("echo from-codex > {file}"),
                &format!("call-{file}"),
            ),
            Reply::text("edited"),
        ]
    };
    bed.model.route("WT-MCP", edit("mcp.txt"));
    bed.model.route("WT-RUN", edit("run.txt"));

    let mut cmd = tokio::process::Command::new(crate::common::RELAY);
    cmd.arg("mcp")
        .args(bed.args(60_000))
        .args(["--worktree-dir", &trees.display().to_string()])
        .kill_on_drop(true);
    let client =
        ().serve(rmcp::transport::TokioChildProcess::new(cmd).expect("spawn codex-relay mcp"))
            .await
            .expect("MCP initialize");
    let started = crate::common::rmcp_call(
        &client,
        "codex_start",
        json!({"prompt": "WT-MCP edit", "workingDirectory": repo, "approvalPolicy": "never",
               "sandbox": "workspace-write", "worktree": {"branch": "codex/mcp"}}),
    )
    .await;
    let id = started["sessionId"].as_str().unwrap().to_owned();
    assert!(
        started["cwd"]
            .as_str()
            .unwrap()
            .starts_with(&trees.display().to_string()),
        "{started}"
    );
    let until = tokio::time::Instant::now() + TURN;
    loop {
        let s = crate::common::rmcp_call(
            &client,
            "codex_status",
            json!({"sessionId": id, "waitMs": 10000, "until": "attention"}),
        )
        .await;
        if !matches!(s["status"].as_str(), Some("active" | "awaiting_input")) {
            assert_eq!(s["status"], "done", "{s}");
            break;
        }
        assert!(tokio::time::Instant::now() < until, "never settled: {s}");
    }
    let diff = crate::common::rmcp_call(&client, "codex_worktree", json!({"sessionId": id})).await;
    assert_eq!(diff["result"]["files"][0]["path"], "mcp.txt", "{diff}");
    assert_eq!(diff["result"]["branch"], "codex/mcp", "{diff}");
    client.cancel().await.expect("close the client");

    let out = tokio::process::Command::new(crate::common::RELAY)
        .arg("run")
        .args(bed.args(60_000))
        .args(["--worktree-dir", &trees.display().to_string()])
        .arg("--cwd")
        .arg(&repo)
        .args([
            "--worktree",
            "--base",
            "main",
            "--branch",
            "codex/run",
            "WT-RUN edit",
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("on branch codex/run"), "{stderr}");
    assert_eq!(git(&repo, &["show", "codex/run:run.txt"]), "from-codex\n");
    let listed = git(&repo, &["worktree", "list", "--porcelain"]);
    assert!(
        !listed.contains("codex/run"),
        "the run's worktree was removed: {listed}"
    );
    bed.assert_no_codex_left().await;
}
