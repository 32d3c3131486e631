//! A call's log budget: at most [`MAX_LOG_LINES`] lines and
//! [`MAX_LOG_BYTES`] per call, each line at most [`MAX_LOG_LINE_BYTES`];
//! then one note that further lines are dropped.

use crate::sandbox::format_size;

/// Most log lines a call may write.
pub(crate) const MAX_LOG_LINES: usize = 256;
/// Most bytes of log lines a call may write.
pub(crate) const MAX_LOG_BYTES: usize = 64 * 1024;
/// Longest log line kept (longer ones are cut).
pub(crate) const MAX_LOG_LINE_BYTES: usize = 2048;

/// What a call may still log: lines and bytes left, and whether the note
/// that further lines are dropped was written.
#[derive(Debug)]
pub(crate) struct LogBudget {
    lines: usize,
    bytes: usize,
    noted: bool,
}

impl Default for LogBudget {
    fn default() -> Self {
        LogBudget { lines: MAX_LOG_LINES, bytes: MAX_LOG_BYTES, noted: false }
    }
}

/// What to do with a log line.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum LogLine {
    /// Write it (cut if it was long).
    Write(String),
    /// The budget is spent: write the note that further lines are dropped,
    /// once.
    Note,
    /// Drop it.
    Drop,
}

impl LogBudget {
    /// A fresh budget (before each call).
    pub(crate) fn reset(&mut self) {
        *self = LogBudget::default();
    }

    /// Whether a line of `len` bytes may be written, and what of it: the
    /// caller reads at most [`MAX_LOG_LINE_BYTES`] of it (`head`).
    pub(crate) fn admit(&mut self, head: &[u8], len: usize) -> LogLine {
        let kept = len.min(MAX_LOG_LINE_BYTES);
        if self.lines == 0 || self.bytes < kept {
            self.lines = 0;
            if self.noted {
                return LogLine::Drop;
            }
            self.noted = true;
            return LogLine::Note;
        }
        self.lines -= 1;
        self.bytes -= kept;
        let head = &head[..head.len().min(MAX_LOG_LINE_BYTES)];
        let mut line = String::from_utf8_lossy(head).into_owned();
        if len > MAX_LOG_LINE_BYTES {
            if line.ends_with('\u{FFFD}') {
                line.pop();
            }
            line.push_str(&format!("… (cut: the line was {len} bytes)"));
        }
        LogLine::Write(line)
    }

    /// The note written once the budget is spent.
    pub(crate) fn note() -> String {
        format!(
            "further log lines of this call dropped (at most {MAX_LOG_LINES} lines and {} per call)",
            format_size(MAX_LOG_BYTES as u64)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_are_capped_per_call_with_one_note() {
        let mut budget = LogBudget::default();
        for _ in 0..MAX_LOG_LINES {
            assert!(matches!(budget.admit(b"line", 4), LogLine::Write(_)));
        }
        assert_eq!(budget.admit(b"line", 4), LogLine::Note);
        assert_eq!(budget.admit(b"line", 4), LogLine::Drop);
        budget.reset();
        let long = vec![b'x'; 5000];
        let LogLine::Write(line) = budget.admit(&long, long.len()) else { panic!("refused") };
        assert!(line.ends_with("(cut: the line was 5000 bytes)") && line.len() < MAX_LOG_LINE_BYTES + 64, "{line}");
        let mut bytes = LogBudget::default();
        let written = (0..1000).filter(|_| matches!(bytes.admit(&long, long.len()), LogLine::Write(_))).count();
        assert_eq!(written, MAX_LOG_BYTES / MAX_LOG_LINE_BYTES);
    }
}
