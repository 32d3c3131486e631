//! A plugin's messages (an Extism `error_set`, a component's
//! `call-error`, a fault's text) cut to a bound, on a character boundary,
//! with the original size noted, and redacted before the cut.

use crate::error::Fault;
use crate::runtime::outcome::RunError;
use crate::secrets::Redactor;

/// Most bytes of a plugin's message kept in a fault.
pub(crate) const MAX_MESSAGE_BYTES: usize = 4096;
/// Most bytes of any fault's message (the plugin's words and the host's
/// around them, a stderr tail): the backstop behind [`MAX_MESSAGE_BYTES`].
const MAX_FAULT_BYTES: usize = 2 * MAX_MESSAGE_BYTES;

/// `bytes` as text, cut to `max` (on a character boundary) with the
/// original size noted. Only the kept bytes are read.
fn cut(bytes: &[u8], max: usize) -> String {
    if bytes.len() <= max {
        return String::from_utf8_lossy(bytes).into_owned();
    }
    let mut kept = String::from_utf8_lossy(&bytes[..max]).into_owned();
    // A character cut in two reads as U+FFFD at the end: drop it.
    if kept.ends_with('\u{FFFD}') {
        kept.pop();
    }
    format!("{kept}… (cut: the message was {} bytes)", bytes.len())
}

/// A plugin's message as text, cut to [`MAX_MESSAGE_BYTES`] with the
/// original size noted, redacted of the plugin's sensitive values before
/// the cut (so none is cut in two). Reads only the start of `bytes`.
pub(crate) fn short_message(bytes: &[u8], redactor: &Redactor) -> String {
    if redactor.is_empty() {
        return cut(bytes, MAX_MESSAGE_BYTES);
    }
    let head = redactor.redact_head(bytes, MAX_MESSAGE_BYTES);
    if bytes.len() <= MAX_MESSAGE_BYTES && head.len() <= MAX_MESSAGE_BYTES {
        return String::from_utf8_lossy(&head).into_owned();
    }
    let kept = cut(&head[..head.len().min(MAX_MESSAGE_BYTES)], MAX_MESSAGE_BYTES);
    format!("{kept}… (cut: the message was {} bytes)", bytes.len())
}

/// A plugin's message cut as [`short_message`] cuts bytes.
#[cfg(any(test, feature = "component"))]
pub(crate) fn shorten(message: String, redactor: &Redactor) -> String {
    if message.len() <= MAX_MESSAGE_BYTES && redactor.is_empty() {
        message
    } else {
        short_message(message.as_bytes(), redactor)
    }
}

/// A fault whose message is short (at most twice [`MAX_MESSAGE_BYTES`]:
/// room for a cut plugin message and the host's words around it).
pub(crate) fn short_fault(fault: Fault) -> Fault {
    if fault.message.len() <= MAX_FAULT_BYTES {
        return fault;
    }
    Fault { message: cut(fault.message.as_bytes(), MAX_FAULT_BYTES), ..fault }
}

/// A fault whose message is short, if the error is a fault.
pub(crate) fn short_error(error: RunError) -> RunError {
    match error {
        RunError::Fault(fault) => RunError::Fault(short_fault(fault)),
        output => output,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_cut_with_their_size() {
        assert_eq!(short_message(b"short", &Redactor::default()), "short");
        let long = "é".repeat(10_000);
        let cut = short_message(long.as_bytes(), &Redactor::default());
        assert!(cut.len() < MAX_MESSAGE_BYTES + 100, "{}", cut.len());
        assert!(cut.ends_with("… (cut: the message was 20000 bytes)"), "{cut}");
        assert!(!cut.contains('\u{FFFD}'));
        assert_eq!(shorten("ok".to_owned(), &Redactor::default()), "ok");
    }
}
