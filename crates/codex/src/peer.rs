//! The JSON-RPC peer over a line stream: correlates responses, routes notifications and
//! server requests by thread, retries "overloaded", and fails everything cleanly on close.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use codex_relay_protocol::jsonrpc::{
    Incoming, OutgoingNotification, OutgoingRequest, OutgoingResponse,
};
use codex_relay_protocol::v2::{ClientRequest, ServerNotification, ServerRequest};
use codex_relay_protocol::{RequestId, RpcError};
use futures::StreamExt;
use serde::Serialize;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};
use tokio_util::codec::FramedRead;

use crate::backoff::backoff;
use crate::codec::{BoundedLines, Frame};
use crate::error::PeerError;
use crate::flow::InFlight;
pub use crate::flow::ReadGate;
use crate::responder::Responder;
use crate::routes::{Delivery, Routes};

/// Tunables of the peer.
#[derive(Debug, Clone)]
pub struct PeerConfig {
    /// How long one request may wait for its answer.
    pub request_timeout: Duration,
    /// Longest line accepted from the peer; longer ones are skipped with a warning.
    pub max_line_bytes: usize,
    /// Retries of a request refused with -32001 "overloaded".
    pub overload_retries: u32,
    pub overload_base_delay: Duration,
    pub overload_max_delay: Duration,
    /// Backpressure: while this reads `false` the peer stops reading Codex's stdout, so the
    /// pipe fills and Codex waits (the relay closes it while its store falls behind).
    pub read_gate: Option<ReadGate>,
    /// A shared app-server (the Codex daemon, where other clients see the same requests): a
    /// request failed closed or dropped unanswered is left to the other clients rather than
    /// declined; only a deliberate answer is sent.
    pub shared: bool,
}

impl Default for PeerConfig {
    fn default() -> Self {
        Self {
            request_timeout: Duration::from_secs(60),
            max_line_bytes: 32 * 1024 * 1024,
            overload_retries: 5,
            overload_base_delay: Duration::from_millis(100),
            overload_max_delay: Duration::from_secs(2),
            read_gate: None,
            shared: false,
        }
    }
}

/// A notification, typed, with the raw line it came from.
#[derive(Debug, Clone)]
pub struct Notification {
    pub notification: ServerNotification,
    pub raw: Arc<String>,
}

/// A server request waiting for an answer. Dropping it answers fail-closed.
#[derive(Debug)]
pub struct IncomingRequest {
    pub responder: Responder,
    pub raw: Arc<String>,
}

impl IncomingRequest {
    pub fn request(&self) -> &ServerRequest {
        self.responder.request()
    }
}

/// What a subscriber receives.
#[derive(Debug)]
pub enum PeerEvent {
    Notification(Notification),
    Request(IncomingRequest),
    /// The last event: the connection is gone, and why.
    Closed(PeerError),
}

/// A stream of events for one thread (or for everything unrouted); unsubscribes on drop.
pub struct Subscription {
    rx: mpsc::UnboundedReceiver<PeerEvent>,
    inner: Weak<Inner>,
    thread: Option<String>,
    key: u64,
}

impl Subscription {
    /// The next event; `None` after [`PeerEvent::Closed`] has been received.
    pub async fn recv(&mut self) -> Option<PeerEvent> {
        let event = self.rx.recv().await;
        self.received(event.is_some() as usize);
        event
    }

    pub fn try_recv(&mut self) -> Option<PeerEvent> {
        let event = self.rx.try_recv().ok();
        self.received(event.is_some() as usize);
        event
    }

    fn received(&self, n: usize) {
        if n > 0
            && let Some(inner) = self.inner.upgrade()
        {
            inner.in_flight.received(n);
        }
    }

    /// Also receives the events of `thread` (a sub-agent of this subscription's thread, known
    /// from the store or `thread/list`), including those parked for it so far. New sub-agents
    /// are followed automatically when their `thread/started` names a followed parent.
    pub fn follow(&self, thread: &str) -> bool {
        match (self.inner.upgrade(), &self.thread) {
            (Some(inner), Some(own)) => inner.routes().follow(own, thread),
            _ => false,
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.upgrade() {
            inner.routes().remove(self.thread.as_deref(), self.key);
            inner.in_flight.received(self.rx.len());
        }
    }
}

enum Reply {
    Ok(Value),
    Err(RpcError),
    Closed(PeerError),
}

pub(crate) struct Inner {
    out: mpsc::UnboundedSender<String>,
    next_id: AtomicI64,
    pending: Mutex<HashMap<RequestId, oneshot::Sender<Reply>>>,
    routes: Mutex<Routes>,
    closed: Mutex<Option<PeerError>>,
    pub(crate) config: PeerConfig,
    /// Notifications delivered to subscribers and not yet received by them.
    in_flight: InFlight,
    /// Set by the first line that is a JSON-RPC message.
    saw_message: AtomicBool,
    /// The first line that was not one, when it came before any message (a preview).
    junk_first: Mutex<Option<String>>,
    /// Becomes true when the reader task has handled its last line.
    reader_done: tokio::sync::watch::Sender<bool>,
}

/// A cheap, cloneable handle to one JSON-RPC connection.
#[derive(Clone)]
pub struct Peer {
    inner: Arc<Inner>,
}

/// Resolves to the error callers see when the underlying process has exited.
pub type ExitFuture = Pin<Box<dyn Future<Output = PeerError> + Send>>;

impl Peer {
    /// Starts the reader and writer tasks over a line stream. `exit`, when given, resolves once
    /// the process behind the stream has exited; it supplies the close error (status, stderr).
    pub fn spawn<R, W>(reader: R, writer: W, config: PeerConfig, exit: Option<ExitFuture>) -> Peer
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (out, out_rx) = mpsc::unbounded_channel();
        let inner = Arc::new(Inner {
            out,
            next_id: AtomicI64::new(0),
            pending: Mutex::new(HashMap::new()),
            routes: Mutex::new(Routes::default()),
            closed: Mutex::new(None),
            config,
            in_flight: InFlight::default(),
            saw_message: AtomicBool::new(false),
            junk_first: Mutex::new(None),
            reader_done: tokio::sync::watch::Sender::new(false),
        });
        tokio::spawn(write_loop(out_rx, writer, Arc::downgrade(&inner)));
        tokio::spawn(read_loop(inner.clone(), reader, exit));
        Peer { inner }
    }

    /// Whether `other` is a handle to the same connection.
    pub fn same(&self, other: &Peer) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Sends a typed request and waits for its typed answer.
    pub async fn call<R: ClientRequest>(
        &self,
        params: &R::Params,
    ) -> Result<R::Response, PeerError> {
        let value = self.request(R::METHOD, params, None).await?;
        serde_json::from_value(value).map_err(|e| PeerError::Decode {
            method: R::METHOD.to_owned(),
            detail: e.to_string(),
        })
    }

    /// Sends a request and waits for the answer, retrying while Codex says it is overloaded.
    pub async fn request<P: Serialize + ?Sized>(
        &self,
        method: &str,
        params: &P,
        timeout: Option<Duration>,
    ) -> Result<Value, PeerError> {
        let params = serde_json::to_value(params).map_err(|e| PeerError::Encode {
            method: method.to_owned(),
            detail: e.to_string(),
        })?;
        let cfg = &self.inner.config;
        let timeout = timeout.unwrap_or(cfg.request_timeout);
        let mut attempt = 0;
        loop {
            match self.request_once(method, &params, timeout).await {
                Err(PeerError::Rpc { error, .. }) if error.is_overloaded() => {
                    attempt += 1;
                    if attempt > cfg.overload_retries {
                        return Err(PeerError::Overloaded {
                            method: method.to_owned(),
                            attempts: attempt,
                        });
                    }
                    let delay = backoff(attempt, cfg.overload_base_delay, cfg.overload_max_delay);
                    tracing::debug!(method, attempt, ?delay, "codex is overloaded; retrying");
                    tokio::time::sleep(delay).await;
                }
                other => return other,
            }
        }
    }

    async fn request_once(
        &self,
        method: &str,
        params: &Value,
        timeout: Duration,
    ) -> Result<Value, PeerError> {
        let id = RequestId::Integer(self.inner.next_id.fetch_add(1, Ordering::Relaxed));
        let line = serde_json::to_string(&OutgoingRequest {
            id: &id,
            method,
            params,
        })
        .map_err(|e| PeerError::Encode {
            method: method.to_owned(),
            detail: e.to_string(),
        })?;
        let (tx, rx) = oneshot::channel();
        self.inner.pending().insert(id.clone(), tx);
        if let Some(err) = self.inner.closed_error() {
            self.inner.pending().remove(&id);
            return Err(err);
        }
        if self.inner.out.send(line).is_err() {
            self.inner.pending().remove(&id);
            return Err(self.inner.closed_error().unwrap_or(PeerError::Shutdown));
        }
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(Reply::Ok(v))) => Ok(v),
            Ok(Ok(Reply::Err(error))) => Err(classify_rpc_error(method, error)),
            Ok(Ok(Reply::Closed(err))) => Err(err),
            Ok(Err(_)) => Err(self.inner.closed_error().unwrap_or(PeerError::Shutdown)),
            Err(_) => {
                self.inner.pending().remove(&id);
                Err(PeerError::Timeout {
                    method: method.to_owned(),
                    after: timeout,
                })
            }
        }
    }

    /// Sends a notification.
    pub fn notify<P: Serialize>(&self, method: &str, params: Option<&P>) -> Result<(), PeerError> {
        if let Some(err) = self.inner.closed_error() {
            return Err(err);
        }
        let line =
            serde_json::to_string(&OutgoingNotification { method, params }).map_err(|e| {
                PeerError::Encode {
                    method: method.to_owned(),
                    detail: e.to_string(),
                }
            })?;
        self.inner.out.send(line).map_err(|_| PeerError::Shutdown)
    }

    /// Receives every notification and server request of one thread, including those that
    /// arrived (and were parked) before this call. Replaces an earlier subscriber.
    pub fn subscribe_thread(&self, thread_id: &str) -> Subscription {
        let (tx, rx) = mpsc::unbounded_channel();
        let (key, parked) = self.inner.routes().add_thread(thread_id, tx.clone());
        for event in parked {
            let _ = tx.send(event);
        }
        self.finish_subscribe(tx, rx, Some(thread_id.to_owned()), key)
    }

    /// Receives a copy of every thread's lifecycle notifications (`thread/started`,
    /// `thread/status/changed`, `thread/closed`), whoever else receives them: a client of a
    /// shared app-server (the Codex daemon) learns of the threads other clients run.
    pub fn watch_threads(&self) -> Subscription {
        let (tx, rx) = mpsc::unbounded_channel();
        let key = self.inner.routes().set_watch(tx.clone());
        self.finish_subscribe(tx, rx, None, key)
    }

    /// Receives thread-less notifications and server requests of threads nobody subscribed to.
    /// Without it such requests are answered fail-closed at once.
    pub fn subscribe_default(&self) -> Subscription {
        let (tx, rx) = mpsc::unbounded_channel();
        let key = self.inner.routes().set_default(tx.clone());
        self.finish_subscribe(tx, rx, None, key)
    }

    fn finish_subscribe(
        &self,
        tx: mpsc::UnboundedSender<PeerEvent>,
        rx: mpsc::UnboundedReceiver<PeerEvent>,
        thread: Option<String>,
        key: u64,
    ) -> Subscription {
        if let Some(err) = self.inner.closed_error() {
            let _ = tx.send(PeerEvent::Closed(err));
        }
        Subscription {
            rx,
            inner: Arc::downgrade(&self.inner),
            thread,
            key,
        }
    }

    /// The close error, once the connection is gone.
    /// What the peer wrote before its first JSON-RPC message, if that was not one (a wrapper
    /// or another program printing to stdout): a preview of the first such line.
    pub fn junk_before_first_message(&self) -> Option<String> {
        self.inner
            .junk_first
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Resolves once the reader task has handled every line it will read (stdout ended).
    pub async fn reader_finished(&self) {
        let mut done = self.inner.reader_done.subscribe();
        let _ = done.wait_for(|d| *d).await;
    }

    pub fn closed(&self) -> Option<PeerError> {
        self.inner.closed_error()
    }

    /// Closes the connection: pending calls and subscribers get `err`.
    pub fn close(&self, err: PeerError) {
        self.inner.close(err);
    }
}

impl Inner {
    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<RequestId, oneshot::Sender<Reply>>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn routes(&self) -> std::sync::MutexGuard<'_, Routes> {
        self.routes.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn closed_error(&self) -> Option<PeerError> {
        self.closed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub(crate) fn send_response(&self, id: &RequestId, answer: Result<Value, RpcError>) -> bool {
        let (result, error) = match &answer {
            Ok(v) => (Some(v), None),
            Err(e) => (None, Some(e)),
        };
        match serde_json::to_string(&OutgoingResponse { id, result, error }) {
            Ok(line) => self.out.send(line).is_ok() && self.closed_error().is_none(),
            Err(e) => {
                tracing::error!(%id, "could not encode an answer: {e}");
                false
            }
        }
    }

    fn close(&self, err: PeerError) {
        {
            let mut closed = self.closed.lock().unwrap_or_else(|e| e.into_inner());
            if closed.is_some() {
                return;
            }
            *closed = Some(err.clone());
        }
        tracing::debug!("peer closed: {err}");
        let pending: Vec<_> = self.pending().drain().map(|(_, tx)| tx).collect();
        for tx in pending {
            let _ = tx.send(Reply::Closed(err.clone()));
        }
        let subscribers = self.routes().drain();
        for tx in subscribers {
            let _ = tx.send(PeerEvent::Closed(err.clone()));
        }
    }

    fn junk(&self, what: String) {
        if !self.saw_message.load(Ordering::Acquire) {
            let mut first = self.junk_first.lock().unwrap_or_else(|e| e.into_inner());
            first.get_or_insert(what);
        }
    }

    fn handle_line(self: &Arc<Self>, line: String) {
        let incoming = match Incoming::parse(&line) {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!("skipping a line from codex: {e}: {}", preview(&line));
                self.junk(preview(&line));
                return;
            }
        };
        self.saw_message.store(true, Ordering::Release);
        match incoming {
            Incoming::Response { id, result } => self.complete(id, Reply::Ok(result)),
            Incoming::Error {
                id: Some(id),
                error,
            } => self.complete(id, Reply::Err(error)),
            Incoming::Error { id: None, error } => {
                tracing::warn!("codex reported an error with no id: {error}")
            }
            Incoming::Notification { method, params } => {
                let notification = ServerNotification::try_from_params(&method, &params)
                    .unwrap_or_else(|e| {
                        tracing::warn!("{e}; kept raw");
                        ServerNotification::raw(&method, &params)
                    });
                let thread = notification.thread_id().map(str::to_owned);
                // A sub-agent's thread belongs to whoever receives the thread that spawned it;
                // routed here, before any of the child's own later lines is read, and after
                // this notification (which tells the subscriber who the child is), followed by
                // what was parked for the child so far.
                let spawned: Vec<(String, String)> = crate::routes::spawned_threads(&notification)
                    .into_iter()
                    .map(|(p, c)| (p.to_owned(), c.to_owned()))
                    .collect();
                let event = PeerEvent::Notification(Notification {
                    notification,
                    raw: Arc::new(line),
                });
                let mut routes = self.routes();
                if routes.copy_to_watch(&event) {
                    self.in_flight.delivered();
                }
                match routes.deliver(thread.as_deref(), event) {
                    Delivery::Delivered => self.in_flight.delivered(),
                    Delivery::Parked => {}
                    Delivery::Nobody(_) => {
                        tracing::debug!(method, "notification with no subscriber");
                    }
                }
                for (parent, child) in &spawned {
                    routes.follow(parent, child);
                }
            }
            Incoming::Request { id, method, params } => {
                let request =
                    ServerRequest::try_from_params(&method, &params).unwrap_or_else(|e| {
                        tracing::warn!(
                            "{e}; kept raw (answered fail-closed unless a handler knows it)"
                        );
                        ServerRequest::raw(&method, &params)
                    });
                let thread = request.thread_id().map(str::to_owned);
                let responder = Responder::new(id, request, Arc::downgrade(self));
                let event = PeerEvent::Request(IncomingRequest {
                    responder,
                    raw: Arc::new(line),
                });
                let undelivered = self.routes().deliver(thread.as_deref(), event);
                if let Delivery::Nobody(event) = undelivered
                    && let PeerEvent::Request(req) = *event
                {
                    req.responder.fail_closed(&format!(
                        "no handler is subscribed for {}",
                        thread.map_or("this request".to_owned(), |t| format!("thread {t}"))
                    ));
                }
            }
        }
    }

    fn complete(&self, id: RequestId, reply: Reply) {
        match self.pending().remove(&id) {
            Some(tx) => {
                let _ = tx.send(reply);
            }
            None => {
                tracing::warn!(%id, "answer to a request that is not pending (timed out, or never sent)")
            }
        }
    }
}

fn classify_rpc_error(method: &str, error: RpcError) -> PeerError {
    let m = error.message.to_ascii_lowercase();
    if error.code == RpcError::INVALID_REQUEST
        && (m.contains("unknown variant") || m.contains("unknown method"))
    {
        return PeerError::Unsupported {
            method: method.to_owned(),
            detail: error.message,
        };
    }
    PeerError::Rpc {
        method: method.to_owned(),
        error,
    }
}

fn preview(line: &str) -> String {
    let mut end = line.len().min(200);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    if end < line.len() {
        format!("{}… ({} bytes)", &line[..end], line.len())
    } else {
        line.to_owned()
    }
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut rx: mpsc::UnboundedReceiver<String>,
    mut writer: W,
    inner: Weak<Inner>,
) {
    while let Some(mut line) = rx.recv().await {
        line.push('\n');
        let result = async {
            writer.write_all(line.as_bytes()).await?;
            writer.flush().await
        }
        .await;
        if let Err(e) = result {
            // A failed write almost always means Codex died: its exit (status, stderr) is the
            // better answer for every pending call, and the reader gives it once the exit is
            // seen. Only a Codex that closed its stdin and lives on is left to this error.
            tokio::time::sleep(WRITE_FAILURE_GRACE).await;
            if let Some(inner) = inner.upgrade() {
                inner.close(PeerError::Disconnected(format!(
                    "writing to codex failed: {e}"
                )));
            }
            return;
        }
    }
    let _ = writer.shutdown().await;
}

/// How long a failed write waits for the process's exit to close the peer instead (the
/// reader closes it `DRAIN_AFTER_EXIT` after the exit is seen).
const WRITE_FAILURE_GRACE: Duration = Duration::from_secs(3);

/// How long to keep reading buffered lines after the process exited.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(300);
/// How long to wait for the exit status after stdout closed.
const EXIT_AFTER_EOF: Duration = Duration::from_millis(700);

async fn read_loop<R: AsyncRead + Unpin>(inner: Arc<Inner>, reader: R, exit: Option<ExitFuture>) {
    let mut frames = FramedRead::new(reader, BoundedLines::new(inner.config.max_line_bytes));
    let mut exit = exit;
    let handle = |inner: &Arc<Inner>, frame: Frame| match frame {
        Frame::Line(line) => inner.handle_line(line),
        Frame::Overlong { bytes } => {
            tracing::warn!(
                bytes,
                limit = inner.config.max_line_bytes,
                "skipping a line from codex longer than the limit"
            );
            inner.junk(format!("a line of {bytes} bytes, over the limit"));
        }
        Frame::NotUtf8 { bytes } => {
            tracing::warn!(bytes, "skipping a line from codex that is not UTF-8");
            inner.junk(format!("a line of {bytes} bytes that is not UTF-8"));
        }
    };
    let mut gate = inner.config.read_gate.clone();
    let err = loop {
        if let Some(gate) = gate.as_mut().filter(|g| !*g.0.borrow()) {
            tracing::debug!("the store is behind: pausing reads from codex");
            let exited = match &mut exit {
                Some(exit_fut) => tokio::select! {
                    () = gate.opened() => None,
                    err = exit_fut => Some(err),
                },
                None => {
                    gate.opened().await;
                    None
                }
            };
            if let Some(err) = exited {
                exit = Some(Box::pin(std::future::ready(err)));
            }
        }
        let next = match &mut exit {
            // Lines first: the exit future is only polled when no line is ready, not once per
            // line (each poll of it takes a lock); once it resolves, what is left is drained.
            Some(exit_fut) => tokio::select! {
                biased;
                frame = frames.next() => Ok(frame),
                err = exit_fut => Err(err),
            },
            None => Ok(frames.next().await),
        };
        match next {
            Ok(Some(Ok(frame))) => {
                handle(&inner, frame);
                inner.in_flight.throttle().await;
            }
            Ok(Some(Err(e))) => {
                break PeerError::Disconnected(format!("reading from codex failed: {e}"));
            }
            Ok(None) => {
                let eof = PeerError::Disconnected("codex closed its stdout".into());
                break match exit.take() {
                    Some(f) => tokio::time::timeout(EXIT_AFTER_EOF, f).await.unwrap_or(eof),
                    None => eof,
                };
            }
            Err(err) => {
                let deadline = tokio::time::Instant::now() + DRAIN_AFTER_EXIT;
                while let Ok(Some(Ok(frame))) =
                    tokio::time::timeout_at(deadline, frames.next()).await
                {
                    handle(&inner, frame);
                }
                break err;
            }
        }
    };
    inner.close(err);
    inner.reader_done.send_replace(true);
}
