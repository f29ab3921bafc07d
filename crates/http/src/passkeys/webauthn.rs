//! The WebAuthn relying party (the `webauthn_rp` library, pure Rust): starting and checking
//! registrations and assertions, in bytes and JSON the store and the browser can carry. Every
//! credential is a discoverable passkey with user verification required (the authenticator's
//! PIN or biometric), so one assertion proves both "has the device" and "is its owner".

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use serde_json::Value;
use webauthn_rp::bin::{Decode, Encode};
use webauthn_rp::request::ExtensionInfo;
use webauthn_rp::request::auth::{
    AuthenticationVerificationOptions, DiscoverableCredentialRequestOptions,
};
use webauthn_rp::request::register::{
    CredProtect, PublicKeyCredentialCreationOptions, PublicKeyCredentialUserEntity,
    RegistrationVerificationOptions, UserHandle16,
};
use webauthn_rp::request::{AsciiDomain, PublicKeyCredentialDescriptor, RpId, TimedCeremony};
use webauthn_rp::response::register::{CompressedPubKey, DynamicState, StaticState};
use webauthn_rp::response::{AuthTransports, CredentialId};
use webauthn_rp::{
    AuthenticatedCredential, DiscoverableAuthentication16, DiscoverableAuthenticationServerState,
    Registration, RegistrationServerState,
};

/// Why a WebAuthn step failed (the message is safe to show).
#[derive(Debug, thiserror::Error)]
pub enum WebauthnError {
    #[error("{0}")]
    Config(String),
    #[error("the passkey's answer is not readable: {0}")]
    Malformed(String),
    #[error("the passkey's answer does not check out: {0}")]
    Refused(String),
}

/// A ceremony just started: what the browser gets, and what the store keeps.
pub struct Started {
    /// `PublicKeyCredentialCreationOptionsJSON` / `…RequestOptionsJSON`, for
    /// `PublicKeyCredential.parse…OptionsFromJSON`.
    pub options: Value,
    /// The challenge, as the store's key.
    pub challenge: String,
    /// The library's state, base64url.
    pub state: String,
    /// Unix ms.
    pub expires_at: i64,
}

/// A registration that checked out.
pub struct NewCredential {
    pub id: String,
    pub user_handle: String,
    pub static_state: String,
    pub dynamic_state: String,
}

/// An assertion as received, before it is checked: which credential and ceremony it names.
pub struct Assertion {
    parsed: DiscoverableAuthentication16,
    pub credential_id: String,
    pub challenge: String,
}

/// The relying party: its ID (a domain) and the origins its pages are served from.
#[derive(Debug, Clone)]
pub struct RelyingParty {
    rp_id: RpId,
    origins: Vec<String>,
}

fn challenge_key(c: u128) -> String {
    format!("{c:032x}")
}

/// A started ceremony: the browser's options, the challenge it is found by, its encoded state.
fn started<E: std::fmt::Display>(
    client: &impl serde::Serialize,
    challenge: u128,
    state: Result<Vec<u8>, E>,
    expiration: std::time::SystemTime,
) -> Result<Started, WebauthnError> {
    let config = |e: &dyn std::fmt::Display| WebauthnError::Config(e.to_string());
    Ok(Started {
        options: serde_json::to_value(client).map_err(|e| config(&e))?,
        challenge: challenge_key(challenge),
        state: B64.encode(state.map_err(|e| config(&e))?),
        expires_at: expiry_ms(expiration),
    })
}

fn expiry_ms(t: std::time::SystemTime) -> i64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default()
}

/// The 16-byte user handle of a user id: a hash (no name or other personal data in it).
pub fn user_handle(user_id: &str) -> [u8; 16] {
    let h = crate::auth::sha256(format!("codex-relay passkey user\0{user_id}").as_bytes());
    let mut out = [0u8; 16];
    out.copy_from_slice(&h[..16]);
    out
}

fn bytes(text: &str, what: &str) -> Result<Vec<u8>, WebauthnError> {
    B64.decode(text)
        .map_err(|_| WebauthnError::Malformed(format!("the stored {what} is not base64url")))
}

impl RelyingParty {
    /// The relying party of pages served at `origin` (`scheme://host[:port]`): its host must be
    /// a domain name (`localhost` included), never a bare IP address (WebAuthn refuses those).
    pub fn for_origin(origin: &url::Url) -> Result<Self, WebauthnError> {
        let host = match origin.host() {
            Some(url::Host::Domain(d)) => d.to_ascii_lowercase(),
            Some(_) => {
                return Err(WebauthnError::Config(format!(
                    "passkeys need the relay to be reached by a domain name (WebAuthn refuses an IP address such as {}): open it as http://localhost:{} or set --public-url",
                    origin.host_str().unwrap_or_default(),
                    origin.port_or_known_default().unwrap_or(80)
                )));
            }
            None => {
                return Err(WebauthnError::Config(
                    "no host to name the relying party".into(),
                ));
            }
        };
        let secure =
            origin.scheme() == "https" || host == "localhost" || host.ends_with(".localhost");
        if !secure {
            return Err(WebauthnError::Config(format!(
                "passkeys need a secure context: serve the relay over https (or open it as http://localhost); {origin} is neither"
            )));
        }
        let rp_id = AsciiDomain::try_from(host.clone())
            .map(RpId::Domain)
            .map_err(|e| {
                WebauthnError::Config(format!("{host} cannot be a relying party ID: {e}"))
            })?;
        Ok(Self {
            rp_id,
            origins: vec![origin.origin().ascii_serialization()],
        })
    }

    /// Starts registering a passkey for `user_id` (`name` shown by the authenticator), not one
    /// of `exclude` (the user's passkeys already registered, by id).
    pub fn start_registration(
        &self,
        user_id: &str,
        name: &str,
        exclude: &[String],
    ) -> Result<Started, WebauthnError> {
        let handle = UserHandle16::decode(user_handle(user_id)).unwrap_or_else(|e| match e {});
        // The account name an authenticator lists (no spaces allowed: `Pia Approver` is
        // `Pia.Approver`), and the name as written as the display name.
        let account = name.split_whitespace().collect::<Vec<_>>().join(".");
        let entity = PublicKeyCredentialUserEntity {
            name: account
                .as_str()
                .try_into()
                .or_else(|_| user_id.try_into())
                .map_err(|e| WebauthnError::Config(format!("the user name {name:?}: {e}")))?,
            id: &handle,
            display_name: name.try_into().ok(),
        };
        let exclude = exclude
            .iter()
            .filter_map(|id| B64.decode(id).ok())
            .filter_map(|id| {
                Some(PublicKeyCredentialDescriptor {
                    id: CredentialId::<Vec<u8>>::decode(id).ok()?,
                    transports: AuthTransports::decode(0).ok()?,
                })
            })
            .collect();
        let mut options = PublicKeyCredentialCreationOptions::passkey(&self.rp_id, entity, exclude);
        // Ask authenticators to guard the credential with user verification, without refusing
        // the many (platform ones included) that do not support the extension: every
        // assertion the relay accepts must be user-verified anyway.
        options.extensions.cred_protect =
            CredProtect::UserVerificationRequired(ExtensionInfo::AllowDontEnforceValue);
        let (server, client) = options
            .start_ceremony()
            .map_err(|e| WebauthnError::Config(e.to_string()))?;
        started(
            &client,
            server.sent_challenge().0,
            server.encode(),
            server.expiration(),
        )
    }

    /// The challenge a registration answers (to find its ceremony).
    pub fn registration_challenge(json: &Value) -> Result<String, WebauthnError> {
        let raw = json.to_string();
        let reg = Registration::from_json_relaxed(raw.as_bytes())
            .map_err(|e| WebauthnError::Malformed(e.to_string()))?;
        reg.challenge_relaxed()
            .map(|c| challenge_key(c.0))
            .map_err(|e| WebauthnError::Malformed(e.to_string()))
    }

    /// Checks a registration against its ceremony's `state`.
    pub fn finish_registration(
        &self,
        state: &str,
        json: &Value,
    ) -> Result<NewCredential, WebauthnError> {
        let raw = json.to_string();
        let reg = Registration::from_json_relaxed(raw.as_bytes())
            .map_err(|e| WebauthnError::Malformed(e.to_string()))?;
        let server = RegistrationServerState::<16>::decode(bytes(state, "ceremony")?.as_slice())
            .map_err(|e| WebauthnError::Malformed(e.to_string()))?;
        let opts = RegistrationVerificationOptions::<String, String> {
            allowed_origins: &self.origins,
            ..Default::default()
        };
        let cred = server
            .verify(&self.rp_id, &reg, &opts)
            .map_err(|e| WebauthnError::Refused(e.to_string()))?;
        Ok(NewCredential {
            id: B64.encode(cred.id().as_ref()),
            user_handle: B64.encode(cred.user_id().encode().unwrap_or_else(|e| match e {})),
            static_state: B64.encode(cred.static_state().encode().unwrap_or_else(|e| match e {})),
            dynamic_state: B64.encode(cred.dynamic_state().encode().unwrap_or_else(|e| match e {})),
        })
    }

    /// Starts an assertion with any of the relay's passkeys (the browser offers the ones it has).
    pub fn start_assertion(&self) -> Result<Started, WebauthnError> {
        let (server, client) = DiscoverableCredentialRequestOptions::passkey(&self.rp_id)
            .start_ceremony()
            .map_err(|e| WebauthnError::Config(e.to_string()))?;
        started(
            &client,
            server.sent_challenge().0,
            server.encode(),
            server.expiration(),
        )
    }

    /// Reads an assertion (`PublicKeyCredential.toJSON()`), unchecked.
    pub fn read_assertion(json: &Value) -> Result<Assertion, WebauthnError> {
        let raw = json.to_string();
        let parsed = DiscoverableAuthentication16::from_json_relaxed(raw.as_bytes())
            .map_err(|e| WebauthnError::Malformed(e.to_string()))?;
        let challenge = parsed
            .challenge_relaxed()
            .map(|c| challenge_key(c.0))
            .map_err(|e| WebauthnError::Malformed(e.to_string()))?;
        Ok(Assertion {
            credential_id: B64.encode(parsed.raw_id().as_ref()),
            challenge,
            parsed,
        })
    }

    /// Checks `assertion` against its ceremony's `state` and the stored credential (its user
    /// handle and states): user verification is required. The credential's new dynamic state
    /// (signature counter) to keep.
    pub fn finish_assertion(
        &self,
        state: &str,
        assertion: &Assertion,
        user_handle: &str,
        static_state: &str,
        dynamic_state: &str,
    ) -> Result<String, WebauthnError> {
        let server =
            DiscoverableAuthenticationServerState::decode(bytes(state, "ceremony")?.as_slice())
                .map_err(|e| WebauthnError::Malformed(e.to_string()))?;
        let handle_bytes: [u8; 16] =
            bytes(user_handle, "user handle")?.try_into().map_err(|_| {
                WebauthnError::Malformed("the stored user handle is not 16 bytes".into())
            })?;
        let handle = UserHandle16::decode(handle_bytes).unwrap_or_else(|e| match e {});
        if *assertion.parsed.response().user_handle() != handle {
            return Err(WebauthnError::Refused(
                "the passkey belongs to another user".into(),
            ));
        }
        let static_state =
            StaticState::<CompressedPubKey<[u8; 32], [u8; 32], [u8; 48], Vec<u8>>>::decode(
                bytes(static_state, "public key")?.as_slice(),
            )
            .map_err(|e| WebauthnError::Malformed(e.to_string()))?;
        let dyn_bytes: [u8; 7] = bytes(dynamic_state, "counters")?
            .try_into()
            .map_err(|_| WebauthnError::Malformed("the stored counters are not 7 bytes".into()))?;
        let dynamic =
            DynamicState::decode(dyn_bytes).map_err(|e| WebauthnError::Malformed(e.to_string()))?;
        let mut cred =
            AuthenticatedCredential::new(assertion.parsed.raw_id(), &handle, static_state, dynamic)
                .map_err(|e| WebauthnError::Malformed(e.to_string()))?;
        let opts = AuthenticationVerificationOptions::<String, String> {
            allowed_origins: &self.origins,
            ..Default::default()
        };
        server
            .verify(&self.rp_id, &assertion.parsed, &mut cred, &opts)
            .map_err(|e| WebauthnError::Refused(e.to_string()))?;
        if !cred.dynamic_state().user_verified {
            return Err(WebauthnError::Refused(
                "the authenticator did not verify its user (PIN or biometric)".into(),
            ));
        }
        Ok(B64.encode(cred.dynamic_state().encode().unwrap_or_else(|e| match e {})))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rp(url: &str) -> Result<RelyingParty, WebauthnError> {
        RelyingParty::for_origin(&url::Url::parse(url).unwrap())
    }

    #[test]
    fn the_relying_party_is_a_domain_in_a_secure_context() {
        assert!(rp("http://localhost:7878").is_ok());
        assert!(rp("https://relay.example.com").is_ok());
        assert!(rp("http://app.localhost:7878").is_ok());
        let ip = rp("http://127.0.0.1:7878").unwrap_err().to_string();
        assert!(
            ip.contains("IP address") && ip.contains("http://localhost:7878"),
            "{ip}"
        );
        assert!(rp("https://[::1]:7878").is_err());
        let plain = rp("http://relay.example.com").unwrap_err().to_string();
        assert!(plain.contains("secure context"), "{plain}");
    }

    #[test]
    fn options_ask_for_a_user_verified_discoverable_passkey_within_five_minutes() {
        let rp = rp("http://localhost:7878").unwrap();
        let now = codex_relay_core::time::now_ms();
        let reg = rp.start_registration("usr_1", "Pia Approver", &[]).unwrap();
        let sel = &reg.options["authenticatorSelection"];
        assert_eq!(sel["residentKey"], "required", "{}", reg.options);
        assert_eq!(sel["userVerification"], "required", "{}", reg.options);
        assert_eq!(reg.options["rp"]["id"], "localhost");
        assert_eq!(reg.options["user"]["name"], "Pia.Approver");
        assert_eq!(reg.options["user"]["displayName"], "Pia Approver");
        let auth = rp.start_assertion().unwrap();
        assert_eq!(
            auth.options["userVerification"], "required",
            "{}",
            auth.options
        );
        assert_eq!(auth.options["rpId"], "localhost");
        for s in [&reg, &auth] {
            assert!(
                s.expires_at > now && s.expires_at <= now + 301_000,
                "{}",
                s.expires_at
            );
            assert!(!s.state.is_empty());
        }
        assert_ne!(reg.challenge, auth.challenge, "a fresh challenge each time");
        // The same user always has the same handle; another user another.
        assert_eq!(user_handle("usr_1"), user_handle("usr_1"));
        assert_ne!(user_handle("usr_1"), user_handle("usr_2"));
    }

    #[test]
    fn an_unreadable_answer_is_a_clear_error() {
        let e = RelyingParty::read_assertion(&serde_json::json!({"id": "x"}))
            .err()
            .unwrap();
        assert!(matches!(e, WebauthnError::Malformed(_)), "{e}");
        let e = RelyingParty::registration_challenge(&serde_json::json!({}))
            .err()
            .unwrap();
        assert!(matches!(e, WebauthnError::Malformed(_)), "{e}");
    }
}
