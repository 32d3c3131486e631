//! A secret in a log line or a plugin's text, at any position, in any of
//! the forms a line writes it in, the line cut anywhere: no form of the
//! secret survives (`toolhost::fuzzing::redaction`).
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use toolhost::fuzzing::Written;

#[derive(Debug, Arbitrary)]
struct Input {
    secret: String,
    before: String,
    after: String,
    written: u8,
    cuts: Vec<u16>,
}

fuzz_target!(|input: Input| {
    let written = [
        Written::Plain,
        Written::Json,
        Written::Debug,
        Written::DebugInJson,
        Written::JsonInDebug,
        Written::Base64,
        Written::Base64Url,
    ][usize::from(input.written) % 7];
    let cuts: Vec<usize> = input.cuts.iter().take(8).map(|&cut| usize::from(cut)).collect();
    toolhost::fuzzing::redaction(&input.secret, &input.before, &input.after, written, &cuts);
});
