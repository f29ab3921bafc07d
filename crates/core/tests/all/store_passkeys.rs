//! The passkey tables on SQLite and Postgres: a WebAuthn ceremony is taken once (a second
//! take, also from another store handle as another relay would, gets nothing), an expired one
//! is refused, one of another kind is used up and refused; passkeys are listed per user, found
//! by id, marked used and removed only by their owner (or the admin).

use codex_relay_core::people::{Ceremony, CeremonyError, CeremonyKind, People, Role};
use codex_relay_core::store::{PasskeyRecord, Store};

use crate::store::Fixture;

fn ceremony(challenge: &str, kind: CeremonyKind, expires_at: i64) -> Ceremony {
    Ceremony {
        challenge: challenge.into(),
        kind,
        user_id: Some("usr_a".into()),
        request_id: Some("req_1".into()),
        state: "c3RhdGU".into(),
        expires_at,
    }
}

async fn ceremonies_are_taken_once_before_they_expire(fx: &Fixture) {
    let a = People::new(Store::open(&fx.target).await.unwrap());
    let b = People::new(Store::open(&fx.target).await.unwrap());
    let now = codex_relay_core::time::now_ms();
    a.begin_ceremony(ceremony("c1", CeremonyKind::StepUp, now + 300_000))
        .await
        .unwrap();
    let got = b.finish_ceremony("c1", CeremonyKind::StepUp).await.unwrap();
    assert_eq!(got.request_id.as_deref(), Some("req_1"));
    assert_eq!(got.user_id.as_deref(), Some("usr_a"));
    assert!(matches!(
        a.finish_ceremony("c1", CeremonyKind::StepUp).await,
        Err(CeremonyError::Unknown)
    ));
    // Expired: refused (and gone).
    a.begin_ceremony(ceremony("c2", CeremonyKind::StepUp, now - 1))
        .await
        .unwrap();
    assert!(matches!(
        a.finish_ceremony("c2", CeremonyKind::StepUp).await,
        Err(CeremonyError::Unknown)
    ));
    // Another kind: refused, and used up all the same.
    a.begin_ceremony(ceremony("c3", CeremonyKind::Login, now + 300_000))
        .await
        .unwrap();
    assert!(matches!(
        a.finish_ceremony("c3", CeremonyKind::StepUp).await,
        Err(CeremonyError::Mismatch)
    ));
    assert!(matches!(
        a.finish_ceremony("c3", CeremonyKind::Login).await,
        Err(CeremonyError::Unknown)
    ));
}

async fn passkeys_belong_to_their_user(fx: &Fixture) {
    let people = People::new(Store::open(&fx.target).await.unwrap());
    let ann = people
        .create_user("Ann", Role::Approver, None)
        .await
        .unwrap();
    let bob = people.create_user("Bob", Role::Viewer, None).await.unwrap();
    let key = |id: &str, user: &str| PasskeyRecord {
        id: id.into(),
        user_id: user.into(),
        name: format!("key {id}"),
        user_handle: "aGFuZGxl".into(),
        static_state: "c3RhdGlj".into(),
        dynamic_state: "ZHluYW1p".into(),
        created_at: 1,
        last_used_at: None,
    };
    assert!(!people.has_passkey(None).await.unwrap());
    people.add_passkey(key("k1", &ann.id)).await.unwrap();
    people.add_passkey(key("k2", &bob.id)).await.unwrap();
    assert!(
        people.add_passkey(key("k1", &ann.id)).await.is_err(),
        "registered once"
    );
    let mut blank = key("k3", &ann.id);
    blank.name = " ".into();
    assert!(people.add_passkey(blank).await.is_err(), "a name is needed");
    assert!(people.has_passkey(Some(&ann.id)).await.unwrap());
    let anns = people.passkeys(Some(&ann.id)).await.unwrap();
    assert_eq!(anns.len(), 1);
    assert_eq!(people.passkeys(None).await.unwrap().len(), 2);
    people.passkey_used("k1", "bmV3").await.unwrap();
    let k1 = people.passkey_record("k1").await.unwrap().unwrap();
    assert_eq!(k1.dynamic_state, "bmV3");
    assert!(k1.last_used_at.is_some());
    // Bob cannot remove Ann's; Ann can; the admin (no owner) can remove Bob's.
    assert!(people.remove_passkey("k1", Some(&bob.id)).await.is_err());
    people.remove_passkey("k1", Some(&ann.id)).await.unwrap();
    people.remove_passkey("k2", None).await.unwrap();
    assert!(!people.has_passkey(None).await.unwrap());
}

crate::store::scenarios!(
    ceremonies_are_taken_once_before_they_expire,
    passkeys_belong_to_their_user,
);
