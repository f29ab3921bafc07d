//! `--demo` (on `serve`, `mcp` and `run`): the real Codex against a built-in scripted model,
//! so someone without an OpenAI account can watch a whole session (a plan, a file diff, a
//! command approval, a question). The demo keeps its Codex home, workspace, store, and
//! `serve`'s token and logins in `demo/` inside the data directory (`--data-dir`, default
//! `~/.local/share/codex-relay`), so a restart resumes where it was; deleting that directory
//! starts it afresh. Its store is its own: demo sessions never mix with real ones.

use std::path::{Path, PathBuf};

use anyhow::Context;
use codex_relay_core::Relay;

use crate::demo_model;
use crate::engine::EngineArgs;

/// The demo's directory and model server (stopped on drop).
pub struct Demo {
    dir: PathBuf,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Demo {
    /// The demo's directory (its store, Codex home and workspace; `serve` keeps its token's
    /// hash and logins there).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where demo sessions work (Codex's default directory).
    pub fn workspace(&self) -> PathBuf {
        self.dir.join("workspace")
    }

    /// What the demo says when it starts: where it works, and that it is kept.
    pub fn describe(&self) -> String {
        format!(
            "codex-relay: demo mode: a scripted model, no account needed; sessions work in {}\n\
             codex-relay: the demo keeps its sessions, token and login in {} across restarts (delete it to start afresh)",
            self.workspace().display(),
            self.dir.display()
        )
    }
}

/// Where the demo lives for these settings: `demo` in the data directory.
pub fn dir_for(engine: &EngineArgs) -> PathBuf {
    engine.builder().data_dir_target().join("demo")
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

/// The first line of the demo's `config.toml`: a file without it (an older demo's) is
/// written anew; one with it is left as Codex keeps it (Codex adds trust entries to it).
const CONFIG_MARK: &str = "# codex-relay demo, v3";

/// The demo Codex configuration: the scripted model as the provider, writing only in the
/// workspace, and the model's questions (`request_user_input`) allowed outside plan mode
/// (Codex 0.169 refuses them in Default mode otherwise). The model's address changes at every
/// start, so each relay passes its own with `-c` ([`open`]), and relays sharing the demo never
/// point each other's Codex at a model that is gone. (Codex 0.169 refuses
/// `approval_policy = "untrusted"` here; the web UI asks for it per session, as any client can.)
fn config_toml(catalog: &Path) -> String {
    format!(
        r#"{CONFIG_MARK}
model_catalog_json = {catalog:?}
model = "codex-relay-demo"
model_provider = "codex-relay-demo"
sandbox_mode = "workspace-write"
check_for_update_on_startup = false
suppress_unstable_features_warning = true

[features]
default_mode_request_user_input = true

[model_providers.codex-relay-demo]
name = "codex-relay demo (scripted)"
base_url = "http://127.0.0.1:9/v1"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
stream_idle_timeout_ms = 60000
"#,
        catalog = catalog.display().to_string()
    )
}

/// Who can answer the demo model's question.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Questions {
    /// A person (the web UI) or an MCP client: the model asks one.
    Asked,
    /// Nobody (`run`): Codex is told questions are for plan mode only, and the model does not ask.
    NotAsked,
}

/// Starts the demo model and opens the relay on the demo's Codex home and workspace; the store
/// is the demo's own unless `--db` names one.
pub async fn open(engine: &EngineArgs, questions: Questions) -> anyhow::Result<(Relay, Demo)> {
    let dir = dir_for(engine);
    let home = dir.join("codex-home");
    let workspace = dir.join("workspace");
    std::fs::create_dir_all(&home)
        .with_context(|| format!("creating the demo CODEX_HOME {}", home.display()))?;
    std::fs::create_dir_all(&workspace)
        .with_context(|| format!("creating the demo workspace {}", workspace.display()))?;
    let catalog = home.join("models.json");
    std::fs::write(&catalog, MODEL_CATALOG)
        .with_context(|| format!("writing {}", catalog.display()))?;
    let config_file = home.join("config.toml");
    let current = std::fs::read_to_string(&config_file).unwrap_or_default();
    if current.lines().next() != Some(CONFIG_MARK) {
        std::fs::write(&config_file, config_toml(&catalog))
            .with_context(|| format!("writing {}", config_file.display()))?;
    }
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let model_url = demo_model::start(async {
        let _ = stopped.await;
    })
    .await
    .context("starting the demo model")?;
    let mut engine = engine.clone();
    engine.codex_home = Some(home);
    if engine.db.is_none() {
        engine.db = Some(dir.join("relay.db").display().to_string());
    }
    let mut config = engine.relay_config()?;
    config.codex.cwd = Some(workspace);
    let overrides = &mut config.codex.config_overrides;
    overrides.push(format!(
        "model_providers.codex-relay-demo.base_url={:?}",
        model_url
    ));
    if questions == Questions::NotAsked {
        overrides.push("features.default_mode_request_user_input=false".into());
    }
    let relay = Relay::open(config)
        .await
        .context("opening the codex-relay engine for the demo")?;
    Ok((relay, Demo { dir, _stop: stop }))
}
