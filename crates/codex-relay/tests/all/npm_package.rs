//! The npm package (`npm/`, `scripts/release`, docs/INSTALL.md): this build's binary packed by the release script, installed with npm into an empty prefix, and used through the launcher: `npx codex-relay --version`, an MCP turn on the bundled real Codex then SIGTERM, `run`'s stdout, exit codes and SIGINT, which Codex is chosen, and what it says without a binary.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::common::{rmcp_call, rmcp_until_done};
use codex_relay_testkit::{CodexHome, ModelServer, NEWEST, Reply, procs};
use rmcp::ServiceExt;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

const RELAY: &str = env!("CARGO_BIN_EXE_codex-relay");
pub(crate) const VERSION: &str = env!("CARGO_PKG_VERSION");
/// Set on every launcher a test starts (to its bed's root): the launcher, the relay, Codex and
/// whatever Codex runs inherit it, so what is left running can be found.
// Not `CODEX_RELAY_*`: the relay keeps its own variables from Codex, and the mark must reach it.
pub(crate) const MARK: &str = "RELAY_NPM_TEST_MARK";

/// The tarballs `scripts/release` made and the prefix npm installed them into.
pub(crate) struct Installed {
    pub(crate) release: PathBuf,
    pub(crate) prefix: PathBuf,
    /// Node's `process.platform-process.arch`, as the launcher and the release script name it.
    pub(crate) platform: String,
}

impl Installed {
    pub(crate) fn modules(&self) -> PathBuf {
        self.prefix.join("node_modules")
    }

    /// `node_modules/.bin/codex-relay`: the launcher, as npm links it.
    pub(crate) fn launcher(&self) -> PathBuf {
        self.modules().join(".bin").join("codex-relay")
    }

    /// The relay binary inside the platform package.
    pub(crate) fn binary(&self) -> PathBuf {
        self.modules()
            .join("@codex-relay")
            .join(&self.platform)
            .join("bin")
            .join("codex-relay")
    }

    /// The bundled Codex's `codex` command (its package's `bin` entry), as a real path.
    fn bundled_codex(&self) -> PathBuf {
        let codex = self.modules().join("@openai").join("codex");
        let manifest = read_json(&codex.join("package.json"));
        let bin = manifest["bin"]["codex"]
            .as_str()
            .expect("@openai/codex has bin.codex");
        codex
            .join(bin)
            .canonicalize()
            .expect("the bundled codex exists")
    }

    /// The launcher's package.json as installed.
    fn manifest(&self) -> Value {
        read_json(&self.modules().join("codex-relay").join("package.json"))
    }
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn checked(what: &str, out: std::io::Result<Output>) -> Output {
    let out = out.unwrap_or_else(|e| panic!("{what} could not be run: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Packs and installs once per build of the binary, shared by every test process (the tests
/// only read it; nextest runs each test in a process of its own, several at once): the first
/// process to come packs and installs under a lock into a directory named after the build,
/// the others wait for it and use what it made.
pub(crate) fn installed() -> &'static Installed {
    static INSTALLED: OnceLock<Installed> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        use std::os::unix::fs::MetadataExt;
        let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("npm-package");
        std::fs::create_dir_all(&root).unwrap();
        let meta = std::fs::metadata(RELAY).expect("the relay binary");
        let build = format!("{}-{}-{}", meta.len(), meta.mtime(), meta.mtime_nsec());
        let lock = std::fs::File::create(root.join(".lock")).unwrap();
        // SAFETY: flock on a descriptor this function owns; released when `lock` is dropped.
        unsafe {
            libc::flock(std::os::fd::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX);
        }
        let base = root.join(&build);
        let done = base.join(".installed");
        if let Ok(platform) = std::fs::read_to_string(&done) {
            return Installed {
                release: base.join("release"),
                prefix: base.join("prefix"),
                platform,
            };
        }
        // Earlier builds' installs go.
        for entry in std::fs::read_dir(&root).unwrap().flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
        let installed = pack_and_install(&base);
        std::fs::write(&done, &installed.platform).unwrap();
        drop(lock);
        installed
    })
}

/// Packs this build's binary with the release script and installs the tarballs with npm,
/// under `base`.
fn pack_and_install(base: &Path) -> Installed {
    {
        // Never skipped: without npm this fails here, saying so.
        checked(
            "`npm --version` (the npm package test needs Node.js with npm)",
            Command::new("npm").arg("--version").output(),
        );
        let platform = String::from_utf8(
            checked(
                "node",
                Command::new("node")
                    .args(["-p", "process.platform + '-' + process.arch"])
                    .output(),
            )
            .stdout,
        )
        .unwrap()
        .trim()
        .to_owned();
        let release = base.join("release");
        let prefix = base.join("prefix");
        std::fs::create_dir_all(&prefix).unwrap();
        let started = Instant::now();
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let out = checked(
            "scripts/release --binary",
            Command::new(repo.join("scripts").join("release"))
                .arg("--binary")
                .arg(RELAY)
                .arg("--out")
                .arg(&release)
                .stdin(Stdio::null())
                .output(),
        );
        eprintln!("{}", String::from_utf8_lossy(&out.stderr));
        eprintln!("packed in {:?}", started.elapsed());
        // As `npm install codex-relay` from the registry would, but with the platform package
        // taken from its local tarball under the alias the launcher's optionalDependencies use.
        // Only @openai/codex comes from the registry (or npm's cache).
        let started = Instant::now();
        checked(
            "npm install of the tarballs",
            Command::new("npm")
                .args(["install", "--no-audit", "--no-fund", "--prefer-offline"])
                .args(["--loglevel=error", "--prefix"])
                .arg(&prefix)
                .arg(release.join(format!("codex-relay-{VERSION}.tgz")))
                .arg(format!(
                    "@codex-relay/{platform}@file:{}",
                    release
                        .join(format!("codex-relay-{VERSION}-{platform}.tgz"))
                        .display()
                ))
                .stdin(Stdio::null())
                .output(),
        );
        eprintln!("installed in {:?}", started.elapsed());
        Installed {
            release,
            prefix,
            platform,
        }
    }
}

/// `npx ARGS` in the prefix (npm's own environment: it finds the installed package there).
pub(crate) fn npx(it: &Installed, args: &[&str]) -> Output {
    let out = Command::new("npx")
        .args(args)
        .current_dir(&it.prefix)
        .stdin(Stdio::null())
        .output()
        .expect("npx runs");
    eprintln!(
        "npx {args:?} → {:?}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn npx_runs_the_packed_binary_and_the_manifest_pins_the_tested_codex() {
    let it = installed();
    // (`npx --no codex-relay --version` would be npm's own --version.)
    let version = npx(it, &["codex-relay", "--version"]);
    assert_eq!(version.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&version.stdout),
        format!("codex-relay {VERSION}\n")
    );
    // The README's first command, as far as it goes without serving: `npx -y codex-relay serve`.
    let help = npx(it, &["-y", "codex-relay", "serve", "--help"]);
    assert_eq!(help.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&help.stdout).contains("--demo"));

    // npm installed the stripped binary the release script wrote (and checksummed).
    let packed = it
        .release
        .join(format!("codex-relay-{VERSION}-{}", it.platform));
    let installed = std::fs::read(it.binary()).expect("the platform package's binary");
    assert!(installed == std::fs::read(&packed).unwrap());
    assert!(
        (installed.len() as u64) < std::fs::metadata(RELAY).unwrap().len(),
        "the packed binary is stripped"
    );
    checked(
        "sha256sum -c SHA256SUMS",
        Command::new("sha256sum")
            .args(["--check", "--strict", "SHA256SUMS"])
            .current_dir(&it.release)
            .output(),
    );

    let manifest = it.manifest();
    assert_eq!(manifest["version"], VERSION);
    assert_eq!(
        manifest["dependencies"]["@openai/codex"], NEWEST,
        "the launcher brings the Codex the suite tests as newest"
    );
    let alias = format!("@codex-relay/{}", it.platform);
    assert_eq!(
        manifest["optionalDependencies"],
        json!({ alias: format!("npm:codex-relay@{VERSION}-{}", it.platform) }),
        "one optional dependency per platform with a binary in this release"
    );
}

/// A scripted model, a fresh CODEX_HOME, and an empty HOME (CODEX-FACTS: Codex runs the
/// user's shell start-up files).
pub(crate) struct Bed {
    pub(crate) model: ModelServer,
    pub(crate) home: CodexHome,
    pub(crate) user_home: PathBuf,
}

impl Bed {
    pub(crate) async fn start() -> Bed {
        let model = ModelServer::start().await;
        let home = CodexHome::new(model.url());
        let user_home = home.root().join("home");
        std::fs::create_dir_all(&user_home).unwrap();
        Bed {
            model,
            home,
            user_home,
        }
    }

    pub(crate) fn mark(&self) -> String {
        format!("{MARK}={}", self.home.root().display())
    }

    /// The installed launcher with `args` and the engine flags (no `--codex`), in a clean
    /// environment whose PATH has Node but no `codex`, so the bundled Codex is the one used.
    pub(crate) fn launcher(&self, it: &Installed, args: &[&str]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(it.launcher());
        cmd.args(&args[..1])
            .arg("--codex-home")
            .arg(self.home.path())
            .arg("--db")
            .arg(self.home.root().join("relay.db"))
            .args(&args[1..])
            .env_clear()
            .env("PATH", path_without_codex())
            .env("HOME", &self.user_home)
            .env(MARK, self.home.root())
            .kill_on_drop(true);
        cmd
    }

    /// The relay binary (from the platform package) a launcher of this bed started, waiting up
    /// to 30 s for it.
    pub(crate) async fn relay_pid(&self, it: &Installed) -> u32 {
        let binary = it.binary().canonicalize().unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let running = procs::pids_with_env(&self.mark());
            if let Some(pid) = running.iter().find(|p| exe(**p) == binary) {
                return *pid;
            }
            let what: Vec<String> = running.iter().map(|p| describe(*p)).collect();
            assert!(
                Instant::now() < deadline,
                "no relay from the package: {what:#?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Asserts that nothing started by this bed's launchers is left, waiting up to 10 s.
    pub(crate) async fn assert_nothing_left(&self) {
        let left = procs::wait_env_gone(&self.mark(), Duration::from_secs(10)).await;
        let what: Vec<String> = left.iter().map(|p| describe(*p)).collect();
        assert!(left.is_empty(), "processes left behind: {what:#?}");
    }
}

/// The directory of `node` (the launcher's interpreter), then /usr/bin and /bin; none holds
/// a `codex`.
pub(crate) fn path_without_codex() -> OsString {
    let node = std::env::var_os("PATH")
        .and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("node"))
                .find(|n| n.is_file())
        })
        .expect("node on PATH");
    let dirs = [
        node.parent().unwrap(),
        Path::new("/usr/bin"),
        Path::new("/bin"),
    ];
    for dir in dirs {
        assert!(
            !dir.join("codex").exists(),
            "{} holds a codex, which the launcher would prefer to the bundled one",
            dir.display()
        );
    }
    std::env::join_paths(dirs).unwrap()
}

fn exe(pid: u32) -> PathBuf {
    std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default()
}

fn describe(pid: u32) -> String {
    let cmdline = std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    format!(
        "{pid}: {} ({})",
        cmdline.replace('\0', " "),
        exe(pid).display()
    )
}

fn environ(pid: u32) -> Vec<String> {
    String::from_utf8_lossy(&std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default())
        .split('\0')
        .map(str::to_owned)
        .collect()
}

pub(crate) fn signal(pid: u32, sig: i32) {
    // SAFETY: signalling a child of this test.
    unsafe {
        libc::kill(pid as i32, sig);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_client_runs_a_turn_through_the_launcher_and_sigterm_leaves_nothing() {
    let it = installed();
    let bed = Bed::start().await;
    bed.model.push([Reply::text("hello through npm")]);
    let mut child = bed
        .launcher(it, &["mcp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the launcher starts");
    let launcher = child.id().unwrap();
    let io = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    let client = ().serve(io).await.expect("MCP initialize through the launcher");
    let started = rmcp_call(
        &client,
        "codex_start",
        json!({"prompt": "say hello", "workingDirectory": bed.home.workspace()}),
    )
    .await;
    let id = started["sessionId"].as_str().unwrap().to_owned();
    let done = rmcp_until_done(&client, &id).await;
    assert_eq!(done["result"], "hello through npm", "{done}");

    // Running now: the launcher, the relay binary from the platform package (told to use the
    // bundled Codex), and that Codex's app-server.
    let relay = bed.relay_pid(it).await;
    let bundled = format!("CODEX_CLI_PATH={}", it.bundled_codex().display());
    assert!(environ(relay).contains(&bundled), "{:?}", environ(relay));
    let running = procs::pids_with_env(&bed.mark());
    let package_codex = it.modules().join("@openai").canonicalize().unwrap();
    assert!(
        running.iter().any(|p| exe(*p).starts_with(&package_codex)),
        "the bundled Codex runs: {:#?}",
        running.iter().map(|p| describe(*p)).collect::<Vec<_>>()
    );

    signal(launcher, libc::SIGTERM);
    let status = tokio::time::timeout(Duration::from_secs(15), child.wait())
        .await
        .expect("the launcher exits within 15 s of SIGTERM")
        .unwrap();
    // As the bare binary: `mcp` stops cleanly on SIGTERM.
    assert_eq!(status.code(), Some(0), "{status}");
    bed.assert_nothing_left().await;
    let _ = client.cancel().await;
}

/// As an MCP client configured with `"command": "npx", "args": ["codex-relay", "mcp"]` runs
/// it, and stops it with SIGTERM to npx while its pipes are still open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_npx_mcp_answers_and_sigterm_to_npx_leaves_nothing() {
    let it = installed();
    let bed = Bed::start().await;
    let mut child = tokio::process::Command::new("npx")
        .args(["codex-relay", "mcp", "--codex-home"])
        .arg(bed.home.path())
        .arg("--db")
        .arg(bed.home.root().join("relay.db"))
        .current_dir(&it.prefix)
        .env_clear()
        .env("PATH", path_without_codex())
        .env("HOME", &bed.user_home)
        .env(MARK, bed.home.root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("npx starts");
    let io = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    let client = ().serve(io).await.expect("MCP initialize through npx");
    let tools = client.list_all_tools().await.expect("tools/list");
    assert!(tools.iter().any(|t| t.name == "codex_start"), "{tools:?}");
    bed.relay_pid(it).await;

    // npm passes SIGTERM to the `sh -c` it runs the launcher in; the launcher stops the relay
    // when that shell goes, whether or not the shell passed the signal on.
    signal(child.id().unwrap(), libc::SIGTERM);
    tokio::time::timeout(Duration::from_secs(15), child.wait())
        .await
        .expect("npx exits within 15 s of SIGTERM")
        .unwrap();
    bed.assert_nothing_left().await;
    let _ = client.cancel().await;
}

/// Runs `codex-relay run ARGS` through the launcher with `stdin`; returns its output.
async fn run(bed: &Bed, it: &Installed, args: &[&str], stdin: &str) -> Output {
    let mut all = vec!["run", "--cwd"];
    let ws = bed.home.workspace().display().to_string();
    all.push(&ws);
    all.extend_from_slice(args);
    let mut child = bed
        .launcher(it, &all)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the launcher starts");
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.as_bytes()).await.unwrap();
    drop(input);
    let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .expect("run finishes")
        .unwrap();
    eprintln!(
        "run {args:?} → {:?}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_through_the_launcher_keeps_stdin_stdout_and_exit_codes() {
    let it = installed();
    let bed = Bed::start().await;
    bed.model
        .push([Reply::text("the answer, exactly\n\twith a tab")]);
    let out = run(&bed, it, &["-"], "the prompt from stdin").await;
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout, b"the answer, exactly\n\twith a tab\n");
    assert!(
        bed.model.requests()[0]
            .user_texts()
            .iter()
            .any(|t| t.contains("the prompt from stdin")),
        "the prompt reached the model through the launcher's stdin"
    );

    // docs/RUN.md: a 401 is a request error, exit 3.
    bed.model.push([Reply::Status {
        code: 401,
        message: "bad key".into(),
    }]);
    let out = run(&bed, it, &["hello"], "").await;
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("request error"));
    assert!(out.stdout.is_empty());
    bed.assert_nothing_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_to_the_launcher_interrupts_run_with_exit_130() {
    let it = installed();
    let bed = Bed::start().await;
    bed.model
        .push([Reply::text("too late").with_delay(Duration::from_secs(60))]);
    bed.model.allow_unscripted();
    let ws = bed.home.workspace().display().to_string();
    let mut child = bed
        .launcher(it, &["run", "--cwd", &ws, "take your time"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .expect("the launcher starts");
    bed.model
        .wait_for_requests(1, Duration::from_secs(60))
        .await;
    signal(child.id().unwrap(), libc::SIGINT);
    let status = tokio::time::timeout(Duration::from_secs(15), child.wait())
        .await
        .expect("the launcher exits within 15 s of SIGINT")
        .unwrap();
    // docs/RUN.md: the turn is interrupted, Codex stopped, exit 130.
    assert_eq!(status.code(), Some(130), "{status}");
    bed.assert_nothing_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_launcher_dies_of_the_signal_that_killed_the_binary() {
    use std::os::unix::process::ExitStatusExt;
    let it = installed();
    let bed = Bed::start().await;
    let mut child = bed
        .launcher(it, &["mcp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the launcher starts");
    signal(bed.relay_pid(it).await, libc::SIGKILL);
    let status = tokio::time::timeout(Duration::from_secs(15), child.wait())
        .await
        .expect("the launcher exits with the binary")
        .unwrap();
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status}");
    bed.assert_nothing_left().await;
}

/// What `codex-relay doctor` through the launcher says it uses, with this PATH and CODEX_CLI_PATH.
fn doctor_codex(it: &Installed, path: &OsString, codex_cli_path: Option<&Path>) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(it.launcher());
    cmd.arg("doctor")
        .arg("--codex-home")
        .arg(dir.path())
        .arg("--db")
        .arg(dir.path().join("relay.db"))
        .env_clear()
        .env("PATH", path)
        .env("HOME", dir.path())
        .stdin(Stdio::null());
    if let Some(p) = codex_cli_path {
        cmd.env("CODEX_CLI_PATH", p);
    }
    let out = cmd.output().expect("doctor runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("codex binary:"))
        .unwrap_or_else(|| panic!("doctor names no codex binary:\n{text}"));
    // `PATH (how it was found)`
    line.rsplit_once(" (")
        .map_or(line, |(path, _)| path)
        .trim()
        .to_owned()
}

#[test]
fn a_codex_on_path_or_in_codex_cli_path_wins_over_the_bundled_one() {
    let it = installed();
    let dir = tempfile::tempdir().unwrap();
    let fake = |name: &str| {
        let bin = dir.path().join(name);
        std::fs::create_dir_all(&bin).unwrap();
        let codex = bin.join("codex");
        std::fs::write(&codex, "#!/bin/sh\necho 'codex-cli 0.40.0'\n").unwrap();
        std::fs::set_permissions(&codex, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        bin
    };
    let (users, named) = (fake("users"), fake("named"));
    // As npx and `npm exec` set it: node_modules/.bin (holding the bundled codex) first.
    let npx_path = |rest: &[&Path]| {
        let mut dirs = vec![it.modules().join(".bin")];
        dirs.extend(rest.iter().map(|p| p.to_path_buf()));
        dirs.extend(std::env::split_paths(&path_without_codex()));
        std::env::join_paths(dirs).unwrap()
    };
    assert_eq!(
        doctor_codex(it, &npx_path(&[]), None),
        it.bundled_codex().display().to_string()
    );
    assert_eq!(
        doctor_codex(it, &npx_path(&[&users]), None),
        users.join("codex").display().to_string()
    );
    assert_eq!(
        doctor_codex(it, &npx_path(&[&users]), Some(&named.join("codex"))),
        named.join("codex").display().to_string()
    );
}

#[test]
fn without_a_binary_for_the_platform_the_launcher_says_what_to_do() {
    let it = installed();
    // What `npm install --omit=optional` leaves: the launcher package without its platform one.
    let dir = tempfile::tempdir().unwrap();
    let package = dir.path().join("node_modules").join("codex-relay");
    std::fs::create_dir_all(package.join("bin")).unwrap();
    let source = it.modules().join("codex-relay");
    for file in ["package.json", "bin/codex-relay.js"] {
        std::fs::copy(source.join(file), package.join(file)).unwrap();
    }
    let script = package.join("bin").join("codex-relay.js");
    let out = Command::new("node")
        .arg(&script)
        .arg("--version")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(127), "{stderr}");
    assert!(out.stdout.is_empty());
    for needed in [
        format!("@codex-relay/{}", it.platform),
        "not installed".into(),
        "--omit=optional".into(),
        "cargo install --path crates/codex-relay".into(),
    ] {
        assert!(
            stderr.contains(&needed),
            "{needed:?} missing from:\n{stderr}"
        );
    }

    // A platform this release has no binary for (Node told it runs on one).
    let out = Command::new("node")
        .arg("-e")
        .arg(format!(
            "Object.defineProperty(process, 'arch', {{ value: 'mips' }}); require({:?})",
            it.launcher().canonicalize().unwrap()
        ))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(127), "{stderr}");
    let os = it.platform.split('-').next().unwrap();
    let mips = format!("no prebuilt binary for this platform ({os}-mips)");
    assert!(stderr.contains(&mips), "{stderr}");
    assert!(
        stderr.contains(&it.platform),
        "names the platforms that have one: {stderr}"
    );
    assert!(
        stderr.contains("cargo install --path crates/codex-relay"),
        "{stderr}"
    );
}
