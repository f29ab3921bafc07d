//! Passkeys over the store: a named user's WebAuthn credentials (listed with their last use,
//! removable), and the one-use, short-lived state of ceremonies in flight. The WebAuthn checks
//! themselves are the HTTP front's (browsers are its clients); this is the shared, stored part,
//! so a ceremony started on one relay finishes on any relay of the store.

use serde::Serialize;

use super::{People, PeopleError};
use crate::ids::now_ms;
use crate::store::{CeremonyRecord, PasskeyRecord, StoreError};

/// The longest a passkey's name may be.
const MAX_PASSKEY_NAME: usize = 60;

/// A passkey, as listed (never its key material).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PasskeyInfo {
    pub id: String,
    pub user_id: String,
    pub name: String,
    pub created_at: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_used_at: Option<i64>,
}

impl From<&PasskeyRecord> for PasskeyInfo {
    fn from(k: &PasskeyRecord) -> Self {
        Self {
            id: k.id.clone(),
            user_id: k.user_id.clone(),
            name: k.name.clone(),
            created_at: k.created_at,
            last_used_at: k.last_used_at,
        }
    }
}

/// What a WebAuthn ceremony is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CeremonyKind {
    Register,
    Login,
    StepUp,
}

impl CeremonyKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Register => "register",
            Self::Login => "login",
            Self::StepUp => "step-up",
        }
    }
}

/// A ceremony in flight: its challenge (the key), the library's state, and what it is bound to.
#[derive(Debug, Clone, PartialEq)]
pub struct Ceremony {
    pub challenge: String,
    pub kind: CeremonyKind,
    /// The user it is for (registration; a step-up from a signed-in browser).
    pub user_id: Option<String>,
    /// The one request a step-up answers.
    pub request_id: Option<String>,
    /// The library's serialized state (base64url).
    pub state: String,
    /// Unix ms after which it is refused.
    pub expires_at: i64,
}

/// Why a ceremony cannot be finished.
#[derive(Debug, thiserror::Error)]
pub enum CeremonyError {
    #[error("this passkey ceremony is unknown, expired or already used; start again")]
    Unknown,
    #[error("this passkey ceremony was started for something else; start again")]
    Mismatch,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl People {
    /// Keeps a new passkey for `user_id` under `name`.
    pub async fn add_passkey(&self, record: PasskeyRecord) -> Result<PasskeyInfo, PeopleError> {
        let name = record.name.trim().to_owned();
        if name.is_empty()
            || name.chars().count() > MAX_PASSKEY_NAME
            || name.chars().any(char::is_control)
        {
            return Err(PeopleError::Invalid(format!(
                "a passkey's name is 1 to {MAX_PASSKEY_NAME} printable characters"
            )));
        }
        if self.store().passkey(&record.id).await?.is_some() {
            return Err(PeopleError::Conflict(
                "this passkey is already registered".into(),
            ));
        }
        let record = PasskeyRecord { name, ..record };
        self.store().insert_passkey(&record).await?;
        Ok(PasskeyInfo::from(&record))
    }

    /// A user's passkeys (`None`: everyone's), as listed.
    pub async fn passkeys(&self, user_id: Option<&str>) -> Result<Vec<PasskeyInfo>, PeopleError> {
        Ok(self
            .store()
            .passkeys(user_id)
            .await?
            .iter()
            .map(PasskeyInfo::from)
            .collect())
    }

    /// A user's passkeys with their key material (for WebAuthn's exclude lists and checks).
    pub async fn passkey_records(&self, user_id: &str) -> Result<Vec<PasskeyRecord>, StoreError> {
        self.store().passkeys(Some(user_id)).await
    }

    pub async fn passkey_record(&self, id: &str) -> Result<Option<PasskeyRecord>, StoreError> {
        self.store().passkey(id).await
    }

    /// Whether `user_id` (`None`: anyone on this relay) has a passkey.
    pub async fn has_passkey(&self, user_id: Option<&str>) -> Result<bool, StoreError> {
        self.store().has_passkey(user_id).await
    }

    /// Notes a passkey's use (its new counters).
    pub async fn passkey_used(&self, id: &str, dynamic_state: &str) -> Result<(), StoreError> {
        self.store()
            .touch_passkey(id, dynamic_state, now_ms())
            .await
    }

    /// Removes a passkey; `owner`: only if it is theirs (a user removes their own; the admin
    /// anyone's).
    pub async fn remove_passkey(&self, id: &str, owner: Option<&str>) -> Result<(), PeopleError> {
        let Some(k) = self.store().passkey(id).await? else {
            return Err(PeopleError::NotFound("passkey"));
        };
        if owner.is_some_and(|o| o != k.user_id) {
            return Err(PeopleError::NotFound("passkey"));
        }
        self.store().delete_passkey(id).await?;
        Ok(())
    }

    /// Keeps a ceremony's state until it is finished (once) or expires.
    pub async fn begin_ceremony(&self, c: Ceremony) -> Result<(), StoreError> {
        let rec = CeremonyRecord {
            challenge: c.challenge,
            kind: c.kind.as_str().into(),
            user_id: c.user_id,
            request_id: c.request_id,
            state: c.state,
            expires_at: c.expires_at,
        };
        self.store().put_ceremony(&rec, now_ms()).await
    }

    /// Takes the ceremony of `challenge`, once, if it is of `kind` and not expired. A ceremony
    /// of another kind is used up all the same (a challenge is never offered twice).
    pub async fn finish_ceremony(
        &self,
        challenge: &str,
        kind: CeremonyKind,
    ) -> Result<Ceremony, CeremonyError> {
        let rec = self
            .store()
            .take_ceremony(challenge, now_ms())
            .await?
            .ok_or(CeremonyError::Unknown)?;
        if rec.kind != kind.as_str() {
            return Err(CeremonyError::Mismatch);
        }
        Ok(Ceremony {
            challenge: rec.challenge,
            kind,
            user_id: rec.user_id,
            request_id: rec.request_id,
            state: rec.state,
            expires_at: rec.expires_at,
        })
    }
}
