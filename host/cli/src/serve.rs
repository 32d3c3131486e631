//! `toolhost serve`: the MCP server of `toolhost-mcp` on stdio or streamable
//! HTTP, until the client leaves or the process is told to stop.

use toolhost_mcp::{HttpOptions, HttpServer, McpServer};

/// Run the MCP server until the client disconnects (stdio) or the process
/// gets SIGINT or SIGTERM (either transport).
pub(crate) async fn serve(server: McpServer, http: Option<HttpOptions>) -> anyhow::Result<()> {
    match http {
        None => toolhost_mcp::serve_stdio(server, shutdown_signal()).await?,
        Some(options) => {
            let http = HttpServer::bind(server, options).await?;
            eprintln!("toolhost: serving MCP over streamable HTTP at {}", http.url());
            http.serve(async {
                shutdown_signal().await;
                eprintln!("toolhost: shutting down: ending sessions and streams, cancelling calls in flight");
            })
            .await?;
        }
    }
    Ok(())
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM.
async fn shutdown_signal() {
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
}
