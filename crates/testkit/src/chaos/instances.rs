//! The `serve` instances of a fault-injection run: started as named instances of one cluster,
//! paused and continued (SIGSTOP/SIGCONT), killed (SIGKILL) and started again under the same
//! id; each one's stderr appended to a file of the run, never echoed.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};

/// Where each instance listens now (`127.0.0.1:PORT`, empty while it is not running); shared
/// with the workload, which reads it at each request.
#[derive(Clone, Default)]
pub struct Addrs(Arc<Mutex<Vec<String>>>);

impl Addrs {
    pub fn get(&self, i: usize) -> String {
        self.0.lock().unwrap_or_else(|e| e.into_inner())[i].clone()
    }

    fn set(&self, i: usize, addr: String) {
        self.0.lock().unwrap_or_else(|e| e.into_inner())[i] = addr;
    }

    pub fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// How to start an instance.
pub struct Spawn {
    pub relay: PathBuf,
    pub codex: PathBuf,
    pub codex_home: PathBuf,
    pub db: String,
    pub dir: PathBuf,
    pub lease_ms: u64,
    pub token: String,
}

/// The instances, by index; their names are `NAMES[i]`.
pub struct Instances {
    spawn: Spawn,
    children: Vec<Option<Child>>,
    pub addrs: Addrs,
}

pub const NAMES: [&str; 3] = ["A", "B", "C"];

impl Instances {
    pub async fn start(spawn: Spawn) -> Instances {
        let mut me = Instances {
            spawn,
            children: Vec::new(),
            addrs: Addrs(Arc::new(Mutex::new(vec![String::new(); NAMES.len()]))),
        };
        for i in 0..NAMES.len() {
            let child = me.launch(i).await;
            me.children.push(Some(child));
        }
        me
    }

    /// The file instance `i`'s stderr goes to.
    pub fn log_path(&self, i: usize) -> PathBuf {
        self.spawn.dir.join(format!("log-{}.txt", NAMES[i]))
    }

    async fn launch(&mut self, i: usize) -> Child {
        let s = &self.spawn;
        let name = NAMES[i];
        let data = s.dir.join(format!("data-{name}"));
        let sqlite = s.dir.join(format!("sqlite-{name}"));
        std::fs::create_dir_all(&sqlite).expect("a directory of the run");
        let mut cmd = Command::new(&s.relay);
        cmd.arg("serve")
            .args(["--listen", "127.0.0.1:0"])
            .arg("--codex")
            .arg(&s.codex)
            .arg("--codex-home")
            .arg(&s.codex_home)
            .args(["--db", &s.db])
            .arg("--data-dir")
            .arg(&data)
            // Nobody waits on an approval past a cycle: the run answers them all.
            .args(["--approval-timeout-ms", "600000"])
            .args(["--instance-id", name])
            .args(["--lease-ms", &s.lease_ms.to_string()])
            .env_clear()
            .env("CODEX_RELAY_TOKEN", &s.token)
            .env("LOG_LEVEL", "info")
            .env("CODEX_SQLITE_HOME", &sqlite)
            // Read by the commands the scripted model runs: which instance's Codex ran them.
            .env("CHAOS_INSTANCE", name)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for key in ["PATH", "HOME", "TMPDIR"] {
            if let Ok(v) = std::env::var(key) {
                cmd.env(key, v);
            }
        }
        let mut child = cmd.spawn().expect("spawn codex-relay serve");
        let mut lines = BufReader::new(child.stderr.take().expect("piped")).lines();
        let mut log = tokio::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path(i))
            .await
            .expect("the instance's log file");
        let addr = tokio::time::timeout(Duration::from_secs(60), async {
            while let Ok(Some(line)) = lines.next_line().await {
                let _ = log.write_all(format!("{line}\n").as_bytes()).await;
                if let Some(url) = line.split("MCP at ").nth(1) {
                    return Some(
                        url.trim()
                            .trim_start_matches("http://")
                            .trim_end_matches("/mcp")
                            .to_owned(),
                    );
                }
            }
            None
        })
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| {
            panic!(
                "instance {name} did not start listening; its log: {}",
                self.log_path(i).display()
            )
        });
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                let _ = log.write_all(format!("{line}\n").as_bytes()).await;
            }
        });
        self.addrs.set(i, addr);
        child
    }

    fn pid(&self, i: usize) -> Option<i32> {
        self.children[i].as_ref()?.id().map(|p| p as i32)
    }

    fn signal(&self, i: usize, sig: i32) {
        if let Some(pid) = self.pid(i) {
            // SAFETY: signalling a child of this process.
            unsafe { libc::kill(pid, sig) };
        }
    }

    pub fn pause(&self, i: usize) {
        self.signal(i, libc::SIGSTOP);
    }

    pub fn resume(&self, i: usize) {
        self.signal(i, libc::SIGCONT);
    }

    /// SIGKILL, as a crash.
    pub async fn kill(&mut self, i: usize) {
        self.signal(i, libc::SIGKILL);
        if let Some(mut child) = self.children[i].take() {
            let _ = child.wait().await;
        }
        self.addrs.set(i, String::new());
    }

    /// Starts instance `i` again under its id (after [`Instances::kill`]).
    pub async fn restart(&mut self, i: usize) {
        let child = self.launch(i).await;
        self.children[i] = Some(child);
    }

    /// SIGTERM to every instance (continued first, if paused); waits for each to exit.
    pub async fn stop_all(&mut self) {
        for i in 0..self.children.len() {
            self.resume(i);
            self.signal(i, libc::SIGTERM);
        }
        for child in self.children.iter_mut().flatten() {
            if tokio::time::timeout(Duration::from_secs(20), child.wait())
                .await
                .is_err()
            {
                let _ = child.kill().await;
            }
        }
    }

    pub fn dir(&self) -> &Path {
        &self.spawn.dir
    }
}
