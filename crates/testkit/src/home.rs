//! A throw-away `CODEX_HOME` (plus a workspace directory) whose config points Codex at the
//! scripted model server. Never share one between tests: Codex writes trust entries into it.

use std::path::{Path, PathBuf};

pub struct CodexHome {
    dir: tempfile::TempDir,
    home: PathBuf,
    workspace: PathBuf,
}

impl CodexHome {
    /// `model_base_url` is the server's `/v1` URL. `extra_toml` is appended to `config.toml`.
    pub fn new(model_base_url: &str, extra_toml: &str) -> Self {
        // Not under /tmp: Codex refuses to create its helper aliases in temporary directories.
        let base = crate::install::cache_root().join("test-homes");
        std::fs::create_dir_all(&base).expect("create test-homes directory");
        let dir = tempfile::Builder::new()
            .prefix("home-")
            .tempdir_in(&base)
            .expect("create CODEX_HOME");
        let home = dir.path().join("codex-home");
        let workspace = dir.path().join("workspace");
        std::fs::create_dir_all(&home).expect("create CODEX_HOME");
        std::fs::create_dir_all(&workspace).expect("create workspace");
        let config = format!(
            r#"model = "mock-model"
model_provider = "mock"
check_for_update_on_startup = false

[model_providers.mock]
name = "mock"
base_url = "{model_base_url}"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
stream_idle_timeout_ms = 20000

{extra_toml}
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
