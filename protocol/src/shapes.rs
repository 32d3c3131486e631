//! The fields the protocol's resource shapes share: a resource a plugin
//! offers, a template of them, and a link to one in a result all have a
//! name, a title, a description, a MIME type, annotations and `_meta`,
//! with the same names on the wire. They are written once here.

/// A struct of the resource shape: its own leading fields (the URI or URI
/// template), the shared `name`, `title`, `description` and `mimeType`,
/// its own middle fields (`size`), the shared `annotations` and `_meta`,
/// then its own trailing fields; on the wire in that order.
macro_rules! resource_shape {
    (
        $(#[$attr:meta])*
        pub struct $name:ident {
            $($(#[$head_attr:meta])* pub $head:ident: $head_ty:ty,)*
            ..
            $($(#[$middle_attr:meta])* pub $middle:ident: $middle_ty:ty,)*
            ..
            $($(#[$tail_attr:meta])* pub $tail:ident: $tail_ty:ty,)*
        }
    ) => {
        $(#[$attr])*
        pub struct $name {
            $($(#[$head_attr])* pub $head: $head_ty,)*
            /// Programmatic name.
            pub name: String,
            /// Display name.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub title: Option<String>,
            /// What it is.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub description: Option<String>,
            /// MIME type, if known (of every resource, for a template).
            #[serde(rename = "mimeType", default, skip_serializing_if = "Option::is_none")]
            pub mime_type: Option<String>,
            $($(#[$middle_attr])* pub $middle: $middle_ty,)*
            /// Audience and priority hints.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub annotations: Option<$crate::Annotations>,
            /// Free-form metadata.
            #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
            pub meta: Option<$crate::JsonObject>,
            $($(#[$tail_attr])* pub $tail: $tail_ty,)*
        }
    };
}
