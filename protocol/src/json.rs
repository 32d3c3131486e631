//! JSON writing for the two hot messages: the request the host sends to a
//! plugin's `call` and the result the plugin sends back.
//!
//! Both carry the tool's text (its arguments, its output) in JSON strings,
//! and serde_json's escaping looks at a string a byte at a time: for a
//! 100 KB text it was a sixth of a call, in the host and in the guest. The
//! writers here find the bytes to escape eight at a time (a word's bytes
//! tested at once for `"`, `\` and control characters, in plain `u64`
//! arithmetic, so Wasm gets it too) and copy the runs between them whole.
//! They write byte for byte what `serde_json::to_vec` writes (the tests
//! hold them to that); numbers and anything but the common shapes go
//! through serde_json itself.

use serde_json::Value;

use crate::{CallToolResult, Content, JsonObject};

/// Each byte set to `0x01`.
const ONES: u64 = 0x0101_0101_0101_0101;
/// Each byte's top bit.
const TOPS: u64 = 0x8080_8080_8080_8080;

/// Whether any of the eight bytes of `word` must be escaped: is below
/// `0x20`, or is `"` or `\`. (Each test is exact for "any byte": a borrow
/// can only mark a byte above one that matches.)
fn needs_escape(word: u64) -> bool {
    let below_space = word.wrapping_sub(ONES * 0x20) & !word;
    let quote = word ^ (ONES * u64::from(b'"'));
    let quote = quote.wrapping_sub(ONES) & !quote;
    let backslash = word ^ (ONES * u64::from(b'\\'));
    let backslash = backslash.wrapping_sub(ONES) & !backslash;
    (below_space | quote | backslash) & TOPS != 0
}

/// The escape of a byte that needs one, as serde_json writes it.
fn write_escape(out: &mut Vec<u8>, byte: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let short = match byte {
        b'"' => b'"',
        b'\\' => b'\\',
        0x08 => b'b',
        0x0c => b'f',
        b'\n' => b'n',
        b'\r' => b'r',
        b'\t' => b't',
        _ => {
            out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(byte >> 4)],
                HEX[usize::from(byte & 0xf)],
            ]);
            return;
        }
    };
    out.extend_from_slice(&[b'\\', short]);
}

/// Whether a byte must be escaped in a JSON string.
fn is_escaped(byte: u8) -> bool {
    byte < 0x20 || byte == b'"' || byte == b'\\'
}

/// Append `text` as a JSON string, quoted and escaped.
pub fn write_str(out: &mut Vec<u8>, text: &str) {
    let bytes = text.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    // Where the bytes not written yet start: a run with nothing to escape
    // is copied whole when an escape (or the end) is reached.
    let mut run = 0;
    let mut at = 0;
    while at < bytes.len() {
        // Whole words with nothing to escape are skipped eight bytes at a
        // time...
        while let Some(word) = bytes.get(at..at + 8) {
            let word = u64::from_le_bytes(word.try_into().expect("eight bytes"));
            if needs_escape(word) {
                break;
            }
            at += 8;
        }
        // ...and the rest looked at a byte at a time, up to the next word.
        let end = (at + 8).min(bytes.len());
        while at < end {
            if is_escaped(bytes[at]) {
                out.extend_from_slice(&bytes[run..at]);
                write_escape(out, bytes[at]);
                run = at + 1;
            }
            at += 1;
        }
    }
    out.extend_from_slice(&bytes[run..]);
    out.push(b'"');
}

/// Append `value` as JSON, compact, as `serde_json::to_vec` writes it.
pub fn write_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        // (Writing a number into a vector cannot fail.)
        Value::Number(number) => serde_json::to_writer(&mut *out, number).expect("a number is JSON"),
        Value::String(text) => write_str(out, text),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, item);
            }
            out.push(b']');
        }
        Value::Object(map) => write_object(out, map),
    }
}

/// Append `map` as a JSON object.
pub fn write_object(out: &mut Vec<u8>, map: &JsonObject) {
    out.push(b'{');
    write_fields(out, map, true);
    out.push(b'}');
}

/// Append the fields of `map`, `"key":value` separated by commas, with a
/// comma first unless `first`.
fn write_fields(out: &mut Vec<u8>, map: &JsonObject, mut first: bool) {
    for (key, value) in map {
        if !first {
            out.push(b',');
        }
        first = false;
        write_str(out, key);
        out.push(b':');
        write_value(out, value);
    }
}

/// Append `,"key":` and `value`.
fn write_member(out: &mut Vec<u8>, key: &str, value: &Value) {
    out.push(b',');
    write_str(out, key);
    out.push(b':');
    write_value(out, value);
}

/// How a result starts: its `content` list.
const RESULT_START: &[u8] = br#"{"content":["#;
/// How a text item starts, up to its text.
const TEXT_ITEM_START: &[u8] = br#"{"type":"text","text":"#;
/// The key of a result's `structuredContent`, after what comes before it.
const STRUCTURED_KEY: &[u8] = br#","structuredContent":"#;

/// Append a content item: a text item without annotations by hand, any
/// other through serde_json.
fn write_content(out: &mut Vec<u8>, item: &Content) {
    match item {
        Content::Text(text) if text.annotations.is_none() => {
            out.extend_from_slice(TEXT_ITEM_START);
            write_str(out, &text.text);
            if let Some(meta) = &text.meta {
                out.extend_from_slice(br#","_meta":"#);
                write_object(out, meta);
            }
            write_fields(out, &text.extra, false);
            out.push(b'}');
        }
        // (Writing a serializable item into a vector cannot fail.)
        other => serde_json::to_writer(&mut *out, other).expect("a content item is JSON"),
    }
}

/// A call's result as JSON: what `serde_json::to_vec` makes of it.
pub fn call_result_to_vec(result: &CallToolResult) -> Vec<u8> {
    write_call_result(result, result.structured_content.as_ref().map(Structured::Value))
}

/// A call's result as JSON, its `structuredContent` the JSON text
/// `structured` (serialised straight from the tool's type, never built as
/// a `Value`) in place of the result's own: what `serde_json::to_vec` makes
/// of the result with that value in it, up to the order of its keys.
pub fn call_result_with_structured_to_vec(result: &CallToolResult, structured: &str) -> Vec<u8> {
    write_call_result(result, Some(Structured::Text(structured)))
}

/// A successful result of one text item, `text`, with the structured
/// content `structured` (JSON text): what
/// [`call_result_with_structured_to_vec`] writes of
/// `CallToolResult::text(text)` with it, without that result built first
/// (a tool's structured output, as the SDK writes it).
pub fn text_with_structured_to_vec(text: &str, structured: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + text.len() + structured.len());
    out.extend_from_slice(RESULT_START);
    out.extend_from_slice(TEXT_ITEM_START);
    write_str(&mut out, text);
    out.extend_from_slice(b"}]");
    out.extend_from_slice(STRUCTURED_KEY);
    out.extend_from_slice(structured.as_bytes());
    out.push(b'}');
    out
}

/// A result's `structuredContent`, as a value or as JSON text.
enum Structured<'a> {
    Value(&'a Value),
    Text(&'a str),
}

fn write_call_result(result: &CallToolResult, structured: Option<Structured<'_>>) -> Vec<u8> {
    // Room for the usual result at once (a text item and structured text),
    // so that a small one is not copied as it grows.
    let texts: usize = result
        .content
        .iter()
        .map(|item| match item {
            Content::Text(text) => text.text.len() + 32,
            _ => 64,
        })
        .sum();
    let structured_text = match &structured {
        Some(Structured::Text(text)) => text.len() + 24,
        _ => 0,
    };
    let mut out = Vec::with_capacity(64 + texts + structured_text);
    out.extend_from_slice(RESULT_START);
    for (i, item) in result.content.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_content(&mut out, item);
    }
    out.push(b']');
    if let Some(is_error) = result.is_error {
        write_member(&mut out, "isError", &Value::Bool(is_error));
    }
    match structured {
        Some(Structured::Value(structured)) => write_member(&mut out, "structuredContent", structured),
        Some(Structured::Text(structured)) => {
            out.extend_from_slice(STRUCTURED_KEY);
            out.extend_from_slice(structured.as_bytes());
        }
        None => {}
    }
    if let Some(meta) = &result.meta {
        out.extend_from_slice(br#","_meta":"#);
        write_object(&mut out, meta);
    }
    write_fields(&mut out, &result.extra, false);
    out.push(b'}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Strings with every kind of byte: clean runs longer and shorter than
    /// a word, escapes at every offset within one, multi-byte characters.
    fn strings() -> Vec<String> {
        let mut strings: Vec<String> = ["", "a", "abcdefgh", "abcdefghi", "\"", "\\", "\u{7f}", "é—😀", "a/b<c>"]
            .into_iter()
            .map(str::to_owned)
            .collect();
        for special in ['"', '\\', '\n', '\r', '\t', '\u{8}', '\u{c}', '\0', '\u{1f}', '\u{1}', ' ', '!', '#', '[', ']']
        {
            for offset in 0..17 {
                let mut text = "x".repeat(offset);
                text.push(special);
                text.push_str(&"y".repeat(17 - offset));
                strings.push(text);
            }
        }
        // Every byte value below 0x80 next to each other, and long text.
        strings.push((0u8..0x80).map(char::from).collect());
        strings.push("abcdefghij".repeat(10_000));
        strings.push(format!("{}\"{}", "ü".repeat(5_000), "\n".repeat(100)));
        strings
    }

    #[test]
    fn strings_are_written_as_serde_json_writes_them() {
        for text in strings() {
            let mut out = Vec::new();
            write_str(&mut out, &text);
            assert_eq!(out, serde_json::to_vec(&text).unwrap(), "{text:?}");
        }
    }

    #[test]
    fn every_byte_that_needs_escaping_is_found_in_any_place_of_a_word() {
        for byte in 0u8..=0xff {
            for place in 0..8 {
                let mut word = [b'a'; 8];
                word[place] = byte;
                // A neighbour that could mask it by a borrow, too.
                for neighbour in [b'a', 0x00, 0x1f, 0x20, 0x21, 0x22, 0x5c, 0x7f, 0x80, 0xff] {
                    let mut with = word;
                    with[(place + 1) % 8] = neighbour;
                    let expected = with.iter().any(|&b| is_escaped(b));
                    assert_eq!(needs_escape(u64::from_le_bytes(with)), expected, "{with:?}");
                }
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn any_string_is_written_as_serde_json_writes_it(text in "(?s).{0,80}") {
            let mut out = Vec::new();
            write_str(&mut out, &text);
            proptest::prop_assert_eq!(out, serde_json::to_vec(&text).unwrap());
        }

        #[test]
        fn any_ascii_or_control_string_is_written_as_serde_json_writes_it(
            bytes in proptest::collection::vec(0u8..0x80, 0..80)
        ) {
            let text = String::from_utf8(bytes).expect("ASCII");
            let mut out = Vec::new();
            write_str(&mut out, &text);
            proptest::prop_assert_eq!(out, serde_json::to_vec(&text).unwrap());
        }
    }

    #[test]
    fn values_and_results_are_written_as_serde_json_writes_them() {
        let long = "abcdefghij".repeat(1_000);
        let values = [
            json!(null),
            json!({"a": 1, "b": -2, "c": 1.5, "d": 1e300, "e": 0.1, "f": u64::MAX, "g": i64::MIN, "h": 1.0}),
            json!({"text": long, "nested": [[], {}, [1, [2, {"k\n": "v\""}]], true, false, null]}),
            json!(["\u{0}\u{1f}", "é", {"": ""}]),
        ];
        for value in &values {
            let mut out = Vec::new();
            write_value(&mut out, value);
            assert_eq!(out, serde_json::to_vec(value).unwrap(), "{value}");
        }
        let mut meta = JsonObject::new();
        meta.insert("m".to_owned(), json!("v"));
        let mut extra = JsonObject::new();
        extra.insert("z\"".to_owned(), json!([1]));
        let mut rich = Content::text("with fields");
        if let Content::Text(text) = &mut rich {
            text.meta = Some(meta.clone());
            text.extra = extra.clone();
        }
        let annotated: Content =
            serde_json::from_value(json!({"type": "text", "text": "a", "annotations": {"priority": 0.5}})).unwrap();
        let results = [
            CallToolResult::default(),
            CallToolResult::text(&long),
            CallToolResult::error("no \"such\" thing\n"),
            CallToolResult {
                content: vec![rich, annotated, Content::image("aGk=", "image/png"), Content::text("")],
                is_error: Some(false),
                structured_content: Some(values[2].clone()),
                meta: Some(meta),
                extra,
            },
            CallToolResult { structured_content: Some(json!({"n": 1})), ..Default::default() },
            CallToolResult { extra: values[1].as_object().unwrap().clone(), ..Default::default() },
        ];
        for result in &results {
            assert_eq!(
                String::from_utf8(call_result_to_vec(result)).unwrap(),
                serde_json::to_string(result).unwrap(),
                "{result:?}"
            );
            // The same with `structuredContent` given as JSON text: the
            // result's own is not written, the text is.
            let text = r#"{"z":[1,{"a":"\u0000"}],"a":null}"#;
            let with_text =
                CallToolResult { structured_content: serde_json::from_str(text).unwrap(), ..result.clone() };
            let written = call_result_with_structured_to_vec(result, text);
            assert_eq!(serde_json::from_slice::<Value>(&written).unwrap(), serde_json::to_value(&with_text).unwrap());
            assert!(String::from_utf8(written).unwrap().contains(&format!(r#","structuredContent":{text}"#)));
        }
        // One text item and structured text, written without the result.
        for text in strings() {
            let structured = r#"{"result":5.0}"#;
            let written = call_result_with_structured_to_vec(&CallToolResult::text(&text), structured);
            assert_eq!(text_with_structured_to_vec(&text, structured), written, "{text:?}");
        }
    }
}
