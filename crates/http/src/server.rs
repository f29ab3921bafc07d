//! The HTTP server loop: accepts connections and serves the app on each with limits a hostile
//! client cannot wear down. A request's headers must arrive within the header timeout (also
//! the idle limit between requests), its body must keep arriving ([`crate::body_deadline`]:
//! after the same time, at a minimum average rate), the number of open connections is capped
//! (at the cap the connection that has waited longest on its client makes room: an idle one,
//! or one only trickling a body without having shown a credential, so half-open and slow ones
//! cannot starve real clients), and a connection from this machine is served only when the
//! [`PeerCheck`] says so (a process of the relay's own Codex trees gets 403 on every request).

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use bytes::Bytes;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use crate::body_deadline::{Deadline, Pace};
use crate::error::ApiError;

/// What a connection may use.
#[derive(Debug, Clone, Copy)]
pub struct ServerLimits {
    /// Connections open at once.
    pub max_connections: usize,
    /// How long a request's headers may take to arrive, how long a connection may sit idle
    /// between requests, and how long a body may take before [`ServerLimits::min_body_rate`]
    /// applies.
    pub header_timeout: Duration,
    /// The slowest a request body may arrive, on average, in bytes per second.
    pub min_body_rate: u64,
}

/// The default [`ServerLimits::min_body_rate`]: 4 KiB/s (a 2 MiB body, the largest taken by
/// default, in under nine minutes).
pub const MIN_BODY_RATE: u64 = 4096;

impl Default for ServerLimits {
    fn default() -> Self {
        Self {
            max_connections: 1024,
            header_timeout: Duration::from_secs(10),
            min_body_rate: MIN_BODY_RATE,
        }
    }
}

/// Put into every request's extensions: the gate marks its connection as one that has shown
/// the relay's token or a browser login, which is then never closed to make room.
#[derive(Debug, Clone)]
pub struct ConnTrust(Arc<AtomicBool>);

impl ConnTrust {
    pub fn mark(&self) {
        self.0.store(true, Ordering::Release);
    }
}

/// Decides whether connections from this machine may be served. Called on a blocking thread
/// with every connection accepted since the last call, as `(peer, local)` pairs; answers one
/// verdict per pair (`Err` says why it is refused).
pub trait PeerCheck: Send + Sync + 'static {
    fn check(&self, conns: &[(SocketAddr, SocketAddr)]) -> Vec<Result<(), String>>;
}

type Verdict = Result<(), String>;

/// Batches the checks: connections accepted while one check runs are checked together next.
#[derive(Clone)]
struct Checker {
    tx: mpsc::UnboundedSender<((SocketAddr, SocketAddr), oneshot::Sender<Verdict>)>,
}

impl Checker {
    fn start(check: Arc<dyn PeerCheck>) -> Self {
        let (tx, mut rx) =
            mpsc::unbounded_channel::<((SocketAddr, SocketAddr), oneshot::Sender<Verdict>)>();
        tokio::spawn(async move {
            while let Some(first) = rx.recv().await {
                let mut batch = vec![first];
                while let Ok(more) = rx.try_recv() {
                    batch.push(more);
                }
                let pairs: Vec<_> = batch.iter().map(|(p, _)| *p).collect();
                let check = check.clone();
                let verdicts = tokio::task::spawn_blocking(move || check.check(&pairs))
                    .await
                    .unwrap_or_else(|e| vec![Err(format!("the check failed: {e}")); batch.len()]);
                for ((_, reply), verdict) in batch.into_iter().zip(verdicts) {
                    let _ = reply.send(verdict);
                }
            }
        });
        Self { tx }
    }

    async fn check(&self, peer: SocketAddr, local: SocketAddr) -> Verdict {
        let (reply, answer) = oneshot::channel();
        if self.tx.send(((peer, local), reply)).is_err() {
            return Err("the peer check is not running".into());
        }
        answer
            .await
            .unwrap_or_else(|_| Err("the peer check stopped".into()))
    }
}

/// One open connection, as the registry sees it.
struct Conn {
    /// Requests being served (a streaming response counts until its body ends).
    busy: Arc<AtomicUsize>,
    /// When it last became idle (ms since the server started).
    idle_since: Arc<AtomicU64>,
    /// Since when a request body is being awaited from the client (ms + 1; 0: none is).
    reading: Arc<AtomicU64>,
    /// Whether it has shown a credential ([`ConnTrust`]).
    trusted: Arc<AtomicBool>,
    evict: CancellationToken,
}

/// A connection's handles, as [`Registry::admit`] gives them to its task.
struct Handles {
    id: u64,
    busy: Arc<AtomicUsize>,
    idle_since: Arc<AtomicU64>,
    reading: Arc<AtomicU64>,
    trusted: Arc<AtomicBool>,
    evict: CancellationToken,
}

/// The open connections.
struct Registry {
    conns: Mutex<HashMap<u64, Conn>>,
    next: AtomicU64,
    started: Instant,
    max: usize,
}

impl Registry {
    fn now(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Since when `c` has been waiting on its client, if it may be closed to make room: idle
    /// (between requests, or before its first), or reading a body without having shown a
    /// credential.
    fn waiting_since(c: &Conn) -> Option<u64> {
        if c.busy.load(Ordering::Acquire) == 0 {
            return Some(c.idle_since.load(Ordering::Acquire));
        }
        let reading = c.reading.load(Ordering::Acquire);
        (reading != 0 && !c.trusted.load(Ordering::Acquire)).then(|| reading - 1)
    }

    /// Admits a connection, making room at the cap by closing the one that has waited longest
    /// on its client ([`Registry::waiting_since`]); `None` when every connection is busy.
    fn admit(&self) -> Option<Handles> {
        let mut conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        if conns.len() >= self.max {
            let victim = conns
                .iter()
                .filter_map(|(id, c)| Some((*id, Self::waiting_since(c)?)))
                .min_by_key(|(_, since)| *since)
                .map(|(id, _)| id)?;
            if let Some(c) = conns.remove(&victim) {
                c.evict.cancel();
            }
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let conn = Conn {
            busy: Arc::default(),
            idle_since: Arc::new(AtomicU64::new(self.now())),
            reading: Arc::default(),
            trusted: Arc::default(),
            evict: CancellationToken::new(),
        };
        let handles = Handles {
            id,
            busy: conn.busy.clone(),
            idle_since: conn.idle_since.clone(),
            reading: conn.reading.clone(),
            trusted: conn.trusted.clone(),
            evict: conn.evict.clone(),
        };
        conns.insert(id, conn);
        Some(handles)
    }

    fn leave(&self, id: u64) {
        self.conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
    }

    fn len(&self) -> usize {
        self.conns.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// Marks its connection busy while alive (a request, then its response body).
struct Busy {
    busy: Arc<AtomicUsize>,
    idle_since: Arc<AtomicU64>,
    registry: Arc<Registry>,
}

impl Busy {
    fn new(busy: Arc<AtomicUsize>, idle_since: Arc<AtomicU64>, registry: Arc<Registry>) -> Self {
        busy.fetch_add(1, Ordering::AcqRel);
        Self {
            busy,
            idle_since,
            registry,
        }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.idle_since
            .store(self.registry.now(), Ordering::Release);
        self.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

struct Tracked {
    inner: Body,
    _busy: Busy,
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// Every request on a refused connection gets this.
fn refused(why: &str) -> axum::Router {
    let why = why.to_owned();
    axum::Router::new().fallback(move || {
        let why = why.clone();
        async move {
            ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden_peer",
                format!(
                    "requests from processes Codex started are refused ({why}): a session must not drive the relay or answer its own approvals"
                ),
            )
            .into_response()
        }
    })
}

/// Serves `app` on `listener` until `shutdown` resolves, then lets open connections finish
/// (their streams end when the caller cancels what feeds them).
pub async fn serve(
    listener: TcpListener,
    app: axum::Router,
    limits: ServerLimits,
    peer_check: Option<Arc<dyn PeerCheck>>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let registry = Arc::new(Registry {
        conns: Mutex::new(HashMap::new()),
        next: AtomicU64::new(0),
        started: Instant::now(),
        max: limits.max_connections.max(1),
    });
    let checker = peer_check.map(Checker::start);
    let stop = CancellationToken::new();
    let stopping = stop.clone();
    tokio::spawn(async move {
        shutdown.await;
        stopping.cancel();
    });
    let tasks = tokio_util::task::TaskTracker::new();
    loop {
        let (stream, peer) = tokio::select! {
            _ = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors (EMFILE) and the like: wait, do not spin.
                    tracing::warn!("accepting a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Ok(local) = stream.local_addr() else {
            continue;
        };
        let Some(Handles {
            id,
            busy,
            idle_since,
            reading,
            trusted,
            evict,
        }) = registry.admit()
        else {
            tracing::warn!(
                open = registry.len(),
                "connection refused: every connection is busy (--max-connections)"
            );
            drop(stream);
            continue;
        };
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!("TCP_NODELAY: {e}");
        }
        let app = app.clone();
        let checker = checker.clone();
        let registry = registry.clone();
        let stop = stop.clone();
        tasks.spawn(async move {
            let app = match &checker {
                Some(c) => match c.check(peer, local).await {
                    Ok(()) => app,
                    Err(why) => {
                        tracing::warn!(target: "codex_relay::security", %peer, "connection refused: {why}");
                        refused(&why)
                    }
                },
                None => app,
            };
            let served = Arc::new(AtomicUsize::new(0));
            let pace = Pace {
                grace: limits.header_timeout,
                min_rate: limits.min_body_rate,
            };
            let service = {
                let (busy, idle_since, registry, served, evict) = (
                    busy.clone(),
                    idle_since.clone(),
                    registry.clone(),
                    served.clone(),
                    evict.clone(),
                );
                hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    served.fetch_add(1, Ordering::Relaxed);
                    let guard = Busy::new(busy.clone(), idle_since.clone(), registry.clone());
                    let mut req = req.map(|body| {
                        Body::new(Deadline::new(
                            body,
                            pace,
                            reading.clone(),
                            registry.now(),
                            evict.clone(),
                        ))
                    });
                    req.extensions_mut().insert(ConnectInfo(peer));
                    req.extensions_mut().insert(ConnTrust(trusted.clone()));
                    let app = app.clone();
                    async move {
                        let res = app.oneshot(req).await.unwrap_or_else(|e| match e {});
                        Ok::<_, Infallible>(res.map(|inner| {
                            Body::new(Tracked {
                                inner,
                                _busy: guard,
                            })
                        }))
                    }
                })
            };
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .keep_alive(true);
            let conn = builder.serve_connection(TokioIo::new(stream), service);
            let mut conn = std::pin::pin!(conn);
            // A connection that never completes a request is closed after the header timeout
            // even if it trickles bytes (hyper's own timer covers each request's headers).
            let first = tokio::time::sleep(limits.header_timeout);
            let mut first = std::pin::pin!(first);
            let mut draining = false;
            let mut first_checked = false;
            loop {
                tokio::select! {
                    r = conn.as_mut() => {
                        if let Err(e) = r {
                            tracing::trace!("connection from {peer}: {e}");
                        }
                        break;
                    }
                    _ = evict.cancelled() => {
                        tracing::debug!(%peer, "connection closed (to make room, or its body was too slow)");
                        break;
                    }
                    // (A `select!` condition is read only when the loop comes round, so the
                    // timer fires once and then looks whether a request came meanwhile.)
                    _ = &mut first, if !first_checked => {
                        first_checked = true;
                        if served.load(Ordering::Relaxed) == 0 {
                            tracing::debug!(%peer, "no request within the header timeout");
                            break;
                        }
                    }
                    _ = stop.cancelled(), if !draining => {
                        draining = true;
                        conn.as_mut().graceful_shutdown();
                    }
                }
            }
            registry.leave(id);
        });
    }
    tasks.close();
    tasks.wait().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry(max: usize) -> Registry {
        Registry {
            conns: Mutex::new(HashMap::new()),
            next: AtomicU64::new(0),
            started: Instant::now(),
            max,
        }
    }

    #[test]
    fn at_the_cap_the_longest_idle_connection_makes_room() {
        let r = registry(2);
        let a = r.admit().unwrap();
        let b = r.admit().unwrap();
        // a is busy: b (idle) goes.
        a.busy.fetch_add(1, Ordering::AcqRel);
        a.idle_since.store(0, Ordering::Release);
        let c = r.admit().unwrap();
        assert!(b.evict.is_cancelled() && !a.evict.is_cancelled());
        // Everyone busy: no room.
        c.busy.fetch_add(1, Ordering::AcqRel);
        assert!(r.admit().is_none());
        r.leave(a.id);
        assert!(r.admit().is_some());
    }

    #[test]
    fn at_the_cap_a_body_trickled_without_a_credential_makes_room_too() {
        let r = registry(3);
        // Three busy connections: one reading a body since 5 (no credential), one reading
        // since 1 but authenticated, one serving a response.
        let slow = r.admit().unwrap();
        let trusted = r.admit().unwrap();
        let serving = r.admit().unwrap();
        for h in [&slow, &trusted, &serving] {
            h.busy.fetch_add(1, Ordering::AcqRel);
        }
        slow.reading.store(5 + 1, Ordering::Release);
        trusted.reading.store(1 + 1, Ordering::Release);
        trusted.trusted.store(true, Ordering::Release);
        r.admit().unwrap();
        assert!(
            slow.evict.is_cancelled(),
            "the untrusted slow body made room"
        );
        assert!(!trusted.evict.is_cancelled() && !serving.evict.is_cancelled());
        // An idle connection and a slow body: whichever has waited longer on its client goes
        // (here the body, waiting since 0, before the connection idle since 50).
        let older = registry(2);
        let x = older.admit().unwrap();
        let y = older.admit().unwrap();
        x.busy.fetch_add(1, Ordering::AcqRel);
        x.reading.store(1, Ordering::Release);
        y.idle_since.store(50, Ordering::Release);
        older.admit().unwrap();
        assert!(x.evict.is_cancelled() && !y.evict.is_cancelled());
    }
}
