//! Component plugins: the `toolhost:plugin` world of `wit/`, on wasmtime's
//! component model.
//!
//! The bindings come from the same WIT files the guest SDK builds against.
//! A component's instance lives in a store like an Extism plugin's, on the
//! same engine, with the same limits: the epoch callback's deadline, the
//! memory budget (a `ResourceLimiter`), fuel, and WASI (0.2 here) with
//! nothing granted unless the policy grants it. What differs is the data's
//! shape: typed values instead of JSON bytes. They are turned into the
//! protocol's JSON here, so validation and everything after it is shared.

use std::sync::Arc;

use base64::Engine as _;
use serde_json::{Map, Value, json};
use wasmtime::Store;
use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::compile::Mapping;
use super::guest::{self, Guest, GuestCore, HostEnv, RunOptions};
use super::outcome::{CallOutput, RunError, Usage};
use super::output;
use crate::client::ClientRequest;
use crate::context::LogLevel as Level;
use crate::error::{Fault, FaultKind, OutputProblem, Violation};
use toolhost_protocol::{self as protocol, JsonObject};

/// Bindings generated from `wit/plugin.wit`.
mod bindings {
    wasmtime::component::bindgen!({
        path: "wit",
        world: "plugin",
        imports: {
            "toolhost:plugin/client.request": async,
            "toolhost:plugin/client.progress": async,
            "toolhost:plugin/client.notify": async,
        },
        exports: { default: async },
    });
}

use bindings::toolhost::plugin::host::LogLevel;
use bindings::toolhost::plugin::types::{
    Annotations, CallError, CallToolResult, Content, ContentKind, ResourceBody, Role, Tool,
};

/// The data of a component instance's store.
pub(crate) struct ComponentState {
    /// Grants, limits, memory budget, deadline, captured output.
    core: GuestCore,
    wasi: WasiCtx,
    table: ResourceTable,
    /// The running call's `_meta` (JSON text), for `call-meta`.
    call_meta: Option<String>,
    /// `wasi:http`'s state, and how its requests are sent.
    #[cfg(feature = "wasi-http")]
    http: wasmtime_wasi_http::WasiHttpCtx,
    #[cfg(feature = "wasi-http")]
    http_hooks: super::wasi_http::Hooks,
}

#[cfg(feature = "wasi-http")]
impl wasmtime_wasi_http::WasiHttpView for ComponentState {
    fn http(&mut self) -> wasmtime_wasi_http::WasiHttpCtxView<'_> {
        // A request is sent within the running call's deadline.
        self.http_hooks.deadline = self.core.deadline;
        wasmtime_wasi_http::WasiHttpCtxView { hooks: &mut self.http_hooks, table: &mut self.table, ctx: &mut self.http }
    }
}

impl WasiView for ComponentState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl bindings::toolhost::plugin::host::Host for ComponentState {
    fn config_get(&mut self, key: String) -> Option<String> {
        self.core.config_value(&key).map(str::to_owned)
    }

    fn call_meta(&mut self) -> Option<String> {
        self.call_meta.clone()
    }

    fn log(&mut self, level: LogLevel, message: String) {
        let level = match level {
            LogLevel::Error => Level::Error,
            LogLevel::Warn => Level::Warn,
            LogLevel::Info => Level::Info,
            LogLevel::Debug => Level::Debug,
            LogLevel::Trace => Level::Trace,
        };
        if self.core.wants_log(level) {
            self.core.log(level, message.as_bytes());
        }
    }
}

impl bindings::toolhost::plugin::types::Host for ComponentState {}

/// Talking back to the call's client: the same checks, redaction, budget
/// and bounds as hyper-mcp's host functions for Extism plugins.
impl bindings::toolhost::plugin::client::Host for ComponentState {
    async fn request(&mut self, method: String, params: String) -> Result<String, String> {
        let request = match method.as_str() {
            "elicitation/create" => ClientRequest::Elicitation,
            "sampling/createMessage" => ClientRequest::Sampling,
            "roots/list" => ClientRequest::Roots,
            other => {
                return Err(format!(
                    "`{other}` is not a request a plugin may make of the client (elicitation/create, \
                     sampling/createMessage, roots/list)"
                ));
            }
        };
        let max = self.core.env.limits.max_output_bytes;
        let params = super::output::parse_object(params.as_bytes(), max)
            .map_err(|problem| format!("the parameters of {request} are not usable: {problem}"))?;
        let params = self.core.checked_request(request, params).map_err(|why| format!("{request}: {why}"))?;
        let answer = self.core.ask(request, params, None).await?;
        Ok(answer.to_string())
    }

    async fn progress(&mut self, progress: f64, total: Option<f64>, message: Option<String>) {
        if !progress.is_finite() {
            return;
        }
        let total = total.filter(|t| t.is_finite()).map(|t| json!(t));
        let Some(notice) = self.core.progress_notice(json!(progress), total, message) else { return };
        self.core.tell(notice).await;
    }

    async fn notify(&mut self, method: String, params: Option<String>) -> Result<(), String> {
        // Parameters that are not a JSON object are none: a notification
        // that needs them says so.
        let max = self.core.env.limits.max_output_bytes;
        let params = params.and_then(|params| super::output::parse_object(params.as_bytes(), max).ok());
        let notice = self.core.notice(&method, params)?;
        self.core.tell(notice).await;
        Ok(())
    }
}

/// The component linker of an engine: WASI 0.2 and the `host` interface
/// (a runtime makes it once per engine).
pub(crate) fn linker(engine: &wasmtime::Engine) -> Result<Linker<ComponentState>, String> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(|e| e.to_string())?;
    super::files::cap_p2(&mut linker).map_err(|e| e.to_string())?;
    super::files::clock_p2(&mut linker).map_err(|e| e.to_string())?;
    #[cfg(feature = "wasi-http")]
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker).map_err(|e| e.to_string())?;
    bindings::Plugin::add_to_linker::<_, HasSelf<ComponentState>>(&mut linker, |state| state)
        .map_err(|e| e.to_string())?;
    Ok(linker)
}

/// The interface of what a plugin offers besides tools (`plugin-with-offers`).
const OFFERS: &str = "toolhost:plugin/offers@0.1.1";

/// The functions of [`OFFERS`], by the name of the Extism export that does
/// the same.
const OFFER_FUNCTIONS: &[(&str, &str)] = &[
    ("list_prompts", "list-prompts"),
    ("get_prompt", "get-prompt"),
    ("list_resources", "list-resources"),
    ("list_resource_templates", "list-resource-templates"),
    ("read_resource", "read-resource"),
];

/// A compiled component with its imports resolved.
pub(crate) struct ComponentModule {
    pre: bindings::PluginPre<ComponentState>,
    indices: bindings::PluginIndices,
    /// The functions of the `offers` interface it exports, if it does.
    offers: Vec<(&'static str, wasmtime::component::ComponentExportIndex)>,
    /// Its share of the cache entry it was mapped from, if it was.
    _mapping: Mapping,
}

impl ComponentModule {
    /// The same component, holding its share of the cache entry it was
    /// mapped from (for as long as the plugin holds it).
    pub(crate) fn keeping(self, mapping: Mapping) -> ComponentModule {
        ComponentModule { _mapping: mapping, ..self }
    }

    /// Check that the component is a `toolhost:plugin` and resolve its
    /// imports.
    pub(crate) fn new(linker: &Linker<ComponentState>, component: Component) -> Result<ComponentModule, String> {
        let pre = linker.instantiate_pre(&component).map_err(|e| {
            let wasi_http = component.component_type().imports(linker.engine()).any(|(name, _)| name.starts_with("wasi:http/"));
            if cfg!(not(feature = "wasi-http")) && wasi_http {
                return "it imports `wasi:http`, and this toolhost was built without its `wasi-http` feature".to_owned();
            }
            format!("its imports cannot be satisfied: {e} (a component may import `toolhost:plugin/host`, `toolhost:plugin/client`, WASI 0.2 and `wasi:http/outgoing-handler`)")
        })?;
        let not_a_plugin = |e: wasmtime::Error| {
            format!(
                "it is not a `toolhost:plugin` component ({e}); it must export `describe` and `call` as `wit/plugin.wit` says"
            )
        };
        let indices = bindings::PluginIndices::new(&pre).map_err(not_a_plugin)?;
        let pre = bindings::PluginPre::new(pre).map_err(not_a_plugin)?;
        let mut offers = Vec::new();
        if let Some(interface) = component.get_export_index(None, OFFERS) {
            for &(export, function) in OFFER_FUNCTIONS {
                let index = component
                    .get_export_index(Some(&interface), function)
                    .ok_or_else(|| format!("it exports `{OFFERS}` without its function `{function}`"))?;
                offers.push((export, index));
            }
        }
        Ok(ComponentModule { pre, indices, offers, _mapping: Mapping::default() })
    }

    /// Whether it exports the function of the Extism export `name` (one of
    /// what it offers besides tools).
    pub(crate) fn exports(&self, name: &str) -> bool {
        self.offers.iter().any(|(export, _)| *export == name)
    }

    /// A new instance under the plugin's limits.
    pub(crate) async fn instantiate(&self, env: &Arc<HostEnv>) -> Result<ComponentInstance, Fault> {
        let (core, mut wasi) = GuestCore::new(env)?;
        let state = ComponentState {
            core,
            wasi: wasi.build(),
            table: super::files::resource_table(),
            call_meta: None,
            #[cfg(feature = "wasi-http")]
            http: {
                let mut http = wasmtime_wasi_http::WasiHttpCtx::new();
                http.set_field_size_limit(super::wasi_http::MAX_FIELDS_BYTES);
                http
            },
            #[cfg(feature = "wasi-http")]
            http_hooks: super::wasi_http::Hooks::new(env.allowed_hosts.clone()),
        };
        let mut store = guest::new_store(self.pre.engine(), state);
        store.set_hostcall_fuel(guest::crossing_bytes(&env.limits));
        let ticker = env.ticker.clone();
        let _running = ticker.running();
        let deadline = store.data().core.deadline;
        let instance = guest::bounded(&ticker, deadline, self.pre.instance_pre().instantiate_async(&mut store))
            .await
            .map_err(|e| store.data().core.fault(e))?;
        let runtime = |e: wasmtime::Error| Fault::new(FaultKind::Runtime, e.to_string());
        let plugin = self.indices.load(&mut store, &instance).map_err(runtime)?;
        Ok(ComponentInstance { store, ticker: ticker.clone(), plugin, instance, offers: self.offers.clone() })
    }
}

impl Guest for ComponentState {
    fn core(&self) -> &GuestCore {
        &self.core
    }

    fn core_mut(&mut self) -> &mut GuestCore {
        &mut self.core
    }
}

/// One instance of a component plugin.
pub(crate) struct ComponentInstance {
    store: Store<ComponentState>,
    /// The runtime's ticker, kept here so that a call borrows it rather
    /// than cloning it (a reference count every core would write).
    ticker: super::ticker::Ticker,
    plugin: bindings::Plugin,
    instance: wasmtime::component::Instance,
    offers: Vec<(&'static str, wasmtime::component::ComponentExportIndex)>,
}

impl ComponentInstance {
    /// The engine its code was compiled for.
    pub(crate) fn engine(&self) -> &wasmtime::Engine {
        self.store.engine()
    }

    /// Run the `offers` function of the Extism export `export` with the
    /// same `{"request", "context"}` input an Extism plugin gets: its
    /// answer as JSON (not yet checked).
    pub(crate) async fn offer(&mut self, export: &str, input: &[u8], run: &RunOptions<'_>) -> Result<Value, RunError> {
        let Some(index) = self.offers.iter().find(|(e, _)| *e == export).map(|(_, i)| *i) else {
            return Err(RunError::Fault(Fault::new(FaultKind::Error, format!("it does not offer `{export}`"))));
        };
        let input: Value = serde_json::from_slice(input).unwrap_or(Value::Null);
        let request = &input["request"];
        self.store.data_mut().call_meta =
            input["context"]["_meta"].as_object().map(|meta| Value::Object(meta.clone()).to_string());
        guest::prepare(&mut self.store, run);
        let ticker = &self.ticker;
        let _running = ticker.running();
        let deadline = self.store.data().core.deadline;
        let fault = |store: &Store<ComponentState>, e: wasmtime::Error| RunError::Fault(store.data().core.fault(e));
        let runtime = |e: wasmtime::Error| RunError::Fault(Fault::new(FaultKind::Runtime, e.to_string()));
        let answer: Result<String, String> = match export {
            "list_prompts" | "list_resources" | "list_resource_templates" => {
                let func = self.instance.get_typed_func::<(), (String,)>(&mut self.store, index).map_err(runtime)?;
                let (answer,) = guest::bounded(ticker, deadline, func.call_async(&mut self.store, ()))
                    .await
                    .map_err(|e| fault(&self.store, e))?;
                Ok(answer)
            }
            "get_prompt" => {
                let func = self
                    .instance
                    .get_typed_func::<(&str, &str), (Result<String, String>,)>(&mut self.store, index)
                    .map_err(runtime)?;
                let name = request["name"].as_str().unwrap_or_default();
                let arguments = request.get("arguments").map_or_else(|| "{}".to_owned(), Value::to_string);
                let (answer,) =
                    guest::bounded(ticker, deadline, func.call_async(&mut self.store, (name, arguments.as_str())))
                        .await
                        .map_err(|e| fault(&self.store, e))?;
                answer
            }
            "read_resource" => {
                let func = self
                    .instance
                    .get_typed_func::<(&str,), (Result<String, String>,)>(&mut self.store, index)
                    .map_err(runtime)?;
                let uri = request["uri"].as_str().unwrap_or_default();
                let (answer,) = guest::bounded(ticker, deadline, func.call_async(&mut self.store, (uri,)))
                    .await
                    .map_err(|e| fault(&self.store, e))?;
                answer
            }
            other => return Err(RunError::Fault(Fault::new(FaultKind::Error, format!("it does not offer `{other}`")))),
        };
        self.store.data_mut().call_meta = None;
        match answer {
            Ok(text) => {
                self.store.data_mut().core.check_output_size(text.len() as u64).map_err(RunError::Fault)?;
                let max = self.store.data().core.env.limits.max_output_bytes;
                output::parse_json(text.as_bytes(), max, false)
            }
            Err(message) => Err(RunError::Fault(Fault::new(
                FaultKind::Error,
                output::shorten(message, &self.store.data().core.env.redactor),
            ))),
        }
    }

    /// Run `describe`: the tool list as the protocol's JSON.
    pub(crate) async fn describe(&mut self) -> Result<Value, RunError> {
        guest::prepare(&mut self.store, &RunOptions::default());
        self.store.data_mut().call_meta = None;
        let ticker = &self.ticker;
        let _running = ticker.running();
        let deadline = self.store.data().core.deadline;
        let tools = guest::bounded(ticker, deadline, self.plugin.call_describe(&mut self.store))
            .await
            .map_err(|e| RunError::Fault(self.store.data().core.fault(e)))?;
        let size: usize = tools.iter().map(tool_size).sum();
        self.store.data_mut().core.check_output_size(size as u64).map_err(RunError::Fault)?;
        let tools = tools.into_iter().enumerate().map(|(i, tool)| tool_json(i, tool)).collect::<Result<_, _>>()?;
        Ok(json!({ "tools": Value::Array(tools) }))
    }

    /// Run `call`: the result as the protocol's type. `meta`: the
    /// request's `_meta` (JSON text) `call-meta` answers with; `run`: the
    /// secrets this call may read, its deadline, its log sink.
    pub(crate) async fn call(
        &mut self,
        name: &str,
        arguments: &str,
        meta: Option<&str>,
        run: &RunOptions<'_>,
    ) -> Result<CallOutput, RunError> {
        guest::prepare(&mut self.store, run);
        self.store.data_mut().call_meta = meta.map(str::to_owned);
        let ticker = &self.ticker;
        let _running = ticker.running();
        let deadline = self.store.data().core.deadline;
        let outcome = guest::bounded(ticker, deadline, self.plugin.call_call(&mut self.store, name, arguments))
            .await
            .map_err(|e| RunError::Fault(self.store.data().core.fault(e)))?;
        let result = match outcome {
            Ok(result) => result,
            // The plugin's messages are cut short (`output::shorten`).
            Err(CallError::Failed(message)) => {
                return Err(RunError::Fault(Fault::new(
                    FaultKind::Error,
                    output::shorten(message, &self.store.data().core.env.redactor),
                )));
            }
            Err(CallError::UnknownTool(tool)) => {
                return Err(RunError::Fault(Fault::new(
                    FaultKind::Error,
                    format!(
                        "the plugin says it has no tool `{}`, though its `describe` lists it",
                        output::shorten(tool, &self.store.data().core.env.redactor)
                    ),
                )));
            }
            Err(CallError::InvalidArguments(message)) => {
                // A tool error, as the Extism flavour's SDK answers: the
                // model reads it and can correct its arguments.
                return Ok(CallOutput::Typed(protocol::CallToolResult::error(format!(
                    "invalid arguments for tool `{name}`: {}",
                    output::shorten(message, &self.store.data().core.env.redactor)
                ))));
            }
        };
        if result.content.len() > output::MAX_CONTENT_ITEMS {
            return Err(RunError::Fault(Fault::new(
                FaultKind::OutputTooLarge,
                format!(
                    "{} content items, over the limit of {} per result",
                    result.content.len(),
                    output::MAX_CONTENT_ITEMS
                ),
            )));
        }
        self.store.data_mut().core.check_output_size(result_size(&result) as u64).map_err(RunError::Fault)?;
        typed_result(result).map(CallOutput::Typed)
    }

    /// Bytes this instance holds against its memory limit.
    pub(crate) fn memory_used(&self) -> usize {
        self.store.data().core.memory.used()
    }

    /// What the last run used.
    pub(crate) fn usage(&self) -> Usage {
        guest::usage(&self.store)
    }

    /// Let go of what the last run's caller lent it ([`guest::release`]),
    /// and the request's `_meta` that `call-meta` answered with.
    pub(crate) fn release(&mut self) {
        guest::release(&mut self.store);
        self.store.data_mut().call_meta = None;
    }
}

/// About the bytes a tool description costs (for the output cap): what it
/// carries and a fixed overhead.
fn tool_size(tool: &Tool) -> usize {
    output::TOOL_WEIGHT
        + tool.name.len()
        + tool.title.as_ref().map_or(0, String::len)
        + tool.description.as_ref().map_or(0, String::len)
        + tool.input_schema.len()
        + tool.output_schema.as_ref().map_or(0, String::len)
        + tool.meta.as_ref().map_or(0, String::len)
        + tool.tags.as_ref().map_or(0, |tags| tags.iter().map(String::len).sum())
}

/// About the bytes a result costs in the host (for the output cap): what
/// it carries, and a fixed overhead per content item, so that empty items
/// are not free.
fn result_size(result: &CallToolResult) -> usize {
    let content: usize = result
        .content
        .iter()
        .map(|item| {
            let kind = match &item.kind {
                ContentKind::Text(text) => text.len(),
                ContentKind::Image(binary) | ContentKind::Audio(binary) => binary.data.len() * 4 / 3,
                ContentKind::Resource(resource) => match &resource.body {
                    ResourceBody::Text(text) => text.len(),
                    ResourceBody::Blob(blob) => blob.len() * 4 / 3,
                },
                ContentKind::ResourceLink(link) => link.uri.len() + link.name.len(),
            };
            output::CONTENT_ITEM_WEIGHT + kind + item.meta.as_ref().map_or(0, String::len)
        })
        .sum();
    content + result.structured_content.as_ref().map_or(0, String::len) + result.meta.as_ref().map_or(0, String::len)
}

/// A JSON text field, parsed; a field that is not JSON is an output problem
/// naming its pointer.
fn parse_field(pointer: &str, text: &str) -> Result<Value, RunError> {
    serde_json::from_str(text)
        .map_err(|e| RunError::Output(OutputProblem::NotJson { message: format!("`{pointer}` is not JSON text: {e}") }))
}

fn insert_some(map: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    if let Some(value) = value {
        map.insert(key.to_owned(), value);
    }
}

fn tool_json(index: usize, tool: Tool) -> Result<Value, RunError> {
    let pointer = |field: &str| format!("/tools/{index}/{field}");
    let mut map = Map::new();
    map.insert("name".to_owned(), Value::String(tool.name));
    insert_some(&mut map, "title", tool.title.map(Value::String));
    insert_some(&mut map, "description", tool.description.map(Value::String));
    map.insert("inputSchema".to_owned(), parse_field(&pointer("inputSchema"), &tool.input_schema)?);
    if let Some(schema) = tool.output_schema {
        map.insert("outputSchema".to_owned(), parse_field(&pointer("outputSchema"), &schema)?);
    }
    if let Some(a) = tool.annotations {
        let mut annotations = Map::new();
        insert_some(&mut annotations, "title", a.title.map(Value::String));
        insert_some(&mut annotations, "readOnlyHint", a.read_only_hint.map(Value::Bool));
        insert_some(&mut annotations, "destructiveHint", a.destructive_hint.map(Value::Bool));
        insert_some(&mut annotations, "idempotentHint", a.idempotent_hint.map(Value::Bool));
        insert_some(&mut annotations, "openWorldHint", a.open_world_hint.map(Value::Bool));
        map.insert("annotations".to_owned(), Value::Object(annotations));
    }
    insert_some(&mut map, "version", tool.version.map(Value::String));
    insert_some(&mut map, "namespace", tool.namespace.map(Value::String));
    insert_some(&mut map, "tags", tool.tags.map(|tags| tags.into_iter().map(Value::String).collect()));
    if let Some(meta) = tool.meta {
        map.insert("_meta".to_owned(), parse_field(&pointer("_meta"), &meta)?);
    }
    Ok(Value::Object(map))
}

fn base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A JSON text field that must hold an object (`_meta`).
fn object_field(pointer: &str, text: &str) -> Result<JsonObject, RunError> {
    match parse_field(pointer, text)? {
        Value::Object(map) => Ok(map),
        other => Err(RunError::Output(OutputProblem::Invalid {
            violations: vec![Violation {
                instance_path: pointer.to_owned(),
                keyword: "type".to_owned(),
                message: format!("{other} is not of types \"null\", \"object\""),
            }],
        })),
    }
}

fn annotations(a: Annotations) -> protocol::Annotations {
    protocol::Annotations {
        audience: a.audience.map(|roles| {
            roles
                .into_iter()
                .map(|r| match r {
                    Role::Assistant => protocol::Role::Assistant,
                    Role::User => protocol::Role::User,
                })
                .collect()
        }),
        priority: a.priority,
        last_modified: a.last_modified,
        extra: JsonObject::new(),
    }
}

/// Push the protocol's form of content item `index` onto `out`. (Pushed
/// here, not returned: the protocol's `Content` is ~300 bytes, and a result
/// of one moved it through the `Result` and the collecting iterator, 3 %
/// of a small call's time in `memmove`.)
fn push_content(out: &mut Vec<protocol::Content>, index: usize, item: Content) -> Result<(), RunError> {
    match item {
        Content { kind: ContentKind::Text(text), annotations: None, meta: None } => {
            out.push(protocol::Content::Text(protocol::TextContent {
                text,
                annotations: None,
                meta: None,
                extra: JsonObject::new(),
            }));
        }
        item => out.push(content(index, item)?),
    }
    Ok(())
}

fn content(index: usize, item: Content) -> Result<protocol::Content, RunError> {
    let meta = item.meta.map(|m| object_field(&format!("/content/{index}/_meta"), &m)).transpose()?;
    let ann = item.annotations.map(annotations);
    let binary = |b: bindings::toolhost::plugin::types::Binary| protocol::BinaryContent {
        data: base64(&b.data),
        mime_type: b.mime_type,
        annotations: ann.clone(),
        meta: meta.clone(),
        extra: JsonObject::new(),
    };
    Ok(match item.kind {
        ContentKind::Text(text) => {
            protocol::Content::Text(protocol::TextContent { text, annotations: ann, meta, extra: JsonObject::new() })
        }
        ContentKind::Image(b) => protocol::Content::Image(binary(b)),
        ContentKind::Audio(b) => protocol::Content::Audio(binary(b)),
        ContentKind::Resource(resource) => {
            let (text, blob) = match resource.body {
                ResourceBody::Text(text) => (Some(text), None),
                ResourceBody::Blob(blob) => (None, Some(base64(&blob))),
            };
            protocol::Content::Resource(protocol::EmbeddedResource {
                resource: protocol::ResourceContents {
                    uri: resource.uri,
                    mime_type: resource.mime_type,
                    text,
                    blob,
                    meta: None,
                    extra: JsonObject::new(),
                },
                annotations: ann,
                meta,
                extra: JsonObject::new(),
            })
        }
        ContentKind::ResourceLink(link) => protocol::Content::ResourceLink(protocol::ResourceLink {
            uri: link.uri,
            name: link.name,
            title: link.title,
            description: link.description,
            mime_type: link.mime_type,
            size: link.size,
            annotations: ann,
            meta,
            extra: JsonObject::new(),
        }),
    })
}

/// The protocol's result, typed: a WIT result has the protocol's shape by
/// construction, so only its JSON text fields are parsed here (and what
/// types cannot say is checked by `validate::check_typed_result`).
fn typed_result(result: CallToolResult) -> Result<protocol::CallToolResult, RunError> {
    let mut content = Vec::with_capacity(result.content.len());
    for (index, item) in result.content.into_iter().enumerate() {
        push_content(&mut content, index, item)?;
    }
    Ok(protocol::CallToolResult {
        content,
        is_error: result.is_error.then_some(true),
        structured_content: result.structured_content.map(|s| parse_field("/structuredContent", &s)).transpose()?,
        meta: result.meta.map(|m| object_field("/_meta", &m)).transpose()?,
        extra: JsonObject::new(),
    })
}
