//! The layers hold: crate dependencies point down only (`cargo metadata`: wire types, then the
//! Codex peer, then the engine, then the fronts, which never depend on one another, then the
//! binary); inside the engine, the ground floor imports nothing above it, the store builds on
//! it alone, only the placement names the cluster, and the session, broker and relay modules
//! form no cycle (all read from the sources' `crate::` paths). And each crate's integration
//! tests stay one binary.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

/// What each workspace crate may depend on (among the workspace's own crates).
fn allowed() -> BTreeMap<&'static str, &'static [&'static str]> {
    BTreeMap::from([
        ("codex-relay-protocol", &[][..]),
        ("codex-relay-codex", &["codex-relay-protocol"][..]),
        (
            "codex-relay-core",
            &["codex-relay-protocol", "codex-relay-codex"][..],
        ),
        (
            "codex-relay-mcp",
            &[
                "codex-relay-protocol",
                "codex-relay-codex",
                "codex-relay-core",
            ][..],
        ),
        (
            "codex-relay-http",
            &[
                "codex-relay-protocol",
                "codex-relay-codex",
                "codex-relay-core",
            ][..],
        ),
        (
            "codex-relay-legacy",
            &[
                "codex-relay-protocol",
                "codex-relay-codex",
                "codex-relay-core",
            ][..],
        ),
        // Notifications: an outgoing front over the engine.
        (
            "codex-relay-notify",
            &[
                "codex-relay-protocol",
                "codex-relay-codex",
                "codex-relay-core",
            ][..],
        ),
        ("codex-relay-testkit", &["codex-relay-protocol"][..]),
    ])
}

/// The workspace's own packages, as `cargo metadata` describes them.
fn metadata() -> Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn crate_dependencies_point_down_and_fronts_do_not_import_each_other() {
    let meta = metadata();
    let ours: BTreeSet<String> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect();
    let allowed = allowed();
    let mut checked = 0;
    for p in meta["packages"].as_array().unwrap() {
        let name = p["name"].as_str().unwrap();
        // Normal dependencies only: a test may use the test bed.
        let deps: BTreeSet<&str> = p["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["kind"].is_null())
            .map(|d| d["name"].as_str().unwrap())
            .filter(|d| ours.contains(*d))
            .collect();
        let Some(may) = allowed.get(name) else {
            // The binary and the benches sit on top of everything.
            assert!(
                matches!(name, "codex-relay" | "codex-relay-bench"),
                "{name} is a new crate: say where it sits in this test"
            );
            continue;
        };
        for d in &deps {
            assert!(
                may.contains(d),
                "{name} depends on {d}, which is not below it (allowed: {may:?})"
            );
        }
        checked += 1;
    }
    assert_eq!(checked, allowed.len(), "every layered crate was found");
}

/// Each crate's integration tests are one binary, `all` (docs/ARCHITECTURE.md): a file put
/// straight in `tests/` would be compiled and linked as a binary of its own.
#[test]
fn every_crate_has_at_most_one_integration_test_binary() {
    let meta = metadata();
    for p in meta["packages"].as_array().unwrap() {
        let tests: Vec<&str> = p["targets"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["kind"].as_array().unwrap().iter().any(|k| k == "test"))
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert!(
            tests.is_empty() || tests == ["all"],
            "{} has the test binaries {tests:?}: move them into tests/all/ as modules of main.rs",
            p["name"]
        );
    }
}

/// The top-level modules of `crates/core/src` that `path` (a file, or a module's directory
/// with everything under it) names as `crate::<module>` in its code (comments and doc links
/// are not imports).
fn references(path: &Path) -> BTreeSet<String> {
    let mut files = vec![path.to_path_buf()];
    let mut out = BTreeSet::new();
    while let Some(f) = files.pop() {
        if f.is_dir() {
            files.extend(std::fs::read_dir(&f).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        if f.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        let code = text.lines().filter(|l| !l.trim_start().starts_with("//"));
        for line in code {
            for (i, _) in line.match_indices("crate::") {
                let name: String = line[i + 7..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                out.insert(name);
            }
        }
    }
    out
}

/// A top-level module of `crates/core/src`: its file, or its directory.
fn module(name: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let dir = src.join(name);
    if dir.is_dir() {
        dir
    } else {
        src.join(format!("{name}.rs"))
    }
}

/// Core's ground floor (docs/ARCHITECTURE.md, "Floors inside core"): ids, time, globs, the events,
/// answers and deciders, pending requests and their option words, the views fronts show, how a
/// session is created (config), every error, and the small settings types. It imports nothing
/// above it, so everything else can build on it.
const GROUND: &[&str] = &[
    "ids",
    "time",
    "glob",
    "event",
    "answer",
    "decider",
    "person",
    "options",
    "pending",
    "views",
    "config",
    "error",
    "modes",
    "crash_loop",
    "tool",
    "limits",
    "rate_limits",
];

/// What module `name` imports from above `floor` (any module of core not on it).
fn upward(name: &str, floor: &[&str]) -> Vec<String> {
    references(&module(name))
        .into_iter()
        .filter(|r| r != name && !floor.contains(&r.as_str()))
        .collect()
}

#[test]
fn the_ground_floor_imports_nothing_above_it() {
    let mut found = Vec::new();
    for m in GROUND {
        assert!(module(m).exists(), "{m} is gone: update GROUND");
        for up in upward(m, GROUND) {
            found.push(format!("{m} imports crate::{up}"));
        }
    }
    assert!(
        found.is_empty(),
        "the ground floor imports from above it: {found:?}"
    );
}

#[test]
fn the_store_builds_on_the_ground_floor_only_and_knows_nothing_of_the_cluster() {
    let floor: Vec<&str> = GROUND.iter().copied().chain(["store"]).collect();
    let up = upward("store", &floor);
    assert!(up.is_empty(), "the store imports {up:?}");
}

/// The cluster sits behind the placement seam (core/placement.rs): nothing else in core names
/// it, the relay least of all.
#[test]
fn only_the_placement_names_the_cluster() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut naming = Vec::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        if matches!(name.as_str(), "cluster" | "placement" | "lib") {
            continue;
        }
        if references(&path).contains("cluster") {
            naming.push(name);
        }
    }
    naming.sort();
    assert!(naming.is_empty(), "these name the cluster: {naming:?}");
}

/// The cluster works on the narrow handle a place gets of the engine (core/host.rs), never the
/// relay.
#[test]
fn the_cluster_names_no_relay() {
    let refs = references(&module("cluster"));
    assert!(!refs.contains("relay"), "the cluster imports {refs:?}");
}

/// Recovery works on narrow handles (the store, the broker, the pool), never the relay.
#[test]
fn recovery_names_no_relay() {
    let refs = references(&module("recovery"));
    assert!(!refs.contains("relay"), "recovery imports {refs:?}");
}

#[test]
fn session_broker_and_relay_form_no_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let modules = ["session", "broker", "relay"];
    let graph: BTreeMap<&str, BTreeSet<String>> = modules
        .iter()
        .map(|m| {
            let dir = src.join(m);
            let path = if dir.is_dir() {
                dir
            } else {
                src.join(format!("{m}.rs"))
            };
            let refs: BTreeSet<String> = references(&path)
                .into_iter()
                .filter(|r| modules.contains(&r.as_str()) && r != m)
                .collect();
            (*m, refs)
        })
        .collect();
    // Depth-first search for a path back to the start.
    fn reaches(
        graph: &BTreeMap<&str, BTreeSet<String>>,
        from: &str,
        to: &str,
        seen: &mut BTreeSet<String>,
    ) -> bool {
        for next in graph.get(from).into_iter().flatten() {
            if next == to {
                return true;
            }
            if seen.insert(next.clone()) && reaches(graph, next, to, seen) {
                return true;
            }
        }
        false
    }
    for m in modules {
        assert!(
            !reaches(&graph, m, m, &mut BTreeSet::new()),
            "{m} reaches itself through {graph:?}"
        );
    }
    // The direction the engine is built in: the relay over sessions over the broker.
    assert!(graph["relay"].contains("session") && graph["session"].contains("broker"));
}
