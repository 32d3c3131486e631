//! An OCI layer as a registry serves it: tar, gzip'd tar or anything, its
//! Wasm files found within the unpacking budget
//! (`toolhost::fuzzing::oci_layer`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((budget, layer)) = data.split_first() else {
        return;
    };
    toolhost::fuzzing::oci_layer(layer, u64::from(*budget) * 512);
});
