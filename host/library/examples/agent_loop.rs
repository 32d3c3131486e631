//! An agent loop on toolhost, the way an agent runtime embeds it.
//!
//! ```console
//! $ cargo xtask build-plugins
//! $ cargo run --example agent_loop -- example-plugins/toolsets.yaml
//! ```
//!
//! 1. Load a toolsets file into a [`Registry`]: every plugin sandboxed,
//!    every schema checked.
//! 2. Hand the tools to the model in its API's format (here OpenAI's),
//!    borrowed from the registry: nothing is cloned per request.
//! 3. Run the tool calls the model asks for concurrently; failures become
//!    text the model reads ([`toolhost::Error::model_text`]), tools that
//!    need approval go to an approval callback, and a call the user cancels
//!    stops its plugin at once.
//! 4. Shut down the runtime: calls in flight get a grace period, then are
//!    cancelled; the epoch ticker stops.
//!
//! The "model" is a stand-in that plans from the tool list it is given, so
//! the example runs anywhere, without a network or an API key; a real one
//! takes the same JSON and returns the same kind of calls.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use toolhost::{
    Approval, ApprovalRequest, Approver, BoxFuture, CallContext, CancellationToken, EnvSecretProvider, Registry,
    Runtime,
};

/// A tool call as model APIs return them.
#[derive(Debug, Clone)]
struct ToolCall {
    id: String,
    name: String,
    arguments: Value,
}

/// The stand-in model: reads the OpenAI-format tool list it is sent and
/// asks for calls of the tools it finds there.
fn model(tools: &[Value], turn: usize) -> Vec<ToolCall> {
    let offered = |name: &str| tools.iter().any(|t| t["function"]["name"] == name);
    let call = |id: &str, name: &str, arguments: Value| ToolCall { id: id.into(), name: name.into(), arguments };
    let wanted = match turn {
        0 => vec![
            call("c1", "calc__add", json!({"a": 2, "b": 3})),
            call("c2", "calc__multiply", json!({"a": 6, "b": 7})),
            // Wrong arguments: the model reads what was wrong and where.
            call("c3", "calc__add", json!({"a": "two"})),
            // Needs approval (the toolsets file says so).
            call("c4", "calc__divide", json!({"a": 1, "b": 4})),
            call("c5", "calc__divide", json!({"a": 1, "b": 0})),
        ],
        1 => vec![call("c6", "text__change_case", json!({"text": "all done", "case": "upper"}))],
        _ => Vec::new(),
    };
    wanted.into_iter().filter(|c| offered(&c.name)).collect()
}

/// The approval callback: the embedding program decides (a dialog, a
/// policy engine). This one allows dividing by anything but zero.
struct NoDivisionByZero;

impl Approver for NoDivisionByZero {
    fn approve<'a>(&'a self, request: ApprovalRequest<'a>) -> BoxFuture<'a, Approval> {
        let verdict = if request.arguments["b"] == json!(0) {
            Approval::Denied("the user refused a division by zero".to_owned())
        } else {
            Approval::Approved
        };
        println!("  approval asked for {} {} -> {verdict:?}", request.tool.name, request.arguments);
        Box::pin(async move { verdict })
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let file = std::env::args().nth(1).unwrap_or_else(|| "example-plugins/toolsets.yaml".to_owned());

    // 1. Load.
    let secrets = Arc::new(EnvSecretProvider::new());
    let parsed = toolhost::load_toolsets(file.as_ref(), secrets.as_ref()).await?;
    // The embedder's own runtime (engines, ticker, limits), to shut down at
    // the end.
    let runtime = Runtime::new();
    let registry = Arc::new(Registry::with_runtime(runtime.clone(), secrets));
    let report = registry.load_all(parsed.toolsets).await;
    for failure in &report.failures {
        eprintln!("warning: {} was not loaded: {}", failure.source, failure.error);
    }
    let approver = Arc::new(NoDivisionByZero);

    for turn in 0.. {
        // 2. The tools, in the model API's format.
        let snapshot = registry.snapshot();
        let tools: Vec<Value> =
            snapshot.model_tools().iter().map(|t| serde_json::to_value(t.openai())).collect::<Result<_, _>>()?;
        if turn == 0 {
            println!("{} tools offered to the model", tools.len());
        }
        let calls = model(&tools, turn);
        if calls.is_empty() {
            break;
        }

        // 3. Run the calls concurrently; each answer goes back to the model.
        let mut running = tokio::task::JoinSet::new();
        for call in calls {
            let (registry, approver) = (Arc::clone(&registry), Arc::clone(&approver));
            running.spawn(async move {
                // The call id names the call in spans and metrics.
                let context = CallContext::new().with_call_id(call.id.clone()).with_timeout(Duration::from_secs(30));
                let outcome = registry.call_with(&call.name, call.arguments.clone(), approver.as_ref(), &context).await;
                let (is_error, text) = match outcome {
                    Ok(result) => (result.is_error(), result.texts().collect::<Vec<_>>().join("\n")),
                    Err(error) => (true, error.model_text()),
                };
                (call, is_error, text)
            });
        }
        let mut answers = Vec::new();
        while let Some(done) = running.join_next().await {
            answers.push(done?);
        }
        answers.sort_by(|a, b| a.0.id.cmp(&b.0.id));
        for (call, is_error, text) in answers {
            let tag = if is_error { "error" } else { "ok" };
            println!("  {} {} -> {tag}: {text}", call.id, call.name);
        }
    }

    // A call the user gives up on: cancelling its token stops the plugin.
    let stop = CancellationToken::new();
    stop.cancel();
    let context = CallContext::new().with_call_id("c7").with_cancellation(stop);
    match registry.call_with("calc__add", json!({"a": 1, "b": 1}), approver.as_ref(), &context).await {
        Err(error) if error.is_cancelled() => println!("  c7 calc__add -> cancelled by the user"),
        other => println!("  c7 calc__add -> finished first: {:?}", other.map(|r| r.is_error())),
    }

    // 4. Shut down: calls in flight get 5 s, then are cancelled.
    let report = runtime.shutdown(Duration::from_secs(5)).await;
    println!("shut down ({} calls in flight, {} cancelled)", report.in_flight, report.cancelled);
    Ok(())
}
