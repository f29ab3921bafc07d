//! Output schemas for typed runs: a `JsonSchema` type's schema made strict-compatible, as OpenAI's structured outputs demand.

use schemars::JsonSchema;
use serde_json::{Map, Value, json};

use crate::error::Error;

/// The `format` values strict structured outputs accept; others (`uint32`, `double`, ...)
/// are dropped (the type stays).
const FORMATS: &[&str] = &[
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];

/// The strict-compatible JSON schema of `T`, ready to send as a turn's `outputSchema`.
///
/// Every object schema (in `properties`, `items`, `anyOf`, `$defs`, ... at any depth) gets
/// `additionalProperties: false` and lists all of its properties as `required`; `Option`
/// fields stay nullable, so "required" means "present, possibly `null`". `oneOf` becomes
/// `anyOf`; `default` and unsupported `format`s are dropped.
///
/// Fails (phase `request`) when `T`'s schema is not an object at the top, or contains a map
/// (`HashMap<String, _>`): strict mode cannot express free-form keys.
///
/// ```
/// #[derive(schemars::JsonSchema)]
/// struct Verdict { ok: bool, note: Option<String> }
///
/// let schema = codex_relay::output_schema::<Verdict>().unwrap();
/// assert_eq!(schema["additionalProperties"], false);
/// assert_eq!(schema["required"], serde_json::json!(["note", "ok"]));
/// ```
pub fn output_schema<T: JsonSchema>() -> Result<Value, Error> {
    let schema = schemars::schema_for!(T);
    let mut value = serde_json::to_value(&schema)
        .map_err(|e| Error::setup(format!("the output type's schema: {e}")))?;
    make_strict(&mut value)?;
    if value.get("type").and_then(Value::as_str) != Some("object") {
        return Err(Error::setup(format!(
            "the output type must be a struct (a JSON object at the top); its schema is {}",
            value
        )));
    }
    Ok(value)
}

/// Makes a JSON schema strict-compatible in place (see [`output_schema`]); used for schemas
/// given as JSON, such as `codex-relay run --output-schema FILE`.
pub fn make_strict(schema: &mut Value) -> Result<(), Error> {
    strict_at(schema, "#")
}

fn is_object_schema(m: &Map<String, Value>) -> bool {
    match m.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
        _ => m.contains_key("properties"),
    }
}

fn strict_at(schema: &mut Value, path: &str) -> Result<(), Error> {
    let Value::Object(m) = schema else {
        return Ok(());
    };
    m.remove("default");
    if m.get("format")
        .and_then(Value::as_str)
        .is_some_and(|f| !FORMATS.contains(&f))
    {
        m.remove("format");
    }
    if let Some(one_of) = m.remove("oneOf") {
        m.insert("anyOf".into(), one_of);
    }
    if is_object_schema(m) {
        if m.get("additionalProperties").is_some_and(Value::is_object) {
            return Err(Error::setup(format!(
                "{path} is a map (free-form keys), which strict structured output cannot express; use a struct or a list of pairs"
            )));
        }
        let props = m
            .entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
        let names: Vec<Value> = props
            .as_object()
            .map(|p| p.keys().map(|k| json!(k)).collect())
            .unwrap_or_default();
        m.insert("required".into(), Value::Array(names));
        m.insert("additionalProperties".into(), Value::Bool(false));
    }
    for key in ["properties", "$defs", "definitions"] {
        if let Some(Value::Object(children)) = m.get_mut(key) {
            for (name, child) in children.iter_mut() {
                strict_at(child, &format!("{path}/{key}/{name}"))?;
            }
        }
    }
    for key in ["items", "not", "if", "then", "else", "contains"] {
        if let Some(child) = m.get_mut(key) {
            strict_at(child, &format!("{path}/{key}"))?;
        }
    }
    for key in ["anyOf", "allOf", "prefixItems"] {
        if let Some(Value::Array(children)) = m.get_mut(key) {
            for (i, child) in children.iter_mut().enumerate() {
                strict_at(child, &format!("{path}/{key}/{i}"))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct Inner {
        name: String,
        count: u32,
    }

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    enum Shape {
        Dot,
        Line { length: f64 },
    }

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct Outer {
        title: String,
        note: Option<String>,
        #[serde(default)]
        inner: Vec<Inner>,
        shape: Shape,
    }

    fn all_objects(v: &Value, out: &mut Vec<Value>) {
        match v {
            Value::Object(m) => {
                if is_object_schema(m) {
                    out.push(v.clone());
                }
                m.values().for_each(|c| all_objects(c, out));
            }
            Value::Array(a) => a.iter().for_each(|c| all_objects(c, out)),
            _ => {}
        }
    }

    #[test]
    fn every_object_at_any_depth_is_closed_and_fully_required() {
        let schema = output_schema::<Outer>().unwrap();
        assert_eq!(
            schema["required"],
            json!(["inner", "note", "shape", "title"])
        );
        assert!(schema["$defs"]["Inner"].is_object(), "{schema}");
        let mut objects = Vec::new();
        all_objects(&schema, &mut objects);
        // Outer, Inner, and the `Line` variant's object and its body.
        assert!(objects.len() >= 3, "{schema}");
        for o in &objects {
            assert_eq!(o["additionalProperties"], json!(false), "{o}");
            let props: Vec<&String> = o["properties"].as_object().unwrap().keys().collect();
            let required: Vec<&str> = o["required"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r.as_str().unwrap())
                .collect();
            assert_eq!(props, required, "{o}");
        }
        let text = schema.to_string();
        assert!(!text.contains("\"oneOf\""), "{text}");
        assert!(!text.contains("uint32"), "{text}");
        assert!(!text.contains("\"default\""), "{text}");
        // Option stays nullable.
        assert!(
            schema["properties"]["note"].to_string().contains("null"),
            "{schema}"
        );
    }

    #[test]
    fn maps_and_non_objects_are_refused_with_the_reason() {
        #[derive(JsonSchema)]
        #[allow(dead_code)]
        struct WithMap {
            tags: HashMap<String, String>,
        }
        let e = output_schema::<WithMap>().unwrap_err();
        assert!(e.message().contains("#/properties/tags"), "{e}");
        let e = output_schema::<Vec<String>>().unwrap_err();
        assert!(e.message().contains("must be a struct"), "{e}");
    }
}
