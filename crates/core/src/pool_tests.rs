//! The pool's placement rules, without processes.

use super::*;

fn pool(per: usize) -> Pool {
    let config = AppServerConfig::new("/nonexistent/codex");
    Pool::new(
        config,
        Default::default(),
        CrashPolicy::default(),
        per,
        Duration::from_millis(10),
        Arc::default(),
    )
}

fn layout(p: &Pool) -> Vec<usize> {
    p.processes().iter().map(|m| m.sessions.len()).collect()
}

#[tokio::test]
async fn sessions_fill_processes_up_to_the_limit_and_keep_their_place() {
    let p = pool(2);
    for i in 0..5 {
        p.reserve(None).bind(&format!("s{i}"));
    }
    assert_eq!(layout(&p), [2, 2, 1]);
    // A freed place is taken by the next session; nobody moves.
    let before: Vec<_> = p.processes();
    p.release("s1");
    p.reserve(None).bind("s5");
    let after = p.processes();
    assert_eq!(after[0].sessions, ["s0", "s5"]);
    assert_eq!(after[1..], before[1..]);
}

#[tokio::test]
async fn an_unbound_reservation_gives_its_place_back() {
    let p = pool(1);
    drop(p.reserve(None));
    p.reserve(None).bind("a");
    assert_eq!(
        layout(&p),
        [1],
        "the dropped reservation's process was reused"
    );
}

#[tokio::test]
async fn other_settings_never_share_and_zero_means_one_shared_process() {
    let p = pool(0);
    p.reserve(None).bind("a");
    p.reserve(None).bind("b");
    p.reserve(Some("/tmp/other-home".into())).bind("c");
    assert_eq!(layout(&p), [2, 1]);
}

#[tokio::test]
async fn an_empty_process_slot_is_dropped_after_the_linger_unless_reused() {
    let p = pool(2);
    p.reserve(None).bind("a");
    p.reserve(None).bind("b");
    p.reserve(None).bind("c");
    p.release("c");
    p.release("a");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        layout(&p),
        [1],
        "the emptied second slot is gone, the first stays"
    );
    p.release("b");
    p.reserve(None).bind("d");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(layout(&p), [1], "reused before the linger ended: kept");
}
