//! Connections to an agent: TCP, TLS over it where configured (`dial`,
//! for both kinds), and the HTTP/2 connection that tonic's client calls
//! for control (signal, bench) go through, with keepalive and nothing
//! else. The sample stream has its own, leaner kind (`stream_conn`).
//!
//! tonic's `Channel` puts a tower `Buffer` (a queue of 32 requests and a
//! task of its own to drain it) and reconnect and limit layers in front of
//! the same hyper connection: 9 KiB of heap a node for the queue alone
//! (heaptrack), which a console of 10,000 agents paid for nothing. A
//! session sends one call at a time and reconnects on its own terms
//! (`agent::run_node`'s backoff), so neither the queue nor the reconnect
//! was ever used.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use fleetop_proto::input::error_line;
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tonic::body::Body;
use tonic::codegen::{Service, http};

use crate::model::target::Target;

/// A silent peer is noticed within about 15 s.
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(5);

/// TLS to the agents: the CA the console trusts, the certificate it shows
/// for mutual TLS, and the name the agents' certificates carry where it is
/// not the host's.
#[derive(Clone)]
pub struct Tls {
    config: Arc<rustls::ClientConfig>,
    domain: Option<String>,
}

impl Tls {
    /// From PEM files (the CA; the console's certificate and key for
    /// mutual TLS), each error one line naming the file that is wrong.
    pub fn from_pem(ca: &Pem, identity: Option<(&Pem, &Pem)>, domain: Option<&str>) -> Result<Tls, String> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in certificates(ca)? {
            roots.add(cert).map_err(|e| format!("{}: {e}", ca.name))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?
            .with_root_certificates(roots);
        let mut config = match identity {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => {
                let chain = certificates(cert)?;
                let private = PrivateKeyDer::from_pem_slice(&key.bytes)
                    .map_err(|e| format!("{}: no private key in it ({e})", key.name))?;
                builder
                    .with_client_auth_cert(chain, private)
                    .map_err(|e| format!("{} and {}: {e}", cert.name, key.name))?
            }
        };
        config.alpn_protocols = vec![b"h2".to_vec()];
        if let Some(d) = domain {
            server_name(d).map_err(|e| format!("tls_domain: {e}"))?;
        }
        Ok(Tls {
            config: Arc::new(config),
            domain: domain.map(str::to_string),
        })
    }
}

/// A PEM file's contents and what to call it in an error
/// (`tls_ca /etc/fleetop/ca.pem`).
#[derive(Debug, Clone)]
pub struct Pem {
    pub name: String,
    pub bytes: Vec<u8>,
}

fn certificates(pem: &Pem) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(&pem.bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: {e}", pem.name))?;
    if certs.is_empty() {
        return Err(format!("{}: no PEM certificate in it", pem.name));
    }
    Ok(certs)
}

fn server_name(name: &str) -> Result<ServerName<'static>, String> {
    ServerName::try_from(name.to_string()).map_err(|_| format!("{name:?} is not a name a certificate can carry"))
}

/// A connection's requests, as tonic's client sends them.
#[derive(Clone)]
pub struct Conn(SendRequest<Body>);

impl Service<http::Request<Body>> for Conn {
    type Response = http::Response<hyper::body::Incoming>;
    type Error = hyper::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, hyper::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), hyper::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        Box::pin(self.0.send_request(req))
    }
}

/// The origin tonic puts on each request (HTTP/2 wants a scheme and an
/// authority on every one).
pub fn origin(target: &Target, tls: bool) -> Result<http::Uri, String> {
    let scheme = if tls { "https" } else { "http" };
    let uri = format!("{scheme}://{}", target.address());
    uri.parse().map_err(|e| format!("bad address {uri}: {e}"))
}

/// A byte stream to an agent: TCP, or TLS over it.
pub trait Io: AsyncRead + AsyncWrite + Send + Unpin + 'static {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Io for T {}

/// Connects to `target`, TLS where `tls` says. Unbounded in time: the
/// caller bounds it.
pub async fn dial(target: &Target, tls: Option<&Tls>) -> Result<Box<dyn Io>, String> {
    let tcp = tokio::net::TcpStream::connect((target.host.as_str(), target.port))
        .await
        .map_err(|e| format!("tcp connect error: {}", error_line(&e)))?;
    // Samples are small and go out as they are taken.
    tcp.set_nodelay(true)
        .map_err(|e| format!("tcp connect error: {}", error_line(&e)))?;
    let Some(tls) = tls else {
        return Ok(Box::new(tcp));
    };
    let name = server_name(tls.domain.as_deref().unwrap_or(&target.host)).map_err(|e| format!("TLS: {e}"))?;
    let stream = tokio_rustls::TlsConnector::from(tls.config.clone())
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS: {}", error_line(&e)))?;
    Ok(Box::new(stream))
}

/// Connects to `target` (TLS where `tls` says) and starts the connection's
/// task, which ends when the last `Conn` and stream of it are dropped.
/// Unbounded in time: the caller bounds it.
pub async fn open(target: &Target, tls: Option<&Tls>) -> Result<Conn, String> {
    let io = dial(target, tls).await?;
    let (send, connection) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .timer(TokioTimer::new())
        .keep_alive_interval(KEEPALIVE_INTERVAL)
        .keep_alive_timeout(KEEPALIVE_TIMEOUT)
        .handshake(TokioIo::new(io))
        .await
        .map_err(|e| format!("HTTP/2: {}", error_line(&e)))?;
    tokio::spawn(async move {
        // The session sees the same end as a broken stream, and says so.
        if let Err(e) = connection.await {
            tracing::debug!("agent connection ended: {}", error_line(&e));
        }
    });
    Ok(Conn(send))
}
