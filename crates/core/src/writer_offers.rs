//! What works when another Codex app-server writes a thread (the active-writer conflict,
//! `RelayError::ActiveWriter`): reading it without writing (Codex's `thread/read`, which any
//! app-server of the same `CODEX_HOME` may do) and forking it into a new session of this relay
//! (`thread/fork`: a new thread starting from a copy of its history, written by the relay's own
//! Codex). Attaching to the holder, when it is the Codex daemon, is `serve --attach`.

use codex_relay_protocol::v2::{ThreadFork, ThreadForkParams, ThreadRead, ThreadReadParams};
use serde_json::Value;

use crate::error::RelayError;
use crate::relay::Relay;
use crate::session::{SessionHandle, SessionShared};

impl Relay {
    /// A Codex thread as Codex stores it, turns included, read by one of the relay's Codex
    /// processes without loading it (so whoever writes it keeps writing).
    pub async fn read_thread(&self, id: &str) -> Result<Value, RelayError> {
        let place = self.inner.servers.reserve(None);
        let server = place.server().await?;
        let params = ThreadReadParams {
            thread_id: id.to_owned(),
            include_turns: true,
        };
        let read = server
            .call::<ThreadRead>(&params)
            .await
            .map_err(|e| RelayError::from_resume(id, e))?;
        Ok(serde_json::to_value(read.thread).unwrap_or(Value::Null))
    }

    /// A new session of this relay whose thread starts from a copy of thread `id`'s history
    /// (Codex's `thread/fork`); thread `id` itself is left to whoever writes it. The fork runs
    /// in the relay's own Codex, within its start policy.
    pub async fn fork_thread(&self, id: &str) -> Result<SessionHandle, RelayError> {
        self.check_writable()?;
        let mut slot = self.inner.slots.reserve()?;
        let place = self.inner.servers.reserve(None);
        let server = place.server().await?;
        let params = ThreadForkParams {
            thread_id: id.to_owned(),
            ..Default::default()
        };
        let forked = server
            .call::<ThreadFork>(&params)
            .await
            .map_err(|e| RelayError::from_resume(id, e))?;
        self.inner
            .config
            .policy
            .check_effective(&crate::policy::Effective::of(&forked), &self.default_cwd())?;
        let new = forked.thread.id.clone();
        self.placement().claim(&self.host(), &new).await?;
        slot.name(&new);
        place.bind(&new);
        let state = SessionShared::fresh_state(
            forked.cwd.clone().or(forked.thread.cwd.clone()),
            forked.model.clone(),
            crate::views::SessionMeta {
                resumed_from_codex: true,
                ..Default::default()
            },
        );
        let shared = SessionShared::new(
            new,
            self.inner.store.clone(),
            self.inner.config.event_buffer,
            state,
        );
        shared.persist();
        Ok(self.spawn_session(shared, Some(server), &[], Some(slot)))
    }
}
