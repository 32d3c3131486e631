//! Calling a plugin's tools: arguments checked, approval asked, an
//! instance taken from the pool, the guest run under its deadline and
//! cancellation, and the result checked and redacted.

use super::*;

impl Plugin {
    /// Call a tool.
    ///
    /// `arguments` must be a JSON object, or `null` for none (the same as
    /// `{}`). A tool the plugin does not describe is refused before the plugin
    /// runs. A tool error is `Ok` with `isError: true`; everything else that
    /// goes wrong is a typed [`Error`].
    ///
    /// The guest runs on an instance of its own, taken from the plugin's pool
    /// (waiting for one if all are busy); an instance that faults is
    /// discarded. It runs on the calling task, in slices of at most one epoch
    /// tick (1 ms) between which it yields to the executor: it never holds a
    /// tokio worker for long, and no thread hand-off is paid per call.
    ///
    /// Dropping the returned future (a cancelled request, a `select!` that
    /// went the other way) stops the guest at once: its instance is
    /// discarded.
    pub async fn call_tool(&self, name: &str, arguments: Value) -> Result<CallToolResult, Error> {
        self.call(name, Arguments::Check(arguments), Asking::Nobody, &CallContext::default()).await
    }

    /// Call a tool as [`call_tool`](Self::call_tool) does, in a context:
    /// the caller's deadline, cancellation token, call id, user id, `_meta`
    /// and log sink ([`CallContext`]).
    pub async fn call_tool_with(
        &self,
        name: &str,
        arguments: Value,
        context: &CallContext,
    ) -> Result<CallToolResult, Error> {
        self.call(name, Arguments::Check(arguments), Asking::Nobody, context).await
    }

    /// Call a tool with arguments that are *not* checked against its
    /// `inputSchema`: the plugin gets them as they are. The result is checked
    /// as [`call_tool`](Self::call_tool) checks it.
    ///
    /// This is for testing how a plugin copes with bad input (as
    /// `toolhost check` does): a plugin must answer arguments it cannot use
    /// with a tool error, not a crash, since not every host validates them.
    pub async fn call_tool_unvalidated(&self, name: &str, arguments: JsonObject) -> Result<CallToolResult, Error> {
        self.call(name, Arguments::Unchecked(arguments), Asking::Nobody, &CallContext::default()).await
    }

    /// Every call: counted by the runtime (refused once it is shutting
    /// down), in a `toolhost.call` span (named by `label`, the tool's name
    /// by default) and reported to the runtime's observer; its arguments
    /// checked, approval asked, the guest run; stopped when the caller or
    /// the runtime cancels it.
    pub(crate) async fn call(
        &self,
        name: &str,
        arguments: Arguments,
        asking: Asking<'_>,
        context: &CallContext,
    ) -> Result<CallToolResult, Error> {
        self.call_labelled((&self.inner.name, name), name, arguments, asking, context).await
    }

    /// [`call`](Self::call), the span naming the call `label` (toolset and
    /// namespaced name, for a registry).
    pub(crate) async fn call_labelled(
        &self,
        label: (&str, &str),
        name: &str,
        arguments: Arguments,
        asking: Asking<'_>,
        context: &CallContext,
    ) -> Result<CallToolResult, Error> {
        // The call's state (the guest run, the checks, the span) lives on
        // the heap from here on, so that moving the caller's future (into a
        // task, through `block_on`) copies a pointer, not it.
        Box::pin(self.call_in_place(label, name, arguments, asking, context)).await
    }

    /// [`call_labelled`](Self::call_labelled)'s work.
    pub(super) async fn call_in_place(
        &self,
        label: (&str, &str),
        name: &str,
        arguments: Arguments,
        asking: Asking<'_>,
        context: &CallContext,
    ) -> Result<CallToolResult, Error> {
        let inner = &self.inner;
        let meter = Meter::default();
        // What the guest used is measured only for an observer.
        let metered = inner.runtime.observer().is_some().then_some(&meter);
        let trace = CallTrace {
            plugin: label.0,
            tool: label.1,
            call_id: context.call_id(),
            observer: inner.runtime.observer().map(|o| &**o),
            meter: &meter,
        };
        // Boxed: a future passed by value into an `async fn` is held twice
        // in it (as the argument, and as what it awaits), and `traced_call`
        // is such a layer. Unboxed, the call's state was 7.4 KB, copied
        // into place on every call; boxed, the layers around it move a
        // pointer.
        let work = Box::pin(async {
            let index = self.index_of(name)?;
            let arguments = match arguments {
                Arguments::Check(arguments) => self.checked_arguments(index, name, arguments).await?,
                Arguments::Unchecked(arguments) => arguments,
            };
            if let Some(denied) = asking.ask(self, name, &arguments).await {
                return Ok(denied);
            }
            self.run_call(index, name, arguments, context, metered).await
        });
        let work = Cancellable::new(work, context.cancellation(), inner.runtime.cancellation(), &inner.name, name);
        crate::telemetry::traced_call(&trace, async {
            // Counted first: a runtime shut down refuses the call before a
            // cancelled caller's token is looked at.
            let _counted = inner.runtime.enter(&inner.name)?;
            work.await
        })
        .await
    }

    /// Encode the request, run `call` of the tool at `index`, check and
    /// scrub the result. The arguments are not checked here: callers have
    /// done so, or mean not to.
    pub(super) async fn run_call(
        &self,
        index: usize,
        name: &str,
        arguments: JsonObject,
        context: &CallContext,
        meter: Option<&Meter>,
    ) -> Result<CallToolResult, Error> {
        let request = self.prepare_call(index, name, arguments, context)?;
        let run = RunOptions::for_call(context, Some(&self.inner.tool_secrets[index]));
        let outcome = match self.inner.call_unchecked(name, &request, &run, meter).await {
            Ok(output) => self.checked_output(index, name, output).await,
            Err(error) => Err(error),
        };
        self.inner.scrubbed(name, outcome)
    }

    /// [`validate_arguments`](Self::validate_arguments), on a blocking
    /// thread when the arguments are large for their schema.
    pub(super) async fn checked_arguments(
        &self,
        index: usize,
        name: &str,
        arguments: Value,
    ) -> Result<JsonObject, Error> {
        let arguments = self.arguments_object(name, arguments)?;
        let schema = &self.inner.checked[index].input;
        if !self.inner.validation.arguments || fits_inline(&arguments, schema.cost, schema.reads_text) {
            return self.inner.check_arguments(index, name, arguments, Weighed::FitsInline);
        }
        let (inner, name) = (Arc::clone(&self.inner), name.to_owned());
        off_executor(move || inner.check_arguments(index, &name, arguments, Weighed::NotYet)).await
    }

    /// A call's output, checked as the options say: on a blocking thread
    /// when it is large for its schemas.
    pub(super) async fn checked_output(
        &self,
        index: usize,
        tool: &str,
        output: CallOutput,
    ) -> Result<CallToolResult, Error> {
        let inner = &self.inner;
        if !inner.validation.results || inner.output_fits_inline(index, &output) {
            return inner.check_call_output(tool, Some(index), output, Weighed::FitsInline);
        }
        let (inner, tool) = (Arc::clone(&self.inner), tool.to_owned());
        off_executor(move || inner.check_call_output(&tool, Some(index), output, Weighed::NotYet)).await
    }

    /// Check arguments for a tool as [`call_tool`](Self::call_tool) does
    /// before the plugin runs, without calling it: the tool must exist, the
    /// arguments must be an object (or `null`) valid against its
    /// `inputSchema`. Returns the arguments as an object.
    pub fn validate_arguments(&self, name: &str, arguments: Value) -> Result<JsonObject, Error> {
        let index = self.index_of(name)?;
        let arguments = self.arguments_object(name, arguments)?;
        self.inner.check_arguments(index, name, arguments, Weighed::NotYet)
    }

    /// The arguments if they are an object (`null` is `{}`).
    pub(super) fn arguments_object(&self, name: &str, arguments: Value) -> Result<Value, Error> {
        match arguments {
            Value::Null => Ok(Value::Object(JsonObject::new())),
            object @ Value::Object(_) => Ok(object),
            other => Err(self.inner.invalid_arguments(
                name,
                vec![Violation {
                    instance_path: String::new(),
                    keyword: "type".to_owned(),
                    message: format!("arguments must be a JSON object, not {}", json_type_name(&other)),
                }],
            )),
        }
    }

    /// Check a result as [`call_tool`](Self::call_tool) checks what a tool
    /// returns: against the protocol and the tool's `outputSchema`.
    pub fn validate_result(&self, name: &str, result: Value) -> Result<CallToolResult, Error> {
        self.inner.check_output(name, self.inner.index.get(name).copied(), result, Weighed::NotYet)
    }

    /// The secrets a tool declares that were not handed over: not granted,
    /// or not available from the provider. Its calls are refused.
    pub fn missing_secrets(&self, name: &str) -> Vec<&str> {
        self.missing_secret_reasons(name).into_iter().map(|(id, _)| id).collect()
    }

    /// [`missing_secrets`](Self::missing_secrets), each with why it is missing.
    pub fn missing_secret_reasons(&self, name: &str) -> Vec<(&str, MissingSecretReason)> {
        self.inner.index.get(name).map(|&i| self.missing_secrets_at(i).collect()).unwrap_or_default()
    }

    /// The missing secrets of the tool at `index`, with why.
    pub(super) fn missing_secrets_at(&self, index: usize) -> impl Iterator<Item = (&str, MissingSecretReason)> {
        self.inner.checked[index]
            .requirements
            .secrets
            .iter()
            .filter_map(|s| self.inner.missing_secrets.get_key_value(&s.id))
            .map(|(id, reason)| (id.as_str(), *reason))
    }

    /// The position of a tool the plugin describes, or `UnknownTool`.
    pub(super) fn index_of(&self, name: &str) -> Result<usize, Error> {
        self.inner.index.get(name).copied().ok_or_else(|| {
            let mut available: Vec<String> = self.inner.index.keys().cloned().collect();
            available.sort();
            Error::UnknownTool { plugin: self.inner.name.clone(), tool: name.to_owned(), available }
        })
    }

    /// Check the tool's secrets, its user id and the request's size, and
    /// encode it: with the caller's `_meta` (toolhost's own keys dropped),
    /// and the user id for a tool that declares it needs one.
    pub(super) fn prepare_call(
        &self,
        index: usize,
        name: &str,
        arguments: JsonObject,
        context: &CallContext,
    ) -> Result<Payload, Error> {
        if let Some((secret, reason)) = self.missing_secrets_at(index).next() {
            return Err(Error::MissingSecret {
                plugin: self.inner.name.clone(),
                tool: name.to_owned(),
                secret: secret.to_owned(),
                reason,
            });
        }
        let user_id = if self.inner.checked[index].requirements.user_id {
            let Some(user) = context.user_id() else {
                return Err(Error::MissingUserId { plugin: self.inner.name.clone(), tool: name.to_owned() });
            };
            Some(user)
        } else {
            None
        };
        let invalid = |violations| self.inner.invalid_arguments(name, violations);
        let encoding = |e: serde_json::Error| Error::Host(format!("cannot encode the request: {e}"));
        // The `_meta` the plugin sees: the caller's, less the host's keys,
        // and the user id when the tool asks for it.
        // (Borrowed, not copied, unless it changes.)
        let meta = match (context.plugin_meta(), user_id) {
            (meta, None) => meta,
            (meta, Some(user)) => {
                let mut meta = meta.map(std::borrow::Cow::into_owned).unwrap_or_default();
                meta.insert(USER_ID_META_KEY.to_owned(), Value::String(user.to_owned()));
                Some(std::borrow::Cow::Owned(meta))
            }
        };
        let meta = meta.filter(|meta| !meta.is_empty());
        let payload = match self.inner.module.kind() {
            PluginKind::Component => Payload::Component {
                name: name.to_owned(),
                arguments: encode_object(&arguments),
                meta: meta.as_deref().map(encode_object),
            },
            PluginKind::Builtin => {
                Payload::Builtin { name: name.to_owned(), arguments, meta: meta.map(std::borrow::Cow::into_owned) }
            }
            _ if self.inner.module.interface() == Some(Interface::V2) => {
                // hyper-mcp v2: `{"request": params, "context": {"id", "_meta"}}`.
                let meta = meta.map(std::borrow::Cow::into_owned);
                let mut params = CallToolRequest::new(name, Some(arguments)).params;
                params.meta = meta.clone();
                let context = serde_json::json!({
                    "id": context.call_id().unwrap_or("toolhost-call"),
                    "_meta": meta.map(Value::Object).unwrap_or_else(|| Value::Object(JsonObject::new())),
                });
                let input = serde_json::json!({"request": params, "context": context});
                Payload::Extism(serde_json::to_vec(&input).map_err(encoding)?)
            }
            _ => Payload::Extism(encode_call(name, &arguments, meta.as_deref())),
        };
        if payload.len() > self.inner.env.limits.max_input_bytes {
            return Err(invalid(vec![Violation {
                instance_path: String::new(),
                keyword: "maxInputBytes".to_owned(),
                message: format!(
                    "the request is {} bytes, over the limit of {} bytes",
                    payload.len(),
                    self.inner.env.limits.max_input_bytes
                ),
            }]));
        }
        Ok(payload)
    }
}

impl Plugin {
    /// Call a tool as [`call_tool`](Self::call_tool) does, asking
    /// `approver` first when `rules` require approval for it (e.g.
    /// [`ToolApprovals::from_annotations`] for tools that do not say they
    /// are harmless). A denial is an `isError` result naming the reason;
    /// the plugin does not run.
    pub async fn call_tool_approved(
        &self,
        name: &str,
        arguments: Value,
        rules: &ToolApprovals,
        approver: &dyn Approver,
    ) -> Result<CallToolResult, Error> {
        self.call(name, Arguments::Check(arguments), Asking::Rules(rules, approver), &CallContext::default()).await
    }
}

/// A call's arguments, as the caller hands them over.
pub(crate) enum Arguments {
    /// To be checked against the tool's `inputSchema`.
    Check(Value),
    /// Not to be checked.
    Unchecked(JsonObject),
}

/// Whom a call asks for approval, once its arguments are checked.
pub(crate) enum Asking<'a> {
    /// Nobody.
    Nobody,
    /// `approver`, when the rules require approval for the tool.
    Rules(&'a ToolApprovals, &'a dyn Approver),
    /// `approver`, about this registry tool (which requires approval).
    Registered(&'a RegisteredTool, &'a dyn Approver),
}

impl Asking<'_> {
    /// `None` to go on, or the `isError` result of a denial.
    pub(super) async fn ask(&self, plugin: &Plugin, name: &str, arguments: &JsonObject) -> Option<CallToolResult> {
        match self {
            Asking::Nobody => None,
            // (Boxed, as the rarer paths of a call are.)
            Asking::Registered(tool, approver) => Box::pin(approval::ask(*approver, tool, arguments)).await,
            Asking::Rules(rules, approver) => {
                let tool = plugin.tool(name).filter(|tool| rules.requires_approval(tool))?;
                let registered = RegisteredTool {
                    name: tool.name.clone(),
                    toolset: plugin.name().to_owned(),
                    source: plugin.name().to_owned(),
                    tool: tool.clone(),
                    enabled: true,
                    disabled_reason: None,
                    requires_approval: true,
                    required_scopes: Vec::new(),
                };
                Box::pin(approval::ask(*approver, &registered, arguments)).await
            }
        }
    }
}

/// Run `work` unless the caller's token or the runtime's is cancelled
/// first: then it is dropped (its guest stopped where it is, its instance
/// discarded) and the call is [`Error::Cancelled`]. A call cancelled before
/// it starts does not start. The tokens are waited on only once the work
/// waits: a call that finishes in one poll (most do) builds no waiter.
///
/// Written out rather than as `tokio::select!` over the three futures,
/// which builds both waiters for every call and holds them in its state,
/// copied into each layer that awaits it.
pub(super) struct Cancellable<'a, W> {
    work: Pin<Box<W>>,
    caller: Option<&'a CancellationToken>,
    runtime: &'a CancellationToken,
    plugin: &'a str,
    tool: &'a str,
    started: bool,
    /// The tokens' waiters (the caller's, if it has a token, and the
    /// runtime's), made once the work first waits.
    waiting: Option<(Option<Waiter<'a>>, Waiter<'a>)>,
}

/// A token's waiter, pinned where it is made.
pub(super) type Waiter<'a> = Pin<Box<WaitForCancellationFuture<'a>>>;

impl<'a, W> Cancellable<'a, W> {
    pub(super) fn new(
        work: Pin<Box<W>>,
        caller: Option<&'a CancellationToken>,
        runtime: &'a CancellationToken,
        plugin: &'a str,
        tool: &'a str,
    ) -> Self {
        Cancellable { work, caller, runtime, plugin, tool, started: false, waiting: None }
    }

    pub(super) fn cancelled(&self, reason: &str) -> Error {
        Error::Cancelled { plugin: self.plugin.to_owned(), tool: self.tool.to_owned(), reason: reason.to_owned() }
    }
}

impl<T, W: Future<Output = Result<T, Error>>> Future for Cancellable<'_, W> {
    type Output = Result<T, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<Self::Output> {
        // (Unpin: the work and the waiters are pinned in their boxes.)
        let this = self.get_mut();
        if !this.started {
            this.started = true;
            if this.caller.is_some_and(CancellationToken::is_cancelled) {
                return Poll::Ready(Err(this.cancelled("its caller cancelled it")));
            }
        }
        // The work first, then the caller, then the runtime.
        if let Poll::Ready(outcome) = this.work.as_mut().poll(cx) {
            return Poll::Ready(outcome);
        }
        let (caller, runtime) = (this.caller, this.runtime);
        let (by_caller, by_runtime) = this
            .waiting
            .get_or_insert_with(|| (caller.map(|token| Box::pin(token.cancelled())), Box::pin(runtime.cancelled())));
        if by_caller.as_mut().is_some_and(|waiter| waiter.as_mut().poll(cx).is_ready()) {
            return Poll::Ready(Err(this.cancelled("its caller cancelled it")));
        }
        if by_runtime.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(this.cancelled("the runtime shut down")));
        }
        Poll::Pending
    }
}

impl Inner {
    /// Redact the sensitive values (handed-out secrets, secret config
    /// values) from a finished call's result, or refuse it as the policy
    /// says; and from its error.
    pub(super) fn scrubbed(&self, tool: &str, outcome: Result<CallToolResult, Error>) -> Result<CallToolResult, Error> {
        let result = outcome.map_err(|error| self.scrub(error))?;
        let leak = |secrets: Vec<String>| Error::InvalidOutput {
            plugin: self.name.clone(),
            operation: Operation::Tool(tool.to_owned()),
            problem: OutputProblem::SecretLeak { secrets },
        };
        let found = match self.secret_output {
            SecretOutput::Refuse => {
                let found = self.redactor.scan_result(&result);
                if found.is_empty() {
                    return Ok(result);
                }
                tracing::warn!(plugin = %self.name, tool, secrets = ?found, "a result contained secret values; refused");
                return Err(leak(found));
            }
            SecretOutput::Redact => match self.redactor.redact_result(result, self.env.limits.max_output_bytes) {
                Redacted::Clean(result) => return Ok(result),
                Redacted::Replaced(result, found) => {
                    tracing::warn!(plugin = %self.name, tool, secrets = ?found, "a result contained secret values; redacted");
                    return Ok(result);
                }
                Redacted::TooLarge(found) => {
                    return Err(Error::PluginFailed {
                        plugin: self.name.clone(),
                        operation: Operation::Tool(tool.to_owned()),
                        fault: Fault::new(
                            FaultKind::OutputTooLarge,
                            format!(
                                "redacting secret {} would take the output past the limit of {} bytes",
                                found.join(", "),
                                self.env.limits.max_output_bytes
                            ),
                        ),
                    });
                }
                Redacted::Unusable(found) => found,
            },
        };
        tracing::warn!(plugin = %self.name, tool, secrets = ?found, "a result contained secret values where redacting them breaks it; refused");
        Err(leak(found))
    }

    /// An error with every sensitive value replaced: a plugin's error
    /// message, its stderr, a violation's message or path may quote what it
    /// returned.
    pub(super) fn scrub(&self, mut error: Error) -> Error {
        let found = self.redactor.redact_error(&mut error);
        if !found.is_empty() {
            tracing::warn!(plugin = %self.name, secrets = ?found, "an error quoted secret values; redacted");
        }
        error
    }

    /// Run `call` with the tool's secrets in reach: its output, not yet
    /// checked.
    pub(super) async fn call_unchecked(
        &self,
        tool: &str,
        payload: &Payload,
        run: &RunOptions<'_>,
        meter: Option<&Meter>,
    ) -> Result<CallOutput, Error> {
        tracing::debug!(plugin = %self.name, tool, "call started");
        let mut running = Running { plugin: &self.name, tool, finished: false };
        let output = self.run(Job::Call(payload, run), meter).await;
        running.finished = true;
        let output = output.map_err(|e| run_error(&self.name, Operation::Tool(tool.to_owned()), e))?;
        match output {
            Ran::Call(output) => Ok(output),
            _ => Err(Error::Host("another export ran instead of `call`".to_owned())),
        }
    }

    pub(super) fn invalid_arguments(&self, tool: &str, violations: Vec<Violation>) -> Error {
        Error::InvalidArguments { plugin: self.name.clone(), tool: tool.to_owned(), violations }
    }

    /// Check an arguments object against the tool's `inputSchema` (when the
    /// options say so), within the validation budget.
    pub(super) fn check_arguments(
        &self,
        index: usize,
        tool: &str,
        arguments: Value,
        weighed: Weighed,
    ) -> Result<JsonObject, Error> {
        if self.validation.arguments {
            let schema = &self.checked[index].input;
            if weighed == Weighed::NotYet {
                within_budget(&arguments, schema.cost, schema.reads_text)
                    .map_err(|v| self.invalid_arguments(tool, vec![v]))?;
            }
            let violations = validate::schema_violations(schema, &arguments);
            if !violations.is_empty() {
                return Err(self.invalid_arguments(tool, violations));
            }
        }
        match arguments {
            Value::Object(map) => Ok(map),
            _ => Err(Error::Host("arguments that are not an object reached the check".to_owned())),
        }
    }

    /// The worst-case cost of checking a result of the tool at `index`
    /// (`None`: not one the plugin describes), per place: the protocol and
    /// the tool's `outputSchema`.
    pub(super) fn output_cost(&self, index: Option<usize>) -> u64 {
        validate::protocol_result_cost() + self.output_schema(index).map_or(0, |schema| schema.cost)
    }

    /// Whether checking `output` of the tool at `index` fits the async
    /// executor ([`fits_inline`]). A result of the plain shape (text items;
    /// [`validate::plain`]) is taken by hand, its texts unread, so only its
    /// `structuredContent` is weighed, against the `outputSchema`; any
    /// other result is checked against the protocol's schema, which
    /// matches base64 data with a `pattern`, and is weighed whole, strings
    /// by their length. A typed result (a component's, or a plain one read
    /// straight into the type) is checked by its types, and its
    /// `structuredContent` against the `outputSchema`.
    pub(super) fn output_fits_inline(&self, index: usize, output: &CallOutput) -> bool {
        let schema = self.output_schema(Some(index));
        let reads_text = schema.is_some_and(|schema| schema.reads_text);
        let structured = |result: Option<&Value>| {
            result.is_none_or(|structured| fits_inline(structured, self.output_cost(Some(index)), reads_text))
        };
        match output {
            CallOutput::Json(raw) if validate::plain::is_plain_within(raw, INLINE_PLAIN_FIELDS) => {
                structured(raw.get("structuredContent").filter(|value| !value.is_null()))
            }
            CallOutput::Json(raw) => fits_inline(raw, self.output_cost(Some(index)), true),
            CallOutput::Typed(result) => structured(result.structured_content.as_ref()),
        }
    }

    /// The `outputSchema` of the tool at `index`, compiled, if it has one.
    pub(super) fn output_schema(&self, index: Option<usize>) -> Option<&validate::Schema> {
        index.and_then(|i| self.checked[i].output.as_deref())
    }

    /// Check what the tool `tool`, at `index` (`None`: not one the plugin
    /// describes), returned.
    pub(super) fn check_call_output(
        &self,
        tool: &str,
        index: Option<usize>,
        output: CallOutput,
        weighed: Weighed,
    ) -> Result<CallToolResult, Error> {
        match output {
            CallOutput::Json(raw) => self.check_output(tool, index, raw, weighed),
            CallOutput::Typed(result) => self.check_typed(tool, index, result, weighed),
        }
    }

    /// A place in the pool and an instance for it: an idle one, or a new
    /// one (waiting while the pool is full and busy). The fault is the new
    /// instance's start-up failing; its place is freed then.
    pub(super) async fn checkout(&self) -> Result<(Place<'_, Instance>, Instance), Fault> {
        // Once the plugin has moved to Cranelift's code, the idle instances
        // of the old code go at once (each holds its memory and keeps the
        // old module alive), not only as they are next taken.
        if self.module.sweep_due() {
            self.pool.retain_idle(|instance| !self.module.outdated(instance));
        }
        let (place, idle) = self.pool.take().await;
        let instance = match idle {
            // (An idle instance of code since replaced is dropped: its
            // place gets an instance of the new code.)
            Some(instance) if !self.module.outdated(&instance) => instance,
            // Boxed: instantiating is rare and its future large, and every
            // call's future would otherwise be as large.
            _ => Box::pin(self.module.instantiate(&self.env)).await?,
        };
        Ok((place, instance))
    }

    /// Run an entry point on a pooled instance and put the instance back
    /// only if the run succeeded (a result the host then refuses is the
    /// plugin's fault, not its instance's). If this future is dropped
    /// mid-run, the instance goes with it.
    pub(super) async fn run(&self, job: Job<'_>, meter: Option<&Meter>) -> Result<Ran, RunError> {
        let (place, mut instance) = self.checkout().await.map_err(|fault| {
            RunError::Fault({
                let message = format!("a new instance could not be started: {fault}");
                Fault { message, ..fault }
            })
        })?;
        let output = match job {
            // (The rarer jobs boxed, so that a call's future is no larger
            // than a call needs.)
            Job::Describe => Box::pin(instance.describe()).await.map(Ran::Describe),
            Job::Call(payload, run) => instance.call(payload, run).await.map(Ran::Call),
            Job::Offer(name, input, run) => Box::pin(instance.offer(name, input, run)).await.map(Ran::Offer),
        };
        if let Some(meter) = meter {
            meter.record(instance.usage());
        }
        // A sound instance goes back to the pool, unless its code has
        // been replaced by Cranelift's (then its place is freed for an
        // instance of the new code).
        let keep = |instance: &Instance| !self.module.outdated(instance);
        match output {
            Ok(value) => {
                if keep(&instance) {
                    self.pool.give_back(place, instance);
                }
                Ok(value)
            }
            // The guest returned, but with something unusable: the
            // instance itself is sound.
            Err(RunError::Output(problem)) => {
                if keep(&instance) {
                    self.pool.give_back(place, instance);
                }
                Err(RunError::Output(problem))
            }
            // A fault: the instance is dropped and its place freed.
            Err(fault) => Err(fault),
        }
    }

    /// Check a tool's output as the options say.
    pub(super) fn check_output(
        &self,
        tool: &str,
        index: Option<usize>,
        raw: Value,
        weighed: Weighed,
    ) -> Result<CallToolResult, Error> {
        let invalid = |violations| Error::InvalidOutput {
            plugin: self.name.clone(),
            operation: Operation::Tool(tool.to_owned()),
            problem: OutputProblem::Invalid { violations },
        };
        if !self.validation.results {
            return serde_json::from_value(raw).map_err(|e| invalid(vec![protocol_violation(&e)]));
        }
        if weighed == Weighed::NotYet {
            within_budget(&raw, self.output_cost(index), true).map_err(|v| invalid(vec![v]))?;
        }
        validate::check_result(raw, self.output_schema(index)).map_err(invalid)
    }

    /// Check a typed result (a component's, or a plain one) as the options
    /// say.
    pub(super) fn check_typed(
        &self,
        tool: &str,
        index: Option<usize>,
        result: CallToolResult,
        weighed: Weighed,
    ) -> Result<CallToolResult, Error> {
        if !self.validation.results {
            return Ok(result);
        }
        let invalid = |violations| Error::InvalidOutput {
            plugin: self.name.clone(),
            operation: Operation::Tool(tool.to_owned()),
            problem: OutputProblem::Invalid { violations },
        };
        if let Some(structured) = &result.structured_content
            && weighed == Weighed::NotYet
        {
            let reads_text = self.output_schema(index).is_some_and(|schema| schema.reads_text);
            within_budget(structured, self.output_cost(index), reads_text).map_err(|v| invalid(vec![v]))?;
        }
        validate::check_typed_result(&result, self.output_schema(index)).map_err(invalid)?;
        Ok(result)
    }
}

/// Notes a call dropped before it finished (its caller cancelled it): its
/// guest was stopped there and then, and its instance discarded.
pub(super) struct Running<'a> {
    plugin: &'a str,
    tool: &'a str,
    finished: bool,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if !self.finished {
            tracing::debug!(plugin = %self.plugin, tool = self.tool, "call cancelled: the guest was stopped and its instance discarded");
        }
    }
}

/// The input of an Extism plugin's `call`: what `CallToolRequest` (method
/// `tools/call`, no other fields) serialises to, written from borrowed
/// parts rather than built first, its strings escaped a word at a time
/// ([`toolhost_protocol::json`]).
pub(super) fn encode_call(name: &str, arguments: &JsonObject, meta: Option<&JsonObject>) -> Vec<u8> {
    use toolhost_protocol::json;
    // Room for a small call's request at once (the frame is 50 bytes; a
    // client's `_meta`, its version and name, some 200 more).
    let mut out = Vec::with_capacity(if meta.is_some() { 384 } else { 128 } + name.len());
    out.extend_from_slice(br#"{"method":"tools/call","params":{"name":"#);
    json::write_str(&mut out, name);
    out.extend_from_slice(br#","arguments":"#);
    json::write_object(&mut out, arguments);
    if let Some(meta) = meta {
        out.extend_from_slice(br#","_meta":"#);
        json::write_object(&mut out, meta);
    }
    out.extend_from_slice(b"}}");
    out
}

/// An object as JSON text, written as [`encode_call`] writes the arguments
/// (what `serde_json::to_string` writes, by hand).
pub(super) fn encode_object(object: &JsonObject) -> String {
    let mut out = Vec::with_capacity(64);
    toolhost_protocol::json::write_object(&mut out, object);
    // (The writer writes UTF-8: its input is text, its escapes ASCII.)
    String::from_utf8(out).unwrap_or_else(|bytes| String::from_utf8_lossy(bytes.as_bytes()).into_owned())
}

/// What a pooled instance is asked to run.
pub(super) enum Job<'a> {
    Describe,
    /// A call, with the secrets its tool may read, its deadline and log sink.
    Call(&'a Payload, &'a RunOptions<'a>),
    /// One of the exports of what the plugin offers besides tools.
    Offer(&'static str, &'a [u8], &'a RunOptions<'a>),
}

/// What it returned.
pub(super) enum Ran {
    Describe(Value),
    Call(CallOutput),
    Offer(Value),
}
