//! Bounds on what the clients of the HTTP front door may hold at once:
//! connections, sessions, and how long a request may take to arrive.

/// Bounds on what the clients of an [`HttpServer`](crate::HttpServer) may hold at once.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HttpLimits {
    /// Connections served at once; further ones wait in the listen backlog
    /// until one closes. Default 512.
    pub connections: usize,
    /// MCP sessions open at once, all clients together; an `initialize`
    /// past it is refused with `503`. A session ends when its client
    /// deletes it or after 5 minutes without a request. Default 1024.
    pub sessions: usize,
    /// Sessions one authenticated client (a token's subject) may have open;
    /// an `initialize` past it is refused with `429`. Default 64.
    pub sessions_per_client: usize,
    /// How long a request's head may take to arrive (and a kept-alive
    /// connection may sit idle), and, once it has, its body. Default 30 s;
    /// between 100 ms and an hour.
    pub request_timeout: std::time::Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            connections: 512,
            sessions: 1024,
            sessions_per_client: 64,
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

    /// Hold at most `sessions` sessions, and `per_client` of one client's.
    pub fn with_sessions(mut self, sessions: usize, per_client: usize) -> Self {
        self.sessions = sessions;
        self.sessions_per_client = per_client;
        self
    }

    /// Give a request's head, and then its body, `timeout` each to arrive.
    pub fn with_request_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.request_timeout = timeout;
        self
    }
}
