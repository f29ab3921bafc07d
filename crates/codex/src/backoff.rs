//! How long to wait before trying again: exponential backoff with jitter, so that callers
//! refused together (an overloaded Codex) do not come back together.

use std::time::Duration;

/// Exponential backoff with ±50% jitter, capped.
pub(crate) fn backoff(attempt: u32, base: Duration, max: Duration) -> Duration {
    let exp = base.saturating_mul(1u32 << attempt.min(16).saturating_sub(1));
    let capped = exp.min(max);
    let jitter = 0.5 + (random_u64() % 1000) as f64 / 1000.0;
    capped.mul_f64(jitter)
}

fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_is_capped_and_jittered() {
        let base = Duration::from_millis(100);
        let max = Duration::from_secs(2);
        for attempt in 1..10 {
            let d = backoff(attempt, base, max);
            let nominal = base.saturating_mul(1 << (attempt - 1)).min(max);
            assert!(
                d >= nominal.mul_f64(0.5) && d <= nominal.mul_f64(1.5),
                "{attempt}: {d:?}"
            );
        }
    }
}
