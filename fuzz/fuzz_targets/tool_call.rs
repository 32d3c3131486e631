//! The fast `tools/call` parsers against rmcp's own parse: what they take,
//! rmcp takes to the same message (`toolhost_mcp::fuzzing::tool_call`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    toolhost_mcp::fuzzing::tool_call(data);
});
