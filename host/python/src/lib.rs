//! `toolhost._toolhost`: the library for Python. The package `toolhost`
//! (`python/toolhost/`) wraps this module in Python terms.
//!
//! Calls run on one tokio runtime of the module's own; the GIL is released
//! while a call runs (a blocking call detaches from the interpreter, an
//! awaited one runs on the runtime), so calls from many threads and tasks
//! run side by side. Arguments and results cross as Python objects
//! (`pythonize`), checked by the library as every call is.

use pyo3::prelude::*;

mod call;
mod errors;
mod hooks;
mod plugin;
mod registry;
mod result;

/// The native half of the `toolhost` package.
#[pymodule]
fn _toolhost(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<plugin::Plugin>()?;
    module.add_class::<registry::Registry>()?;
    module.add_class::<result::ToolInfo>()?;
    module.add_class::<result::CallResult>()?;
    errors::register(module)?;
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
