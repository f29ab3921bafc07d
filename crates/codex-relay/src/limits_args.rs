//! The flags that set every session's default limits (`--turn-deadline`, `--idle-timeout`,
//! `--interrupt-grace`, `--session-budget`, `--prices`) and the rate-limit queue's bounds
//! (`--rate-limit-queue`, `--rate-limit-wait`), shared by every serving subcommand;
//! a session or a message sets its own over them (docs/AGENTS.md).

use std::time::Duration;

use codex_relay_core::RelayConfig;
use codex_relay_core::limits::{Budget, Prices, TurnLimits};
use serde::de::DeserializeOwned;

#[derive(clap::Args, Debug, Clone, Default)]
pub struct LimitsArgs {
    /// Every turn is interrupted this long after it started (e.g. `15m`, `90s`), unless its
    /// session or message sets another. Default: none.
    #[arg(long, value_name = "AGE", env = "CODEX_RELAY_TURN_DEADLINE", value_parser = parse_duration)]
    pub turn_deadline: Option<Duration>,
    /// A turn with no output (items, text, command output) for this long is interrupted (e.g.
    /// `5m`); waiting for an approval does not count. Default: none.
    #[arg(long, value_name = "AGE", env = "CODEX_RELAY_IDLE_TIMEOUT", value_parser = parse_duration)]
    pub idle_timeout: Option<Duration>,
    /// How long an interrupted turn may take to stop before the relay ends it itself.
    #[arg(long, value_name = "AGE", env = "CODEX_RELAY_INTERRUPT_GRACE", value_parser = parse_duration)]
    pub interrupt_grace: Option<Duration>,
    /// The budget of a session that sets none, as `key=value` pairs separated by commas:
    /// inputTokens, cachedInputTokens, outputTokens, reasoningOutputTokens, totalTokens,
    /// turns, wallSeconds, costUsd (e.g. `totalTokens=2000000,turns=50`).
    #[arg(long, value_name = "LIMITS", env = "CODEX_RELAY_SESSION_BUDGET", value_parser = parse_pairs::<Budget>)]
    pub session_budget: Option<Budget>,
    /// The price table of the estimated cost, in US dollars per million tokens:
    /// `input=1.25,cachedInput=0.125,output=10`.
    #[arg(long, value_name = "PRICES", env = "CODEX_RELAY_PRICES", value_parser = parse_pairs::<Prices>)]
    pub prices: Option<Prices>,
    /// While a rate limit is hit, at most this many new turns wait in the queue (over all
    /// sessions); one more is refused (`rate_limited`). Default 64.
    #[arg(long, value_name = "N", env = "CODEX_RELAY_RATE_LIMIT_QUEUE")]
    pub rate_limit_queue: Option<usize>,
    /// How long a queued turn may wait for a rate limit to clear (e.g. `15m`); a limit that
    /// resets later refuses the turn at once. Default 15m.
    #[arg(long, value_name = "AGE", env = "CODEX_RELAY_RATE_LIMIT_WAIT", value_parser = parse_duration)]
    pub rate_limit_wait: Option<Duration>,
}

impl LimitsArgs {
    pub fn apply(&self, config: &mut RelayConfig) {
        let ms = |d: Option<Duration>| d.filter(|d| !d.is_zero()).map(|d| d.as_millis() as u64);
        config.turn_limits = TurnLimits {
            deadline_ms: ms(self.turn_deadline),
            idle_ms: ms(self.idle_timeout),
            grace_ms: ms(self.interrupt_grace),
        };
        config.budget = self.session_budget.unwrap_or_default();
        config.prices = self.prices;
        if let Some(n) = self.rate_limit_queue {
            config.turn_queue.max_queued = n;
        }
        if let Some(wait) = self.rate_limit_wait {
            config.turn_queue.max_wait_ms = wait.as_millis() as u64;
        }
    }
}

/// `90s`, `15m`, `2h`, or a number of seconds.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if let Ok(secs) = t.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    if let Some(s) = t.strip_suffix("ms").and_then(|n| n.parse::<u64>().ok()) {
        return Ok(Duration::from_millis(s));
    }
    if let Some(s) = t.strip_suffix('s').and_then(|n| n.parse::<u64>().ok()) {
        return Ok(Duration::from_secs(s));
    }
    codex_relay::Retention::parse_age(t)
        .map(Option::unwrap_or_default)
        .map_err(|_| format!("{text:?} is not a duration; give e.g. 90s, 15m or 2h"))
}

/// `key=value,key=value` as the JSON object `{key: value}` read into `T`.
fn parse_pairs<T: DeserializeOwned + serde::Serialize>(text: &str) -> Result<T, String> {
    let mut map = serde_json::Map::new();
    for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| format!("{pair:?} is not key=value"))?;
        let n: f64 = v
            .trim()
            .parse()
            .map_err(|_| format!("{k}: {v:?} is not a number"))?;
        if !n.is_finite() || n < 0.0 {
            return Err(format!("{k}: must be a number, 0 or more"));
        }
        let value = if n.fract() == 0.0 && !k.trim().eq_ignore_ascii_case("costUsd") {
            serde_json::json!(n as i64)
        } else {
            serde_json::json!(n)
        };
        map.insert(k.trim().to_owned(), value);
    }
    let object = serde_json::Value::Object(map);
    // Unknown keys are refused rather than ignored.
    let back: T = serde_json::from_value(object.clone()).map_err(|e| e.to_string())?;
    let known = serde_json::to_value(&back).map_err(|e| e.to_string())?;
    for key in object.as_object().into_iter().flatten().map(|(k, _)| k) {
        if known.get(key).is_none() {
            return Err(format!("unknown key {key:?}"));
        }
    }
    Ok(back)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_read_into_a_budget_and_prices() {
        let b: Budget = parse_pairs("totalTokens=2000000, turns=50,costUsd=2.5").unwrap();
        assert_eq!(b.total_tokens, Some(2_000_000));
        assert_eq!(b.turns, Some(50));
        assert_eq!(b.cost_usd, Some(2.5));
        assert!(
            parse_pairs::<Budget>("tokens=5")
                .unwrap_err()
                .contains("unknown key")
        );
        let p: Prices = parse_pairs("input=1.25,cachedInput=0.125,output=10").unwrap();
        assert_eq!(p.output, 10.0);
        assert_eq!(parse_duration("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("15m").unwrap(), Duration::from_secs(900));
        assert!(parse_duration("soon").is_err());
    }
}
