//! Many relays on one Postgres (docs/CLUSTER.md). Each relay is an instance holding a lease it
//! renews; each session is run by one instance (its owner: it holds the Codex process and
//! writes the log, fenced by its lease epoch) and mirrored by the others, which show it live
//! from the committed log (woken by `LISTEN/NOTIFY`) and pass what their clients ask to the
//! owner through a command table. An instance past its lease is taken over: another adopts its
//! sessions and closes what the loss cut, as a restart would.
//!
//! - [`lease`]: joining, renewing, taking over, and what a fenced instance does.
//! - [`listen`]: the notification loop and the catch-up of mirrors.
//! - [`mirror`]: mirrors of other instances' sessions, and promoting one when it is adopted.
//! - [`mailbox`]: operations for a session's owner, sent and served.
//! - [`placement`]: the cluster as the relay's [`crate::placement::Placement`].
//! - [`standing`]: whether this instance can take work now (it holds its lease and Postgres
//!   takes its writes), and waiting for what it acknowledges to be stored.
//! - [`sql`]: the queries.

mod answers;
mod lease;
mod listen;
mod mailbox;
mod mirror;
mod placement;
mod route;
mod sql;
mod standing;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use sqlx::PgPool;
use tokio::sync::{Notify, oneshot};

use crate::error::RelayError;
use crate::host::Host;
use crate::store::Fence;

pub use crate::config::ClusterConfig;
pub use lease::default_instance_id;
pub(crate) use lease::{join, start, take_over_now};
pub(crate) use placement::Clustered;
pub use standing::Standing;

/// One instance's part of the cluster.
pub(crate) struct Cluster {
    pub id: String,
    pub pool: PgPool,
    pub fence: Arc<Fence>,
    pub config: ClusterConfig,
    /// Commands this instance sent, waiting for their owner's answer, by command id.
    waiting: Mutex<HashMap<i64, oneshot::Sender<()>>>,
    /// Sessions whose mirrors have news to read.
    pub(crate) sync: mirror::SyncQueue,
    /// Wakes the lease monitor (an instance left or went silent).
    monitor: Notify,
    /// Wakes every sender waiting for a command's answer when an instance left or was taken
    /// over (its owner may be gone).
    instances_changed: Notify,
    /// When Postgres last confirmed this instance's lease, on this machine's monotonic clock.
    confirmed: Mutex<tokio::time::Instant>,
    /// One take-over at a time in this instance.
    taking_over: tokio::sync::Mutex<()>,
    /// One adoption of a session at a time (a take-over, joining again, and a caller that
    /// needs the session can all come to adopt it).
    adoptions: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// One reading of the rules at a time, so the last notice's reading is the one kept.
    reading_rules: tokio::sync::Mutex<()>,
    /// Set when the relay shuts down: the cluster's tasks end.
    stop: tokio::sync::watch::Sender<bool>,
}

impl Cluster {
    /// Resolves once the relay shuts down.
    pub(crate) async fn stopped(&self) {
        let mut rx = self.stop.subscribe();
        let _ = rx.wait_for(|s| *s).await;
    }
}

/// Tells every instance that the rules changed: each reads them again from the store (a rule
/// saved or deleted through one instance applies to requests opening on any).
pub(crate) async fn rules_changed(c: &Cluster) {
    if let Err(e) = sql::notice(&c.pool, &c.fence.channel, "r").await {
        tracing::warn!(
            "could not tell the other instances that the rules changed (they read them again when their notice connection next reconnects): {e}"
        );
    }
}

/// The cluster as one instance sees it.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ClusterView {
    /// This instance.
    pub instance: String,
    pub epoch: i64,
    /// Whether this instance holds its lease and can take work: it has not lost the lease,
    /// Postgres confirmed it within half of it, and the store takes its writes (see
    /// [`Standing`]).
    pub leased: bool,
    /// Milliseconds since Postgres last confirmed this instance's lease.
    pub confirmed_ms_ago: u64,
    /// Why this instance takes no work now, when it does not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
    /// Every instance as the database records them; empty when it could not be read.
    pub instances: Vec<InstanceView>,
    /// Why the instances could not be read (Postgres out of reach), when they could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One instance in [`ClusterView`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct InstanceView {
    pub id: String,
    pub url: Option<String>,
    /// `live` or `gone`.
    pub state: String,
    pub epoch: i64,
    /// Milliseconds left on its lease (negative: expired that long ago).
    pub lease_left_ms: i64,
    /// Milliseconds since it last renewed.
    pub renewed_ms_ago: i64,
    /// Sessions it runs, as of its last renewal.
    pub sessions: i64,
    /// Who adopted its sessions once it was gone.
    pub taken_by: Option<String>,
}

impl Host {
    /// The relay's part in a cluster, when it is placed in one.
    pub(crate) fn cluster(&self) -> Option<&Arc<Cluster>> {
        let placed = self.placement().as_any().downcast_ref::<Clustered>()?;
        Some(&placed.0)
    }
}

impl Cluster {
    /// The cluster as this instance sees it, its own standing first (known without Postgres)
    /// and the instances as the database records them, read within `wait` (with Postgres out
    /// of reach the view says why they are missing).
    pub(crate) async fn view(&self, standing: Standing, wait: std::time::Duration) -> ClusterView {
        let c = self;
        let (instances, error) = match tokio::time::timeout(wait, sql::instances(&c.pool)).await {
            Ok(Ok(instances)) => (instances, None),
            Ok(Err(e)) => (
                Vec::new(),
                Some(format!("reading the cluster's instances: {e}")),
            ),
            Err(_) => (
                Vec::new(),
                Some(format!(
                    "reading the cluster's instances: Postgres did not answer within {wait:?}"
                )),
            ),
        };
        ClusterView {
            instance: c.id.clone(),
            epoch: c.fence.epoch(),
            leased: standing.available(),
            confirmed_ms_ago: standing.confirmed_ms_ago,
            unavailable: standing.why_not(&c.id),
            instances,
            error,
        }
    }
}

/// The instances recorded in the database `conn` is on (for `doctor`): empty when no relay
/// joined a cluster there yet.
pub async fn instances_on(conn: &mut sqlx::PgConnection) -> Result<Vec<InstanceView>, sqlx::Error> {
    let exists: Option<String> = sqlx::query_scalar("SELECT to_regclass('relay_instances')::text")
        .fetch_one(&mut *conn)
        .await?;
    if exists.is_none() {
        return Ok(Vec::new());
    }
    sql::instances(&mut *conn).await
}

/// The instances recorded in the Postgres database at `url` (for `doctor`), read within
/// `wait`: empty when no relay joined a cluster there, or when it cannot be read.
pub async fn instances_at(url: &str, wait: Duration) -> Vec<InstanceView> {
    let Ok((mut conn, _)) = crate::store::connect_postgres(url, wait).await else {
        return Vec::new();
    };
    let found = tokio::time::timeout(wait, instances_on(&mut conn))
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    let _ = sqlx::Connection::close(conn).await;
    found
}

/// The store's settings for this relay: in a cluster, commits linger at most
/// [`ClusterConfig::commit_linger`], as other instances read only what is committed.
pub(crate) fn store_options(
    config: &crate::relay_config::RelayConfig,
) -> crate::store::StoreOptions {
    let mut options = config.store_options.clone();
    let postgres = config.store.starts_with("postgres:") || config.store.starts_with("postgresql:");
    if postgres && config.cluster.enabled {
        options.linger = options.linger.min(config.cluster.commit_linger);
    }
    options
}

/// A database error as the cluster reports it.
pub(crate) fn db(what: &str) -> impl Fn(sqlx::Error) -> RelayError + '_ {
    move |e| RelayError::Remote {
        code: "store_unavailable".into(),
        message: format!("{what}: {e}"),
    }
}
