//! Caller tools: async closures offered to Codex as dynamic tools, guarded so an error, a panic or a timeout is a failed call the model sees, never a crash.

use std::fmt::Display;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use codex_relay_core::{DynamicTool, ToolHandler};
use codex_relay_protocol::v2::DynamicToolSpec;
use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// How long a tool may run before it is cancelled, unless [`Tool::timeout`] says otherwise.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(120);

type Handler = dyn Fn(Value) -> BoxFuture<'static, Result<String, String>> + Send + Sync;

/// A tool of yours that the model can call: a name, a description, a JSON schema for its
/// arguments, and an async function that answers.
///
/// The function's `Ok` text goes back to the model as the call's output; an `Err`, a panic
/// or running past the tool's timeout (the future is dropped, which cancels it) goes back as
/// a failed call with a message saying which, and the turn goes on.
///
/// ```
/// use codex_relay::Tool;
/// use serde_json::json;
///
/// let weather = Tool::new(
///     "weather",
///     "The weather in a city today",
///     json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
///     |args| async move {
///         let city = args["city"].as_str().ok_or("city is missing")?.to_owned();
///         Ok::<_, String>(format!("sunny in {city}"))
///     },
/// )
/// .timeout(std::time::Duration::from_secs(10));
/// assert_eq!(weather.name(), "weather");
/// ```
#[derive(Clone)]
pub struct Tool {
    name: String,
    description: String,
    input_schema: Value,
    timeout: Duration,
    handler: Arc<Handler>,
}

impl std::fmt::Debug for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tool")
            .field("name", &self.name)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Tool {
    /// A tool taking raw JSON arguments (described by `input_schema`) and answering text.
    pub fn new<F, Fut, E>(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
        f: F,
    ) -> Self
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<String, E>> + Send + 'static,
        E: Display,
    {
        let handler = move |args: Value| -> BoxFuture<'static, Result<String, String>> {
            let fut = f(args);
            Box::pin(async move { fut.await.map_err(|e| e.to_string()) })
        };
        Self {
            name: name.into(),
            description: description.into(),
            input_schema,
            timeout: DEFAULT_TOOL_TIMEOUT,
            handler: Arc::new(handler),
        }
    }

    /// A tool whose arguments are `A` (its schema is generated from `A`) and whose output `R`
    /// is sent to the model as JSON (a string as it is). Arguments that do not parse into `A` are a failed call.
    ///
    /// ```
    /// use codex_relay::Tool;
    ///
    /// #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// struct Add { a: i64, b: i64 }
    ///
    /// let add = Tool::typed("add", "Adds two integers", |x: Add| async move {
    ///     Ok::<_, String>(x.a + x.b)
    /// });
    /// assert_eq!(add.input_schema()["properties"]["a"]["type"], "integer");
    /// ```
    pub fn typed<A, R, E, F, Fut>(
        name: impl Into<String>,
        description: impl Into<String>,
        f: F,
    ) -> Self
    where
        A: DeserializeOwned + JsonSchema + Send + 'static,
        R: Serialize,
        E: Display,
        F: Fn(A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, E>> + Send + 'static,
    {
        let schema = serde_json::to_value(schemars::schema_for!(A)).unwrap_or(Value::Null);
        let f = Arc::new(f);
        Self::new(name, description, schema, move |args: Value| {
            let f = f.clone();
            async move {
                let args: A = serde_json::from_value(args)
                    .map_err(|e| format!("the arguments do not fit the tool's schema: {e}"))?;
                let out = f(args).await.map_err(|e| e.to_string())?;
                // A string goes as it is; anything else as compact JSON.
                match serde_json::to_value(&out).map_err(|e| e.to_string())? {
                    Value::String(text) => Ok::<_, String>(text),
                    other => Ok(other.to_string()),
                }
            }
        })
    }

    /// Cancels a call that runs longer than `timeout` (default [`DEFAULT_TOOL_TIMEOUT`]).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The tool's name, as the model sees it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The tool's description, as the model sees it.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The JSON schema of the tool's arguments.
    pub fn input_schema(&self) -> &Value {
        &self.input_schema
    }

    /// The engine's form of this tool: offered at thread start, answered in-process.
    pub(crate) fn to_dynamic(&self) -> DynamicTool {
        DynamicTool {
            spec: DynamicToolSpec::function(
                self.name.clone(),
                self.description.clone(),
                self.input_schema.clone(),
            ),
            handler: Some(Arc::new(Guarded {
                name: self.name.clone(),
                timeout: self.timeout,
                handler: self.handler.clone(),
            })),
        }
    }
}

/// Runs a tool on its own task, so a panic is caught and a timeout drops (cancels) it.
struct Guarded {
    name: String,
    timeout: Duration,
    handler: Arc<Handler>,
}

impl ToolHandler for Guarded {
    fn call(&self, arguments: Value) -> BoxFuture<'static, Result<String, String>> {
        let (name, timeout, handler) = (self.name.clone(), self.timeout, self.handler.clone());
        Box::pin(async move {
            // Building the future may panic too (the closure's synchronous part).
            let fut = match std::panic::catch_unwind(AssertUnwindSafe(|| handler(arguments))) {
                Ok(fut) => fut,
                Err(panic) => return Err(panicked(&name, panic.as_ref())),
            };
            let task = tokio::spawn(fut);
            let abort = task.abort_handle();
            match tokio::time::timeout(timeout, task).await {
                Ok(Ok(result)) => result,
                Ok(Err(join)) if join.is_panic() => {
                    Err(panicked(&name, join.into_panic().as_ref()))
                }
                Ok(Err(_)) => Err(format!("the tool {name} was cancelled")),
                Err(_) => {
                    abort.abort();
                    tracing::warn!(tool = %name, ?timeout, "tool call timed out; cancelled");
                    Err(format!(
                        "the tool {name} did not finish within {timeout:?} and was cancelled"
                    ))
                }
            }
        })
    }
}

fn panicked(name: &str, panic: &(dyn std::any::Any + Send)) -> String {
    let what = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".into());
    tracing::warn!(tool = %name, "tool call panicked: {what}");
    format!("the tool {name} failed: it panicked ({what})")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(tool: &Tool, args: Value) -> Result<String, String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let handler = tool.to_dynamic().handler.unwrap();
        rt.block_on(handler.call(args))
    }

    #[test]
    fn errors_panics_and_timeouts_become_failed_calls() {
        let ok = Tool::new("ok", "", json!({}), |a| async move {
            Ok::<_, String>(format!("got {}", a["x"]))
        });
        assert_eq!(call(&ok, json!({"x": 1})), Ok("got 1".into()));
        let err = Tool::new("err", "", json!({}), |_| async {
            Err::<String, _>("no luck")
        });
        assert_eq!(call(&err, json!({})), Err("no luck".into()));
        let boom = Tool::new("boom", "", json!({}), |_| async {
            panic!("kaboom");
            #[allow(unreachable_code)]
            Ok::<String, String>(String::new())
        });
        let e = call(&boom, json!({})).unwrap_err();
        assert!(e.contains("panicked") && e.contains("kaboom"), "{e}");
        let slow = Tool::new("slow", "", json!({}), |_| async {
            tokio::time::sleep(Duration::from_secs(30)).await;
            Ok::<_, String>("late".into())
        })
        .timeout(Duration::from_millis(50));
        let e = call(&slow, json!({})).unwrap_err();
        assert!(
            e.contains("did not finish within") && e.contains("cancelled"),
            "{e}"
        );
    }

    #[test]
    fn typed_tools_check_their_arguments() {
        #[derive(serde::Deserialize, JsonSchema)]
        struct Add {
            a: i64,
            b: i64,
        }
        let add = Tool::typed(
            "add",
            "adds",
            |x: Add| async move { Ok::<_, String>(x.a + x.b) },
        );
        assert_eq!(call(&add, json!({"a": 2, "b": 3})), Ok("5".into()));
        let e = call(&add, json!({"a": "two"})).unwrap_err();
        assert!(e.contains("do not fit"), "{e}");
    }
}
