//! Bounds on what a guest sends the host besides its memory: output counted
//! by what it costs the host (not only its bytes), error messages kept
//! short, logs capped per call.
//!
//! - **JSON output** (an Extism plugin's) is parsed by a builder that
//!   charges every value its in-host weight (a `Value`, its text, an
//!   object's map node) against the output cap, and refuses a result with
//!   more than [`MAX_CONTENT_ITEMS`] content items, while parsing: 300,000
//!   empty items (7.8 MB of JSON) would otherwise cost hundreds of MiB and
//!   seconds of host time.
//! - **A component's result** is weighed with a fixed overhead per content
//!   item ([`CONTENT_ITEM_WEIGHT`]) and per tool, so empty items are not free.
//! - **Messages** a plugin chooses (an Extism `error_set`, a component's
//!   `call-error`) are cut to
//!   [`MAX_MESSAGE_BYTES`](messages::MAX_MESSAGE_BYTES), with the original
//!   size.
//! - **Logs**: at most [`MAX_LOG_LINES`](logs::MAX_LOG_LINES) lines and
//!   [`MAX_LOG_BYTES`](logs::MAX_LOG_BYTES) per call, each line at most
//!   [`MAX_LOG_LINE_BYTES`]; then one note.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::borrow::Cow;
use toolhost_protocol::{CallToolResult, Content as ToolContent, TextContent};

use super::outcome::RunError;
use crate::error::{Fault, FaultKind, OutputProblem};
use crate::sandbox::format_size;

/// The call's log budget.
mod logs;
/// A plugin's messages, cut short.
mod messages;

pub(crate) use logs::{LogBudget, LogLine, MAX_LOG_LINE_BYTES};
#[cfg(feature = "component")]
pub(crate) use messages::shorten;
pub(crate) use messages::{short_error, short_fault, short_message};

/// Most content items a result may have.
pub(crate) const MAX_CONTENT_ITEMS: usize = 4096;
/// What a content item of a component's result is charged against the
/// output cap besides its bytes (about its size in the host).
#[cfg(feature = "component")]
pub(crate) const CONTENT_ITEM_WEIGHT: usize = 256;
/// What a tool of a component's `describe` is charged besides its bytes.
#[cfg(feature = "component")]
pub(crate) const TOOL_WEIGHT: usize = 1024;

/// Weight of any JSON value: a `serde_json::Value` and some slack of the
/// vector holding it.
const VALUE_WEIGHT: usize = 48;
/// Weight of a JSON object besides its values: its map's first node.
const OBJECT_WEIGHT: usize = 640;

fn too_large(message: String) -> RunError {
    RunError::Fault(Fault::new(FaultKind::OutputTooLarge, message))
}

/// Decode a plugin's output as JSON, charging each value its weight against
/// `max_bytes`; a call's result (`result`) may have at most
/// [`MAX_CONTENT_ITEMS`] content items. Over either bound, parsing stops
/// there: the output is too large.
pub(crate) fn parse_json(output: &[u8], max_bytes: usize, result: bool) -> Result<Value, RunError> {
    let text = std::str::from_utf8(output)
        .map_err(|e| RunError::Output(OutputProblem::NotUtf8 { valid_up_to: e.valid_up_to() }))?;
    let mut weigh = Weigh::new(max_bytes);
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let parsed = Node { weigh: &mut weigh, content: if result { Content::TopLevel } else { Content::No } }
        .deserialize(&mut deserializer)
        .and_then(|value| deserializer.end().map(|()| value));
    match (parsed, weigh.over) {
        (_, Some(Over::Items)) => {
            Err(too_large(format!("more than {MAX_CONTENT_ITEMS} content items, over the limit per result")))
        }
        (_, Some(Over::Weight)) => Err(too_large(format!(
            "its JSON would take more than {} in the host (every value, object and string counted), over the output limit",
            format_size(max_bytes as u64)
        ))),
        (Ok(value), None) => Ok(value),
        (Err(e), None) => Err(RunError::Output(OutputProblem::NotJson { message: e.to_string() })),
    }
}

/// A call's output as a result, parsed straight into the type if it has the
/// plain shape ([`crate::validate::plain`]: text items, `isError`,
/// `structuredContent`, `_meta` and fields of their own), with no tree of
/// `Value`s built first and taken apart again. `None` for anything else,
/// or anything [`parse_json`] would refuse (not UTF-8, not JSON, over the
/// weight or the item bound, a key given twice): the caller then parses it
/// as JSON, which says what is wrong. What it returns is what
/// `plain_result(parse_json(output))` returns; each value is charged the
/// weight [`parse_json`] charges it.
pub(crate) fn parse_plain_result(output: &[u8], max_bytes: usize) -> Option<CallToolResult> {
    let text = std::str::from_utf8(output).ok()?;
    written_result(text, max_bytes).or_else(|| read_plain_result(text, max_bytes))
}

/// [`parse_plain_result`] through serde: any layout, key order and
/// whitespace.
fn read_plain_result(text: &str, max_bytes: usize) -> Option<CallToolResult> {
    let mut weigh = Weigh::new(max_bytes);
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let result = deserializer.deserialize_map(PlainResult { weigh: &mut weigh }).ok()?;
    deserializer.end().ok()?;
    Some(result)
}

/// [`parse_plain_result`] of a result in the layout the SDK writes
/// (`toolhost_protocol::json`: `{"content":[{"type":"text","text":…},…]`,
/// then `,"isError":` a boolean and `,"structuredContent":` an object (or
/// `null`) when there are, and `}`), its frame matched byte for byte, as the SDK matches
/// the request toolhost writes. Serde's map machinery, a key at a time,
/// was most of the host's reading of a small result. Each value is
/// charged what [`read_plain_result`] charges it (the structured value is
/// read by serde, as there, whitespace around it included, and may nest
/// no deeper than there). Anything else (another layout or key order,
/// other fields, whitespace between the frame's own bytes, a bound
/// crossed) is `None`, and is read the general way, which takes it or
/// gives up.
fn written_result(text: &str, max_bytes: usize) -> Option<CallToolResult> {
    let mut weigh = Weigh::new(max_bytes);
    let mut charge = |weight: usize| weigh.charge::<serde_json::Error>(weight).ok();
    // The result object, its `content` key and array.
    charge(VALUE_WEIGHT + OBJECT_WEIGHT + "content".len() + VALUE_WEIGHT)?;
    let mut rest = text.strip_prefix(r#"{"content":["#)?;
    let mut content = Vec::new();
    if let Some(after) = rest.strip_prefix(']') {
        rest = after;
    } else {
        loop {
            let (item, after) = written_string(rest.strip_prefix(r#"{"type":"text","text":"#)?)?;
            if content.len() == MAX_CONTENT_ITEMS {
                return None;
            }
            // The item object, `type` and its value `text`, `text` and its
            // value.
            let frame = VALUE_WEIGHT + OBJECT_WEIGHT + "type".len() + VALUE_WEIGHT + "text".len() + "text".len();
            charge((frame + VALUE_WEIGHT).saturating_add(item.len()))?;
            content.push(ToolContent::Text(TextContent {
                text: item,
                annotations: None,
                meta: None,
                extra: Map::new(),
            }));
            rest = after.strip_prefix('}')?;
            match rest.as_bytes().first()? {
                b',' => rest = &rest[1..],
                b']' => {
                    rest = &rest[1..];
                    break;
                }
                _ => return None,
            }
        }
    }
    let mut is_error = None;
    if let Some(after) = rest.strip_prefix(r#","isError":"#) {
        let (value, after) = match after.strip_prefix("true") {
            Some(after) => (true, after),
            None => (false, after.strip_prefix("false")?),
        };
        charge("isError".len() + VALUE_WEIGHT)?;
        (is_error, rest) = (Some(value), after);
    }
    let mut structured = None;
    if let Some(after) = rest.strip_prefix(r#","structuredContent":"#) {
        // The last field: its value is all but the closing brace.
        let value = after.strip_suffix('}')?;
        charge("structuredContent".len())?;
        // Parsed on its own, the value may nest as deep as serde allows
        // inside the result object, which takes one of its levels.
        weigh.levels = SERDE_LEVELS - 1;
        let mut deserializer = serde_json::Deserializer::from_str(value);
        let value = Node { weigh: &mut weigh, content: Content::No }.deserialize(&mut deserializer).ok()?;
        deserializer.end().ok()?;
        structured = match value {
            object @ Value::Object(_) => Some(object),
            Value::Null => None,
            _ => return None,
        };
        rest = "}";
    }
    (rest == "}").then(|| CallToolResult {
        content,
        is_error,
        structured_content: structured,
        meta: None,
        extra: Map::new(),
    })
}

/// How many arrays and objects serde_json lets open inside one another (its
/// recursion limit of 128, which refuses the 128th).
const SERDE_LEVELS: usize = 127;

/// A JSON string's text and what follows it, `quoted` starting at its
/// opening quote: taken as it is when it has no escape, through serde when
/// it has; `None` for a control character (which JSON refuses) or an
/// escape serde refuses.
fn written_string(quoted: &str) -> Option<(String, &str)> {
    let inside = quoted.strip_prefix('"')?;
    let end = inside.bytes().position(|b| b == b'"' || b == b'\\' || b < 0x20)?;
    match inside.as_bytes()[end] {
        b'"' => Some((inside[..end].to_owned(), &inside[end + 1..])),
        b'\\' => {
            let mut strings = serde_json::Deserializer::from_str(quoted).into_iter::<String>();
            let text = strings.next()?.ok()?;
            Some((text, &quoted[strings.byte_offset()..]))
        }
        _ => None,
    }
}

/// Why [`parse_plain_result`] gave up: not the plain shape (or a bound
/// crossed, which [`parse_json`] then reports).
const NOT_PLAIN: &str = "not a plain result";

/// A value read with [`Node`], which must be an object or `null` (the
/// object kept).
fn object_or_null<'de, A: MapAccess<'de>>(
    map: &mut A,
    weigh: &mut Weigh,
) -> Result<Option<Map<String, Value>>, A::Error> {
    match map.next_value_seed(Node { weigh, content: Content::No })? {
        Value::Object(object) => Ok(Some(object)),
        Value::Null => Ok(None),
        _ => Err(de::Error::custom(NOT_PLAIN)),
    }
}

/// A key, charged its length as [`Node`] charges it.
fn key<'de, A: MapAccess<'de>>(map: &mut A, weigh: &mut Weigh) -> Result<Option<Cow<'de, str>>, A::Error> {
    let Some(key) = map.next_key_seed(Key)? else { return Ok(None) };
    weigh.charge(key.len())?;
    Ok(Some(key))
}

/// Keep `value` under `key` in `extra`, refusing a key given twice.
fn keep<E: de::Error>(extra: &mut Map<String, Value>, key: Cow<'_, str>, value: Value) -> Result<(), E> {
    match extra.insert(key.into_owned(), value) {
        None => Ok(()),
        Some(_) => Err(E::custom(NOT_PLAIN)),
    }
}

/// Set a field read once; a second is refused.
fn once<T, E: de::Error>(slot: &mut Option<T>, value: T) -> Result<(), E> {
    match slot.replace(value) {
        None => Ok(()),
        Some(_) => Err(E::custom(NOT_PLAIN)),
    }
}

/// A key as text: borrowed from the input where it has no escapes.
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v))
    }
}

/// The result object of [`parse_plain_result`].
struct PlainResult<'a> {
    weigh: &'a mut Weigh,
}

impl<'de> Visitor<'de> for PlainResult<'_> {
    type Value = CallToolResult;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a plain result")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<CallToolResult, A::Error> {
        let weigh = self.weigh;
        weigh.charge(VALUE_WEIGHT + OBJECT_WEIGHT)?;
        let (mut content, mut is_error, mut structured, mut meta) = (None, None, None, None);
        let mut extra = Map::new();
        while let Some(key) = key(&mut map, weigh)? {
            match &*key {
                "content" => once(&mut content, map.next_value_seed(TextItems { weigh: &mut *weigh })?)?,
                "isError" => {
                    let value = match map.next_value_seed(Node { weigh: &mut *weigh, content: Content::No })? {
                        Value::Bool(value) => Some(value),
                        Value::Null => None,
                        _ => return Err(de::Error::custom(NOT_PLAIN)),
                    };
                    once(&mut is_error, value)?;
                }
                "structuredContent" => {
                    let value = object_or_null(&mut map, weigh)?.map(Value::Object);
                    once(&mut structured, value)?;
                }
                "_meta" => once(&mut meta, object_or_null(&mut map, weigh)?)?,
                _ => {
                    let value = map.next_value_seed(Node { weigh: &mut *weigh, content: Content::No })?;
                    keep(&mut extra, key, value)?;
                }
            }
        }
        let Some(content) = content else { return Err(de::Error::custom(NOT_PLAIN)) };
        Ok(CallToolResult {
            content,
            is_error: is_error.flatten(),
            structured_content: structured.flatten(),
            meta: meta.flatten(),
            extra,
        })
    }
}

/// A result's `content`: text items only, at most [`MAX_CONTENT_ITEMS`].
struct TextItems<'a> {
    weigh: &'a mut Weigh,
}

impl<'de> DeserializeSeed<'de> for TextItems<'_> {
    type Value = Vec<ToolContent>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for TextItems<'_> {
    type Value = Vec<ToolContent>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("text items")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        self.weigh.charge(VALUE_WEIGHT)?;
        let mut items = Vec::new();
        // Each item is built where it goes (a `Content` is ~300 bytes).
        while seq.next_element_seed(TextItem { weigh: &mut *self.weigh, items: &mut items })?.is_some() {
            if items.len() > MAX_CONTENT_ITEMS {
                return Err(de::Error::custom(NOT_PLAIN));
            }
        }
        Ok(items)
    }
}

/// One text item of a plain result, pushed onto `items`.
struct TextItem<'a> {
    weigh: &'a mut Weigh,
    items: &'a mut Vec<ToolContent>,
}

impl<'de> DeserializeSeed<'de> for TextItem<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for TextItem<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a text item")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let weigh = self.weigh;
        weigh.charge(VALUE_WEIGHT + OBJECT_WEIGHT)?;
        let (mut kind, mut text, mut annotations, mut meta) = (None, None, None, None);
        let mut extra = Map::new();
        while let Some(key) = key(&mut map, weigh)? {
            match &*key {
                // Read where it lies (it is only compared), charged as a
                // string value.
                "type" => {
                    let value = map.next_value_seed(Key)?;
                    weigh.charge(VALUE_WEIGHT.saturating_add(value.len()))?;
                    if value != "text" {
                        return Err(de::Error::custom(NOT_PLAIN));
                    }
                    once(&mut kind, ())?;
                }
                "text" | "annotations" => {
                    let value = map.next_value_seed(Node { weigh: &mut *weigh, content: Content::No })?;
                    once(if &*key == "text" { &mut text } else { &mut annotations }, value)?;
                }
                "_meta" => once(&mut meta, object_or_null(&mut map, weigh)?)?,
                _ => {
                    let value = map.next_value_seed(Node { weigh: &mut *weigh, content: Content::No })?;
                    keep(&mut extra, key, value)?;
                }
            }
        }
        // Annotations have rules of their own (a range, an enum): the
        // schema checks them.
        let (Some(()), Some(Value::String(text)), None | Some(Value::Null)) = (kind, text, annotations) else {
            return Err(de::Error::custom(NOT_PLAIN));
        };
        self.items.push(ToolContent::Text(TextContent { text, annotations: None, meta: meta.flatten(), extra }));
        Ok(())
    }
}

/// A JSON object a plugin hands a host function (a request or a message for
/// the client), parsed within the same bound as its output: the host holds
/// no more of it than `max_bytes` of weight, however it is nested. `Err`
/// says what is wrong with it.
pub(crate) fn parse_object(bytes: &[u8], max_bytes: usize) -> Result<Map<String, Value>, String> {
    match parse_value(bytes, max_bytes)? {
        Value::Object(map) => Ok(map),
        _ => Err("it is not a JSON object".to_owned()),
    }
}

/// Any JSON value a plugin hands a host function, as [`parse_object`]
/// parses an object.
pub(crate) fn parse_value(bytes: &[u8], max_bytes: usize) -> Result<Value, String> {
    parse_json(bytes, max_bytes, false).map_err(|error| match error {
        RunError::Output(problem) => problem.to_string(),
        RunError::Fault(fault) => fault.message,
    })
}

/// Which bound was crossed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Over {
    Weight,
    Items,
}

struct Weigh {
    left: usize,
    over: Option<Over>,
    /// Arrays and objects that may still open inside one another: serde's
    /// own limit where the whole output is parsed at once; fewer where a
    /// value is parsed on its own but stands at a depth in the output
    /// (see [`written_result`]).
    levels: usize,
}

impl Weigh {
    /// A bound of `max_bytes`, nesting left to serde.
    fn new(max_bytes: usize) -> Self {
        Weigh { left: max_bytes, over: None, levels: usize::MAX }
    }

    /// Open an array or an object.
    fn open<E: de::Error>(&mut self) -> Result<(), E> {
        self.levels = self.levels.checked_sub(1).ok_or_else(|| E::custom("nested too deep"))?;
        Ok(())
    }

    /// Close what [`open`](Self::open) opened.
    fn close(&mut self) {
        self.levels = self.levels.saturating_add(1);
    }

    fn charge<E: de::Error>(&mut self, weight: usize) -> Result<(), E> {
        match self.left.checked_sub(weight) {
            Some(left) => {
                self.left = left;
                Ok(())
            }
            None => {
                self.over = Some(Over::Weight);
                Err(E::custom("the output is too large"))
            }
        }
    }
}

/// Where a value is: the result object, its `content` array, or elsewhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Content {
    No,
    TopLevel,
    Items,
}

/// A value to build, weighed as it is read.
struct Node<'a> {
    weigh: &'a mut Weigh,
    content: Content,
}

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Node<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        self.weigh.charge(VALUE_WEIGHT)?;
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        self.weigh.charge(VALUE_WEIGHT)?;
        Ok(Value::from(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        self.weigh.charge(VALUE_WEIGHT)?;
        Ok(Value::from(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        self.weigh.charge(VALUE_WEIGHT)?;
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        self.weigh.charge(VALUE_WEIGHT.saturating_add(v.len()))?;
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        self.weigh.charge(VALUE_WEIGHT.saturating_add(v.len()))?;
        Ok(Value::String(v))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        self.weigh.charge(VALUE_WEIGHT)?;
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        self.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        self.deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.weigh.charge(VALUE_WEIGHT)?;
        self.weigh.open()?;
        let items = self.content == Content::Items;
        let mut values = Vec::new();
        loop {
            if items && values.len() == MAX_CONTENT_ITEMS {
                // One more item is one too many; none is fine.
                if seq.next_element::<de::IgnoredAny>()?.is_some() {
                    self.weigh.over = Some(Over::Items);
                    return Err(de::Error::custom("too many content items"));
                }
                break;
            }
            match seq.next_element_seed(Node { weigh: &mut *self.weigh, content: Content::No })? {
                Some(value) => values.push(value),
                None => break,
            }
        }
        self.weigh.close();
        Ok(Value::Array(values))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.weigh.charge(VALUE_WEIGHT + OBJECT_WEIGHT)?;
        self.weigh.open()?;
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            self.weigh.charge(key.len())?;
            let content =
                if self.content == Content::TopLevel && key == "content" { Content::Items } else { Content::No };
            let value = map.next_value_seed(Node { weigh: &mut *self.weigh, content })?;
            object.insert(key, value);
        }
        self.weigh.close();
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::{Just, Strategy, any, prop, prop_oneof};
    use serde_json::json;

    fn problem(error: RunError) -> String {
        match error {
            RunError::Fault(fault) => format!("{:?}: {}", fault.kind, fault.message),
            RunError::Output(problem) => format!("output: {problem}"),
        }
    }

    #[test]
    fn the_bounded_parser_builds_what_serde_json_builds() {
        let text = r#"{"content":[{"type":"text","text":"a\u00e9\"b"}],"n":[1,-2,3.5,1e300,18446744073709551615,null,true],"o":{}}"#;
        let ours = parse_json(text.as_bytes(), 1 << 20, true).map_err(problem).unwrap();
        assert_eq!(ours, serde_json::from_str::<Value>(text).unwrap());
        assert!(parse_json(b"{} trailing", 1 << 20, true).is_err_and(|e| problem(e).starts_with("output")));
        assert!(parse_json(&[0xff], 1 << 20, true).is_err_and(|e| problem(e).contains("UTF-8")));
    }

    #[test]
    fn content_items_and_weight_are_capped_while_parsing() {
        let items = |n: usize| json!({ "content": vec![json!({"type": "text", "text": ""}); n] }).to_string();
        assert!(parse_json(items(MAX_CONTENT_ITEMS).as_bytes(), usize::MAX, true).is_ok());
        let error = problem(parse_json(items(MAX_CONTENT_ITEMS + 1).as_bytes(), usize::MAX, true).unwrap_err());
        assert!(error.starts_with("OutputTooLarge") && error.contains("content items"), "{error}");
        // Not a result (`describe`): no item count, but the weight.
        assert!(parse_json(items(MAX_CONTENT_ITEMS + 1).as_bytes(), usize::MAX, false).is_ok());
        // 1000 empty items are 26 KB of JSON but weigh far more in the host.
        let error = problem(parse_json(items(1000).as_bytes(), 64 << 10, true).unwrap_err());
        assert!(error.starts_with("OutputTooLarge") && error.contains("64KiB"), "{error}");
        // A long string weighs what it is.
        let long = json!({"content": [{"type": "text", "text": "x".repeat(60 << 10)}]}).to_string();
        assert!(parse_json(long.as_bytes(), 64 << 10, true).is_ok());
    }

    #[test]
    fn the_typed_read_takes_plain_results_and_gives_up_where_the_json_parse_would_say_more() {
        let plain = |text: &str, max: usize| parse_plain_result(text.as_bytes(), max);
        let text = r#"{"content":[{"type":"text","text":"5","_meta":null,"x":1}],"structuredContent":{"result":5.0},"isError":false,"y":[]}"#;
        let typed = plain(text, 1 << 20).expect("a plain result");
        let parsed = parse_json(text.as_bytes(), 1 << 20, true).map_err(problem).unwrap();
        assert_eq!(Ok(typed), crate::validate::plain::plain_result(parsed));
        // An escaped key is the key it spells.
        assert!(plain(r#"{"cont\u0065nt":[{"t\u0079pe":"text","text":"a"}]}"#, 1 << 20).is_some());
        for refused in [
            // A key twice (JSON's last one would win).
            r#"{"content":[],"content":[]}"#,
            r#"{"content":[{"type":"text","text":"a","text":"b"}]}"#,
            r#"{"content":[],"x":1,"x":2}"#,
            // Not the plain shape.
            r#"{"content":[{"type":"image","data":"","mimeType":"image/png"}]}"#,
            r#"{"content":[{"type":"text","text":"a","annotations":{"priority":0.5}}]}"#,
            r#"{"content":[],"isError":1}"#,
            r#"{"isError":true}"#,
            // Not JSON, or more than JSON.
            r#"{"content":[]"#,
            r#"{"content":[]} {}"#,
        ] {
            assert_eq!(plain(refused, 1 << 20), None, "{refused}");
        }
        assert_eq!(parse_plain_result(&[b'"', 0xff, b'"'], 1 << 20), None);
        // The bounds: what parse_json refuses, this does not take.
        let items = |n: usize| json!({ "content": vec![json!({"type": "text", "text": ""}); n] }).to_string();
        assert!(plain(&items(MAX_CONTENT_ITEMS), usize::MAX).is_some());
        assert_eq!(plain(&items(MAX_CONTENT_ITEMS + 1), usize::MAX), None);
        let heavy = items(1000);
        assert!(parse_json(heavy.as_bytes(), 64 << 10, true).is_err());
        assert_eq!(plain(&heavy, 64 << 10), None);
        // The same weights: the least weight parse_json takes, this takes.
        let (mut refused, mut taken) = (0, 1 << 20);
        while taken - refused > 1 {
            let max = (refused + taken) / 2;
            if parse_json(heavy.as_bytes(), max, true).is_ok() { taken = max } else { refused = max }
        }
        let least = taken;
        assert!(plain(&heavy, least).is_some() && plain(&heavy, least - 1).is_none());
    }

    /// A result of text items as the SDK writes it, with texts that need
    /// every kind of escape, `isError` or not, structured content or not.
    fn written() -> impl Strategy<Value = CallToolResult> {
        let text = prop_oneof!["[a-z5 ]{0,8}", "[a-z\"\\\\/\n\t\u{1}\u{7f}é😀\u{2028}]{0,8}", Just(String::new()),];
        let structured = prop_oneof![
            Just(None),
            Just(Some(json!({"result": 5.0}))),
            Just(Some(json!({"nested": {"list": [1, "two\n", null, true]}, "": -0.5}))),
            Just(Some(json!({}))),
        ];
        (prop::collection::vec(text, 0..4), prop::option::of(any::<bool>()), structured).prop_map(
            |(texts, is_error, structured)| CallToolResult {
                content: texts.into_iter().map(ToolContent::text).collect(),
                is_error,
                structured_content: structured,
                meta: None,
                extra: Map::new(),
            },
        )
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 2048, ..Default::default() })]

        /// What the SDK writes is taken by its frame, and comes out as the
        /// general read makes it, within the same weights; past them both
        /// give up.
        #[test]
        fn the_written_frame_reads_what_the_general_read_reads(result in written(), cut in 0usize..2000) {
            let bytes = toolhost_protocol::json::call_result_to_vec(&result);
            let text = std::str::from_utf8(&bytes).expect("UTF-8");
            proptest::prop_assert_eq!(written_result(text, usize::MAX), Some(result.clone()), "{}", text);
            proptest::prop_assert_eq!(read_plain_result(text, usize::MAX), Some(result), "{}", text);
            // The least weight the general read takes, the frame takes too.
            let (mut refused, mut taken) = (0, 1 << 20);
            while taken - refused > 1 {
                let max = (refused + taken) / 2;
                if read_plain_result(text, max).is_some() { taken = max } else { refused = max }
            }
            proptest::prop_assert!(written_result(text, taken).is_some(), "{}", text);
            proptest::prop_assert!(written_result(text, taken - 1).is_none(), "{}", text);
            let max = taken.saturating_sub(1000).saturating_add(cut);
            proptest::prop_assert_eq!(parse_plain_result(&bytes, max), read_plain_result(text, max));
        }
    }

    #[test]
    fn the_written_frame_leaves_other_layouts_to_the_general_read() {
        for other in [
            r#"{"content":[{"type":"text","text":"a"}],"_meta":{}}"#,
            r#"{"content":[{"type":"text","text":"a","_meta":{}}]}"#,
            r#"{"content":[{"text":"a","type":"text"}]}"#,
            r#"{"content": [{"type":"text","text":"a"}]}"#,
            r#"{"content":[{"type":"text","text":"a"}],"isError":null}"#,
            r#"{"content":[{"type":"text","text":"a"}],"structuredContent":{"a":1},"isError":true}"#,
            r#"{"content":[{"type":"text","text":"a"}],"structuredContent":{"a":1},"x":1}"#,
            r#"{"content":[{"type":"text","text":"a"}] }"#,
        ] {
            assert_eq!(written_result(other, usize::MAX), None, "{other}");
            assert!(parse_plain_result(other.as_bytes(), usize::MAX).is_some(), "{other}");
        }
        // `null` structured content is none, either way.
        let null = r#"{"content":[{"type":"text","text":"a"}],"structuredContent":null}"#;
        assert_eq!(written_result(null, usize::MAX), read_plain_result(null, usize::MAX));
        for refused in [
            "{\"content\":[{\"type\":\"text\",\"text\":\"a\u{1}\"}]}",
            r#"{"content":[{"type":"text","text":"\ud800"}]}"#,
            r#"{"content":[{"type":"text","text":"a"}],"structuredContent":[1]}"#,
            r#"{"content":[{"type":"text","text":"a"}]}}"#,
            r#"{"content":[{"type":"text","text":"a"}],"structuredContent":{"a":1}}}"#,
            r#"{"content":[{"type":"text","text":"a"},]}"#,
        ] {
            assert_eq!(written_result(refused, usize::MAX), None, "{refused}");
            assert_eq!(parse_plain_result(refused.as_bytes(), usize::MAX), None, "{refused}");
        }
        // Nesting: the structured value may be as deep as inside the
        // whole result, and no deeper.
        let nested = |levels: usize| {
            format!(
                r#"{{"content":[],"structuredContent":{}{}}}"#,
                r#"{"a":"#.repeat(levels - 1) + "{}",
                "}".repeat(levels - 1)
            )
        };
        for levels in [125, 126, 127, 128] {
            let text = nested(levels);
            let general = read_plain_result(&text, usize::MAX);
            assert_eq!(general.is_some(), levels <= 126, "{levels}");
            assert_eq!(written_result(&text, usize::MAX), general, "{levels}");
        }
        // The item bound, as the general read keeps it.
        let items = |n: usize| {
            let result = CallToolResult { content: vec![ToolContent::text(""); n], ..CallToolResult::default() };
            toolhost_protocol::json::call_result_to_vec(&result)
        };
        let text = |bytes: &[u8]| String::from_utf8(bytes.to_vec()).expect("UTF-8");
        assert!(written_result(&text(&items(MAX_CONTENT_ITEMS)), usize::MAX).is_some());
        assert_eq!(written_result(&text(&items(MAX_CONTENT_ITEMS + 1)), usize::MAX), None);
        assert_eq!(parse_plain_result(&items(MAX_CONTENT_ITEMS + 1), usize::MAX), None);
    }
}
