//! The `MAX_SESSIONS` slots: claiming one returns a [`SlotGuard`] that frees it when dropped, so
//! a failed start, a closed session and a crashed actor all give their slot back.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::error::RelayError;

/// The sessions open at once (`MAX_SESSIONS`); cheap to clone.
#[derive(Clone)]
pub(crate) struct Slots {
    max: usize,
    taken: Arc<Mutex<Taken>>,
}

/// Slots in use: guards not yet named (a session being created) and, by session id, how many
/// guards share each named slot.
#[derive(Default)]
struct Taken {
    unnamed: usize,
    named: HashMap<String, usize>,
}

impl Taken {
    fn used(&self) -> usize {
        self.unnamed + self.named.len()
    }
}

impl Slots {
    pub fn new(max: usize) -> Self {
        Self {
            max,
            taken: Arc::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Taken> {
        self.taken.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn full(&self) -> RelayError {
        RelayError::TooManySessions { max: self.max }
    }

    /// Takes a slot for a session whose id is not known yet (before any work is done for it);
    /// [`SlotGuard::name`] gives it the id once Codex has one.
    pub fn reserve(&self) -> Result<SlotGuard, RelayError> {
        let mut t = self.lock();
        if t.used() >= self.max {
            return Err(self.full());
        }
        t.unnamed += 1;
        Ok(SlotGuard {
            slots: self.clone(),
            id: None,
        })
    }

    /// Takes the slot of session `id`. A session that already holds one shares it (the slot is
    /// freed when its last guard is dropped); refused when every slot is taken.
    pub fn claim(&self, id: &str) -> Result<SlotGuard, RelayError> {
        let mut t = self.lock();
        if !t.named.contains_key(id) && t.used() >= self.max {
            return Err(self.full());
        }
        *t.named.entry(id.to_owned()).or_insert(0) += 1;
        Ok(SlotGuard {
            slots: self.clone(),
            id: Some(id.to_owned()),
        })
    }

    /// Whether session `id` holds a slot (it is attached to this relay).
    pub fn holds(&self, id: &str) -> bool {
        self.lock().named.contains_key(id)
    }

    /// Slots in use, named or not.
    #[cfg(test)]
    pub fn used(&self) -> usize {
        self.lock().used()
    }
}

/// One session's hold on a slot; dropping it frees the slot.
pub(crate) struct SlotGuard {
    slots: Slots,
    id: Option<String>,
}

impl SlotGuard {
    /// Names a reserved slot after the session that now has an id. A session that already
    /// holds a slot keeps its own and this reservation is given back.
    pub fn name(&mut self, id: &str) {
        if self.id.is_some() {
            return;
        }
        let mut t = self.slots.lock();
        t.unnamed -= 1;
        *t.named.entry(id.to_owned()).or_insert(0) += 1;
        self.id = Some(id.to_owned());
    }
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        let mut t = self.slots.lock();
        match self.id.take() {
            None => t.unnamed -= 1,
            Some(id) => {
                if let Some(guards) = t.named.get_mut(&id) {
                    *guards -= 1;
                    if *guards == 0 {
                        t.named.remove(&id);
                    }
                }
            }
        }
    }
}

impl std::fmt::Debug for SlotGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlotGuard").field("id", &self.id).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guard_frees_its_slot_on_drop_and_the_cap_holds_meanwhile() {
        let slots = Slots::new(2);
        let a = slots.claim("a").unwrap();
        let mut b = slots.reserve().unwrap();
        assert!(matches!(
            slots.claim("c"),
            Err(RelayError::TooManySessions { max: 2 })
        ));
        assert!(matches!(
            slots.reserve(),
            Err(RelayError::TooManySessions { max: 2 })
        ));
        b.name("b");
        assert!(slots.holds("a") && slots.holds("b"));
        drop(a);
        assert!(!slots.holds("a"));
        assert_eq!(slots.used(), 1);
        drop(b);
        assert_eq!(slots.used(), 0);
    }

    #[test]
    fn a_reservation_dropped_before_it_is_named_frees_its_slot() {
        let slots = Slots::new(1);
        drop(slots.reserve().unwrap());
        assert_eq!(slots.used(), 0);
        let _c = slots.claim("c").unwrap();
    }

    #[test]
    fn guards_of_one_session_share_its_slot_until_the_last_is_dropped() {
        let slots = Slots::new(1);
        let first = slots.claim("s").unwrap();
        let second = slots.claim("s").unwrap();
        assert_eq!(slots.used(), 1);
        drop(first);
        assert!(slots.holds("s"), "the second guard still holds it");
        drop(second);
        assert!(!slots.holds("s"));
        assert_eq!(slots.used(), 0);
    }

    #[test]
    fn naming_after_a_session_that_holds_a_slot_gives_the_reservation_back() {
        let slots = Slots::new(2);
        let held = slots.claim("s").unwrap();
        let mut reserved = slots.reserve().unwrap();
        reserved.name("s");
        assert_eq!(slots.used(), 1);
        drop(held);
        assert!(slots.holds("s"));
        drop(reserved);
        assert_eq!(slots.used(), 0);
    }
}
