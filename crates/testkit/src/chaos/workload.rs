//! What clients do during a fault-injection run, and the ledger of what they were told: new
//! sessions of three kinds (a quick one, one whose command needs an approval, one whose
//! command writes a numbered beat every fifth of a second), messages, answers and closes sent
//! through any instance, and readers following sessions live, moving to another instance when
//! theirs goes away.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use super::http::{self, Resp, Sse};
use super::instances::Addrs;
use crate::Reply;

/// How long a client waits for any answer (a paused instance answers when it is continued).
pub const ANSWER_WAIT: Duration = Duration::from_secs(30);

/// The kinds of session a run starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Text replies only.
    Quick,
    /// A command that needs an approval: it appends the instance's name to `ran-<marker>.txt`.
    Approval,
    /// A command run without asking that appends `<n> <instance> <unix ms>` to
    /// `beats-<marker>.txt`, 30 times, every 0.2 s.
    Beats,
}

impl Kind {
    fn letter(self) -> char {
        match self {
            Kind::Quick => 'Q',
            Kind::Approval => 'P',
            Kind::Beats => 'L',
        }
    }

    /// The model's replies for a session of this kind: its first turn, then one text per
    /// later message (more messages than that get no reply, and their turns fail).
    pub fn replies(self, marker: &str) -> Vec<Reply> {
        let mut out = match self {
            Kind::Quick => vec![],
            Kind::Approval => vec![Reply::exec(
                &format!("echo \"$CHAOS_INSTANCE\" >> ran-{marker}.txt"),
                &format!("call-{marker}"),
            )],
            Kind::Beats => vec![Reply::exec(
                &format!(
                    "for i in $(seq 1 30); do echo \"$i $CHAOS_INSTANCE $(date +%s%3N)\" >> beats-{marker}.txt; sleep 0.2; done"
                ),
                &format!("call-{marker}"),
            )],
        };
        out.extend((0..6).map(|n| Reply::text(format!("{marker} reply {n}"))));
        out
    }

    fn options(self, prompt: &str, cwd: &str) -> Value {
        match self {
            Kind::Quick => json!({"prompt": prompt, "cwd": cwd, "sandbox": "read-only"}),
            Kind::Approval => json!({"prompt": prompt, "cwd": cwd,
                "approvalPolicy": "untrusted", "sandbox": "workspace-write"}),
            Kind::Beats => json!({"prompt": prompt, "cwd": cwd,
                "approvalPolicy": "never", "sandbox": "workspace-write"}),
        }
    }
}

/// A session a client was told exists (201).
#[derive(Debug, Clone)]
pub struct Known {
    pub id: String,
    pub marker: String,
    pub kind: Kind,
    pub cycle: usize,
}

/// One thing a client was told.
#[derive(Debug, Clone)]
pub enum Told {
    /// `201` for a new session, with its first message.
    Created { session: String, prompt: String },
    /// `2xx` for a message; `started` when it began a turn (else it steered one).
    Said {
        session: String,
        text: String,
        started: bool,
    },
    /// `200` for an answer, with the decision the relay reported.
    Answered {
        request: String,
        decision: String,
        by: String,
    },
    /// `204` for a close.
    Closed { session: String },
}

/// What one reader of a session was shown: the session, and each `(seq, ev)`.
pub type View = (String, Vec<(u64, Value)>);

/// What clients were told, and the tallies of every answer by kind.
#[derive(Default)]
pub struct Ledger {
    pub told: Mutex<Vec<Told>>,
    pub sessions: Mutex<Vec<Known>>,
    /// `<action> <status> <code>` → how many times.
    pub tally: Mutex<BTreeMap<String, u64>>,
    /// Readers' views, reader by reader.
    pub views: Mutex<Vec<View>>,
    pub markers: AtomicU64,
}

impl Ledger {
    fn count(&self, action: &str, r: &Option<Resp>) {
        let key = match r {
            Some(r) if r.status < 300 => format!("{action} {}", r.status),
            Some(r) => format!("{action} {} {}", r.status, r.code()),
            None => format!("{action} no answer"),
        };
        *self
            .tally
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key)
            .or_default() += 1;
    }

    fn tell(&self, t: Told) {
        self.told.lock().unwrap_or_else(|e| e.into_inner()).push(t);
    }

    pub fn sessions_of(&self, cycle: usize) -> Vec<Known> {
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|k| k.cycle == cycle)
            .cloned()
            .collect()
    }
}

/// The clients of a run: where the instances are, the model to script, the ledger.
#[derive(Clone)]
pub struct Clients {
    pub addrs: Addrs,
    pub token: String,
    pub model: Arc<crate::ModelServer>,
    pub ledger: Arc<Ledger>,
    pub workspace: PathBuf,
}

impl Clients {
    async fn call(
        &self,
        via: usize,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Option<Resp> {
        let addr = self.addrs.get(via);
        if addr.is_empty() {
            return None;
        }
        http::request(&addr, &self.token, method, path, body, ANSWER_WAIT).await
    }

    /// Creates a session of `kind` through instance `via`.
    pub async fn create(&self, via: usize, kind: Kind, cycle: usize) -> Option<String> {
        let n = self.ledger.markers.fetch_add(1, Ordering::Relaxed);
        let marker = format!("FI{}{n}X", kind.letter());
        self.model.route(&marker, kind.replies(&marker));
        let prompt = format!("{marker}: go");
        let cwd = self.workspace.display().to_string();
        let r = self
            .call(
                via,
                "POST",
                "/api/sessions",
                Some(&kind.options(&prompt, &cwd)),
            )
            .await;
        self.ledger.count("create", &r);
        let r = r.filter(|r| r.status == 201)?;
        let id = r.json()["sessionId"].as_str()?.to_owned();
        self.ledger.tell(Told::Created {
            session: id.clone(),
            prompt,
        });
        self.ledger
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Known {
                id: id.clone(),
                marker,
                kind,
                cycle,
            });
        Some(id)
    }

    /// Sends a message to `s` through `via`.
    pub async fn say(&self, via: usize, s: &Known, n: u64) {
        let text = format!("{} more {n}", s.marker);
        let r = self
            .call(
                via,
                "POST",
                &format!("/api/sessions/{}/messages", s.id),
                Some(&json!({"text": text})),
            )
            .await;
        self.ledger.count("say", &r);
        if let Some(r) = r.filter(|r| r.status < 300) {
            let started = r.json()["mode"] == "started";
            self.ledger.tell(Told::Said {
                session: s.id.clone(),
                text,
                started,
            });
        }
    }

    /// The open requests as instance `via` lists them.
    pub async fn pending(&self, via: usize) -> Option<Vec<Value>> {
        let r = self
            .call(via, "GET", "/api/codex/permission/pending", None)
            .await?;
        (r.status == 200).then(|| r.json().as_array().cloned().unwrap_or_default())
    }

    /// Answers request `id` through `via`.
    pub async fn answer(&self, via: usize, id: &str, allow: bool) {
        let action = if allow { "allow" } else { "deny" };
        let r = self
            .call(
                via,
                "POST",
                "/api/codex/permission/respond",
                Some(&json!({"id": id, "action": action})),
            )
            .await;
        self.ledger.count("answer", &r);
        if let Some(r) = r.filter(|r| r.status == 200) {
            let body = r.json();
            self.ledger.tell(Told::Answered {
                request: id.to_owned(),
                decision: body["decision"].as_str().unwrap_or_default().to_owned(),
                by: body["by"].as_str().unwrap_or_default().to_owned(),
            });
        }
    }

    /// Closes `s` through `via`.
    pub async fn close(&self, via: usize, s: &Known) {
        let r = self
            .call(
                via,
                "DELETE",
                &format!("/api/sessions/{}?force=true", s.id),
                None,
            )
            .await;
        self.ledger.count("close", &r);
        if r.is_some_and(|r| r.status < 300) {
            self.ledger.tell(Told::Closed {
                session: s.id.clone(),
            });
        }
    }

    /// The session as instance `via` shows it.
    pub async fn view(&self, via: usize, id: &str) -> Option<Value> {
        let r = self
            .call(via, "GET", &format!("/api/sessions/{id}"), None)
            .await?;
        (r.status == 200).then(|| r.json())
    }

    /// `/healthz` of instance `via`: its status and body.
    pub async fn health(&self, via: usize) -> Option<(u16, Value)> {
        let r = self.call(via, "GET", "/healthz", None).await?;
        Some((r.status, r.json()))
    }

    /// Follows session `id` live until `stop`, from its first event, through `via` and then,
    /// whenever the stream ends or stalls, through the next instance, resuming after the last
    /// seq it showed; records what it was shown.
    pub async fn read(&self, id: String, mut via: usize, stop: Arc<AtomicBool>) {
        let mut seen: Vec<(u64, Value)> = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let addr = self.addrs.get(via);
            let last = seen.last().map(|(s, _)| *s);
            let path = format!("/api/sessions/{id}/stream");
            let opened = if addr.is_empty() {
                None
            } else {
                Sse::open(&addr, &self.token, &path, last, Duration::from_secs(5)).await
            };
            if let Some(mut sse) = opened {
                while !stop.load(Ordering::Relaxed) {
                    let Some(e) = sse.next(Duration::from_secs(3)).await else {
                        break;
                    };
                    if e.event != "envelope" {
                        continue;
                    }
                    let v: Value = serde_json::from_str(&e.data).unwrap_or(Value::Null);
                    if let Some(seq) = v["seq"].as_u64() {
                        seen.push((seq, v["ev"].clone()));
                    }
                }
            } else {
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            via = (via + 1) % self.addrs.len();
        }
        self.ledger
            .views
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((id, seen));
    }
}
