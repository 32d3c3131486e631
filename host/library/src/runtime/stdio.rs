//! A guest's standard output and error: kept, the last few KiB of them, so a
//! fault can say what the plugin printed before it died (a Rust panic's
//! message goes to stderr).
//!
//! A guest never writes to the host's own stdout (which belongs to the MCP
//! protocol under `toolhost serve`) or stderr. Writes always succeed, so a
//! chatty plugin cannot fail, or fill memory, by printing.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// How much of a stream is kept.
const KEEP: usize = 4096;

/// The tail of a guest's output stream. Clones share the buffer.
#[derive(Clone, Default)]
pub(crate) struct Tail {
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    buffer: Mutex<VecDeque<u8>>,
    /// Whether anything was written since the last [`Tail::clear`]: most
    /// calls print nothing, and then clearing takes no lock (it is done
    /// before every call, for both streams). Set and cleared under the
    /// lock; read without it by `clear`, which runs between calls, when
    /// the instance has been handed over (with the synchronisation that
    /// implies) from the thread that ran the last call.
    written: AtomicBool,
}

impl Tail {
    fn push(&self, bytes: &[u8]) {
        let mut buffer = self.shared.buffer.lock().unwrap_or_else(|p| p.into_inner());
        let bytes = &bytes[bytes.len().saturating_sub(KEEP)..];
        let overflow = (buffer.len() + bytes.len()).saturating_sub(KEEP);
        buffer.drain(..overflow);
        buffer.extend(bytes);
        self.shared.written.store(true, Ordering::Relaxed);
    }

    /// Forget what was written (before each call).
    pub(crate) fn clear(&self) {
        if !self.shared.written.load(Ordering::Relaxed) {
            return;
        }
        let mut buffer = self.shared.buffer.lock().unwrap_or_else(|p| p.into_inner());
        buffer.clear();
        self.shared.written.store(false, Ordering::Relaxed);
    }

    /// The last lines written, trimmed, for an error message; `None` if
    /// nothing was written.
    pub(crate) fn last_words(&self) -> Option<String> {
        let buffer = self.shared.buffer.lock().unwrap_or_else(|p| p.into_inner());
        let bytes: Vec<u8> = buffer.iter().copied().collect();
        let text = String::from_utf8_lossy(&bytes);
        let text = text.trim();
        if text.is_empty() {
            return None;
        }
        // The last 400 characters, on a character boundary, lines joined.
        let start = text.char_indices().rev().nth(399).map_or(0, |(i, _)| i);
        let tail = &text[start..];
        // Rust's panic hook adds a hint about RUST_BACKTRACE that means
        // nothing to the reader of a host's error.
        let joined = tail
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with("note: run with `RUST_BACKTRACE=1`"))
            .collect::<Vec<_>>()
            .join(" | ");
        Some(if start > 0 { format!("…{joined}") } else { joined })
    }
}

impl IsTerminal for Tail {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for Tail {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for Tail {
    async fn ready(&mut self) {}
}

impl OutputStream for Tail {
    fn write(&mut self, bytes: bytes::Bytes) -> StreamResult<()> {
        self.push(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(64 * 1024)
    }
}

impl AsyncWrite for Tail {
    fn poll_write(self: Pin<&mut Self>, _cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.push(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_kibibytes_and_the_last_words() {
        let tail = Tail::default();
        assert_eq!(tail.last_words(), None);
        tail.push(&vec![b'x'; 10_000]);
        tail.push(b"\npanicked at src/lib.rs:3:5:\nboom\n");
        assert_eq!(tail.shared.buffer.lock().unwrap().len(), KEEP);
        let words = tail.last_words().unwrap();
        assert!(words.ends_with("panicked at src/lib.rs:3:5: | boom"), "{words}");
        assert!(words.starts_with('…'));
        tail.clear();
        assert_eq!(tail.last_words(), None);
        // What a clone writes (the guest's stream) the next clear forgets.
        tail.clone().push(b"again\n");
        assert_eq!(tail.last_words().as_deref(), Some("again"));
        tail.clear();
        tail.clear();
        assert_eq!(tail.last_words(), None);
    }
}
