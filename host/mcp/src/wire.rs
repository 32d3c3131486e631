//! rmcp's types built from ours, field by field: no JSON round trip per
//! call, and every result gets rmcp's defaults (`resultType: "complete"`,
//! which protocol 2026-07-28 requires and rmcp strips for older peers).
//! Fields our types keep only in `extra` (unknown to the protocol) are not
//! carried over, as rmcp's types have nowhere to put them.

use std::sync::Arc;

use rmcp::model as m;
use toolhost_protocol as p;

fn meta(meta: Option<p::JsonObject>) -> Option<m::MetaObject> {
    meta.map(m::MetaObject)
}

fn annotations(annotations: Option<p::Annotations>) -> Option<m::Annotations> {
    let a = annotations?;
    let mut out = m::Annotations::default();
    out.audience = a.audience.map(|roles| {
        roles
            .into_iter()
            .map(|role| match role {
                p::Role::User => m::Role::User,
                p::Role::Assistant => m::Role::Assistant,
            })
            .collect()
    });
    // A priority is within 0.0..=1.0: f32 holds it.
    out.priority = a.priority.map(|p| p as f32);
    out.last_modified = a.last_modified;
    Some(out)
}

fn resource_contents(r: p::ResourceContents) -> m::ResourceContents {
    match (r.text, r.blob) {
        (None, Some(blob)) => {
            m::ResourceContents::BlobResourceContents { uri: r.uri, mime_type: r.mime_type, blob, meta: meta(r.meta) }
        }
        (text, _) => m::ResourceContents::TextResourceContents {
            uri: r.uri,
            mime_type: r.mime_type,
            text: text.unwrap_or_default(),
            meta: meta(r.meta),
        },
    }
}

fn content(content: p::Content) -> m::ContentBlock {
    match content {
        p::Content::Text(t) => {
            let mut out = m::TextContent::new(t.text);
            out.meta = meta(t.meta);
            out.annotations = annotations(t.annotations);
            m::ContentBlock::Text(out)
        }
        p::Content::Image(b) => {
            let mut out = m::ImageContent::new(b.data, b.mime_type);
            out.meta = meta(b.meta);
            out.annotations = annotations(b.annotations);
            m::ContentBlock::Image(out)
        }
        p::Content::Audio(b) => {
            let mut out = m::AudioContent::new(b.data, b.mime_type);
            out.meta = meta(b.meta);
            out.annotations = annotations(b.annotations);
            m::ContentBlock::Audio(out)
        }
        p::Content::Resource(r) => {
            let mut out = m::EmbeddedResource::new(resource_contents(r.resource));
            out.meta = meta(r.meta);
            out.annotations = annotations(r.annotations);
            m::ContentBlock::Resource(out)
        }
        p::Content::ResourceLink(l) => {
            let mut out = m::Resource::new(l.uri, l.name);
            out.title = l.title;
            out.description = l.description;
            out.mime_type = l.mime_type;
            out.size = l.size;
            out.meta = meta(l.meta);
            out.annotations = annotations(l.annotations);
            m::ContentBlock::ResourceLink(out)
        }
    }
}

/// A tool's result as rmcp's `CallToolResult` (`resultType: "complete"`).
pub(crate) fn call_tool_result(result: p::CallToolResult) -> m::CallToolResult {
    let mut out = m::CallToolResult::default();
    out.content = result.content.into_iter().map(content).collect();
    out.structured_content = result.structured_content;
    out.is_error = result.is_error;
    out.meta = meta(result.meta);
    out
}

/// A tool description as rmcp's `Tool`.
pub(crate) fn tool(tool: p::Tool) -> m::Tool {
    let mut out = m::Tool::default();
    out.name = tool.name.into();
    out.title = tool.title;
    out.description = tool.description.map(Into::into);
    out.input_schema = Arc::new(tool.input_schema);
    out.output_schema = tool.output_schema.map(Arc::new);
    out.annotations = tool.annotations.map(|a| {
        m::ToolAnnotations::from_raw(
            a.title,
            a.read_only_hint,
            a.destructive_hint,
            a.idempotent_hint,
            a.open_world_hint,
        )
    });
    out.meta = meta(tool.meta);
    out
}
