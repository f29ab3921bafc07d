//! The floor of `hundred_turns`: a process that drives one real `codex app-server` directly,
//! with nothing but the project's peer (`codex_relay_codex::AppServer`) between its stdout and
//! the turns, so its CPU per turn is what reading and parsing Codex's lines costs on the
//! machine, measured the same way as the relay's.
//!
//! Usage: `drive-app-server [--bare] CODEX CODEX_HOME CWD SESSIONS`. With `--bare` there is no
//! peer either, only lines parsed into JSON values (`bare.rs`). It starts the app-server, then reads
//! commands on stdin, one per line: `start` starts SESSIONS threads with one turn each, all at
//! once (prompt `BENCH-{i}: ...`, as the bench's scripted model expects); `again` runs one more
//! turn on each. After each command it prints `done` and each turn's milliseconds, space
//! separated, or `failed <why>`. End of input shuts the app-server down.

use std::sync::Arc;
use std::time::{Duration, Instant};

use codex_relay_codex::{AppServer, AppServerConfig, PeerEvent, Subscription};
use codex_relay_protocol::v2::{
    ApprovalPolicy, SandboxMode, ServerNotification, ThreadStartParams, TurnStartParams,
    TurnStatus, UserInput,
};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::{Mutex, mpsc};

mod bare;
use bare::Bare;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const TURN_TIMEOUT: Duration = Duration::from_secs(600);

/// The app-server, through the peer or bare.
enum Server {
    Peer(AppServer),
    Bare(Arc<Bare>),
}

/// One session: its thread and where its notifications arrive.
enum Session {
    Peer {
        thread: String,
        sub: Subscription,
    },
    Bare {
        thread: String,
        done: mpsc::UnboundedReceiver<serde_json::Value>,
    },
}

/// Runs one turn on `session` and waits for its `turn/completed`, at most [`TURN_TIMEOUT`].
async fn turn(server: &Server, session: &mut Session, prompt: String) -> Result<(), String> {
    let ran = match (server, session) {
        (Server::Peer(server), Session::Peer { thread, sub }) => {
            tokio::time::timeout(TURN_TIMEOUT, peer_turn(server, thread, sub, prompt)).await
        }
        (Server::Bare(bare), Session::Bare { thread, done }) => {
            tokio::time::timeout(TURN_TIMEOUT, bare.turn(thread, done, prompt)).await
        }
        _ => return Err("a session of the other kind".into()),
    };
    ran.unwrap_or_else(|_| Err("no turn/completed in time".into()))
}

async fn peer_turn(
    server: &AppServer,
    thread: &str,
    sub: &mut Subscription,
    prompt: String,
) -> Result<(), String> {
    let params = TurnStartParams {
        thread_id: thread.to_owned(),
        input: vec![UserInput::text(prompt)],
        ..Default::default()
    };
    let turn = server
        .turn_start(&params)
        .await
        .map_err(|e| format!("turn/start: {e}"))?
        .turn;
    loop {
        let event = sub.recv().await.ok_or("subscription closed")?;
        match event {
            PeerEvent::Notification(n) => {
                if let ServerNotification::TurnCompleted(t) = &n.notification
                    && t.turn.id == turn.id
                {
                    return match t.turn.status {
                        TurnStatus::Completed => Ok(()),
                        _ => Err(format!(
                            "turn ended {:?}: {:?}",
                            t.turn.status, t.turn.error
                        )),
                    };
                }
            }
            PeerEvent::Request(r) => return Err(format!("unexpected request {:?}", r.request())),
            PeerEvent::Closed(e) => return Err(format!("app-server closed: {e}")),
        }
    }
}

/// Session `i`'s first turn, creating its thread.
async fn first(server: Arc<Server>, i: usize, cwd: String) -> Result<Session, String> {
    let mut session = match &*server {
        Server::Peer(peer) => {
            let params = ThreadStartParams {
                cwd: Some(cwd),
                approval_policy: Some(ApprovalPolicy::Never),
                sandbox: Some(SandboxMode::ReadOnly),
                ..Default::default()
            };
            let thread = peer
                .thread_start(&params)
                .await
                .map_err(|e| format!("thread/start: {e}"))?
                .thread
                .id;
            let sub = peer.subscribe_thread(&thread);
            Session::Peer { thread, sub }
        }
        Server::Bare(bare) => {
            let (thread, done) = bare.thread(&cwd).await?;
            Session::Bare { thread, done }
        }
    };
    let prompt = format!("BENCH-{i}: run `echo hi` and say done");
    turn(&server, &mut session, prompt).await?;
    Ok(session)
}

/// Runs `make(i)` for every session at once; prints `done` and the turn times, or `failed`.
async fn phase<F, Fut>(sessions: usize, make: F)
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    let tasks: Vec<_> = (0..sessions)
        .map(|i| {
            let fut = make(i);
            tokio::spawn(async move {
                let started = Instant::now();
                fut.await.map(|()| started.elapsed())
            })
        })
        .collect();
    let mut times = Vec::new();
    for task in tasks {
        match task.await {
            Ok(Ok(took)) => times.push(format!("{:.1}", took.as_secs_f64() * 1000.0)),
            Ok(Err(e)) => return println!("failed {e}"),
            Err(e) => return println!("failed task: {e}"),
        }
    }
    println!("done {}", times.join(" "));
}

#[tokio::main]
async fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let bare = args.first().is_some_and(|a| a == "--bare");
    if bare {
        args.remove(0);
    }
    let [codex, home, cwd, sessions] = &args[..] else {
        eprintln!("usage: drive-app-server [--bare] CODEX CODEX_HOME CWD SESSIONS");
        std::process::exit(2);
    };
    let sessions: usize = sessions.parse().expect("SESSIONS is a number");
    let server = Arc::new(if bare {
        Server::Bare(Bare::start(codex, home).await.expect("app-server starts"))
    } else {
        let config = AppServerConfig::new(codex).codex_home(home);
        Server::Peer(AppServer::start(config).await.expect("app-server starts"))
    });
    let slots: Arc<Vec<Mutex<Option<Session>>>> =
        Arc::new((0..sessions).map(|_| Mutex::new(None)).collect());
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        match line.trim() {
            "start" => {
                phase(sessions, |i| {
                    let (server, slots, cwd) = (server.clone(), slots.clone(), cwd.clone());
                    async move {
                        let session = first(server, i, cwd).await?;
                        *slots[i].lock().await = Some(session);
                        Ok(())
                    }
                })
                .await;
            }
            "again" => {
                phase(sessions, |i| {
                    let (server, slots) = (server.clone(), slots.clone());
                    async move {
                        let mut slot = slots[i].lock().await;
                        let session = slot.as_mut().ok_or("no session: run `start` first")?;
                        turn(&server, session, format!("BENCH-{i}: once more")).await
                    }
                })
                .await;
            }
            other => println!("failed unknown command {other:?}"),
        }
    }
    if let Server::Peer(server) = &*server {
        server.shutdown(Duration::from_secs(2)).await;
    }
}
