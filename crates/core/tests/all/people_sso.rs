//! Single sign-on's stored part, on SQLite and Postgres: a sign-in under way is taken once
//! (a second take, or one after its ten minutes, gets nothing); who a verified sign-in is —
//! an identity an admin bound, an invitation, a verified email when allowed (never an
//! unverified one), a new viewer when allowed, refused otherwise; a disabled user is refused;
//! an SSO login's token stops working when it expires.

use std::time::Duration;

use codex_relay_core::people::{
    PendingSso, People, Role, SsoClaims, SsoMatch, SsoPolicy, SsoRefused,
};
use codex_relay_core::store::Store;

use crate::store::{Fixture, scenarios};

const ISSUER: &str = "https://id.example.test";

fn claims(sub: &str, email: Option<&str>, verified: bool) -> SsoClaims {
    SsoClaims {
        issuer: ISSUER.into(),
        subject: sub.into(),
        email: email.map(str::to_owned),
        email_verified: verified,
        name: Some(format!("{sub} name")),
    }
}

fn pending(next: &str) -> PendingSso {
    PendingSso {
        nonce: "n".into(),
        verifier: "v".into(),
        next: next.into(),
        invite_hash: None,
    }
}

async fn sign_ins_under_way_are_taken_once(fx: &Fixture) {
    let store = Store::open(&fx.target).await.unwrap();
    let people = People::new(store.clone());
    let ten_min = Duration::from_secs(600);
    people
        .begin_sso("state-1", &pending("/a"), ten_min)
        .await
        .unwrap();
    // A second relay on the same store (Postgres) or the same file takes it: once.
    let other = People::new(Store::open(&fx.target).await.unwrap());
    let got = other
        .finish_sso("state-1")
        .await
        .unwrap()
        .expect("the sign-in");
    assert_eq!((got.next.as_str(), got.nonce.as_str()), ("/a", "n"));
    assert!(people.finish_sso("state-1").await.unwrap().is_none());
    assert!(other.finish_sso("state-1").await.unwrap().is_none());
    assert!(people.finish_sso("never-started").await.unwrap().is_none());
    // An expired one is not given back (and is gone).
    people
        .begin_sso("state-2", &pending("/b"), Duration::ZERO)
        .await
        .unwrap();
    assert!(people.finish_sso("state-2").await.unwrap().is_none());
    store.close().await.unwrap();
}

async fn who_a_sign_in_is(fx: &Fixture) {
    let store = Store::open(&fx.target).await.unwrap();
    let people = People::new(store.clone());
    let alice = people
        .create_user("Alice", Role::Approver, None)
        .await
        .unwrap();
    people
        .create_user("bob@example.test", Role::Operator, None)
        .await
        .unwrap();
    people
        .bind_identity("Alice", ISSUER, "sub-alice", None)
        .await
        .unwrap();
    let strict = SsoPolicy::default();

    // Bound: Alice. The same subject at another issuer is someone else.
    let (u, m) = people
        .sso_user(&claims("sub-alice", None, false), strict, None)
        .await
        .unwrap();
    assert_eq!((u.id.as_str(), m), (alice.id.as_str(), SsoMatch::Bound));
    let mut elsewhere = claims("sub-alice", None, false);
    elsewhere.issuer = "https://other.example.test".into();
    assert!(matches!(
        people.sso_user(&elsewhere, strict, None).await,
        Err(SsoRefused::Unknown)
    ));

    // Bob's verified email is his user's name: only with match_email, and only verified.
    let bob = claims("sub-bob", Some("bob@example.test"), true);
    assert!(matches!(
        people.sso_user(&bob, strict, None).await,
        Err(SsoRefused::Unknown)
    ));
    let by_email = SsoPolicy {
        match_email: true,
        create_role: None,
    };
    let unverified = claims("sub-bob", Some("bob@example.test"), false);
    assert!(matches!(
        people.sso_user(&unverified, by_email, None).await,
        Err(SsoRefused::Unknown)
    ));
    let (u, m) = people.sso_user(&bob, by_email, None).await.unwrap();
    assert_eq!((u.name.as_str(), m), ("bob@example.test", SsoMatch::Email));
    // Now bound: signs in without the email rule.
    let (_, m) = people.sso_user(&bob, strict, None).await.unwrap();
    assert_eq!(m, SsoMatch::Bound);

    // Unknown identities become viewers only when allowed; a taken name is never merged.
    let create = SsoPolicy {
        match_email: false,
        create_role: Some(Role::Viewer),
    };
    let carol = claims("sub-carol", Some("carol@example.test"), true);
    let (u, m) = people.sso_user(&carol, create, None).await.unwrap();
    assert_eq!(
        (u.name.as_str(), u.role, m),
        ("carol@example.test", Role::Viewer, SsoMatch::Created)
    );
    let squatter = claims("sub-other", Some("Alice"), true);
    assert!(matches!(
        people.sso_user(&squatter, create, None).await,
        Err(SsoRefused::NameTaken(_))
    ));

    // An invitation through SSO makes its user and binds the identity; used once.
    let (code, _) = people
        .invite("Ivy", Role::Viewer, None, Duration::from_secs(600), None)
        .await
        .unwrap();
    let hash = people.invitation_for_sso(&code).await.unwrap();
    let ivy = claims("sub-ivy", None, false);
    let (u, m) = people.sso_user(&ivy, strict, Some(&hash)).await.unwrap();
    assert_eq!((u.name.as_str(), m), ("Ivy", SsoMatch::Invitation));
    assert!(people.invitation_for_sso(&code).await.is_err());
    // An identity already bound cannot use an invitation (it would make a second user).
    let (code2, _) = people
        .invite(
            "Ivy Two",
            Role::Viewer,
            None,
            Duration::from_secs(600),
            None,
        )
        .await
        .unwrap();
    let hash2 = people.invitation_for_sso(&code2).await.unwrap();
    assert!(matches!(
        people.sso_user(&ivy, strict, Some(&hash2)).await,
        Err(SsoRefused::AlreadyBound(_))
    ));
    // An invitation limited to sessions is not for SSO.
    let (code3, _) = people
        .invite(
            "Lim",
            Role::Viewer,
            Some(vec!["s1".into()]),
            Duration::from_secs(600),
            None,
        )
        .await
        .unwrap();
    let hash3 = people.invitation_for_sso(&code3).await.unwrap();
    assert!(matches!(
        people
            .sso_user(&claims("sub-lim", None, false), strict, Some(&hash3))
            .await,
        Err(SsoRefused::LimitedInvitation)
    ));

    // Disabled: refused, bound or not.
    people.update_user("Alice", None, Some(true)).await.unwrap();
    assert!(matches!(
        people
            .sso_user(&claims("sub-alice", None, false), strict, None)
            .await,
        Err(SsoRefused::Disabled)
    ));
    store.close().await.unwrap();
}

async fn an_sso_login_token_expires(fx: &Fixture) {
    let store = Store::open(&fx.target).await.unwrap();
    let people = People::new(store.clone());
    let dana = people
        .create_user("Dana", Role::Operator, None)
        .await
        .unwrap();
    let live = people
        .login_token(&dana, "test", Duration::from_secs(3600))
        .await
        .unwrap();
    let grant = people
        .check_token(&live.token)
        .await
        .unwrap()
        .expect("a live login");
    assert_eq!(
        (grant.user_name.as_str(), grant.role),
        ("Dana", Role::Operator)
    );
    assert!(live.info.expires_at.is_some());
    let gone = people
        .login_token(&dana, "test", Duration::ZERO)
        .await
        .unwrap();
    assert!(people.check_token(&gone.token).await.unwrap().is_none());
    // Logging out ends an SSO login on the server; an API token used as a cookie stays.
    let api = people.create_token("Dana", None, None, None).await.unwrap();
    assert!(!people.end_sso_login(&api.token).await.unwrap());
    assert!(people.check_token(&api.token).await.unwrap().is_some());
    assert!(people.end_sso_login(&live.token).await.unwrap());
    assert!(people.check_token(&live.token).await.unwrap().is_none());
    store.close().await.unwrap();
}

scenarios!(
    sign_ins_under_way_are_taken_once,
    who_a_sign_in_is,
    an_sso_login_token_expires,
);
