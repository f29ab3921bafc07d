//! Interrupts, many threads on one process, and Codex dying mid-turn, against the real binaries.

use std::time::{Duration, Instant};

use crate::common::{Bed, TURN_TIMEOUT, run_turn};
use codex_relay_codex::{PeerError, PeerEvent};
use codex_relay_protocol::v2::{
    ApprovalPolicy, SandboxMode, ServerNotification, ThreadItem, ThreadReadParams, TurnStatus,
};
use codex_relay_testkit::{Reply, for_each_codex, procs};

for_each_codex!(
    interrupt_during_sleep_ends_the_turn_quickly,
    two_threads_on_one_process_see_only_their_own_events,
    sigkill_mid_turn_fails_pending_calls_and_leaves_no_process,
);

/// Waits until the thread reports a started commandExecution item.
async fn wait_command_started(sub: &mut codex_relay_codex::Subscription) {
    let deadline = tokio::time::Instant::now() + TURN_TIMEOUT;
    loop {
        match tokio::time::timeout_at(deadline, sub.recv())
            .await
            .expect("command started in time")
        {
            Some(PeerEvent::Notification(n)) => {
                if let ServerNotification::ItemStarted(i) = &n.notification
                    && matches!(i.item, ThreadItem::CommandExecution(_))
                {
                    return;
                }
            }
            Some(PeerEvent::Request(r)) => panic!("unexpected request {:?}", r.request()),
            other => panic!("unexpected {other:?}"),
        }
    }
}

async fn interrupt_during_sleep_ends_the_turn_quickly(version: &'static str) {
    let bed = Bed::start(version).await;
    bed.model.push([Reply::exec("sleep 30", "call_s")]);
    let (thread, mut sub) = bed
        .thread(bed.thread_params(ApprovalPolicy::Never, SandboxMode::WorkspaceWrite))
        .await;
    let turn = bed.turn(&thread, "sleep a while").await;
    wait_command_started(&mut sub).await;
    let asked = Instant::now();
    bed.server
        .turn_interrupt(&thread, &turn.id)
        .await
        .expect("turn/interrupt");
    let log = run_turn(&mut sub, Duration::from_secs(5), |r| {
        panic!("unexpected request {:?}", r.request())
    })
    .await;
    let took = asked.elapsed();
    assert_eq!(log.completed.status, TurnStatus::Interrupted);
    assert!(took < Duration::from_secs(5), "interrupt took {took:?}");
    // The thread is still usable: a second turn runs.
    bed.model.push([Reply::text("awake again")]);
    bed.turn(&thread, "still there?").await;
    let log = run_turn(&mut sub, TURN_TIMEOUT, |r| {
        panic!("unexpected request {:?}", r.request())
    })
    .await;
    assert_eq!(log.completed.status, TurnStatus::Completed);
}

async fn two_threads_on_one_process_see_only_their_own_events(version: &'static str) {
    let bed = Bed::start(version).await;
    bed.model.route(
        "ALPHA",
        [
            Reply::exec("echo alpha > alpha.txt", "call_alpha"),
            Reply::text("alpha done"),
        ],
    );
    bed.model.route(
        "BETA",
        [
            Reply::exec("echo beta > beta.txt", "call_beta"),
            Reply::text("beta done"),
        ],
    );
    let params = bed.thread_params(ApprovalPolicy::Never, SandboxMode::WorkspaceWrite);
    let (a, mut sub_a) = bed.thread(params.clone()).await;
    let (b, mut sub_b) = bed.thread(params).await;
    assert_ne!(a, b);
    bed.turn(&a, "ALPHA: write alpha.txt").await;
    bed.turn(&b, "BETA: write beta.txt").await;
    let no_requests =
        |r: codex_relay_codex::IncomingRequest| panic!("unexpected request {:?}", r.request());
    let (log_a, log_b) = tokio::join!(
        run_turn(&mut sub_a, TURN_TIMEOUT, no_requests),
        run_turn(&mut sub_b, TURN_TIMEOUT, no_requests)
    );
    for (log, own, word) in [(&log_a, &a, "alpha"), (&log_b, &b, "beta")] {
        assert_eq!(log.completed.status, TurnStatus::Completed);
        for n in &log.notifications {
            assert_eq!(n.thread_id(), Some(own.as_str()), "{n:?}");
        }
        let cmds: Vec<String> = log
            .completed_items()
            .into_iter()
            .filter_map(|i| match i {
                ThreadItem::CommandExecution(c) => Some(c.command.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(cmds.len(), 1);
        assert!(cmds[0].contains(word), "{cmds:?}");
    }
    assert!(bed.home.workspace().join("alpha.txt").exists());
    assert!(bed.home.workspace().join("beta.txt").exists());
}

async fn sigkill_mid_turn_fails_pending_calls_and_leaves_no_process(version: &'static str) {
    let bed = Bed::start(version).await;
    // A marker no other process on the machine has in its command line: this test binary's
    // pid and the version (both versions' variants run at once in this one process, and
    // neither may take the other's `sleep` for its own), as digits `sleep` reads: 30.<pid>0<v>.
    let marker = format!("30.{}0{}", std::process::id(), version.replace('.', ""));
    bed.model
        .push([Reply::exec(&format!("sleep {marker}"), "call_k")]);
    let (thread, mut sub) = bed
        .thread(bed.thread_params(ApprovalPolicy::Never, SandboxMode::WorkspaceWrite))
        .await;
    bed.turn(&thread, "sleep").await;
    wait_command_started(&mut sub).await;
    let pgid = bed.server.process().pgid();
    assert!(!procs::group_members(pgid).is_empty());
    // item/started can come just before the process exists: wait for it.
    let deadline = Instant::now() + Duration::from_secs(10);
    while procs::pids_with_cmdline(&marker).is_empty() {
        assert!(Instant::now() < deadline, "the sleep command never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Keep calls in flight so some are pending at the moment of the kill.
    let peer = bed.server.peer().clone();
    let read = ThreadReadParams {
        thread_id: thread.clone(),
        include_turns: false,
    };
    let caller = tokio::spawn(async move {
        loop {
            if let Err(e) = peer
                .call::<codex_relay_protocol::v2::ThreadRead>(&read)
                .await
            {
                return (e, Instant::now());
            }
        }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let killed_at = Instant::now();
    // SAFETY: plain kill(2) of the child we spawned.
    unsafe { libc::kill(bed.server.pid() as i32, libc::SIGKILL) };

    // Promptly, not at some call timeout (minutes): bounds with room for a loaded machine.
    let (err, failed_at) = tokio::time::timeout(Duration::from_secs(20), caller)
        .await
        .expect("call ended")
        .unwrap();
    assert!(
        failed_at.duration_since(killed_at) < Duration::from_secs(10),
        "{:?}",
        failed_at - killed_at
    );
    match &err {
        PeerError::Exited { status, .. } => assert_eq!(status.signal, Some(libc::SIGKILL)),
        other => panic!("expected Exited, got {other:?}"),
    }
    let closed = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match sub.recv().await {
                Some(PeerEvent::Closed(e)) => return e,
                Some(_) => continue,
                None => panic!("subscription ended without Closed"),
            }
        }
    })
    .await
    .expect("subscriber told");
    assert!(matches!(closed, PeerError::Exited { .. }), "{closed:?}");
    // Later calls fail at once with the same typed error.
    let read = ThreadReadParams {
        thread_id: thread,
        include_turns: false,
    };
    let again = bed
        .server
        .peer()
        .call::<codex_relay_protocol::v2::ThreadRead>(&read)
        .await;
    assert!(matches!(again, Err(PeerError::Exited { .. })), "{again:?}");

    let left = procs::wait_group_gone(pgid, Duration::from_secs(2)).await;
    assert!(left.is_empty(), "processes left in the group: {left:?}");
    let strays = procs::pids_with_cmdline(&marker);
    assert!(
        strays.is_empty(),
        "the command Codex was running survived: {strays:?}"
    );
}
