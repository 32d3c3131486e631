//! `{{name}}`: a toolhost tool plugin.
//!
//! Each `#[tool]` function is a tool. Its argument type's schema (derived
//! with `JsonSchema`, doc comments included) becomes the tool's
//! `inputSchema`; its doc comment becomes the tool's description; a
//! `Structured<T>` return value gives it an `outputSchema`. `plugin!` lists
//! the tools and generates the plugin's `describe` and `call` exports.

use toolhost_plugin_sdk::prelude::*;

/// Whom to greet, and how.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct GreetArgs {
    /// Who to greet.
    pub name: String,
    /// Exclamation marks to end with (at most 5; default 1).
    #[serde(default = "one")]
    #[schemars(range(max = 5))]
    pub excitement: u8,
}

fn one() -> u8 {
    1
}

/// What `greet` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Greeting {
    /// The greeting.
    pub message: String,
}

/// Greet someone by name.
#[tool(title = "Greet", read_only, idempotent)]
pub fn greet(args: GreetArgs) -> Result<Structured<Greeting>, ToolError> {
    let name = args.name.trim();
    if name.is_empty() {
        // A tool error (`isError: true`): the caller sees this message.
        return Err(ToolError::new("`name` must not be empty"));
    }
    let marks = "!".repeat(usize::from(args.excitement.min(5)));
    let message = format!("Hello, {name}{marks}");
    Ok(Structured::new(Greeting { message: message.clone() }).with_text(message))
}

plugin!(greet);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greets_by_name() {
        let greeting = greet(GreetArgs { name: " Ada ".to_owned(), excitement: 2 });
        let result = greeting.map(|g| g.value.message);
        assert_eq!(result.ok().as_deref(), Some("Hello, Ada!!"));
    }

    #[test]
    fn refuses_an_empty_name() {
        assert!(greet(GreetArgs { name: "  ".to_owned(), excitement: 1 }).is_err());
    }
}
