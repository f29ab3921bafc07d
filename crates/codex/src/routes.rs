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
    /// Receives a copy of every thread's lifecycle notifications, whoever else does.
    watch: Option<(u64, UnboundedSender<PeerEvent>)>,
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

    pub fn set_watch(&mut self, tx: UnboundedSender<PeerEvent>) -> u64 {
        self.next_key += 1;
        self.watch = Some((self.next_key, tx));
        self.next_key
    }

    /// Sends the watcher a copy of `event` when it is a thread's lifecycle notification
    /// (`thread/started`, `thread/status/changed`, `thread/closed`); whether one was sent.
    pub fn copy_to_watch(&mut self, event: &PeerEvent) -> bool {
        let (Some((_, tx)), PeerEvent::Notification(n)) = (&self.watch, event) else {
            return false;
        };
        let lifecycle = match &n.notification {
            ServerNotification::ThreadStarted(_) | ServerNotification::ThreadStatusChanged(_) => {
                true
            }
            ServerNotification::Unknown { method, .. } => method == "thread/closed",
            _ => false,
        };
        if lifecycle && tx.send(PeerEvent::Notification(n.clone())).is_err() {
            self.watch = None;
            return false;
        }
        lifecycle
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
                if self.watch.as_ref().is_some_and(|(k, _)| *k == key) {
                    self.watch = None;
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
        out.extend(self.watch.take().map(|(_, tx)| tx));
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

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Weak};

    use codex_relay_protocol::RequestId;
    use codex_relay_protocol::v2::ServerRequest;
    use serde_json::{Value, json};
    use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

    use super::*;
    use crate::peer::{IncomingRequest, Notification};
    use crate::responder::Responder;

    /// A notification of `thread` (or thread-less) carrying `n`, to tell events apart.
    fn note(thread: Option<&str>, n: usize) -> PeerEvent {
        let mut params = json!({ "n": n });
        if let Some(t) = thread {
            params["threadId"] = json!(t);
        }
        notification("test/note", params)
    }

    fn notification(method: &str, params: Value) -> PeerEvent {
        PeerEvent::Notification(Notification {
            notification: ServerNotification::parse(method, params),
            raw: Arc::new(String::new()),
        })
    }

    /// A server request of `thread`; with no peer behind it, dropping it answers nothing.
    fn request(thread: Option<&str>) -> PeerEvent {
        let params = thread.map_or(json!({}), |t| json!({ "threadId": t }));
        PeerEvent::Request(IncomingRequest {
            responder: Responder::new(
                RequestId::Integer(7),
                ServerRequest::parse("test/ask", params),
                Weak::new(),
            ),
            raw: Arc::new(String::new()),
        })
    }

    /// The `n` of a notification made by [`note`]; `None` for anything else.
    fn n_of(event: &PeerEvent) -> Option<usize> {
        match event {
            PeerEvent::Notification(n) => match &n.notification {
                ServerNotification::Unknown { params, .. } => {
                    params["n"].as_u64().map(|n| n as usize)
                }
                _ => None,
            },
            _ => None,
        }
    }

    fn ns(events: impl IntoIterator<Item = PeerEvent>) -> Vec<usize> {
        events.into_iter().filter_map(|e| n_of(&e)).collect()
    }

    fn received(rx: &mut UnboundedReceiver<PeerEvent>) -> Vec<PeerEvent> {
        std::iter::from_fn(|| rx.try_recv().ok()).collect()
    }

    fn deliver(routes: &mut Routes, thread: Option<&str>, event: PeerEvent) -> &'static str {
        match routes.deliver(thread, event) {
            Delivery::Delivered => "delivered",
            Delivery::Parked => "parked",
            Delivery::Nobody(_) => "nobody",
        }
    }

    #[test]
    fn early_thread_events_are_parked_and_handed_over_in_order_on_subscribe() {
        let mut routes = Routes::default();
        for n in 0..5 {
            assert_eq!(
                deliver(&mut routes, Some("t1"), note(Some("t1"), n)),
                "parked"
            );
        }
        // Another thread's early events stay apart.
        assert_eq!(
            deliver(&mut routes, Some("t2"), note(Some("t2"), 99)),
            "parked"
        );
        let (tx, mut rx) = unbounded_channel();
        let (_, parked) = routes.add_thread("t1", tx);
        assert_eq!(ns(parked), vec![0, 1, 2, 3, 4]);
        // From now on events go straight to the subscriber, after what was parked.
        assert_eq!(
            deliver(&mut routes, Some("t1"), note(Some("t1"), 5)),
            "delivered"
        );
        assert_eq!(ns(received(&mut rx)), vec![5]);
        // What was handed over is no longer parked: a new subscriber gets nothing twice.
        let (tx2, _rx2) = unbounded_channel();
        assert!(routes.add_thread("t1", tx2).1.is_empty());
        let (tx3, _rx3) = unbounded_channel();
        assert_eq!(ns(routes.add_thread("t2", tx3).1), vec![99]);
    }

    #[test]
    fn parking_is_bounded_per_thread_keeping_the_newest() {
        let mut routes = Routes::default();
        let total = PARK_PER_THREAD + 10;
        for n in 0..total {
            deliver(&mut routes, Some("t"), note(Some("t"), n));
        }
        let (tx, _rx) = unbounded_channel();
        let kept = ns(routes.add_thread("t", tx).1);
        assert_eq!(kept.len(), PARK_PER_THREAD);
        assert_eq!(kept, (10..total).collect::<Vec<_>>());
    }

    #[test]
    fn parking_is_bounded_in_threads_forgetting_the_oldest() {
        let mut routes = Routes::default();
        for t in 0..=PARK_THREADS {
            let thread = format!("t{t}");
            deliver(&mut routes, Some(&thread), note(Some(&thread), t));
        }
        let (tx, _rx) = unbounded_channel();
        assert!(
            routes.add_thread("t0", tx).1.is_empty(),
            "the oldest thread's parked events are forgotten"
        );
        for t in 1..=PARK_THREADS {
            let (tx, _rx) = unbounded_channel();
            assert_eq!(ns(routes.add_thread(&format!("t{t}"), tx).1), vec![t]);
        }
        assert!(routes.parked.is_empty() && routes.parked_order.is_empty());
    }

    #[test]
    fn a_sub_agent_goes_to_its_spawners_subscriber_at_any_depth() {
        let mut routes = Routes::default();
        let (tx, mut rx) = unbounded_channel();
        let (key, _) = routes.add_thread("parent", tx);
        // The child spoke before anyone knew it was a child: parked.
        assert_eq!(
            deliver(&mut routes, Some("child"), note(Some("child"), 1)),
            "parked"
        );
        assert!(routes.follow("parent", "child"));
        // Its parked events reach the parent's subscriber at once, then its live ones.
        assert_eq!(ns(received(&mut rx)), vec![1]);
        assert_eq!(
            deliver(&mut routes, Some("child"), note(Some("child"), 2)),
            "delivered"
        );
        // A grandchild follows the child, so it too reaches the parent's subscriber.
        assert!(routes.follow("child", "grandchild"));
        assert_eq!(
            deliver(&mut routes, Some("grandchild"), note(Some("grandchild"), 3)),
            "delivered"
        );
        // Its requests too (a sub-agent's approval is the session's).
        assert_eq!(
            deliver(&mut routes, Some("grandchild"), request(Some("grandchild"))),
            "delivered"
        );
        let got = received(&mut rx);
        assert_eq!(got.iter().filter_map(n_of).collect::<Vec<_>>(), vec![2, 3]);
        assert!(matches!(got.last(), Some(PeerEvent::Request(_))));
        // Following twice changes nothing; nobody receives a thread nobody subscribed to.
        assert!(routes.follow("parent", "child"));
        assert!(!routes.follow("stranger", "other"));
        // Unsubscribing the spawner drops the whole family.
        routes.remove(Some("parent"), key);
        assert!(routes.threads.is_empty());
        assert_eq!(
            deliver(&mut routes, Some("child"), note(Some("child"), 4)),
            "parked"
        );
    }

    #[test]
    fn thread_less_events_and_unclaimed_requests_go_to_the_default_subscriber() {
        let mut routes = Routes::default();
        // With no default, a thread-less event and a request are handed back (a request is
        // then answered fail-closed by the peer); a thread's notification is parked.
        assert_eq!(deliver(&mut routes, None, note(None, 0)), "nobody");
        assert_eq!(
            deliver(&mut routes, Some("t"), request(Some("t"))),
            "nobody"
        );
        let (tx, mut rx) = unbounded_channel();
        let key = routes.set_default(tx);
        assert_eq!(deliver(&mut routes, None, note(None, 1)), "delivered");
        // A request of a thread nobody subscribed to is not parked (it would wait forever).
        assert_eq!(
            deliver(&mut routes, Some("t"), request(Some("t"))),
            "delivered"
        );
        assert_eq!(
            deliver(&mut routes, Some("t"), note(Some("t"), 2)),
            "parked"
        );
        let got = received(&mut rx);
        assert_eq!(got.len(), 2);
        assert_eq!(n_of(&got[0]), Some(1));
        assert!(matches!(got[1], PeerEvent::Request(_)));
        // A subscribed thread's events do not reach the default.
        let (ttx, mut trx) = unbounded_channel();
        routes.add_thread("t", ttx);
        assert_eq!(
            deliver(&mut routes, Some("t"), note(Some("t"), 3)),
            "delivered"
        );
        assert_eq!(ns(received(&mut trx)), vec![3]);
        assert!(received(&mut rx).is_empty());
        // A stale key leaves the current default alone; the current one removes it.
        routes.remove(None, key + 100);
        assert!(routes.default.is_some());
        routes.remove(None, key);
        assert_eq!(deliver(&mut routes, None, note(None, 4)), "nobody");
    }

    #[test]
    fn a_gone_subscriber_is_dropped_and_its_events_fall_back() {
        let mut routes = Routes::default();
        let (tx, rx) = unbounded_channel();
        routes.add_thread("t", tx);
        drop(rx);
        // The thread's subscriber is gone: the event is parked for the next one.
        assert_eq!(
            deliver(&mut routes, Some("t"), note(Some("t"), 1)),
            "parked"
        );
        assert!(!routes.threads.contains_key("t"));
        let (dtx, drx) = unbounded_channel();
        routes.set_default(dtx);
        drop(drx);
        assert_eq!(deliver(&mut routes, None, note(None, 2)), "nobody");
        assert!(routes.default.is_none());
    }

    #[test]
    fn drain_closes_each_subscription_once_and_forgets_what_was_parked() {
        let mut routes = Routes::default();
        let (tx, _rx) = unbounded_channel();
        routes.add_thread("parent", tx);
        routes.follow("parent", "child");
        let (dtx, _drx) = unbounded_channel();
        routes.set_default(dtx);
        deliver(&mut routes, Some("early"), note(Some("early"), 1));
        assert_eq!(
            routes.drain().len(),
            2,
            "the parent's subscription once, and the default"
        );
        assert!(routes.threads.is_empty() && routes.default.is_none());
        assert!(routes.parked.is_empty() && routes.parked_order.is_empty());
    }

    #[test]
    fn spawned_threads_are_read_from_a_spawn_call_and_from_thread_started() {
        let spawn = ServerNotification::parse(
            "item/completed",
            json!({"threadId": "parent", "turnId": "turn", "item": {
                "type": "collabAgentToolCall", "id": "call", "tool": "spawnAgent",
                "status": "completed", "senderThreadId": "parent",
                "receiverThreadIds": ["child"]}}),
        );
        assert_eq!(spawned_threads(&spawn), vec![("parent", "child")]);
        let other_tool = ServerNotification::parse(
            "item/started",
            json!({"threadId": "parent", "turnId": "turn", "item": {
                "type": "collabAgentToolCall", "id": "call", "tool": "sendInput",
                "status": "inProgress", "receiverThreadIds": ["child"]}}),
        );
        assert!(spawned_threads(&other_tool).is_empty());
        let by_parent_field = ServerNotification::parse(
            "thread/started",
            json!({"thread": {"id": "child", "parentThreadId": "parent"}}),
        );
        assert_eq!(spawned_threads(&by_parent_field), vec![("parent", "child")]);
        let by_source = ServerNotification::parse(
            "thread/started",
            json!({"thread": {"id": "grandchild", "source": {"subAgent": {"thread_spawn": {
                "parent_thread_id": "child", "depth": 2}}}}}),
        );
        assert_eq!(spawned_threads(&by_source), vec![("child", "grandchild")]);
        let own = ServerNotification::parse(
            "thread/started",
            json!({"thread": {"id": "top", "source": "appServer"}}),
        );
        assert!(spawned_threads(&own).is_empty());
    }
}
