//! Which Postgres the Postgres variants of the tests use, and the explicit opt-out that skips
//! them: no Postgres and no opt-out is a failure, never a silent pass; and a private server for
//! tests that stop and start one.

use std::path::PathBuf;
use std::process::Command;

/// The variable holding the test Postgres URL (`scripts/test` sets it after starting one).
pub const URL_ENV: &str = "CODEX_RELAY_TEST_POSTGRES";
/// Set to `1` to skip the Postgres variants on purpose (each is a loud, counted skip).
pub const SKIP_ENV: &str = "CODEX_RELAY_SKIP_POSTGRES";

/// The test Postgres URL; `None` (a [`crate::skip::skip`]) when the Postgres variants are
/// skipped on purpose. Panics when neither is set, so a missing Postgres fails the run.
pub fn url(test: &str) -> Option<String> {
    if let Some(url) = std::env::var(URL_ENV).ok().filter(|v| !v.trim().is_empty()) {
        return Some(url);
    }
    if std::env::var(SKIP_ENV).is_ok_and(|v| v == "1") {
        crate::skip::skip(format_args!("{test}: {SKIP_ENV}=1 and no {URL_ENV}"));
        return None;
    }
    panic!(
        "{test} needs Postgres: set {URL_ENV} to a postgres:// URL (./scripts/test starts a \
         throwaway one), or set {SKIP_ENV}=1 to skip the Postgres variants on purpose"
    )
}

/// A Postgres server of one test alone (to stop and start it without touching the shared
/// one), in a temporary directory; stopped and removed on drop.
pub struct Private {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    as_postgres: bool,
}

impl Private {
    /// initdb + `pg_ctl start -w` with the newest PostgreSQL binaries under
    /// `/usr/lib/postgresql/*/bin` (as the `postgres` user when run as root); `None` (a
    /// [`crate::skip::skip`]) when there are none.
    pub fn start() -> Option<Private> {
        let newest = std::fs::read_dir("/usr/lib/postgresql")
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let v: u32 = e.file_name().to_str()?.parse().ok()?;
                let bin = e.path().join("bin");
                bin.join("pg_ctl").exists().then_some((v, bin))
            })
            .max();
        let Some((_, bin)) = newest else {
            crate::skip::skip(
                "no PostgreSQL server binaries under /usr/lib/postgresql/*/bin for a private server",
            );
            return None;
        };
        // SAFETY: geteuid has no preconditions.
        let as_postgres = unsafe { libc::geteuid() } == 0;
        let dir = tempfile::tempdir().unwrap();
        if as_postgres {
            // initdb refuses to run as root.
            let chown = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .status();
            assert!(chown.is_ok_and(|s| s.success()), "chown the data directory");
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let pg = Private {
            dir,
            bin,
            port,
            as_postgres,
        };
        let data = pg.data();
        pg.run(
            "initdb",
            &[
                "-D",
                &data,
                "-U",
                "postgres",
                "--auth=trust",
                "--no-sync",
                "-E",
                "UTF8",
            ],
        );
        pg.start_again();
        Some(pg)
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    /// `postgres://postgres@127.0.0.1:PORT/postgres` (trust authentication).
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// `tool` from the server's binaries, as the user that owns the server.
    fn command(&self, tool: &str) -> Command {
        let exe = self.bin.join(tool);
        let mut cmd = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&exe);
            c
        } else {
            Command::new(&exe)
        };
        // From /: `postgres` cannot enter the test's directory when the clone lives under a
        // private (0700) parent, and pg_ctl then refuses to start the server.
        cmd.current_dir("/");
        cmd
    }

    fn run(&self, tool: &str, args: &[&str]) {
        let out = self.command(tool).args(args).output().unwrap();
        assert!(
            out.status.success(),
            "{tool} {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Starts the (initialized or stopped) server and waits until it accepts connections.
    pub fn start_again(&self) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port,
            self.dir.path().display()
        );
        let log = self.dir.path().join("log").display().to_string();
        self.run(
            "pg_ctl",
            &[
                "-D",
                &self.data(),
                "-o",
                &options,
                "-l",
                &log,
                "start",
                "-w",
            ],
        );
    }

    pub fn stop(&self) {
        self.run("pg_ctl", &["-D", &self.data(), "stop", "-m", "fast", "-w"]);
    }
}

impl Drop for Private {
    fn drop(&mut self) {
        let data = self.data();
        let args = ["-D", data.as_str(), "stop", "-m", "immediate", "-w"];
        let _ = self.command("pg_ctl").args(args).output();
    }
}
