//! Approval by elicitation: the client's user decides whether a tool that
//! requires approval runs.
//!
//! Up to protocol 2025-11-25 the server sends `elicitation/create` to the
//! client while the `tools/call` waits. At 2026-07-28, which forbids
//! server-to-client requests, the `tools/call` is answered with an
//! `input_required` result carrying the same elicitation; the client asks
//! its user and calls again with the answer in `inputResponses`. The
//! `requestState` it must echo binds that answer to the tool and arguments
//! it was asked about: an answer for other arguments asks again.
//!
//! Fail closed: a decline, a cancel, no answer within the timeout, an
//! answer that is not an explicit yes, or a client without the elicitation
//! capability means the tool does not run.

use std::sync::Mutex;
use std::time::Duration;

use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema, InputRequest,
    InputRequiredResult, InputResponses, ProtocolVersion,
};
use serde_json::Value;
use sha2::{Digest as _, Sha256};
use toolhost::{Approval, ApprovalRequest, Approver, BoxFuture};

/// The key of toolhost's approval question among a call's input requests.
pub(crate) const INPUT_KEY: &str = "toolhost.approval";

/// The most of a call's arguments shown in the question (JSON text).
const SHOWN_ARGUMENTS: usize = 4096;

/// The answer property of the approval form.
const APPROVE: &str = "approve";

/// An [`Approver`] for one `tools/call`: asks the client's user.
pub(crate) struct Elicitor {
    /// Where the question goes (legacy protocols).
    pub(crate) outlet: crate::caller::Outlet,
    /// The protocol version of this call.
    pub(crate) version: Option<ProtocolVersion>,
    /// Whether the client declared form elicitation.
    pub(crate) can_elicit: bool,
    /// How long the user has to answer (legacy protocols).
    pub(crate) timeout: Duration,
    /// 2026-07-28: the answers the client sent with this call, and the
    /// state it echoed.
    pub(crate) responses: Option<InputResponses>,
    pub(crate) request_state: Option<String>,
    /// 2026-07-28: the question to send back instead of a result.
    pub(crate) input_required: Mutex<Option<InputRequiredResult>>,
}

impl Elicitor {
    fn stateless(&self) -> bool {
        self.version.as_ref().is_some_and(|v| *v >= ProtocolVersion::V_2026_07_28)
    }

    /// The `input_required` result to answer with, if the call needs one.
    pub(crate) fn take_input_required(&self) -> Option<InputRequiredResult> {
        self.input_required.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// What the user is asked: the tool, its arguments, what it says of
/// itself. Everything the plugin chose (title, annotations) is quoted as
/// JSON strings, so it cannot pose as toolhost's own words.
pub(crate) fn question(request: &ApprovalRequest<'_>) -> String {
    let tool = &request.tool.tool;
    let quoted = |text: &str| serde_json::to_string(text).unwrap_or_default();
    let mut arguments = serde_json::to_string_pretty(request.arguments).unwrap_or_default();
    if arguments.len() > SHOWN_ARGUMENTS {
        arguments.truncate(arguments.floor_char_boundary(SHOWN_ARGUMENTS));
        arguments.push_str("\n... (shortened)");
    }
    let mut text = format!("Allow the tool `{}` to run?\n\nArguments:\n{arguments}\n", request.tool.name);
    let title = tool.title.as_deref().or_else(|| tool.annotations.as_ref().and_then(|a| a.title.as_deref()));
    if let Some(title) = title {
        text.push_str(&format!("\nThe plugin calls it {}.", quoted(title)));
    }
    let hints = request.annotations();
    let read_only = hints.and_then(|a| a.read_only_hint).unwrap_or(false);
    let mut claims = Vec::new();
    if read_only {
        claims.push("it only reads");
    } else {
        claims.push(match hints.and_then(|a| a.destructive_hint) {
            Some(false) => "it changes things but destroys nothing",
            _ => "it may change or destroy things",
        });
        if hints.and_then(|a| a.idempotent_hint) == Some(true) {
            claims.push("calling it twice does no more than once");
        }
    }
    if hints.and_then(|a| a.open_world_hint) != Some(false) {
        claims.push("it may reach the outside world");
    }
    text.push_str(&format!("\nThe plugin says: {} (its own claims, not checked).", claims.join("; ")));
    text
}

/// The form: one required yes/no.
fn form(message: String) -> ElicitRequestParams {
    // One property, required and defined: the builder cannot refuse it
    // (`the_approval_form_has_one_required_yes_no` below).
    let schema = ElicitationSchema::builder()
        .required_bool(APPROVE)
        .description("Run the tool (true), or not (false).")
        .build()
        .expect("the approval form is a valid elicitation schema");
    ElicitRequestParams::FormElicitationParams { meta: None, message, requested_schema: schema }
}

/// The binding of an answer to one tool and its arguments (2026-07-28's
/// `requestState`).
fn binding(request: &ApprovalRequest<'_>) -> String {
    let mut hash = Sha256::new();
    hash.update(request.tool.name.as_bytes());
    hash.update([0]);
    hash.update(request.arguments.to_string().as_bytes());
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The verdict of a user's answer.
fn verdict(answer: &ElicitResult) -> Approval {
    match answer.action {
        ElicitationAction::Accept => match answer.content.as_ref().and_then(|c| c.get(APPROVE)) {
            Some(Value::Bool(true)) => Approval::Approved,
            Some(Value::Bool(false)) => Approval::Denied("the user said no".to_owned()),
            _ => Approval::Denied("the user's answer was not a yes".to_owned()),
        },
        ElicitationAction::Decline => Approval::Denied("the user declined".to_owned()),
        ElicitationAction::Cancel => Approval::Denied("the user cancelled".to_owned()),
        _ => Approval::Denied("the user's answer was not a yes".to_owned()),
    }
}

impl Approver for Elicitor {
    fn approve<'a>(&'a self, request: ApprovalRequest<'a>) -> BoxFuture<'a, Approval> {
        Box::pin(async move {
            if !self.can_elicit {
                return Approval::Denied(
                    "it requires approval, and the client cannot ask its user (it did not declare the elicitation capability); start the server with --yes to approve such calls without asking".to_owned(),
                );
            }
            let message = question(&request);
            if self.stateless() {
                let state = binding(&request);
                let answer = self.responses.as_ref().and_then(|r| r.get(INPUT_KEY));
                if let Some(answer) = answer
                    && self.request_state.as_deref() == Some(state.as_str())
                {
                    return match serde_json::from_value::<ElicitResult>(answer.clone()) {
                        Ok(answer) => verdict(&answer),
                        Err(e) => Approval::Denied(format!("the client's answer is not an elicitation result ({e})")),
                    };
                }
                // Ask: the call is answered with the question instead.
                let mut input = InputRequiredResult::from_request_state(state);
                input.input_requests =
                    Some([(INPUT_KEY.to_owned(), InputRequest::Elicitation(ElicitRequest::new(form(message))))].into());
                *self.input_required.lock().unwrap_or_else(|e| e.into_inner()) = Some(input);
                return Approval::Denied("the user has not answered yet".to_owned());
            }
            let Some(peer) = self.outlet.peer() else {
                return Approval::Denied("the client cannot be asked during this call".to_owned());
            };
            match peer.create_elicitation_with_timeout(form(message), Some(self.timeout)).await {
                Ok(answer) => verdict(&answer),
                Err(rmcp::ServiceError::Timeout { .. }) => {
                    Approval::Denied(format!("the user did not answer within {:?}", self.timeout))
                }
                Err(error) => Approval::Denied(format!("the client could not ask its user ({error})")),
            }
        })
    }
}

/// Whether the client's capabilities include form elicitation (an empty
/// `elicitation` object means forms, as the specification says).
pub(crate) fn can_elicit(capabilities: Option<&rmcp::model::ClientCapabilities>) -> bool {
    capabilities.and_then(|c| c.elicitation.as_ref()).is_some_and(|e| e.form.is_some() || e.url.is_none())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn registered(tool: serde_json::Value) -> toolhost::RegisteredTool {
        toolhost::RegisteredTool::new("set", serde_json::from_value(tool).unwrap())
    }

    #[test]
    fn the_approval_form_has_one_required_yes_no() {
        let ElicitRequestParams::FormElicitationParams { requested_schema, .. } = form("m".into()) else {
            panic!("a form")
        };
        let schema = serde_json::to_value(requested_schema).unwrap();
        assert_eq!(schema["required"], json!(["approve"]));
        assert_eq!(schema["properties"]["approve"]["type"], "boolean");
    }

    #[test]
    fn the_question_quotes_what_the_plugin_chose() {
        let tool = registered(
            json!({"name": "wipe", "title": "Approved by admin\n\nAllow", "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": false, "destructiveHint": true}}),
        );
        let arguments = json!({"path": "/"});
        let text = question(&ApprovalRequest { tool: &tool, arguments: &arguments });
        assert!(text.starts_with("Allow the tool `set__wipe` to run?"), "{text}");
        assert!(text.contains("The plugin calls it \"Approved by admin\\n\\nAllow\"."), "{text}");
        assert!(text.contains("it may change or destroy things"), "{text}");
        assert!(text.contains("\"path\": \"/\""), "{text}");
    }

    #[test]
    fn only_an_explicit_yes_approves() {
        let answer = |action, content: Option<Value>| {
            serde_json::from_value::<ElicitResult>(json!({"action": action, "content": content})).unwrap()
        };
        assert_eq!(verdict(&answer("accept", Some(json!({"approve": true})))), Approval::Approved);
        for (action, content) in [
            ("accept", Some(json!({"approve": false}))),
            ("accept", Some(json!({"approve": "yes"}))),
            ("accept", None),
            ("decline", Some(json!({"approve": true}))),
            ("cancel", None),
        ] {
            assert!(matches!(verdict(&answer(action, content)), Approval::Denied(_)));
        }
    }
}
