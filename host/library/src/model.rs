//! Tools as model APIs take them.
//!
//! Agent runtimes hand tools to a model as a name, a description and a JSON
//! Schema of the parameters, in the shape of the model's API. [`ModelTool`]
//! is that view, borrowed from the loaded tools: listing every tool for
//! every request of an agent loop clones no schema. It serializes into the
//! OpenAI (`{"type": "function", "function": {...}}`) and Anthropic
//! (`{"name", "description", "input_schema"}`) tool formats.

use serde::Serialize;
use serde::ser::SerializeStruct as _;
use toolhost_protocol::{JsonObject, Tool};

/// A tool as a model sees it: what to call it, what it does, what it takes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelTool<'a> {
    /// The name the model calls it by (namespaced, for a registry's tools).
    pub name: &'a str,
    /// What it does: its description, else its title, else empty.
    pub description: &'a str,
    /// The JSON Schema of its arguments (`inputSchema`).
    pub parameters: &'a JsonObject,
}

impl<'a> ModelTool<'a> {
    /// The view of a plugin's tool, under its own name.
    pub fn of(tool: &'a Tool) -> Self {
        ModelTool::named(&tool.name, tool)
    }

    /// The view of `tool` under another name (a registry's namespaced one).
    pub fn named(name: &'a str, tool: &'a Tool) -> Self {
        let description = tool
            .description
            .as_deref()
            .or(tool.title.as_deref())
            .or_else(|| tool.annotations.as_ref().and_then(|a| a.title.as_deref()))
            .unwrap_or("");
        ModelTool { name, description, parameters: &tool.input_schema }
    }

    /// The OpenAI tool format: `{"type": "function", "function": {"name",
    /// "description", "parameters"}}`.
    pub fn openai(self) -> OpenAiTool<'a> {
        OpenAiTool(self)
    }

    /// The Anthropic tool format: `{"name", "description", "input_schema"}`.
    pub fn anthropic(self) -> AnthropicTool<'a> {
        AnthropicTool(self)
    }
}

/// A [`ModelTool`] in the OpenAI tool format (serialize it).
#[derive(Debug, Clone, Copy)]
pub struct OpenAiTool<'a>(ModelTool<'a>);

/// A [`ModelTool`] in the Anthropic tool format (serialize it).
#[derive(Debug, Clone, Copy)]
pub struct AnthropicTool<'a>(ModelTool<'a>);

impl Serialize for ModelTool<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut out = serializer.serialize_struct("ModelTool", 3)?;
        out.serialize_field("name", self.name)?;
        out.serialize_field("description", self.description)?;
        out.serialize_field("parameters", self.parameters)?;
        out.end()
    }
}

impl Serialize for OpenAiTool<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut out = serializer.serialize_struct("OpenAiTool", 2)?;
        out.serialize_field("type", "function")?;
        out.serialize_field("function", &self.0)?;
        out.end()
    }
}

impl Serialize for AnthropicTool<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut out = serializer.serialize_struct("AnthropicTool", 3)?;
        out.serialize_field("name", self.0.name)?;
        out.serialize_field("description", self.0.description)?;
        out.serialize_field("input_schema", self.0.parameters)?;
        out.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_formats_of_model_apis() {
        let tool: Tool = serde_json::from_value(json!({
            "name": "add", "title": "Add", "description": "Add two numbers.",
            "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}}}
        }))
        .unwrap();
        let view = ModelTool::named("calc__add", &tool);
        assert_eq!(
            serde_json::to_value(view.openai()).unwrap(),
            json!({"type": "function", "function": {"name": "calc__add", "description": "Add two numbers.",
                "parameters": {"type": "object", "properties": {"a": {"type": "number"}}}}})
        );
        assert_eq!(
            serde_json::to_value(view.anthropic()).unwrap(),
            json!({"name": "calc__add", "description": "Add two numbers.",
                "input_schema": {"type": "object", "properties": {"a": {"type": "number"}}}})
        );
        let untitled: Tool =
            serde_json::from_value(json!({"name": "t", "title": "T", "inputSchema": {"type": "object"}})).unwrap();
        assert_eq!(ModelTool::of(&untitled).description, "T", "the title stands in for a missing description");
    }
}
