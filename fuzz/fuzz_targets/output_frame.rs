//! A plugin's output frame through every reader: the bounded JSON reader,
//! the fast reader of plain results, the value reader of host-function
//! arguments (`toolhost::fuzzing::output_frame`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first two bytes choose the output bound: small bounds are crossed
    // at every place of a value.
    let (bound, output) = match data {
        [a, b, rest @ ..] => (usize::from(u16::from_le_bytes([*a, *b])) * 16, rest),
        _ => return,
    };
    toolhost::fuzzing::output_frame(output, bound);
    toolhost::fuzzing::output_frame(output, 1 << 20);
});
