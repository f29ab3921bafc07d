//! A pool of `codex app-server` processes: each session is placed on one for life, at most
//! `sessions_per_codex` per process, processes started on demand and stopped when idle. A
//! process past its limits (recycle/) drains: new sessions go elsewhere, and once its sessions
//! are idle it is replaced by a fresh one.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use codex_relay_codex::{AppServer, AppServerConfig};
use serde::Serialize;

use crate::capabilities::ServerSource;
use crate::crash_loop::CrashPolicy;
use crate::error::RelayError;
use crate::feed::Feed;

/// What makes two sessions unable to share a process: the settings `codex app-server` is
/// started with (binary, CODEX_HOME, cwd, environment, `-c` overrides).
type ProcessKey = String;

fn key_of(c: &AppServerConfig) -> ProcessKey {
    format!(
        "{:?}\0{:?}\0{:?}\0{:?}\0{:?}",
        c.binary, c.codex_home, c.cwd, c.env, c.config_overrides
    )
}

/// One app-server of the pool and the sessions placed on it.
struct Member {
    id: u64,
    key: ProcessKey,
    source: ServerSource,
    sessions: HashSet<String>,
    /// Placements made for sessions whose thread id is not known yet (a `create` in flight).
    reserved: usize,
    /// Bumped on every placement, so a linger timer started before it does nothing.
    generation: u64,
    /// Why it takes no new session (over a limit, waiting for its sessions to be idle).
    draining: Option<String>,
    /// What its current process did so far (for the limits); reset when the process changes.
    life: Option<Life>,
}

/// One process of a member: since when it is seen, the turns started on it, its last RSS.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Life {
    pub pid: u32,
    pub since: Instant,
    pub turns: u64,
    pub rss: Option<u64>,
}

impl Member {
    /// The life of process `pid`: the one recorded, or a new one if the process changed.
    fn life_of(&mut self, pid: u32) -> &mut Life {
        let life = self.life.get_or_insert(Life {
            pid,
            since: Instant::now(),
            turns: 0,
            rss: None,
        });
        if life.pid != pid {
            *life = Life {
                pid,
                since: Instant::now(),
                turns: 0,
                rss: None,
            };
        }
        life
    }
}

/// A member as the recycler sees it at one tick.
pub(crate) struct MemberState {
    pub slot: u64,
    pub pid: u32,
    pub sessions: Vec<String>,
    pub reserved: usize,
    pub draining: Option<String>,
    pub life: Life,
}

impl Member {
    fn load(&self) -> usize {
        self.sessions.len() + self.reserved
    }
}

#[derive(Default)]
struct Table {
    members: Vec<Member>,
    /// Session id -> member id; a session keeps its member for life (until it is released).
    placed: HashMap<String, u64>,
    next_id: u64,
}

struct PoolInner {
    base: AppServerConfig,
    /// Credentials sent to every process, and the token refresh callback.
    auth: crate::auth::AuthConfig,
    /// When each process stops restarting a crashing Codex.
    policy: CrashPolicy,
    /// Sessions per process; 0 means one process per distinct setting, shared by all.
    per: usize,
    linger: Duration,
    feed: Arc<Feed>,
    table: Mutex<Table>,
    /// Restarts of members already removed from the table.
    gone_restarts: AtomicU64,
    /// Processes replaced by a fresh one after crossing a limit (their starts are no restarts).
    recycles: AtomicU64,
}

/// Where sessions get their app-server; cheap to clone.
#[derive(Clone)]
pub(crate) struct Pool {
    inner: Arc<PoolInner>,
}

/// One process of the pool, for status pages and tests.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct CodexProcessView {
    /// The pool's number for this process slot (kept across restarts of its process).
    pub slot: u64,
    /// Process id of the running `codex app-server`, if it runs.
    pub pid: Option<u32>,
    /// Sessions placed on it.
    pub sessions: Vec<String>,
    /// Its resident memory (its process group's) when the recycler last looked; `None` when
    /// no limit is set or it was not looked at yet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rss_bytes: Option<u64>,
    /// Turns started on its current process.
    pub turns: u64,
    /// Why it takes no new session, while it waits to be recycled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub draining: Option<String>,
}

/// A place on a member held for a session being created; bind it once the thread id is known.
/// Dropped unbound, the place is given back.
pub(crate) struct Reservation {
    pool: Pool,
    member: u64,
    source: ServerSource,
    bound: bool,
}

impl Reservation {
    /// The app-server for the new session, once it can reach its model (see
    /// [`ServerSource::check_login`]).
    pub async fn server(&self) -> Result<Arc<AppServer>, RelayError> {
        let server = self.pool.start(self.member, &self.source).await?;
        self.source.check_login(&server).await?;
        Ok(server)
    }

    pub fn bind(mut self, session: &str) {
        self.bound = true;
        let mut t = self.pool.lock();
        if let Some(m) = t.members.iter_mut().find(|m| m.id == self.member) {
            m.reserved = m.reserved.saturating_sub(1);
            m.sessions.insert(session.to_owned());
            t.placed.insert(session.to_owned(), self.member);
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.bound {
            return;
        }
        let mut t = self.pool.lock();
        if let Some(m) = t.members.iter_mut().find(|m| m.id == self.member) {
            m.reserved = m.reserved.saturating_sub(1);
        }
        self.pool.maybe_idle(&mut t, self.member);
    }
}

impl Pool {
    pub fn new(
        base: AppServerConfig,
        auth: crate::auth::AuthConfig,
        policy: CrashPolicy,
        per: usize,
        linger: Duration,
        feed: Arc<Feed>,
    ) -> Self {
        Self {
            inner: Arc::new(PoolInner {
                base,
                auth,
                policy,
                per,
                linger,
                feed,
                table: Mutex::default(),
                gone_restarts: AtomicU64::new(0),
                recycles: AtomicU64::new(0),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.inner.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The process settings of a session (its own CODEX_HOME, if it has one).
    pub fn config_for(&self, codex_home: Option<PathBuf>) -> AppServerConfig {
        let mut c = self.inner.base.clone();
        if codex_home.is_some() {
            c.codex_home = codex_home;
        }
        c
    }

    /// The member with room for one more session of these settings, or a new one.
    fn place(&self, t: &mut Table, config: AppServerConfig) -> (u64, ServerSource) {
        let key = key_of(&config);
        let per = self.inner.per;
        let fit = t
            .members
            .iter_mut()
            .filter(|m| m.key == key && m.draining.is_none() && (per == 0 || m.load() < per))
            .min_by_key(|m| m.load());
        if let Some(m) = fit {
            m.generation += 1;
            return (m.id, m.source.clone());
        }
        t.next_id += 1;
        let id = t.next_id;
        let source = ServerSource::new(
            config,
            self.inner.auth.clone(),
            self.inner.policy,
            self.inner.feed.clone(),
        );
        t.members.push(Member {
            id,
            key,
            source: source.clone(),
            sessions: HashSet::new(),
            reserved: 0,
            generation: 0,
            draining: None,
            life: None,
        });
        (id, source)
    }

    /// Holds a place for a session about to be created with these settings.
    pub fn reserve(&self, codex_home: Option<PathBuf>) -> Reservation {
        let config = self.config_for(codex_home);
        let mut t = self.lock();
        let (member, source) = self.place(&mut t, config);
        if let Some(m) = t.members.iter_mut().find(|m| m.id == member) {
            m.reserved += 1;
        }
        drop(t);
        Reservation {
            pool: self.clone(),
            member,
            source,
            bound: false,
        }
    }

    /// The app-server of `session`: the process it was placed on (restarted if it died), or,
    /// the first time, a place on a process with room.
    pub async fn server_for(
        &self,
        session: &str,
        codex_home: Option<PathBuf>,
    ) -> Result<Arc<AppServer>, RelayError> {
        let (member, source) = {
            let mut t = self.lock();
            let known = t.placed.get(session).copied().and_then(|id| {
                let m = t.members.iter().find(|m| m.id == id)?;
                Some((id, m.source.clone()))
            });
            match known {
                Some(found) => found,
                None => {
                    let config = self.config_for(codex_home);
                    let (id, source) = self.place(&mut t, config);
                    if let Some(m) = t.members.iter_mut().find(|m| m.id == id) {
                        m.sessions.insert(session.to_owned());
                    }
                    t.placed.insert(session.to_owned(), id);
                    (id, source)
                }
            }
        };
        let server = self.start(member, &source).await?;
        source.check_login(&server).await?;
        Ok(server)
    }

    /// Whether a Codex with the relay's own settings can reach its model (starts one if none
    /// runs): `NotLoggedIn` when it needs a login it does not hold.
    pub async fn check_login(&self) -> Result<(), RelayError> {
        let server = self.any().await?;
        let source = {
            let t = self.lock();
            let key = key_of(&self.inner.base);
            t.members
                .iter()
                .find(|m| m.key == key)
                .map(|m| m.source.clone())
        };
        match source {
            Some(source) => source.check_login(&server).await,
            None => Ok(()),
        }
    }

    async fn start(
        &self,
        member: u64,
        source: &ServerSource,
    ) -> Result<Arc<AppServer>, RelayError> {
        let server = source.get().await?;
        tracing::debug!(
            slot = member,
            pid = server.pid(),
            "session placed on a pooled app-server"
        );
        Ok(server)
    }

    /// Any app-server with the relay's own settings (for listing threads and health checks):
    /// a running one if there is, else a new member that stops after the linger when unused.
    pub async fn any(&self) -> Result<Arc<AppServer>, RelayError> {
        let key = key_of(&self.inner.base);
        let (member, source) = {
            let mut t = self.lock();
            let running = t
                .members
                .iter()
                .filter(|m| m.key == key)
                .find(|m| {
                    m.source
                        .current()
                        .is_some_and(|s| s.peer().closed().is_none())
                })
                .or_else(|| t.members.iter().find(|m| m.key == key))
                .map(|m| m.id);
            match running {
                Some(id) => {
                    // An idle process in use again lingers from now, not from when it emptied.
                    let m = t
                        .members
                        .iter_mut()
                        .find(|m| m.id == id)
                        .expect("found above");
                    m.generation += 1;
                    let source = m.source.clone();
                    self.maybe_idle(&mut t, id);
                    (id, source)
                }
                None => {
                    let (id, source) = self.place(&mut t, self.inner.base.clone());
                    self.maybe_idle(&mut t, id);
                    (id, source)
                }
            }
        };
        self.start(member, &source).await
    }

    /// The session is gone for good (closed): its place is freed; a process left with no
    /// session stops after the linger.
    pub fn release(&self, session: &str) {
        let mut t = self.lock();
        let Some(id) = t.placed.remove(session) else {
            return;
        };
        if let Some(m) = t.members.iter_mut().find(|m| m.id == id) {
            m.sessions.remove(session);
        }
        self.maybe_idle(&mut t, id);
    }

    /// Starts the linger timer of a member that has nothing placed on it.
    fn maybe_idle(&self, t: &mut Table, id: u64) {
        let Some(m) = t.members.iter().find(|m| m.id == id) else {
            return;
        };
        if m.load() > 0 {
            return;
        }
        let generation = m.generation;
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let pool = self.clone();
        rt.spawn(async move {
            // The linger counts from when the process is up: one still starting (a loaded
            // machine can take longer than the linger) was asked for by someone about to use it.
            let source = loop {
                tokio::time::sleep(pool.inner.linger).await;
                let starting =
                    {
                        let mut t = pool.lock();
                        let Some(i) = t.members.iter().position(|m| {
                            m.id == id && m.load() == 0 && m.generation == generation
                        }) else {
                            return;
                        };
                        if !t.members[i].source.is_starting() {
                            break t.members.swap_remove(i).source;
                        }
                        t.members[i].source.clone()
                    };
                starting.settled().await;
            };
            pool.inner
                .gone_restarts
                .fetch_add(source.starts().saturating_sub(1), Ordering::Relaxed);
            if let Some(server) = source.take().await {
                tracing::info!(
                    slot = id,
                    pid = server.pid(),
                    "idle codex app-server stopped"
                );
                server.shutdown(Duration::from_secs(2)).await;
            }
        });
    }

    /// Places `session` on the process `beside` is placed on (a fork, loaded there by Codex);
    /// `false` when `beside` is placed nowhere (then it is placed as any new session).
    pub fn place_beside(&self, session: &str, beside: &str) -> bool {
        let mut t = self.lock();
        let Some(id) = t.placed.get(beside).copied() else {
            return false;
        };
        if let Some(m) = t.members.iter_mut().find(|m| m.id == id) {
            m.sessions.insert(session.to_owned());
        }
        t.placed.insert(session.to_owned(), id);
        true
    }

    /// The app-server serving `session`, if it is placed and its process runs.
    pub fn server_of(&self, session: &str) -> Option<Arc<AppServer>> {
        let t = self.lock();
        let id = t.placed.get(session)?;
        let m = t.members.iter().find(|m| m.id == *id)?;
        m.source.current()
    }

    /// How many other sessions share `session`'s process (placed or being created there).
    pub fn sessions_beside(&self, session: &str) -> usize {
        let t = self.lock();
        let Some(id) = t.placed.get(session) else {
            return 0;
        };
        t.members
            .iter()
            .find(|m| m.id == *id)
            .map_or(0, |m| m.load().saturating_sub(1))
    }

    /// The process serving `session`, if it is placed and its process runs.
    pub fn pid_of(&self, session: &str) -> Option<u32> {
        let t = self.lock();
        let id = t.placed.get(session)?;
        let m = t.members.iter().find(|m| m.id == *id)?;
        m.source.current().map(|s| s.pid())
    }

    pub fn processes(&self) -> Vec<CodexProcessView> {
        let t = self.lock();
        let mut out: Vec<_> = t
            .members
            .iter()
            .map(|m| {
                let mut sessions: Vec<_> = m.sessions.iter().cloned().collect();
                sessions.sort();
                let pid = m
                    .source
                    .current()
                    .filter(|s| s.peer().closed().is_none())
                    .map(|s| s.pid());
                let life = m.life.filter(|l| Some(l.pid) == pid);
                CodexProcessView {
                    slot: m.id,
                    pid,
                    sessions,
                    rss_bytes: life.and_then(|l| l.rss),
                    turns: life.map_or(0, |l| l.turns),
                    draining: m.draining.clone(),
                }
            })
            .collect();
        out.sort_by_key(|p| p.slot);
        out
    }

    /// Starts after a crash: every start of a process slot but its first.
    /// The first process that stopped restarting Codex (a crash loop), if any.
    pub fn gave_up(&self) -> Option<crate::crash_loop::GaveUp> {
        let sources: Vec<ServerSource> = self
            .lock()
            .members
            .iter()
            .map(|m| m.source.clone())
            .collect();
        sources.iter().find_map(|s| s.gave_up())
    }

    pub fn restarts(&self) -> u64 {
        let t = self.lock();
        let live: u64 = t
            .members
            .iter()
            .map(|m| m.source.starts().saturating_sub(1))
            .sum();
        (live + self.inner.gone_restarts.load(Ordering::Relaxed)).saturating_sub(self.recycles())
    }

    /// Processes replaced by a fresh one after crossing a limit.
    pub fn recycles(&self) -> u64 {
        self.inner.recycles.load(Ordering::Relaxed)
    }

    /// A turn started for `session` on the process serving it (the turn limit counts these).
    pub fn turn_started(&self, session: &str) {
        let mut t = self.lock();
        let Some(id) = t.placed.get(session).copied() else {
            return;
        };
        let Some(m) = t.members.iter_mut().find(|m| m.id == id) else {
            return;
        };
        if let Some(pid) = m.source.current().map(|s| s.pid()) {
            m.life_of(pid).turns += 1;
        }
    }

    /// Every member whose process runs, with its RSS read now (`rss`: whether to read it).
    pub(crate) fn observe(&self, rss: bool) -> Vec<MemberState> {
        let running: Vec<(u64, u32)> = {
            let t = self.lock();
            t.members
                .iter()
                .filter_map(|m| {
                    let s = m.source.current()?;
                    s.peer().closed().is_none().then(|| (m.id, s.pid()))
                })
                .collect()
        };
        // Read outside the lock: /proc is walked once per process group.
        let sizes: Vec<(u64, u32, Option<u64>)> = running
            .into_iter()
            .map(|(id, pid)| {
                let size = rss
                    .then(|| codex_relay_codex::platform::memory::group_rss(pid))
                    .flatten();
                (id, pid, size)
            })
            .collect();
        let mut t = self.lock();
        let mut out = Vec::new();
        for (id, pid, size) in sizes {
            let Some(m) = t.members.iter_mut().find(|m| m.id == id) else {
                continue;
            };
            let life = m.life_of(pid);
            if size.is_some() {
                life.rss = size;
            }
            let life = *life;
            let mut sessions: Vec<_> = m.sessions.iter().cloned().collect();
            sessions.sort();
            out.push(MemberState {
                slot: id,
                pid,
                sessions,
                reserved: m.reserved,
                draining: m.draining.clone(),
                life,
            });
        }
        out
    }

    /// Takes no new session on `slot` any more (it waits to be recycled), saying why.
    pub(crate) fn drain(&self, slot: u64, why: &str) {
        let mut t = self.lock();
        if let Some(m) = t.members.iter_mut().find(|m| m.id == slot) {
            m.draining = Some(why.to_owned());
        }
    }

    /// Replaces the process of draining `slot`, if it still runs `pid` and nothing is being
    /// created on it: stops it (its whole group; the sessions on it let go of it first) and
    /// starts a fresh one in its place, which the sessions resume their threads on. Returns
    /// whether it did.
    pub(crate) async fn recycle(&self, slot: u64, pid: u32, grace: Duration) -> bool {
        let source = {
            let mut t = self.lock();
            let Some(m) = t.members.iter_mut().find(|m| m.id == slot) else {
                return false;
            };
            if m.draining.is_none() || m.reserved > 0 {
                return false;
            }
            if m.source.current().map(|s| s.pid()) != Some(pid) {
                return false;
            }
            m.draining = None;
            m.life = None;
            m.source.clone()
        };
        let Some(old) = source.take().await else {
            return false;
        };
        self.inner.recycles.fetch_add(1, Ordering::Relaxed);
        old.shutdown(grace).await;
        // The fresh process starts now, so the next turn does not wait for it; a failed start
        // is tried again (and reported) by the next session that needs it.
        tokio::spawn(async move {
            if let Err(e) = source.get().await {
                tracing::warn!(slot, "starting the recycled codex app-server failed: {e}");
            }
        });
        true
    }

    /// Stops every process (the whole process group of each), all at once.
    pub async fn shutdown(&self, grace: Duration) {
        let sources: Vec<ServerSource> = {
            let mut t = self.lock();
            t.placed.clear();
            t.members.drain(..).map(|m| m.source).collect()
        };
        let stops = sources.into_iter().map(|s| async move {
            if let Some(server) = s.take().await {
                server.shutdown(grace).await;
            }
        });
        futures::future::join_all(stops).await;
    }
}

#[cfg(test)]
#[path = "pool_tests.rs"]
mod tests;
