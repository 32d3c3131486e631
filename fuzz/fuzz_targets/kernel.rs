//! The Extism kernel's host functions with the handles, offsets and lengths
//! a hostile guest chooses, against its memory
//! (`toolhost::fuzzing::kernel`).
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use toolhost::fuzzing::KernelCall;

/// A host function call; handles and lengths are mostly small (near the
/// blocks), sometimes anything.
#[derive(Debug, Arbitrary)]
enum Call {
    Alloc { n: u16, zero: bool },
    AllocAny(u64),
    Free(Handle),
    Length(Handle),
    InputSet(Handle, u16),
    OutputSet(Handle, u16),
    OutputSetAny(u64, u64),
    ErrorSet(Handle),
    Read(Handle),
    Poke { offset: u16, byte: u8 },
    Reset,
}

#[derive(Debug, Arbitrary)]
enum Handle {
    Near(u16),
    Any(u64),
}

impl Handle {
    fn value(&self) -> u64 {
        match *self {
            Handle::Near(at) => u64::from(at),
            Handle::Any(at) => at,
        }
    }
}

fuzz_target!(|input: (u16, Vec<Call>)| {
    let (budget, calls) = input;
    let calls: Vec<KernelCall> = calls
        .iter()
        .map(|call| match call {
            Call::Alloc { n, zero } => KernelCall::Alloc { n: u64::from(*n), zero: *zero },
            Call::AllocAny(n) => KernelCall::Alloc { n: *n, zero: true },
            Call::Free(h) => KernelCall::Free(h.value()),
            Call::Length(h) => KernelCall::Length(h.value()),
            Call::InputSet(h, len) => KernelCall::InputSet(h.value(), u64::from(*len)),
            Call::OutputSet(h, len) => KernelCall::OutputSet(h.value(), u64::from(*len)),
            Call::OutputSetAny(h, len) => KernelCall::OutputSet(*h, *len),
            Call::ErrorSet(h) => KernelCall::ErrorSet(h.value()),
            Call::Read(h) => KernelCall::Read(h.value()),
            Call::Poke { offset, byte } => KernelCall::Poke { offset: u64::from(*offset), byte: *byte },
            Call::Reset => KernelCall::Reset,
        })
        .collect();
    toolhost::fuzzing::kernel(&calls, usize::from(budget) * 64);
});
