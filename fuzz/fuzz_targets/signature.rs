//! A signature as a registry or a server hands it: a cosign layer and a
//! sigstore bundle (`toolhost::fuzzing::signature`). Nothing verifies.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    toolhost::fuzzing::signature(data);
});
