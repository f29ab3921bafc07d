//! Wire fixtures the fronts' snapshot tests share: pending requests of every kind and their
//! resolutions, in the JSON shape the store keeps (and every version must keep reading).

/// Pending requests, one or more per kind (a sub-agent's among them), as stored.
pub const PENDING: &str = include_str!("../fixtures/pending.json");

/// Resolutions: every decision, fronts and the relay's own resolvers.
pub const RESOLUTIONS: &str = include_str!("../fixtures/resolutions.json");

/// The pending fixtures as JSON values.
pub fn pending() -> Vec<serde_json::Value> {
    serde_json::from_str(PENDING).expect("the pending fixtures are JSON")
}

/// The resolution fixtures as JSON values.
pub fn resolutions() -> Vec<serde_json::Value> {
    serde_json::from_str(RESOLUTIONS).expect("the resolution fixtures are JSON")
}
