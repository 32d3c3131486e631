//! Tool filters and approval rules, with the field names and enum values of
//! the tool-set service model (`spec/toolset-service.md`).
//!
//! A [`ToolFilter`] combines clauses with AND (`OPERATOR_AND`, also the
//! meaning of `OPERATOR_UNSPECIFIED`) or OR (`OPERATOR_OR`). A clause tests one
//! attribute of a tool (its name, title or description) with a [`Matcher`];
//! every matcher field that is set must match, case-insensitively unless
//! `caseSensitive` is true. With no clauses, an AND filter matches every tool
//! and an OR filter matches none.

use serde::{Deserialize, Serialize};
use toolhost_protocol::Tool;

/// `McpToolFilter`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolFilter {
    /// How the clauses combine.
    #[serde(default)]
    pub operator: Operator,
    /// The clauses.
    #[serde(default)]
    pub filters: Vec<FilterClause>,
}

/// How the clauses of a filter combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Operator {
    /// Not given: the same as AND.
    #[default]
    #[serde(rename = "OPERATOR_UNSPECIFIED")]
    Unspecified,
    /// Every clause must match.
    #[serde(rename = "OPERATOR_AND")]
    And,
    /// At least one clause must match.
    #[serde(rename = "OPERATOR_OR")]
    Or,
}

/// One clause: an attribute and how to match it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FilterClause {
    /// Which attribute of the tool.
    pub attribute: Attribute,
    /// How to match it.
    pub matcher: Matcher,
}

/// The tool attribute a clause tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Attribute {
    /// Not given: the tool's name, as `ATTRIBUTE_NAME` (the API document
    /// lists the value; a filter that leaves it unset tests the name).
    #[serde(rename = "ATTRIBUTE_UNSPECIFIED")]
    Unspecified,
    /// The tool's name (the plugin's own, not namespaced).
    #[serde(rename = "ATTRIBUTE_NAME")]
    Name,
    /// The tool's title (or its annotations' title); empty when it has none.
    #[serde(rename = "ATTRIBUTE_TITLE")]
    Title,
    /// The tool's description; empty when it has none.
    #[serde(rename = "ATTRIBUTE_DESCRIPTION")]
    Description,
}

/// String matching operations; every one that is set must match.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Matcher {
    /// Compare case-sensitively (default: no).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub case_sensitive: Option<bool>,
    /// The whole value equals this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exact: Option<String>,
    /// The value contains this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contains: Option<String>,
    /// The value starts with this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starts_with: Option<String>,
    /// The value ends with this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ends_with: Option<String>,
    /// The value matches this regular expression (Rust `regex` syntax,
    /// unanchored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
    /// `regex`, compiled on first use and kept: a filter is matched against
    /// every tool of every load.
    #[serde(skip)]
    compiled: CompiledRegex,
}

/// A matcher's compiled regex, with the pattern and case setting it was
/// compiled from (`None`: it does not compile). Not part of the matcher's
/// value: equal matchers are equal whether or not either has compiled yet.
#[derive(Debug, Clone, Default)]
struct CompiledRegex(std::sync::OnceLock<(String, bool, Option<regex::Regex>)>);

impl PartialEq for CompiledRegex {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for CompiledRegex {}

/// `toolApprovals`: which tools need a person's approval, on top of the
/// per-tool `requiresApproval` flags.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolApprovals {
    /// Every tool of the toolset.
    #[serde(default)]
    pub always: bool,
    /// The tools matching this filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub only: Option<ToolFilter>,
    /// Every tool whose annotations do not say it is harmless: not
    /// `readOnlyHint`, and `destructiveHint` not `false` (by MCP's defaults an
    /// unannotated tool may destroy). Annotations are the plugin's claims, so
    /// this only ever adds approvals; `always` is for untrusted plugins.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_annotations: bool,
}

impl ToolApprovals {
    /// Approval for every tool.
    pub fn always() -> Self {
        ToolApprovals { always: true, ..ToolApprovals::default() }
    }

    /// Approval for the tools whose annotations do not say they are
    /// harmless (see [`from_annotations`](Self::from_annotations)).
    pub fn from_annotations() -> Self {
        ToolApprovals { from_annotations: true, ..ToolApprovals::default() }
    }

    /// Whether these rules require approval for the tool.
    pub fn requires_approval(&self, tool: &Tool) -> bool {
        self.always
            || self.only.as_ref().is_some_and(|filter| filter.matches(tool))
            || (self.from_annotations && !harmless(tool))
    }
}

/// Whether a tool's annotations say it neither writes nor destroys: read
/// only, or explicitly not destructive. MCP's defaults: `readOnlyHint`
/// false, `destructiveHint` true.
fn harmless(tool: &Tool) -> bool {
    let annotations = tool.annotations.as_ref();
    annotations.and_then(|a| a.read_only_hint).unwrap_or(false)
        || annotations.and_then(|a| a.destructive_hint) == Some(false)
}

impl ToolFilter {
    /// Check that every clause can be evaluated: a matcher is given, every
    /// regex compiles.
    pub fn check(&self) -> Result<(), String> {
        for (i, clause) in self.filters.iter().enumerate() {
            let m = &clause.matcher;
            if m.exact.is_none()
                && m.contains.is_none()
                && m.starts_with.is_none()
                && m.ends_with.is_none()
                && m.regex.is_none()
            {
                return Err(format!(
                    "filters/{i}: the matcher sets none of exact, contains, startsWith, endsWith, regex"
                ));
            }
            if let Some(pattern) = &m.regex {
                m.compile(pattern).map_err(|e| format!("filters/{i}: invalid regex `{pattern}`: {e}"))?;
            }
        }
        Ok(())
    }

    /// Whether the tool matches the filter.
    pub fn matches(&self, tool: &Tool) -> bool {
        let mut clauses = self.filters.iter().map(|clause| clause.matches(tool));
        match self.operator {
            Operator::Or => clauses.any(|m| m),
            Operator::And | Operator::Unspecified => clauses.all(|m| m),
        }
    }
}

impl FilterClause {
    fn matches(&self, tool: &Tool) -> bool {
        let value = match self.attribute {
            Attribute::Name | Attribute::Unspecified => tool.name.as_str(),
            Attribute::Title => tool
                .title
                .as_deref()
                .or_else(|| tool.annotations.as_ref().and_then(|a| a.title.as_deref()))
                .unwrap_or(""),
            Attribute::Description => tool.description.as_deref().unwrap_or(""),
        };
        self.matcher.matches(value)
    }
}

impl Matcher {
    fn sensitive(&self) -> bool {
        self.case_sensitive.unwrap_or(false)
    }

    fn compile(&self, pattern: &str) -> Result<regex::Regex, regex::Error> {
        regex::RegexBuilder::new(pattern).case_insensitive(!self.sensitive()).size_limit(1 << 20).build()
    }

    /// Whether the value passes every matcher that is set.
    pub fn matches(&self, value: &str) -> bool {
        let fold = |s: &str| if self.sensitive() { s.to_owned() } else { s.to_lowercase() };
        let value_folded = fold(value);
        let test = |wanted: &Option<String>, check: fn(&str, &str) -> bool| {
            wanted.as_deref().is_none_or(|wanted| check(&value_folded, &fold(wanted)))
        };
        test(&self.exact, |v, w| v == w)
            && test(&self.contains, |v, w| v.contains(w))
            && test(&self.starts_with, |v, w| v.starts_with(w))
            && test(&self.ends_with, |v, w| v.ends_with(w))
            && self.regex.as_deref().is_none_or(|pattern| {
                let fresh = || (pattern.to_owned(), self.sensitive(), self.compile(pattern).ok());
                let (compiled_from, sensitive, compiled) = self.compiled.0.get_or_init(fresh);
                if compiled_from == pattern && *sensitive == self.sensitive() {
                    compiled.as_ref().is_some_and(|re| re.is_match(value))
                } else {
                    // The public fields changed since: compile this once.
                    self.compile(pattern).is_ok_and(|re| re.is_match(value))
                }
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, title: Option<&str>, description: &str) -> Tool {
        let mut tool = Tool::new(name, description, Default::default());
        tool.title = title.map(str::to_owned);
        tool
    }

    fn filter(value: serde_json::Value) -> ToolFilter {
        let filter: ToolFilter = serde_json::from_value(value).expect("filter");
        filter.check().expect("valid");
        filter
    }

    #[test]
    fn matchers() {
        let m = |v: serde_json::Value| serde_json::from_value::<Matcher>(v).unwrap();
        assert!(m(json!({"exact": "ADD"})).matches("add"));
        assert!(!m(json!({"exact": "ADD", "caseSensitive": true})).matches("add"));
        assert!(m(json!({"contains": "vid"})).matches("divide"));
        assert!(m(json!({"startsWith": "sub", "endsWith": "act"})).matches("subtract"));
        assert!(!m(json!({"startsWith": "sub", "endsWith": "x"})).matches("subtract"));
        assert!(m(json!({"regex": "^(add|sub)"})).matches("Subtract"));
        assert!(!m(json!({"regex": "^(add|sub)", "caseSensitive": true})).matches("Subtract"));
    }

    #[test]
    fn a_regex_is_compiled_once_and_follows_changes_to_the_matcher() {
        let mut m = serde_json::from_value::<Matcher>(json!({"regex": "^add$"})).unwrap();
        assert!(m.compiled.0.get().is_none());
        assert!(m.matches("ADD"));
        let first = m.compiled.0.get().map(|(_, _, re)| re.as_ref().map(|re| re.as_str().to_owned()));
        assert_eq!(first, Some(Some("^add$".to_owned())), "compiled by the first match and kept");
        assert!(m.matches("add") && !m.matches("divide"));
        assert_eq!(m.compiled.0.get().map(|(_, _, re)| re.as_ref().map(|re| re.as_str().to_owned())), first);
        // Fields are public: a changed pattern or case setting is honoured.
        m.regex = Some("^div".to_owned());
        assert!(m.matches("divide") && !m.matches("add"));
        m.case_sensitive = Some(true);
        assert!(!m.matches("DIVIDE"));
        assert_eq!(m, serde_json::from_value::<Matcher>(json!({"regex": "^div", "caseSensitive": true})).unwrap());
    }

    #[test]
    fn operators_and_attributes() {
        let add = tool("add", Some("Add"), "Add two numbers");
        let delete = tool("delete_file", None, "Deletes a file. Destructive.");
        let any = filter(json!({"operator": "OPERATOR_OR", "filters": [
            {"attribute": "ATTRIBUTE_NAME", "matcher": {"startsWith": "delete"}},
            {"attribute": "ATTRIBUTE_DESCRIPTION", "matcher": {"contains": "destructive"}}
        ]}));
        assert!(any.matches(&delete) && !any.matches(&add));
        let both = filter(json!({"operator": "OPERATOR_AND", "filters": [
            {"attribute": "ATTRIBUTE_TITLE", "matcher": {"exact": "add"}},
            {"attribute": "ATTRIBUTE_DESCRIPTION", "matcher": {"contains": "numbers"}}
        ]}));
        assert!(both.matches(&add) && !both.matches(&delete));
        assert!(filter(json!({})).matches(&add), "an AND of nothing matches");
        assert!(!filter(json!({"operator": "OPERATOR_OR"})).matches(&add), "an OR of nothing does not");
        // An attribute left unspecified tests the name.
        let unspecified = filter(json!({"filters": [
            {"attribute": "ATTRIBUTE_UNSPECIFIED", "matcher": {"startsWith": "delete"}}
        ]}));
        assert!(unspecified.check().is_ok());
        assert!(unspecified.matches(&delete) && !unspecified.matches(&add));
    }

    #[test]
    fn approvals_from_annotations_follow_the_mcp_defaults() {
        let annotated = |read_only: Option<bool>, destructive: Option<bool>| {
            let mut tool = tool("t", None, "d");
            if read_only.is_some() || destructive.is_some() {
                tool.annotations = Some(toolhost_protocol::ToolAnnotations {
                    read_only_hint: read_only,
                    destructive_hint: destructive,
                    ..Default::default()
                });
            }
            tool
        };
        let rules = ToolApprovals::from_annotations();
        assert!(rules.requires_approval(&annotated(None, None)), "unannotated: may destroy");
        assert!(rules.requires_approval(&annotated(Some(false), None)), "writes, destructive by default");
        assert!(rules.requires_approval(&annotated(None, Some(true))));
        assert!(!rules.requires_approval(&annotated(Some(true), None)), "read-only");
        assert!(!rules.requires_approval(&annotated(None, Some(false))), "says it destroys nothing");
        assert!(!ToolApprovals::default().requires_approval(&annotated(None, None)), "off unless asked");
        let parsed: ToolApprovals = serde_json::from_value(json!({"fromAnnotations": true})).unwrap();
        assert_eq!(parsed, rules);
    }

    #[test]
    fn bad_filters_are_refused() {
        let bad = |v: serde_json::Value| serde_json::from_value::<ToolFilter>(v).unwrap().check().unwrap_err();
        assert!(bad(json!({"filters": [{"attribute": "ATTRIBUTE_NAME", "matcher": {}}]})).contains("sets none"));
        assert!(
            bad(json!({"filters": [{"attribute": "ATTRIBUTE_NAME", "matcher": {"regex": "("}}]}))
                .contains("invalid regex")
        );
    }
}
