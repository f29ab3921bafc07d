//! Who receives what: per-thread subscribers, one default subscriber, and a bounded parking
//! area for thread events that arrive before anyone subscribed to their thread.

use std::collections::{HashMap, VecDeque};

use tokio::sync::mpsc::UnboundedSender;

use codex_relay_protocol::v2::ServerNotification;

use crate::peer::PeerEvent;

/// Events kept per thread while nobody listens (a `thread/start` answer races its first
/// notifications).
const PARK_PER_THREAD: usize = 2048;
/// Threads with parked events; the oldest are forgotten beyond this.
const PARK_THREADS: usize = 64;

#[derive(Default)]
pub(crate) struct Routes {
    next_key: u64,
    threads: HashMap<String, (u64, UnboundedSender<PeerEvent>)>,
    default: Option<(u64, UnboundedSender<PeerEvent>)>,
    parked: HashMap<String, VecDeque<PeerEvent>>,
    parked_order: VecDeque<String>,
}

/// Where an event ended up; the caller logs the last two.
pub(crate) enum Delivery {
    Delivered,
    Parked,
    /// Nobody takes it; the event is handed back (a request still has to be answered).
    Nobody(Box<PeerEvent>),
}

impl Routes {
    /// Subscribes to one thread, replacing an earlier subscriber, and returns its key plus the
    /// events parked for it so far.
    pub fn add_thread(
        &mut self,
        thread_id: &str,
        tx: UnboundedSender<PeerEvent>,
    ) -> (u64, VecDeque<PeerEvent>) {
        self.next_key += 1;
        let key = self.next_key;
        self.threads.insert(thread_id.to_owned(), (key, tx));
        let parked = self.parked.remove(thread_id).unwrap_or_default();
        self.parked_order.retain(|t| t != thread_id);
        (key, parked)
    }

    pub fn set_default(&mut self, tx: UnboundedSender<PeerEvent>) -> u64 {
        self.next_key += 1;
        self.default = Some((self.next_key, tx));
        self.next_key
    }

    /// Routes `child` to whoever receives `parent` (a sub-agent thread goes where the thread
    /// that spawned it goes), with the events parked for `child` so far. Returns false when
    /// nobody receives `parent`.
    pub fn follow(&mut self, parent: &str, child: &str) -> bool {
        let Some((key, tx)) = self.threads.get(parent).cloned() else {
            return false;
        };
        if self.threads.get(child).is_some_and(|(k, _)| *k == key) {
            return true;
        }
        self.threads.insert(child.to_owned(), (key, tx.clone()));
        for event in self.parked.remove(child).unwrap_or_default() {
            let _ = tx.send(event);
        }
        self.parked_order.retain(|t| t != child);
        true
    }

    /// Removes a subscription (with every thread it follows) if it is still the current one
    /// under that key.
    pub fn remove(&mut self, thread_id: Option<&str>, key: u64) {
        match thread_id {
            Some(_) => self.threads.retain(|_, (k, _)| *k != key),
            None => {
                if self.default.as_ref().is_some_and(|(k, _)| *k == key) {
                    self.default = None;
                }
            }
        }
    }

    /// Delivers one event: to its thread's subscriber, else (requests and thread-less events)
    /// to the default subscriber, else thread notifications are parked.
    pub fn deliver(&mut self, thread_id: Option<&str>, event: PeerEvent) -> Delivery {
        let event = match thread_id.and_then(|t| self.threads.get(t).map(|s| (t, s))) {
            Some((t, (_, tx))) => match tx.send(event) {
                Ok(()) => return Delivery::Delivered,
                Err(back) => {
                    let t = t.to_owned();
                    self.threads.remove(&t);
                    back.0
                }
            },
            None => event,
        };
        let is_request = matches!(event, PeerEvent::Request(_));
        if let (Some(t), false) = (thread_id, is_request) {
            self.park(t, event);
            return Delivery::Parked;
        }
        if let Some((_, tx)) = &self.default {
            match tx.send(event) {
                Ok(()) => return Delivery::Delivered,
                Err(back) => {
                    self.default = None;
                    return Delivery::Nobody(Box::new(back.0));
                }
            }
        }
        Delivery::Nobody(Box::new(event))
    }

    fn park(&mut self, thread_id: &str, event: PeerEvent) {
        if !self.parked.contains_key(thread_id) {
            if self.parked_order.len() >= PARK_THREADS
                && let Some(old) = self.parked_order.pop_front()
            {
                self.parked.remove(&old);
            }
            self.parked_order.push_back(thread_id.to_owned());
        }
        let q = self.parked.entry(thread_id.to_owned()).or_default();
        if q.len() >= PARK_PER_THREAD {
            q.pop_front();
        }
        q.push_back(event);
    }

    /// Every live subscriber, for the closing broadcast; the table is emptied.
    pub fn drain(&mut self) -> Vec<UnboundedSender<PeerEvent>> {
        // One subscription may follow several threads: close each one once.
        let mut seen = std::collections::HashSet::new();
        let mut out: Vec<_> = self
            .threads
            .drain()
            .filter(|(_, (key, _))| seen.insert(*key))
            .map(|(_, (_, tx))| tx)
            .collect();
        out.extend(self.default.take().map(|(_, tx)| tx));
        self.parked.clear();
        self.parked_order.clear();
        out
    }
}

/// `(parent, child)` thread pairs a notification reveals: a sub-agent spawn call that names
/// its new thread (`collabAgentToolCall` items), or a sub-agent's `thread/started`.
pub(crate) fn spawned_threads(
    n: &codex_relay_protocol::v2::ServerNotification,
) -> Vec<(&str, &str)> {
    use codex_relay_protocol::v2::ThreadItem;
    match n {
        ServerNotification::ItemStarted(i) | ServerNotification::ItemCompleted(i) => {
            match &i.item {
                ThreadItem::CollabAgentToolCall(c) if c.tool == "spawnAgent" => c
                    .receiver_thread_ids
                    .iter()
                    .map(|child| (i.thread_id.as_str(), child.as_str()))
                    .collect(),
                _ => Vec::new(),
            }
        }
        ServerNotification::ThreadStarted(t) => {
            match (&t.thread.parent_thread_id, &t.thread.source) {
                (Some(parent), _) => vec![(parent.as_str(), t.thread.id.as_str())],
                (None, Some(source)) => source
                    .pointer("/subAgent/thread_spawn/parent_thread_id")
                    .and_then(serde_json::Value::as_str)
                    .map(|parent| vec![(parent, t.thread.id.as_str())])
                    .unwrap_or_default(),
                (None, None) => Vec::new(),
            }
        }
        _ => Vec::new(),
    }
}
