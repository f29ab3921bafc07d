//! A throw-away `CODEX_HOME` (plus a workspace directory) whose config points Codex at the
//! scripted model server. Never share one between tests: Codex writes trust entries into it.

use std::path::{Path, PathBuf};

/// What goes into the generated `config.toml`.
#[derive(Debug, Clone, Default)]
pub struct HomeOptions {
    /// Codex's HTTP retries against the model (0: a scripted failure fails the turn at once).
    pub request_max_retries: u32,
    /// Codex's retries of a stream that broke off.
    pub stream_max_retries: u32,
    /// Extra top-level TOML, placed before the provider table.
    pub extra_toml: String,
    /// Extra keys inside `[model_providers.mock]`, e.g. `requires_openai_auth = true` (Codex
    /// then sends the credentials it was given as the bearer token).
    pub provider_toml: String,
}

pub struct CodexHome {
    dir: tempfile::TempDir,
    home: PathBuf,
    workspace: PathBuf,
}

impl CodexHome {
    /// `model_base_url` is the server's `/v1` URL.
    pub fn new(model_base_url: &str) -> Self {
        Self::with_options(model_base_url, &HomeOptions::default())
    }

    pub fn with_options(model_base_url: &str, opts: &HomeOptions) -> Self {
        // Not under /tmp: Codex refuses to create its helper aliases in temporary directories.
        let base = crate::install::cache_root().join("test-homes");
        Self::with_options_in(&base, model_base_url, opts)
    }

    /// The same, in a directory of `base` (made if missing).
    pub fn with_options_in(base: &Path, model_base_url: &str, opts: &HomeOptions) -> Self {
        std::fs::create_dir_all(base).expect("create test-homes directory");
        let dir = tempfile::Builder::new()
            .prefix("home-")
            .tempdir_in(base)
            .expect("create CODEX_HOME");
        let home = dir.path().join("codex-home");
        let workspace = dir.path().join("workspace");
        std::fs::create_dir_all(&home).expect("create CODEX_HOME");
        std::fs::create_dir_all(&workspace).expect("create workspace");
        let HomeOptions {
            request_max_retries,
            stream_max_retries,
            extra_toml,
            provider_toml,
        } = opts;
        let config = format!(
            r#"model = "mock-model"
model_provider = "mock"
check_for_update_on_startup = false
{extra_toml}

[model_providers.mock]
name = "mock"
base_url = "{model_base_url}"
wire_api = "responses"
request_max_retries = {request_max_retries}
stream_max_retries = {stream_max_retries}
stream_idle_timeout_ms = 20000
{provider_toml}
"#
        );
        std::fs::write(home.join("config.toml"), config).expect("write config.toml");
        Self {
            dir,
            home,
            workspace,
        }
    }

    /// The `CODEX_HOME` directory.
    pub fn path(&self) -> &Path {
        &self.home
    }

    /// An empty directory to run turns in.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The parent of both; removed on drop.
    pub fn root(&self) -> &Path {
        self.dir.path()
    }
}
