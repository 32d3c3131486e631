//! Name resolution under the grants: ureq's resolver, keeping only the
//! addresses a connection may go to ([`crate::sandbox::address_allowed`]).
//!
//! A grant of a name reaches the public addresses the name resolves to, and
//! no other unless a grant names that address too. The check is made on
//! the addresses the client then connects to, so the name is resolved once
//! and a name that resolved to a public address when checked cannot turn
//! into another (DNS rebinding). Through a proxy (from the environment) the
//! proxy resolves the request's host, and only the grants of names apply.

use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::NextTimeout;

use crate::sandbox::AddressRefused;

/// Resolves as ureq does, then keeps the addresses `allowed` lets a
/// connection reach; an error ([`AddressRefused`]) if none is left.
#[derive(Debug)]
pub(crate) struct GrantedAddresses {
    allowed: Vec<String>,
}

impl GrantedAddresses {
    /// Under these grants (host patterns).
    pub(crate) fn new(allowed: Vec<String>) -> GrantedAddresses {
        GrantedAddresses { allowed }
    }
}

impl Resolver for GrantedAddresses {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        config: &ureq::config::Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let resolved = DefaultResolver::default().resolve(uri, config, timeout)?;
        let mut kept = self.empty();
        for address in &resolved {
            if crate::sandbox::address_allowed(&self.allowed, address.ip(), Some(address.port())) {
                kept.push(*address);
            }
        }
        if kept.is_empty() {
            return Err(ureq::Error::Other(Box::new(AddressRefused {
                host: uri.host().unwrap_or_default().to_owned(),
                addresses: resolved.iter().map(|a| a.ip()).collect(),
            })));
        }
        Ok(kept)
    }
}
