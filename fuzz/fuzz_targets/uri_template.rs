//! A resource template and a URI (split at the first NUL): matching ends,
//! and its variables make the URI again
//! (`toolhost::fuzzing::uri_template`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Some((template, uri)) = text.split_once('\0') {
        toolhost::fuzzing::uri_template(template, uri);
    }
});
