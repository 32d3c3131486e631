//! Text for people. Tool names, error messages, results and warnings quote
//! what plugins chose, and a plugin must not be able to recolour the
//! terminal, move its cursor, rewrite a line with a carriage return, forge
//! a line of its own or reorder text with a bidi override. Everything the
//! CLI prints for humans goes through [`escaped`]; the line breaks are the
//! CLI's own (one `println!` per line), so any inside a string is escaped.
//! JSON output is exact JSON and does not come here.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `text` with control characters escaped as JSON escapes them (`\n`,
/// `\r`, `\t`, `\u001b`): C0 controls, DEL, C1 controls, and the Unicode
/// bidirectional formatting characters (overrides, embeddings, isolates,
/// marks). Everything else, backslashes included, is left as it is.
pub(crate) fn escaped(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if needs_escape(c) => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

#[cfg(test)]
mod tests {
    use super::escaped;

    #[test]
    fn controls_and_bidi_are_escaped_and_the_rest_kept() {
        assert_eq!(escaped("plain `tool` é 🦀 \\n"), "plain `tool` é 🦀 \\n");
        assert!(matches!(escaped("plain"), std::borrow::Cow::Borrowed(_)));
        assert_eq!(
            escaped("a\u{1b}[31mred\rline\nforged\t\u{7f}\u{85}\u{9b}\u{202e}txt\u{2066}"),
            "a\\u001b[31mred\\rline\\nforged\\t\\u007f\\u0085\\u009b\\u202etxt\\u2066"
        );
    }
}
