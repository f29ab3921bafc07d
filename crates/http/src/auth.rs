//! Who may call the relay: its token (known only by its SHA-256 hash), the browser logins it
//! grants (random session cookies with an expiry, kept as hashes), one-time login links, and
//! throttling of failed attempts (failures only: a correct credential is never refused).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use base64::Engine;
use sha2::{Digest, Sha256};

/// The shortest token accepted, in bytes.
pub const MIN_TOKEN_BYTES: usize = 16;
/// How long a browser login lasts.
pub const LOGIN_LIFETIME: Duration = Duration::from_secs(30 * 24 * 3600);
/// How long a one-time login link printed at start stays usable (once).
pub const ONCE_LIFETIME: Duration = Duration::from_secs(3600);
/// Failed attempts per client (see [`ThrottleKey`]) within [`THROTTLE_WINDOW`] before its
/// failures get 429.
pub const THROTTLE_FAILURES: usize = 10;
pub const THROTTLE_WINDOW: Duration = Duration::from_secs(60);
/// Clients whose failures are remembered at once; past it the stalest are forgotten first.
const THROTTLE_CLIENTS: usize = 10_000;

/// Whose budget of failures an attempt spends: one budget for the whole loopback range (any
/// local process can use 127.0.0.2 as easily as 127.0.0.1, and `::1`), one per IPv4 address,
/// and one per IPv6 /64 (the least a host or a home is given: one machine can use every
/// address in it). An IPv4 address written as IPv6 (`::ffff:a.b.c.d`) is that IPv4 address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ThrottleKey {
    Loopback,
    V4([u8; 4]),
    V6Prefix([u8; 8]),
}

impl ThrottleKey {
    pub fn of(ip: IpAddr) -> Self {
        let ip = match ip {
            IpAddr::V6(v6) => v6
                .to_ipv4_mapped()
                .map(IpAddr::V4)
                .unwrap_or(IpAddr::V6(v6)),
            v4 => v4,
        };
        if ip.is_loopback() {
            return Self::Loopback;
        }
        match ip {
            IpAddr::V4(v4) => Self::V4(v4.octets()),
            IpAddr::V6(v6) => {
                let mut prefix = [0u8; 8];
                prefix.copy_from_slice(&Ipv6Addr::octets(&v6)[..8]);
                Self::V6Prefix(prefix)
            }
        }
    }
}

/// A SHA-256 digest.
pub type Hash = [u8; 32];

pub fn sha256(bytes: &[u8]) -> Hash {
    Sha256::digest(bytes).into()
}

/// Equal in time independent of where the first difference is (both sides are digests, so
/// their lengths never differ).
pub fn same_hash(a: &Hash, b: &Hash) -> bool {
    let diff = a
        .iter()
        .zip(b)
        .fold(0u8, |acc, (x, y)| acc | std::hint::black_box(x ^ y));
    diff == 0
}

/// `n` random bytes from the operating system, base64url without padding.
pub fn random_secret(n: usize) -> String {
    let mut bytes = vec![0u8; n];
    getrandom::fill(&mut bytes).expect("the operating system's random source");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

pub fn to_hex(h: &Hash) -> String {
    h.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn from_hex(s: &str) -> Option<Hash> {
    let s = s.trim();
    if s.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// Checks a token's length (after trimming).
pub fn check_token(token: &str) -> Result<&str, String> {
    let t = token.trim();
    if t.len() < MIN_TOKEN_BYTES {
        return Err(format!(
            "the token is {} bytes long; use at least {MIN_TOKEN_BYTES} random bytes (or let serve generate one)",
            t.len()
        ));
    }
    Ok(t)
}

fn now_ms() -> u64 {
    codex_relay_core::time::now_ms().max(0) as u64
}

/// Who a request was authenticated as: the token, one browser login, or nobody (`--no-auth`).
/// Streams are counted per principal.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Principal {
    Token,
    Login(String),
    Open,
    /// A named user's personal token (as a Bearer header, or as the browser login cookie an
    /// invitation or the login form set), checked against the store on this request.
    User(codex_relay_core::people::Grant),
}

impl Principal {
    /// The role it acts with: the relay's token, its logins and `--no-auth` are the admin.
    pub fn role(&self) -> codex_relay_core::people::Role {
        match self {
            Self::User(g) => g.role,
            _ => codex_relay_core::people::Role::Admin,
        }
    }

    /// Whether it may see session `id` (a token limited to some sessions sees only those).
    pub fn covers(&self, id: &str) -> bool {
        match self {
            Self::User(g) => g.covers(id),
            _ => true,
        }
    }
}

/// How the request presented a credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    Bearer,
    Cookie,
    None,
}

/// The relay's credentials and the logins granted with them.
pub struct Credentials {
    /// `None`: no token (`--no-auth`, loopback only).
    token: Option<Hash>,
    logins: Mutex<HashMap<Hash, u64>>,
    once: Mutex<Option<(Hash, u64)>>,
    /// The latest failures (at most [`THROTTLE_FAILURES`]) of each client, newest last.
    failures: Mutex<HashMap<ThrottleKey, Vec<u64>>>,
    /// Where logins are kept across restarts (as hashes), if anywhere.
    logins_file: Option<PathBuf>,
    /// The relay's people (users and their tokens), once the relay is open.
    people: std::sync::OnceLock<codex_relay_core::people::People>,
    /// The relay and the step-up policy, for the gate's check of MCP answers (which cannot
    /// carry a passkey assertion), once the router is made.
    step_up: std::sync::OnceLock<(codex_relay_core::Relay, crate::passkeys::StepUpPolicy)>,
}

impl Credentials {
    /// `token`: the hash of the relay's token, or `None` for none. `logins_file` keeps browser
    /// logins (their hashes) across restarts.
    pub fn new(token: Option<Hash>, logins_file: Option<PathBuf>) -> Self {
        let logins = logins_file
            .as_ref()
            .map(|f| load_logins(f))
            .unwrap_or_default();
        Self {
            token,
            logins: Mutex::new(logins),
            once: Mutex::new(None),
            failures: Mutex::new(HashMap::new()),
            logins_file,
            people: std::sync::OnceLock::new(),
            step_up: std::sync::OnceLock::new(),
        }
    }

    /// Lets the gate ask whether an MCP answer approves a risky request. Set once.
    pub fn set_step_up(
        &self,
        relay: codex_relay_core::Relay,
        policy: crate::passkeys::StepUpPolicy,
    ) {
        let _ = self.step_up.set((relay, policy));
    }

    pub fn step_up(&self) -> Option<&(codex_relay_core::Relay, crate::passkeys::StepUpPolicy)> {
        self.step_up.get()
    }

    /// Lets personal tokens in: checked against `people`'s store on every use. Set once.
    pub fn set_people(&self, people: codex_relay_core::people::People) {
        let _ = self.people.set(people);
    }

    pub fn people(&self) -> Option<&codex_relay_core::people::People> {
        self.people.get()
    }

    /// Whether a token is required.
    pub fn required(&self) -> bool {
        self.token.is_some()
    }

    /// Whether `token` is the relay's token.
    pub fn is_token(&self, token: &str) -> bool {
        self.token
            .as_ref()
            .is_some_and(|h| same_hash(h, &sha256(token.trim().as_bytes())))
    }

    /// The login a session cookie stands for, if it is one and has not expired.
    pub fn login(&self, cookie: &str) -> Option<Principal> {
        let h = sha256(cookie.as_bytes());
        let mut logins = self.logins.lock().unwrap_or_else(|e| e.into_inner());
        let expires = *logins.get(&h)?;
        if expires <= now_ms() {
            logins.remove(&h);
            return None;
        }
        Some(Principal::Login(to_hex(&h)[..12].to_owned()))
    }

    /// A new browser login: the cookie value to set (only its hash is kept).
    pub fn grant_login(&self) -> String {
        let cookie = random_secret(32);
        let expires = now_ms() + LOGIN_LIFETIME.as_millis() as u64;
        let mut logins = self.logins.lock().unwrap_or_else(|e| e.into_inner());
        let now = now_ms();
        logins.retain(|_, e| *e > now);
        logins.insert(sha256(cookie.as_bytes()), expires);
        self.save(&logins);
        cookie
    }

    /// Ends the login a cookie stands for.
    pub fn revoke_login(&self, cookie: &str) {
        let mut logins = self.logins.lock().unwrap_or_else(|e| e.into_inner());
        if logins.remove(&sha256(cookie.as_bytes())).is_some() {
            self.save(&logins);
        }
    }

    fn save(&self, logins: &HashMap<Hash, u64>) {
        let Some(file) = &self.logins_file else {
            return;
        };
        let rows: Vec<serde_json::Value> = logins
            .iter()
            .map(|(h, e)| serde_json::json!({"sha256": to_hex(h), "expiresMs": e}))
            .collect();
        if let Err(e) = write_private(file, serde_json::Value::from(rows).to_string().as_bytes()) {
            tracing::warn!("keeping browser logins in {}: {e}", file.display());
        }
    }

    /// A new one-time login link code (replacing any earlier one), usable once within
    /// [`ONCE_LIFETIME`].
    pub fn new_once(&self) -> String {
        let code = random_secret(24);
        let expires = now_ms() + ONCE_LIFETIME.as_millis() as u64;
        *self.once.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((sha256(code.as_bytes()), expires));
        code
    }

    /// Uses a one-time code: true once, for the current code within its lifetime.
    pub fn use_once(&self, code: &str) -> bool {
        let mut once = self.once.lock().unwrap_or_else(|e| e.into_inner());
        match *once {
            Some((h, expires)) if expires > now_ms() && same_hash(&h, &sha256(code.as_bytes())) => {
                *once = None;
                true
            }
            _ => false,
        }
    }

    /// How long `client` must wait before a failed attempt of its is looked at again, if it
    /// failed too often lately. Asked only once its credential turned out wrong: a correct one
    /// is never throttled, so no other process sharing the address can lock its owner out.
    pub fn throttled(&self, client: IpAddr) -> Option<Duration> {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let now = now_ms();
        let window = THROTTLE_WINDOW.as_millis() as u64;
        let list = failures.get_mut(&ThrottleKey::of(client))?;
        list.retain(|t| now.saturating_sub(*t) < window);
        if list.len() < THROTTLE_FAILURES {
            return None;
        }
        let oldest = list.iter().min().copied().unwrap_or(now);
        Some(
            Duration::from_millis(window.saturating_sub(now.saturating_sub(oldest)))
                .max(Duration::from_secs(1)),
        )
    }

    /// Records a failed attempt from `client`.
    pub fn failed(&self, client: IpAddr) {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let now = now_ms();
        let key = ThrottleKey::of(client);
        // Bounded: a flood of addresses forgets first the clients that failed least, longest
        // ago (never everyone at once, which would give every client a fresh budget, and not
        // the throttled ones while others can go).
        if !failures.contains_key(&key) && failures.len() >= THROTTLE_CLIENTS {
            let window = THROTTLE_WINDOW.as_millis() as u64;
            failures.retain(|_, l| l.last().is_some_and(|t| now.saturating_sub(*t) < window));
            while failures.len() >= THROTTLE_CLIENTS {
                let Some(stalest) = failures
                    .iter()
                    .min_by_key(|(_, l)| (l.len(), l.last().copied().unwrap_or(0)))
                    .map(|(k, _)| *k)
                else {
                    break;
                };
                failures.remove(&stalest);
            }
        }
        let list = failures.entry(key).or_default();
        list.push(now);
        if list.len() > THROTTLE_FAILURES {
            list.remove(0);
        }
    }
}

fn load_logins(file: &std::path::Path) -> HashMap<Hash, u64> {
    let Ok(text) = std::fs::read_to_string(file) else {
        return HashMap::new();
    };
    let now = now_ms();
    serde_json::from_str::<Vec<serde_json::Value>>(&text)
        .unwrap_or_default()
        .iter()
        .filter_map(|row| {
            let h = from_hex(row.get("sha256")?.as_str()?)?;
            let e = row.get("expiresMs")?.as_u64()?;
            (e > now).then_some((h, e))
        })
        .collect()
}

/// Writes `bytes` to `path` readable by its owner only (mode 0600), replacing it whole.
pub fn write_private(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_is_checked_by_its_hash_and_must_be_long_enough() {
        assert!(check_token("short").is_err());
        let token = random_secret(32);
        assert!(check_token(&token).is_ok());
        let c = Credentials::new(Some(sha256(token.as_bytes())), None);
        assert!(c.is_token(&token));
        assert!(!c.is_token(&format!("{token}x")));
        assert!(!c.is_token(""));
        assert_eq!(from_hex(&to_hex(&sha256(b"a"))), Some(sha256(b"a")));
    }

    #[test]
    fn logins_are_random_cookies_kept_as_hashes_and_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("logins.json");
        let c = Credentials::new(Some(sha256(b"t")), Some(file.clone()));
        let cookie = c.grant_login();
        assert!(matches!(c.login(&cookie), Some(Principal::Login(_))));
        assert_eq!(c.login("forged"), None);
        let kept = std::fs::read_to_string(&file).unwrap();
        assert!(!kept.contains(&cookie), "only a hash is kept: {kept}");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let again = Credentials::new(Some(sha256(b"t")), Some(file.clone()));
        assert!(again.login(&cookie).is_some(), "kept across a restart");
        again.revoke_login(&cookie);
        assert_eq!(again.login(&cookie), None);
        assert_eq!(Credentials::new(None, Some(file)).login(&cookie), None);
    }

    #[test]
    fn a_once_code_works_once() {
        let c = Credentials::new(Some(sha256(b"t")), None);
        let code = c.new_once();
        assert!(!c.use_once("nope"));
        assert!(c.use_once(&code));
        assert!(!c.use_once(&code), "used");
        let first = c.new_once();
        let second = c.new_once();
        assert!(!c.use_once(&first), "replaced");
        assert!(c.use_once(&second));
    }

    #[test]
    fn failures_past_the_budget_wait() {
        let c = Credentials::new(Some(sha256(b"t")), None);
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let other: IpAddr = "10.0.0.1".parse().unwrap();
        for _ in 0..THROTTLE_FAILURES - 1 {
            c.failed(ip);
        }
        assert_eq!(c.throttled(ip), None);
        c.failed(ip);
        let wait = c.throttled(ip).expect("throttled");
        assert!(wait <= THROTTLE_WINDOW && wait >= Duration::from_secs(1));
        assert_eq!(c.throttled(other), None);
        // The budget stays one per client however many failures it keeps making.
        for _ in 0..1000 {
            c.failed(ip);
        }
        assert!(
            c.failures
                .lock()
                .unwrap()
                .values()
                .all(|l| l.len() <= THROTTLE_FAILURES)
        );
    }

    #[test]
    fn an_address_range_shares_one_budget() {
        let key = |s: &str| ThrottleKey::of(s.parse().unwrap());
        assert_eq!(key("127.0.0.1"), ThrottleKey::Loopback);
        assert_eq!(key("127.0.0.31"), ThrottleKey::Loopback);
        assert_eq!(key("127.255.0.9"), ThrottleKey::Loopback);
        assert_eq!(key("::1"), ThrottleKey::Loopback);
        assert_eq!(key("::ffff:127.0.0.2"), ThrottleKey::Loopback);
        assert_eq!(key("2001:db8:1:2:aaaa::1"), key("2001:db8:1:2:ffff:1:2:3"));
        assert_ne!(key("2001:db8:1:2::1"), key("2001:db8:1:3::1"));
        assert_eq!(key("::ffff:192.0.2.7"), key("192.0.2.7"));
        assert_ne!(key("192.0.2.7"), key("192.0.2.8"));
        let c = Credentials::new(Some(sha256(b"t")), None);
        for i in 0..THROTTLE_FAILURES {
            c.failed(format!("127.0.0.{}", i + 2).parse().unwrap());
        }
        assert!(c.throttled("127.0.0.1".parse().unwrap()).is_some());
        for i in 0..THROTTLE_FAILURES {
            c.failed(format!("2001:db8::{i:x}").parse().unwrap());
        }
        assert!(c.throttled("2001:db8::ffff:1".parse().unwrap()).is_some());
        assert!(c.throttled("2001:db8:0:1::1".parse().unwrap()).is_none());
    }

    #[test]
    fn a_flood_of_clients_never_resets_a_recent_failures_budget() {
        let c = Credentials::new(Some(sha256(b"t")), None);
        let ip: IpAddr = "198.51.100.1".parse().unwrap();
        for _ in 0..THROTTLE_FAILURES {
            c.failed(ip);
        }
        for i in 0..THROTTLE_CLIENTS as u32 + 50 {
            let other = std::net::Ipv4Addr::from(0x0a00_0000 + i);
            c.failed(IpAddr::V4(other));
        }
        assert!(c.failures.lock().unwrap().len() <= THROTTLE_CLIENTS);
        assert!(
            c.throttled(ip).is_some(),
            "a flood of other addresses does not give a throttled client a fresh budget"
        );
    }
}
