//! The flags of a relay that shares its Postgres store with other instances (docs/CLUSTER.md):
//! its id, the URL it is reached at, its lease, its load limit, and the persisted default id.

use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use codex_relay_core::cluster::ClusterConfig;

#[derive(clap::Args, Debug, Clone, Default)]
pub struct ClusterArgs {
    /// This instance's id in a cluster (a Postgres store). Default: the host name and a random
    /// suffix, kept in the data directory so a restart is the same instance and resumes its
    /// sessions at once (a second process on the same data directory gets a fresh id).
    #[arg(long, value_name = "ID", env = "CODEX_RELAY_INSTANCE_ID")]
    pub instance_id: Option<String>,
    /// The URL other instances and load balancers reach this one at (shown in the cluster
    /// view; clients of another instance are served there, not redirected).
    #[arg(long, value_name = "URL", env = "CODEX_RELAY_ADVERTISE_URL")]
    pub advertise_url: Option<String>,
    /// How long this instance's lease lasts without renewal (renewed every quarter of it): an
    /// instance silent for longer is taken over and its sessions adopted by another.
    #[arg(
        long,
        value_name = "MS",
        env = "CODEX_RELAY_LEASE_MS",
        default_value_t = 10_000
    )]
    pub lease_ms: u64,
    /// Sessions this instance runs before new ones start on the least loaded live instance.
    /// Default: no limit.
    #[arg(long, value_name = "N", env = "CODEX_RELAY_MAX_LOAD")]
    pub max_load: Option<usize>,
    /// Run alone on the Postgres store, as before clusters (no instance row, no lease, no
    /// fencing): only for a database no other relay uses.
    #[arg(long, env = "CODEX_RELAY_NO_CLUSTER")]
    pub no_cluster: bool,
}

impl ClusterArgs {
    /// The cluster settings; the default id comes from (or goes to) `data_dir/instance-id`.
    pub fn config(&self, data_dir: &Path) -> anyhow::Result<ClusterConfig> {
        anyhow::ensure!(
            self.lease_ms >= 200,
            "--lease-ms {}: a lease shorter than 200 ms cannot be renewed reliably",
            self.lease_ms
        );
        let instance_id = match &self.instance_id {
            Some(id) => Some(id.clone()),
            None if self.no_cluster => None,
            None => persisted_id(data_dir)?,
        };
        Ok(ClusterConfig {
            enabled: !self.no_cluster,
            instance_id,
            url: self.advertise_url.clone(),
            lease: Duration::from_millis(self.lease_ms),
            max_load: self.max_load,
            ..ClusterConfig::default()
        })
    }
}

/// The id kept in `dir/instance-id`, made on first use. The file stays locked while this
/// process runs: a second process on the same data directory is another instance and gets
/// `None` (a fresh id), as two processes under one id would fence each other.
fn persisted_id(dir: &Path) -> anyhow::Result<Option<String>> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("creating the data directory {}", dir.display()))?;
    let path = dir.join("instance-id");
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    // SAFETY: flock on a file descriptor this function owns.
    let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
    if !locked {
        tracing::info!(file = %path.display(),
            "another relay on this data directory holds its instance id; this one joins under a fresh id");
        return Ok(None);
    }
    let mut id = String::new();
    file.read_to_string(&mut id)
        .with_context(|| format!("reading {}", path.display()))?;
    let id = id.trim().to_owned();
    let id = if id.is_empty() {
        let fresh = codex_relay_core::cluster::default_instance_id();
        file.set_len(0)?;
        file.rewind()?;
        writeln!(file, "{fresh}").with_context(|| format!("writing {}", path.display()))?;
        fresh
    } else {
        id
    };
    // Held (and locked) until the process ends.
    std::mem::forget(file);
    Ok(Some(id))
}
