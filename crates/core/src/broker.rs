//! The broker: every request Codex makes of a human (or of a caller-defined tool) becomes a
//! pending request with an unguessable id and a deadline. Any front may answer; the first
//! answer wins. Unanswered requests are resolved fail-closed when their deadline passes.

use std::collections::{HashMap, VecDeque};

use crate::deadlines::Deadlines;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use codex_relay_codex::{AppServer, IncomingRequest, Responder};
use codex_relay_protocol::v2::{FileUpdateChange, UserInput};

use crate::answer::{self, Answer, Decision};
use crate::decider::Decider;
pub use crate::decider::Resolution;
use crate::error::RelayError;
use crate::event::{Ev, Origin};
use crate::ids::{now_ms, random_id};
pub use crate::pending::{PendingDetails, PendingView};
use crate::rules::{Action, RuleContext, RuleInput, Rules, Ruling};
use crate::store::{PendingRecord, Store};

/// The store row for a request, resolved or not.
fn record(view: &PendingView, resolution: Option<&Resolution>) -> PendingRecord {
    PendingRecord {
        id: view.id.clone(),
        session_id: view.session_id.clone(),
        kind: view.kind.as_str().into(),
        created_at: view.created_at,
        deadline: view.deadline,
        request: serde_json::to_string(view).unwrap_or_default(),
        resolution: resolution.map(|r| serde_json::to_string(r).unwrap_or_default()),
    }
}

struct Entry {
    /// Opening order: requests opened in the same millisecond still list oldest first.
    order: u64,
    view: PendingView,
    responder: Responder,
    session: Arc<dyn PendingSink>,
    server: Weak<AppServer>,
    /// Shown as open to the session (a rule answers a request before it is shown).
    shown: bool,
}

/// How a request ends: Codex's reply (its reason already passed to the model, or not yet), or
/// failing closed with a reason.
enum Ending {
    Reply {
        reply: answer::Reply,
        reason_passed: bool,
    },
    FailClosed(String),
}

/// What the model is told with a denial's reason, ahead of the decline.
fn reason_text(by: &Decider, question: &str, reason: &str) -> String {
    match by {
        Decider::Rule(rule) => format!(
            "The relay's rule {:?} denied this request ({question}). Reason: {reason}",
            rule.name()
        ),
        _ => format!("I denied this request ({question}). Reason: {reason}"),
    }
}

/// Passes a denial's reason to the running turn (`turn/steer`).
async fn pass_reason(server: &AppServer, view: &PendingView, text: String) {
    let Some(turn) = &view.turn else {
        return;
    };
    if let Err(e) = server
        .steer(view.thread_id(), turn, &[UserInput::text(text)])
        .await
    {
        tracing::warn!(session = %view.session_id, "could not pass the denial reason to the model: {e}");
    }
}

/// Where a session's open requests are shown (its state and log): the broker tells it when one
/// opens and when one is resolved. Implemented by the session; kept apart so the broker does
/// not depend on sessions.
pub(crate) trait PendingSink: Send + Sync {
    /// The session's id.
    fn session_id(&self) -> &str;
    /// A request opened (logs `request-opened`).
    fn add_pending(&self, view: PendingView);
    /// A request was resolved (logs `ev`, its `request-resolved`).
    fn remove_pending(&self, id: &str, ev: Ev);
    /// What approval rules look at in the session (its directory, labels, policy, sandbox).
    fn rule_context(&self) -> RuleContext;
    /// A rule answered `view` as it opened (logs `ev`, its `request-resolved` carrying the
    /// request; nothing was pending).
    fn ruled(&self, view: &PendingView, ev: Ev);
}

const REMEMBERED_RESOLUTIONS: usize = 4096;

#[derive(Default)]
struct State {
    open: HashMap<String, Entry>,
    opened: u64,
    resolved: VecDeque<Resolution>,
}

/// Shared by every session of one relay; cheap to clone.
#[derive(Clone)]
pub struct Broker {
    inner: Arc<Inner>,
}

struct Inner {
    state: Mutex<State>,
    timeout: Duration,
    store: Store,
    deadlines: Deadlines,
    rules: Rules,
}

impl Broker {
    pub fn new(timeout: Duration, store: Store) -> Self {
        Self::with_rules(timeout, store, Rules::default())
    }

    /// A broker that consults `rules` as each request opens.
    pub fn with_rules(timeout: Duration, store: Store, rules: Rules) -> Self {
        Self {
            inner: Arc::new(Inner {
                state: Mutex::default(),
                timeout,
                store,
                deadlines: Deadlines::default(),
                rules,
            }),
        }
    }

    /// The rules it consults.
    pub fn rules(&self) -> &Rules {
        &self.inner.rules
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a request Codex made in `session` (by one of its sub-agents when `origin`
    /// says so); returns at once. `changes` are the file changes (path, kind, diff) Codex
    /// announced for the item a file-change approval is about; they are shown with it.
    pub(crate) fn open(
        &self,
        session: &Arc<dyn PendingSink>,
        server: Weak<AppServer>,
        incoming: IncomingRequest,
        changes: Option<&[FileUpdateChange]>,
        origin: Option<Origin>,
    ) -> PendingView {
        let request = incoming.request();
        let now = now_ms();
        let mut view = crate::pending::describe(
            request,
            random_id("req_"),
            session.session_id().to_owned(),
            now,
            now + self.inner.timeout.as_millis() as i64,
        );
        if let Some(changes) = changes.filter(|c| !c.is_empty())
            && let PendingDetails::FileChangeApproval { changes: shown, .. } = &mut view.details
        {
            let paths: Vec<&str> = changes.iter().map(|c| c.path.as_str()).collect();
            view.question = format!("Allow Codex to change {}?", paths.join(", "));
            *shown = changes.to_vec();
        }
        if let Some(origin) = origin {
            view.question = format!("Sub-agent {} asks: {}", origin.agent.label(), view.question);
            view.agent = Some(origin.agent);
            view.invoke = origin.invoke;
        }
        // What approving it lets Codex do, shown to everyone and weighed by the rules.
        let mut ctx = session.rule_context();
        ctx.codex_version = server.upgrade().map(|s| s.version().clone());
        view.reach = crate::reach::of(&view, incoming.request(), &ctx);
        // The rules first: an allow or a deny answers it before any front is told.
        if let Some(input) = RuleInput::of(&view, incoming.request(), &ctx)
            && let Some(ruling) = self.inner.rules.decide(&input)
            && ruling.action != Action::Ask
        {
            self.ruled(session, server, incoming, view.clone(), ruling);
            return view;
        }
        self.inner.store.upsert_pending(record(&view, None));
        {
            let mut st = self.lock();
            st.opened += 1;
            let entry = Entry {
                order: st.opened,
                view: view.clone(),
                responder: incoming.responder,
                session: session.clone(),
                server,
                shown: true,
            };
            st.open.insert(view.id.clone(), entry);
        }
        session.add_pending(view.clone());
        let at = tokio::time::Instant::now() + self.inner.timeout;
        if self.inner.deadlines.push(at, view.id.clone()) {
            tokio::spawn(expire(
                Arc::downgrade(&self.inner),
                self.inner.deadlines.wake(),
            ));
        }
        view
    }

    /// Answers a request a rule decided as it opened: what a person's Approve (once) or Deny
    /// would send, the deny's reason passed to the model first, recorded as `rule:<name>`.
    fn ruled(
        &self,
        session: &Arc<dyn PendingSink>,
        server: Weak<AppServer>,
        incoming: IncomingRequest,
        view: PendingView,
        ruling: Ruling,
    ) {
        let answer = match ruling.action {
            Action::Allow => Answer::approve(),
            _ => Answer::Deny {
                reason: Some(ruling.reason.clone().unwrap_or_else(|| {
                    format!("the relay's rule {:?} does not allow it", ruling.rule)
                })),
            },
        };
        let by = Decider::rule(&ruling.rule);
        let ending = match answer::reply(incoming.request(), answer) {
            Ok(reply) => Ending::Reply {
                reply,
                reason_passed: false,
            },
            // Rules only ever answer approvals, which take both answers.
            Err(e) => {
                tracing::error!(rule = %ruling.rule, "a rule's answer did not fit: {e}");
                Ending::FailClosed("a rule's answer did not fit".into())
            }
        };
        tracing::info!(session = %session.session_id(), request = %view.id, rule = %ruling.rule,
            "answered by a rule");
        let entry = Entry {
            order: 0,
            view,
            responder: incoming.responder,
            session: session.clone(),
            server,
            shown: false,
        };
        let resolution = resolution_of(&entry, &ending, by);
        self.lock().remember(resolution.clone());
        self.settle(entry, ending, resolution);
    }

    /// Answers a pending request. The first answer wins; later ones get `AlreadyResolved`.
    pub async fn answer(
        &self,
        session_id: &str,
        id: &str,
        answer: Answer,
        by: Decider,
    ) -> Result<Resolution, RelayError> {
        self.answer_as(session_id, id, answer, by, None).await
    }

    /// [`Broker::answer`], naming the signed-in person who answered.
    pub async fn answer_as(
        &self,
        session_id: &str,
        id: &str,
        answer: Answer,
        by: Decider,
        by_user: Option<crate::people::Person>,
    ) -> Result<Resolution, RelayError> {
        let (entry, reply) = {
            let mut st = self.lock();
            let Some(entry) = st.open.get(id).filter(|e| e.view.session_id == session_id) else {
                return Err(match st.resolved.iter().find(|r| r.id == id) {
                    Some(r) => RelayError::AlreadyResolved {
                        id: id.into(),
                        decision: r.decision.as_str().to_owned(),
                        by: r.by.as_str().to_owned(),
                    },
                    None => RelayError::UnknownRequest {
                        session: session_id.into(),
                        request: id.into(),
                    },
                });
            };
            let reply = answer::reply(entry.responder.request(), answer).map_err(|message| {
                RelayError::InvalidAnswer {
                    id: id.into(),
                    message,
                }
            })?;
            let resolution = Resolution {
                id: id.into(),
                decision: reply.decision.clone(),
                by,
                reason: reply.reason.clone(),
                by_user,
            };
            let entry = st.take(id, &resolution).expect("present");
            (entry, (reply, resolution))
        };
        let (reply, resolution) = reply;
        // A denial's reason goes to the model as input to the running turn, ahead of the
        // decline, so the model's next request carries both.
        if let (Some(reason), Some(server)) = (&reply.reason, entry.server.upgrade()) {
            let text = reason_text(&resolution.by, &entry.view.question, reason);
            pass_reason(&server, &entry.view, text).await;
        }
        let ending = Ending::Reply {
            reply,
            reason_passed: true,
        };
        Ok(self.settle(entry, ending, resolution))
    }

    /// Resolves one request fail-closed (decline / error) if it is still open.
    pub fn fail_closed(&self, id: &str, by: Decider, why: &str) {
        let taken = self.lock().take_fail_closed(id, by, why);
        if let Some((entry, ending, resolution)) = taken {
            self.settle(entry, ending, resolution);
        }
    }

    /// Resolves every open request of a session fail-closed.
    pub fn fail_session(&self, session_id: &str, by: Decider, why: &str) {
        self.fail_where(|v| v.session_id == session_id, by, why);
    }

    /// Resolves the open requests of one turn (of the session's thread or of one of its
    /// sub-agents) fail-closed: the turn ended, so nobody can act on them any more.
    pub fn fail_turn(&self, session_id: &str, turn: &str, by: Decider, why: &str) {
        self.fail_where(
            |v| v.session_id == session_id && v.turn.as_deref() == Some(turn),
            by,
            why,
        );
    }

    /// Withdraws the open request of `session_id` that Codex numbered `codex_id`, answered
    /// by another client of the same shared Codex (the terminal, on the daemon): recorded as
    /// decided by that client; nothing is sent to Codex (its requests there are let go, see
    /// `PeerConfig::shared`). Whether one was open.
    /// Whether Codex's request `codex_id` of `session_id` is open here already: the daemon
    /// sends a pending request again to a client that resumes the thread, and a client that
    /// subscribed just before resuming gets it twice.
    pub(crate) fn holds_codex_request(
        &self,
        session_id: &str,
        codex_id: &codex_relay_protocol::RequestId,
    ) -> bool {
        self.lock()
            .open
            .values()
            .any(|e| e.view.session_id == session_id && e.responder.id() == codex_id)
    }

    pub(crate) fn withdraw_answered_elsewhere(
        &self,
        session_id: &str,
        codex_id: &codex_relay_protocol::RequestId,
    ) -> bool {
        let mut found = false;
        self.fail_entries(
            |e| {
                let hit = e.view.session_id == session_id && e.responder.id() == codex_id;
                found |= hit;
                hit
            },
            Decider::OtherClient,
            "answered in the terminal (another client of the Codex daemon answered first)",
        );
        found
    }

    fn fail_where(&self, pick: impl Fn(&PendingView) -> bool, by: Decider, why: &str) {
        self.fail_entries(|e| pick(&e.view), by, why)
    }

    fn fail_entries(&self, mut pick: impl FnMut(&Entry) -> bool, by: Decider, why: &str) {
        let taken: Vec<_> = {
            let mut st = self.lock();
            let ids: Vec<String> = st
                .open
                .iter()
                .filter(|(_, e)| pick(e))
                .map(|(k, _)| k.clone())
                .collect();
            ids.iter()
                .filter_map(|id| st.take_fail_closed(id, by.clone(), why))
                .collect()
        };
        for (entry, ending, resolution) in taken {
            self.settle(entry, ending, resolution);
        }
    }

    /// Ends a request, whoever decided it (a person, a link, a library caller, a rule, the
    /// deadline, the relay failing closed): the one place that records how it ended (its row,
    /// the session's `request-resolved`, the answers remembered) and sends Codex its reply. A
    /// denial's reason not yet passed to the model is passed first, off the caller's task.
    ///
    /// The broker already remembers `resolution` (`State::take`): a request is open or
    /// resolved to whoever looks, never neither.
    fn settle(&self, entry: Entry, ending: Ending, resolution: Resolution) -> Resolution {
        let Entry {
            view,
            responder,
            session,
            server,
            shown,
            ..
        } = entry;
        self.inner
            .store
            .upsert_pending(record(&view, Some(&resolution)));
        if shown {
            session.remove_pending(&view.id, crate::event::request_resolved(&resolution));
        } else {
            session.ruled(&view, crate::event::request_ruled(&resolution, &view));
        }
        match ending {
            Ending::FailClosed(why) => {
                responder.fail_closed(&why);
            }
            Ending::Reply {
                reply,
                reason_passed: false,
            } if reply.reason.is_some() && view.turn.is_some() => {
                let text = reason_text(
                    &resolution.by,
                    &view.question,
                    reply.reason.as_deref().unwrap_or_default(),
                );
                // Never on the caller's task (a session's loop): the steer is a call to Codex.
                tokio::spawn(async move {
                    if let Some(server) = server.upgrade() {
                        pass_reason(&server, &view, text).await;
                    }
                    responder.respond(reply.result);
                });
            }
            Ending::Reply { reply, .. } => {
                if !responder.respond(reply.result) {
                    tracing::warn!(id = %view.id, "the answer could not be sent: Codex is gone");
                }
            }
        }
        resolution
    }

    /// Open requests, optionally of one session.
    /// Whether request `id` of `session_id` is open here.
    pub(crate) fn is_open(&self, session_id: &str, id: &str) -> bool {
        self.lock()
            .open
            .get(id)
            .is_some_and(|e| e.view.session_id == session_id)
    }

    pub fn pending(&self, session_id: Option<&str>) -> Vec<PendingView> {
        let st = self.lock();
        let mut open: Vec<&Entry> = st
            .open
            .values()
            .filter(|e| session_id.is_none_or(|s| e.view.session_id == s))
            .collect();
        open.sort_by_key(|e| e.order);
        open.into_iter().map(|e| e.view.clone()).collect()
    }

    /// How a request was resolved, if this broker remembers it.
    pub fn resolution(&self, id: &str) -> Option<Resolution> {
        self.lock()
            .resolved
            .iter()
            .rev()
            .find(|r| r.id == id)
            .cloned()
    }

    /// Remembers a resolution made outside the broker (pending requests found in the store
    /// after a restart), so later answers get `AlreadyResolved`.
    pub(crate) fn remember(&self, r: Resolution) {
        self.lock().remember(r);
    }
}

/// How `entry` ends with `ending`, decided by `by`.
fn resolution_of(entry: &Entry, ending: &Ending, by: Decider) -> Resolution {
    let (decision, reason) = match ending {
        Ending::Reply { reply, .. } => (reply.decision.clone(), reply.reason.clone()),
        Ending::FailClosed(why) => (
            if entry.responder.request().fail_closed(why).is_ok() {
                Decision::Deny
            } else {
                Decision::Error
            },
            Some(why.clone()),
        ),
    };
    Resolution {
        id: entry.view.id.clone(),
        decision,
        by,
        reason,
        by_user: None,
    }
}

impl State {
    /// Takes request `id` out of the open ones and remembers how it ended, in one step: a
    /// request is always either open or resolved to whoever looks, even while its answer is
    /// still on the way to Codex (a late answer gets `AlreadyResolved`, never "unknown").
    fn take(&mut self, id: &str, resolution: &Resolution) -> Option<Entry> {
        let entry = self.open.remove(id)?;
        self.remember(resolution.clone());
        Some(entry)
    }

    /// Takes request `id` out, ending fail-closed: declined, or an error where the request
    /// has no decline.
    fn take_fail_closed(
        &mut self,
        id: &str,
        by: Decider,
        why: &str,
    ) -> Option<(Entry, Ending, Resolution)> {
        let ending = Ending::FailClosed(why.to_owned());
        let resolution = resolution_of(self.open.get(id)?, &ending, by);
        let entry = self.take(id, &resolution)?;
        Some((entry, ending, resolution))
    }

    fn remember(&mut self, r: Resolution) {
        self.resolved.push_back(r);
        while self.resolved.len() > REMEMBERED_RESOLUTIONS {
            self.resolved.pop_front();
        }
    }
}

/// The broker's one deadline task: resolves requests fail-closed as their deadlines pass;
/// ends once the broker is gone.
async fn expire(broker: Weak<Inner>, wake: Arc<tokio::sync::Notify>) {
    loop {
        let next = {
            let Some(inner) = broker.upgrade() else {
                return;
            };
            let broker = Broker { inner };
            for id in broker.inner.deadlines.due(tokio::time::Instant::now()) {
                // A no-op for requests answered in time.
                broker.fail_closed(&id, Decider::Timeout, "nobody answered before the deadline");
            }
            broker.inner.deadlines.next()
        };
        match next {
            Some(at) => tokio::select! {
                () = tokio::time::sleep_until(at) => {}
                () = wake.notified() => {}
            },
            None => tokio::select! {
                () = tokio::time::sleep(crate::deadlines::IDLE_CHECK) => {}
                () = wake.notified() => {}
            },
        }
    }
}

#[cfg(test)]
#[path = "broker_tests.rs"]
mod tests;
