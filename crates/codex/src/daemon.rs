//! Attaching to the Codex daemon the terminal uses (`codex app-server daemon start`; the
//! `codex` TUI attaches to it by default since 0.169): its control socket, checked first
//! ([`crate::platform::daemon_socket`]: the socket has no authentication), spoken to as
//! WebSocket over the Unix socket (one JSON-RPC message per text frame), bridged to the same
//! line-based [`Peer`] the relay uses for the Codex processes it starts, then the handshake.
//! The daemon is never stopped from here: dropping a [`Daemon`] only closes the connection.

use std::path::{Path, PathBuf};
use std::time::Duration;

use codex_relay_protocol::v2::{self, ClientRequest, InitializeResponse};
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;

use crate::app_server::{AppServerConfig, initialize_params};
use crate::peer::{Peer, PeerConfig};
use crate::platform::daemon_socket::{self, SocketRefused};
use crate::version::CodexVersion;

/// Where the daemon's socket is under `CODEX_HOME` (a symbolic link into a per-user 0700
/// directory).
pub const SOCKET_IN_HOME: &str = "app-server-control/app-server-control.sock";

/// `CODEX_HOME`, else `~/.codex` (where Codex keeps its state); `None` without either.
pub fn codex_home() -> Option<PathBuf> {
    std::env::var_os("CODEX_HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".codex")))
}

/// The daemon's socket under `home`.
pub fn default_socket(home: &Path) -> PathBuf {
    home.join(SOCKET_IN_HOME)
}

/// Why the relay could not attach.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    #[error("refused to attach to {socket}: {reason}")]
    Refused {
        socket: PathBuf,
        reason: SocketRefused,
    },
    #[error(
        "no Codex daemon answers at {socket} ({error}); start one with `codex app-server daemon start`"
    )]
    NotRunning { socket: PathBuf, error: String },
    #[error("the Codex daemon at {socket} did not accept the WebSocket handshake: {error}")]
    WebSocket { socket: PathBuf, error: String },
    #[error("the Codex daemon at {socket} did not initialize: {error}")]
    Initialize {
        socket: PathBuf,
        error: crate::PeerError,
    },
}

/// A connection to a Codex daemon, initialized.
pub struct Daemon {
    peer: Peer,
    pid: u32,
    socket: PathBuf,
    version: Option<CodexVersion>,
    init: InitializeResponse,
}

impl Daemon {
    /// Checks the socket, connects, checks who serves it, and initializes as `client`.
    pub async fn attach(
        socket: &Path,
        client: &AppServerConfig,
        timeout: Duration,
    ) -> Result<Daemon, AttachError> {
        let refused = |reason| AttachError::Refused {
            socket: socket.to_owned(),
            reason,
        };
        let real = daemon_socket::check(socket).map_err(refused)?;
        let stream =
            tokio::net::UnixStream::connect(&real)
                .await
                .map_err(|e| AttachError::NotRunning {
                    socket: socket.to_owned(),
                    error: e.to_string(),
                })?;
        let pid = {
            use std::os::fd::AsFd;
            daemon_socket::peer_of(stream.as_fd()).map_err(refused)?
        };
        crate::platform::peers::watch_daemon(pid);
        let (ws, _) = tokio::time::timeout(
            timeout,
            tokio_tungstenite::client_async("ws://localhost/", stream),
        )
        .await
        .map_err(|_| AttachError::WebSocket {
            socket: socket.to_owned(),
            error: format!("no answer within {timeout:?}"),
        })?
        .map_err(|e| AttachError::WebSocket {
            socket: socket.to_owned(),
            error: e.to_string(),
        })?;
        // Its requests reach every client: what the relay lets go stays for the others.
        let config = PeerConfig {
            shared: true,
            ..client.peer.clone()
        };
        let peer = bridge(ws, config);
        let params = initialize_params(client);
        let init = peer
            .request(v2::Initialize::METHOD, &params, Some(timeout))
            .await
            .and_then(|v| {
                serde_json::from_value::<InitializeResponse>(v).map_err(|e| {
                    crate::PeerError::Decode {
                        method: v2::Initialize::METHOD.into(),
                        detail: e.to_string(),
                    }
                })
            })
            .map_err(|error| AttachError::Initialize {
                socket: socket.to_owned(),
                error,
            })?;
        peer.notify::<()>("initialized", None)
            .map_err(|error| AttachError::Initialize {
                socket: socket.to_owned(),
                error,
            })?;
        let version = CodexVersion::find_in(&init.user_agent);
        tracing::info!(pid, socket = %socket.display(), user_agent = %init.user_agent, "attached to the Codex daemon");
        Ok(Daemon {
            peer,
            pid,
            socket: socket.to_owned(),
            version,
            init,
        })
    }

    pub fn peer(&self) -> &Peer {
        &self.peer
    }

    /// The daemon's app-server process (from the kernel's record of the connection).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    pub fn version(&self) -> Option<&CodexVersion> {
        self.version.as_ref()
    }

    pub fn initialize_response(&self) -> &InitializeResponse {
        &self.init
    }

    /// Sends a typed request.
    pub async fn call<R: ClientRequest>(
        &self,
        params: &R::Params,
    ) -> Result<R::Response, crate::PeerError> {
        self.peer.call::<R>(params).await
    }
}

/// Runs a [`Peer`] over a WebSocket: each text frame in is one line to the peer, each line
/// out one text frame. The peer sees the connection close when the socket does.
fn bridge<S>(ws: tokio_tungstenite::WebSocketStream<S>, config: PeerConfig) -> Peer
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sink, mut frames) = ws.split();
    let (peer_in, mut to_peer) = tokio::io::duplex(256 * 1024);
    let (peer_out, from_peer) = tokio::io::duplex(256 * 1024);
    tokio::spawn(async move {
        while let Some(frame) = frames.next().await {
            let text = match frame {
                Ok(Message::Text(t)) => t,
                Ok(Message::Close(_)) | Err(_) => break,
                // Pings are answered by the library; binary frames carry nothing of the protocol.
                Ok(_) => continue,
            };
            if to_peer.write_all(text.as_bytes()).await.is_err()
                || to_peer.write_all(b"\n").await.is_err()
            {
                break;
            }
        }
        let _ = to_peer.shutdown().await;
    });
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(from_peer).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if sink.send(Message::text(line)).await.is_err() {
                return;
            }
        }
        let _ = sink.close().await;
    });
    Peer::spawn(peer_in, peer_out, config, None)
}
