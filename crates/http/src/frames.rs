//! Serialized SSE frames shared by the subscribers of one session: the 20 streams that wake on
//! the same append serialize its envelope once, not 20 times.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};

use axum::body::Bytes;
use codex_relay_core::Envelope;

/// Frames kept per session: subscribers that keep up read the newest few.
const KEPT: usize = 128;

/// The recent frames of one session, by seq (contiguous).
#[derive(Default)]
pub struct SessionFrames {
    ring: Mutex<VecDeque<(u64, Bytes)>>,
}

impl SessionFrames {
    /// The frames of `env` (its envelope event and any reference-001 event), made once.
    pub fn get(&self, env: &Envelope) -> Bytes {
        {
            let ring = self.ring.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(&(first, _)) = ring.front()
                && env.seq >= first
                && let Some((seq, frame)) = ring.get((env.seq - first) as usize)
                && *seq == env.seq
            {
                return frame.clone();
            }
        }
        let mut text = String::with_capacity(256);
        crate::sse::envelope_frames(&mut text, env);
        let frame = Bytes::from(text);
        let mut ring = self.ring.lock().unwrap_or_else(|e| e.into_inner());
        // Only the next seq extends the ring; older or far-ahead frames are not kept.
        if ring.back().is_none_or(|(last, _)| *last + 1 == env.seq) {
            ring.push_back((env.seq, frame.clone()));
            while ring.len() > KEPT {
                ring.pop_front();
            }
        }
        frame
    }
}

/// The frame caches of the sessions that have subscribers (dropped with the last one).
#[derive(Default)]
pub struct Frames {
    by_session: Mutex<HashMap<String, Weak<SessionFrames>>>,
}

impl Frames {
    pub fn session(&self, id: &str) -> Arc<SessionFrames> {
        let mut map = self.by_session.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(f) = map.get(id).and_then(Weak::upgrade) {
            return f;
        }
        map.retain(|_, w| w.strong_count() > 0);
        let f = Arc::new(SessionFrames::default());
        map.insert(id.to_owned(), Arc::downgrade(&f));
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use codex_relay_core::{Ev, Role};

    fn env(seq: u64) -> Envelope {
        Envelope {
            id: format!("s:{seq}"),
            seq,
            time: 0,
            role: Role::Agent,
            turn: None,
            invoke: None,
            agent: None,
            ev: Ev::Text {
                text: format!("n{seq}"),
                thinking: false,
            },
        }
    }

    #[test]
    fn a_frame_is_made_once_and_shared() {
        let frames = Frames::default();
        let a = frames.session("s");
        let first = a.get(&env(1));
        assert!(String::from_utf8_lossy(&first).starts_with("event: envelope\nid: 1\n"));
        let again = frames.session("s").get(&env(1));
        assert_eq!(first.as_ptr(), again.as_ptr(), "the same bytes, not a copy");
        assert_eq!(a.get(&env(2)).as_ptr(), a.get(&env(2)).as_ptr());
        // Not contiguous: made, but not kept.
        assert_ne!(a.get(&env(9)).as_ptr(), a.get(&env(9)).as_ptr());
        drop(a);
        drop(first);
        drop(again);
        let fresh = frames.session("s");
        assert!(
            fresh.ring.lock().unwrap().is_empty(),
            "dropped with its last subscriber"
        );
    }
}
