//! `codex app-server` as one object: version check, spawn, handshake, typed calls, shutdown.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use codex_relay_protocol::v1;
use codex_relay_protocol::v2::{
    self, ClientInfo, ClientRequest, InitializeCapabilities, InitializeParams, InitializeResponse,
};

use crate::error::{ExitInfo, PeerError, StartError};
use crate::peer::{Peer, PeerConfig, Subscription};
use crate::process::{CodexProcess, SpawnSpec};
use crate::version::{CodexVersion, Compatibility, MIN_SUPPORTED, NEWEST_TESTED, OLDEST_TESTED};

/// How to start `codex app-server`.
#[derive(Debug, Clone)]
pub struct AppServerConfig {
    /// The `codex` executable (the npm wrapper or the native binary).
    pub binary: PathBuf,
    /// `CODEX_HOME` for the child; `None` inherits ours.
    pub codex_home: Option<PathBuf>,
    pub cwd: Option<PathBuf>,
    /// Extra environment; `None` removes a variable.
    pub env: Vec<(OsString, Option<OsString>)>,
    /// `-c key=value` overrides passed on the command line.
    pub config_overrides: Vec<String>,
    /// Time allowed for spawn + initialize.
    pub startup_timeout: Duration,
    pub peer: PeerConfig,
    pub client_name: String,
    pub client_version: String,
    pub stderr_tail_lines: usize,
    pub stderr_tail_bytes: usize,
}

impl AppServerConfig {
    pub fn new(binary: impl Into<PathBuf>) -> Self {
        Self {
            binary: binary.into(),
            codex_home: None,
            cwd: None,
            env: Vec::new(),
            config_overrides: Vec::new(),
            startup_timeout: Duration::from_secs(30),
            peer: PeerConfig::default(),
            client_name: "codex-relay".into(),
            client_version: env!("CARGO_PKG_VERSION").into(),
            stderr_tail_lines: 200,
            stderr_tail_bytes: 64 * 1024,
        }
    }

    pub fn codex_home(mut self, home: impl Into<PathBuf>) -> Self {
        self.codex_home = Some(home.into());
        self
    }

    pub fn config_override(mut self, key_value: impl Into<String>) -> Self {
        self.config_overrides.push(key_value.into());
        self
    }
}

/// Runs `BINARY --version` and reads the version from it.
pub async fn probe_version(
    binary: &std::path::Path,
    timeout: Duration,
) -> Result<CodexVersion, StartError> {
    let name = binary.display().to_string();
    let mut cmd = tokio::process::Command::new(binary);
    cmd.arg("--version")
        // The commands Codex runs can read this process's environment while it lives: it gets
        // only where the tools are (the npm launcher finds `node` on PATH).
        .env_clear()
        .envs(std::env::var_os("PATH").map(|p| ("PATH", p)))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let run = async {
        crate::platform::reaper::spawn_owned(|| cmd.spawn(), |c| c.id())?
            .wait_with_output()
            .await
    };
    let out = match tokio::time::timeout(timeout, run).await {
        Err(_) => {
            return Err(StartError::VersionProbe {
                binary: name,
                detail: format!("no answer within {timeout:?}"),
            });
        }
        Ok(Err(source)) => {
            return Err(StartError::Spawn {
                binary: name,
                source,
            });
        }
        Ok(Ok(out)) => out,
    };
    let text = String::from_utf8_lossy(&out.stdout);
    CodexVersion::find_in(&text).ok_or_else(|| StartError::VersionProbe {
        binary: name,
        detail: format!(
            "no version in its output ({}): {}{}",
            out.status,
            text.trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        ),
    })
}

/// The `initialize` params codex-relay sends: our client info, and the experimental API
/// (needed for dynamic tools).
pub fn initialize_params(config: &AppServerConfig) -> InitializeParams {
    InitializeParams {
        client_info: ClientInfo {
            name: config.client_name.clone(),
            title: Some("codex-relay".into()),
            version: config.client_version.clone(),
        },
        capabilities: Some(InitializeCapabilities {
            experimental_api: true,
        }),
    }
}

/// How long the handshake may take before `codex --version` is asked as well (a server that
/// boots normally answers well within it; one that is no app-server at all may never answer).
const PROBE_AFTER: Duration = Duration::from_millis(1500);

/// The refusal of a binary too old for app-server v2.
fn unsupported(found: &CodexVersion) -> StartError {
    StartError::Unsupported {
        found: found.to_string(),
        min_supported: MIN_SUPPORTED.to_string(),
        tested: format!("{OLDEST_TESTED} to {NEWEST_TESTED}"),
    }
}

/// A running, initialized `codex app-server`.
pub struct AppServer {
    peer: Peer,
    process: Arc<CodexProcess>,
    version: CodexVersion,
    init: InitializeResponse,
}

impl AppServer {
    /// Checks the version, spawns the server in its own process group and does the handshake.
    /// Versions without app-server v2 are refused; untested ones start with a warning.
    pub async fn start(config: AppServerConfig) -> Result<Self, StartError> {
        let deadline = tokio::time::Instant::now() + config.startup_timeout;
        let mut args: Vec<OsString> = Vec::new();
        for kv in &config.config_overrides {
            args.push("-c".into());
            args.push(kv.into());
        }
        args.push("app-server".into());
        let spec = SpawnSpec {
            binary: config.binary.clone(),
            args,
            codex_home: config.codex_home.clone(),
            cwd: config.cwd.clone(),
            env: config.env.clone(),
            stderr_tail_lines: config.stderr_tail_lines,
            stderr_tail_bytes: config.stderr_tail_bytes,
        };
        // The version comes from the handshake's userAgent. `codex --version` (a few hundred ms
        // of CPU through the npm wrapper, competing with the server's boot) runs only when the
        // handshake is slow or fails: then it tells a binary too old for app-server v2 apart,
        // and that binary is stopped and refused at once.
        let (process, stdio) = CodexProcess::spawn(&spec)?;
        let process = Arc::new(process);
        let peer = Peer::spawn(
            stdio.stdout,
            stdio.stdin,
            config.peer.clone(),
            Some(Box::pin(process.exit_error())),
        );
        let params = initialize_params(&config);
        let handshake = tokio::spawn({
            let peer = peer.clone();
            let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
            async move {
                peer.request(v2::Initialize::METHOD, &params, Some(remaining))
                    .await
            }
        });
        let mut handshake = handshake;
        let early = tokio::select! {
            answer = &mut handshake => Some(answer.unwrap_or(Err(PeerError::Shutdown))),
            _ = tokio::time::sleep(PROBE_AFTER) => None,
        };
        let (answer, cli_version) = match early {
            Some(Ok(v)) => (Ok(v), None),
            // Only for the refusal below: a failed probe leaves the handshake's error to tell.
            Some(Err(e)) => (
                Err(e),
                probe_version(&config.binary, config.startup_timeout)
                    .await
                    .ok(),
            ),
            None => match probe_version(&config.binary, config.startup_timeout).await {
                Ok(v) if v.compatibility() == Compatibility::Unsupported => {
                    process.shutdown(Duration::from_millis(200)).await;
                    return Err(unsupported(&v));
                }
                Ok(v) => (handshake.await.unwrap_or(Err(PeerError::Shutdown)), Some(v)),
                Err(e) => {
                    process.shutdown(Duration::from_millis(200)).await;
                    return Err(e);
                }
            },
        };
        if answer.is_err()
            && let Some(v) = cli_version
                .as_ref()
                .filter(|v| v.compatibility() == Compatibility::Unsupported)
        {
            process.shutdown(Duration::from_millis(200)).await;
            return Err(unsupported(v));
        }
        let init = match answer {
            Ok(v) => serde_json::from_value::<InitializeResponse>(v).map_err(|e| {
                StartError::Handshake(PeerError::Decode {
                    method: "initialize".into(),
                    detail: e.to_string(),
                })
            })?,
            Err(e) => {
                process.shutdown(Duration::from_millis(200)).await;
                let err = match e {
                    PeerError::Timeout { .. } => StartError::HandshakeTimeout {
                        after: config.startup_timeout,
                        stderr_tail: process.stderr_tail().text(),
                    },
                    e => StartError::Handshake(e),
                };
                // What it printed may still be in the pipe behind a failed write: read it all.
                let _ = tokio::time::timeout(Duration::from_secs(2), peer.reader_finished()).await;
                return Err(match peer.junk_before_first_message() {
                    Some(first_line) => StartError::NotAppServer {
                        binary: config.binary.display().to_string(),
                        first_line,
                        then: err.to_string(),
                    },
                    None => err,
                });
            }
        };
        peer.notify::<()>("initialized", None)
            .map_err(StartError::Handshake)?;

        let version = match (CodexVersion::find_in(&init.user_agent), cli_version) {
            (Some(v), Some(cli)) if v != cli => {
                tracing::warn!(%cli, user_agent = %init.user_agent, "codex --version and the initialize userAgent disagree; trusting the server");
                v
            }
            (Some(v), _) => v,
            (None, Some(cli)) => cli,
            (None, None) => match probe_version(&config.binary, config.startup_timeout).await {
                Ok(v) => v,
                Err(e) => {
                    process.shutdown(Duration::from_millis(200)).await;
                    return Err(e);
                }
            },
        };
        match version.compatibility() {
            Compatibility::Unsupported => {
                process.shutdown(Duration::from_millis(200)).await;
                return Err(unsupported(&version));
            }
            Compatibility::Untested => {
                tracing::warn!("{}", Compatibility::Untested.describe(&version));
            }
            Compatibility::Tested => {}
        }
        tracing::info!(%version, pid = process.pid(), "codex app-server started");
        Ok(Self {
            peer,
            process,
            version,
            init,
        })
    }

    pub fn peer(&self) -> &Peer {
        &self.peer
    }

    pub fn version(&self) -> &CodexVersion {
        &self.version
    }

    pub fn initialize_response(&self) -> &InitializeResponse {
        &self.init
    }

    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    pub fn process(&self) -> &Arc<CodexProcess> {
        &self.process
    }

    /// Sends a typed request.
    pub async fn call<R: ClientRequest>(
        &self,
        params: &R::Params,
    ) -> Result<R::Response, PeerError> {
        self.peer.call::<R>(params).await
    }

    /// See [`Peer::subscribe_thread`].
    pub fn subscribe_thread(&self, thread_id: &str) -> Subscription {
        self.peer.subscribe_thread(thread_id)
    }

    pub async fn thread_start(
        &self,
        params: &v2::ThreadStartParams,
    ) -> Result<v2::ThreadStartResponse, PeerError> {
        let mut params = params.clone();
        self.version
            .adapt_approval_policy(&mut params.approval_policy);
        self.call::<v2::ThreadStart>(&params).await
    }

    pub async fn turn_start(
        &self,
        params: &v2::TurnStartParams,
    ) -> Result<v2::TurnStartResponse, PeerError> {
        let mut params = params.clone();
        self.version
            .adapt_approval_policy(&mut params.approval_policy);
        self.call::<v2::TurnStart>(&params).await
    }

    pub async fn turn_interrupt(&self, thread_id: &str, turn_id: &str) -> Result<(), PeerError> {
        let params = v2::TurnInterruptParams {
            thread_id: thread_id.into(),
            turn_id: turn_id.into(),
        };
        self.call::<v2::TurnInterrupt>(&params).await.map(|_| ())
    }

    /// Adds input to the running turn: `turn/steer` where Codex has it, else the v1
    /// `sendUserMessage` (Codex 0.98), which queues the input into the active turn. Either way
    /// the model's next request carries it.
    pub async fn steer(
        &self,
        thread_id: &str,
        turn_id: &str,
        input: &[v2::UserInput],
    ) -> Result<(), PeerError> {
        if self.version.has_turn_steer() {
            let params = v2::TurnSteerParams {
                thread_id: thread_id.into(),
                expected_turn_id: turn_id.into(),
                input: input.to_vec(),
            };
            return self.call::<v2::TurnSteer>(&params).await.map(|_| ());
        }
        let params = v1::SendUserMessageParams {
            conversation_id: thread_id.into(),
            items: to_v1(input),
        };
        self.peer
            .request(v1::SEND_USER_MESSAGE, &params, None)
            .await
            .map(|_| ())
    }

    /// How the process ended, if it has.
    pub fn exit_info(&self) -> Option<ExitInfo> {
        self.process.exit_info()
    }

    /// Closes stdin, gives Codex `grace` to exit, then kills the whole process group. Pending
    /// calls fail with [`PeerError::Shutdown`].
    pub async fn shutdown(&self, grace: Duration) -> ExitInfo {
        self.peer.close(PeerError::Shutdown);
        self.process.shutdown(grace).await
    }
}

fn to_v1(input: &[v2::UserInput]) -> Vec<v1::InputItem> {
    input
        .iter()
        .map(|i| match i {
            v2::UserInput::Text { text } => v1::InputItem::Text { text: text.clone() },
            v2::UserInput::Image { url } => v1::InputItem::Image {
                image_url: url.clone(),
            },
            v2::UserInput::LocalImage { path } => v1::InputItem::LocalImage { path: path.clone() },
        })
        .collect()
}

impl Drop for AppServer {
    fn drop(&mut self) {
        self.peer.close(PeerError::Shutdown);
        self.process.signal_group(libc::SIGKILL);
    }
}
