//! `text`: small string tools (counting, reversing, slugs, case).

use toolhost_plugin_sdk::prelude::*;

/// A piece of text to work on.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Input {
    /// The text.
    pub text: String,
}

/// Counts of a text.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Counts {
    /// Words: runs of non-whitespace characters.
    pub words: usize,
    /// Unicode scalar values.
    pub characters: usize,
    /// Lines (a text without a newline is one line; empty text has none).
    pub lines: usize,
}

/// Count the words, characters and lines of a text.
#[tool(title = "Word count", read_only, idempotent)]
pub fn word_count(Input { text }: Input) -> Structured<Counts> {
    let counts = Counts {
        words: text.split_whitespace().count(),
        characters: text.chars().count(),
        lines: text.lines().count(),
    };
    let summary = format!("{} words, {} characters, {} lines", counts.words, counts.characters, counts.lines);
    Structured::new(counts).with_text(summary)
}

/// Reverse a text, character by character.
#[tool(title = "Reverse", read_only, idempotent)]
pub fn reverse(Input { text }: Input) -> String {
    // Reverse the bytes, then put each multi-byte character's bytes back in
    // order: one pass over the text instead of a push per character.
    let mut bytes = text.into_bytes();
    bytes.reverse();
    // ASCII (checked a word at a time) is done: no character spans bytes.
    if bytes.is_ascii() {
        return String::from_utf8(bytes).unwrap_or_default();
    }
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii() {
            i += 1;
            continue;
        }
        // A reversed character: its continuation bytes, then its first byte.
        let start = i;
        while bytes[i] & 0xc0 == 0x80 && i + 1 < bytes.len() {
            i += 1;
        }
        bytes[start..=i].reverse();
        i += 1;
    }
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Turn a text into a URL slug: lowercase ASCII letters and digits joined by `-`.
#[tool(title = "Slugify", read_only, idempotent)]
pub fn slugify(Input { text }: Input) -> Result<String, ToolError> {
    let slug = text
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(str::to_ascii_lowercase)
        .collect::<Vec<_>>()
        .join("-");
    if slug.is_empty() {
        return Err(ToolError::new("the text has no ASCII letters or digits to make a slug of"));
    }
    Ok(slug)
}

/// A letter case.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Case {
    /// ALL CAPITALS.
    Upper,
    /// all small letters.
    Lower,
    /// Each Word Capitalised.
    Title,
}

/// A text and the case to put it in.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ChangeCase {
    /// The text.
    pub text: String,
    /// The case to convert to.
    pub case: Case,
}

/// Convert a text to upper, lower or title case.
#[tool(title = "Change case", read_only, idempotent)]
pub fn change_case(ChangeCase { text, case }: ChangeCase) -> String {
    match case {
        Case::Upper => text.to_uppercase(),
        Case::Lower => text.to_lowercase(),
        Case::Title => text
            .split(' ')
            .map(|word| {
                let mut chars = word.chars();
                match chars.next() {
                    Some(first) => first.to_uppercase().chain(chars.flat_map(char::to_lowercase)).collect(),
                    None => String::new(),
                }
            })
            .collect::<Vec<String>>()
            .join(" "),
    }
}

plugin!(word_count, reverse, slugify, change_case);
