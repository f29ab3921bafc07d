//! The relay: one `codex app-server` (restarted on demand) serving many sessions, the broker,
//! the store, and the API every front calls.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use codex_relay_codex::AppServer;
use codex_relay_protocol::v2::ThreadStartParams;
use tokio::sync::mpsc;

use crate::broker::{Broker, PendingView};
use crate::error::RelayError;
use crate::pool::{CodexProcessView, Pool};
use crate::session::{Actor, SayInput, SayOutcome, SessionHandle, SessionShared, SessionSnapshot};
use crate::slots::{SlotGuard, Slots};
use crate::store::Store;
pub use crate::tool::{DynamicTool, ToolHandler};

pub use crate::config::{CreateOptions, DEFAULT_SESSIONS_PER_CODEX, STORE_FAULT_AT_SHUTDOWN};
pub use crate::relay_config::RelayConfig;

pub(crate) struct RelayInner {
    pub config: RelayConfig,
    pub store: Store,
    pub broker: Broker,
    pub servers: Pool,
    pub slots: Slots,
    sessions: Mutex<HashMap<String, SessionHandle>>,
    pub(crate) feed: Arc<crate::feed::Feed>,
    /// Answer links' signing key (this process only).
    pub(crate) links: crate::links::Links,
    /// Fresh isolated copies the relay made itself for sessions continued after their copy was
    /// gone (see `workspace/resume.rs`); each removed when its session closes or the relay ends.
    pub(crate) copies: Mutex<HashMap<String, crate::workspace::Workspace>>,
    /// Where its sessions run (alone: all here; see placement.rs).
    pub(crate) placement: std::sync::OnceLock<Arc<dyn crate::placement::Placement>>,
    /// The Codex daemon the relay is attached to now, if any (attach.rs): where a session
    /// created with `on_daemon` starts.
    pub(crate) daemon: crate::attach::DaemonLink,
    /// Messages waiting for a rate limit to clear (turn_queue.rs).
    pub(crate) waiting: crate::turn_queue::Waiting,
}

/// The engine. Cheap to clone.
#[derive(Clone)]
pub struct Relay {
    pub(crate) inner: Arc<RelayInner>,
}

impl RelayInner {
    pub(crate) fn get(&self, id: &str) -> Option<SessionHandle> {
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned()
    }

    pub(crate) fn sessions_mut(&self) -> std::sync::MutexGuard<'_, HashMap<String, SessionHandle>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn handles(&self) -> Vec<SessionHandle> {
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }
}

impl Relay {
    /// Opens the store, brings back every stored session (dormant until the next `say`), and
    /// resolves requests left pending by a previous run as declined.
    pub async fn open(mut config: RelayConfig) -> Result<Relay, RelayError> {
        let store =
            Store::open_with(&config.store, crate::placement::store_options(&config)).await?;
        config.auth =
            crate::login::resolve(&mut config, &store).map_err(crate::auth::AuthError::from)?;
        let rules = crate::approvals::load_rules(&store, config.rules_file.as_deref()).await?;
        let broker = Broker::with_rules(config.approval_timeout, store.clone(), rules);
        let feed: Arc<crate::feed::Feed> = Arc::default();
        // Backpressure: Codex's output is read only while the store keeps up.
        let mut codex = config.codex.clone();
        codex.peer.read_gate = Some(codex_relay_codex::ReadGate(store.stats().gate()));
        let inner = Arc::new(RelayInner {
            servers: Pool::new(
                codex,
                config.auth.clone(),
                config.crash_policy,
                config.sessions_per_codex,
                config.codex_idle_linger,
                feed.clone(),
            ),
            slots: Slots::new(config.max_sessions),
            config,
            store,
            broker,
            sessions: Mutex::new(HashMap::new()),
            feed,
            links: Default::default(),
            copies: Mutex::new(HashMap::new()),
            placement: Default::default(),
            daemon: Default::default(),
            waiting: Default::default(),
        });
        inner.feed.rate_limits.set_bounds(inner.config.turn_queue);
        let relay = Relay { inner };
        let weak = Arc::downgrade(&relay.inner);
        tokio::spawn(crate::store_notice::run(
            relay.inner.store.stats().gate(),
            Arc::downgrade(&relay.inner.store.stats_handle()),
            move || {
                let inner = weak.upgrade()?;
                // Mirrors of other instances' sessions are theirs to tell.
                let own = inner.handles().into_iter().filter(|h| !h.remote);
                Some(own.map(|h| h.shared).collect())
            },
        ));
        let spawn = |shared| {
            relay.spawn_session(shared, None, &[], None);
        };
        // Placed with others, the relay restores the sessions it runs; the others' are mirrored.
        let own = crate::placement::join(&relay).await?;
        if own.is_some() {
            let weak = Arc::downgrade(&relay.inner);
            relay.inner.store.on_commit(move |committed| {
                let Some(inner) = weak.upgrade() else { return };
                for (session, seq) in committed {
                    if let Some(h) = inner.get(session) {
                        h.shared.committed_to(*seq);
                    }
                }
            });
        }
        crate::recovery::restore(crate::recovery::Inputs {
            store: &relay.inner.store,
            event_buffer: relay.inner.config.event_buffer,
            broker: &relay.inner.broker,
            servers: &relay.inner.servers,
            spawn: &spawn,
            only: own.as_ref(),
            why: crate::recovery::RESTARTED,
        })
        .await?;
        // What the restore wrote (requests declined by the restart, cut turns closed) is
        // committed before the relay answers: placed with others, readers see only committed
        // events.
        if let Err(e) = relay.inner.store.flush().await {
            tracing::warn!("committing what the restore wrote failed: {e}");
        }
        crate::placement::start(&relay).await?;
        crate::recycle::start(&relay);
        Ok(relay)
    }

    pub fn config(&self) -> &RelayConfig {
        &self.inner.config
    }

    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// The store at a glance: backend, writes held, whether Codex is paused, and the fault
    /// while the database cannot take writes (also on every [`SessionSnapshot`] then).
    pub fn store_health(&self) -> crate::store::StoreHealth {
        self.inner.store.health()
    }

    /// The app-server serving session `id`, if it is placed on one and that process runs.
    pub fn server_of(&self, id: &str) -> Option<Arc<AppServer>> {
        self.inner.servers.server_of(id)
    }

    /// A running app-server with the relay's settings (started if needed), for calls that
    /// belong to no session (listing threads, health checks).
    pub async fn server(&self) -> Result<Arc<AppServer>, RelayError> {
        self.inner.servers.any().await
    }

    /// Whether Codex can reach its model: [`RelayError::NotLoggedIn`] (naming the command
    /// that logs it in) when its provider needs OpenAI credentials it does not hold.
    pub async fn check_login(&self) -> Result<(), RelayError> {
        self.inner.servers.check_login().await
    }

    /// The process id of the `codex app-server` serving a session, while it runs.
    pub fn codex_pid(&self, session: &str) -> Option<u32> {
        self.inner.servers.pid_of(session)
    }

    /// The pool's app-server processes and the sessions placed on each.
    pub fn codex_processes(&self) -> Vec<CodexProcessView> {
        self.inner.servers.processes()
    }

    /// App-servers started again after one died (over all processes of the pool).
    pub fn codex_restarts(&self) -> u64 {
        self.inner.servers.restarts()
    }

    /// `Some` while Codex is in a crash loop and restarts are refused: the error calls get.
    pub fn codex_crash_loop(&self) -> Option<RelayError> {
        self.inner.servers.gave_up().map(RelayError::from)
    }

    /// Starts a session's actor with the narrow handles it needs (and `slot`, which it owns
    /// and frees when it ends) and registers the session.
    pub(crate) fn spawn_session(
        &self,
        shared: Arc<SessionShared>,
        server: Option<Arc<AppServer>>,
        tools: &[DynamicTool],
        slot: Option<SlotGuard>,
    ) -> SessionHandle {
        let (actor, handle) = self.session_actor(shared, server, tools, slot);
        tokio::spawn(actor.run());
        handle
    }

    /// A registered session whose actor the caller runs.
    pub(crate) fn session_actor(
        &self,
        shared: Arc<SessionShared>,
        server: Option<Arc<AppServer>>,
        tools: &[DynamicTool],
        slot: Option<SlotGuard>,
    ) -> (Actor, SessionHandle) {
        shared.attach_feed(self.inner.feed.clone());
        // Placed with others, readers see what the store committed (session/committed.rs).
        if self.placement().readers_see_committed() {
            shared.gate();
        }
        self.inner.feed.session_created(shared.snapshot());
        let (tx, rx) = mpsc::channel(64);
        let (agent_tx, agent_rx) = mpsc::channel(16);
        let sub = server.as_ref().map(|s| s.subscribe_thread(&shared.id));
        let actor = Actor {
            shared: shared.clone(),
            broker: self.inner.broker.clone(),
            servers: self.inner.servers.clone(),
            slots: self.inner.slots.clone(),
            slot,
            cmds: rx,
            server,
            attached: None,
            sub,
            tools: tools
                .iter()
                .filter_map(|t| Some((t.spec.name.clone(), t.handler.clone()?)))
                .collect(),
            file_changes: Default::default(),
            agent_tx,
            agent_rx,
            agent_seen: Default::default(),
            catching_up: false,
            limits: self.inner.config.policy.clone(),
            default_cwd: self.default_cwd(),
        };
        let handle = SessionHandle {
            shared,
            door: crate::session::Door::Actor(tx),
            remote: false,
        };
        self.inner
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(handle.id().to_owned(), handle.clone());
        (actor, handle)
    }

    /// Creates a session (a new Codex thread) and, given a prompt, starts its first turn.
    pub async fn create(
        &self,
        opts: CreateOptions,
    ) -> Result<(SessionHandle, Option<SayOutcome>), RelayError> {
        self.check_policy(&opts)?;
        // A place that cannot store a session starts none.
        self.check_writable()?;
        // Asked for on the Codex daemon the terminal uses (docs/ATTACH.md).
        if opts.on_daemon {
            return self.create_on_daemon(opts).await;
        }
        // Place, then run: the placement may start it elsewhere (e.g. a less loaded instance).
        if let Some(placed) = self.placement().place_new(&self.host(), &opts).await? {
            return Ok(placed);
        }
        let epoch = self.placement_epoch();
        let created = self
            .create_here(opts)
            .await
            .map_err(|e| self.failed_while(epoch, e))?;
        // Told to the caller only once the session (and its first message) is stored.
        match &created.1 {
            Some(first) => {
                self.acknowledge_turn(&created.0.shared, 0, first, epoch)
                    .await?
            }
            None => self.confirm_stored(epoch).await?,
        }
        Ok(created)
    }

    /// [`Relay::create`] on this instance, whatever its load.
    pub(crate) async fn create_here(
        &self,
        mut opts: CreateOptions,
    ) -> Result<(SessionHandle, Option<SayOutcome>), RelayError> {
        match opts.worktree.take() {
            Some(asked) => self.create_with_worktree(opts, asked).await,
            None => self.create_in(opts, None).await,
        }
    }

    /// Creates the session here; `policy_cwd` is the directory the policy judges when it is
    /// not the session's own (a worktree's repository).
    pub(crate) async fn create_in(
        &self,
        opts: CreateOptions,
        policy_cwd: Option<String>,
    ) -> Result<(SessionHandle, Option<SayOutcome>), RelayError> {
        if policy_cwd.is_none() {
            self.check_policy(&opts)?;
        }
        self.check_writable()?;
        if opts.prompt.is_some() {
            self.check_queue_room()?;
        }
        // Taken before any work is done; every early return below frees it.
        let mut slot = self.inner.slots.reserve()?;
        let place = self
            .inner
            .servers
            .reserve(opts.codex_home.clone().map(Into::into));
        let server = place.server().await?;
        let (policy, sandbox, config) = self.start_settings(&opts, &server)?;
        let params = ThreadStartParams {
            model: opts.model.clone(),
            cwd: opts.cwd.clone(),
            approval_policy: policy,
            sandbox,
            config,
            base_instructions: opts.base_instructions.clone(),
            developer_instructions: opts.developer_instructions.clone(),
            dynamic_tools: (!opts.dynamic_tools.is_empty())
                .then(|| opts.dynamic_tools.iter().map(|t| t.spec.clone()).collect()),
            ..Default::default()
        };
        let started = server.thread_start(&params).await?;
        // What Codex says it runs the thread with is checked too: a layer of its config the
        // relay did not read cannot widen it.
        let mut effective = crate::policy::Effective::of(&started);
        if policy_cwd.is_some() {
            effective.cwd = policy_cwd.as_deref();
        }
        self.inner
            .config
            .policy
            .check_effective(&effective, &self.default_cwd())?;
        let id = started.thread.id.clone();
        // Recorded as this instance's before anything of it is written.
        self.placement().claim(&self.host(), &id).await?;
        slot.name(&id);
        place.bind(&id);
        // What a later thread/resume passes again: the settings in effect, profile included.
        let options = CreateOptions {
            approval_policy: policy,
            sandbox,
            config: params.config.clone(),
            cwd: opts.cwd.clone().or(started.cwd.clone()),
            budget: self.inner.config.budget.merged(opts.budget),
            prices: opts.prices.or(self.inner.config.prices),
            ..opts.clone()
        };
        let meta = crate::views::SessionMeta {
            options,
            tools: opts
                .dynamic_tools
                .iter()
                .map(|t| t.spec.name.clone())
                .collect(),
            ..Default::default()
        };
        let state = SessionShared::fresh_state(
            opts.cwd.clone().or(started.cwd.clone()),
            opts.model.clone().or(started.model.clone()),
            meta,
        );
        let shared = SessionShared::new(
            id.clone(),
            self.inner.store.clone(),
            self.inner.config.event_buffer,
            state,
        );
        shared.persist();
        let handle = self.spawn_session(shared, Some(server), &opts.dynamic_tools, Some(slot));
        let first = match &opts.prompt {
            Some(prompt) => {
                let input = SayInput {
                    text: prompt.clone(),
                    images: opts.images.clone(),
                    output_schema: opts.output_schema.clone(),
                    plan_mode: opts.plan_mode,
                    limits: Default::default(),
                };
                // While a rate limit is hit, the first turn waits in the queue too.
                match self.gate_turn(&handle, input, None)? {
                    crate::turn_queue::Gate::Go(input) => Some(handle.say(input).await?),
                    crate::turn_queue::Gate::Queued(queued) => Some(queued),
                }
            }
            None => None,
        };
        if let Some(first) = &first {
            self.guard_turn(&handle.shared, first, Default::default());
        }
        Ok((handle, first))
    }

    /// Sessions this relay runs (not the mirrors of sessions another instance runs), open or
    /// dormant.
    pub fn local_sessions(&self) -> usize {
        self.inner.handles().iter().filter(|h| !h.remote).count()
    }

    /// A session by id: one of ours (live or restored), or any Codex thread id, which is
    /// resumed into this relay.
    pub async fn session(&self, id: &str) -> Result<SessionHandle, RelayError> {
        if let Some(h) = self.inner.get(id) {
            return Ok(h);
        }
        if id.trim().is_empty() {
            return Err(RelayError::UnknownSession(id.to_owned()));
        }
        // It may run elsewhere: then it is mirrored here. Resuming it here is work this place
        // must be able to store.
        if let Some(placed) = self.placement().locate(&self.host(), id).await? {
            return Ok(placed);
        }
        let slot = self
            .inner
            .slots
            .claim(id)
            .inspect_err(|_| self.placement().unclaim(id))?;
        let server = match self.inner.servers.server_for(id, None).await {
            Ok(server) => server,
            Err(e) => {
                self.inner.servers.release(id);
                self.placement().unclaim(id);
                return Err(e);
            }
        };
        let probe = codex_relay_protocol::v2::ThreadResumeParams {
            thread_id: id.to_owned(),
            ..Default::default()
        };
        let resumed = match server
            .call::<codex_relay_protocol::v2::ThreadResume>(&probe)
            .await
        {
            Ok(r) => r,
            Err(e) => {
                self.inner.servers.release(id);
                self.placement().unclaim(id);
                tracing::debug!(id, "thread/resume failed: {e}");
                return Err(RelayError::from_resume(id, e));
            }
        };
        // A thread another client made carries its own directory and settings: the same
        // limits hold for it as for a new session.
        if let Err(e) = self
            .inner
            .config
            .policy
            .check_effective(&crate::policy::Effective::of(&resumed), &self.default_cwd())
        {
            self.inner.servers.release(id);
            self.placement().unclaim(id);
            return Err(e);
        }
        let state = SessionShared::fresh_state(
            None,
            None,
            crate::views::SessionMeta {
                resumed_from_codex: true,
                ..Default::default()
            },
        );
        let shared = SessionShared::new(
            id.to_owned(),
            self.inner.store.clone(),
            self.inner.config.event_buffer,
            state,
        );
        shared.persist();
        Ok(self.spawn_session(shared, Some(server), &[], Some(slot)))
    }

    fn known(&self, id: &str) -> Result<SessionHandle, RelayError> {
        self.inner
            .get(id)
            .ok_or_else(|| RelayError::UnknownSession(id.to_owned()))
    }

    pub fn status(&self, id: &str) -> Result<SessionSnapshot, RelayError> {
        Ok(self.known(id)?.snapshot())
    }

    /// Long-poll: waits until the session logs past `after` or changes status.
    pub async fn wait(&self, id: &str, after: u64, timeout: Duration) -> Result<bool, RelayError> {
        Ok(self.known_anywhere(id).await?.wait(after, timeout).await)
    }

    /// Long-poll: waits until the session needs attention (see [`SessionHandle::wait_attention`]).
    pub async fn wait_attention(&self, id: &str, timeout: Duration) -> Result<bool, RelayError> {
        Ok(self.known_anywhere(id).await?.wait_attention(timeout).await)
    }

    /// Open requests (of one session, or all), oldest first: this instance's from its broker,
    /// and those of the sessions it mirrors.
    pub fn pending(&self, session_id: Option<&str>) -> Vec<PendingView> {
        let mut all = self.inner.broker.pending(session_id);
        let mirrors = self.inner.handles().into_iter().filter(|h| h.remote);
        for h in mirrors.filter(|h| session_id.is_none_or(|s| s == h.id())) {
            all.extend(h.snapshot().pending);
        }
        all.sort_by_key(|p| p.created_at);
        all
    }

    /// Sessions of this relay.
    pub fn sessions(&self) -> Vec<SessionSnapshot> {
        self.inner.handles().iter().map(|h| h.snapshot()).collect()
    }

    /// Stops Codex (the whole process group) and flushes the store.
    pub async fn shutdown(&self) {
        self.shutdown_counting().await;
    }

    /// [`Relay::shutdown`], returning how many events were not stored. It does not hang on a
    /// dead store: once the store has been failing for [`STORE_FAULT_AT_SHUTDOWN`], what it
    /// still holds is given up (the spool keeps what it can for the next start; the events it
    /// cannot are counted, logged, and noted for the next start to report).
    pub async fn shutdown_counting(&self) -> usize {
        for h in self.inner.handles() {
            self.inner.broker.fail_session(
                h.id(),
                crate::decider::Decider::RelayShutdown,
                "the relay is shutting down",
            );
        }
        self.inner.servers.shutdown(Duration::from_secs(2)).await;
        let store = &self.inner.store;
        let failing_too_long = async {
            while store
                .stats()
                .fault_age()
                .is_none_or(|age| age < STORE_FAULT_AT_SHUTDOWN)
            {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        };
        let flushed = tokio::select! {
            r = store.flush() => r,
            _ = failing_too_long => {
                tracing::error!(fault = store.stats().fault().unwrap_or_default(),
                    "the store still cannot take writes; giving up what it holds to shut down");
                // The placement's tasks hold pool connections that closing the pool waits for.
                self.placement().stop();
                store.close().await
            }
        };
        match flushed {
            // Everything is committed: the spool is not needed to recover this run.
            Ok(()) => store.release_spool(),
            Err(e) => tracing::error!("flushing the store at shutdown failed: {e}"),
        }
        if store.stats().fault().is_none() {
            self.placement().leave(&self.host()).await;
        } else {
            // Leaving needs the database; others take over once the lease runs out.
            self.placement().stop();
        }
        let unstored = store.unstored_events();
        if unstored > 0 {
            tracing::error!(
                events = unstored,
                "shut down with events that were shown but not stored"
            );
        }
        unstored
    }
}

#[cfg(test)]
#[path = "slot_release_tests.rs"]
mod slot_release_tests;
