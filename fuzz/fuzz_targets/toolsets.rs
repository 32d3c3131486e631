//! A toolsets file's text, as JSON, YAML or TOML (the first byte chooses):
//! read, checked and resolved, or refused with a message
//! (`toolhost::fuzzing::toolsets`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((choice, text)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    let format = ["json", "yaml", "toml"][usize::from(*choice) % 3];
    toolhost::fuzzing::toolsets(text, format);
});
