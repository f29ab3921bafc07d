//! What bounds a session's work: a turn's deadline and idle watchdog ([`TurnLimits`]), the
//! session's budget ([`Budget`]) against what it spent ([`Spent`], priced by [`Prices`]), and
//! the typed reason a turn was stopped ([`StopReason`]). The guard (`guard.rs`) enforces them.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::event::Usage;

/// Limits of one turn; unset values fall back to the session's, then the relay's defaults.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", default)]
pub struct TurnLimits {
    /// The turn is interrupted this long after it started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<u64>,
    /// The turn is interrupted after this long with no output (items, text or command
    /// output); time spent waiting for an answer to a request does not count.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_ms: Option<u64>,
    /// How long Codex gets to end the turn once interrupted before the relay ends it itself
    /// (see [`crate::control::Stopped`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grace_ms: Option<u64>,
}

/// How long Codex gets to end an interrupted turn unless told otherwise.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(10);

impl TurnLimits {
    /// These limits, with what they leave unset taken from `fallback`.
    pub fn or(self, fallback: TurnLimits) -> TurnLimits {
        TurnLimits {
            deadline_ms: self.deadline_ms.or(fallback.deadline_ms),
            idle_ms: self.idle_ms.or(fallback.idle_ms),
            grace_ms: self.grace_ms.or(fallback.grace_ms),
        }
    }

    pub fn deadline(&self) -> Option<Duration> {
        self.deadline_ms.map(Duration::from_millis)
    }

    pub fn idle(&self) -> Option<Duration> {
        self.idle_ms.map(Duration::from_millis)
    }

    pub fn grace(&self) -> Duration {
        self.grace_ms.map_or(DEFAULT_GRACE, Duration::from_millis)
    }

    pub fn is_empty(&self) -> bool {
        self.deadline_ms.is_none() && self.idle_ms.is_none()
    }
}

/// One budget of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub enum BudgetKind {
    InputTokens,
    CachedInputTokens,
    OutputTokens,
    ReasoningOutputTokens,
    TotalTokens,
    Turns,
    WallSeconds,
    CostUsd,
}

impl BudgetKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BudgetKind::InputTokens => "inputTokens",
            BudgetKind::CachedInputTokens => "cachedInputTokens",
            BudgetKind::OutputTokens => "outputTokens",
            BudgetKind::ReasoningOutputTokens => "reasoningOutputTokens",
            BudgetKind::TotalTokens => "totalTokens",
            BudgetKind::Turns => "turns",
            BudgetKind::WallSeconds => "wallSeconds",
            BudgetKind::CostUsd => "costUsd",
        }
    }
}

/// A session's budget: each limit is what the session may spend over its life (every turn
/// summed); `None` is no limit. Reaching one interrupts the running turn and refuses new turns
/// until it is raised.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", default)]
pub struct Budget {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_output_tokens: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_tokens: Option<i64>,
    /// Turns started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turns: Option<u64>,
    /// Time spent running turns, summed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wall_seconds: Option<u64>,
    /// The estimated cost by the price table ([`Prices`]); without one it never counts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

impl Budget {
    pub fn is_empty(&self) -> bool {
        *self == Budget::default()
    }

    /// This budget with the limits `change` sets replaced (the others kept).
    pub fn merged(self, change: Budget) -> Budget {
        Budget {
            input_tokens: change.input_tokens.or(self.input_tokens),
            cached_input_tokens: change.cached_input_tokens.or(self.cached_input_tokens),
            output_tokens: change.output_tokens.or(self.output_tokens),
            reasoning_output_tokens: change
                .reasoning_output_tokens
                .or(self.reasoning_output_tokens),
            total_tokens: change.total_tokens.or(self.total_tokens),
            turns: change.turns.or(self.turns),
            wall_seconds: change.wall_seconds.or(self.wall_seconds),
            cost_usd: change.cost_usd.or(self.cost_usd),
        }
    }

    /// Checks it for negative or non-finite limits.
    pub fn check(&self) -> Result<(), String> {
        let tokens = [
            ("inputTokens", self.input_tokens),
            ("cachedInputTokens", self.cached_input_tokens),
            ("outputTokens", self.output_tokens),
            ("reasoningOutputTokens", self.reasoning_output_tokens),
            ("totalTokens", self.total_tokens),
        ];
        for (name, v) in tokens {
            if v.is_some_and(|v| v < 0) {
                return Err(format!("budget {name} must be 0 or more"));
            }
        }
        if self.cost_usd.is_some_and(|c| !c.is_finite() || c < 0.0) {
            return Err("budget costUsd must be a number, 0 or more".into());
        }
        Ok(())
    }

    /// The first limit `spent` has reached (`turns` only when `with_turns`: reaching it
    /// refuses the next turn but does not stop the running one), with what was used.
    pub fn reached(&self, spent: &Spent, with_turns: bool) -> Option<StopReason> {
        let u = &spent.usage;
        let tokens = [
            (BudgetKind::InputTokens, self.input_tokens, u.input_tokens),
            (
                BudgetKind::CachedInputTokens,
                self.cached_input_tokens,
                u.cached_input_tokens,
            ),
            (
                BudgetKind::OutputTokens,
                self.output_tokens,
                u.output_tokens,
            ),
            (
                BudgetKind::ReasoningOutputTokens,
                self.reasoning_output_tokens,
                u.reasoning_output_tokens,
            ),
            (BudgetKind::TotalTokens, self.total_tokens, u.total_tokens),
        ];
        for (kind, limit, used) in tokens {
            if let Some(limit) = limit
                && used >= limit
            {
                return Some(StopReason::budget(kind, limit as f64, used as f64));
            }
        }
        if let (Some(limit), Some(cost)) = (self.cost_usd, spent.cost_usd)
            && cost >= limit
        {
            return Some(StopReason::budget(BudgetKind::CostUsd, limit, cost));
        }
        if let Some(limit) = self.wall_seconds
            && spent.wall_ms >= limit.saturating_mul(1000)
        {
            return Some(StopReason::budget(
                BudgetKind::WallSeconds,
                limit as f64,
                spent.wall_ms as f64 / 1000.0,
            ));
        }
        if with_turns
            && let Some(limit) = self.turns
            && spent.turns >= limit
        {
            return Some(StopReason::budget(
                BudgetKind::Turns,
                limit as f64,
                spent.turns as f64,
            ));
        }
        None
    }
}

/// Prices in US dollars per million tokens, for the estimated cost. `input` is charged for
/// the input tokens that were not cached, `cachedInput` for the cached ones (Codex counts them
/// inside the input tokens), `output` for the output tokens (reasoning included, as Codex
/// counts them inside the output tokens).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", default)]
pub struct Prices {
    pub input: f64,
    pub cached_input: f64,
    pub output: f64,
}

impl Prices {
    pub fn cost(&self, u: &Usage) -> f64 {
        let fresh = (u.input_tokens - u.cached_input_tokens).max(0) as f64;
        (fresh * self.input
            + u.cached_input_tokens as f64 * self.cached_input
            + u.output_tokens as f64 * self.output)
            / 1_000_000.0
    }

    pub fn check(&self) -> Result<(), String> {
        if [self.input, self.cached_input, self.output]
            .iter()
            .any(|p| !p.is_finite() || *p < 0.0)
        {
            return Err("prices must be numbers, 0 or more (US dollars per million tokens)".into());
        }
        Ok(())
    }
}

/// What a session spent over its life: token usage summed over every model request of every
/// turn, turns started, time spent running turns, and the estimated cost (with a price table).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", default)]
pub struct Spent {
    pub usage: Usage,
    pub turns: u64,
    pub wall_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

/// Why the relay stopped a turn (on the turn's `turn-end` event, the session's status and
/// every front's result).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "reason", rename_all = "camelCase")]
pub enum StopReason {
    /// The turn ran past its deadline.
    #[serde(rename_all = "camelCase")]
    Deadline { limit_ms: u64 },
    /// The turn produced no output for this long.
    #[serde(rename_all = "camelCase")]
    Idle { idle_ms: u64 },
    /// The session reached one of its budgets.
    #[serde(rename_all = "camelCase")]
    Budget {
        budget: BudgetKind,
        limit: f64,
        used: f64,
    },
}

impl StopReason {
    pub(crate) fn budget(budget: BudgetKind, limit: f64, used: f64) -> Self {
        StopReason::Budget {
            budget,
            limit,
            used,
        }
    }

    /// A sentence for people (and models) that says what stopped the turn.
    pub fn message(&self) -> String {
        match self {
            StopReason::Deadline { limit_ms } => format!(
                "the turn's deadline ({}) passed; the relay interrupted it",
                secs(*limit_ms)
            ),
            StopReason::Idle { idle_ms } => format!(
                "the turn produced no output for {}; the idle watchdog interrupted it",
                secs(*idle_ms)
            ),
            StopReason::Budget {
                budget,
                limit,
                used,
            } => format!(
                "the session's {} budget ({limit}) is used up ({used} spent); raise it to continue",
                budget.as_str()
            ),
        }
    }
}

fn secs(ms: u64) -> String {
    if ms.is_multiple_of(1000) {
        format!("{} s", ms / 1000)
    } else {
        format!("{:.3} s", ms as f64 / 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_budget_names_the_first_limit_reached() {
        let budget = Budget {
            output_tokens: Some(100),
            turns: Some(2),
            ..Default::default()
        };
        let mut spent = Spent {
            turns: 2,
            ..Default::default()
        };
        assert_eq!(budget.reached(&spent, false), None);
        assert_eq!(
            budget.reached(&spent, true),
            Some(StopReason::budget(BudgetKind::Turns, 2.0, 2.0))
        );
        spent.usage.output_tokens = 100;
        let reason = budget.reached(&spent, false).unwrap();
        assert_eq!(
            serde_json::to_value(&reason).unwrap(),
            json!({"reason": "budget", "budget": "outputTokens", "limit": 100.0, "used": 100.0})
        );
        assert!(reason.message().contains("outputTokens"), "{reason:?}");
        let raised = budget.merged(Budget {
            output_tokens: Some(1000),
            ..Default::default()
        });
        assert_eq!(raised.turns, Some(2));
        assert_eq!(raised.reached(&spent, false), None);
    }

    #[test]
    fn cost_charges_cached_input_apart() {
        let p = Prices {
            input: 2.0,
            cached_input: 0.5,
            output: 8.0,
        };
        let u = Usage {
            input_tokens: 1_000_000,
            cached_input_tokens: 500_000,
            output_tokens: 250_000,
            reasoning_output_tokens: 100_000,
            total_tokens: 1_250_000,
        };
        assert!((p.cost(&u) - (1.0 + 0.25 + 2.0)).abs() < 1e-9);
        assert!(Prices { input: -1.0, ..p }.check().is_err());
    }
}

/// A change to a session's limits: the budget limits it names (others kept), its turns'
/// limits and its price table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", default)]
pub struct LimitsChange {
    pub budget: Option<Budget>,
    pub limits: Option<TurnLimits>,
    pub prices: Option<Prices>,
}

impl LimitsChange {
    pub fn check(&self) -> Result<(), String> {
        if let Some(b) = &self.budget {
            b.check()?;
        }
        if let Some(p) = &self.prices {
            p.check()?;
        }
        Ok(())
    }
}

/// A session's limits and what it spent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct LimitsView {
    pub session_id: String,
    pub budget: Budget,
    pub limits: TurnLimits,
    pub prices: Option<Prices>,
    pub spent: Spent,
    /// The budget it reached (it starts no turn until that is raised).
    pub budget_reached: Option<StopReason>,
}
