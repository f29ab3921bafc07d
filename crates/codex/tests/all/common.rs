//! Shared set-up for the real-Codex tests: a model server, a fresh CODEX_HOME, an app-server.

use std::time::Duration;

use codex_relay_codex::{AppServer, AppServerConfig, PeerEvent, Subscription};
use codex_relay_protocol::v2::{
    ApprovalPolicy, SandboxMode, ServerNotification, ThreadStartParams, Turn, TurnStartParams,
    UserInput,
};
use codex_relay_testkit::{CodexHome, HomeOptions, ModelServer};

pub const TURN_TIMEOUT: Duration = Duration::from_secs(60);

pub struct Bed {
    pub model: ModelServer,
    pub home: CodexHome,
    pub server: AppServer,
}

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

pub fn codex_bin(version: &str) -> std::path::PathBuf {
    codex_relay_testkit::codex_bin(version).unwrap_or_else(|e| {
        panic!("Codex {version} is needed for this test and could not be installed: {e}")
    })
}

impl Bed {
    pub async fn start(version: &'static str) -> Bed {
        Self::start_with(version, HomeOptions::default()).await
    }

    pub async fn start_with(version: &'static str, opts: HomeOptions) -> Bed {
        init_tracing();
        let model = ModelServer::start().await;
        let home = CodexHome::with_options(model.url(), &opts);
        let config = AppServerConfig::new(codex_bin(version)).codex_home(home.path());
        let server = AppServer::start(config).await.expect("app-server starts");
        Bed {
            model,
            home,
            server,
        }
    }

    pub fn thread_params(
        &self,
        approval: ApprovalPolicy,
        sandbox: SandboxMode,
    ) -> ThreadStartParams {
        ThreadStartParams {
            cwd: Some(self.home.workspace().display().to_string()),
            approval_policy: Some(approval),
            sandbox: Some(sandbox),
            ..Default::default()
        }
    }

    /// Starts a thread and subscribes to it.
    pub async fn thread(&self, params: ThreadStartParams) -> (String, Subscription) {
        let started = self
            .server
            .thread_start(&params)
            .await
            .expect("thread/start");
        let sub = self.server.subscribe_thread(&started.thread.id);
        (started.thread.id, sub)
    }

    pub async fn turn(&self, thread_id: &str, text: &str) -> Turn {
        self.turn_with(TurnStartParams {
            thread_id: thread_id.into(),
            input: vec![UserInput::text(text)],
            ..Default::default()
        })
        .await
    }

    pub async fn turn_with(&self, params: TurnStartParams) -> Turn {
        self.server
            .turn_start(&params)
            .await
            .expect("turn/start")
            .turn
    }
}

/// Everything one turn produced, up to its `turn/completed`.
pub struct TurnLog {
    pub notifications: Vec<ServerNotification>,
    pub completed: Turn,
}

impl TurnLog {
    /// The text of the turn's last completed agent message.
    pub fn final_text(&self) -> Option<String> {
        self.completed_items()
            .into_iter()
            .rev()
            .find_map(|i| match i {
                codex_relay_protocol::v2::ThreadItem::AgentMessage(m) => Some(m.text.clone()),
                _ => None,
            })
    }

    pub fn methods(&self) -> Vec<&'static str> {
        self.notifications.iter().map(method_of).collect()
    }

    pub fn completed_items(&self) -> Vec<&codex_relay_protocol::v2::ThreadItem> {
        self.notifications
            .iter()
            .filter_map(|n| match n {
                ServerNotification::ItemCompleted(i) => Some(&i.item),
                _ => None,
            })
            .collect()
    }
}

pub fn method_of(n: &ServerNotification) -> &'static str {
    use ServerNotification as N;
    match n {
        N::Error(_) => "error",
        N::ThreadStarted(_) => "thread/started",
        N::ThreadStatusChanged(_) => "thread/status/changed",
        N::TokenUsageUpdated(_) => "thread/tokenUsage/updated",
        N::TurnStarted(_) => "turn/started",
        N::TurnCompleted(_) => "turn/completed",
        N::TurnDiffUpdated(_) => "turn/diff/updated",
        N::TurnPlanUpdated(_) => "turn/plan/updated",
        N::ItemStarted(_) => "item/started",
        N::ItemCompleted(_) => "item/completed",
        N::AgentMessageDelta(_) => "item/agentMessage/delta",
        N::CommandOutputDelta(_) => "item/commandExecution/outputDelta",
        N::ReasoningSummaryDelta(_) => "item/reasoning/summaryTextDelta",
        N::ReasoningTextDelta(_) => "item/reasoning/textDelta",
        N::ServerRequestResolved(_) => "serverRequest/resolved",
        N::Unknown { .. } => "unknown",
    }
}

/// Reads one thread's events until `turn/completed`, handing every server request to
/// `on_request`. Panics on timeout or if the peer closes.
pub async fn run_turn(
    sub: &mut Subscription,
    timeout: Duration,
    mut on_request: impl FnMut(codex_relay_codex::IncomingRequest),
) -> TurnLog {
    let mut notifications = Vec::new();
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let event = tokio::time::timeout_at(deadline, sub.recv())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "no turn/completed within {timeout:?}; saw {:?}",
                    names(&notifications)
                )
            })
            .expect("subscription ended");
        match event {
            PeerEvent::Notification(n) => {
                if let ServerNotification::TurnCompleted(t) = &n.notification {
                    let completed = t.turn.clone();
                    notifications.push(n.notification);
                    return TurnLog {
                        notifications,
                        completed,
                    };
                }
                notifications.push(n.notification);
            }
            PeerEvent::Request(r) => on_request(r),
            PeerEvent::Closed(e) => panic!("the peer closed mid-turn: {e}"),
        }
    }
}

fn names(ns: &[ServerNotification]) -> Vec<&'static str> {
    ns.iter().map(method_of).collect()
}
