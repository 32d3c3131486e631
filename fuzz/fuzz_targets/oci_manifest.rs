//! An OCI manifest or image index as a registry serves it
//! (`toolhost::fuzzing::oci_manifest`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    toolhost::fuzzing::oci_manifest(data);
});
