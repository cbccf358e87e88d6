//! `GET /metrics` over HTTP/1.1 (axum), with the agent's telemetry token
//! where it has one, gzip where the scraper asks, and bounded connections.

use std::collections::HashMap;
use std::io::{self, Write as _};
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::Publisher;
use crate::proto::NodeInfo;
use crate::serve::net::{FailedTokens, same_token};

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
    /// Open connections; past it, a new one takes the place of the oldest
    /// that is still sending a request head, or is closed at once.
    pub max_connections: usize,
    /// A connection from which nothing arrives for this long is closed.
    pub idle_timeout: Duration,
    /// A request head (request line and headers) must arrive whole within
    /// this from its first byte (a connection's first: from the accept),
    /// however it trickles: bytes do not extend it.
    pub head_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 16,
            idle_timeout: Duration::from_secs(60),
            head_timeout: Duration::from_secs(10),
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
        open: Arc::default(),
        max: limits.max_connections.max(1),
        idle: limits.idle_timeout,
        head: limits.head_timeout,
        logged: None,
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
        let mut r = match self {
            Refused::Limited(why) => (StatusCode::TOO_MANY_REQUESTS, format!("{why}\n")).into_response(),
            Refused::Unauthorized(why) => {
                let mut r = (StatusCode::UNAUTHORIZED, why).into_response();
                r.headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                r
            }
        };
        // A refused peer does not keep its connection (and a slot) idle.
        r.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        r
    }
}

/// The token check of the gRPC port, in HTTP's words.
fn authorize(src: &Source, peer: IpAddr, headers: &HeaderMap) -> Result<(), Refused> {
    let Some(want) = &src.token else { return Ok(()) };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    // The right token first: only wrong (or missing) ones are limited, so a
    // scraper that shares an address with a guesser keeps working.
    let why = match given {
        Some(t) if same_token(want, t) => return Ok(()),
        Some(_) => "wrong telemetry token\n",
        None => "this agent needs its telemetry token: Authorization: Bearer <token>\n",
    };
    if let Err(s) = src.failed.check(Some(peer)) {
        return Err(Refused::Limited(s.message().to_string()));
    }
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

/// The listener with a cap on open connections and deadlines on each. At
/// the cap, a new connection takes the place of the oldest one still
/// sending a request head: connections that trickle their heads (a
/// slowloris) cannot keep out a scraper that sends its request at once.
/// Connections with a whole request in, or between requests, keep theirs.
struct Bounded {
    inner: TcpListener,
    open: Arc<Mutex<Open>>,
    max: usize,
    idle: Duration,
    head: Duration,
    /// When a connection was last closed to admit another (logged once a second at most).
    logged: Option<std::time::Instant>,
}

/// The open connections, by number.
#[derive(Default)]
struct Open {
    next: u64,
    conns: HashMap<u64, Arc<Tracked>>,
}

/// Where a connection stands, for the listener to choose which to close.
struct Tracked {
    /// Since when it has been sending a request head, while it is.
    head_since: Mutex<Option<tokio::time::Instant>>,
    /// Closed to admit another: its next read fails.
    evicted: AtomicBool,
    /// Its reader, woken when it is closed.
    waker: Mutex<Option<Waker>>,
}

impl Tracked {
    fn head_since(&self) -> Option<tokio::time::Instant> {
        *self.head_since.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set_head_since(&self, since: Option<tokio::time::Instant>) {
        *self.head_since.lock().unwrap_or_else(|e| e.into_inner()) = since;
    }

    fn evict(&self) {
        self.evicted.store(true, Ordering::SeqCst);
        if let Some(w) = self.waker.lock().unwrap_or_else(|e| e.into_inner()).take() {
            w.wake();
        }
    }
}

impl Bounded {
    /// Counts a new connection from `peer` among the open ones, closing the
    /// oldest one still sending its request head if there is no room;
    /// `None`: no room (every connection has a whole request in or is
    /// between requests).
    fn admit(&mut self, peer: SocketAddr) -> Option<(u64, Arc<Tracked>)> {
        let now = tokio::time::Instant::now();
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if open.conns.len() >= self.max {
            let oldest = open
                .conns
                .iter()
                .filter_map(|(id, t)| t.head_since().map(|since| (since, *id)))
                .min();
            let Some((since, id)) = oldest else {
                tracing::debug!("metrics: connection from {peer} closed: too many open");
                return None;
            };
            if let Some(t) = open.conns.remove(&id) {
                t.evict();
            }
            if self.logged.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
                tracing::warn!(
                    "metrics: closed a connection that had not sent a whole request in {:?} to admit {peer} \
                     ({} open: --metrics-max-connections)",
                    now.duration_since(since),
                    self.max
                );
                self.logged = Some(std::time::Instant::now());
            }
        }
        let id = open.next;
        open.next += 1;
        let t = Arc::new(Tracked {
            head_since: Mutex::new(Some(now)),
            evicted: AtomicBool::new(false),
            waker: Mutex::new(None),
        });
        open.conns.insert(id, t.clone());
        Some((id, t))
    }
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
                    let Some((id, tracked)) = self.admit(peer) else {
                        continue;
                    };
                    let _ = io.set_nodelay(true);
                    return (
                        Conn {
                            io,
                            idle: self.idle,
                            head: self.head,
                            deadline: Box::pin(tokio::time::sleep(self.head)),
                            phase: Phase::Head,
                            head_end: HeadEnd::default(),
                            tracked,
                            _slot: Slot(self.open.clone(), id),
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

/// Counts a connection among the open ones until it is dropped.
struct Slot(Arc<Mutex<Open>>, u64);

impl Drop for Slot {
    fn drop(&mut self) {
        // Gone already if it was closed to admit another.
        self.0.lock().unwrap_or_else(|e| e.into_inner()).conns.remove(&self.1);
    }
}

/// Where a connection is in its exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Sending a request head: the head deadline runs, bytes do not extend it.
    Head,
    /// A whole head is in, the answer not yet sent: the idle deadline.
    Served,
    /// Answered, the next request not begun: the idle deadline.
    Idle,
}

/// Finds the end of a request head in the bytes read: an empty line
/// ("\r\n\r\n", or "\n\n", which HTTP/1 parsers accept too), once the
/// head has begun (empty lines before a request line are not its end).
#[derive(Debug, Default)]
struct HeadEnd {
    begun: bool,
    last: [u8; 2],
}

impl HeadEnd {
    /// Whether the head ends within `bytes` (the state is then reset).
    fn feed(&mut self, bytes: &[u8]) -> bool {
        for &b in bytes {
            if b == b'\n' && self.begun && (self.last[1] == b'\n' || self.last == *b"\n\r") {
                *self = HeadEnd::default();
                return true;
            }
            self.begun |= b != b'\r' && b != b'\n';
            self.last = [self.last[1], b];
        }
        false
    }
}

/// A scraper's connection: its request head must arrive whole within the
/// head deadline, and it is closed when nothing arrives for the idle time
/// otherwise.
struct Conn {
    io: TcpStream,
    idle: Duration,
    head: Duration,
    deadline: Pin<Box<tokio::time::Sleep>>,
    phase: Phase,
    head_end: HeadEnd,
    tracked: Arc<Tracked>,
    _slot: Slot,
}

impl Conn {
    fn set_phase(&mut self, phase: Phase, now: tokio::time::Instant) {
        self.phase = phase;
        self.tracked.set_head_since((phase == Phase::Head).then_some(now));
        let timeout = if phase == Phase::Head { self.head } else { self.idle };
        self.deadline.as_mut().reset(now + timeout);
    }

    fn received(&mut self, bytes: &[u8]) {
        let now = tokio::time::Instant::now();
        match self.phase {
            Phase::Idle => {
                // The next request begins: its head has its own deadline.
                self.head_end = HeadEnd::default();
                self.set_phase(Phase::Head, now);
                if self.head_end.feed(bytes) {
                    self.set_phase(Phase::Served, now);
                }
            }
            Phase::Head => {
                if self.head_end.feed(bytes) {
                    self.set_phase(Phase::Served, now);
                }
            }
            Phase::Served => self.deadline.as_mut().reset(now + self.idle),
        }
    }

    fn evicted(&self) -> bool {
        self.tracked.evicted.load(Ordering::SeqCst)
    }
}

fn evicted_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionAborted,
        "closed to admit another connection: no whole request yet",
    )
}

impl AsyncRead for Conn {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        if me.evicted() {
            return Poll::Ready(Err(evicted_error()));
        }
        let before = buf.filled().len();
        match Pin::new(&mut me.io).poll_read(cx, buf) {
            Poll::Ready(r) => {
                if buf.filled().len() > before {
                    me.received(&buf.filled()[before..]);
                }
                Poll::Ready(r)
            }
            Poll::Pending => {
                *me.tracked.waker.lock().unwrap_or_else(|e| e.into_inner()) = Some(cx.waker().clone());
                // Closed between the check above and the waker's registration.
                if me.evicted() {
                    return Poll::Ready(Err(evicted_error()));
                }
                match me.deadline.as_mut().poll(cx) {
                    Poll::Ready(()) => {
                        let what = match me.phase {
                            Phase::Head => format!("no whole request head within {:?}", me.head),
                            _ => format!("nothing received for {:?}", me.idle),
                        };
                        tracing::debug!("metrics: closing {:?}: {what}", me.io.peer_addr().ok());
                        Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, what)))
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        let r = Pin::new(&mut me.io).poll_write(cx, buf);
        // An answer going out: the request it answers is over.
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) && me.phase != Phase::Idle {
            me.set_phase(Phase::Idle, tokio::time::Instant::now());
        }
        r
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

    #[test]
    fn a_head_ends_at_its_empty_line_however_it_is_split() {
        let head = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
        for split in 0..head.len() {
            let mut h = HeadEnd::default();
            let (a, b) = head.split_at(split);
            assert!(!h.feed(a), "split at {split}");
            assert!(h.feed(b), "split at {split}");
        }
        let mut h = HeadEnd::default();
        for &b in b"GET / HTTP/1.1\nHost: x\n".iter() {
            assert!(!h.feed(&[b]));
        }
        assert!(h.feed(b"\n"), "bare line feeds");
        // Empty lines before the request line do not end it, nor does a
        // header that trickles.
        let mut h = HeadEnd::default();
        assert!(!h.feed(b"\r\n\r\n\n\nGET / HTTP/1.1\r\nX-Slow: "));
        assert!(!h.feed(&[b'a'; 100]));
    }
}
