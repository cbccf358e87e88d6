//! The agent's network edge: how connections are accepted, bounded and
//! reaped, and how failed tokens are slowed down. The agent runs as root on
//! every GPU node, so whoever reaches its port must not be able to exhaust
//! its memory, file descriptors or CPU, or guess its tokens at line rate.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tonic::transport::server::{Connected, TcpConnectInfo};

/// What one agent allows its peers (every field has a flag).
#[derive(Debug, Clone)]
pub struct Limits {
    /// Concurrent Subscribe streams, over all connections.
    pub max_subscribers: usize,
    /// HTTP/2 MAX_CONCURRENT_STREAMS: streams one connection may open.
    pub max_streams_per_connection: u32,
    /// Open connections; past it a new one takes the place of the oldest
    /// that has not authenticated, or is closed at once.
    pub max_connections: usize,
    /// Open connections from one IP address; past it the same, among that
    /// address's connections.
    pub max_connections_per_peer: usize,
    /// A new connection must send its first bytes (the HTTP/2 preface, or a
    /// TLS hello) within this, and finish a TLS handshake within it.
    pub handshake_timeout: Duration,
    /// A connection from which nothing arrives for this long is closed, and
    /// so is one with no stream open for this long. The agent pings every
    /// connection at a third of it (HTTP/2 keepalive), so a live peer always
    /// has something to send: the ping's answer.
    pub idle_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_subscribers: 64,
            max_streams_per_connection: 16,
            max_connections: 256,
            max_connections_per_peer: DEFAULT_MAX_CONNECTIONS_PER_PEER,
            handshake_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
        }
    }
}

/// Connections one IP address may hold by default: a login node's
/// consoles (one connection each per agent) fit, and one address cannot
/// take the whole of `max_connections`.
pub const DEFAULT_MAX_CONNECTIONS_PER_PEER: usize = 32;

/// Bytes a client sends first: the HTTP/2 connection preface is 24 bytes,
/// a TLS ClientHello more. Until these arrive the handshake timeout runs.
const HANDSHAKE_BYTES: usize = 24;

/// The open connections: for each, its peer, its age, whether it has made
/// an authenticated call, and the streams it has open. A connection that
/// answers pings but opens no stream is idle all the same, and would
/// otherwise hold one of the `max_connections` slots for ever.
///
/// Admission (`admit`): past `max_connections_per_peer` from one IP
/// address, or past `max_connections` in all, a new connection takes the
/// place of the oldest one that has not authenticated (of that address; of
/// the address that holds the most such connections). It is refused only
/// when every candidate has authenticated. So idle or half-open
/// connections never lock an authenticated console out.
#[derive(Default)]
pub struct Connections {
    /// Connections accepted since the agent started.
    accepted: AtomicUsize,
    /// Connections closed to make room for a new one.
    evicted: AtomicUsize,
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    by_addr: HashMap<SocketAddr, Arc<Streams>>,
    by_ip: HashMap<IpAddr, usize>,
    /// The next connection's number: a lower one is older.
    next: u64,
}

impl Table {
    fn remove(&mut self, addr: &SocketAddr) -> Option<Arc<Streams>> {
        let s = self.by_addr.remove(addr)?;
        if let Some(n) = self.by_ip.get_mut(&addr.ip()) {
            *n -= 1;
            if *n == 0 {
                self.by_ip.remove(&addr.ip());
            }
        }
        Some(s)
    }

    /// The oldest connection that has not authenticated, among those `of`
    /// accepts.
    fn oldest_unauthenticated(&self, of: impl Fn(&SocketAddr) -> bool) -> Option<SocketAddr> {
        self.by_addr
            .iter()
            .filter(|(a, s)| of(a) && !s.authenticated.load(Ordering::SeqCst))
            .min_by_key(|(_, s)| s.seq)
            .map(|(a, _)| *a)
    }

    /// The connection to close when every slot is taken: the oldest one not
    /// authenticated of the address that holds the most such connections
    /// (a console alone on its address is the last to go).
    fn victim(&self) -> Option<SocketAddr> {
        let mut unauth: HashMap<IpAddr, usize> = HashMap::new();
        for (a, s) in &self.by_addr {
            if !s.authenticated.load(Ordering::SeqCst) {
                *unauth.entry(a.ip()).or_default() += 1;
            }
        }
        let most = *unauth.values().max()?;
        self.oldest_unauthenticated(|a| unauth.get(&a.ip()) == Some(&most))
    }
}

/// Why a new connection was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Its address holds `max_connections_per_peer`, all authenticated.
    PerPeer,
    /// `max_connections` are open, all authenticated.
    Full,
}

/// A connection let in: its entry, the signal that evicts it, and the
/// connection it took the place of (if any) with why.
pub struct Admitted {
    streams: Arc<Streams>,
    evict: oneshot::Receiver<()>,
    pub replaced: Option<(SocketAddr, Refused)>,
}

/// One connection: its number, whether it has authenticated, its open
/// streams and since when it has had none, and how to evict it.
pub struct Streams {
    seq: u64,
    authenticated: AtomicBool,
    open: Mutex<(usize, tokio::time::Instant)>,
    evict: Mutex<Option<oneshot::Sender<()>>>,
}

/// Counts a stream on its connection for as long as it lives.
pub struct StreamGuard(Arc<Streams>);

impl Drop for StreamGuard {
    fn drop(&mut self) {
        let mut s = self.0.open.lock().unwrap_or_else(|e| e.into_inner());
        s.0 = s.0.saturating_sub(1);
        if s.0 == 0 {
            s.1 = tokio::time::Instant::now();
        }
    }
}

impl Connections {
    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.table().by_addr.len()
    }

    /// Connections accepted since the agent started.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Connections closed since the agent started to make room for new ones.
    pub fn evicted(&self) -> usize {
        self.evicted.load(Ordering::SeqCst)
    }

    /// Lets a connection from `peer` in, in the place of the oldest one not
    /// authenticated if there is no room (see `Connections`), or refuses it.
    pub fn admit(&self, peer: SocketAddr, limits: &Limits) -> Result<Admitted, Refused> {
        let mut t = self.table();
        let mut replaced = None;
        if t.by_ip.get(&peer.ip()).copied().unwrap_or(0) >= limits.max_connections_per_peer {
            let ip = peer.ip();
            let Some(old) = t.oldest_unauthenticated(|a| a.ip() == ip) else {
                return Err(Refused::PerPeer);
            };
            replaced = Some((old, Refused::PerPeer));
        } else if t.by_addr.len() >= limits.max_connections {
            let Some(old) = t.victim() else {
                return Err(Refused::Full);
            };
            replaced = Some((old, Refused::Full));
        }
        if let Some((old, _)) = replaced
            && let Some(s) = t.remove(&old)
        {
            // Dropping the sender wakes the connection's reads with an error.
            s.evict.lock().unwrap_or_else(|e| e.into_inner()).take();
            self.evicted.fetch_add(1, Ordering::SeqCst);
        }
        let (tx, rx) = oneshot::channel();
        let seq = t.next;
        t.next += 1;
        let streams = Arc::new(Streams {
            seq,
            authenticated: AtomicBool::new(false),
            open: Mutex::new((0, tokio::time::Instant::now())),
            evict: Mutex::new(Some(tx)),
        });
        // A new connection from an address whose old one is still counted
        // (a reused port): the old entry goes, and its connection with it.
        if let Some(old) = t.remove(&peer) {
            old.evict.lock().unwrap_or_else(|e| e.into_inner()).take();
        }
        t.by_addr.insert(peer, streams.clone());
        *t.by_ip.entry(peer.ip()).or_default() += 1;
        self.accepted.fetch_add(1, Ordering::SeqCst);
        Ok(Admitted {
            streams,
            evict: rx,
            replaced,
        })
    }

    /// Marks the connection from `peer` as having made an authenticated
    /// call: it is never evicted to make room for another.
    pub fn authenticated(&self, peer: Option<SocketAddr>) {
        if let Some(s) = peer.and_then(|p| self.table().by_addr.get(&p).cloned()) {
            s.authenticated.store(true, Ordering::SeqCst);
        }
    }

    /// Counts a stream on the connection from `peer` (the request's remote
    /// address) until the guard is dropped.
    pub fn stream(&self, peer: Option<SocketAddr>) -> Option<StreamGuard> {
        let streams = self.table().by_addr.get(&peer?).cloned()?;
        streams.open.lock().unwrap_or_else(|e| e.into_inner()).0 += 1;
        Some(StreamGuard(streams))
    }
}

/// What an evicted connection's reads and writes fail with.
const EVICTED: &str = "evicted: a new connection took the place of this one, which had not authenticated";

/// A connection with deadlines on what it sends: the handshake timeout until
/// its first bytes, then the idle timeout between reads, and the idle
/// timeout again while it has no stream open. A peer that goes quiet (a bare
/// connect, a truncated preface, a host that vanished) or that only answers
/// pings gets a read error, and the server closes it. So does one evicted
/// to make room for a new connection.
pub struct Conn {
    io: TcpStream,
    deadline: Pin<Box<tokio::time::Sleep>>,
    /// When a connection with no stream open is closed.
    streamless: Pin<Box<tokio::time::Sleep>>,
    streams: Arc<Streams>,
    /// Ready (its sender dropped) when the connection is evicted.
    evict: oneshot::Receiver<()>,
    evicted: bool,
    read: usize,
    handshake: Duration,
    idle: Duration,
    /// Counts this connection among the open ones until it is dropped.
    _slot: Slot,
}

struct Slot(Arc<Connections>, SocketAddr, Arc<Streams>);

impl Drop for Slot {
    fn drop(&mut self) {
        let mut t = self.0.table();
        // Only this connection's entry: it may have been evicted, and a new
        // one from the same address may already have taken its place.
        if t.by_addr.get(&self.1).is_some_and(|s| Arc::ptr_eq(s, &self.2)) {
            t.remove(&self.1);
        }
    }
}

impl Connected for Conn {
    type ConnectInfo = TcpConnectInfo;
    fn connect_info(&self) -> TcpConnectInfo {
        TcpConnectInfo {
            local_addr: self.io.local_addr().ok(),
            remote_addr: self.io.peer_addr().ok(),
        }
    }
}

impl AsyncRead for Conn {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        if me.is_evicted(cx) {
            return Poll::Ready(Err(evicted()));
        }
        let before = buf.filled().len();
        match Pin::new(&mut me.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let n = buf.filled().len() - before;
                if n > 0 {
                    let was = me.read;
                    me.read = me.read.saturating_add(n);
                    // Only re-arm when it matters: after the handshake bytes,
                    // and then on every read (a cheap timer update).
                    if was < HANDSHAKE_BYTES && me.read < HANDSHAKE_BYTES {
                        return Poll::Ready(Ok(()));
                    }
                    let next = tokio::time::Instant::now() + me.idle;
                    me.deadline.as_mut().reset(next);
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => {
                let what = if me.deadline.as_mut().poll(cx).is_ready() {
                    if me.read < HANDSHAKE_BYTES {
                        format!("no handshake within {:?}", me.handshake)
                    } else {
                        format!("nothing received for {:?}", me.idle)
                    }
                } else if me.read >= HANDSHAKE_BYTES && me.streamless_expired(cx) {
                    format!("no stream open for {:?}", me.idle)
                } else {
                    return Poll::Pending;
                };
                tracing::debug!("closing {:?}: {what}", me.io.peer_addr().ok());
                Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, what)))
            }
        }
    }
}

fn evicted() -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionAborted, EVICTED)
}

/// Whether `e` is a connection's eviction (not a fault of its peer's).
pub fn is_eviction(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::ConnectionAborted && e.to_string().contains(EVICTED)
}

impl Conn {
    /// Whether the connection was evicted (checked on every read and write,
    /// which also registers for the wake-up that eviction gives).
    fn is_evicted(&mut self, cx: &mut Context<'_>) -> bool {
        if !self.evicted && Pin::new(&mut self.evict).poll(cx).is_ready() {
            self.evicted = true;
        }
        self.evicted
    }

    /// Whether the connection has had no stream open for the idle timeout.
    /// Checked whenever the server waits to read: a live peer answers the
    /// agent's pings, which brings it here at least every third of it.
    fn streamless_expired(&mut self, cx: &mut Context<'_>) -> bool {
        let (active, since) = *self.streams.open.lock().unwrap_or_else(|e| e.into_inner());
        if active > 0 {
            return false;
        }
        let at = since + self.idle;
        if self.streamless.deadline() != at {
            self.streamless.as_mut().reset(at);
        }
        self.streamless.as_mut().poll(cx).is_ready()
    }
}

impl AsyncWrite for Conn {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        if me.is_evicted(cx) {
            return Poll::Ready(Err(evicted()));
        }
        Pin::new(&mut me.io).poll_write(cx, buf)
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        if me.is_evicted(cx) {
            return Poll::Ready(Err(evicted()));
        }
        Pin::new(&mut me.io).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

use std::future::Future;

/// The first delay after the accept loop runs out of file descriptors; it
/// doubles up to `ACCEPT_BACKOFF_MAX` while the shortage lasts.
const ACCEPT_BACKOFF_START: Duration = Duration::from_millis(100);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(2);

/// Out of descriptors or kernel memory: accepting again at once would only
/// fail again (and spin a core), so these wait.
fn is_resource_shortage(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE) | Some(libc::ENFILE) | Some(libc::ENOBUFS) | Some(libc::ENOMEM)
    )
}

/// A connection as the server gets it: plaintext, or TLS the agent accepted.
pub enum AgentIo {
    Plain(Conn),
    Tls(Box<tokio_rustls::server::TlsStream<Conn>>),
}

impl Connected for AgentIo {
    type ConnectInfo = TcpConnectInfo;
    fn connect_info(&self) -> TcpConnectInfo {
        match self {
            AgentIo::Plain(c) => c.connect_info(),
            AgentIo::Tls(t) => t.get_ref().0.connect_info(),
        }
    }
}

impl AsyncRead for AgentIo {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            AgentIo::Plain(c) => Pin::new(c).poll_read(cx, buf),
            AgentIo::Tls(t) => Pin::new(t.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for AgentIo {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            AgentIo::Plain(c) => Pin::new(c).poll_write(cx, buf),
            AgentIo::Tls(t) => Pin::new(t.as_mut()).poll_write(cx, buf),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            AgentIo::Plain(c) => Pin::new(c).poll_flush(cx),
            AgentIo::Tls(t) => Pin::new(t.as_mut()).poll_flush(cx),
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            AgentIo::Plain(c) => Pin::new(c).poll_shutdown(cx),
            AgentIo::Tls(t) => Pin::new(t.as_mut()).poll_shutdown(cx),
        }
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            AgentIo::Plain(c) => Pin::new(c).poll_write_vectored(cx, bufs),
            AgentIo::Tls(t) => Pin::new(t.as_mut()).poll_write_vectored(cx, bufs),
        }
    }
    fn is_write_vectored(&self) -> bool {
        match self {
            AgentIo::Plain(c) => c.is_write_vectored(),
            AgentIo::Tls(t) => t.is_write_vectored(),
        }
    }
}

/// Which cap a connection met, for the log.
fn full(why: Refused, limits: &Limits) -> String {
    match why {
        Refused::PerPeer => format!(
            "{} open from its address (--max-connections-per-peer)",
            limits.max_connections_per_peer
        ),
        Refused::Full => format!("{} open (--max-connections)", limits.max_connections),
    }
}

/// Accepts connections for the server: admits them against the caps (see
/// `Connections::admit`: a new one may take the place of one that never
/// authenticated; one past the caps is closed at once), wraps each in its deadlines, and backs off when the process
/// is out of file descriptors, saying so once rather than spinning. With
/// `tls`, each connection's handshake runs in a task of its own (within the
/// handshake timeout), and a refused one is logged with the peer and the
/// reason (see `tls::Refusals`). Ends when the server drops the receiver.
pub fn incoming(
    listener: TcpListener,
    limits: &Limits,
    conns: Arc<Connections>,
    tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
) -> mpsc::Receiver<io::Result<AgentIo>> {
    let (tx, rx) = mpsc::channel(16);
    let limits = limits.clone();
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    let refusals = Arc::new(crate::serve::tls::Refusals::default());
    tokio::spawn(async move {
        let mut backoff = ACCEPT_BACKOFF_START;
        let mut short = false;
        let mut refused_logged: Option<Instant> = None;
        let mut evicted_logged: Option<Instant> = None;
        loop {
            let accepted = tokio::select! {
                a = listener.accept() => a,
                _ = tx.closed() => return,
            };
            let (io, peer): (TcpStream, SocketAddr) = match accepted {
                Ok(a) => a,
                Err(e) if is_resource_shortage(&e) => {
                    if !short {
                        tracing::warn!(
                            "cannot accept connections: {e}; retrying with backoff until descriptors free up"
                        );
                        short = true;
                    }
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = tx.closed() => return,
                    }
                    backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                    continue;
                }
                // A peer that reset before we accepted it, and the like:
                // about that peer, not about us.
                Err(e) => {
                    tracing::debug!("accept: {e}");
                    continue;
                }
            };
            if short {
                tracing::info!("accepting connections again");
                short = false;
            }
            backoff = ACCEPT_BACKOFF_START;
            let admitted = match conns.admit(peer, &limits) {
                Ok(a) => a,
                Err(why) => {
                    // One line a second at most, however many are refused.
                    if refused_logged.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
                        tracing::warn!("refusing a connection from {peer}: {}", full(why, &limits));
                        refused_logged = Some(Instant::now());
                    }
                    drop(io);
                    continue;
                }
            };
            if let Some((old, why)) = admitted.replaced
                && evicted_logged.is_none_or(|t| t.elapsed() >= Duration::from_secs(1))
            {
                tracing::warn!(
                    "closing the connection from {old}, which has not authenticated, for one from {peer}: {} \
                     ({} closed so since start)",
                    full(why, &limits),
                    conns.evicted()
                );
                evicted_logged = Some(Instant::now());
            }
            let _ = io.set_nodelay(true);
            let streams = admitted.streams;
            let conn = Conn {
                io,
                deadline: Box::pin(tokio::time::sleep(limits.handshake_timeout)),
                streamless: Box::pin(tokio::time::sleep(limits.idle_timeout)),
                _slot: Slot(conns.clone(), peer, streams.clone()),
                streams,
                evict: admitted.evict,
                evicted: false,
                read: 0,
                handshake: limits.handshake_timeout,
                idle: limits.idle_timeout,
            };
            let Some(acceptor) = &acceptor else {
                if tx.send(Ok(AgentIo::Plain(conn))).await.is_err() {
                    return;
                }
                continue;
            };
            let (acceptor, tx, refusals) = (acceptor.clone(), tx.clone(), refusals.clone());
            let within = limits.handshake_timeout;
            tokio::spawn(async move {
                let accepted = tokio::select! {
                    a = tokio::time::timeout(within, acceptor.accept(conn)) => a,
                    _ = tx.closed() => return,
                };
                match accepted {
                    Ok(Ok(tls)) => {
                        let _ = tx.send(Ok(AgentIo::Tls(Box::new(tls)))).await;
                    }
                    Ok(Err(e)) if is_eviction(&e) => tracing::debug!("TLS handshake with {peer}: {e}"),
                    Ok(Err(e)) => refusals.refused(peer, &e),
                    Err(_) => tracing::debug!("TLS handshake with {peer}: none within {within:?}"),
                }
            });
        }
    });
    rx
}

/// Failed tokens per peer address, as a token bucket: a peer may get a few
/// tokens wrong in a row (`FAILURE_BURST`), then one a `FAILURE_EVERY`; past
/// that, its wrong tokens are refused as too many. Callers compare the token
/// first and come here only with a wrong (or missing) one: a right token is
/// never charged nor refused, so consoles that share an address with a
/// guesser or a misconfigured one (a login node) are never locked out. (The
/// bucket then bounds the log and the work a guesser causes; what keeps a
/// token from being guessed is its length.) Failures are logged at most once
/// a second per peer, with the count of those not logged.
pub struct FailedTokens {
    peers: Mutex<HashMap<IpAddr, Failures>>,
}

struct Failures {
    /// Failures the peer may still make now (refills over time).
    allowance: f64,
    last: Instant,
    logged: Option<Instant>,
    unlogged: u32,
}

/// Peers remembered at most; an attacker with many addresses cannot grow
/// the table past it (peers whose allowance is full go first).
const MAX_PEERS: usize = 4096;
const FAILURE_BURST: f64 = 5.0;
const FAILURE_EVERY: Duration = Duration::from_secs(1);

impl Failures {
    fn refill(&mut self, now: Instant) {
        let gained = now.duration_since(self.last).as_secs_f64() / FAILURE_EVERY.as_secs_f64();
        self.allowance = (self.allowance + gained).min(FAILURE_BURST);
        self.last = now;
    }
}

impl Default for FailedTokens {
    fn default() -> Self {
        FailedTokens {
            peers: Mutex::new(HashMap::new()),
        }
    }
}

impl FailedTokens {
    /// Refuses a wrong token from a peer that has used up its allowance of
    /// them (call it only once the token was found wrong).
    pub fn check(&self, peer: Option<IpAddr>) -> Result<(), tonic::Status> {
        let Some(ip) = peer else { return Ok(()) };
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        let Some(f) = peers.get_mut(&ip) else {
            return Ok(());
        };
        f.refill(Instant::now());
        if f.allowance >= 1.0 {
            return Ok(());
        }
        let wait = FAILURE_EVERY.mul_f64(1.0 - f.allowance);
        Err(tonic::Status::resource_exhausted(format!(
            "too many wrong tokens from {ip}: wait {} ms",
            wait.as_millis().max(1)
        )))
    }

    /// Records a wrong token from `peer` (`what`: which token) and logs it.
    pub fn failed(&self, peer: Option<IpAddr>, what: &str) {
        let Some(ip) = peer else {
            tracing::warn!("wrong {what} token from an unknown peer");
            return;
        };
        let now = Instant::now();
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        if peers.len() >= MAX_PEERS && !peers.contains_key(&ip) {
            peers.retain(|_, f| {
                f.refill(now);
                f.allowance < FAILURE_BURST
            });
            if peers.len() >= MAX_PEERS {
                peers.clear();
            }
        }
        let f = peers.entry(ip).or_insert(Failures {
            allowance: FAILURE_BURST,
            last: now,
            logged: None,
            unlogged: 0,
        });
        f.refill(now);
        f.allowance = (f.allowance - 1.0).max(0.0);
        f.unlogged += 1;
        if f.logged.is_none_or(|t| now.duration_since(t) >= Duration::from_secs(1)) {
            tracing::warn!("wrong {what} token from {ip} ({} since the last line)", f.unlogged);
            f.logged = Some(now);
            f.unlogged = 0;
        }
    }
}

/// Compares without an early exit, so timing says nothing about the token.
pub fn same_token(expected: &str, given: &str) -> bool {
    let (a, t) = (expected.as_bytes(), given.as_bytes());
    a.len() == t.len() && a.iter().zip(t).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests;
