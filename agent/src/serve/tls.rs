//! TLS on the agent's gRPC port, accepted by the agent itself (rustls, as
//! tonic would) so that a refused handshake is logged: which peer, and why
//! ("no client certificate", "not signed by --tls-client-ca"). tonic keeps
//! its handshake errors to a debug line without the peer, and a console
//! refused by mutual TLS then sees "transport error" while the agent is
//! silent.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject as _;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// TLS for the agent's listener: its certificate chain and key (PEM), and
/// for mutual TLS the CA that signs its consoles' certificates.
#[derive(Clone)]
pub struct TlsSettings {
    pub cert_pem: Vec<u8>,
    pub key_pem: Vec<u8>,
    pub client_ca_pem: Option<Vec<u8>>,
}

impl std::fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the key.
        f.debug_struct("TlsSettings")
            .field("mutual", &self.client_ca_pem.is_some())
            .finish_non_exhaustive()
    }
}

/// The server side of TLS, from the agent's PEM files (ALPN h2, for gRPC).
pub fn server_config(t: &TlsSettings) -> Result<Arc<rustls::ServerConfig>, String> {
    let certs = certificates(&t.cert_pem, "--tls-cert")?;
    let key = PrivateKeyDer::from_pem_slice(&t.key_pem)
        .map_err(|e| format!("--tls-key: no private key in it (PEM: PKCS#8, PKCS#1 or SEC1): {e}"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?;
    let builder = match &t.client_ca_pem {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in certificates(ca, "--tls-client-ca")? {
                roots
                    .add(c)
                    .map_err(|e| format!("--tls-client-ca: not a CA certificate: {e}"))?;
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| format!("--tls-client-ca: {e}"))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut cfg = builder
        .with_single_cert(certs, key)
        .map_err(|e| format!("--tls-cert and --tls-key: {e}"))?;
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(cfg))
}

/// The private key of `--tls-key`, read as a token file is: a regular file
/// (no FIFO, no device), within the bound, and refused where group or
/// others may read it (the mode of the file opened, not of the path).
pub fn read_private_key(path: &std::path::Path) -> Result<Vec<u8>, String> {
    use std::io::Read as _;
    use std::os::unix::fs::PermissionsExt as _;
    let file = fleetop_proto::input::open_regular(path).map_err(|e| e.to_string())?;
    let mode = file.metadata().map_err(|e| e.to_string())?.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(format!(
            "a private key readable by group or others (mode {mode:04o}): chmod 600 it, owned by the agent's user"
        ));
    }
    let max = fleetop_proto::input::MAX_FILE_BYTES;
    let mut buf = Vec::new();
    file.take(max + 1).read_to_end(&mut buf).map_err(|e| e.to_string())?;
    if buf.len() as u64 > max {
        return Err(format!("larger than {} MiB", max >> 20));
    }
    Ok(buf)
}

/// Every certificate in a PEM file; at least one.
fn certificates(pem: &[u8], flag: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{flag}: not PEM certificates: {e}"))?;
    if certs.is_empty() {
        return Err(format!("{flag}: no certificate in it (PEM expected)"));
    }
    Ok(certs)
}

/// Why a handshake failed, in the operator's words; and whether it is worth
/// a warning (a TLS-level refusal) or only a debug line (a peer that closed
/// or said nothing: port scanners, load-balancer health checks).
pub fn why_refused(e: &std::io::Error) -> (String, bool) {
    use rustls::{CertificateError, Error};
    let Some(tls) = e.get_ref().and_then(|i| i.downcast_ref::<Error>()) else {
        return (format!("connection ended during the TLS handshake: {e}"), false);
    };
    let why = match tls {
        Error::NoCertificatesPresented => {
            "no client certificate (this agent wants one signed by --tls-client-ca)".into()
        }
        Error::InvalidCertificate(c) => match c {
            CertificateError::UnknownIssuer => "client certificate not signed by --tls-client-ca".into(),
            CertificateError::BadSignature => {
                "client certificate with a bad signature (not signed by --tls-client-ca)".into()
            }
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => "client certificate expired".into(),
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                "client certificate not valid yet (is a clock wrong?)".into()
            }
            CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. } => {
                "client certificate not for client authentication (extended key usage)".into()
            }
            other => format!("client certificate refused: {other}"),
        },
        Error::AlertReceived(alert) => format!(
            "the console ended the handshake ({alert:?}): does it trust this agent's certificate (the CA it was given)?"
        ),
        Error::NoApplicationProtocol => "the console does not speak HTTP/2 (ALPN h2)".into(),
        Error::InvalidMessage(_) => "not a TLS handshake (a console without TLS?)".into(),
        Error::PeerIncompatible(p) => format!("no TLS version or cipher in common: {p:?}"),
        other => format!("TLS handshake failed: {other}"),
    };
    (why, true)
}

/// Logs refused handshakes at most once a minute per peer address and
/// reason, with the count of those not logged; the table is bounded.
#[derive(Default)]
pub struct Refusals {
    seen: Mutex<HashMap<(IpAddr, String), (Instant, u32)>>,
}

/// Each (address, reason) is logged at most this often.
const LOG_EVERY: Duration = Duration::from_secs(60);
/// (address, reason) pairs remembered at most.
const MAX_REMEMBERED: usize = 1024;

impl Refusals {
    pub fn refused(&self, peer: SocketAddr, e: &std::io::Error) {
        let (why, warn) = why_refused(e);
        if !warn {
            tracing::debug!("TLS handshake with {peer}: {why}");
            return;
        }
        let now = Instant::now();
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen.len() >= MAX_REMEMBERED {
            seen.retain(|_, (at, _)| now.duration_since(*at) < LOG_EVERY);
            if seen.len() >= MAX_REMEMBERED {
                seen.clear();
            }
        }
        let key = (peer.ip(), why);
        match seen.get_mut(&key) {
            Some((at, unlogged)) if now.duration_since(*at) < LOG_EVERY => *unlogged += 1,
            Some((at, unlogged)) => {
                let more = std::mem::take(unlogged);
                *at = now;
                tracing::warn!(
                    "refused a TLS connection from {peer}: {} ({more} more from {} since the last line)",
                    key.1,
                    peer.ip()
                );
            }
            None => {
                tracing::warn!("refused a TLS connection from {peer}: {}", key.1);
                seen.insert(key, (now, 0));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tls_error(e: rustls::Error) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::InvalidData, e)
    }

    #[test]
    fn refusals_say_why_in_the_operators_words() {
        let (why, warn) = why_refused(&tls_error(rustls::Error::NoCertificatesPresented));
        assert!(warn && why.starts_with("no client certificate"), "{why}");
        let e = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        let (why, _) = why_refused(&tls_error(e));
        assert!(why.contains("not signed by --tls-client-ca"), "{why}");
        // A peer that closed: not worth a warning.
        let (_, warn) = why_refused(&std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
        assert!(!warn);
    }

    #[test]
    fn a_refusal_is_logged_once_a_minute_per_peer_and_reason() {
        let r = Refusals::default();
        let peer: SocketAddr = "10.0.0.1:40000".parse().expect("addr");
        for port in 0..5u16 {
            let p = SocketAddr::new(peer.ip(), 40000 + port);
            r.refused(p, &tls_error(rustls::Error::NoCertificatesPresented));
        }
        let seen = r.seen.lock().expect("lock");
        assert_eq!(seen.len(), 1);
        assert_eq!(seen.values().next().map(|v| v.1), Some(4), "four not logged");
        drop(seen);
        for i in 0..(MAX_REMEMBERED as u32 + 10) {
            let p = SocketAddr::new(IpAddr::from(std::net::Ipv4Addr::from(0x0b00_0000 + i)), 1);
            r.refused(p, &tls_error(rustls::Error::NoCertificatesPresented));
        }
        assert!(r.seen.lock().expect("lock").len() <= MAX_REMEMBERED);
    }
}
