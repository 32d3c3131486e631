//! Name resolution for HTTP clients limited to some hosts: only the
//! addresses the host patterns let a connection reach
//! ([`toolhost::address_allowed`]).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

/// A reqwest resolver that keeps, of what a name resolves to, the
/// addresses its host patterns let a connection reach: public ones, and
/// others only where a pattern names the address too (`127.0.0.1`,
/// `10.0.*`, `localhost` for loopback). The client connects to what this
/// returns, so a name that is allowed but points at an internal address
/// (or is pointed there later: DNS rebinding) does not reach it; a name
/// that resolves to nothing allowed fails with [`toolhost::AddressRefused`].
///
/// reqwest does not tell a resolver the port, so a pattern's port is not
/// compared here; the client's caller checks the URL's host and port
/// against the same patterns first. A host written as an address is not
/// resolved at all (that check is the whole of it), and through a proxy
/// the proxy's name is the one resolved.
#[derive(Debug, Clone)]
pub struct GrantedAddresses {
    allowed: Arc<[String]>,
    /// The last refusal, shared by clones: a client whose errors do not
    /// carry their causes (rmcp's) can still say why it failed.
    refused: Arc<Mutex<Option<String>>>,
}

impl GrantedAddresses {
    /// Under these host patterns ([`toolhost::check_host_pattern`]).
    pub fn new(allowed: impl Into<Arc<[String]>>) -> GrantedAddresses {
        GrantedAddresses { allowed: allowed.into(), refused: Arc::default() }
    }

    /// The same patterns, with a refusal of its own to report.
    pub(crate) fn fresh(&self) -> GrantedAddresses {
        GrantedAddresses::new(Arc::clone(&self.allowed))
    }

    /// Why the last name was refused, if one was.
    pub(crate) fn refused(&self) -> Option<String> {
        self.refused.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl reqwest::dns::Resolve for GrantedAddresses {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let (allowed, refused) = (Arc::clone(&self.allowed), Arc::clone(&self.refused));
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let resolved: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if resolved.is_empty() {
                return Err(format!("`{host}` has no address").into());
            }
            let kept: Vec<SocketAddr> =
                resolved.iter().copied().filter(|a| toolhost::address_allowed(&allowed, a.ip(), None)).collect();
            if kept.is_empty() {
                let addresses = resolved.iter().map(SocketAddr::ip).collect();
                let refusal = toolhost::AddressRefused { host, addresses };
                *refused.lock().unwrap_or_else(|e| e.into_inner()) = Some(refusal.to_string());
                return Err(Box::new(refusal) as _);
            }
            Ok(Box::new(kept.into_iter()) as reqwest::dns::Addrs)
        })
    }
}
