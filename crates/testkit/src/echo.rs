//! Bounded echo of a child's log lines into the test's output. libtest (and nextest) print
//! what a failing test wrote, so a relay at DEBUG echoed line by line once made one failure
//! print 240 MB. An [`Echo`] prints its first [`LIMIT`] lines, then says it stops, and counts
//! the rest; the test keeps the whole log itself where it asserts on it.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Lines one stream echoes before it goes quiet.
pub const LIMIT: usize = 400;

/// One child's stream of lines, echoed with a prefix up to [`LIMIT`].
#[derive(Debug)]
pub struct Echo {
    prefix: String,
    seen: AtomicUsize,
}

impl Echo {
    pub fn new(prefix: impl Into<String>) -> Self {
        Self {
            prefix: prefix.into(),
            seen: AtomicUsize::new(0),
        }
    }

    /// Echoes `line` (to stderr, as `[prefix] line`) while under the limit.
    pub fn line(&self, line: &str) {
        let n = self.seen.fetch_add(1, Ordering::Relaxed);
        if n < LIMIT {
            eprintln!("[{}] {line}", self.prefix);
        } else if n == LIMIT {
            eprintln!(
                "[{}] ... further lines are not echoed (the test keeps what it checks)",
                self.prefix
            );
        }
    }
}
