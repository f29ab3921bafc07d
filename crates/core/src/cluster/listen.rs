//! The notification loop: one `LISTEN` connection per instance. Notices are small and name what
//! changed; the rows are read from the tables. `e <seq> <session>`: a session's log grew (its
//! mirror catches up); `c <id> <target>`: a command for `target`; `d <id>`: a command was
//! answered; `i <instance>`: an instance left or was taken over; `r`: the rules changed.
//! Notices sent while the connection was down are lost, so every (re)connection catches
//! everything up.

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::PgListener;

use super::{Cluster, mailbox, sql};
use crate::host::{Host, HostLink};

/// Runs until the relay shuts down, whatever it is waiting on then (a connection from a pool
/// that is being closed included): the listener's connection goes back to the pool at once.
pub(crate) async fn run(link: HostLink) {
    let Some(mut stop) = cluster(&link).map(|c| c.stop.subscribe()) else {
        return;
    };
    tokio::select! {
        () = listen(link) => {}
        _ = stop.wait_for(|s| *s) => {}
    }
}

async fn listen(link: HostLink) {
    let mut backoff = Duration::from_millis(100);
    loop {
        let Some(c) = cluster(&link) else { return };
        let mut listener = match PgListener::connect_with(&c.pool).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(instance = %c.id, "the cluster's notice connection failed (retrying): {e}");
                drop(c);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
                continue;
            }
        };
        if let Err(e) = listener.listen(&c.fence.channel).await {
            tracing::warn!(instance = %c.id, "LISTEN failed (retrying): {e}");
            drop(c);
            tokio::time::sleep(backoff).await;
            continue;
        }
        backoff = Duration::from_millis(100);
        drop(c);
        catch_up_all(&link).await;
        loop {
            let stopped = async {
                if let Some(c) = cluster(&link) {
                    c.stopped().await
                }
            };
            let next = tokio::select! {
                n = listener.try_recv() => n,
                () = stopped => return,
            };
            match next {
                Ok(Some(notice)) => dispatch(&link, notice.payload()),
                // The connection was lost and made again: notices may be missing.
                Ok(None) => catch_up_all(&link).await,
                Err(e) => {
                    tracing::warn!("the cluster's notice connection broke (reconnecting): {e}");
                    break;
                }
            }
        }
    }
}

async fn reload_rules(host: Host) {
    let Some(c) = host.cluster().cloned() else {
        return;
    };
    let _one = c.reading_rules.lock().await;
    if let Err(e) = host.reload_rules().await {
        tracing::warn!(
            "reading the rules another instance changed failed (the next change or reconnection reads them again): {e}"
        );
    }
}

fn cluster(link: &HostLink) -> Option<Arc<Cluster>> {
    link.upgrade()?.cluster().cloned()
}

fn dispatch(link: &HostLink, payload: &str) {
    let Some(host) = link.upgrade() else {
        return;
    };
    let Some(c) = host.cluster().cloned() else {
        return;
    };
    let mut words = payload.splitn(3, ' ');
    match (words.next(), words.next(), words.next()) {
        (Some("e"), Some(_seq), Some(session)) => {
            // This instance's own commits come back too; only mirrors need them.
            if host.held(session).is_none_or(|h| h.remote) {
                c.sync.push(session);
            }
        }
        (Some("c"), Some(id), Some(target)) if target == c.id => {
            if let Ok(id) = id.parse() {
                tokio::spawn(mailbox::serve(host, id));
            }
        }
        (Some("d"), Some(id), None) => {
            if let Ok(id) = id.parse::<i64>()
                && let Some(tx) = c
                    .waiting
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&id)
            {
                let _ = tx.send(());
            }
        }
        (Some("i"), Some(_instance), None) => {
            c.monitor.notify_one();
            c.instances_changed.notify_waiters();
        }
        (Some("r"), None, None) => {
            tokio::spawn(reload_rules(host));
        }
        _ => tracing::debug!(payload, "an unknown cluster notice"),
    }
}

/// After a (re)connection: every mirror reads what it may have missed, and commands waiting
/// for this instance are served.
async fn catch_up_all(link: &HostLink) {
    let Some(host) = link.upgrade() else {
        return;
    };
    let Some(c) = host.cluster().cloned() else {
        return;
    };
    for h in host.held_all() {
        if h.remote {
            c.sync.push(h.id());
        }
    }
    // Sessions created elsewhere while this instance was not listening.
    match sql::others_sessions(&c.pool, &c.id).await {
        Ok(ids) => ids
            .iter()
            .filter(|id| host.held(id).is_none())
            .for_each(|id| c.sync.push(id)),
        Err(e) => tracing::warn!("listing other instances' sessions failed: {e}"),
    }
    // Rules changed while this instance was not listening.
    reload_rules(host.clone()).await;
    match sql::waiting_commands(&c.pool, &c.id).await {
        Ok(ids) => {
            for id in ids {
                tokio::spawn(mailbox::serve(host.clone(), id));
            }
        }
        Err(e) => tracing::warn!("looking for waiting commands failed: {e}"),
    }
}
