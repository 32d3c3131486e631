//! `calculator`: arithmetic on two numbers, with typed structured output.
//!
//! Every tool takes [`Operands`] and returns an [`Answer`] as structured
//! content (so the tools carry an `outputSchema`), with the number itself as
//! the text item. Dividing by zero is a tool error, not a crash.

use toolhost_plugin_sdk::prelude::*;

/// The two numbers an operation works on.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Operands {
    /// The first operand.
    pub a: f64,
    /// The second operand.
    pub b: f64,
}

/// The outcome of an operation.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Answer {
    /// The result of the operation.
    pub result: f64,
}

/// The answer as structured content, with the plain number as text.
fn answer(result: f64) -> Result<Structured<Answer>, ToolError> {
    if !result.is_finite() {
        return Err(ToolError::new("the result is too large to represent"));
    }
    Ok(Structured::new(Answer { result }).with_text(result.to_string()))
}

/// Add two numbers: a + b.
#[tool(title = "Add", read_only, idempotent)]
pub fn add(Operands { a, b }: Operands) -> Result<Structured<Answer>, ToolError> {
    answer(a + b)
}

/// Subtract the second number from the first: a - b.
#[tool(title = "Subtract", read_only, idempotent)]
pub fn subtract(Operands { a, b }: Operands) -> Result<Structured<Answer>, ToolError> {
    answer(a - b)
}

/// Multiply two numbers: a × b.
#[tool(title = "Multiply", read_only, idempotent)]
pub fn multiply(Operands { a, b }: Operands) -> Result<Structured<Answer>, ToolError> {
    answer(a * b)
}

/// Divide the first number by the second: a ÷ b. Dividing by zero is an error.
#[tool(title = "Divide", read_only, idempotent)]
pub fn divide(Operands { a, b }: Operands) -> Result<Structured<Answer>, ToolError> {
    if b == 0.0 {
        return Err(ToolError::new("cannot divide by zero"));
    }
    answer(a / b)
}

plugin!(add, subtract, multiply, divide);
