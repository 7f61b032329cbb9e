//! The listener's TLS, reloadable: the settings, the PEM loading and the rustls
//! configurations are `cachelab-net`'s (shared with the load generator), re-exported
//! here under the names the rest of the proxy uses.
//!
//! Files are read when a configuration is built: at start and on every reload
//! ([`ListenerTls::reload`], and a reload rebuilds every pool's server side), so a
//! rotated certificate is served to the connections that come after it.

use std::sync::{Arc, RwLock};

use rustls::ServerConfig;

pub use cachelab_net::tls::{
    server_config, ListenerTlsSpec, Protocols, ServerTls, ServerTlsSpec, TlsError,
};

/// A listener's TLS configuration, replaced whole by a reload: handshakes started after
/// it use the new certificate, connections already up keep theirs.
pub struct ListenerTls {
    spec: RwLock<ListenerTlsSpec>,
    config: RwLock<Arc<ServerConfig>>,
}

impl ListenerTls {
    pub fn new(spec: ListenerTlsSpec) -> Result<Self, TlsError> {
        let config = server_config(&spec)?;
        Ok(ListenerTls {
            spec: RwLock::new(spec),
            config: RwLock::new(config),
        })
    }

    pub fn current(&self) -> Arc<ServerConfig> {
        Arc::clone(&self.config.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// Rereads the files (of `spec` if given, a reloaded configuration's, else the
    /// current ones); on an error the old configuration stays.
    pub fn reload(&self, spec: Option<&ListenerTlsSpec>) -> Result<(), TlsError> {
        let spec = match spec {
            Some(spec) => spec.clone(),
            None => self.spec.read().unwrap_or_else(|p| p.into_inner()).clone(),
        };
        let config = server_config(&spec)?;
        *self.config.write().unwrap_or_else(|p| p.into_inner()) = config;
        *self.spec.write().unwrap_or_else(|p| p.into_inner()) = spec;
        Ok(())
    }
}
