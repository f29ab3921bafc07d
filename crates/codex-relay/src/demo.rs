//! `codex-relay serve --demo`: the real Codex against a built-in scripted model, in a throwaway
//! `CODEX_HOME`, workspace and store, so someone without an OpenAI account can watch a whole
//! session (a plan, a file diff, a command approval) in the web UI. With `--data-dir` the demo
//! lives there instead and survives restarts (its sessions resume).

use std::path::PathBuf;

use anyhow::Context;
use codex_relay_core::Relay;

use crate::demo_model;
use crate::engine::EngineArgs;

/// The demo's directory (removed on drop unless it is kept in `--data-dir`) and model server
/// (stopped on drop).
pub struct Demo {
    dir: DemoDir,
    _stop: tokio::sync::oneshot::Sender<()>,
}

enum DemoDir {
    Throwaway(tempfile::TempDir),
    Kept(PathBuf),
}

impl DemoDir {
    fn path(&self) -> &std::path::Path {
        match self {
            DemoDir::Throwaway(t) => t.path(),
            DemoDir::Kept(p) => p,
        }
    }
}

impl Demo {
    /// The demo's directory (its store, Codex home and workspace; `serve` keeps its token's
    /// hash and logins there).
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// Where demo sessions work (Codex's default directory).
    pub fn workspace(&self) -> PathBuf {
        self.dir.path().join("workspace")
    }
}

/// Codex refuses some of its helpers in temporary directories, so the demo lives in the cache.
fn cache_dir() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("codex-relay").join("demo")
}

/// What Codex knows of the demo model (`model_catalog_json`, read by Codex 0.169; older ones
/// ignore the key): without it every session's timeline starts with Codex's warning that
/// `codex-relay-demo` is unknown and fallback metadata is used. The shell tool is
/// `exec_command` (unified exec), as the script expects, and patches go through it.
const MODEL_CATALOG: &str = r#"{"models": [{
  "slug": "codex-relay-demo",
  "display_name": "codex-relay demo (scripted)",
  "description": "A scripted model built into codex-relay: no account, no network.",
  "default_reasoning_level": "medium",
  "supported_reasoning_levels": [{"effort": "medium", "description": "The script does not think harder."}],
  "shell_type": "unified_exec",
  "visibility": "list",
  "supported_in_api": true,
  "priority": 1,
  "upgrade": null,
  "base_instructions": "You are the codex-relay demo model: a script, not a language model.",
  "supports_reasoning_summaries": true,
  "support_verbosity": false,
  "default_verbosity": null,
  "apply_patch_tool_type": null,
  "truncation_policy": {"mode": "bytes", "limit": 10000},
  "supports_parallel_tool_calls": false,
  "context_window": 128000,
  "experimental_supported_tools": [],
  "input_modalities": ["text", "image"]
}]}"#;

/// The demo Codex configuration: the scripted model as the provider, writing only in the
/// workspace. (Codex 0.169 refuses `approval_policy = "untrusted"` here; the web UI asks for it
/// per session, as any client can.)
fn config_toml(model_url: &str) -> String {
    format!(
        r#"model = "codex-relay-demo"
model_provider = "codex-relay-demo"
sandbox_mode = "workspace-write"
check_for_update_on_startup = false

[model_providers.codex-relay-demo]
name = "codex-relay demo (scripted)"
base_url = "{model_url}"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
stream_idle_timeout_ms = 60000
"#
    )
}

/// Starts the demo model and opens the relay on the demo's Codex home and workspace; the store
/// is the demo's own unless `--db` or `--data-dir` names one.
pub async fn open(engine: &EngineArgs) -> anyhow::Result<(Relay, Demo)> {
    let dir = match &engine.data_dir {
        Some(data) => DemoDir::Kept(data.join("demo")),
        None => {
            let base = cache_dir();
            std::fs::create_dir_all(&base)
                .with_context(|| format!("creating the demo directory under {}", base.display()))?;
            DemoDir::Throwaway(
                tempfile::Builder::new()
                    .prefix("demo-")
                    .tempdir_in(&base)
                    .context("creating the demo directory")?,
            )
        }
    };
    let home = dir.path().join("codex-home");
    let workspace = dir.path().join("workspace");
    std::fs::create_dir_all(&home)
        .with_context(|| format!("creating the demo CODEX_HOME {}", home.display()))?;
    std::fs::create_dir_all(&workspace)?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let model_url = demo_model::start(async {
        let _ = stopped.await;
    })
    .await
    .context("starting the demo model")?;
    // Written on every start: the model listens on a new port each time.
    std::fs::write(home.join("models.json"), MODEL_CATALOG)?;
    let mut config = config_toml(&model_url);
    config.insert_str(
        0,
        &format!(
            "model_catalog_json = {:?}\n",
            home.join("models.json").display().to_string()
        ),
    );
    std::fs::write(home.join("config.toml"), config)?;
    let mut engine = engine.clone();
    engine.codex_home = Some(home);
    if engine.db.is_none() && engine.data_dir.is_none() {
        engine.db = Some(dir.path().join("relay.db").display().to_string());
    }
    let mut config = engine.relay_config()?;
    config.codex.cwd = Some(workspace);
    let relay = Relay::open(config)
        .await
        .context("opening the codex-relay engine for the demo")?;
    Ok((relay, Demo { dir, _stop: stop }))
}
