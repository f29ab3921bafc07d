//! The integration tests of codex-relay (the library, `run`, and the binary's fronts over the real Codex), as one test binary.
//!
//! One module per scenario file in this directory (a test's name is `<file>::<test>`, so
//! `cargo test -p <crate> --test all <file>` runs one file); the shared helpers are modules
//! beside them, so that a helper no test uses is dead code.

mod brake_support;
mod cluster_support;
mod common;
mod http_support;
mod legacy_support;
mod library_support;

mod agent_controls;
mod attach_security;
mod attach_serve;
mod brake;
mod browser;
mod cluster;
mod cluster_chaos;
mod cluster_faults;
mod cluster_knobs;
mod cluster_links;
mod cluster_notify;
mod cluster_outages;
mod cluster_rules;
mod codex_faults;
mod codex_rule_option;
mod conformance;
mod demo_session;
mod doctor;
mod examples;
mod fronts_auth;
mod http_abuse;
mod http_answer_links;
mod http_api;
mod http_deliveries;
mod http_limits;
mod http_race;
mod http_retention;
mod http_rules;
mod http_security;
mod http_store_faults;
mod http_subagents;
mod legacy_mcp;
mod library;
mod library_questions;
mod library_workspace;
mod mcp_clients;
mod mcp_contract;
mod mcp_failures;
mod mcp_knobs;
mod mcp_long_poll;
mod mcp_options;
mod mcp_rust_client;
mod mcp_stdin_not_a_pipe;
mod mcp_subagents;
mod newcomer;
mod npm_package;
mod npm_package_exits;
mod one_door;
mod ordinary_user;
mod people;
mod rate_limits;
mod rules_notify_knobs;
mod rules_sandbox;
mod run_cli;
mod secrets_in_environ;
mod secure_by_default;
mod self_approval;
mod serve_stderr_closed;
mod slowloris;
mod sso;
mod start_limits_config;
mod start_policy;
mod thread_fronts;
mod ui_serving;
mod worktree;
