//! Label selectors, as Kubernetes writes them: requirements separated by
//! commas, every one of which a resource's labels must meet.
//!
//! | Requirement | Met when the labels |
//! | --- | --- |
//! | `key=value`, `key==value` | have `key`, of `value` |
//! | `key!=value` | have no `key`, or one of another value |
//! | `key` | have `key` |
//! | `!key` | have no `key` |
//! | `key in (a,b)` | have `key`, of one of the values |
//! | `key notin (a,b)` | have no `key`, or one of none of the values |

use std::collections::BTreeMap;

/// The longest selector read (bytes).
const MAX_LEN: usize = 4096;
/// The most requirements of a selector.
const MAX_REQUIREMENTS: usize = 32;

/// A parsed selector.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Selector(Vec<Requirement>);

#[derive(Debug, Clone, PartialEq)]
enum Requirement {
    Is(String, String),
    IsNot(String, String),
    Has(String),
    HasNot(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

impl Selector {
    /// Parse `text`, or say what is wrong with it.
    pub(crate) fn parse(text: &str) -> Result<Selector, String> {
        if text.len() > MAX_LEN {
            return Err(format!("longer than {MAX_LEN} bytes"));
        }
        let mut requirements = Vec::new();
        if text.trim().is_empty() {
            return Ok(Selector(requirements));
        }
        for part in split(text)? {
            let part = part.trim();
            if part.is_empty() {
                return Err("an empty requirement (two commas, or one at an end)".to_owned());
            }
            requirements.push(requirement(part)?);
        }
        if requirements.len() > MAX_REQUIREMENTS {
            return Err(format!("more than {MAX_REQUIREMENTS} requirements"));
        }
        Ok(Selector(requirements))
    }

    /// Whether `labels` meet every requirement.
    pub(crate) fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|requirement| match requirement {
            Requirement::Is(key, value) => labels.get(key) == Some(value),
            Requirement::IsNot(key, value) => labels.get(key) != Some(value),
            Requirement::Has(key) => labels.contains_key(key),
            Requirement::HasNot(key) => !labels.contains_key(key),
            Requirement::In(key, values) => labels.get(key).is_some_and(|v| values.contains(v)),
            Requirement::NotIn(key, values) => labels.get(key).is_none_or(|v| !values.contains(v)),
        })
    }
}

/// `text` split at the commas outside parentheses.
fn split(text: &str) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0u8, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' if depth == 0 => depth = 1,
            '(' => return Err("a `(` inside a value list".to_owned()),
            ')' if depth == 1 => depth = 0,
            ')' => return Err("a `)` without its `(`".to_owned()),
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err("a `(` without its `)`".to_owned());
    }
    parts.push(&text[start..]);
    Ok(parts)
}

fn key(text: &str, whole: &str) -> Result<String, String> {
    let key = text.trim();
    if key.is_empty() || key.contains(|c: char| c.is_whitespace() || "=!(),".contains(c)) {
        return Err(format!("`{whole}`: `{key}` is not a label key"));
    }
    Ok(key.to_owned())
}

fn requirement(part: &str) -> Result<Requirement, String> {
    if let Some(rest) = part.strip_prefix('!') {
        return Ok(Requirement::HasNot(key(rest, part)?));
    }
    if let Some((name, value)) = part.split_once("!=") {
        return Ok(Requirement::IsNot(key(name, part)?, value.trim().to_owned()));
    }
    if let Some((name, value)) = part.split_once('=') {
        let value = value.strip_prefix('=').unwrap_or(value);
        return Ok(Requirement::Is(key(name, part)?, value.trim().to_owned()));
    }
    if let Some(open) = part.find('(') {
        let head = part[..open].trim_end();
        let list = part[open + 1..].strip_suffix(')').ok_or_else(|| format!("`{part}`: text after `)`"))?;
        let values: Vec<String> = list.split(',').map(|v| v.trim().to_owned()).collect();
        let (name, negated) = if let Some(name) = head.strip_suffix(" notin") {
            (name, true)
        } else if let Some(name) = head.strip_suffix(" in") {
            (name, false)
        } else {
            return Err(format!("`{part}`: a value list follows `in` or `notin`"));
        };
        let name = key(name, part)?;
        return Ok(if negated { Requirement::NotIn(name, values) } else { Requirement::In(name, values) });
    }
    Ok(Requirement::Has(key(part, part)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn every_kind_of_requirement_matches_as_kubernetes_says() {
        let production = labels(&[("env", "production"), ("team", "search")]);
        let staging = labels(&[("env", "staging")]);
        let none = labels(&[]);
        let cases: &[(&str, [bool; 3])] = &[
            ("env=production", [true, false, false]),
            ("env==production", [true, false, false]),
            ("env!=production", [false, true, true]),
            ("team", [true, false, false]),
            ("!team", [false, true, true]),
            ("env in (production, staging)", [true, true, false]),
            ("env notin (production)", [false, true, true]),
            ("env=production,team=search", [true, false, false]),
            (" env = staging ", [false, true, false]),
            ("", [true, true, true]),
        ];
        for (text, expected) in cases {
            let selector = Selector::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            let got = [&production, &staging, &none].map(|l| selector.matches(l));
            assert_eq!(got, *expected, "{text}");
        }
    }

    #[test]
    fn a_malformed_selector_says_what_is_wrong() {
        for (text, says) in [
            ("env=a,,team", "empty requirement"),
            ("env in (a", "without its `)`"),
            ("env in a)", "without its `(`"),
            ("env (a)", "follows `in` or `notin`"),
            ("env in (a) x", "after `)`"),
            ("=x", "not a label key"),
            ("!", "not a label key"),
        ] {
            let error = Selector::parse(text).err().unwrap_or_else(|| panic!("{text} was accepted"));
            assert!(error.contains(says), "{text}: {error}");
        }
        assert!(Selector::parse(&format!("{}a", "a,".repeat(40))).unwrap_err().contains("more than"));
        assert!(Selector::parse(&"k".repeat(MAX_LEN + 1)).unwrap_err().contains("longer"));
    }
}
