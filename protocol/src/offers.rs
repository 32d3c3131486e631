//! What a plugin may offer besides tools: prompts, resources, resource
//! templates and completions (MCP's server features), as hyper-mcp's v2
//! exports return them. Deserializing a plugin's output into these types
//! is its check against the protocol: a missing or mistyped field is a
//! violation with its path.

use serde::{Deserialize, Serialize};

use crate::{Content, JsonObject, ResourceContents, Role};

/// A prompt template a plugin offers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prompt {
    /// Programmatic name, unique within the plugin.
    pub name: String,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What the prompt is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The arguments it takes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Vec<PromptArgument>>,
    /// Free-form metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

/// One argument of a prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptArgument {
    /// Its name.
    pub name: String,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Whether it must be given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
}

/// The output of `list_prompts`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ListPromptsResult {
    /// The prompts.
    pub prompts: Vec<Prompt>,
    /// Where the next page starts, if there is one.
    #[serde(rename = "nextCursor", default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// One message of a prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptMessage {
    /// Who says it.
    pub role: Role,
    /// What is said.
    pub content: Content,
}

/// The output of `get_prompt`: the prompt's messages, its arguments
/// filled in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GetPromptResult {
    /// What the prompt is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The messages.
    pub messages: Vec<PromptMessage>,
    /// Free-form metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

resource_shape! {
    /// A resource a plugin offers.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct Resource {
        /// Its URI.
        pub uri: String,
        ..
        /// Size in bytes, if known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub size: Option<u64>,
        ..
    }
}

resource_shape! {
    /// A family of resources a plugin offers: an RFC 6570 URI template.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct ResourceTemplate {
        /// The URI template (`memo://{id}`).
        #[serde(rename = "uriTemplate")]
        pub uri_template: String,
        ..
        ..
    }
}

/// The output of `list_resources`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ListResourcesResult {
    /// The resources.
    pub resources: Vec<Resource>,
    /// Where the next page starts, if there is one.
    #[serde(rename = "nextCursor", default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// The output of `list_resource_templates`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ListResourceTemplatesResult {
    /// The templates.
    #[serde(rename = "resourceTemplates")]
    pub resource_templates: Vec<ResourceTemplate>,
    /// Where the next page starts, if there is one.
    #[serde(rename = "nextCursor", default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// The output of `read_resource`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReadResourceResult {
    /// The resource's contents (a template may read as several).
    pub contents: Vec<ResourceContents>,
    /// Free-form metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

/// What a completion asks about: a prompt's argument or a resource
/// template's variable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum CompletionReference {
    /// `ref/prompt`: the prompt `name`.
    #[serde(rename = "ref/prompt")]
    Prompt {
        /// The prompt's name.
        name: String,
    },
    /// `ref/resource`: the resource template `uri`.
    #[serde(rename = "ref/resource")]
    Resource {
        /// The template.
        uri: String,
    },
}

/// The output of `complete`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CompleteResult {
    /// The suggestions.
    pub completion: Completion,
}

/// Completion suggestions.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Completion {
    /// The values (at most 100).
    pub values: Vec<String>,
    /// How many there are in all, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    /// Whether there are more than `values`.
    #[serde(rename = "hasMore", default, skip_serializing_if = "Option::is_none")]
    pub has_more: Option<bool>,
}

/// The variables of `uri` if it is one of the URIs of the RFC 6570 URI
/// template `template`, else `None`: literal text matched exactly; `{var}`
/// (one or more characters other than `/`, `?` and `#`); `{+var}` and
/// `{#var}` (any characters); `{/var}`, `{?var}`, `{&var}`, `{;var}`,
/// `{.var}` (optional: any characters, possibly none). Backtracking is
/// bounded: a pathological template matches nothing.
pub fn match_uri_template(template: &str, uri: &str) -> Option<JsonObject> {
    struct Var<'a> {
        name: &'a str,
        reserved: bool,
        optional: bool,
    }
    enum Part<'a> {
        Literal(&'a str),
        Var(Var<'a>),
    }
    let mut parts = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        if open > 0 {
            parts.push(Part::Literal(&rest[..open]));
        }
        let close = rest[open..].find('}')?;
        let expression = &rest[open + 1..open + close];
        let (operator, name) = match expression.chars().next() {
            Some(c @ ('+' | '#' | '/' | '?' | '&' | ';' | '.')) => (Some(c), &expression[1..]),
            _ => (None, expression),
        };
        parts.push(Part::Var(Var {
            name,
            reserved: operator.is_some(),
            optional: matches!(operator, Some('/' | '?' | '&' | ';' | '.')),
        }));
        rest = &rest[open + close + 1..];
    }
    if !rest.is_empty() {
        parts.push(Part::Literal(rest));
    }
    fn go(parts: &[Part<'_>], uri: &str, vars: &mut JsonObject, budget: &mut u32) -> bool {
        *budget = budget.saturating_sub(1);
        if *budget == 0 {
            return false;
        }
        match parts.split_first() {
            None => uri.is_empty(),
            Some((Part::Literal(text), rest)) => uri.strip_prefix(text).is_some_and(|uri| go(rest, uri, vars, budget)),
            Some((Part::Var(var), rest)) => {
                let ends = uri
                    .char_indices()
                    .take_while(|&(_, c)| var.reserved || !matches!(c, '/' | '?' | '#'))
                    .map(|(i, c)| i + c.len_utf8());
                let ends: Vec<usize> = std::iter::once(0).chain(ends).filter(|&end| end > 0 || var.optional).collect();
                for &end in ends.iter().rev() {
                    if go(rest, &uri[end..], vars, budget) {
                        vars.insert(var.name.to_owned(), serde_json::Value::String(uri[..end].to_owned()));
                        return true;
                    }
                }
                false
            }
        }
    }
    let mut vars = JsonObject::new();
    let mut budget = 10_000;
    go(&parts, uri, &mut vars, &mut budget).then_some(vars)
}

#[cfg(test)]
mod tests {
    use super::match_uri_template as matches;
    use serde_json::json;

    #[test]
    fn templates_match_their_uris_and_give_their_variables() {
        let vars = |value: serde_json::Value| value.as_object().cloned();
        assert_eq!(matches("memo://{id}", "memo://seven"), vars(json!({"id": "seven"})));
        assert_eq!(matches("memo://{id}", "memo://"), None);
        assert_eq!(matches("memo://{id}", "memo://a/b"), None);
        assert_eq!(matches("test://template/{id}/data", "test://template/42/data"), vars(json!({"id": "42"})));
        assert_eq!(matches("test://template/{id}/data", "test://template/42/other"), None);
        assert_eq!(matches("file:///{+path}", "file:///a/b/c.txt"), vars(json!({"path": "a/b/c.txt"})));
        assert_eq!(matches("api://items{?page}", "api://items"), vars(json!({"page": ""})));
        assert!(matches("a://{x}{y}", "a://xy").is_some());
        assert_eq!(matches("a://{x", "a://x"), None);
        assert_eq!(matches("exact://thing", "exact://thing"), vars(json!({})));
        assert_eq!(matches("exact://thing", "exact://thing2"), None);
    }
}
