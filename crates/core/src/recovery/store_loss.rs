//! What recovery tells a session whose last events the store never took: the run before gave
//! them up when it stopped on a database that could not take writes, and noted which
//! ([`crate::store::LossNote`]).

use crate::event::{Ev, Role};
use crate::session::Logged;
use crate::store::LossNote;

/// Where the next events of a session go and what its log says about the gap before them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Gap {
    /// The highest seq the store holds.
    pub stored: i64,
    /// The highest seq clients were shown: the log goes on after it, so no seq a client saw is
    /// reused for another event.
    pub shown: i64,
    pub fault: String,
}

/// The gap the note records for session `id` beyond what the store holds (`stored`), if any.
pub(crate) fn gap(note: Option<&LossNote>, id: &str, stored: i64) -> Option<Gap> {
    let note = note?;
    let shown = note
        .sessions
        .iter()
        .filter(|l| l.session_id == id)
        .map(|l| l.last_seq)
        .max()?;
    (shown > stored).then(|| Gap {
        stored,
        shown,
        fault: note.fault.clone(),
    })
}

/// The `error` event that opens the log after the gap.
pub(crate) fn report(gap: &Gap) -> Logged {
    Logged {
        role: Role::System,
        turn: None,
        ev: Ev::Error {
            message: format!(
                "events after seq {} were not stored: the store could not take writes ({}) \
                 until the relay stopped; seqs {} to {} were shown live but are not in this log",
                gap.stored,
                gap.fault,
                gap.stored + 1,
                gap.shown
            ),
            retrying: false,
        },
        origin: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::LostEvents;

    #[test]
    fn the_gap_runs_from_the_stored_head_to_the_last_seq_shown() {
        let note = LossNote {
            store: "/db".into(),
            fault: "disk I/O error".into(),
            at: 0,
            sessions: vec![LostEvents {
                session_id: "s".into(),
                first_seq: 9,
                last_seq: 14,
                count: 6,
            }],
        };
        // The store holds less than the writer thought it committed (an OS crash lost some).
        let g = gap(Some(&note), "s", 6).expect("a gap");
        assert_eq!((g.stored, g.shown), (6, 14));
        let Ev::Error { message, .. } = report(&g).ev else {
            panic!("an error event")
        };
        assert!(message.starts_with("events after seq 6 were not stored"));
        assert!(message.contains("(disk I/O error)") && message.contains("seqs 7 to 14"));
        assert_eq!(
            gap(Some(&note), "s", 14),
            None,
            "the spool replayed them all"
        );
        assert_eq!(gap(Some(&note), "other", 0), None);
        assert_eq!(gap(None, "s", 0), None);
    }
}
