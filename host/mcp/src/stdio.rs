//! MCP over a process's stdin and stdout (feature `stdio`).
//!
//! rmcp does the protocol; [`StdioFront`] is the transport it is given, and
//! reads the lines itself: an unparsable line is answered with `-32700` (id
//! null), a line over [`MAX_LINE`] with `-32700` too instead of being
//! dropped, a JSON-RPC batch (in a session of 2025-03-26 or before: later
//! versions removed them, and get `-32600`) is split and its answers
//! joined again (a request of it the client cancels is not waited for),
//! and a `tools/call` with malformed params gets `-32602` (see DESIGN.md,
//! `serve`). Once the session's handshake is over, a `tools/call` runs on
//! a task the front spawns, beside rmcp's serve loop ([`StdioCalls`]),
//! its answer given to the writer directly.

use std::collections::VecDeque;
use std::sync::Arc;

use rmcp::model::{ClientJsonRpcMessage, RequestId, ServerJsonRpcMessage};
use serde::Deserialize as _;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

use crate::jsonrpc::{MAX_LINE, SHUTDOWN_GRACE, check_message, error_response, tool_call};
use crate::stdio_call::StdioCalls;
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
    let (sender, outgoing) = tokio::sync::mpsc::unbounded_channel::<Outgoing>();
    let pending = Arc::new(Pending::default());
    let writer = tokio::spawn(write_out(output, outgoing, Arc::clone(&pending)));
    let calls = Arc::new(StdioCalls::default());
    let session_server = server.state_copy();
    let front = StdioFront {
        input: tokio::io::BufReader::with_capacity(64 << 10, input),
        line: Vec::new(),
        skipped: 0,
        queued: VecDeque::new(),
        out: sender,
        pending,
        version: None,
        calls: Arc::clone(&calls),
        ended: false,
        handshake: false,
    };
    let running = server.serve(front).await.map_err(|e| ServeError::Start(e.to_string()))?;
    // The handshake is over: the session's calls are answered beside
    // rmcp's serve loop from now on.
    calls.open(session_server, running.peer().clone());
    let cancel = running.cancellation_token();
    tokio::select! {
        outcome = running.waiting() => { outcome.map_err(|e| ServeError::Failed(e.to_string()))?; }
        () = shutdown => {
            tracing::info!("shutting down");
            cancel.cancel();
        }
    }
    // The session is over: the writer writes out what the server sent and
    // ends (nothing more is read).
    if tokio::time::timeout(SHUTDOWN_GRACE, writer).await.is_err() {
        tracing::warn!("the output did not drain within {SHUTDOWN_GRACE:?}");
    }
    Ok(())
}

/// The transport rmcp serves on: it reads and checks the input itself
/// (answering what rmcp would mishandle), hands rmcp typed messages, and
/// passes rmcp's messages, serialised, to the writer task.
///
/// `receive` is polled inside rmcp's `select!` and may be dropped at any
/// await: the line being read lives in the struct, and a line is handled
/// without awaiting, so nothing read is lost.
struct StdioFront<I> {
    input: tokio::io::BufReader<I>,
    /// The line being read (without its newline).
    line: Vec<u8>,
    /// Bytes of an over-long line skipped so far (0: none).
    skipped: usize,
    /// Messages read (of a batch) that rmcp has not taken yet.
    queued: VecDeque<ClientJsonRpcMessage>,
    out: UnboundedSender<Outgoing>,
    /// What is read and not yet answered, or answered and not yet written.
    pending: Arc<Pending>,
    /// The protocol version the client's `initialize` asked for (`None`
    /// until one came): whether it may send batches.
    version: Option<String>,
    /// The calls answered beside rmcp's serve loop.
    calls: Arc<StdioCalls>,
    /// Whether the input has ended.
    ended: bool,
    /// Whether the answer to `initialize` has gone out, and the calls
    /// beside rmcp may not have been opened yet.
    handshake: bool,
}

/// Requests and lines the client has not had back yet. Past
/// [`MAX_PENDING`] of them, no more input is read until some go out: a
/// client that sends and never reads its answers fills its own pipe, not
/// this process's memory (rmcp runs a task for every request it is given,
/// and the answers waited in memory for the output).
///
/// The lines' bytes are bounded too ([`MAX_QUEUED_BYTES`]): past them, no
/// input is read, and whoever sent a line waits for the writer before it
/// is told the line went (rmcp tells a notification's sender so: a
/// plugin's notices then wait, within its call's deadline, for a client
/// that reads). The count alone let a client that stopped reading have
/// 1024 calls' notices, a MiB each, queue in memory.
#[derive(Default)]
struct Pending {
    /// Requests given to rmcp and not answered (nor cancelled) yet.
    requests: std::sync::Mutex<std::collections::HashSet<RequestId, foldhash::fast::RandomState>>,
    /// Lines sent to the writer that it has not taken yet.
    lines: std::sync::atomic::AtomicUsize,
    /// Their bytes.
    bytes: std::sync::atomic::AtomicUsize,
    /// Told whenever any of them goes down.
    less: tokio::sync::Notify,
}

/// The most requests and lines a client may have pending (see [`Pending`]).
const MAX_PENDING: usize = 1024;

/// The most bytes of lines the writer may have waiting (see [`Pending`]).
const MAX_QUEUED_BYTES: usize = 64 << 20;

/// How long the calls still running when the input ends are waited for
/// (as rmcp waits for its handlers then).
const DRAIN_AFTER_INPUT: std::time::Duration = std::time::Duration::from_secs(5);

/// How long the calls still running at a shutdown are waited for (as rmcp
/// waits for its handlers then).
const DRAIN_AT_SHUTDOWN: std::time::Duration = std::time::Duration::from_secs(2);

impl Pending {
    fn count(&self) -> usize {
        let requests = self.requests.lock().unwrap_or_else(|e| e.into_inner()).len();
        requests + self.lines.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn queued_bytes(&self) -> usize {
        self.bytes.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Wait until fewer than [`MAX_PENDING`] are pending, and the lines
    /// waiting for the writer hold less than [`MAX_QUEUED_BYTES`].
    async fn room(&self) {
        self.until(|pending| pending.count() < MAX_PENDING && pending.queued_bytes() < MAX_QUEUED_BYTES).await;
    }

    /// Wait until the lines waiting for the writer hold less than
    /// [`MAX_QUEUED_BYTES`].
    async fn output_room(&self) {
        self.until(|pending| pending.queued_bytes() < MAX_QUEUED_BYTES).await;
    }

    async fn until(&self, ready: impl Fn(&Pending) -> bool) {
        // Most of the time there is room: no waiter is registered.
        if ready(self) {
            return;
        }
        loop {
            let less = self.less.notified();
            tokio::pin!(less);
            less.as_mut().enable();
            if ready(self) {
                return;
            }
            less.await;
        }
    }

    fn line_sent(&self, bytes: usize) {
        self.lines.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.bytes.fetch_add(bytes, std::sync::atomic::Ordering::SeqCst);
    }

    fn line_taken(&self, bytes: usize) {
        self.lines.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        self.bytes.fetch_sub(bytes, std::sync::atomic::Ordering::SeqCst);
        self.less.notify_waiters();
    }

    /// `message` goes to rmcp: a request is pending until answered, and a
    /// cancelled one no longer (it may never be answered): its id, then.
    fn given(&self, message: &ClientJsonRpcMessage) -> Option<RequestId> {
        match message {
            ClientJsonRpcMessage::Request(request) => {
                self.requests.lock().unwrap_or_else(|e| e.into_inner()).insert(request.id.clone());
                None
            }
            ClientJsonRpcMessage::Notification(notification) => {
                let rmcp::model::ClientNotification::CancelledNotification(cancelled) = &notification.notification
                else {
                    return None;
                };
                let id = cancelled.params.request_id.clone()?;
                self.request_done(&id);
                Some(id)
            }
            _ => None,
        }
    }

    /// A request answered beside rmcp is pending until answered.
    fn requested(&self, id: &RequestId) {
        self.requests.lock().unwrap_or_else(|e| e.into_inner()).insert(id.clone());
    }

    fn request_done(&self, id: &RequestId) {
        if self.requests.lock().unwrap_or_else(|e| e.into_inner()).remove(id) {
            self.less.notify_waiters();
        }
    }
}

/// What the writer task is told.
enum Outgoing {
    /// A line to write (without its newline); `answers` the request it
    /// answers, if it is a response.
    Line { line: Vec<u8>, answers: Option<RequestId> },
    /// A batch whose answers are to be joined.
    Batch(PendingBatch),
    /// The client cancelled this request: a batch waiting for its answer
    /// waits no more (a cancelled request may never be answered).
    Cancelled(RequestId),
    /// rmcp closed the transport: the session is over.
    ServerDone,
}

/// A batch waits for the answers to these request ids.
struct PendingBatch {
    waiting: Vec<RequestId>,
    /// Answers so far, each a serialised message.
    answers: Vec<Vec<u8>>,
}

/// What one line of input comes to.
enum Read {
    /// A complete line is in `line`.
    Line,
    /// A line longer than [`MAX_LINE`] (this many bytes) was skipped.
    TooLong(usize),
    /// The input ended (or failed).
    End,
}

impl<I: tokio::io::AsyncRead + Unpin + Send> StdioFront<I> {
    /// Read up to the end of the next line into `self.line`, skipping (not
    /// keeping) a line longer than [`MAX_LINE`].
    async fn read_line(&mut self) -> Read {
        loop {
            let buffer = match self.input.fill_buf().await {
                Ok(buffer) => buffer,
                Err(e) => {
                    tracing::error!("reading the input failed: {e}");
                    return Read::End;
                }
            };
            if buffer.is_empty() {
                // A last line without its newline still counts.
                return if self.skipped > 0 {
                    Read::TooLong(std::mem::take(&mut self.skipped))
                } else if self.line.is_empty() {
                    Read::End
                } else {
                    Read::Line
                };
            }
            let (chunk, done) = match memchr::memchr(b'\n', buffer) {
                Some(at) => (&buffer[..at], Some(at + 1)),
                None => (buffer, None),
            };
            if self.skipped > 0 || self.line.len() + chunk.len() > MAX_LINE {
                self.skipped += self.line.len() + chunk.len();
                self.line.clear();
            } else {
                self.line.extend_from_slice(chunk);
            }
            let used = done.unwrap_or(buffer.len());
            self.input.consume(used);
            if done.is_some() {
                return match std::mem::take(&mut self.skipped) {
                    0 => Read::Line,
                    skipped => Read::TooLong(skipped),
                };
            }
        }
    }

    /// Answer a message here, without rmcp.
    fn answer(&self, answer: Value) {
        let line = answer.to_string().into_bytes();
        self.pending.line_sent(line.len());
        let _ = self.out.send(Outgoing::Line { line, answers: None });
    }

    /// Handle the line in `self.line`: queue what goes to rmcp, answer the
    /// rest.
    fn take_line(&mut self) {
        let line = std::mem::take(&mut self.line);
        let text = std::str::from_utf8(&line).map(|t| t.trim().trim_start_matches('\u{feff}'));
        match text {
            Ok("") => {}
            Err(_) => self.answer(error_response(Value::Null, -32700, "Parse error: the line is not UTF-8")),
            // The common message, a well-formed tools/call, straight from
            // its bytes: run beside rmcp once the session is initialized,
            // else as rmcp's type; anything else the general way.
            Ok(text) => match self.calls.admit(text) {
                Some(call) => self.start(call),
                None => match crate::jsonrpc::tool_call_message(text) {
                    Some(call) => self.queued.push_back(call),
                    None => self.take_message(text),
                },
            },
        }
        // The buffer is kept for the next line.
        self.line = line;
        self.line.clear();
    }

    /// Run a call beside rmcp's serve loop, on a task of its own (as rmcp
    /// runs each request's handler); its answer goes to the writer.
    fn start(&self, call: crate::stdio_call::Admitted) {
        let id = call.0.clone();
        self.pending.requested(&id);
        let answer = self.calls.answer(call);
        let (out, pending) = (self.out.clone(), Arc::clone(&self.pending));
        // Boxed: tokio's task then holds a pointer, not the call's state,
        // which it would copy as the task is made and again as its output
        // replaces it. Its type erased: nested through the guest's, the
        // future is too deep for the compiler to prove `Send` again here.
        let task: std::pin::Pin<Box<dyn Future<Output = ()> + Send>> = Box::pin(async move {
            let answer = answer.await;
            pending.request_done(&id);
            // (Cancelled by the client: nothing is sent.)
            if let Some(answer) = answer {
                let _ = queue(&out, &pending, &answer);
            }
        });
        tokio::spawn(task);
    }

    /// Handle one line's text, parsed as JSON: queue what goes to rmcp,
    /// answer the rest.
    fn take_message(&mut self, text: &str) {
        match serde_json::from_str::<Value>(text) {
            Err(e) => self.answer(error_response(Value::Null, -32700, format!("Parse error: {e}"))),
            Ok(Value::Array(batch)) if batch.is_empty() => {
                self.answer(error_response(Value::Null, -32600, "an empty batch is not a request"))
            }
            Ok(Value::Array(batch)) if batch.len() > crate::jsonrpc::MAX_BATCH => {
                self.answer(crate::jsonrpc::batch_too_long(batch.len()))
            }
            Ok(Value::Array(batch)) => match self.version.as_deref() {
                Some(version) if crate::jsonrpc::batches_allowed(version) => self.take_batch(batch),
                Some(version) => self.answer(crate::jsonrpc::batch_not_in_version(version)),
                None => self.answer(error_response(
                    Value::Null,
                    -32600,
                    "a JSON-RPC batch before initialize: send initialize on its own (batches are part of a \
                     session of protocol version 2025-03-26 or before)",
                )),
            },
            Ok(message) => match check_message(message) {
                Err(answer) => self.answer(answer),
                Ok(message) => {
                    if message.get("method").and_then(Value::as_str) == Some("initialize") {
                        let asked = message.pointer("/params/protocolVersion").and_then(Value::as_str);
                        self.version = asked.map(str::to_owned);
                    }
                    if let Some(message) = self.typed(message) {
                        self.queued.push_back(message);
                    }
                }
            },
        }
    }

    /// Split a batch into its messages; its answers are joined into one
    /// array once every request in it is answered.
    fn take_batch(&mut self, batch: Vec<Value>) {
        let mut pending = PendingBatch { waiting: Vec::new(), answers: Vec::new() };
        let mut forward = Vec::new();
        for message in batch {
            match check_message(message).map(|message| self.typed_or_answer(message)) {
                Err(answer) => pending.answers.push(answer.to_string().into_bytes()),
                Ok(Err(answer)) => pending.answers.extend(answer.map(|a| a.to_string().into_bytes())),
                Ok(Ok(message)) => {
                    // A request's answer joins the batch's.
                    if let ClientJsonRpcMessage::Request(request) = &message {
                        pending.waiting.push(request.id.clone());
                    }
                    forward.push(message);
                }
            }
        }
        // Registered before rmcp sees the requests, so no answer can
        // overtake it.
        let _ = self.out.send(Outgoing::Batch(pending));
        self.queued.extend(forward);
    }

    /// A checked message as rmcp's type; a message that does not fit is
    /// answered here (or ignored, as rmcp ignores it).
    fn typed(&self, message: Value) -> Option<ClientJsonRpcMessage> {
        match self.typed_or_answer(message) {
            Ok(message) => Some(message),
            Err(answer) => {
                if let Some(answer) = answer {
                    self.answer(answer);
                }
                None
            }
        }
    }

    /// A checked message as rmcp's type, or the answer to give instead
    /// (`None`: none, a notification rmcp ignores).
    fn typed_or_answer(&self, message: Value) -> Result<ClientJsonRpcMessage, Option<Value>> {
        if let Some(call) = tool_call(&message) {
            return Ok(call);
        }
        ClientJsonRpcMessage::deserialize(&message).map_err(|e| {
            let method = message.get("method").and_then(Value::as_str);
            let id = message.get("id");
            match (id, method) {
                // A notification is never answered: one rmcp does not take
                // (another protocol's on the same pipe, or malformed) is
                // ignored, as rmcp ignores it.
                (None, Some(_)) => {
                    tracing::debug!("ignoring a notification: {e}");
                    None
                }
                // Its id, if it has one a client could match (else null).
                (id, _) => {
                    let id = id.filter(|id| id.is_string() || id.is_number()).cloned().unwrap_or(Value::Null);
                    Some(error_response(id, -32600, format!("Invalid request: {e}")))
                }
            }
        })
    }
}

/// Give `item` to the writer, serialised: an answer's request is no
/// longer pending, its line is until the writer takes it.
fn queue(out: &UnboundedSender<Outgoing>, pending: &Pending, item: &ServerJsonRpcMessage) -> Result<(), OutputClosed> {
    let answers = match item {
        ServerJsonRpcMessage::Response(response) => Some(response.id.clone()),
        ServerJsonRpcMessage::Error(error) => error.id.clone(),
        _ => None,
    };
    // (Room for a small answer and the writer's newline at once.)
    let mut line = Vec::with_capacity(256);
    match serde_json::to_writer(&mut line, item) {
        Ok(()) => {
            if let Some(id) = &answers {
                pending.request_done(id);
            }
            pending.line_sent(line.len());
            out.send(Outgoing::Line { line, answers }).map_err(|_| OutputClosed)
        }
        Err(e) => {
            tracing::error!("a message could not be serialised: {e}");
            Ok(())
        }
    }
}

/// Why the front can no longer send: the writer is gone.
#[derive(Debug, thiserror::Error)]
#[error("the output is closed")]
struct OutputClosed;

impl<I: tokio::io::AsyncRead + Unpin + Send> rmcp::transport::Transport<rmcp::RoleServer> for StdioFront<I> {
    type Error = OutputClosed;

    fn send(&mut self, item: ServerJsonRpcMessage) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        // Queued here, in the order rmcp sends (it runs the futures
        // returned as tasks of their own, in any order); the future then
        // waits while the writer has too much waiting (see `Pending`).
        if let ServerJsonRpcMessage::Response(response) = &item
            && matches!(response.result, rmcp::model::ServerResult::InitializeResult(_))
        {
            self.handshake = true;
        }
        let sent = queue(&self.out, &self.pending, &item);
        let pending = Arc::clone(&self.pending);
        let out = self.out.clone();
        async move {
            sent?;
            if pending.queued_bytes() < MAX_QUEUED_BYTES {
                return Ok(());
            }
            tokio::select! {
                () = pending.output_room() => Ok(()),
                // The writer is gone: nothing will make room.
                () = out.closed() => Err(OutputClosed),
            }
        }
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            if let Some(message) = self.queued.pop_front() {
                if let Some(cancelled) = self.pending.given(&message) {
                    self.calls.cancel(&cancelled);
                    let _ = self.out.send(Outgoing::Cancelled(cancelled));
                }
                return Some(message);
            }
            // Nothing more is read while the client has too much pending
            // (dropped here, as rmcp may drop it, nothing is lost).
            self.pending.room().await;
            // rmcp's handshake is over once `initialize` is answered:
            // `serve_stdio_on` then opens the calls beside rmcp, at once.
            // (Bounded, should rmcp ever read again before its `serve`
            // returns: the calls then go to rmcp until opened.)
            if self.handshake {
                let _ = tokio::time::timeout(std::time::Duration::from_secs(1), self.calls.until_open()).await;
                self.handshake = false;
            }
            match self.read_line().await {
                Read::End => {
                    self.ended = true;
                    return None;
                }
                Read::TooLong(length) => self.answer(error_response(
                    Value::Null,
                    -32700,
                    format!(
                        "the message ({length} bytes) is larger than the limit of {MAX_LINE} bytes; it was not read"
                    ),
                )),
                Read::Line => self.take_line(),
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        // The calls running beside rmcp are waited for as rmcp waits for
        // its own (longer when the input ended than on a shutdown), their
        // answers written before the session's end.
        let within = if self.ended { DRAIN_AFTER_INPUT } else { DRAIN_AT_SHUTDOWN };
        self.calls.drain(within).await;
        let _ = self.out.send(Outgoing::ServerDone);
        Ok(())
    }
}

/// The writer task: writes lines to `output`, gathered and flushed when no
/// more are waiting (one write for many answers under load, at once when
/// idle), and joins the answers of batches.
async fn write_out<O: tokio::io::AsyncWrite + Unpin>(
    output: O,
    mut outgoing: UnboundedReceiver<Outgoing>,
    pending: Arc<Pending>,
) {
    let mut output = tokio::io::BufWriter::with_capacity(64 << 10, output);
    let mut batches: Vec<PendingBatch> = Vec::new();
    while let Some(message) = outgoing.recv().await {
        let mut line = match message {
            Outgoing::ServerDone => break,
            Outgoing::Batch(batch) => {
                batches.push(batch);
                None
            }
            Outgoing::Cancelled(id) => {
                for batch in &mut batches {
                    batch.waiting.retain(|waiting| *waiting != id);
                }
                None
            }
            Outgoing::Line { line, answers } => {
                pending.line_taken(line.len());
                let batch = answers.as_ref().and_then(|id| batches.iter().position(|b| b.waiting.contains(id)));
                match (batch, answers) {
                    (Some(at), Some(id)) => {
                        let batch = &mut batches[at];
                        batch.waiting.retain(|waiting| *waiting != id);
                        batch.answers.push(line);
                        None
                    }
                    _ => Some(line),
                }
            }
        };
        let mut failed = false;
        if let Some(line) = line.as_mut() {
            line.push(b'\n');
            failed |= output.write_all(line).await.is_err();
        }
        // Batches that are complete go out as one array each.
        while let Some(at) = batches.iter().position(|b| b.waiting.is_empty()) {
            let batch = batches.remove(at);
            if batch.answers.is_empty() {
                continue;
            }
            let mut joined = vec![b'['];
            for (n, answer) in batch.answers.iter().enumerate() {
                if n > 0 {
                    joined.push(b',');
                }
                joined.extend_from_slice(answer);
            }
            joined.extend_from_slice(b"]\n");
            failed |= output.write_all(&joined).await.is_err();
        }
        if failed || (outgoing.is_empty() && output.flush().await.is_err()) {
            break;
        }
    }
    let _ = output.flush().await;
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;
    use std::task::{Context, Poll, Waker};

    use super::*;

    fn notification(bytes: usize) -> ServerJsonRpcMessage {
        serde_json::from_value(serde_json::json!({"jsonrpc": "2.0", "method": "notifications/message",
            "params": {"level": "info", "data": "x".repeat(bytes)}}))
        .expect("a notification")
    }

    fn poll<F: Future>(future: Pin<&mut F>) -> Poll<F::Output> {
        future.poll(&mut Context::from_waker(Waker::noop()))
    }

    /// A line sent is queued for the writer at once, in order; the sender
    /// is told it went only while the writer's queue is under its bytes,
    /// and no input is read past them.
    #[tokio::test]
    async fn a_sender_waits_while_the_writer_has_too_much_waiting() {
        use rmcp::transport::Transport as _;
        let (out, mut outgoing) = tokio::sync::mpsc::unbounded_channel();
        let pending = Arc::new(Pending::default());
        let mut front = StdioFront {
            input: tokio::io::BufReader::new(tokio::io::empty()),
            line: Vec::new(),
            skipped: 0,
            queued: VecDeque::new(),
            out,
            pending: Arc::clone(&pending),
            version: None,
            calls: Default::default(),
            ended: false,
            handshake: false,
        };
        let small = front.send(notification(10));
        tokio::pin!(small);
        assert!(matches!(poll(small), Poll::Ready(Ok(()))), "room for a small line");
        let big = front.send(notification(MAX_QUEUED_BYTES));
        tokio::pin!(big);
        assert!(poll(big.as_mut()).is_pending(), "a sender waits while the queue is over its bytes");
        let after = front.send(notification(10));
        tokio::pin!(after);
        assert!(poll(after.as_mut()).is_pending());
        let room = pending.room();
        tokio::pin!(room);
        assert!(poll(room.as_mut()).is_pending(), "no input is read meanwhile");
        // The writer takes the lines, in the order they were sent.
        let mut sizes = Vec::new();
        while let Ok(Outgoing::Line { line, .. }) = outgoing.try_recv() {
            pending.line_taken(line.len());
            sizes.push(line.len());
        }
        assert!(sizes.len() == 3 && sizes[1] > MAX_QUEUED_BYTES && sizes[0] == sizes[2], "{sizes:?}");
        assert!(matches!(poll(big), Poll::Ready(Ok(()))));
        assert!(matches!(poll(after), Poll::Ready(Ok(()))));
        assert!(poll(room).is_ready());
        // With the writer gone, a waiting sender is told so.
        let stuck = front.send(notification(MAX_QUEUED_BYTES));
        tokio::pin!(stuck);
        assert!(poll(stuck.as_mut()).is_pending());
        drop(outgoing);
        assert!(matches!(poll(stuck), Poll::Ready(Err(OutputClosed))));
    }
}
