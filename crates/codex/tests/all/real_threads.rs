//! Thread management and model listing against the real Codex binaries: the typed answers of
//! thread/read, list, fork, resume, archive and model/list parse.

use crate::common::{Bed, TURN_TIMEOUT, run_turn};
use codex_relay_protocol::v2::{
    ApprovalPolicy, ModelList, ModelListParams, SandboxMode, ThreadArchive, ThreadFork,
    ThreadIdParams, ThreadList, ThreadListParams, ThreadRead, ThreadReadParams, TurnStatus,
};
use codex_relay_testkit::{Reply, for_each_codex};

for_each_codex!(read_list_fork_archive_and_models);

async fn read_list_fork_archive_and_models(version: &'static str) {
    let bed = Bed::start(version).await;
    bed.model.push([Reply::text("remembered")]);
    let (thread, mut sub) = bed
        .thread(bed.thread_params(ApprovalPolicy::Never, SandboxMode::ReadOnly))
        .await;
    bed.turn(&thread, "remember the number 42").await;
    let log = run_turn(&mut sub, TURN_TIMEOUT, |r| {
        panic!("unexpected request {:?}", r.request())
    })
    .await;
    assert_eq!(log.completed.status, TurnStatus::Completed);

    let read = bed
        .server
        .call::<ThreadRead>(&ThreadReadParams {
            thread_id: thread.clone(),
            include_turns: true,
        })
        .await
        .expect("thread/read");
    assert_eq!(read.thread.id, thread);
    assert_eq!(read.thread.turns.len(), 1);
    assert!(
        read.thread
            .preview
            .as_deref()
            .unwrap_or("")
            .contains("remember the number 42")
    );

    let listed = bed
        .server
        .call::<ThreadList>(&ThreadListParams {
            source_kinds: Some(vec![
                "appServer".into(),
                "cli".into(),
                "exec".into(),
                "vscode".into(),
            ]),
            ..Default::default()
        })
        .await
        .expect("thread/list");
    assert!(
        listed.data.iter().any(|t| t.id == thread),
        "{:?}",
        listed.data.iter().map(|t| &t.id).collect::<Vec<_>>()
    );

    let fork_params = codex_relay_protocol::v2::ThreadForkParams {
        thread_id: thread.clone(),
        ..Default::default()
    };
    let forked = bed
        .server
        .call::<ThreadFork>(&fork_params)
        .await
        .expect("thread/fork");
    assert_ne!(forked.thread.id, thread);

    bed.server
        .call::<ThreadArchive>(&ThreadIdParams {
            thread_id: forked.thread.id.clone(),
        })
        .await
        .expect("thread/archive");

    let models = bed
        .server
        .call::<ModelList>(&ModelListParams::default())
        .await
        .expect("model/list parses");
    // The scripted provider lists no models; Codex may still offer its bundled ones.
    for m in &models.data {
        assert!(!m.id.is_empty());
    }
}
