//! Which Codex config keys a client may set while the operator limits the sandbox or the
//! approval policy: an allow-list of keys that only tune the model, never a deny-list.
//!
//! Codex's config can run programs (`notify` runs one unsandboxed at every turn's end;
//! `mcp_servers` starts servers outside the sandbox; hooks, `shell_environment_policy`,
//! `model_providers` with an `env_key` or a command...), widen the sandbox
//! (`sandbox_workspace_write.writable_roots` / `network_access`, `permissions`,
//! `default_permissions`), or hand the human's approvals to someone else
//! (`approvals_reviewer`). New keys of that kind arrive with most Codex releases, so a list
//! of what to refuse would go stale without anyone noticing; a list of what to accept only
//! ever refuses too much, and says so.

use serde_json::Value;

/// Keys a client may set (with a plain string, number or boolean) under limits: none can run
/// anything, write anywhere or change who approves. `sandbox_mode` and `approval_policy` are
/// accepted here and checked against the limits like the request's own options.
pub const ALLOWED: &[&str] = &[
    "model",
    "model_provider",
    "model_reasoning_effort",
    "model_reasoning_summary",
    "model_verbosity",
    "model_context_window",
    "model_auto_compact_token_limit",
    "plan_mode_reasoning_effort",
    "service_tier",
    "personality",
    "hide_agent_reasoning",
    "show_raw_agent_reasoning",
    "sandbox_mode",
    "approval_policy",
];

/// Why `key = value` is refused under limits, if it is. `from` says where it came from
/// ("config override", "profile \"fast\" (…/fast.config.toml)").
pub fn refused(key: &str, value: &Value, from: &str, limits: &str) -> Option<String> {
    if !ALLOWED.contains(&key) {
        return Some(format!(
            "{from} {key:?} is not accepted while this relay limits sessions ({limits}): only keys that tune the model are ({}); others can run programs outside the sandbox, widen it, or change who approves",
            ALLOWED.join(", ")
        ));
    }
    if !(value.is_string() || value.is_number() || value.is_boolean()) {
        return Some(format!(
            "{from} {key:?} must be a plain value (a string, number or boolean) while this relay limits sessions ({limits})"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_plain_model_tuning_keys_pass() {
        let limits = "sandbox up to workspace-write";
        assert_eq!(
            refused("model_reasoning_effort", &json!("low"), "config", limits),
            None
        );
        assert_eq!(
            refused("hide_agent_reasoning", &json!(true), "config", limits),
            None
        );
        for key in [
            "notify",
            "mcp_servers",
            "mcp_servers.x.command",
            "hooks",
            "shell_environment_policy",
            "sandbox_workspace_write",
            "sandbox_workspace_write.writable_roots",
            "sandbox_workspace_write.network_access",
            "permissions",
            "default_permissions",
            "approvals_reviewer",
            "model_providers",
            "profile",
            "profiles",
            "features",
            "tools",
            "web_search",
            "experimental_instructions_file",
            "zsh_path",
            " model",
            "Model",
        ] {
            let why = refused(key, &json!(true), "config override", limits).expect(key);
            assert!(why.contains(key.trim()) && why.contains(limits), "{why}");
        }
        let why = refused("model", &json!({"a": 1}), "config override", limits).unwrap();
        assert!(why.contains("plain value"), "{why}");
    }
}
