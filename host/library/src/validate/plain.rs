//! The common result, taken without the protocol schema or serde.
//!
//! Most results are text items, `isError`, `structuredContent` and `_meta`:
//! for those, checking the parsed JSON against the protocol's
//! `CallToolResult` schema and then deserializing it (serde buffers every
//! flattened `extra` map into a tree of its own first) was an eighth of a
//! small validated call. [`plain_result`] recognises that shape by hand
//! and moves it into the Rust type. It accepts a strict subset of what the
//! schema accepts, and builds exactly what serde builds from it (a
//! property test holds both to that); anything else (other content types,
//! annotations, a wrong type anywhere) goes back to the caller, for the
//! schema to check and report with JSON pointers.

use serde_json::Value;
use toolhost_protocol::{CallToolResult, Content, JsonObject, TextContent};

/// `raw` as a result, if it has the plain shape: an object whose `content`
/// is an array of text items (`type`, `text`, an optional `_meta` object
/// and fields of the item's own), whose `isError` is a boolean,
/// `structuredContent` and `_meta` objects (each of them may be absent or
/// `null`). Other fields are kept as the type's `extra`, as serde keeps
/// them. Otherwise `raw` itself, untouched.
pub(crate) fn plain_result(raw: Value) -> Result<CallToolResult, Value> {
    let Value::Object(fields) = raw else { return Err(raw) };
    if !is_plain(&fields) {
        return Err(Value::Object(fields));
    }
    let mut result = CallToolResult::default();
    for (key, value) in fields {
        match key.as_str() {
            "content" => {
                let Value::Array(items) = value else { unreachable!("is_plain checked the content") };
                result.content = items.into_iter().map(text_item).collect();
            }
            "isError" => result.is_error = value.as_bool(),
            "structuredContent" => result.structured_content = Some(value).filter(|v| !v.is_null()),
            "_meta" => result.meta = object_or_null(value),
            _ => {
                result.extra.insert(key, value);
            }
        }
    }
    Ok(result)
}

/// Whether [`plain_result`] takes `raw`, if it has at most `fields`
/// fields, its own and its content items' together (else `false`, having
/// counted the items' fields only if there are not too many items): the
/// check then costs a few lookups per item, and taking it a move per
/// field, whatever its text.
pub(crate) fn is_plain_within(raw: &Value, fields: usize) -> bool {
    let Some(own) = raw.as_object() else { return false };
    let Some(Value::Array(content)) = own.get("content") else { return false };
    if own.len() + content.len() > fields {
        return false;
    }
    let all = own.len() + content.iter().map(|item| item.as_object().map_or(0, JsonObject::len)).sum::<usize>();
    all <= fields && is_plain(own)
}

/// Whether [`plain_result`] takes a result object: checked whole before anything
/// is moved, so a refused value goes back as it came.
fn is_plain(fields: &JsonObject) -> bool {
    let Some(Value::Array(items)) = fields.get("content") else { return false };
    items.iter().all(is_plain_text_item)
        && fields.get("isError").is_none_or(|v| v.is_boolean() || v.is_null())
        && fields.get("structuredContent").is_none_or(is_object_or_null)
        && fields.get("_meta").is_none_or(is_object_or_null)
}

fn is_plain_text_item(item: &Value) -> bool {
    let Value::Object(fields) = item else { return false };
    fields.get("type").and_then(Value::as_str) == Some("text")
        && fields.get("text").is_some_and(Value::is_string)
        // Annotations have rules of their own (a range, an enum): the
        // schema checks them.
        && fields.get("annotations").is_none_or(Value::is_null)
        && fields.get("_meta").is_none_or(is_object_or_null)
}

fn is_object_or_null(value: &Value) -> bool {
    value.is_object() || value.is_null()
}

fn object_or_null(value: Value) -> Option<JsonObject> {
    match value {
        Value::Object(map) => Some(map),
        _ => None,
    }
}

/// A text item [`is_plain_text_item`] accepted.
fn text_item(item: Value) -> Content {
    let Value::Object(fields) = item else { unreachable!("is_plain checked every item") };
    let mut content = TextContent { text: String::new(), annotations: None, meta: None, extra: JsonObject::new() };
    for (key, value) in fields {
        match key.as_str() {
            // The tag is the enum's variant, not a field of the item.
            "type" | "annotations" => {}
            "text" => {
                if let Value::String(text) = value {
                    content.text = text;
                }
            }
            "_meta" => content.meta = object_or_null(value),
            _ => {
                content.extra.insert(key, value);
            }
        }
    }
    Content::Text(content)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// What the slow path makes of `raw`: the schema's verdict, then serde's.
    fn by_schema(raw: &Value) -> Option<CallToolResult> {
        if !crate::validate::violations(crate::validate::call_tool_result(), raw).is_empty() {
            return None;
        }
        Some(serde_json::from_value(raw.clone()).expect("what the schema accepts, serde reads"))
    }

    #[test]
    fn the_common_results_take_the_plain_path_and_come_out_as_serde_reads_them() {
        for raw in [
            json!({"content": []}),
            json!({"content": [{"type": "text", "text": "5"}], "structuredContent": {"result": 5.0}}),
            json!({"content": [{"type": "text", "text": "no", "_meta": {"k": 1}}], "isError": true}),
            json!({"content": [{"type": "text", "text": "a", "annotations": null, "_meta": null, "x": [1]}],
                "isError": null, "structuredContent": null, "_meta": {"m": "v"}, "extra": {"y": 2}}),
        ] {
            let plain = plain_result(raw.clone()).unwrap_or_else(|_| panic!("refused {raw}"));
            assert_eq!(Some(plain), by_schema(&raw), "{raw}");
        }
    }

    #[test]
    fn the_plain_shape_is_taken_inline_only_with_few_fields() {
        let text = json!({"type": "text", "text": "a".repeat(100_000)});
        let few = json!({"content": vec![text.clone(); 10], "isError": false});
        assert!(is_plain_within(&few, 1_000), "long texts cost nothing to take");
        // 10 items of 2 fields, and 2 fields of its own: 22.
        assert!(is_plain_within(&few, 22));
        assert!(!is_plain_within(&few, 21));
        let mut wide = text.as_object().unwrap().clone();
        for i in 0..2_000 {
            wide.insert(format!("f{i}"), json!(i));
        }
        assert!(!is_plain_within(&json!({"content": [wide]}), 1_000), "an item's own fields count");
        assert!(!is_plain_within(&json!({"content": vec![json!({}); 2_000]}), 1_000), "and so do items");
        assert!(!is_plain_within(&json!({"content": [{"type": "image"}]}), 1_000), "not plain");
    }

    #[test]
    fn what_the_plain_path_does_not_take_goes_back_untouched() {
        for raw in [
            json!([]),
            json!({}),
            json!({"content": {}}),
            json!({"content": [{"type": "image", "data": "", "mimeType": "image/png"}]}),
            json!({"content": [{"type": "text", "text": "a", "annotations": {"priority": 0.5}}]}),
            json!({"content": [{"type": "text", "text": 5}]}),
            json!({"content": [{"type": "text"}]}),
            json!({"content": [{"text": "a"}]}),
            json!({"content": [], "isError": "yes"}),
            json!({"content": [], "structuredContent": [1]}),
            json!({"content": [], "_meta": 1}),
            json!({"content": [{"type": "text", "text": "a", "_meta": []}]}),
        ] {
            assert_eq!(plain_result(raw.clone()), Err(raw));
        }
    }

    /// JSON near the result's shape: each place is sometimes right,
    /// sometimes `null`, sometimes of another type.
    fn scalar() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-2.0..3.0f64).prop_map(|n| json!(n)),
            "[a-z]{0,3}".prop_map(Value::String),
            Just(json!("text")),
            Just(json!("image")),
            Just(json!([])),
            Just(json!({})),
            Just(json!({"k": [1, null]})),
        ]
    }

    fn maybe(value: impl Strategy<Value = Value>) -> impl Strategy<Value = Option<Value>> {
        prop_oneof![3 => value.prop_map(Some), 1 => scalar().prop_map(Some), 1 => Just(None)]
    }

    fn item() -> impl Strategy<Value = Value> {
        let annotations = prop_oneof![
            Just(Value::Null),
            (-0.5..1.5f64).prop_map(|p| json!({"priority": p})),
            Just(json!({"audience": ["user"]})),
            Just(json!({"audience": ["nobody"]})),
        ];
        (
            maybe(prop_oneof![Just(json!("text")), Just(json!("image")), Just(json!("resource_link"))]),
            maybe("[a-z]{0,4}".prop_map(Value::String)),
            maybe(annotations),
            maybe(Just(json!({"m": 1}))),
            maybe(scalar()),
        )
            .prop_map(|(kind, text, annotations, meta, other)| {
                let mut item = JsonObject::new();
                for (key, value) in
                    [("type", kind), ("text", text), ("annotations", annotations), ("_meta", meta), ("other", other)]
                {
                    if let Some(value) = value {
                        item.insert(key.to_owned(), value);
                    }
                }
                Value::Object(item)
            })
    }

    fn result() -> impl Strategy<Value = Value> {
        (
            maybe(prop::collection::vec(prop_oneof![4 => item(), 1 => scalar()], 0..4).prop_map(Value::Array)),
            maybe(any::<bool>().prop_map(Value::Bool)),
            maybe(Just(json!({"result": 5}))),
            maybe(Just(json!({"trace": "t"}))),
            maybe(scalar()),
        )
            .prop_map(|(content, is_error, structured, meta, other)| {
                let mut result = JsonObject::new();
                for (key, value) in [
                    ("content", content),
                    ("isError", is_error),
                    ("structuredContent", structured),
                    ("_meta", meta),
                    ("unknown", other),
                ] {
                    if let Some(value) = value {
                        result.insert(key.to_owned(), value);
                    }
                }
                Value::Object(result)
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 4096, ..ProptestConfig::default() })]

        /// The plain path never takes what the schema refuses, and what it
        /// takes is what serde would have built.
        #[test]
        fn the_plain_path_agrees_with_the_schema_and_serde(raw in result()) {
            match plain_result(raw.clone()) {
                Ok(plain) => prop_assert_eq!(Some(plain), by_schema(&raw), "{}", raw),
                Err(back) => prop_assert_eq!(back, raw),
            }
        }

        /// A call's output read straight into the type is what the plain
        /// path makes of it read as JSON, and nothing else is taken.
        #[test]
        fn the_typed_read_agrees_with_the_plain_path(raw in result(), pretty in any::<bool>()) {
            let text = if pretty { serde_json::to_string_pretty(&raw) } else { serde_json::to_string(&raw) };
            let typed = crate::runtime::output::parse_plain_result(text.unwrap().as_bytes(), usize::MAX);
            prop_assert_eq!(typed, plain_result(raw.clone()).ok(), "{}", raw);
        }
    }
}
