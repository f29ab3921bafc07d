//! Single sign-on against a real OpenID provider: panva's `oidc-provider` from npm
//! (tests/clients/oidc, its development login form), run on the testkit's Node 22, with
//! `serve` on the newest pinned real Codex, driven in Debian's Chromium (tests/browser/sso.mjs).
//! On SQLite: a user an admin bound signs in and lands in the UI as themselves; the callback
//! replayed (with and without its state cookie) and a forged state are refused (and guessing
//! states is throttled); logging out
//! ends the login on the server (a copy of its cookie is refused); an unknown
//! identity is refused and stays signed out; an invitation accepted through the provider makes
//! its user; a sign-in whose nonce is not the one sent is refused; a relay whose configured
//! issuer is not the one the provider names refuses to start a sign-in. On Postgres: a sign-in
//! started on one relay finishes on another. Skipped, counted, only where the browser or the
//! provider cannot be installed.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use codex_relay_testkit::clients::npm_ci;
use codex_relay_testkit::skip::skip;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

use crate::cluster_support::{LEASE_MS, fresh_schema, instance_extra};
use crate::common::{Bed, HttpRelay};
use crate::http_support::Client;

const CLIENT_ID: &str = "codex-relay-test";
const NAME: &str = "Test IdP";
const STEP: Duration = Duration::from_secs(60);

/// `oidc-provider` on a free port; stopped when its stdin closes, killed on drop.
struct Provider {
    _child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    issuer: String,
    secret: String,
}

impl Provider {
    /// `None` (said, counted) when the provider cannot be installed here.
    async fn start(node: &Path) -> Option<Provider> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests")
            .join("clients")
            .join("oidc");
        let installed = tokio::task::spawn_blocking({
            let dir = dir.clone();
            move || npm_ci(&dir)
        })
        .await
        .unwrap();
        if let Err(e) = installed {
            skip(format_args!(
                "the SSO test: oidc-provider cannot be installed from npm: {e}"
            ));
            return None;
        }
        let secret = codex_relay_http::auth::random_secret(24);
        let mut child = tokio::process::Command::new(node)
            .arg(dir.join("provider.mjs"))
            .env("OIDC_CLIENT_ID", CLIENT_ID)
            .env("OIDC_CLIENT_SECRET", &secret)
            .current_dir(&dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("start the OpenID provider");
        let stdin = child.stdin.take().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = Self::next(&mut lines).await;
        let issuer = first["issuer"].as_str().expect("the issuer").to_owned();
        Some(Provider {
            _child: child,
            stdin,
            lines,
            issuer,
            secret,
        })
    }

    async fn next(lines: &mut Lines<BufReader<ChildStdout>>) -> Value {
        let line = tokio::time::timeout(STEP, lines.next_line())
            .await
            .expect("the provider answers within a minute")
            .expect("read the provider")
            .expect("the provider is running");
        serde_json::from_str(&line).unwrap_or_else(|_| panic!("the provider said {line:?}"))
    }

    /// Registers the client's redirect URIs and waits until the provider serves.
    async fn serve(&mut self, redirects: &[String]) {
        let line = format!("{}\n", redirects.join(" "));
        self.stdin.write_all(line.as_bytes()).await.unwrap();
        self.stdin.flush().await.unwrap();
        assert_eq!(Self::next(&mut self.lines).await["ready"], true);
    }

    /// `serve`'s flags for this provider (the secret in a file, never on the command line).
    fn flags(&self, dir: &Path) -> Vec<String> {
        let file = dir.join("oidc-client-secret");
        std::fs::write(&file, format!("{}\n", self.secret)).unwrap();
        vec![
            "--oidc-issuer".into(),
            self.issuer.clone(),
            "--oidc-client-id".into(),
            CLIENT_ID.into(),
            "--oidc-client-secret-file".into(),
            file.display().to_string(),
            "--oidc-name".into(),
            NAME.into(),
        ]
    }
}

fn base(relay: &HttpRelay) -> String {
    relay.url.trim_end_matches("/mcp").to_owned()
}

/// Alice, an approver, with the provider's `alice` bound to her.
async fn alice(admin: &Client) {
    let r = admin
        .post("/api/users", &json!({"name": "Alice", "role": "approver"}))
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let r = admin
        .post("/api/users/Alice/identities", &json!({"subject": "alice"}))
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    // One identity, one user.
    let again = admin
        .post("/api/users/Alice/identities", &json!({"subject": "alice"}))
        .await;
    assert_eq!(again.status, 409, "{}", again.text());
}

fn drive(node: &Path, url: &str, variant: &str, env: Vec<(&'static str, String)>) -> Value {
    let mut env = env;
    env.push(("SSO_NAME", NAME.into()));
    let env: Vec<(&str, String)> = env.into_iter().collect();
    crate::browser::drive_script_with(
        node,
        "sso.mjs",
        url,
        variant,
        crate::browser::LogIn::Token(String::new()),
        &env,
    )
}

fn has(findings: &Value, key: &str, text: &str) {
    let got = findings[key].as_str().unwrap_or_default();
    assert!(
        got.to_lowercase().contains(&text.to_lowercase()),
        "{key}: {got:?} should say {text:?}; {findings}"
    );
}

fn signed_in_as(findings: &Value, key: &str, name: Option<&str>) {
    let me = &findings[key];
    match name {
        Some(n) => assert_eq!(
            (me["status"].as_u64(), me["name"].as_str()),
            (Some(200), Some(n)),
            "{key}: {findings}"
        ),
        None => assert!(
            me["status"] != 200 && me["name"].is_null(),
            "{key} should be signed out: {findings}"
        ),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sso_in_the_browser_against_a_real_openid_provider() {
    let Some((node, _codex)) = crate::browser::set_up(codex_relay_testkit::NEWEST) else {
        return;
    };
    let Some(mut provider) = Provider::start(&node).await else {
        return;
    };
    let bed = Bed::start(codex_relay_testkit::NEWEST).await;
    let mut args = bed.args(120_000);
    args.extend(provider.flags(bed.home.root()));
    let relay = HttpRelay::start(args).await;
    let url = base(&relay);
    provider
        .serve(&[format!("{url}/login/oidc/callback")])
        .await;
    let admin = Client::new(&relay.url);
    alice(&admin).await;
    let r = admin
        .post(
            "/api/invitations",
            &json!({"name": "Ivy Invited", "role": "viewer"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let invite = r.json()["path"].as_str().unwrap().to_owned();

    let db = bed.home.root().join("relay.db");
    let findings = tokio::task::spawn_blocking({
        let url = url.clone();
        move || {
            drive(
                &node,
                &url,
                "sso",
                vec![
                    ("INVITE_PATH", invite),
                    ("RELAY_DB", db.display().to_string()),
                ],
            )
        }
    })
    .await
    .unwrap();
    // The state cookie comes back from the provider's site: Lax, and out of scripts' reach.
    assert_eq!(findings["stateCookie"]["sameSite"], "Lax", "{findings}");
    assert_eq!(findings["stateCookie"]["httpOnly"], true, "{findings}");
    signed_in_as(&findings, "alice", Some("Alice"));
    has(&findings, "replayNoCookie", "not started in this browser");
    has(&findings, "replayWithCookie", "already used or has expired");
    has(&findings, "forged", "not started in this browser");
    signed_in_as(&findings, "aliceAfter", Some("Alice"));
    signed_in_as(&findings, "afterLogout", None);
    has(&findings, "mallory", "not a user of this relay");
    signed_in_as(&findings, "malloryMe", None);
    signed_in_as(&findings, "ivy", Some("Ivy Invited"));
    assert_eq!(findings["tamperedRows"], 1, "{findings}");
    has(&findings, "wrongNonce", "could not be verified");
    has(&findings, "wrongNonce", "nonce");
    signed_in_as(&findings, "wrongNonceMe", None);

    // The audit log: Alice (bound) and Ivy (her invitation), by OIDC; nobody else.
    let r = admin.get("/api/audit?action=user.sign_in").await;
    let entries = r.json()["entries"].as_array().cloned().unwrap_or_default();
    let who: Vec<(Value, Value, Value)> = entries
        .iter()
        .map(|e| {
            (
                e["person"]["name"].clone(),
                e["detail"]["method"].clone(),
                e["detail"]["matched"].clone(),
            )
        })
        .collect();
    assert_eq!(
        who,
        vec![
            (json!("Alice"), json!("oidc"), json!("bound")),
            (json!("Ivy Invited"), json!("oidc"), json!("invitation")),
        ],
        "{entries:?}"
    );
    // Ivy's identity is bound to her now; her browser login's token ends by itself.
    let ivy_id = entries[1]["person"]["id"].as_str().unwrap().to_owned();
    let r = admin.get(&format!("/api/users/{ivy_id}/identities")).await;
    let ids = r.json()["identities"].clone();
    assert_eq!(ids[0]["subject"], "ivy", "{ids}");
    assert_eq!(ids[0]["issuer"], provider.issuer.as_str(), "{ids}");
    let r = admin.get(&format!("/api/tokens?user={ivy_id}")).await;
    let tokens = r.json()["tokens"].clone();
    let sso = tokens
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["label"] == format!("sso: {NAME}") && t["revokedAt"].is_null())
        .unwrap_or_else(|| panic!("Ivy's SSO login token: {tokens}"));
    assert!(sso["expiresAt"].as_i64().is_some(), "{sso}");
    // Guessing states is throttled like guessing the token: 400s, then 429.
    let anon = Client::anonymous(&relay.url);
    let mut answers = Vec::new();
    for i in 0..12 {
        let r = anon
            .get(&format!("/login/oidc/callback?state=guess-{i}&code=x"))
            .await;
        answers.push(r.status);
        if r.status == 429 {
            break;
        }
    }
    assert_eq!(answers.last(), Some(&429), "{answers:?}");
    assert!(
        answers[..answers.len() - 1].iter().all(|s| *s == 400),
        "{answers:?}"
    );
    // The client secret is nowhere in what serve said.
    assert!(!relay.log_text().contains(&provider.secret));

    // A relay configured with another spelling of the issuer than the one the provider names
    // in its discovery document refuses to start a sign-in.
    let mut args = bed.args(120_000);
    for (flag, name) in [("--db", "other.db"), ("--data-dir", "other-data")] {
        let at = args.iter().position(|a| a == flag).unwrap() + 1;
        args[at] = bed.home.root().join(name).display().to_string();
    }
    let mut flags = provider.flags(bed.home.root());
    flags[1] = provider.issuer.replace("localhost", "127.0.0.1");
    args.extend(flags);
    let other = HttpRelay::start(args).await;
    let r = Client::anonymous(&other.url).get("/login/oidc").await;
    assert_eq!(r.status, 502, "{}", r.text());
    assert!(r.text().contains("issuer"), "{}", r.text());
    other.stop().await;
    relay.stop().await;
    bed.assert_no_codex_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sso_started_on_one_relay_finishes_on_another_on_postgres() {
    let Some(db) = fresh_schema("sso_started_on_one_relay_finishes_on_another_on_postgres").await
    else {
        return;
    };
    let Some((node, _codex)) = crate::browser::set_up(codex_relay_testkit::NEWEST) else {
        return;
    };
    let Some(mut provider) = Provider::start(&node).await else {
        return;
    };
    let bed = Bed::start(codex_relay_testkit::NEWEST).await;
    let flags = provider.flags(bed.home.root());
    let b = instance_extra(&bed, &db, "B", LEASE_MS, &flags).await;
    // A sends the browser back to B (both behind "one address": the callback is B's).
    let mut a_flags = flags.clone();
    a_flags.extend(["--public-url".into(), base(&b)]);
    let a = instance_extra(&bed, &db, "A", LEASE_MS, &a_flags).await;
    provider
        .serve(&[format!("{}/login/oidc/callback", base(&b))])
        .await;
    let admin = Client::new(&a.url);
    alice(&admin).await;
    let (start, url) = (base(&a), base(&b));
    let findings: Value = tokio::task::spawn_blocking(move || {
        drive(&node, &url, "sso-cluster", vec![("START_BASE", start)])
    })
    .await
    .unwrap();
    signed_in_as(&findings, "alice", Some("Alice"));
    // A started it (kept the sign-in in the shared store), B finished it.
    let done = "signed in through single sign-on user=Alice";
    assert!(b.log_text().contains(done), "B finished the sign-in");
    assert!(!a.log_text().contains(done), "A only started it");
    let r = admin.get("/api/audit?action=user.sign_in").await;
    let entries = r.json()["entries"].clone();
    assert_eq!(entries[0]["person"]["name"], "Alice", "{entries}");
    assert_eq!(entries[0]["detail"]["method"], "oidc", "{entries}");
    a.stop().await;
    b.stop().await;
    bed.assert_no_codex_left().await;
}
