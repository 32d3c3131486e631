//! How the `call` export reads a request and writes a result: the
//! request's envelope checked by hand and the arguments parsed once,
//! straight into the tool's type; structured output serialised straight
//! from the tool's type. Code that `#[tool]` expands to; not a stable API.
//!
//! A small call's guest work was mostly serde's: the request read into a
//! view (its keys matched through serde's generic map machinery), the
//! arguments scanned once to find their end and again into the tool's
//! type, the structured output built as a `Value` tree and written out.
//! The fast path here takes the request in the one layout toolhost writes
//! (`{"method":"tools/call","params":{"name":…,"arguments":…}}`, `_meta`
//! after the arguments when there is one) and parses the arguments from
//! where they start; anything else (another host's layout, whitespace, an
//! escaped name, a parse that fails) is read the checked way, as before,
//! so what a tool sees and what errors say do not depend on the path.

use serde::de::DeserializeOwned;

use crate::CallToolResult;

/// A call's arguments, as a tool's handler reads them.
#[derive(Debug, Clone, Copy)]
pub struct Arguments<'a>(Source<'a>);

#[derive(Debug, Clone, Copy)]
enum Source<'a> {
    /// The JSON text of an object, checked to be JSON: what does not parse
    /// into the tool's type is the caller's mistake, a tool error.
    Checked(&'a str),
    /// Text that starts with `{`, not checked yet (a component's
    /// arguments): anything but a clean parse sends the call the checked
    /// way.
    #[cfg(all(target_os = "wasi", target_env = "p2"))]
    Unchecked(&'a str),
    /// An Extism request in the layout toolhost writes, from its arguments
    /// on (`{`): after them come `}}`, or `,"_meta":`, a value and `}}`.
    /// Anything else sends the call the checked way.
    #[cfg(not(all(target_os = "wasi", target_env = "p2")))]
    Request(&'a [u8]),
}

impl<'a> Arguments<'a> {
    /// The JSON text of an object, known to be JSON.
    pub fn checked(text: &'a str) -> Self {
        Arguments(Source::Checked(text))
    }

    /// A component's arguments that start with `{`, not yet checked.
    #[cfg(all(target_os = "wasi", target_env = "p2"))]
    pub(crate) fn unchecked(text: &'a str) -> Self {
        Arguments(Source::Unchecked(text))
    }

    /// The arguments as `A`. `Err(Some(result))`: the tool error that says
    /// why they are not one; `Err(None)`: the call must be read the checked
    /// way (nothing of it has run).
    pub fn parse<A: DeserializeOwned>(self, tool: &str) -> Result<A, Option<CallToolResult>> {
        match self.0 {
            Source::Checked(text) => serde_json::from_str(text).map_err(|error| Some(invalid(tool, &error))),
            #[cfg(all(target_os = "wasi", target_env = "p2"))]
            Source::Unchecked(text) => serde_json::from_str(text).map_err(|_| None),
            #[cfg(not(all(target_os = "wasi", target_env = "p2")))]
            Source::Request(rest) => {
                let mut stream = serde_json::Deserializer::from_slice(rest).into_iter::<A>();
                let Some(Ok(arguments)) = stream.next() else { return Err(None) };
                let meta = request_tail(&rest[stream.byte_offset()..]).ok_or(None)?;
                crate::CALL_META.with_borrow_mut(|slot| *slot = meta);
                Ok(arguments)
            }
        }
    }
}

/// Run `tool` on arguments checked to be JSON (the checked way of either
/// flavour). Its handler reads them whatever they are; one that would
/// not (no handler `#[tool]` writes) gets a tool error saying so.
pub(crate) fn run_checked(tool: &crate::ToolDef, arguments: &str) -> Output {
    (tool.handler)(Arguments::checked(arguments)).unwrap_or_else(|| {
        CallToolResult::error(format!("the SDK could not read the arguments of tool `{}`", tool.name)).into()
    })
}

/// The tool error for arguments that do not parse into the tool's type.
fn invalid(tool: &str, error: &serde_json::Error) -> CallToolResult {
    CallToolResult::error(format!("invalid arguments for tool `{tool}`: {error}"))
}

/// What comes after the arguments of a request in toolhost's layout: the
/// `_meta` it carries (`Some(None)`: none), or `None` for anything else.
/// The `_meta` is checked to be a JSON object (what is not goes the
/// checked way, as before), and kept as text until the tool asks for it.
#[cfg(not(all(target_os = "wasi", target_env = "p2")))]
fn request_tail(tail: &[u8]) -> Option<Option<crate::CallMeta>> {
    if tail == b"}}" {
        return Some(None);
    }
    let meta = tail.strip_prefix(br#","_meta":"#)?.strip_suffix(b"}}")?;
    if meta.first() != Some(&b'{') {
        return None;
    }
    serde_json::from_slice::<serde::de::IgnoredAny>(meta).ok()?;
    Some(Some(crate::CallMeta::Text(meta.to_vec())))
}

/// The tool's name and the request from its arguments on, if `input` is
/// a request in the layout toolhost writes: the name without escapes, the
/// arguments an object. `None` for anything else.
#[cfg(not(all(target_os = "wasi", target_env = "p2")))]
pub(crate) fn request_parts(input: &[u8]) -> Option<(&str, Arguments<'_>)> {
    let rest = input.strip_prefix(br#"{"method":"tools/call","params":{"name":""#)?;
    // The name ends at its closing quote; an escape or a control
    // character (which JSON refuses) before it is for the checked way.
    let end = rest.iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
    if rest[end] != b'"' {
        return None;
    }
    let name = std::str::from_utf8(&rest[..end]).ok()?;
    let rest = rest[end + 1..].strip_prefix(br#","arguments":"#)?;
    rest.starts_with(b"{").then_some((name, Arguments(Source::Request(rest))))
}

/// A tool's result as the `call` export writes it: structured output kept
/// as the JSON text serde wrote from the tool's type.
#[derive(Debug, Clone, PartialEq)]
pub struct Output(Kind);

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    /// A result of the protocol's type.
    Result(CallToolResult),
    /// Structured output: its JSON text, and the text of the one text item
    /// (`None`: the same JSON). Written as JSON straight from the two, no
    /// result built first.
    Structured { text: Option<String>, json: String },
}

impl From<CallToolResult> for Output {
    fn from(result: CallToolResult) -> Self {
        Output(Kind::Result(result))
    }
}

impl Output {
    /// A successful result with `structured` (JSON text) and one text
    /// item: `text`, or the same JSON.
    pub(crate) fn structured(text: Option<String>, structured: String) -> Self {
        Output(Kind::Structured { text, json: structured })
    }

    /// The result as the protocol's type.
    pub fn into_call_result(self) -> CallToolResult {
        match self.into_parts() {
            Parts::Result(result) => result,
            Parts::Structured { text, json } => match serde_json::from_str(&json) {
                Ok(value) => CallToolResult { structured_content: Some(value), ..CallToolResult::text(text) },
                Err(error) => CallToolResult::error(format!("the tool's output cannot be read back: {error}")),
            },
        }
    }

    /// The result as JSON (the Extism flavour's output): what
    /// `toolhost_protocol::json` writes of it.
    #[cfg(not(all(target_os = "wasi", target_env = "p2")))]
    pub fn to_json(&self) -> Vec<u8> {
        use toolhost_protocol::json;
        match &self.0 {
            Kind::Result(result) => json::call_result_to_vec(result),
            Kind::Structured { text, json } => json::text_with_structured_to_vec(text.as_deref().unwrap_or(json), json),
        }
    }

    /// A result of the protocol's type, or structured output's text item
    /// and JSON: the component flavour lowers the latter as a WIT result of
    /// one text item without a `CallToolResult` (a vector of 296-byte
    /// items) built and taken apart on the way.
    pub(crate) fn into_parts(self) -> Parts {
        match self.0 {
            Kind::Result(result) => Parts::Result(result),
            Kind::Structured { text, json } => Parts::Structured { text: text.unwrap_or_else(|| json.clone()), json },
        }
    }
}

/// A result taken apart ([`Output::into_parts`]).
pub(crate) enum Parts {
    /// A result of the protocol's type.
    Result(CallToolResult),
    /// A successful result of one text item, with structured output.
    Structured {
        /// The text item.
        text: String,
        /// The structured output, as JSON text.
        json: String,
    },
}

#[cfg(all(test, not(all(target_os = "wasi", target_env = "p2"))))]
mod tests {
    use super::*;
    use crate::JsonObject;
    use proptest::prelude::*;
    use serde::Deserialize;
    use serde_json::{Value, json};
    use toolhost_protocol::CallToolRequest;

    /// A tool's arguments.
    #[derive(Debug, PartialEq, Deserialize)]
    struct Operands {
        a: f64,
        #[serde(default)]
        b: Option<String>,
    }

    /// The request toolhost sends: `CallToolRequest` as serde writes it
    /// (the host's encoder is held to that byte for byte).
    fn request(name: &str, arguments: &Value, meta: Option<&Value>) -> Vec<u8> {
        let mut request = CallToolRequest::new(name, arguments.as_object().cloned());
        request.params.meta = meta.and_then(Value::as_object).cloned();
        serde_json::to_vec(&request).unwrap()
    }

    /// What the checked way makes of a request: the name, the arguments
    /// as `A` (or the tool error's text) and the `_meta`.
    fn checked<A: DeserializeOwned>(input: &[u8]) -> (String, Result<A, String>, Option<JsonObject>) {
        #[derive(Deserialize)]
        struct Params {
            name: String,
            arguments: Option<Box<serde_json::value::RawValue>>,
            #[serde(rename = "_meta")]
            meta: Option<JsonObject>,
        }
        #[derive(Deserialize)]
        struct Request {
            params: Params,
        }
        let Request { params } = serde_json::from_slice(input).unwrap();
        let text = crate::arguments_text(params.arguments.as_deref()).unwrap();
        let parsed = Arguments::checked(text).parse::<A>(&params.name).map_err(|e| format!("{e:?}"));
        (params.name, parsed, params.meta)
    }

    /// What the fast path makes of it, if it takes it.
    fn fast<A: DeserializeOwned>(input: &[u8]) -> Option<(String, A, Option<JsonObject>)> {
        let (name, arguments) = request_parts(input)?;
        let stale = JsonObject::from_iter([("stale".into(), json!(1))]);
        crate::CALL_META.with_borrow_mut(|meta| *meta = Some(crate::CallMeta::Parsed(stale)));
        let parsed = arguments.parse::<A>(name);
        let meta = crate::CALL_META.with_borrow_mut(Option::take).and_then(|meta| meta.object());
        match parsed {
            Ok(arguments) => Some((name.to_owned(), arguments, meta)),
            Err(refused) => {
                assert!(refused.is_none(), "the fast path reports nothing itself");
                None
            }
        }
    }

    #[test]
    fn toolhost_s_requests_take_the_fast_path_and_read_as_the_checked_way_reads_them() {
        let arguments = json!({"a": 2, "b": "x\"y", "extra": [1, {"c": null}]});
        for meta in [None, Some(json!({"progressToken": 7})), Some(json!({}))] {
            let input = request("add", &arguments, meta.as_ref());
            let (name, parsed, read_meta) = fast::<Operands>(&input).expect("the fast path takes it");
            assert_eq!((name, Ok(parsed), read_meta), checked::<Operands>(&input));
        }
        // No arguments: `{}` (the host always sends an object).
        let input = request("noop", &json!({}), None);
        assert_eq!(fast::<JsonObject>(&input).map(|(_, args, _)| args), Some(JsonObject::new()));
    }

    #[test]
    fn anything_but_toolhost_s_layout_or_a_clean_parse_is_left_to_the_checked_way() {
        for input in [
            // Another host's layout: whitespace, another key order, fields
            // of its own.
            r#"{"method": "tools/call", "params": {"name": "add", "arguments": {"a": 1}}}"#,
            r#"{"params":{"name":"add","arguments":{"a":1}},"method":"tools/call"}"#,
            r#"{"method":"tools/call","params":{"name":"add","arguments":{"a":1},"x":1}}"#,
            r#"{"method":"tools/call","params":{"name":"add","arguments":{"a":1}},"id":1}"#,
            // An escaped name, arguments that are not an object or absent.
            r#"{"method":"tools/call","params":{"name":"a\u0064d","arguments":{"a":1}}}"#,
            r#"{"method":"tools/call","params":{"name":"add","arguments":null}}"#,
            r#"{"method":"tools/call","params":{"name":"add","arguments":[1]}}"#,
            r#"{"method":"tools/call","params":{"name":"add"}}"#,
            // Arguments the tool's type does not take (the checked way
            // says why), and what follows them not as toolhost writes it.
            r#"{"method":"tools/call","params":{"name":"add","arguments":{"a":"one"}}}"#,
            r#"{"method":"tools/call","params":{"name":"add","arguments":{"a":1},"_meta":[]}}"#,
            r#"{"method":"tools/call","params":{"name":"add","arguments":{"a":1},"_meta":{},"_meta":{}}}"#,
            r#"{"method":"tools/call","params":{"name":"add","arguments":{"a":1}}} "#,
            r#"{"method":"tools/call","params":{"name":"add","arguments":{"a":1}}"#,
            r#"{"method":"tools/call","params":{"name":"add","arguments":{"a":1},"arguments":{"a":2}}}"#,
        ] {
            assert!(fast::<Operands>(input.as_bytes()).is_none(), "{input}");
        }
        // A control character in the name is not JSON.
        assert!(
            request_parts(b"{\"method\":\"tools/call\",\"params\":{\"name\":\"a\nd\",\"arguments\":{}}}").is_none()
        );
    }

    #[test]
    fn structured_output_is_written_as_its_value_would_be() {
        let output = Output::structured(None, r#"{"z":1,"a":[true]}"#.to_owned());
        let json: Value = serde_json::from_slice(&output.to_json()).unwrap();
        assert_eq!(json, serde_json::to_value(output.clone().into_call_result()).unwrap());
        assert_eq!(json["content"][0]["text"], r#"{"z":1,"a":[true]}"#, "the text is the JSON, as written");
        assert_eq!(json["structuredContent"], json!({"z": 1, "a": [true]}));
        // What the protocol's writer writes of the same result.
        for text in [None, Some("5\n\"x\"".to_owned())] {
            let structured = r#"{"result":5.0}"#;
            let output = Output::structured(text.clone(), structured.to_owned());
            let result = CallToolResult::text(text.unwrap_or_else(|| structured.to_owned()));
            let written = toolhost_protocol::json::call_result_with_structured_to_vec(&result, structured);
            assert_eq!(output.to_json(), written);
        }
        let with_text = Output::structured(Some("5".to_owned()), "{}".to_owned()).into_call_result();
        assert_eq!(with_text.structured_content, Some(json!({})));
        assert_eq!(serde_json::to_value(&with_text.content[0]).unwrap()["text"], "5");
    }

    proptest! {
        /// Requests as toolhost writes them, with names, arguments and
        /// `_meta` of every kind: the fast path takes those whose name
        /// needs no escape and whose arguments the type takes, and reads
        /// them as the checked way does.
        #[test]
        fn the_fast_path_reads_what_the_checked_way_reads(
            name in "[a-z_\"\\\\é\n]{1,6}",
            a in prop_oneof![any::<f64>().prop_map(|a| json!(a)), Just(json!("x")), Just(Value::Null)],
            b in prop_oneof![Just(None), "[a-z\"\\\\]{0,4}".prop_map(|b| Some(json!(b))), Just(Some(json!(1)))],
            extra in prop_oneof![Just(None), Just(Some(json!({"k": [1, "}}"]})))],
            meta in prop_oneof![Just(None), Just(Some(json!({"progressToken": "}}"})))],
        ) {
            let mut arguments = json!({"a": a});
            if let Some(b) = b { arguments["b"] = b; }
            if let Some(extra) = extra { arguments["extra"] = extra; }
            let input = request(&name, &arguments, meta.as_ref());
            let (checked_name, parsed, checked_meta) = checked::<Operands>(&input);
            match fast::<Operands>(&input) {
                Some((fast_name, fast_args, fast_meta)) => {
                    prop_assert_eq!((fast_name, Ok(fast_args), fast_meta), (checked_name, parsed, checked_meta));
                }
                None => prop_assert!(
                    parsed.is_err() || name.contains(['"', '\\', '\n']),
                    "left a request the fast path could read: {}", String::from_utf8_lossy(&input)
                ),
            }
        }
    }
}
