//! Plugins written with the SDK talk back to the client of a call (the
//! SDK's `client` module: log messages, progress, sampling, elicitation),
//! in both flavours: hyper-mcp's host functions for an Extism module, the
//! `client` interface of `toolhost:plugin@0.1.1` for a component. And a
//! component of 0.1.0, built before that interface, still loads.

use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};
use toolhost::{BoxFuture, CallClient, CallContext, ClientNotice, ClientRequest, LogLevel, Plugin, PluginKind};
use toolhost_tests::{Flavour, fixture};

fn text(result: &toolhost::CallToolResult) -> String {
    result.texts().next().unwrap_or_default().to_owned()
}

/// A client that answers every request with `answer` and records it all.
struct Client {
    answer: Value,
    asked: Mutex<Vec<(ClientRequest, Map<String, Value>)>>,
    told: Mutex<Vec<ClientNotice>>,
}

impl Client {
    fn answering(answer: Value) -> Arc<Client> {
        Arc::new(Client { answer, asked: Mutex::default(), told: Mutex::default() })
    }
}

impl CallClient for Client {
    fn request(&self, request: ClientRequest, params: Map<String, Value>) -> BoxFuture<'_, Result<Value, String>> {
        self.asked.lock().unwrap().push((request, params));
        let answer = self.answer.clone();
        Box::pin(async move { Ok(answer) })
    }

    fn notify(&self, notice: ClientNotice) -> BoxFuture<'_, ()> {
        self.told.lock().unwrap().push(notice);
        Box::pin(async {})
    }
}

async fn sdk_plugins_sample_and_elicit(flavour: Flavour) {
    let plugin = Plugin::load(flavour.fixture("conformance")).await.unwrap_or_else(|e| panic!("{e}"));
    let model = Client::answering(json!({"role": "assistant", "content": {"type": "text", "text": "4"}, "model": "m"}));
    let context = CallContext::new().with_client(model.clone());
    let sampled = plugin.call_tool_with("test_sampling", json!({"prompt": "2+2?"}), &context).await.expect("sample");
    assert_eq!(text(&sampled), "LLM response: 4");
    let (request, params) = model.asked.lock().unwrap().pop().expect("asked");
    assert_eq!(request, ClientRequest::Sampling);
    assert_eq!(params["messages"][0]["content"]["text"], "2+2?");
    assert_eq!(params["maxTokens"], 100);

    let user = Client::answering(json!({"action": "accept", "content": {"username": "ada", "email": "a@b.c"}}));
    let context = CallContext::new().with_client(user.clone());
    let elicited =
        plugin.call_tool_with("test_elicitation", json!({"message": "Who are you?"}), &context).await.expect("elicit");
    assert!(text(&elicited).contains(r#""username":"ada""#), "{}", text(&elicited));
    let (request, params) = user.asked.lock().unwrap().pop().expect("asked");
    assert_eq!(request, ClientRequest::Elicitation);
    assert_eq!(params["message"], "Who are you?");
    assert_eq!(params["requestedSchema"]["required"], json!(["username", "email"]));

    // Without a client the tool fails as a tool, saying why.
    let refused = plugin.call_tool("test_sampling", json!({"prompt": "2+2?"})).await.expect("a result");
    assert!(refused.is_error(), "{refused:?}");
    assert!(text(&refused).contains("without a client"), "{}", text(&refused));
}

async fn sdk_plugins_report_progress_and_log(flavour: Flavour) {
    let plugin = Plugin::load(flavour.fixture("conformance")).await.unwrap_or_else(|e| panic!("{e}"));
    let client = Client::answering(Value::Null);
    let mut meta = Map::new();
    meta.insert("progressToken".into(), json!(7));
    let context = CallContext::new().with_client(client.clone()).with_meta(meta);
    plugin.call_tool_with("test_tool_with_progress", json!({}), &context).await.expect("progress");
    let told = std::mem::take(&mut *client.told.lock().unwrap());
    let steps: Vec<(Value, Value)> = told
        .iter()
        .map(|notice| match notice {
            ClientNotice::Progress(p) => (p["progressToken"].clone(), p["progress"].clone()),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(steps, vec![(json!(7), json!(0.0)), (json!(7), json!(50.0)), (json!(7), json!(100.0))]);

    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    let context =
        CallContext::new().with_log_sink(move |line| sink.lock().unwrap().push((line.level, line.message.to_owned())));
    plugin.call_tool_with("test_tool_with_logging", json!({}), &context).await.expect("logging");
    assert_eq!(
        *lines.lock().unwrap(),
        vec![
            (LogLevel::Info, "Tool execution started".to_owned()),
            (LogLevel::Info, "Tool processing data".to_owned()),
            (LogLevel::Info, "Tool execution completed".to_owned()),
        ]
    );
}

async fn sdk_plugins_offer_prompts_and_resources(flavour: Flavour) {
    let plugin = Plugin::load(flavour.fixture("conformance")).await.unwrap_or_else(|e| panic!("{e}"));
    let offers = plugin.offers();
    assert!(offers.prompts && offers.resources && offers.resource_templates, "{offers:?}");
    let context = CallContext::new();
    let prompts = plugin.list_prompts(&context).await.expect("prompts");
    let with_args = prompts.prompts.iter().find(|p| p.name == "test_prompt_with_arguments").expect("listed");
    let arguments = with_args.arguments.as_ref().expect("arguments");
    assert_eq!(
        arguments.iter().map(|a| (a.name.as_str(), a.required)).collect::<Vec<_>>(),
        [("arg1", Some(true)), ("arg2", Some(true))]
    );
    assert_eq!(arguments[0].description.as_deref(), Some("First test argument."));
    let mut given = Map::new();
    given.insert("arg1".into(), json!("hello"));
    given.insert("arg2".into(), json!("world"));
    let prompt = plugin.get_prompt("test_prompt_with_arguments", Some(given), &context).await.expect("prompt");
    assert_eq!(
        serde_json::to_value(&prompt.messages[0].content).unwrap()["text"],
        "Prompt with arguments: arg1='hello', arg2='world'"
    );
    // A missing argument is the plugin's refusal, saying which.
    let error = plugin.get_prompt("test_prompt_with_arguments", None, &context).await.expect_err("no arguments");
    assert!(error.to_string().contains("arg1"), "{error}");

    let resources = plugin.list_resources(&context).await.expect("resources");
    assert!(resources.resources.iter().any(|r| r.uri == "test://static-binary"), "{resources:?}");
    let binary = plugin.read_resource("test://static-binary", &context).await.expect("binary");
    assert_eq!(binary.contents[0].mime_type.as_deref(), Some("image/png"));
    assert!(binary.contents[0].blob.as_deref().is_some_and(|b| b.starts_with("iVBOR")), "{binary:?}");
    let templated = plugin.read_resource("test://template/42/data", &context).await.expect("template");
    let data: Value = serde_json::from_str(templated.contents[0].text.as_deref().unwrap()).unwrap();
    assert_eq!(data["id"], "42");
    let error = plugin.read_resource("test://nothing", &context).await.expect_err("no such resource");
    assert!(error.to_string().contains("test://nothing"), "{error}");
}

/// What a call lends its plugin (its client, its log sink) is the
/// caller's again once the call is answered: the idle instance the call
/// ran on keeps no reference to either (a session's channel, the task
/// forwarding its log lines), after a tool call and after a prompt.
async fn an_idle_instance_keeps_nothing_of_its_last_caller(flavour: Flavour) {
    let plugin = Plugin::load(flavour.fixture("conformance")).await.unwrap_or_else(|e| panic!("{e}"));
    let client = Client::answering(Value::Null);
    let sink_holds = Arc::new(());
    let held = sink_holds.clone();
    let mut meta = Map::new();
    meta.insert("progressToken".into(), json!(7));
    let context = CallContext::new().with_client(client.clone()).with_meta(meta).with_log_sink(move |_| {
        let _ = &held;
    });
    plugin.call_tool_with("test_tool_with_progress", json!({}), &context).await.expect("progress");
    assert!(!client.told.lock().unwrap().is_empty(), "the call used its client");
    plugin.get_prompt("test_simple_prompt", None, &context).await.expect("prompt");
    drop(context);
    assert_eq!(plugin.pool_stats().idle, 1, "the instance waits in the pool");
    assert_eq!(Arc::strong_count(&client), 1, "the idle instance holds the last call's client");
    assert_eq!(Arc::strong_count(&sink_holds), 1, "the idle instance holds the last call's log sink");
}

both_flavours!(
    sdk_plugins_sample_and_elicit,
    sdk_plugins_report_progress_and_log,
    sdk_plugins_offer_prompts_and_resources,
    an_idle_instance_keeps_nothing_of_its_last_caller
);

/// Every kind of content item reaches the caller the same from both
/// flavours: a component's WIT items (bytes, records) become the protocol's
/// JSON items as a module's JSON is read.
#[tokio::test]
async fn both_flavours_return_every_kind_of_content_alike() {
    let module = Plugin::load(Flavour::Extism.fixture("conformance")).await.expect("module");
    let component = Plugin::load(Flavour::Component.fixture("conformance")).await.expect("component");
    assert_eq!(component.kind(), PluginKind::Component);
    for tool in [
        "test_simple_text",
        "test_image_content",
        "test_audio_content",
        "test_embedded_resource",
        "test_multiple_content_types",
    ] {
        let from_module = serde_json::to_value(module.call_tool(tool, json!({})).await.expect(tool)).unwrap();
        let from_component = serde_json::to_value(component.call_tool(tool, json!({})).await.expect(tool)).unwrap();
        assert_eq!(from_component, from_module, "{tool}");
        assert!(from_module["content"].as_array().is_some_and(|c| !c.is_empty()), "{tool}: {from_module}");
    }
    let mixed =
        serde_json::to_value(component.call_tool("test_multiple_content_types", json!({})).await.unwrap()).unwrap();
    let kinds: Vec<&str> = mixed["content"].as_array().unwrap().iter().map(|c| c["type"].as_str().unwrap()).collect();
    assert!(kinds.len() >= 3 && kinds.contains(&"text") && kinds.contains(&"image"), "{mixed}");
}

#[tokio::test]
async fn a_component_built_against_the_0_1_0_wit_still_loads() {
    let path = fixture("component-0-1-0").with_file_name("component-0-1-0.component.wasm");
    let plugin = Plugin::builder_from_file(&path).with_config("greeting", "hello").build().await.expect("load");
    assert_eq!(plugin.kind(), PluginKind::Component);
    assert_eq!(text(&plugin.call_tool("ping", json!({})).await.expect("ping")), "pong (hello)");
}
