//! What a plugin offers besides tools: prompts, resources, resource
//! templates and completions, through hyper-mcp v2's optional exports
//! (`list_prompts`, `get_prompt`, `list_resources`,
//! `list_resource_templates`, `read_resource`, `complete`,
//! `on_roots_list_changed`), which a servlet may export too.
//!
//! Each runs on a pooled instance like a call: counted by the runtime,
//! within the plugin's limits and the caller's deadline, cancellable, its
//! client reachable; its output size-capped, redacted of the plugin's
//! secrets and checked against the protocol (deserialized into the
//! protocol's types, plus what types cannot say) before anyone sees it.

use base64::Engine as _;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use toolhost_protocol::{
    CompleteResult, CompletionReference, GetPromptResult, JsonObject, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ReadResourceResult,
};

use super::{Cancellable, Job, Plugin, Ran, redacted_output, run_error};
use crate::context::CallContext;
use crate::error::{Error, Operation, OutputProblem, Violation};
use crate::runtime::guest::RunOptions;
use crate::validate::protocol_violation;

/// What a plugin offers besides tools, by the exports it has.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Offers {
    /// Prompts (`list_prompts`, `get_prompt`).
    pub prompts: bool,
    /// Resources (`list_resources`, `read_resource`).
    pub resources: bool,
    /// Resource templates (`list_resource_templates`, read with `read_resource`).
    pub resource_templates: bool,
    /// Completions of prompt arguments and template variables (`complete`).
    pub completions: bool,
}

impl Offers {
    /// Whether it offers anything besides tools.
    pub fn any(&self) -> bool {
        self.prompts || self.resources || self.resource_templates || self.completions
    }
}

/// Most completion values a result may hold (the protocol's limit).
const MAX_COMPLETION_VALUES: usize = 100;

impl Plugin {
    /// What the plugin offers besides tools.
    pub fn offers(&self) -> Offers {
        let module = &self.inner.module;
        Offers {
            prompts: module.exports("list_prompts") && module.exports("get_prompt"),
            resources: module.exports("list_resources") && module.exports("read_resource"),
            resource_templates: module.exports("list_resource_templates") && module.exports("read_resource"),
            completions: module.exports("complete"),
        }
    }

    /// The plugin's prompts (none when it offers none).
    pub async fn list_prompts(&self, context: &CallContext) -> Result<ListPromptsResult, Error> {
        if !self.offers().prompts {
            return Ok(ListPromptsResult::default());
        }
        self.offer("list_prompts", "the prompt list", None, context).await
    }

    /// The prompt `name` with `arguments` (string values) filled in.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        context: &CallContext,
    ) -> Result<GetPromptResult, Error> {
        let mut request = json!({"name": name});
        if let Some(arguments) = arguments {
            request["arguments"] = Value::Object(arguments);
        }
        self.offer("get_prompt", &format!("prompt `{name}`"), Some(request), context).await
    }

    /// The plugin's resources (none when it offers none).
    pub async fn list_resources(&self, context: &CallContext) -> Result<ListResourcesResult, Error> {
        if !self.offers().resources {
            return Ok(ListResourcesResult::default());
        }
        self.offer("list_resources", "the resource list", None, context).await
    }

    /// The plugin's resource templates (none when it offers none).
    pub async fn list_resource_templates(&self, context: &CallContext) -> Result<ListResourceTemplatesResult, Error> {
        if !self.offers().resource_templates {
            return Ok(ListResourceTemplatesResult::default());
        }
        self.offer("list_resource_templates", "the resource template list", None, context).await
    }

    /// Read the resource `uri`.
    pub async fn read_resource(&self, uri: &str, context: &CallContext) -> Result<ReadResourceResult, Error> {
        let what = format!("resource `{uri}`");
        let result: ReadResourceResult = self.offer("read_resource", &what, Some(json!({"uri": uri})), context).await?;
        for (i, contents) in result.contents.iter().enumerate() {
            let problem = match (&contents.text, &contents.blob) {
                (Some(_), None) => None,
                (None, Some(blob)) if base64::engine::general_purpose::STANDARD.decode(blob).is_err() => {
                    Some(("blob", "`blob` is not base64".to_owned()))
                }
                (None, Some(_)) => None,
                _ => Some(("text", "a resource's contents have exactly one of `text` and `blob`".to_owned())),
            };
            if let Some((field, message)) = problem {
                return Err(self.invalid_offer(
                    &what,
                    vec![Violation {
                        instance_path: format!("/contents/{i}/{field}"),
                        keyword: "protocol".to_owned(),
                        message,
                    }],
                ));
            }
        }
        Ok(result)
    }

    /// Suggestions for the `argument` (name, value typed so far) of a
    /// prompt or resource template; `arguments`: the other arguments'
    /// values already given. None when the plugin offers no completions.
    pub async fn complete(
        &self,
        reference: &CompletionReference,
        argument: (&str, &str),
        arguments: Option<JsonObject>,
        context: &CallContext,
    ) -> Result<CompleteResult, Error> {
        if !self.offers().completions {
            return Ok(CompleteResult::default());
        }
        // hyper-mcp passes the reference's type without its `ref/` prefix.
        let reference = match reference {
            CompletionReference::Prompt { name } => json!({"type": "prompt", "name": name}),
            CompletionReference::Resource { uri } => json!({"type": "resource", "uri": uri}),
        };
        let mut request = json!({"ref": reference, "argument": {"name": argument.0, "value": argument.1}});
        if let Some(arguments) = arguments {
            request["context"] = json!({"arguments": arguments});
        }
        let what = format!("completion of `{}`", argument.0);
        let result: CompleteResult = self.offer("complete", &what, Some(request), context).await?;
        if result.completion.values.len() > MAX_COMPLETION_VALUES {
            return Err(self.invalid_offer(
                &what,
                vec![Violation {
                    instance_path: "/completion/values".to_owned(),
                    keyword: "maxItems".to_owned(),
                    message: format!(
                        "{} values, over the protocol's {MAX_COMPLETION_VALUES}",
                        result.completion.values.len()
                    ),
                }],
            ));
        }
        Ok(result)
    }

    /// Tell the plugin the client's roots changed (`on_roots_list_changed`;
    /// nothing when it does not export it).
    pub async fn roots_list_changed(&self, context: &CallContext) -> Result<(), Error> {
        if !self.inner.module.exports("on_roots_list_changed") {
            return Ok(());
        }
        self.run_offer("on_roots_list_changed", "the roots change", None, false, context).await.map(|_| ())
    }

    fn invalid_offer(&self, what: &str, violations: Vec<Violation>) -> Error {
        Error::InvalidOutput {
            plugin: self.inner.name.clone(),
            operation: Operation::Offer(what.to_owned()),
            problem: OutputProblem::Invalid { violations },
        }
    }

    /// Run `export` and check its output as a `T`.
    async fn offer<T: DeserializeOwned>(
        &self,
        export: &'static str,
        what: &str,
        request: Option<Value>,
        context: &CallContext,
    ) -> Result<T, Error> {
        let raw = self.run_offer(export, what, request, true, context).await?;
        serde_json::from_value(raw).map_err(|e| self.invalid_offer(what, vec![protocol_violation(&e)]))
    }

    /// Run `export` with `{"request", "context"}` on a pooled instance: its
    /// output, redacted.
    async fn run_offer(
        &self,
        export: &'static str,
        what: &str,
        request: Option<Value>,
        with_request_context: bool,
        context: &CallContext,
    ) -> Result<Value, Error> {
        let inner = &self.inner;
        if !inner.module.exports(export) {
            return Err(Error::NotOffered {
                what: format!("{what} (plugin `{}` does not export `{export}`)", inner.name),
            });
        }
        let _counted = inner.runtime.enter(&inner.name)?;
        let meta = context.plugin_meta().map(std::borrow::Cow::into_owned).unwrap_or_default();
        let mut input = JsonObject::new();
        if let Some(request) = request {
            input.insert("request".to_owned(), request);
        }
        let mut request_context = JsonObject::new();
        if with_request_context {
            let id = context.call_id().map_or_else(|| format!("toolhost-{export}"), str::to_owned);
            request_context.insert("id".to_owned(), Value::String(id));
        }
        request_context.insert("_meta".to_owned(), Value::Object(meta));
        input.insert("context".to_owned(), Value::Object(request_context));
        let input = serde_json::to_vec(&input).map_err(|e| Error::Host(format!("cannot encode the request: {e}")))?;
        if input.len() > inner.env.limits.max_input_bytes {
            return Err(Error::Host(format!(
                "the request for {what} is {} bytes, over the plugin's limit of {} bytes",
                input.len(),
                inner.env.limits.max_input_bytes
            )));
        }
        let run = RunOptions::for_call(context, None);
        let work = Box::pin(async {
            match inner.run(Job::Offer(export, &input, &run), None).await {
                Ok(Ran::Offer(raw)) => Ok(raw),
                Ok(_) => Err(Error::Host(format!("another export ran instead of `{export}`"))),
                Err(error) => Err(run_error(&inner.name, Operation::Offer(what.to_owned()), error)),
            }
        });
        let outcome =
            Cancellable::new(work, context.cancellation(), inner.runtime.cancellation(), &inner.name, export).await;
        let raw = outcome.map_err(|error| inner.scrub(error))?;
        redacted_output(&inner.name, Operation::Offer(what.to_owned()), raw, &inner.env)
    }
}
