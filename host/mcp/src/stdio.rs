//! MCP over a process's stdin and stdout (feature `stdio`).
//!
//! rmcp does the protocol; [`stdio_front`] sits in front of it and reads the
//! lines itself: an unparsable line is answered with `-32700` (id null), a
//! line over [`MAX_LINE`] with `-32700` too instead of being dropped, a
//! JSON-RPC batch is split and its answers joined again, and a `tools/call`
//! with malformed params gets `-32602` (see DESIGN.md, `serve`).

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

use crate::jsonrpc::{MAX_LINE, SHUTDOWN_GRACE, check_message, error_response};
use crate::{McpServer, ServeError};

/// Serve MCP on the process's stdin and stdout until the client closes
/// stdin or `shutdown` resolves (e.g. on a signal); then the output is
/// drained for at most [`SHUTDOWN_GRACE`].
pub async fn serve_stdio(server: McpServer, shutdown: impl Future<Output = ()>) -> Result<(), ServeError> {
    // Pipes (what MCP clients give a server they start) are read and
    // written on the reactor, without a blocking thread per read and
    // write; anything else (a terminal, a file) through tokio's stdio.
    #[cfg(unix)]
    if let Some((input, output)) = pipes() {
        return serve_stdio_on(server, input, output, shutdown).await;
    }
    serve_stdio_on(server, tokio::io::stdin(), tokio::io::stdout(), shutdown).await
}

/// Stdin and stdout, if both are pipes or sockets, as non-blocking streams
/// on the reactor.
#[cfg(unix)]
fn pipes() -> Option<(Box<dyn tokio::io::AsyncRead + Unpin + Send>, Box<dyn tokio::io::AsyncWrite + Unpin + Send>)> {
    use std::os::fd::AsFd as _;
    use std::os::unix::fs::FileTypeExt as _;
    let input = std::io::stdin().as_fd().try_clone_to_owned().ok()?;
    let output = std::io::stdout().as_fd().try_clone_to_owned().ok()?;
    let kind = |fd: &std::os::fd::OwnedFd| -> Option<std::fs::FileType> {
        let file = std::fs::File::from(fd.try_clone().ok()?);
        Some(file.metadata().ok()?.file_type())
    };
    let (input_kind, output_kind) = (kind(&input)?, kind(&output)?);
    // (Node's child processes get socket pairs, not pipes.)
    let socket = |fd: std::os::fd::OwnedFd| {
        let stream = std::os::unix::net::UnixStream::from(fd);
        stream.set_nonblocking(true).ok()?;
        tokio::net::UnixStream::from_std(stream).ok()
    };
    let input: Box<dyn tokio::io::AsyncRead + Unpin + Send> = if input_kind.is_fifo() {
        Box::new(tokio::net::unix::pipe::Receiver::from_owned_fd(input).ok()?)
    } else if input_kind.is_socket() {
        Box::new(socket(input)?)
    } else {
        return None;
    };
    let output: Box<dyn tokio::io::AsyncWrite + Unpin + Send> = if output_kind.is_fifo() {
        Box::new(tokio::net::unix::pipe::Sender::from_owned_fd(output).ok()?)
    } else if output_kind.is_socket() {
        Box::new(socket(output)?)
    } else {
        return None;
    };
    Some((input, output))
}

/// [`serve_stdio`] on any byte streams (a pipe, a socket, a test's duplex).
pub async fn serve_stdio_on<I, O>(
    server: McpServer,
    input: I,
    output: O,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError>
where
    I: tokio::io::AsyncRead + Unpin + Send + 'static,
    O: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    use rmcp::ServiceExt;
    // rmcp talks to one end of an in-memory pipe; the front owns the real
    // input and output.
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    let (from_server, to_server) = tokio::io::split(ours);
    let front = tokio::spawn(stdio_front(input, output, from_server, to_server));
    let running = server.serve(tokio::io::split(theirs)).await.map_err(|e| ServeError::Start(e.to_string()))?;
    let cancel = running.cancellation_token();
    tokio::select! {
        outcome = running.waiting() => { outcome.map_err(|e| ServeError::Failed(e.to_string()))?; }
        () = shutdown => {
            tracing::info!("shutting down");
            cancel.cancel();
        }
    }
    // The session is over: the front writes out what the server wrote and
    // ends (it does not wait for more input).
    if tokio::time::timeout(SHUTDOWN_GRACE, front).await.is_err() {
        tracing::warn!("the output did not drain within {SHUTDOWN_GRACE:?}");
    }
    Ok(())
}

/// What the front does with one incoming message (or batch).
enum Incoming {
    /// Hand this line to rmcp as it came (one message that passed the
    /// checks).
    Line,
    /// Hand these messages to rmcp, one line each.
    Forward(Vec<Value>),
    /// Answer at once, without rmcp.
    Answer(Value),
}

/// A batch waits for the answers to these request ids.
struct PendingBatch {
    waiting: Vec<Value>,
    answers: Vec<Value>,
}

/// Read one line of at most [`MAX_LINE`] bytes. `Ok(None)` at the end of
/// input; `Ok(Some(Err(len)))` for a line that was too long (and skipped).
async fn read_line<R: tokio::io::AsyncBufRead + Unpin>(
    input: &mut R,
    line: &mut Vec<u8>,
) -> std::io::Result<Option<Result<(), usize>>> {
    line.clear();
    let mut skipped = 0usize;
    loop {
        let buffer = input.fill_buf().await?;
        if buffer.is_empty() {
            return Ok(if line.is_empty() && skipped == 0 {
                None
            } else if skipped > 0 {
                Some(Err(skipped))
            } else {
                Some(Ok(()))
            });
        }
        let (chunk, done) = match buffer.iter().position(|&b| b == b'\n') {
            Some(at) => (&buffer[..at], Some(at + 1)),
            None => (buffer, None),
        };
        if skipped > 0 || line.len() + chunk.len() > MAX_LINE {
            skipped += line.len() + chunk.len();
            line.clear();
        } else {
            line.extend_from_slice(chunk);
        }
        let used = done.unwrap_or(buffer.len());
        input.consume(used);
        if done.is_some() {
            return Ok(Some(if skipped > 0 { Err(skipped) } else { Ok(()) }));
        }
    }
}

/// Classify one line of input.
fn classify(line: &[u8]) -> Option<Incoming> {
    let text = std::str::from_utf8(line).ok().map(str::trim);
    if text.is_some_and(str::is_empty) {
        return None;
    }
    let parsed: Result<Value, String> = match text {
        Some(text) => serde_json::from_str(text).map_err(|e| e.to_string()),
        None => Err("the line is not UTF-8".to_owned()),
    };
    Some(match parsed {
        Err(e) => Incoming::Answer(error_response(Value::Null, -32700, format!("Parse error: {e}"))),
        Ok(Value::Array(batch)) if batch.is_empty() => {
            Incoming::Answer(error_response(Value::Null, -32600, "an empty batch is not a request"))
        }
        Ok(Value::Array(batch)) => {
            // Checked answers stay in the batch: an answer array is only sent
            // once every forwarded request has its answer too.
            let mut forward = Vec::new();
            let mut answers = Vec::new();
            for message in batch {
                match check_message(message) {
                    Ok(message) => forward.push(message),
                    Err(answer) => answers.push(answer),
                }
            }
            return Some(Incoming::Forward(
                std::iter::once(json!({"__batch_answers": answers})).chain(forward).collect(),
            ));
        }
        Ok(message) => match check_message(message) {
            Ok(_) => Incoming::Line,
            Err(answer) => Incoming::Answer(answer),
        },
    })
}

/// What the writer task is told.
enum Outgoing {
    /// A line rmcp wrote.
    FromServer(Vec<u8>),
    /// An answer of the front's own.
    Answer(Value),
    /// A batch whose answers are to be joined.
    Batch(PendingBatch),
    /// rmcp closed its end: the session is over.
    ServerDone,
}

/// The stdio front: reads messages from `input`, answers the ones rmcp
/// would mishandle, forwards the rest to rmcp (`to_server`), and writes
/// rmcp's output and its own answers to `output`.
async fn stdio_front<I, O, R, W>(input: I, output: O, from_server: R, mut to_server: W)
where
    I: tokio::io::AsyncRead + Unpin + Send + 'static,
    O: tokio::io::AsyncWrite + Unpin,
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
    W: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, mut outgoing) = tokio::sync::mpsc::unbounded_channel::<Outgoing>();
    let server_lines = {
        let sender = sender.clone();
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(from_server);
            let mut line = Vec::new();
            while lines.read_until(b'\n', &mut line).await.is_ok_and(|n| n > 0) {
                if sender.send(Outgoing::FromServer(std::mem::take(&mut line))).is_err() {
                    break;
                }
            }
            let _ = sender.send(Outgoing::ServerDone);
        })
    };
    let reader = tokio::spawn(async move {
        let mut input = tokio::io::BufReader::new(input);
        let mut line = Vec::new();
        loop {
            let incoming = match read_line(&mut input, &mut line).await {
                Ok(None) | Err(_) => break,
                Ok(Some(Err(length))) => Some(Incoming::Answer(error_response(
                    Value::Null,
                    -32700,
                    format!(
                        "the message ({length} bytes) is larger than the limit of {MAX_LINE} bytes; it was not read"
                    ),
                ))),
                Ok(Some(Ok(()))) => classify(&line),
            };
            let messages = match incoming {
                None => continue,
                Some(Incoming::Line) => {
                    // As it came, without its line end (`\r\n` too).
                    let end = line.iter().rposition(|b| !b.is_ascii_whitespace()).map_or(0, |at| at + 1);
                    line.truncate(end);
                    line.push(b'\n');
                    if to_server.write_all(&line).await.is_err() || to_server.flush().await.is_err() {
                        return;
                    }
                    continue;
                }
                Some(Incoming::Answer(answer)) => {
                    let _ = sender.send(Outgoing::Answer(answer));
                    continue;
                }
                Some(Incoming::Forward(mut messages)) => {
                    if messages.first().is_some_and(|m| m.get("__batch_answers").is_some()) {
                        let answers = match messages.remove(0)["__batch_answers"].take() {
                            Value::Array(answers) => answers,
                            _ => Vec::new(),
                        };
                        let waiting = messages
                            .iter()
                            .filter(|m| m.get("method").is_some())
                            .filter_map(|m| m.get("id").cloned())
                            .collect();
                        // Registered before the requests go out, so no answer
                        // can overtake it.
                        let _ = sender.send(Outgoing::Batch(PendingBatch { waiting, answers }));
                    }
                    messages
                }
            };
            for message in messages {
                let mut bytes = message.to_string().into_bytes();
                bytes.push(b'\n');
                if to_server.write_all(&bytes).await.is_err() || to_server.flush().await.is_err() {
                    return;
                }
            }
        }
        // End of input: rmcp sees it too and ends the session.
        let _ = to_server.shutdown().await;
    });
    // Lines are gathered and written out together when no more are
    // waiting: one write for many answers under load, at once when idle.
    let mut output = tokio::io::BufWriter::with_capacity(64 << 10, output);
    let mut batches: Vec<PendingBatch> = Vec::new();
    while let Some(message) = outgoing.recv().await {
        let line = match message {
            Outgoing::ServerDone => break,
            Outgoing::Batch(batch) => {
                batches.push(batch);
                None
            }
            Outgoing::Answer(answer) => Some(answer.to_string().into_bytes()),
            Outgoing::FromServer(line) => {
                let answer_of = if batches.is_empty() {
                    None
                } else {
                    serde_json::from_slice::<Value>(&line).ok().filter(|m| m.get("method").is_none())
                };
                let batch = answer_of.as_ref().and_then(|answer| {
                    let id = answer.get("id")?;
                    batches.iter().position(|b| b.waiting.contains(id))
                });
                match (batch, answer_of) {
                    (Some(at), Some(answer)) => {
                        let batch = &mut batches[at];
                        batch.waiting.retain(|id| Some(id) != answer.get("id"));
                        batch.answers.push(answer);
                        None
                    }
                    _ => Some(line),
                }
            }
        };
        let mut lines: Vec<Vec<u8>> = line.into_iter().collect();
        // Batches that are complete go out as one array each.
        while let Some(at) = batches.iter().position(|b| b.waiting.is_empty()) {
            let batch = batches.remove(at);
            if !batch.answers.is_empty() {
                lines.push(Value::Array(batch.answers).to_string().into_bytes());
            }
        }
        let mut failed = false;
        for mut line in lines {
            if line.last() != Some(&b'\n') {
                line.push(b'\n');
            }
            failed |= output.write_all(&line).await.is_err();
        }
        if failed || (outgoing.is_empty() && output.flush().await.is_err()) {
            break;
        }
    }
    let _ = output.flush().await;
    reader.abort();
    server_lines.abort();
}
