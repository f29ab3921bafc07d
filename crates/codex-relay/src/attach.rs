//! `serve --attach`: which Codex daemon socket, and what `serve`'s banner and `doctor` say about
//! the daemon the terminal uses (docs/ATTACH.md).

use std::path::{Path, PathBuf};
use std::time::Duration;

use codex_relay_codex::AppServerConfig;
use codex_relay_codex::daemon::{self, AttachError, Daemon};

/// The socket `--attach` names, or the daemon's default one under `CODEX_HOME` (`None` when no
/// Codex home can be told).
pub fn socket(given: Option<&Path>, codex_home: Option<&Path>) -> Option<PathBuf> {
    match given.filter(|p| !p.as_os_str().is_empty()) {
        Some(p) => Some(p.to_owned()),
        None => codex_home
            .map(Path::to_owned)
            .or_else(daemon::codex_home)
            .map(|home| daemon::default_socket(&home)),
    }
}

/// One line about the daemon at `socket`: running (and whose), refused (why), or absent. It
/// connects and initializes to tell, then closes; the daemon is never stopped.
pub async fn describe(socket: &Path) -> String {
    if std::fs::symlink_metadata(socket).is_err() {
        return format!(
            "none at {} (start one with `codex app-server daemon start`; `serve --attach` then shows its threads)",
            socket.display()
        );
    }
    let client = AppServerConfig::new("codex");
    match Daemon::attach(socket, &client, Duration::from_secs(5)).await {
        Ok(d) => format!(
            "running at {} (pid {}, {}); `serve --attach` shows its threads and answers their approvals",
            socket.display(),
            d.pid(),
            d.initialize_response().user_agent
        ),
        Err(e @ AttachError::Refused { .. }) => format!("REFUSED: {e}"),
        Err(e) => format!("not answering: {e}"),
    }
}
