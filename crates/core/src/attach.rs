//! Sessions that live on a Codex daemon the relay attached to (`codex app-server daemon
//! start`, which the `codex` TUI uses): one more place a session can live. A task holds the
//! connection ([`codex_relay_codex::daemon::Daemon`]; reconnecting with backoff), lists the
//! daemon's threads as sessions marked attached, and follows the live ones (`thread/resume`
//! subscribes, without overrides): their events go through the mapper into the same log, their
//! requests through the same broker (rules, notifications, links, every front). The relay
//! never passes overrides on these threads and never stops the daemon; what it lets go of a
//! request is left to the daemon's other clients (see `PeerConfig::shared`). The first answer
//! wins both ways: the relay's answer resolves the terminal's prompt, and the terminal's
//! (`serverRequest/resolved`) withdraws the relay's card.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use codex_relay_codex::daemon::{AttachError, Daemon};
use codex_relay_codex::{AppServerConfig, Peer, PeerError, PeerEvent};
use codex_relay_protocol::v2::{
    ServerNotification, Thread, ThreadList, ThreadListParams, ThreadRead, ThreadReadParams,
    ThreadResume, ThreadResumeParams,
};
use futures::future::BoxFuture;

use crate::relay::Relay;
use crate::session::{Actor, CaughtUp, Door, Flow, Job, SessionHandle, SessionShared};
pub use crate::views::{AttachState, Attached};

/// The backoff between attempts to reach the daemon.
const FIRST_RETRY: Duration = Duration::from_millis(500);
const MAX_RETRY: Duration = Duration::from_secs(30);
/// How long connecting and initializing may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The recent threads listed on attaching.
const RECENT: u32 = 50;

/// The daemon connection the relay holds now (one attachment at a time).
#[derive(Default)]
pub(crate) struct DaemonLink(std::sync::Mutex<Option<Link>>);

/// One live connection to the daemon.
#[derive(Clone)]
pub(crate) struct Link {
    pub socket: String,
    pub peer: Peer,
    pub pid: u32,
    pub version: Option<codex_relay_codex::CodexVersion>,
}

impl DaemonLink {
    pub(crate) fn current(&self) -> Option<Link> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn set(&self, link: Option<Link>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = link;
    }
}

/// Serializes finding-or-making an attached thread's session: the daemon's `thread/started`
/// and a session created on the daemon meet on the same id.
static MAKING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Asks the attachment's task to end.
#[derive(Clone)]
struct CancellationToken(tokio::sync::watch::Sender<bool>);

impl CancellationToken {
    fn new() -> Self {
        Self(tokio::sync::watch::Sender::new(false))
    }

    fn cancel(&self) {
        self.0.send_replace(true);
    }

    fn is_cancelled(&self) -> bool {
        *self.0.borrow()
    }

    async fn cancelled(&self) {
        let mut rx = self.0.subscribe();
        let _ = rx.wait_for(|stopped| *stopped).await;
    }
}

/// The running attachment: dropping it (or [`AttachHandle::stop`]) ends the task and closes
/// the connection; the daemon keeps running.
pub struct AttachHandle {
    stop: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl AttachHandle {
    /// Ends the attachment and waits for its task.
    pub async fn stop(mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for AttachHandle {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Relay {
    /// Attaches to the Codex daemon at `socket` and keeps attached until the handle is
    /// dropped: its threads become sessions of this relay marked attached. A refused socket
    /// (another user's, or in a directory others can enter) is logged with the reason and
    /// tried again like an absent daemon (the user may fix it).
    pub fn attach(&self, socket: PathBuf) -> AttachHandle {
        let stop = CancellationToken::new();
        let task = tokio::spawn(keep_attached(self.clone(), socket, stop.clone()));
        AttachHandle {
            stop,
            task: Some(task),
        }
    }

    /// The session of an attached thread: the one this relay has (marked attached now), or a
    /// new one; `None` for a thread the relay runs in its own Codex (the daemon lists every
    /// thread of its `CODEX_HOME`, the relay's too when they share one).
    pub(crate) fn attached_session(
        &self,
        thread: &Thread,
        attached: &Attached,
    ) -> Option<SessionHandle> {
        let _making = MAKING.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(h) = self.inner.get(&thread.id) {
            // Not attached: the relay's own.
            let now = h.shared.meta().attached?;
            // Followed on this connection already: hearing of it again changes nothing.
            let followed = now.state == AttachState::Live
                && now.daemon_pid == attached.daemon_pid
                && attached.state == AttachState::Idle;
            if !followed {
                mark(&h.shared, attached.clone());
            }
            return Some(h);
        }
        let meta = crate::views::SessionMeta {
            attached: Some(attached.clone()),
            resumed_from_codex: true,
            ..Default::default()
        };
        let state = SessionShared::fresh_state(thread.cwd.clone(), None, meta);
        let shared = SessionShared::new(
            thread.id.clone(),
            self.inner.store.clone(),
            self.inner.config.event_buffer,
            state,
        );
        shared.persist();
        // No slot: the thread runs in the daemon, not in a Codex of this relay.
        Some(self.spawn_session(shared, None, &[], None))
    }

    /// Every session of this relay attached through `socket`.
    fn attached_sessions(&self, socket: &str) -> Vec<SessionHandle> {
        self.inner
            .handles()
            .into_iter()
            .filter(|h| h.shared.meta().attached.is_some_and(|a| a.socket == socket))
            .collect()
    }
}

/// The session of a daemon thread the relay stored but does not hold now (one another
/// instance ran, say): brought back from the store as a restart does, so the thread keeps its
/// one session and its log continues after its last event (a fresh session of the same id
/// would reuse its seqs). `None` when nothing of it is stored.
async fn from_store(relay: &Relay, id: &str) -> Option<SessionHandle> {
    if let Some(h) = relay.inner.get(id) {
        return Some(h);
    }
    // Cheap first: most threads the daemon announces are new to the relay.
    if relay.inner.store.last_seq(id).await.unwrap_or(0) <= 0 {
        return None;
    }
    let only = std::collections::HashSet::from([id.to_owned()]);
    let spawn = |shared| {
        // Another path may have made it meanwhile: that one stays.
        if relay.inner.get(id).is_none() {
            relay.spawn_session(shared, None, &[], None);
        }
    };
    let restored = crate::recovery::restore(crate::recovery::Inputs {
        store: &relay.inner.store,
        event_buffer: relay.inner.config.event_buffer,
        broker: &relay.inner.broker,
        servers: &relay.inner.servers,
        spawn: &spawn,
        only: Some(&only),
        why: crate::recovery::RESTARTED,
    })
    .await;
    if let Err(e) = restored {
        tracing::warn!(thread = id, "bringing the stored session back failed: {e}");
    }
    relay.inner.get(id)
}

/// Records where the session lives now, and stores it. What was heard of the thread's
/// approval policy stays unless `attached` brings news of it.
pub(crate) fn mark(shared: &SessionShared, mut attached: Attached) {
    let changed = shared.with_state(|s| {
        if let Some(old) = &s.meta.attached {
            if attached.approval_policy.is_none() {
                attached.approval_policy = old.approval_policy.clone();
            }
            if attached.policy_changed_by.is_none() {
                attached.policy_changed_by = old.policy_changed_by.clone();
            }
        }
        let changed = s.meta.attached.as_ref() != Some(&attached);
        s.meta.attached = Some(attached);
        changed
    });
    if changed {
        shared.persist();
    }
}

async fn keep_attached(relay: Relay, socket: PathBuf, stop: CancellationToken) {
    let shown = socket.display().to_string();
    let mut client = AppServerConfig::new("codex");
    client.client_name = "codex-relay".into();
    let mut wait = FIRST_RETRY;
    let mut last_error = String::new();
    // Sessions attached before a restart are detached until the daemon answers.
    for h in relay.attached_sessions(&shown) {
        mark(&h.shared, detached(&shown));
    }
    loop {
        let attempt = tokio::select! {
            _ = stop.cancelled() => return,
            a = Daemon::attach(&socket, &client, CONNECT_TIMEOUT) => a,
        };
        match attempt {
            Ok(daemon) => {
                wait = FIRST_RETRY;
                last_error.clear();
                tracing::info!(socket = %shown, pid = daemon.pid(), "attached to the Codex daemon");
                relay.inner.daemon.set(Some(Link {
                    socket: shown.clone(),
                    peer: daemon.peer().clone(),
                    pid: daemon.pid(),
                    version: daemon.version().cloned(),
                }));
                follow_daemon(&relay, &daemon, &shown, &stop).await;
                relay.inner.daemon.set(None);
                // The sessions' actors hold the connection too: closed here, so a stopped
                // attachment follows nothing (a relay opened after it on the same store
                // would otherwise log the same threads twice).
                daemon.peer().close(PeerError::Shutdown);
                for h in relay.attached_sessions(&shown) {
                    mark(&h.shared, detached(&shown));
                }
                if stop.is_cancelled() {
                    return;
                }
                tracing::warn!(socket = %shown, "the Codex daemon went away; its threads are detached until it returns");
            }
            Err(e) => {
                let text = e.to_string();
                if text != last_error {
                    match &e {
                        AttachError::Refused { .. } => tracing::error!("{text}"),
                        _ => tracing::info!("{text}"),
                    }
                    last_error = text;
                }
            }
        }
        // Jittered, so several relays do not knock in step.
        let jitter = Duration::from_millis(u64::from(std::process::id() % 250));
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(wait + jitter) => {}
        }
        wait = (wait * 2).min(MAX_RETRY);
    }
}

fn detached(socket: &str) -> Attached {
    Attached {
        socket: socket.to_owned(),
        state: AttachState::Detached,
        daemon_pid: None,
        approval_policy: None,
        policy_changed_by: None,
    }
}

/// Follows one connection until it closes (or the relay stops): the recent threads first, then
/// every thread another client starts or resumes.
async fn follow_daemon(relay: &Relay, daemon: &Daemon, socket: &str, stop: &CancellationToken) {
    let peer = daemon.peer().clone();
    let mut lifecycle = peer.watch_threads();
    let at = |state| Attached {
        socket: socket.to_owned(),
        state,
        daemon_pid: Some(daemon.pid()),
        approval_policy: None,
        policy_changed_by: None,
    };
    let params = ThreadListParams {
        limit: Some(RECENT),
        source_kinds: Some(
            ["cli", "vscode", "exec", "appServer", "unknown"]
                .iter()
                .map(|s| s.to_string())
                .collect(),
        ),
        ..Default::default()
    };
    match daemon.call::<ThreadList>(&params).await {
        Ok(page) => {
            for thread in page.data.iter().filter(|t| t.spawned_by().is_none()) {
                from_store(relay, &thread.id).await;
                let loaded = thread
                    .status
                    .as_ref()
                    .and_then(|s| s.get("type"))
                    .and_then(|t| t.as_str())
                    .is_some_and(|t| t != "notLoaded");
                let h = relay.attached_session(thread, &at(AttachState::Idle));
                if let Some(h) = h.filter(|_| loaded) {
                    follow(&h, &peer, &at(AttachState::Live)).await;
                }
            }
        }
        Err(e) => tracing::warn!(socket, "thread/list on the Codex daemon failed: {e}"),
    }
    loop {
        let event = tokio::select! {
            _ = stop.cancelled() => return,
            e = lifecycle.recv() => e,
        };
        let n = match event {
            Some(PeerEvent::Notification(n)) => n.notification,
            Some(PeerEvent::Request(_)) => continue,
            Some(PeerEvent::Closed(_)) | None => return,
        };
        match &n {
            // A thread another client started: known now, followed once it runs a turn
            // (resuming it before its first turn fails: it has no rollout yet).
            ServerNotification::ThreadStarted(t) if t.thread.spawned_by().is_none() => {
                from_store(relay, &t.thread.id).await;
                relay.attached_session(&t.thread, &at(AttachState::Idle));
            }
            ServerNotification::ThreadStatusChanged(s) => {
                let kind = s.status.get("type").and_then(|t| t.as_str());
                let h = match from_store(relay, &s.thread_id).await {
                    Some(h) => h,
                    // Started before the relay attached, and not listed yet then (its first
                    // turn had not been written): known from now on.
                    None if kind == Some("active") => {
                        let Some(thread) = read_thread(&peer, &s.thread_id).await else {
                            continue;
                        };
                        match relay.attached_session(&thread, &at(AttachState::Idle)) {
                            Some(h) => h,
                            None => continue,
                        }
                    }
                    None => continue,
                };
                let attached = h.shared.meta().attached;
                let Some(attached) = attached.filter(|a| a.socket == socket) else {
                    continue;
                };
                match kind {
                    Some("active") if attached.state != AttachState::Live => {
                        follow(&h, &peer, &at(AttachState::Live)).await;
                    }
                    Some("notLoaded") => mark(&h.shared, at(AttachState::Idle)),
                    _ => {}
                }
            }
            ServerNotification::Unknown { method, params } if method == "thread/closed" => {
                if let Some(h) = params
                    .get("threadId")
                    .and_then(|t| t.as_str())
                    .and_then(|t| relay.inner.get(t))
                    && h.shared.meta().attached.is_some_and(|a| a.socket == socket)
                {
                    mark(&h.shared, at(AttachState::Idle));
                }
            }
            _ => {}
        }
    }
}

/// A thread as the daemon describes it (`thread/read`), unless it is a sub-agent's (those are
/// followed with the thread that spawned them).
async fn read_thread(peer: &Peer, id: &str) -> Option<Thread> {
    let params = ThreadReadParams {
        thread_id: id.to_owned(),
        include_turns: false,
    };
    match peer.call::<ThreadRead>(&params).await {
        Ok(r) if r.thread.spawned_by().is_none() => Some(r.thread),
        Ok(_) => None,
        Err(e) => {
            tracing::info!(thread = id, "thread/read on the Codex daemon failed: {e}");
            None
        }
    }
}

/// Has the session's actor take the thread's events and requests from the daemon, then
/// subscribes (`thread/resume` with nothing but the thread's id: never an override), off the
/// caller's task. The relay was not subscribed, so what the thread did meanwhile (the turn the
/// terminal started, say) comes only in the answer: the actor logs what it lacks of it before
/// the live events that follow (catch_up.rs). A pending request is replayed to the relay by
/// the resume. A thread that has just started its first turn may have no rollout yet (`no
/// rollout found`): tried again, with backoff, a few times.
async fn follow(h: &SessionHandle, peer: &Peer, attached: &Attached) {
    let Door::Actor(jobs) = &h.door else {
        return;
    };
    // The daemon's list and its status notices can both ask for one thread at once: one
    // subscription is enough, and a second answer would overlap what the first let through.
    let Some(joining) = Joining::begin(&h.shared) else {
        return;
    };
    let follow = Follow {
        peer: peer.clone(),
        catch_up: true,
    };
    if jobs.send(Box::new(follow)).await.is_err() {
        return;
    }
    let (h, jobs, peer, attached) = (h.clone(), jobs.clone(), peer.clone(), attached.clone());
    tokio::spawn(async move {
        let params = ThreadResumeParams {
            thread_id: h.id().to_owned(),
            ..Default::default()
        };
        let mut wait = Duration::from_millis(100);
        let mut thread = None;
        for attempt in 1..=RESUME_ATTEMPTS {
            match peer.call::<ThreadResume>(&params).await {
                Ok(resumed) => {
                    let mut attached = attached;
                    attached.approval_policy = resumed.approval_policy.as_ref().map(policy_word);
                    mark(&h.shared, attached);
                    thread = Some(resumed.thread);
                    break;
                }
                Err(e) if e.is_closed() || attempt == RESUME_ATTEMPTS => {
                    tracing::info!(session = %h.id(), "following the daemon's thread failed: {e}");
                    break;
                }
                Err(_) => {
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(2));
                }
            }
        }
        // Live events wait until this is in (or the resume failed).
        let _ = jobs.send(Box::new(CaughtUp(thread))).await;
        drop(joining);
    });
}

/// The sessions a `thread/resume` is on its way for (by their shared state's address).
static JOINING: std::sync::Mutex<Vec<usize>> = std::sync::Mutex::new(Vec::new());

/// One session's place in [`JOINING`], given back when dropped.
struct Joining(usize);

impl Joining {
    /// `None` when a resume is already on its way for this session.
    fn begin(shared: &Arc<SessionShared>) -> Option<Joining> {
        let key = Arc::as_ptr(shared) as usize;
        let mut joining = JOINING.lock().unwrap_or_else(|e| e.into_inner());
        if joining.contains(&key) {
            return None;
        }
        joining.push(key);
        Some(Joining(key))
    }
}

impl Drop for Joining {
    fn drop(&mut self) {
        JOINING
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|k| *k != self.0);
    }
}

/// How many times `thread/resume` is tried for one thread.
const RESUME_ATTEMPTS: u32 = 8;

/// Points a session's actor at the daemon's connection.
pub(crate) struct Follow {
    pub peer: Peer,
    /// A `thread/resume` answer follows (a [`CaughtUp`]): live events wait for it.
    pub catch_up: bool,
}

impl Job for Follow {
    fn run(self: Box<Self>, actor: &mut Actor) -> BoxFuture<'_, Flow> {
        // Already following on this connection: the subscription (and what it holds) stays.
        if !actor.attached.as_ref().is_some_and(|p| p.same(&self.peer)) || actor.sub.is_none() {
            actor.sub = Some(self.peer.subscribe_thread(&actor.shared.id));
            actor.attached = Some(self.peer);
        }
        actor.catching_up |= self.catch_up;
        Box::pin(std::future::ready(Flow::Continue))
    }
}

/// Whether a session's thread lives on a daemon (its metadata says so), for the actor's
/// verbs: such a thread is never resumed in the relay's own Codex.
pub(crate) fn lives_on_daemon(shared: &Arc<SessionShared>) -> bool {
    shared.meta().attached.is_some()
}

/// An approval policy as one word: Codex's own for the plain ones, `granular` for the
/// per-kind one.
pub(crate) fn policy_word(policy: &serde_json::Value) -> String {
    match policy {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Object(o) => o.keys().next().cloned().unwrap_or_default(),
        other => other.to_string(),
    }
}

/// Who changes an attached thread's settings when the relay did not: it never passes
/// overrides on such a thread, and Codex's `thread/settings/updated` does not name the client.
const ANOTHER_CLIENT: &str = "another client of the Codex daemon";

/// An attached thread's settings as the daemon announced them (`thread/settings/updated`,
/// sent to every subscriber when a client changes them, e.g. with `turn/start` overrides):
/// records a changed approval policy on the session, and returns the note for its log
/// (the thread stops, or starts again, asking for approval).
pub(crate) fn settings_updated(
    shared: &SessionShared,
    params: &serde_json::Value,
) -> Option<String> {
    let policy = params
        .get("threadSettings")
        .and_then(|t| t.get("approvalPolicy"))
        .map(policy_word)?;
    let before = shared.with_state(|s| {
        let a = s.meta.attached.as_mut()?;
        if a.approval_policy.as_deref() == Some(policy.as_str()) {
            return None;
        }
        let before = a.approval_policy.replace(policy.clone());
        if before.is_some() || policy == "never" {
            a.policy_changed_by = Some(ANOTHER_CLIENT.to_owned());
        }
        Some(before)
    })?;
    shared.persist();
    // First heard, and nothing to warn about.
    if before.is_none() && policy != "never" {
        return None;
    }
    let was = before.map(|b| format!(" (was `{b}`)")).unwrap_or_default();
    Some(if policy == "never" {
        format!(
            "This thread no longer asks for approval: {ANOTHER_CLIENT} set its approval policy to `never`{was}, for every client. Codex runs its commands and edits without asking anyone, the relay's rules and notifications included, until a client sets another policy (Codex does not say which client changed it)."
        )
    } else {
        format!(
            "{ANOTHER_CLIENT} set this thread's approval policy to `{policy}`{was}, for every client (Codex does not say which client changed it)."
        )
    })
}
