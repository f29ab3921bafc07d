//! Shared strategies for the protocol property tests: hostile JSON values, the seed corpora
//! and the mutations applied to them.

use proptest::prelude::*;
use proptest::test_runner::Config;
use serde_json::{Map, Value, json};

/// `PROPTEST_CASES` when set (the long run), else a few dozen cases (the `./scripts/test` budget).
pub fn config(default_cases: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_cases);
    Config {
        cases,
        ..Config::default()
    }
}

/// One seed corpus under `crates/protocol/tests/fuzz-seeds`: an array of whole messages.
pub fn seeds(file: &str) -> Vec<Value> {
    let text = match file {
        "notifications.json" => include_str!("../fuzz-seeds/notifications.json"),
        "server_requests.json" => include_str!("../fuzz-seeds/server_requests.json"),
        other => panic!("no seed corpus {other}"),
    };
    serde_json::from_str(text).expect("a seed file is a JSON array")
}

/// Strings that break naive code: unicode of every width, controls, escapes, long runs.
pub fn nasty_string() -> impl Strategy<Value = String> {
    prop_oneof![
        ".{0,12}",
        "\\PC{0,40}",
        Just(String::new()),
        Just("\u{0}\u{7f}\u{feff}\u{202e}é😀\u{10ffff}".to_owned()),
        Just("\\\"\\u0000\n\r\t".to_owned()),
        (1usize..5000).prop_map(|n| "ž".repeat(n)),
    ]
}

/// Numbers at and past the edges of what the wire types hold.
pub fn nasty_number() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        Just(json!(i64::MAX)),
        Just(json!(i64::MIN)),
        Just(json!(u64::MAX)),
        Just(json!(1e300)),
        Just(json!(-0.0)),
    ]
}

/// Any JSON value, a few levels deep.
pub fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        nasty_number(),
        nasty_string().prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map(".{0,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// One change to a JSON document, applied at the `at`-th node (modulo the node count).
#[derive(Debug, Clone)]
pub enum Mutation {
    /// Removes the node from its parent (a missing field, a shorter array).
    Drop { at: usize },
    /// Puts another value in its place (usually of the wrong type).
    Replace { at: usize, with: Value },
    /// Adds a member to the nearest object at or above the node.
    Extra {
        at: usize,
        key: String,
        value: Value,
    },
}

pub fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(|at| Mutation::Drop { at }),
        (any::<usize>(), any_json()).prop_map(|(at, with)| Mutation::Replace { at, with }),
        (any::<usize>(), nasty_string(), any_json()).prop_map(|(at, key, value)| Mutation::Extra {
            at,
            key,
            value
        }),
    ]
}

/// The JSON pointers of every node under `v` (not `v` itself).
pub fn pointers(v: &Value) -> Vec<String> {
    fn walk(v: &Value, here: &str, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, c) in m {
                    let p = format!("{here}/{}", k.replace('~', "~0").replace('/', "~1"));
                    out.push(p.clone());
                    walk(c, &p, out);
                }
            }
            Value::Array(a) => {
                for (i, c) in a.iter().enumerate() {
                    let p = format!("{here}/{i}");
                    out.push(p.clone());
                    walk(c, &p, out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(v, "", &mut out);
    out
}

fn split(pointer: &str) -> (&str, String) {
    let (parent, last) = pointer.rsplit_once('/').expect("a pointer below the root");
    (parent, last.replace("~1", "/").replace("~0", "~"))
}

pub fn apply(doc: &mut Value, m: &Mutation) {
    let all = pointers(doc);
    if all.is_empty() {
        return;
    }
    match m {
        Mutation::Drop { at } => {
            let (parent, last) = split(&all[at % all.len()]);
            match doc.pointer_mut(parent) {
                Some(Value::Object(o)) => {
                    o.remove(&last);
                }
                Some(Value::Array(a)) => {
                    a.remove(last.parse::<usize>().unwrap());
                }
                _ => {}
            }
        }
        Mutation::Replace { at, with } => {
            if let Some(slot) = doc.pointer_mut(&all[at % all.len()]) {
                *slot = with.clone();
            }
        }
        Mutation::Extra { at, key, value } => {
            let mut p = all[at % all.len()].clone();
            loop {
                if let Some(Value::Object(o)) = doc.pointer_mut(&p) {
                    o.insert(key.clone(), value.clone());
                    return;
                }
                match p.rsplit_once('/') {
                    Some((parent, _)) => p = parent.to_owned(),
                    None => return,
                }
            }
        }
    }
}

/// Adds a member no Codex type has (`x-fuzz-*`) to every object in `v`.
pub fn add_extra_everywhere(v: &mut Value, key: &str, extra: &Value) {
    match v {
        Value::Object(m) => {
            for c in m.values_mut() {
                add_extra_everywhere(c, key, extra);
            }
            m.insert(format!("x-fuzz-{key}"), extra.clone());
        }
        Value::Array(a) => a
            .iter_mut()
            .for_each(|c| add_extra_everywhere(c, key, extra)),
        _ => {}
    }
}
