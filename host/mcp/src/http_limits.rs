//! Bounds on what the clients of the HTTP front door may hold at once:
//! connections, sessions, and how long a request may take to arrive.

/// Bounds on what the clients of an [`HttpServer`](crate::HttpServer) may hold at once.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HttpLimits {
    /// Connections served at once; one past it is answered `503` with
    /// `Retry-After` at once and closed. Default 512.
    pub connections: usize,
    /// `tools/call` requests running at once, all sessions and clients
    /// together; one past it is refused at once (`503` with `Retry-After`
    /// over HTTP, JSON-RPC error `-32029` on any transport) rather than
    /// queued. Default 1024.
    pub calls: usize,
    /// Bytes of request bodies held at once, all requests together; a
    /// request whose body would pass it is refused at once with `503` and
    /// `Retry-After`. Default 256 MiB.
    pub body_bytes: usize,
    /// MCP sessions open at once (live or parked), all clients together;
    /// an `initialize` past it is refused with `503`. A session ends when
    /// its client deletes it or after 5 minutes without a request. Default
    /// 1024.
    pub sessions: usize,
    /// Sessions one authenticated client (a token's subject) may have open;
    /// an `initialize` past it is refused with `429`. Default 64.
    pub sessions_per_client: usize,
    /// How long a session may go without a request (none in flight, no
    /// stream open) before it is parked: what rmcp holds of it (about 73
    /// KiB) is let go, and its next request restores it. Default 30 s;
    /// between 1 s and 5 minutes (5 minutes: sessions are never parked,
    /// they end).
    pub session_park_after: std::time::Duration,
    /// How long a request's head may take to arrive (and a kept-alive
    /// connection may sit idle), and, once it has, its body. Default 30 s;
    /// between 100 ms and an hour.
    pub request_timeout: std::time::Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            connections: 512,
            calls: crate::jsonrpc::DEFAULT_MAX_CALLS,
            body_bytes: 256 << 20,
            sessions: 1024,
            sessions_per_client: 64,
            session_park_after: std::time::Duration::from_secs(30),
            request_timeout: std::time::Duration::from_secs(30),
        }
    }
}

impl HttpLimits {
    /// Serve at most `connections` connections at once.
    pub fn with_connections(mut self, connections: usize) -> Self {
        self.connections = connections;
        self
    }

    /// Run at most `calls` tool calls at once.
    pub fn with_calls(mut self, calls: usize) -> Self {
        self.calls = calls;
        self
    }

    /// Hold at most `bytes` of request bodies at once.
    pub fn with_body_bytes(mut self, bytes: usize) -> Self {
        self.body_bytes = bytes;
        self
    }

    /// Hold at most `sessions` sessions, and `per_client` of one client's.
    pub fn with_sessions(mut self, sessions: usize, per_client: usize) -> Self {
        self.sessions = sessions;
        self.sessions_per_client = per_client;
        self
    }

    /// Park a session after `after` without a request.
    pub fn with_session_park_after(mut self, after: std::time::Duration) -> Self {
        self.session_park_after = after;
        self
    }

    /// Give a request's head, and then its body, `timeout` each to arrive.
    pub fn with_request_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.request_timeout = timeout;
        self
    }
}
