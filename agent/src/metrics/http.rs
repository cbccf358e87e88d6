//! `GET /metrics` over HTTP/1.1 (axum), with the agent's telemetry token
//! where it has one, gzip where the scraper asks, and bounded connections.

use std::io::{self, Write as _};
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinHandle;

use super::Publisher;
use crate::net::{FailedTokens, same_token};
use crate::proto::NodeInfo;

/// What the endpoint serves and whom to.
pub struct Source {
    /// The node description, with the agent's sampling interval.
    pub info: Arc<NodeInfo>,
    pub publisher: Arc<Publisher>,
    /// Scrapers must send `Authorization: Bearer <token>` when set.
    pub token: Option<String>,
    /// Shared with the gRPC port: a peer guessing tokens is slowed on both.
    pub failed: Arc<FailedTokens>,
    /// The agent's clock is this machine's plus this (simulation only).
    pub clock_offset_ms: i64,
}

/// Bounds on what scrapers may hold.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Open connections; past it new ones are closed at once.
    pub max_connections: usize,
    /// A connection from which nothing arrives for this long is closed.
    pub idle_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 16,
            idle_timeout: Duration::from_secs(60),
        }
    }
}

/// Serves `/metrics` on `listener` until `stop` turns true.
pub fn serve(
    listener: TcpListener,
    src: Source,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
) -> io::Result<(SocketAddr, JoinHandle<()>)> {
    let addr = listener.local_addr()?;
    let app = axum::Router::new()
        .route("/metrics", axum::routing::get(metrics))
        .fallback(|| async { (StatusCode::NOT_FOUND, "not found: the agent serves /metrics\n") })
        .with_state(Arc::new(src));
    let listener = Bounded {
        inner: listener,
        slots: Arc::new(Semaphore::new(limits.max_connections.max(1))),
        idle: limits.idle_timeout,
    };
    let task = tokio::spawn(async move {
        let served = axum::serve(listener, app.into_make_service_with_connect_info::<Peer>())
            .with_graceful_shutdown(async move {
                let _ = stop.wait_for(|s| *s).await;
            })
            .await;
        if let Err(e) = served {
            tracing::error!("metrics endpoint stopped: {e}");
        }
    });
    Ok((addr, task))
}

async fn metrics(
    State(src): State<Arc<Source>>,
    ConnectInfo(Peer(peer)): ConnectInfo<Peer>,
    headers: HeaderMap,
) -> Response {
    if let Err(refused) = authorize(&src, peer.ip(), &headers) {
        return refused.into_response();
    }
    let snap = src.publisher.latest();
    let now = crate::now_ms() + src.clock_offset_ms;
    let mut body = String::with_capacity(64 * 1024);
    super::render(&src.info, &snap, now, &mut body);
    let mut resp = if wants_gzip(&headers) {
        let mut gz = flate2::write::GzEncoder::new(Vec::with_capacity(body.len() / 4), flate2::Compression::fast());
        match gz.write_all(body.as_bytes()).and_then(|_| gz.finish()) {
            Ok(bytes) => {
                let mut r = bytes.into_response();
                r.headers_mut()
                    .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
                r
            }
            Err(e) => return (StatusCode::INTERNAL_SERVER_ERROR, format!("gzip: {e}\n")).into_response(),
        }
    } else {
        body.into_response()
    };
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(super::text::CONTENT_TYPE),
    );
    resp
}

/// Why a scrape was refused.
enum Refused {
    /// The peer spent its allowance of wrong tokens.
    Limited(String),
    Unauthorized(&'static str),
}

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        match self {
            Refused::Limited(why) => (StatusCode::TOO_MANY_REQUESTS, format!("{why}\n")).into_response(),
            Refused::Unauthorized(why) => {
                let mut r = (StatusCode::UNAUTHORIZED, why).into_response();
                r.headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                r
            }
        }
    }
}

/// The token check of the gRPC port, in HTTP's words.
fn authorize(src: &Source, peer: IpAddr, headers: &HeaderMap) -> Result<(), Refused> {
    let Some(want) = &src.token else { return Ok(()) };
    if let Err(s) = src.failed.check(Some(peer)) {
        return Err(Refused::Limited(s.message().to_string()));
    }
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let why = match given {
        Some(t) if same_token(want, t) => return Ok(()),
        Some(_) => "wrong telemetry token\n",
        None => "this agent needs its telemetry token: Authorization: Bearer <token>\n",
    };
    src.failed.failed(Some(peer), "telemetry (metrics)");
    Err(Refused::Unauthorized(why))
}

/// Whether Accept-Encoding lists gzip with a non-zero quality.
fn wants_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|item| {
            let mut parts = item.split(';').map(str::trim);
            let coding = parts.next().unwrap_or_default();
            let q_zero = parts.any(|p| {
                p.strip_prefix("q=")
                    .and_then(|q| q.parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            coding.eq_ignore_ascii_case("gzip") && !q_zero
        })
}

/// The scraper's address, for the token limiter.
#[derive(Debug, Clone, Copy)]
struct Peer(SocketAddr);

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, Bounded>> for Peer {
    fn connect_info(stream: axum::serve::IncomingStream<'_, Bounded>) -> Self {
        Peer(*stream.remote_addr())
    }
}

/// The listener with a cap on open connections (past it, closed at once)
/// and an idle deadline on each.
struct Bounded {
    inner: TcpListener,
    slots: Arc<Semaphore>,
    idle: Duration,
}

impl axum::serve::Listener for Bounded {
    type Io = Conn;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Conn, SocketAddr) {
        let mut backoff = Duration::from_millis(100);
        loop {
            match self.inner.accept().await {
                Ok((io, peer)) => {
                    backoff = Duration::from_millis(100);
                    let Ok(slot) = self.slots.clone().try_acquire_owned() else {
                        tracing::debug!("metrics: connection from {peer} closed: too many open");
                        continue;
                    };
                    let _ = io.set_nodelay(true);
                    return (
                        Conn {
                            io,
                            idle: self.idle,
                            deadline: Box::pin(tokio::time::sleep(self.idle)),
                            _slot: slot,
                        },
                        peer,
                    );
                }
                // Out of file descriptors and the like: wait, never spin.
                Err(e) => {
                    tracing::warn!("metrics: accept failed: {e}");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }
}

/// A scraper's connection: closed when nothing arrives for the idle time.
struct Conn {
    io: TcpStream,
    idle: Duration,
    deadline: Pin<Box<tokio::time::Sleep>>,
    _slot: OwnedSemaphorePermit,
}

impl AsyncRead for Conn {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut me.io).poll_read(cx, buf) {
            Poll::Ready(r) => {
                if buf.filled().len() > before {
                    let next = tokio::time::Instant::now() + me.idle;
                    me.deadline.as_mut().reset(next);
                }
                Poll::Ready(r)
            }
            Poll::Pending => match me.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("nothing received for {:?}", me.idle),
                ))),
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gzip_only_when_asked_and_not_refused() {
        let h = |v: &str| {
            let mut m = HeaderMap::new();
            m.insert(header::ACCEPT_ENCODING, HeaderValue::from_str(v).expect("header"));
            wants_gzip(&m)
        };
        assert!(h("gzip"));
        assert!(h("deflate, GZIP;q=0.5"));
        assert!(!h("gzip;q=0"));
        assert!(!h("identity"));
        assert!(!h("gzipx"));
        assert!(!wants_gzip(&HeaderMap::new()));
    }
}
