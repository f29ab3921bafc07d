//! Set-up for the library scenarios: the scripted model, a fresh CODEX_HOME and store, and a `codex_relay::Client` on a pinned real Codex.

use codex_relay::{Client, ClientBuilder, SessionOptions};
use codex_relay_testkit::{CodexHome, HomeOptions, ModelServer};

pub struct Bed {
    pub model: ModelServer,
    pub home: CodexHome,
    pub client: Client,
}

/// The builder a test uses: this version's Codex, this test's CODEX_HOME and store.
pub fn builder(version: &str, home: &CodexHome) -> ClientBuilder {
    let bin = codex_relay_testkit::codex_bin(version).expect("pinned Codex installs");
    ClientBuilder::new()
        .codex_binary(bin)
        .codex_home(home.path())
        .store(home.root().join("relay.db").display().to_string())
}

impl Bed {
    pub async fn start(version: &str) -> Bed {
        Self::start_with(version, HomeOptions::default()).await
    }

    pub async fn start_with(version: &str, opts: HomeOptions) -> Bed {
        let model = ModelServer::start().await;
        let home = CodexHome::with_options(model.url(), &opts);
        let client = builder(version, &home).build().await.expect("client opens");
        Bed {
            model,
            home,
            client,
        }
    }

    /// Options for a session in this test's workspace.
    pub fn options(&self) -> SessionOptions {
        SessionOptions::new().cwd(self.home.workspace().display().to_string())
    }
}
