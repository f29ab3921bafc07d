//! `GET /healthz` (Codex reachable, store writing, in a cluster the lease held) and Prometheus
//! `GET /metrics`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::AppState;
use crate::types::{Check, Health};

/// Counters the HTTP front keeps itself.
#[derive(Debug, Default)]
pub struct HttpMetrics {
    /// Open SSE connections (session streams and relay streams).
    pub sse_subscribers: AtomicI64,
}

const CODEX_PROBE: Duration = Duration::from_secs(20);
const STORE_PROBE: Duration = Duration::from_secs(5);

#[utoipa::path(get, path = "/healthz", tag = "operations",
    responses((status = 200, body = Health), (status = 503, body = Health)))]
pub async fn healthz(State(st): State<AppState>) -> (StatusCode, Json<Health>) {
    let codex = match tokio::time::timeout(CODEX_PROBE, st.relay.server()).await {
        Ok(Ok(server)) => Check {
            ok: true,
            detail: format!(
                "codex app-server {} running; {} process(es) in the pool",
                server.version(),
                st.relay.codex_processes().len()
            ),
        },
        Ok(Err(e)) => Check {
            ok: false,
            detail: e.to_string(),
        },
        Err(_) => Check {
            ok: false,
            detail: format!("codex app-server did not answer within {CODEX_PROBE:?}"),
        },
    };
    let health = st.relay.store_health();
    let backend = health.backend;
    let store = match health.fault {
        Some(fault) => Check {
            ok: false,
            detail: format!(
                "{backend} store cannot take writes ({}); {} writes kept in memory and retried",
                fault.message, fault.queued_writes
            ),
        },
        None => match tokio::time::timeout(STORE_PROBE, st.relay.store().flush()).await {
            Ok(Ok(())) => Check {
                ok: true,
                detail: format!("{backend} store committed every queued write"),
            },
            Ok(Err(e)) => Check {
                ok: false,
                detail: e.to_string(),
            },
            Err(_) => Check {
                ok: false,
                detail: format!(
                    "{backend} store did not commit the queued writes within {STORE_PROBE:?}"
                ),
            },
        },
    };
    // This instance's standing is known without Postgres; the other instances are read
    // within a bound (with Postgres away, the view says why they are missing).
    let cluster = st.relay.cluster_view(STORE_PROBE).await;
    // In a cluster, an instance that holds no lease, cannot confirm it, or whose writes
    // Postgres does not take, takes no work: a load balancer should send it none.
    let leased = cluster.as_ref().is_none_or(|c| c.leased);
    let ok = codex.ok && store.ok && leased;
    let status = if ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (
        status,
        Json(Health {
            status: if ok { "ok" } else { "degraded" }.into(),
            codex,
            store,
            cluster,
        }),
    )
}

type Labels = Vec<(String, String)>;

fn gauge_family(
    registry: &mut Registry,
    name: &str,
    help: &str,
    label: &str,
    values: BTreeMap<String, i64>,
) {
    let family = Family::<Labels, Gauge>::default();
    for (k, v) in values {
        family.get_or_create(&vec![(label.to_owned(), k)]).set(v);
    }
    registry.register(name, help, family);
}

fn counter_family(
    registry: &mut Registry,
    name: &str,
    help: &str,
    label: &str,
    values: &[(&'static str, u64)],
) {
    let family = Family::<Labels, Counter<u64>>::default();
    for (k, v) in values {
        family
            .get_or_create(&vec![(label.to_owned(), (*k).to_owned())])
            .inc_by(*v);
    }
    registry.register(name, help, family);
}

fn gauge(registry: &mut Registry, name: &str, help: &str, v: i64) {
    let g = Gauge::<i64>::default();
    g.set(v);
    registry.register(name, help, g);
}

fn counter(registry: &mut Registry, name: &str, help: &str, v: u64) {
    let c = Counter::<u64>::default();
    c.inc_by(v);
    registry.register(name, help, c);
}

/// Prometheus text exposition of the relay's state, computed at scrape time.
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses((status = 200, content_type = "text/plain", description = "Prometheus metrics")))]
pub async fn metrics(State(st): State<AppState>) -> impl IntoResponse {
    let mut registry = Registry::with_prefix("codex_relay");
    let mut by_status: BTreeMap<String, i64> = BTreeMap::new();
    for s in st.relay.sessions() {
        *by_status.entry(s.status.as_str().to_owned()).or_default() += 1;
    }
    gauge_family(
        &mut registry,
        "sessions",
        "Sessions of this relay by status",
        "status",
        by_status,
    );
    let mut by_kind: BTreeMap<String, i64> = BTreeMap::new();
    for p in st.relay.pending(None) {
        *by_kind.entry(p.kind.as_str().to_owned()).or_default() += 1;
    }
    gauge_family(
        &mut registry,
        "pending_requests",
        "Open approvals, questions and tool calls by kind",
        "kind",
        by_kind,
    );
    let feed = st.relay.feed();
    counter(
        &mut registry,
        "events_appended",
        "Events appended to session logs",
        feed.events_appended(),
    );
    counter_family(
        &mut registry,
        "tokens",
        "Tokens the sessions this instance runs spent, summed over every model request, by kind",
        "kind",
        &feed.tokens(),
    );
    counter_family(
        &mut registry,
        "turns_stopped",
        "Turns the relay stopped, by reason (deadline, idle watchdog, budget)",
        "reason",
        &feed.stops(),
    );
    let limits = st.relay.rate_limits();
    gauge_family(
        &mut registry,
        "rate_limit_used_percent",
        "How full each of the account's rate-limit windows is, as Codex last reported it (limit:window)",
        "window",
        limits
            .limits
            .iter()
            .flat_map(|l| {
                [("primary", l.primary), ("secondary", l.secondary)]
                    .into_iter()
                    .filter_map(move |(w, v)| {
                        Some((
                            format!("{}:{w}", l.limit_id),
                            v?.used_percent.round() as i64,
                        ))
                    })
            })
            .collect(),
    );
    gauge(
        &mut registry,
        "rate_limit_hit",
        "1 while a rate limit is hit (new turns wait in the queue)",
        i64::from(limits.hold.is_some()),
    );
    gauge(
        &mut registry,
        "turns_queued",
        "Turns waiting in the queue for a rate limit to clear",
        limits.queued.len() as i64,
    );
    counter(
        &mut registry,
        "turns_queued_total",
        "Turns that waited in the queue for a rate limit since the relay opened",
        limits.queued_total,
    );
    counter(
        &mut registry,
        "turns_queue_refused_total",
        "New turns refused (the queue full, the limit resetting later than a turn may wait) or dropped after waiting too long",
        limits.refused_total,
    );
    gauge(
        &mut registry,
        "sse_subscribers",
        "Open Server-Sent Events connections",
        st.metrics.sse_subscribers.load(Ordering::Relaxed),
    );
    counter(
        &mut registry,
        "codex_restarts",
        "Codex app-servers started again after one exited (all processes of the pool)",
        st.relay.codex_restarts(),
    );
    counter(
        &mut registry,
        "codex_recycles",
        "Codex app-servers replaced by a fresh process after crossing a memory, turn or age limit",
        st.relay.codex_recycles(),
    );
    let processes = st.relay.codex_processes();
    gauge(
        &mut registry,
        "codex_processes",
        "Codex app-server processes running in the pool",
        processes.iter().filter(|p| p.pid.is_some()).count() as i64,
    );
    gauge_family(
        &mut registry,
        "codex_process_sessions",
        "Sessions placed on each pooled app-server, by pool slot",
        "slot",
        processes
            .iter()
            .map(|p| (p.slot.to_string(), p.sessions.len() as i64))
            .collect(),
    );
    gauge_family(
        &mut registry,
        "codex_process_rss_bytes",
        "Resident memory of each pooled app-server's process group, by pool slot, when a memory limit is set",
        "slot",
        processes
            .iter()
            .filter_map(|p| Some((p.slot.to_string(), p.rss_bytes? as i64)))
            .collect(),
    );
    let stats = st.relay.store().stats();
    gauge(
        &mut registry,
        "store_queue_depth",
        "Store writes queued and not yet committed",
        stats.queue_depth() as i64,
    );
    counter(
        &mut registry,
        "store_commits",
        "Store batches committed",
        stats.commits(),
    );
    gauge(
        &mut registry,
        "store_fault",
        "1 while the database cannot take writes (they are kept and retried)",
        i64::from(stats.fault().is_some()),
    );
    counter(
        &mut registry,
        "store_ingest_pauses",
        "Times the store's write queue reached its bound and reading from Codex paused",
        stats.pauses(),
    );
    // The store's size (docs/STORE.md, "Retention"); a store that cannot say leaves it out.
    if let Ok((on_disk, used)) = st.relay.store().size_now().await {
        let mut by_measure = BTreeMap::from([("disk".to_owned(), on_disk as i64)]);
        if let Some(used) = used {
            by_measure.insert("used".to_owned(), used as i64);
        }
        gauge_family(
            &mut registry,
            "store_bytes",
            "The store's size: on disk, and in use (SQLite: pages holding data; Postgres: as the last retention pass estimated it)",
            "measure",
            by_measure,
        );
    }
    let retention = st.relay.store().retention_stats();
    counter(
        &mut registry,
        "retention_pruned_rows",
        "Rows retention deleted (events, raw lines, resolved requests, sent notifications, spent links, closed sessions)",
        retention.rows.load(Ordering::Relaxed),
    );
    counter(
        &mut registry,
        "retention_pruned_events",
        "Events retention deleted",
        retention.events.load(Ordering::Relaxed),
    );
    // Notifications by state (the outbox); a store that cannot say leaves them out.
    if let Ok(counts) = st.relay.store().outbox_counts().await {
        let mut by_state: BTreeMap<String, i64> = ["pending", "delivered", "skipped", "failed"]
            .iter()
            .map(|s| (s.to_string(), 0))
            .collect();
        by_state.extend(counts);
        gauge_family(
            &mut registry,
            "notifications",
            "Notifications in the outbox by state (pending ones are being retried)",
            "state",
            by_state,
        );
    }
    {
        use std::sync::atomic::Ordering::Relaxed;
        let c = st.relay.rule_counts();
        for (name, help, v) in [
            (
                "rule_allowed",
                "Approvals a rule allowed",
                c.allowed.load(Relaxed),
            ),
            (
                "rule_denied",
                "Approvals a rule denied",
                c.denied.load(Relaxed),
            ),
            (
                "rule_asked",
                "Approvals left to a person",
                c.asked.load(Relaxed),
            ),
        ] {
            counter(&mut registry, name, help, v);
        }
    }
    let mut out = String::new();
    let _ = encode(&mut out, &registry);
    // Floating-point seconds are written by hand (the registry's gauges are integers here).
    let body = out.trim_end_matches("# EOF\n").to_owned()
        + &format!(
            "# HELP codex_relay_store_commit_seconds_total Seconds spent committing store batches.\n\
             # TYPE codex_relay_store_commit_seconds_total counter\n\
             codex_relay_store_commit_seconds_total {}\n\
             # HELP codex_relay_store_last_commit_seconds Seconds the last store batch took.\n\
             # TYPE codex_relay_store_last_commit_seconds gauge\n\
             codex_relay_store_last_commit_seconds {}\n# EOF\n",
            stats.commit_seconds_total(),
            stats.last_commit_seconds()
        );
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        body,
    )
}
