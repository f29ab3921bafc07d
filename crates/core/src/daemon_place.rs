//! A new session started on the Codex daemon the relay is attached to (`on_daemon` on create;
//! docs/ATTACH.md): the thread lives in the daemon, where the terminal picks it up
//! (`codex resume <id>` attaches to the same daemon), and the relay follows it like any
//! attached thread. The relay started it, so it chose its settings (within the relay's start
//! policy, checked before and after, as for its own Codex); afterwards, as for every thread on
//! the daemon, the relay passes no overrides (they would persist for the terminal's turns).

use codex_relay_protocol::v2::{ThreadStart, ThreadStartParams};

use crate::attach::{AttachState, Attached, Follow, mark, policy_word};
use crate::config::CreateOptions;
use crate::error::RelayError;
use crate::relay::Relay;
use crate::session::{Door, SayInput, SayOutcome, SessionHandle};

fn unavailable(why: impl Into<String>) -> RelayError {
    RelayError::Unavailable {
        instance: "codex-daemon".into(),
        why: why.into(),
    }
}

impl Relay {
    /// [`Relay::create`] with `on_daemon`: `thread/start` on the daemon's connection (which
    /// subscribes it), the session marked attached and live, then the first message.
    pub(crate) async fn create_on_daemon(
        &self,
        opts: CreateOptions,
    ) -> Result<(SessionHandle, Option<SayOutcome>), RelayError> {
        let Some(link) = self.inner.daemon.current() else {
            return Err(unavailable(
                "onDaemon: this relay is not attached to a Codex daemon now (start it with `serve --attach` while `codex app-server daemon start` runs)",
            ));
        };
        // What the relay's own Codex would be told within a start policy that limits commands
        // (a rewritten config) or a profile (read from the Codex home) is not worked out for the
        // daemon yet: refused, not widened.
        if self.inner.config.policy.limits_commands() {
            return Err(unavailable(
                "onDaemon: this relay's start policy limits commands, which is not applied to sessions on the Codex daemon yet; start it in the relay's own Codex",
            ));
        }
        if opts.profile.is_some() || opts.codex_home.is_some() || !opts.dynamic_tools.is_empty() {
            return Err(unavailable(
                "onDaemon: a profile, another CODEX_HOME or dynamic tools are not supported on the Codex daemon (it has its own home and no relay tools)",
            ));
        }
        let (mut policy, mut sandbox) = (opts.approval_policy, opts.sandbox);
        if let (Some(mode), Some(version)) = (opts.mode, link.version.as_ref()) {
            let (p, s) = mode.settings(version);
            policy = policy.or(Some(p));
            sandbox = sandbox.or(Some(s));
        }
        let params = ThreadStartParams {
            model: opts.model.clone(),
            cwd: opts.cwd.clone(),
            approval_policy: policy,
            sandbox,
            config: opts.config.clone(),
            base_instructions: opts.base_instructions.clone(),
            developer_instructions: opts.developer_instructions.clone(),
            ..Default::default()
        };
        let started = link.peer.call::<ThreadStart>(&params).await?;
        // What the daemon says it runs the thread with is checked too (its config may differ).
        self.inner
            .config
            .policy
            .check_effective(&crate::policy::Effective::of(&started), &self.default_cwd())?;
        let attached = Attached {
            socket: link.socket.clone(),
            state: AttachState::Live,
            daemon_pid: Some(link.pid),
            approval_policy: started.approval_policy.as_ref().map(policy_word),
            policy_changed_by: None,
        };
        // The daemon's `thread/started` may have made the session already: the same one.
        let handle = self
            .attached_session(&started.thread, &attached)
            .ok_or_else(|| unavailable("the daemon's new thread is one of the relay's own"))?;
        mark(&handle.shared, attached);
        let options = CreateOptions {
            approval_policy: policy,
            sandbox,
            cwd: opts.cwd.clone().or(started.thread.cwd.clone()),
            ..opts.clone()
        };
        handle.shared.with_state(|s| {
            s.meta.options = options;
            s.meta.resumed_from_codex = false;
            if s.model.is_none() {
                s.model = started.model.clone();
            }
        });
        handle.shared.persist();
        // `thread/start` subscribed the connection: the actor takes the thread's events.
        if let Door::Actor(jobs) = &handle.door {
            let _ = jobs
                .send(Box::new(Follow {
                    peer: link.peer.clone(),
                    catch_up: false,
                }))
                .await;
        }
        let first = match &opts.prompt {
            Some(prompt) => Some(
                handle
                    .say(SayInput {
                        text: prompt.clone(),
                        images: opts.images.clone(),
                        output_schema: opts.output_schema.clone(),
                        plan_mode: false,
                        limits: Default::default(),
                    })
                    .await?,
            ),
            None => None,
        };
        Ok((handle, first))
    }
}
