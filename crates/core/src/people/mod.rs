//! People: named users with a role, their personal API tokens (only hashes kept), one-time
//! invitations, and the person every record names (who answered, started, steered, changed a
//! rule). The fronts authenticate and check roles; this is the shared, stored part of it.
//! docs/SECURITY.md "People and roles".

mod audit;
mod handle;
mod passkeys;
mod sso;

pub use crate::person::{ADMIN_TOKEN_ID, Person, Role};
pub use audit::{AuditEntry, AuditQuery};
pub use handle::{
    Invitation, InviteError, NewToken, People, PeopleError, Redeemed, TokenInfo, User,
};
pub use passkeys::{Ceremony, CeremonyError, CeremonyKind, PasskeyInfo};
pub use sso::{Identity, PendingSso, SSO_LOGIN_LABEL, SsoClaims, SsoMatch, SsoPolicy, SsoRefused};

/// What a personal token grants, as checked on every use (so a revocation, a disabled user or
/// a lowered role holds at once, on every relay of the store).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Grant {
    pub token_id: String,
    pub user_id: String,
    pub user_name: String,
    /// The lower of the token's role and its user's current role.
    pub role: Role,
    /// The sessions it is limited to; `None`: every session.
    pub sessions: Option<Vec<String>>,
}

impl Grant {
    /// Whether the grant covers session `id`.
    pub fn covers(&self, id: &str) -> bool {
        self.sessions
            .as_ref()
            .is_none_or(|s| s.iter().any(|x| x == id))
    }

    pub fn person(&self, front: &str) -> Person {
        Person {
            id: self.user_id.clone(),
            name: self.user_name.clone(),
            role: self.role,
            front: front.to_owned(),
            device: None,
        }
    }
}

/// The prefix of every personal token (`crp_`), so a leaked one is recognised (and secret
/// scanners can be taught it); the relay's own token never has it.
pub const TOKEN_PREFIX: &str = "crp_";
/// The prefix of an invitation's code.
pub const INVITE_PREFIX: &str = "cri_";

/// The SHA-256 of a secret, hex: what the store keeps. Tokens are 256 random bits, so a fast
/// hash is enough (no dictionary to try).
pub fn hash_secret(secret: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(secret.trim().as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `prefix` + 256 random bits, base64url.
pub(crate) fn new_secret(prefix: &str) -> String {
    use base64::Engine;
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the operating system's random source");
    format!(
        "{prefix}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_are_ordered_and_keep_their_words() {
        assert!(Role::Viewer < Role::Approver && Role::Approver < Role::Operator);
        assert!(Role::Operator < Role::Admin);
        for r in Role::ALL {
            assert_eq!(Role::parse(r.as_str()), Some(r));
        }
        assert_eq!(Role::parse("root"), None);
        let t = new_secret(TOKEN_PREFIX);
        assert!(t.starts_with("crp_") && t.len() > 40);
        assert_eq!(hash_secret(&t).len(), 64);
        assert_ne!(hash_secret(&t), hash_secret(&new_secret(TOKEN_PREFIX)));
    }
}
