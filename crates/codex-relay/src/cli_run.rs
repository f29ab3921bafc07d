//! `codex-relay run`: one prompt, one turn, the final message (or parsed JSON) on stdout, and an exit code per error phase (docs/RUN.md).

use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use codex_relay::{Approval, Client, Error, RunEvent, SessionOptions, make_strict};
use futures::StreamExt;
use serde_json::Value;

use crate::engine::{EngineArgs, shutdown_signal};
use crate::progress::Progress;

/// Exit code when the run could not be attempted (bad flags, unreadable files, no terminal
/// for `--approve ask`); clap's own usage errors exit 2.
pub const EXIT_LOCAL: u8 = 1;
/// Exit code after SIGINT/SIGTERM (the turn is interrupted, Codex stopped).
pub const EXIT_SIGNAL: u8 = 130;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ApproveMode {
    /// Codex never asks; commands run inside the sandbox.
    Never,
    /// Codex asks; everything is approved.
    Auto,
    /// Codex asks; you answer on the terminal (refused without one).
    Ask,
    /// Codex asks; everything is declined (the model is told).
    Deny,
}

#[derive(clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    engine: EngineArgs,
    /// The prompt; `-` reads it from stdin. With `--review custom`, the review's
    /// instructions; else not needed with `--review`.
    #[arg(required_unless_present = "review")]
    prompt: Option<String>,
    /// Review instead of prompting, and print the findings as JSON: `uncommitted` (the
    /// default: staged, unstaged and untracked changes), `base:BRANCH` (the current branch
    /// against BRANCH), `commit:SHA`, or `custom` (the PROMPT says what to review).
    #[arg(long, value_name = "TARGET", num_args = 0..=1, default_missing_value = "uncommitted",
        value_parser = parse_review)]
    review: Option<ReviewArg>,
    /// A JSON schema file: the final message must match it (made strict-compatible); the
    /// parsed JSON is printed.
    #[arg(long, value_name = "FILE")]
    output_schema: Option<PathBuf>,
    /// Stream the session's events (envelopes, docs/EVENTS.md) as JSON lines on stdout.
    #[arg(long)]
    json: bool,
    /// The directory Codex works in (default: the current directory).
    #[arg(long, value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// Who approves what Codex asks to do.
    #[arg(long, value_enum, default_value = "never")]
    approve: ApproveMode,
    /// A deadline for the run, e.g. `90s`, `5m`, `1h`, `1500ms` (plain numbers are seconds).
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    timeout: Option<Duration>,
    /// The model (default: Codex's config).
    #[arg(long, value_name = "M")]
    model: Option<String>,
    /// The reasoning effort: `low`, `medium`, `high`, ... (default: Codex's config).
    #[arg(long, value_name = "E")]
    effort: Option<String>,
    /// A Codex config override `key=value` for this session (repeatable); the value is read
    /// as JSON when it parses (numbers, true/false, "quoted"), else as a string.
    #[arg(short = 'c', value_name = "KEY=VALUE")]
    config: Vec<String>,
    /// Continue this session (a session id from an earlier run, MCP, HTTP, or any Codex
    /// thread id) instead of starting a new one.
    #[arg(long, value_name = "ID")]
    resume: Option<String>,
    #[command(flatten)]
    workspace: crate::cli_workspace::WorkspaceArgs,
    /// Work in a git worktree of the repository at --cwd, made from --base on a new branch;
    /// when the run ends its work is committed to that branch and the worktree removed.
    #[arg(long)]
    worktree: bool,
    /// With --worktree: the branch or commit to start from (default: the current branch).
    #[arg(long, value_name = "REF", requires = "worktree")]
    base: Option<String>,
    /// With --worktree: the new branch's name (default: codex/<id>).
    #[arg(long, value_name = "NAME", requires = "worktree")]
    branch: Option<String>,
    /// With --worktree: leave the worktree in place when the run ends.
    #[arg(long, requires = "worktree")]
    keep_worktree: bool,
    /// Run against a built-in scripted model (no OpenAI account), in the demo's workspace
    /// unless --cwd says otherwise; kept in `demo/` in the data directory.
    #[arg(long)]
    demo: bool,
}

/// What `--review` reviews.
#[derive(Clone, Debug, PartialEq)]
pub enum ReviewArg {
    Target(codex_relay::ReviewTarget),
    /// Instructions from the prompt.
    Custom,
}

/// `uncommitted`, `base:BRANCH`, `commit:SHA` or `custom`.
pub fn parse_review(s: &str) -> Result<ReviewArg, String> {
    use codex_relay::ReviewTarget as T;
    let nonempty = |v: &str, what: &str| {
        let v = v.trim();
        if v.is_empty() {
            Err(format!("--review {s:?}: the {what} is empty"))
        } else {
            Ok(v.to_owned())
        }
    };
    match s.split_once(':') {
        None if s == "uncommitted" => Ok(ReviewArg::Target(T::UncommittedChanges)),
        None if s == "custom" => Ok(ReviewArg::Custom),
        Some(("base", branch)) => Ok(ReviewArg::Target(T::BaseBranch {
            branch: nonempty(branch, "branch")?,
        })),
        Some(("commit", sha)) => Ok(ReviewArg::Target(T::Commit {
            sha: nonempty(sha, "commit")?,
            title: None,
        })),
        _ => Err(format!(
            "--review {s:?}: use uncommitted, base:BRANCH, commit:SHA or custom"
        )),
    }
}

/// `90s`, `5m`, `1h`, `1500ms`, or plain seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (try 90s, 5m, 1h, 1500ms)"))?;
    let secs = match unit.trim() {
        "" | "s" | "sec" | "secs" => n,
        "ms" => n / 1000.0,
        "m" | "min" | "mins" => n * 60.0,
        "h" | "hr" | "hours" => n * 3600.0,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {s:?} (use ms, s, m or h)"
            ));
        }
    };
    if !secs.is_finite() || secs <= 0.0 {
        return Err(format!("{s:?}: the timeout must be positive"));
    }
    Ok(Duration::from_secs_f64(secs))
}

fn read_prompt(arg: &str) -> anyhow::Result<String> {
    if arg != "-" {
        return Ok(arg.to_owned());
    }
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .context("reading the prompt from stdin")?;
    if text.trim().is_empty() {
        bail!("the prompt read from stdin is empty");
    }
    Ok(text)
}

fn read_schema(path: &PathBuf) -> anyhow::Result<Value> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the output schema {}", path.display()))?;
    let mut schema: Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    make_strict(&mut schema).map_err(|e| anyhow::anyhow!("{}: {}", path.display(), e.message()))?;
    Ok(schema)
}

fn options(
    args: &RunArgs,
    approval: Approval,
    demo: Option<&crate::demo::Demo>,
) -> anyhow::Result<SessionOptions> {
    let cwd = match (&args.cwd, demo) {
        (Some(dir), _) => dir
            .canonicalize()
            .with_context(|| format!("--cwd {}", dir.display()))?,
        (None, Some(demo)) => demo.workspace(),
        (None, None) => std::env::current_dir().context("the current directory")?,
    };
    let mut opts = SessionOptions::new().approval(approval);
    // A resumed session stays where it was (or, isolated, gets a fresh copy of its mounts)
    // unless --cwd or --mount says otherwise.
    if args.resume.is_none() || args.cwd.is_some() {
        opts = opts.cwd(cwd.display().to_string());
    }
    if let Some(spec) = args.workspace.spec(&cwd)? {
        opts = opts.workspace(spec);
    }
    if let Some(m) = &args.model {
        opts = opts.model(m);
    }
    if let Some(e) = &args.effort {
        opts = opts.effort(e);
    }
    for kv in &args.config {
        let Some((k, v)) = kv.split_once('=') else {
            bail!("-c {kv:?}: expected key=value");
        };
        let value = serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.to_owned()));
        opts = opts.config(k.trim(), value);
    }
    if let Some(t) = args.timeout {
        opts = opts.deadline(t);
    }
    if args.worktree {
        opts = opts.worktree(codex_relay_core::worktree::WorktreeSpec {
            repo: cwd.display().to_string(),
            base: args.base.clone(),
            branch: args.branch.clone(),
            keep: args.keep_worktree,
            ..Default::default()
        });
    }
    Ok(opts)
}

pub async fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    // Everything that can fail locally fails before Codex starts.
    let approval = match args.approve {
        ApproveMode::Never => Approval::Never,
        ApproveMode::Auto => Approval::Auto,
        ApproveMode::Deny => Approval::Deny,
        ApproveMode::Ask => crate::ask::terminal_approval()?,
    };
    let prompt = match &args.prompt {
        Some(p) => read_prompt(p)?,
        None => String::new(),
    };
    let review = match &args.review {
        None => None,
        Some(ReviewArg::Target(t)) => Some(t.clone()),
        Some(ReviewArg::Custom) if prompt.trim().is_empty() => {
            bail!("--review custom: the PROMPT says what to review, and it is empty")
        }
        Some(ReviewArg::Custom) => Some(codex_relay::ReviewTarget::Custom {
            instructions: prompt.clone(),
        }),
    };
    if review.is_some() && args.output_schema.is_some() {
        bail!("--review prints the review's findings as JSON; it takes no --output-schema");
    }
    let schema = args.output_schema.as_ref().map(read_schema).transpose()?;
    let (relay, demo) = if args.demo {
        let (relay, demo) =
            crate::demo::open(&args.engine, crate::demo::Questions::NotAsked).await?;
        eprintln!("{}", demo.describe());
        (relay, Some(demo))
    } else {
        (args.engine.open().await?, None)
    };
    let opts = options(&args, approval, demo.as_ref())?;
    let client = Client::from_relay(relay);
    let outcome = tokio::select! {
        r = run_once(&client, &args, opts, prompt, schema, review) => Ok(r),
        _ = shutdown_signal() => Err(Interrupted),
    };
    if !matches!(outcome, Ok(Ok(()))) {
        // The running turn is interrupted first, so the stored session records it.
        for s in client.relay().sessions() {
            if s.status.is_running() {
                let relay = client.relay().clone();
                let stop = async move { relay.interrupt(&s.session_id).await };
                let _ = tokio::time::timeout(Duration::from_secs(2), stop).await;
            }
        }
    }
    client.shutdown().await;
    drop(demo);
    Ok(match outcome {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => ExitCode::from(e.phase().exit_code()),
        Err(Interrupted) => {
            eprintln!("codex-relay: interrupted; Codex stopped");
            ExitCode::from(EXIT_SIGNAL)
        }
    })
}

/// SIGINT/SIGTERM arrived during the run.
struct Interrupted;

/// Runs the turn and prints what it gives; an error is reported on stderr and returned for
/// its exit code. The session (and an isolated copy with it) is dropped on return.
async fn run_once(
    client: &Client,
    args: &RunArgs,
    opts: SessionOptions,
    prompt: String,
    schema: Option<Value>,
    review: Option<codex_relay::ReviewTarget>,
) -> Result<(), Error> {
    let session = match &args.resume {
        Some(id) => client.resume(id, opts).await,
        None => client.session(opts).await,
    };
    let session = session.map_err(report)?;
    eprintln!("codex-relay: session {}", session.id());
    if let Some(ws) = session.workspace() {
        eprintln!(
            "codex-relay: workspace {} (an isolated copy, removed when the run ends)",
            ws.display()
        );
    }
    let worktree = session.snapshot().worktree;
    if let Some(w) = &worktree {
        eprintln!(
            "codex-relay: worktree {} on branch {} (from {})",
            w.path.as_deref().unwrap_or_default(),
            w.branch.as_deref().unwrap_or_default(),
            w.base.as_deref().unwrap_or_default()
        );
    }
    let mut p = session.prompt(prompt);
    if let Some(s) = schema.clone() {
        p = p.output_schema(s);
    }
    let reviewing = review.is_some();
    if let Some(t) = review {
        p = p.review(t);
    }
    let mut stream = p.stream();
    let mut progress = Progress::new(std::io::stderr().is_terminal());
    while let Some(event) = stream.next().await {
        match event {
            RunEvent::Event(env) => {
                progress.event(&env);
                if args.json {
                    let line = serde_json::to_string(&*env).unwrap_or_default();
                    let mut out = std::io::stdout().lock();
                    let _ = writeln!(out, "{line}");
                    let _ = out.flush();
                }
            }
            RunEvent::Delta(d) => progress.delta(&d),
        }
    }
    progress.clear();
    let result = stream.finish().await.map_err(report)?;
    if reviewing {
        // The findings, structured (the review as Codex rendered it is on stderr's progress).
        let review = result.review().unwrap_or_default();
        if !args.json {
            println!("{}", serde_json::to_string(&review).unwrap_or_default());
        }
    } else if schema.is_some() {
        match result.parse::<Value>() {
            Ok(v) if !args.json => println!("{v}"),
            Ok(_) => {}
            Err(e) => return Err(report(e)),
        }
    } else if !args.json {
        println!("{}", result.text);
    }
    if let Some(w) = &worktree {
        let diff = session.worktree_diff().await.map_err(report)?;
        for f in &diff.files {
            eprintln!("codex-relay:   {} {}", f.status, f.path);
        }
        // Closing commits the worktree's work to its branch and removes it (unless kept).
        client
            .relay()
            .close(session.id(), false)
            .await
            .map_err(|e| report(e.into()))?;
        eprintln!(
            "codex-relay: {} file(s) changed; on branch {}{}",
            diff.files.len(),
            w.branch.as_deref().unwrap_or_default(),
            if w.keep { " (worktree kept)" } else { "" }
        );
    }
    Ok(())
}

/// Reports `e` on stderr, with Codex's raw error info, stderr tail and raw text when known.
fn report(e: Error) -> Error {
    eprintln!("codex-relay: {e}");
    if let Some(info) = e.codex_error_info() {
        eprintln!("codex-relay: codexErrorInfo: {info}");
    }
    if let Some(raw) = e.raw_text() {
        eprintln!("codex-relay: the model's answer was:\n{raw}");
    }
    if let Some(tail) = e.stderr_tail() {
        eprintln!("codex-relay: Codex's stderr (last lines):\n{tail}");
    }
    e
}

/// The exit codes, for `--help` and docs/RUN.md.
pub const EXIT_CODES: &str = "exit codes: 0 ok, 1 could not start the run (flags, files, no terminal for --approve ask), 2 usage, 3 request, 4 response, 5 tool, 6 budget, 7 codex, 130 interrupted";

#[cfg(test)]
mod tests {
    use super::*;
    use codex_relay::Phase;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("0").is_err());
        assert!(parse_duration("3d").is_err());
    }

    #[test]
    fn review_targets() {
        use codex_relay::ReviewTarget as T;
        assert_eq!(
            parse_review("uncommitted"),
            Ok(ReviewArg::Target(T::UncommittedChanges))
        );
        assert_eq!(
            parse_review("base:main"),
            Ok(ReviewArg::Target(T::BaseBranch {
                branch: "main".into()
            }))
        );
        assert_eq!(
            parse_review("commit:abc123"),
            Ok(ReviewArg::Target(T::Commit {
                sha: "abc123".into(),
                title: None
            }))
        );
        assert_eq!(parse_review("custom"), Ok(ReviewArg::Custom));
        assert!(
            parse_review("base:")
                .unwrap_err()
                .contains("branch is empty")
        );
        assert!(parse_review("everything").is_err());
    }

    #[test]
    fn exit_codes_follow_the_phases() {
        let codes: Vec<u8> = [
            Phase::Request,
            Phase::Response,
            Phase::Tool,
            Phase::Budget,
            Phase::Codex,
        ]
        .iter()
        .map(|p| p.exit_code())
        .collect();
        assert_eq!(codes, [3, 4, 5, 6, 7]);
        assert!(EXIT_CODES.contains("6 budget"));
    }
}
