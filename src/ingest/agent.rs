//! Agent sources: one task per node that connects to its agent, subscribes, and
//! forwards what arrives as `Update`s on one channel. A dead or slow node
//! only ever delays its own task. Broken connections are retried with
//! exponential backoff and jitter, so a fleet that restarts does not
//! reconnect in lockstep.

use std::hash::BuildHasher;
use std::sync::Arc;
use std::time::Duration;

use fleetop_proto::pb::SubscribeRequest;
use fleetop_proto::pb::agent_client::AgentClient;
use fleetop_proto::pb::agent_message::Kind;
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinHandle;
use tonic::service::interceptor::InterceptedService;

use crate::ingest::conn::{self, Conn, Tls};
use crate::ingest::decode;
use crate::ingest::pace;
use crate::ingest::stream_conn::{self, Messages, StreamConn};
use crate::model::pace::Pace;
use crate::model::sample::{NodeDesc, NodeSample};
use crate::model::target::Target;
use crate::model::time::now_ms;
use crate::model::update::{Event, Update};

/// How long a connection attempt may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How the console reaches its agents: TLS (the CA it trusts, its own
/// certificate for mutual TLS) and the telemetry token; the same for every
/// agent of a session, for streams and control calls alike.
#[derive(Clone, Default)]
pub struct Access {
    pub tls: Option<Tls>,
    /// Sent with every call as `authorization: Bearer ...`.
    pub telemetry_token: Option<String>,
    /// Send the bench token even without TLS (`--insecure`).
    pub insecure: bool,
    /// A client certificate goes with TLS (mutual TLS).
    pub client_cert: bool,
    /// How late the console is: its timeouts count its own time only
    /// (`ingest::pace`).
    pub pace: Arc<Pace>,
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the token.
        f.debug_struct("Access")
            .field("tls", &self.tls.is_some())
            .field("telemetry_token", &self.telemetry_token.is_some())
            .field("insecure", &self.insecure)
            .finish()
    }
}

/// PEM files for `Access::load`.
#[derive(Debug, Default, Clone)]
pub struct TlsFiles<'a> {
    pub ca: Option<&'a std::path::Path>,
    pub cert: Option<&'a std::path::Path>,
    pub key: Option<&'a std::path::Path>,
    pub domain: Option<&'a str>,
}

impl Access {
    /// Reads the CA, the console's certificate and key (all PEM), errors naming the file.
    pub fn load(files: &TlsFiles<'_>, telemetry_token: Option<String>, insecure: bool) -> Result<Access, String> {
        let read = |p: &std::path::Path, what: &str| {
            let name = format!("{what} {}", p.display());
            match fleetop_proto::input::read_capped(p, fleetop_proto::input::MAX_FILE_BYTES) {
                Ok(text) => Ok(conn::Pem {
                    name,
                    bytes: text.into_bytes(),
                }),
                Err(e) => Err(format!("{name}: {e}")),
            }
        };
        let tls = match files.ca {
            None if files.cert.is_some() => return Err("a client certificate needs tls_ca (--tls-ca) too".into()),
            None => None,
            Some(ca) => {
                let identity = match (files.cert, files.key) {
                    (Some(c), Some(k)) => Some((read(c, "tls_cert")?, read(k, "tls_key")?)),
                    (None, None) => None,
                    _ => return Err("tls_cert and tls_key go together".into()),
                };
                let identity = identity.as_ref().map(|(c, k)| (c, k));
                Some(Tls::from_pem(&read(ca, "tls_ca")?, identity, files.domain)?)
            }
        };
        if tls.is_none() && telemetry_token.is_some() {
            tracing::warn!("no tls_ca: the telemetry token goes to the agents in clear");
        }
        Ok(Access {
            client_cert: tls.is_some() && files.cert.is_some(),
            tls,
            telemetry_token,
            insecure,
            pace: Arc::default(),
        })
    }

    /// A control token (bench) may go out: over TLS, or where the user said
    /// `--insecure` explicitly.
    pub fn control_token_allowed(&self) -> Result<(), String> {
        if self.tls.is_some() || self.insecure {
            return Ok(());
        }
        Err(
            "refused to send the bench token without TLS (it would cross the network in clear): \
             set tls_ca (--tls-ca), or pass --insecure"
                .into(),
        )
    }
}

/// Adds the telemetry token to every call.
#[derive(Clone)]
pub struct Auth(Option<tonic::metadata::MetadataValue<tonic::metadata::Ascii>>);

impl tonic::service::Interceptor for Auth {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(v) = &self.0 {
            req.metadata_mut().insert("authorization", v.clone());
        }
        Ok(req)
    }
}

/// A client of one agent, with the session's token on every call.
pub type Client = AgentClient<InterceptedService<Conn, Auth>>;

/// One connection to an agent for control calls (signal, bench), with the
/// session's token on every call. The sample stream has a connection of
/// its own kind (`stream_conn`).
#[derive(Clone)]
pub struct Connection {
    svc: InterceptedService<Conn, Auth>,
    origin: tonic::codegen::http::Uri,
}

impl Connection {
    /// tonic's client for the control calls (signal, bench).
    pub fn client(&self) -> Client {
        AgentClient::with_origin(self.svc.clone(), self.origin.clone())
            .max_decoding_message_size(stream_conn::MAX_MESSAGE_BYTES)
    }
}

/// A connected client for `target`'s agent's control calls, errors in one
/// line, within `CONNECT_TIMEOUT`.
pub async fn connect(target: &Target, access: &Access) -> Result<Connection, String> {
    let origin = conn::origin(target, access.tls.is_some())?;
    let token = bearer(access)?;
    let conn = opened(access, conn::open(target, access.tls.as_ref())).await?;
    Ok(Connection {
        svc: InterceptedService::new(conn, Auth(token)),
        origin,
    })
}

/// A connection for `target`'s agent's sample stream, errors in one line,
/// within `CONNECT_TIMEOUT`.
pub async fn connect_stream(target: &Target, access: &Access) -> Result<StreamConn, String> {
    let token = bearer(access)?;
    let opening = stream_conn::open(target, access.tls.as_ref(), token, access.pace.clone());
    opened(access, opening).await
}

/// The session's telemetry token as the header that carries it (tonic's
/// metadata or h2's header).
fn bearer<V: std::str::FromStr>(access: &Access) -> Result<Option<V>, String> {
    access
        .telemetry_token
        .as_ref()
        .map(|t| {
            format!("Bearer {t}")
                .parse()
                .map_err(|_| "the telemetry token holds characters a header cannot carry".to_string())
        })
        .transpose()
}

/// `opening` within `CONNECT_TIMEOUT` of the console's own time (a console
/// too starved to finish the handshake does not call the agent
/// unreachable), its error in words a user can act on.
async fn opened<T>(access: &Access, opening: impl Future<Output = Result<T, String>>) -> Result<T, String> {
    // On the heap while it runs: a node's task is as large as the largest
    // future it ever awaits, for its whole life (10,000 of them in a large
    // console).
    let opening = Box::pin(opening);
    pace::timeout(&access.pace, CONNECT_TIMEOUT, opening)
        .await
        .ok_or_else(|| format!("no connection within {} s (timed out)", CONNECT_TIMEOUT.as_secs()))?
        .map_err(|why| {
            // rustls's words for "that was not TLS": say what it likely means.
            if access.tls.is_some() && why.contains("InvalidContentType") {
                format!("{why} (is the agent serving TLS? start it with --tls-cert and --tls-key)")
            } else {
                why
            }
        })
}

#[derive(Debug, Clone)]
pub struct SourceOptions {
    pub connect_timeout: Duration,
    pub backoff_start: Duration,
    pub backoff_max: Duration,
    /// History to ask for on connect (0: all the agent has).
    pub backfill_s: u32,
    /// How many nodes' histories are read at once. A fleet's start is as
    /// fast as the store takes samples in, whatever this is; read all at
    /// once, 10,240 agents' histories queued minutes of samples ahead of
    /// the live ones of nodes already caught up (shown stale), slowed
    /// connections past their timeouts (shown unreachable), and held every
    /// stream's buffers at their largest at the same time.
    pub histories_at_once: usize,
    pub access: Access,
}

impl Default for SourceOptions {
    fn default() -> Self {
        SourceOptions {
            connect_timeout: CONNECT_TIMEOUT,
            backoff_start: Duration::from_millis(500),
            // A node that comes back is seen within about two sample
            // intervals; a refused connect costs microseconds, a dropped one
            // waits out `connect_timeout`, so even a large dead fleet makes
            // few attempts a second.
            backoff_max: Duration::from_secs(2),
            backfill_s: 0,
            histories_at_once: 64,
            access: Access::default(),
        }
    }
}

/// What a console reads the fleet's history for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reading {
    /// A console that keeps running (the TUI, `watch`, `record`, an
    /// export of many snapshots): its history fills up as it runs.
    Running,
    /// One snapshot (`export --once`, `--count 1`) and gone.
    Snapshot,
}

/// The history asked of each agent at start where `--backfill` does not
/// say: all of it (ten minutes at 1 Hz) up to 416 nodes; past that a budget
/// for the whole fleet. A console takes a history in at about 10,000
/// samples a second on two cores, and shows a node once its history is in.
/// - `Running`: about 250,000 samples (25 s each at 10,000 nodes, four
///   minutes at 1,000), so the whole fleet is shown within half a minute.
///   Replaying ten minutes of 10,000 agents was ~3 minutes of CPU; the
///   history fills up as the console runs.
/// - `Snapshot`: about 100,000 samples and at least 10 s (twice the
///   samples a flag takes to clear, so every debounced flag is judged as a
///   running console judges it), so one snapshot of 10,000 nodes takes
///   seconds. What a larger budget adds past 416 nodes is a longer part of
///   the five-minute windows (idle, power-capped, underused), which no
///   budget past 416 nodes fills either way.
///
/// 0 asks for everything.
pub fn default_backfill_s(nodes: usize, reading: Reading) -> u32 {
    const WHOLE_FLEET_NODES: usize = 416;
    const WHOLE_S: u32 = 600;
    let (fleet_samples, least_s) = match reading {
        Reading::Running => (250_000, 20),
        Reading::Snapshot => (100_000, 10),
    };
    if nodes <= WHOLE_FLEET_NODES {
        return 0;
    }
    match fleet_samples / nodes {
        s if s >= WHOLE_S as usize => 0,
        s => (s as u32).max(least_s),
    }
}

/// Exponential backoff with "equal jitter": half the delay fixed, half random.
#[derive(Debug)]
pub struct Backoff {
    next: Duration,
    start: Duration,
    max: Duration,
}

impl Backoff {
    pub fn new(start: Duration, max: Duration) -> Self {
        Backoff {
            next: start,
            start,
            max,
        }
    }

    pub fn reset(&mut self) {
        self.next = self.start;
    }

    /// The delay before the next attempt.
    pub fn delay(&mut self) -> Duration {
        let d = self.next;
        self.next = (self.next * 2).min(self.max);
        // A fresh RandomState is randomly keyed: a dependency-free random number.
        let r = std::collections::hash_map::RandomState::new().hash_one(d) % 1000;
        d / 2 + (d / 2) * r as u32 / 1000
    }
}

/// Starts one source task per target; node `i` of the store is `targets[i]`.
pub fn spawn_all(targets: &[Target], opts: &SourceOptions, tx: mpsc::Sender<Update>) -> Vec<JoinHandle<()>> {
    let histories = Arc::new(Semaphore::new(opts.histories_at_once.max(1)));
    let opts = Arc::new(opts.clone());
    targets
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let session = Session {
                node: i,
                target: t.clone(),
                opts: opts.clone(),
                histories: histories.clone(),
            };
            tokio::spawn(run_node(session, tx.clone()))
        })
        .collect()
}

/// What one node's task works with.
struct Session {
    node: usize,
    target: Target,
    /// One for the fleet: with TLS it holds the certificates.
    opts: Arc<SourceOptions>,
    /// Permits to read a history (see `SourceOptions::histories_at_once`).
    histories: Arc<Semaphore>,
}

async fn run_node(session: Session, tx: mpsc::Sender<Update>) {
    let (node, target, opts) = (session.node, &session.target, &session.opts);
    let mut backoff = Backoff::new(opts.backoff_start, opts.backoff_max);
    let send = |event| tx.send(Update::Node { node, event });
    loop {
        match stream_once(&session, &tx, &mut backoff).await {
            Ok(()) => {
                if send(Event::Down("agent closed the stream".into())).await.is_err() {
                    return;
                }
            }
            Err(e) => {
                tracing::debug!("{}: {e}", target.name);
                if send(Event::Down(e)).await.is_err() {
                    return;
                }
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff.delay()) => {}
            _ = tx.closed() => return,
        }
    }
}

/// The node's description (its health checks and fault journal among it),
/// read once: subscribe without history, take the first message, hang up.
/// Bounded by `within` whatever the agent does.
pub async fn describe(
    target: &Target,
    access: &Access,
    within: Duration,
) -> Result<crate::model::sample::NodeDesc, String> {
    let once = async {
        let conn = connect_stream(target, access).await?;
        let req = SubscribeRequest {
            no_backfill: true,
            ..Default::default()
        };
        let mut stream = conn
            .subscribe(&req)
            .await
            .map_err(|s| format!("subscribe refused: {}", s.message()))?;
        match stream
            .message()
            .await
            .map_err(|s| format!("stream broke: {}", s.message()))?
        {
            Some(m) => match m.kind {
                Some(Kind::Info(info)) => Ok(decode::Stream::default().info(info, now_ms())),
                _ => Err("the agent did not describe its node first".to_string()),
            },
            None => Err("the agent closed the stream".to_string()),
        }
    };
    tokio::time::timeout(within, once)
        .await
        .map_err(|_| format!("no answer within {} s", within.as_secs()))?
}

/// Why a call was refused, in one line. An agent that requires mutual TLS
/// ends the handshake of a console without a certificate, which the
/// console sees only as a broken or cancelled call: say what it likely is.
fn refused(access: &Access, what: &str, s: &tonic::Status) -> String {
    let mut line = format!("{what}: {}", s.message());
    let transport = matches!(
        s.code(),
        tonic::Code::Cancelled | tonic::Code::Unavailable | tonic::Code::Unknown
    );
    if access.tls.is_some() && !access.client_cert && transport {
        line.push_str(
            " (the agent may require a client certificate: set tls_cert and tls_key, signed by the CA of its --tls-client-ca)",
        );
    }
    line
}

/// A connection that waited this long for its permit to read a history is
/// made again before it is used (agents close idle ones after a minute).
const PERMIT_WAIT_RECONNECT: Duration = Duration::from_secs(30);

/// A history of at least this many samples is read on a connection of its
/// own (see `stream_once`).
const HISTORY_OWN_CONNECTION: u64 = 16;

/// What the live stream asks for again after the history's connection: the
/// samples taken while it was replaced (each taken in once, by its seq).
const REJOIN_BACKFILL_S: u32 = 5;

/// One session with an agent: subscribe and forward until the stream ends
/// or breaks.
///
/// The connection's read buffer grows to the largest chunk it is handed
/// and never shrinks (h2 keeps it for the connection's life); agents before 4 KiB history batches and one message
/// a chunk send histories 32 KiB at a time. So a history of more than a
/// few samples is read on a connection that is closed once it is in, and
/// the live samples come on a fresh one, whose buffers only ever hold a
/// sample (docs/PERFORMANCE.md has the figures).
///
/// A node's task is as large as the largest future it ever awaits, for its
/// whole life (10,000 of them in a large console): the first stream and the
/// rejoin run on the heap, and what stays is the live stream's pump.
async fn stream_once(session: &Session, tx: &mpsc::Sender<Update>, backoff: &mut Backoff) -> Result<(), String> {
    let (target, opts) = (&session.target, &session.opts);
    let mut fwd = Forwarder {
        node: session.node,
        tx,
        backoff,
        delivered: false,
        instance: None,
        last_seq: None,
    };
    let Some(mut on) = Box::pin(first_stream(session, &mut fwd)).await? else {
        return Ok(());
    };
    let mut phase = Phase::Live;
    if on.history >= HISTORY_OWN_CONNECTION {
        // Made before the first is broken: a console or agent too busy to
        // answer the second within the connect timeout (a large fleet's
        // start) leaves the node on its first stream, never down. The
        // first stream's samples go on meanwhile: a starved console takes
        // seconds over the handshake, and the node is not silent for it.
        // Whatever it was reading when the second is ready is dropped with
        // it (`last_seq` moves only once a sample is handed on), and the
        // second's few seconds of history bring it.
        let joining = Box::pin(rejoin(target, opts, fwd.instance));
        let joined = tokio::select! {
            joined = joining => joined,
            pumped = fwd.pump(&mut on.stream, &mut on.decoder, opts, Phase::Live) => return pumped.map(drop),
        };
        match joined {
            Ok((conn, live)) => {
                // The history's stream and its decoding state (a whole
                // sample and NVLink counters, the base of deltas that will
                // not come) go now, not when the session ends.
                let decoder = on.decoder.rejoining();
                on = OnStream {
                    _conn: conn,
                    stream: live,
                    decoder,
                    history: 0,
                };
                phase = Phase::Rejoin;
            }
            Err(e) => tracing::debug!("{}: staying on the history's connection: {e}", target.name),
        }
    }
    fwd.pump(&mut on.stream, &mut on.decoder, opts, phase).await.map(drop)
}

/// A stream and its decoding state.
struct OnStream {
    /// Held for the stream's sake: the connection ends with its last handle.
    _conn: StreamConn,
    stream: Messages,
    decoder: decode::Stream,
    /// How many history samples the first stream brought.
    history: u64,
}

/// Connects, subscribes and forwards the description and the history;
/// `None` when the stream ended first.
async fn first_stream(session: &Session, fwd: &mut Forwarder<'_>) -> Result<Option<OnStream>, String> {
    let (target, opts) = (&session.target, &session.opts);
    // Connected first, without a permit: a dead node's connect timeout
    // holds no one up.
    let asked = tokio::time::Instant::now();
    let mut conn = connect_stream(target, &opts.access).await?;
    let _permit = session
        .histories
        .acquire()
        .await
        .map_err(|_| "the console is going".to_string())?;
    if asked.elapsed() > PERMIT_WAIT_RECONNECT {
        // An agent closes a connection that opened no stream for a minute.
        conn = connect_stream(target, &opts.access).await?;
    }
    let req = SubscribeRequest {
        backfill_s: opts.backfill_s,
        ..live_request()
    };
    let mut stream = subscribe(&conn, opts, &req).await?;
    // Each stream is decoded on its own (deltas are against its own samples).
    let mut decoder = decode::Stream::default();
    Ok(match fwd.pump(&mut stream, &mut decoder, opts, Phase::First).await? {
        Pumped::Ended => None,
        Pumped::CaughtUp { history } => Some(OnStream {
            _conn: conn,
            stream,
            decoder,
            history,
        }),
    })
}

/// The live stream's connection, from an agent whose process `instance`
/// described the node on the first.
///
/// The agent is asked not to describe the node again where it is the same
/// process (4.4 KB on an HGX node, which the store has), and the few
/// samples missed come one a message, not as a batch: a message cut
/// across h2's chunks is gathered in room of its own (`stream_conn`).
async fn rejoin(
    target: &Target,
    opts: &SourceOptions,
    instance: Option<u64>,
) -> Result<(StreamConn, Messages), String> {
    let conn = connect_stream(target, &opts.access).await?;
    let req = SubscribeRequest {
        backfill_s: REJOIN_BACKFILL_S,
        history_batches: false,
        known_instance: instance.unwrap_or(0),
        ..live_request()
    };
    let stream = subscribe(&conn, opts, &req).await?;
    Ok((conn, stream))
}

/// What a session asks of an agent's stream, less the history.
fn live_request() -> SubscribeRequest {
    SubscribeRequest {
        backfill_s: 0,
        no_backfill: false,
        // Many history samples a message: a fleet's history is most of
        // what a console takes in at start.
        history_batches: true,
        // Live samples a third smaller; the console reads no IB packet
        // counters, which column deltas leave out.
        columns: true,
        known_instance: 0,
    }
}

async fn subscribe(conn: &StreamConn, opts: &SourceOptions, req: &SubscribeRequest) -> Result<Messages, String> {
    // On the heap while it runs, as in `connect`.
    pace::timeout(&opts.access.pace, opts.connect_timeout, Box::pin(conn.subscribe(req)))
        .await
        .ok_or_else(|| "no answer to subscribe".to_string())?
        .map_err(|s| refused(&opts.access, "subscribe refused", &s))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The session's first stream: its description and history, to its end
    /// (`CaughtUp`) or on (`Live`).
    First,
    Live,
    /// The live stream that follows a history read on its own connection:
    /// the same agent's description and caught-up are the store's already,
    /// and samples it has are not sent twice.
    Rejoin,
}

enum Pumped {
    /// The stream ended, or the console is going.
    Ended,
    /// The history is in (`Phase::First` only): this many samples.
    CaughtUp { history: u64 },
}

/// Forwards one session's streams to the store.
struct Forwarder<'a> {
    node: usize,
    tx: &'a mpsc::Sender<Update>,
    backoff: &'a mut Backoff,
    /// Something reached the store: the connection counts as a recovery.
    delivered: bool,
    /// The agent process of the session's first stream, and the newest seq sent on.
    instance: Option<u64>,
    last_seq: Option<u64>,
}

/// One message of a stream, decoded, with nothing of the wire's left: what
/// the pump holds while it waits to hand it on.
enum Step {
    Info {
        instance: u64,
        desc: Box<NodeDesc>,
    },
    Sample(Box<NodeSample>),
    History(fleetop_proto::pb::History),
    CaughtUp,
    /// A burn-in the agent just recorded.
    BurnIn(Box<crate::model::bench::BurnIn>),
    /// A message of a kind this console does not know.
    Nothing,
}

impl Step {
    fn decode(msg: fleetop_proto::pb::AgentMessage, decoder: &mut decode::Stream) -> Result<Step, String> {
        Ok(match msg.kind {
            Some(Kind::Info(info)) => Step::Info {
                instance: info.agent_instance,
                desc: Box::new(decoder.info(info, now_ms())),
            },
            Some(Kind::Sample(s)) => Step::Sample(Box::new(
                decoder.sample(s, now_ms()).map_err(|e| format!("bad stream: {e}"))?,
            )),
            Some(Kind::History(h)) => Step::History(h),
            Some(Kind::BurnIn(b)) => Step::BurnIn(Box::new(decoder.burn_in(b))),
            Some(Kind::CaughtUp(_)) => {
                decoder.caught_up();
                Step::CaughtUp
            }
            None => Step::Nothing,
        })
    }
}

impl Forwarder<'_> {
    /// False when the console is going. The update is made once the
    /// channel has room: the future waiting for it holds no copy.
    async fn send(&mut self, event: Event) -> bool {
        let Ok(permit) = self.tx.reserve().await else {
            return false;
        };
        if !self.delivered {
            // Only a connection that delivers counts as a recovery.
            self.backoff.reset();
            self.delivered = true;
        }
        if let Event::Sample(s) = &event {
            self.last_seq = Some(s.seq);
        }
        permit.send(Update::Node { node: self.node, event });
        true
    }

    async fn pump(
        &mut self,
        stream: &mut Messages,
        decoder: &mut decode::Stream,
        opts: &SourceOptions,
        mut phase: Phase,
    ) -> Result<Pumped, String> {
        let mut history = 0u64;
        loop {
            let msg = stream
                .message()
                .await
                .map_err(|s| refused(&opts.access, "stream broke", &s))?;
            let Some(msg) = msg else { return Ok(Pumped::Ended) };
            match Step::decode(msg, decoder)? {
                Step::Info { instance, desc } => {
                    if phase == Phase::Rejoin && self.instance == Some(instance) {
                        continue;
                    }
                    // Another agent process (it restarted between the two
                    // streams): everything it sends is news.
                    if phase == Phase::Rejoin {
                        phase = Phase::Live;
                    }
                    self.instance = Some(instance);
                    self.last_seq = None;
                    if !self.send(Event::Info(desc)).await {
                        return Ok(Pumped::Ended);
                    }
                }
                Step::Sample(s) => {
                    if !self.sample(phase, s).await {
                        return Ok(Pumped::Ended);
                    }
                }
                Step::History(h) => {
                    for bytes in &h.samples {
                        let s = decoder
                            .history_sample(bytes, now_ms())
                            .map_err(|e| format!("bad stream: {e}"))?;
                        history += 1;
                        if !self.sample(phase, Box::new(s)).await {
                            return Ok(Pumped::Ended);
                        }
                    }
                }
                Step::CaughtUp => {
                    if phase == Phase::Rejoin {
                        continue;
                    }
                    if !self.send(Event::CaughtUp).await {
                        return Ok(Pumped::Ended);
                    }
                    if phase == Phase::First {
                        return Ok(Pumped::CaughtUp { history });
                    }
                }
                Step::BurnIn(b) => {
                    if !self.send(Event::BurnIn(b)).await {
                        return Ok(Pumped::Ended);
                    }
                }
                Step::Nothing => {}
            }
        }
    }

    /// A sample on; on a rejoining stream, only one the store has not had.
    /// False when the console is going.
    async fn sample(&mut self, phase: Phase, s: Box<NodeSample>) -> bool {
        if phase == Phase::Rejoin && self.last_seq.is_some_and(|last| s.seq <= last) {
            return true;
        }
        self.send(Event::Sample(s)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_fleet_asks_for_a_shorter_history() {
        use Reading::*;
        assert_eq!(default_backfill_s(1, Running), 0, "all of it");
        assert_eq!(default_backfill_s(416, Running), 0, "all of it");
        assert_eq!(default_backfill_s(1000, Running), 250);
        assert_eq!(default_backfill_s(10_240, Running), 24);
        assert_eq!(default_backfill_s(100_000, Running), 20, "never less than 20 s");
        // One snapshot of a large fleet reads less; a small one all of it.
        assert_eq!(default_backfill_s(416, Snapshot), 0, "all of it");
        assert_eq!(default_backfill_s(417, Snapshot), 239);
        assert_eq!(default_backfill_s(10_240, Snapshot), 10);
        assert_eq!(default_backfill_s(100_000, Snapshot), 10, "never less than 10 s");
    }

    #[test]
    fn backoff_grows_to_its_cap_with_jitter() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_millis(1000));
        let delays: Vec<Duration> = (0..8).map(|_| b.delay()).collect();
        for (i, d) in delays.iter().enumerate() {
            let full = Duration::from_millis((100u64 << i).min(1000));
            assert!(
                *d >= full / 2 && *d <= full,
                "attempt {i}: {d:?} not in [{:?}, {full:?}]",
                full / 2
            );
        }
        b.reset();
        assert!(b.delay() <= Duration::from_millis(100));
    }
}
