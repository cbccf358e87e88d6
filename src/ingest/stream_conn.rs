//! The sample stream's connection: h2, the Subscribe request framed as
//! gRPC frames it, and the answer's messages read straight from h2's
//! chunks, with nothing between.
//!
//! A console holds one of these a node for the whole session and sends one
//! request on it, so what a stream keeps between two samples is paid
//! 10,240 times over (heaptrack, docs/PERFORMANCE.md):
//!
//! - hyper's client, which the control calls use (`conn`), puts a request
//!   queue in front of h2 (a block of 32 slots allocated whole when the
//!   connection opens: 8 KiB) and runs a task of its own beside the
//!   connection's: about 10 KiB a node for a queue that never held a
//!   second request;
//! - tonic's `Streaming` copies every message into a buffer of its own,
//!   which reserves a message's length again once the message is in: it
//!   settles at twice the stream's largest message (the first whole
//!   sample, 3.5 KB on an 8-GPU node with NVLink) and keeps that for the
//!   stream's life: 7 KiB a node. A message here is decoded from the chunk
//!   it came in; only one cut across chunks is gathered, and that room is
//!   let go once it is read.
//!
//! What gRPC says besides messages is read with tonic's own parts: a
//! status among the headers or trailers (`Status::from_header_map`), an h2
//! error as tonic's client words it (`Status::from_error`).

use std::sync::Arc;

use fleetop_proto::input::error_line;
use fleetop_proto::pb::{AgentMessage, SubscribeRequest};
use prost::Message;
use prost::bytes::{Buf, BytesMut};
use tonic::codegen::{Bytes, http};
use tonic::{Code, Status};

use crate::ingest::conn::{self, KEEPALIVE_INTERVAL, KEEPALIVE_TIMEOUT, Tls};
use crate::ingest::pace;
use crate::model::pace::Pace;
use crate::model::target::Target;

const SUBSCRIBE: &str = "/fleetop.v1.Agent/Subscribe";

/// The largest message the console takes from an agent (a history batch,
/// a node description with its fault journal).
pub const MAX_MESSAGE_BYTES: usize = 64 << 20;

/// The most of an agent's stream the console takes in before it has read
/// it: about a minute of a busy 8-GPU node's samples, or eight history
/// batches (a node's ten minutes of history come in a few round trips).
/// A console short of CPU reads late, and an agent with no room skips
/// samples (the console then gets the newest when it gets to them). With
/// hyper's 2 MiB a starved console could hold up to an hour of each
/// node's samples (one was seen at 1.4 GiB with 6,144 nodes, and
/// growing). One stream a connection, so the connection's window is the
/// same.
pub const STREAM_WINDOW: u32 = 32 << 10;
const CONNECTION_WINDOW: u32 = STREAM_WINDOW;

/// A gRPC message's header: a compression flag, then its length.
const HEADER_BYTES: usize = 5;

/// An open HTTP/2 connection to an agent, for its sample stream. The
/// connection ends once this and its streams are dropped.
#[derive(Clone)]
pub struct StreamConn {
    send: h2::client::SendRequest<Bytes>,
    uri: http::Uri,
    /// `authorization: Bearer ...`, where the session has a token.
    token: Option<http::HeaderValue>,
}

/// Connects to `target` (TLS where `tls` says) and starts the connection's
/// task: it reads and writes for the streams and pings the agent, and a
/// silent agent is dropped within about 15 s (its stream then fails).
/// Unbounded in time: the caller bounds it.
pub async fn open(
    target: &Target,
    tls: Option<&Tls>,
    token: Option<http::HeaderValue>,
    pace: Arc<Pace>,
) -> Result<StreamConn, String> {
    let mut uri = conn::origin(target, tls.is_some())?.into_parts();
    uri.path_and_query = Some(http::uri::PathAndQuery::from_static(SUBSCRIBE));
    let uri = http::Uri::from_parts(uri).map_err(|e| format!("bad address {}: {e}", target.address()))?;
    let io = conn::dial(target, tls).await?;
    let (send, mut connection) = h2::client::Builder::new()
        .enable_push(false)
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .handshake(io)
        .await
        .map_err(|e| format!("HTTP/2: {}", error_line(&e)))?;
    let pings = connection.ping_pong();
    tokio::spawn(async move {
        // Dropping the connection ends its streams with an error, which
        // the session sees and reports like any broken stream.
        let why = tokio::select! {
            end = &mut connection => match end {
                Ok(()) => return,
                Err(e) => error_line(&e),
            },
            why = keepalive(pings, &pace) => why,
        };
        tracing::debug!("agent connection ended: {why}");
    });
    Ok(StreamConn { send, uri, token })
}

/// Pings the agent every `KEEPALIVE_INTERVAL` and returns when one goes
/// unanswered (on the console's own time: a pong the console was too busy
/// to read is not the agent's silence): why the connection is to be dropped.
async fn keepalive(pings: Option<h2::PingPong>, pace: &Pace) -> String {
    // h2 hands out its pinger once, on a connection that was just made.
    let Some(mut pings) = pings else {
        return std::future::pending().await;
    };
    loop {
        tokio::time::sleep(KEEPALIVE_INTERVAL).await;
        match pace::timeout(pace, KEEPALIVE_TIMEOUT, pings.ping(h2::Ping::opaque())).await {
            Some(Ok(_)) => {}
            Some(Err(e)) => return format!("keepalive ping failed: {}", error_line(&e)),
            None => return format!("no answer to a ping within {} s", KEEPALIVE_TIMEOUT.as_secs()),
        }
    }
}

impl StreamConn {
    /// Calls `Subscribe`: the agent's messages, or the status it refused
    /// with. Unbounded in time: the caller bounds it.
    pub async fn subscribe(&self, req: &SubscribeRequest) -> Result<Messages, Status> {
        let mut request = http::Request::post(self.uri.clone())
            .header(http::header::CONTENT_TYPE, "application/grpc")
            .header(http::header::TE, "trailers")
            .body(())
            .map_err(|e| Status::internal(e.to_string()))?;
        if let Some(token) = &self.token {
            request.headers_mut().insert(http::header::AUTHORIZATION, token.clone());
        }
        let mut send = self.send.clone().ready().await.map_err(broken)?;
        let (response, mut body) = send.send_request(request, false).map_err(broken)?;
        // Fails only on a stream the agent has already answered and closed
        // (refused from the headers alone, a bad token) or a connection
        // that broke: either way the answer, read next, says more.
        let _ = body.send_data(grpc_frame(req), true);
        let response = response.await.map_err(broken)?;
        // A status among the headers is the whole answer.
        match Status::from_header_map(response.headers()) {
            Some(status) if status.code() != Code::Ok => return Err(status),
            Some(_) => {}
            None if response.status() != http::StatusCode::OK => {
                return Err(Status::unknown(format!(
                    "the agent answered HTTP {}, not gRPC",
                    response.status()
                )));
            }
            None => {}
        }
        Ok(Messages {
            recv: response.into_body(),
            chunk: Bytes::new(),
            cut: BytesMut::new(),
            ended: false,
        })
    }
}

/// An h2 error as tonic's client says it.
fn broken(e: h2::Error) -> Status {
    Status::from_error(Box::new(e))
}

/// One message as a gRPC request body carries it: not compressed, its
/// length (big-endian), the message.
fn grpc_frame(m: &impl Message) -> Bytes {
    let message = m.encode_to_vec();
    let mut frame = Vec::with_capacity(HEADER_BYTES + message.len());
    frame.push(0);
    frame.extend_from_slice(&(message.len() as u32).to_be_bytes());
    frame.extend_from_slice(&message);
    frame.into()
}

/// The agent's messages on one stream, as they arrive.
#[derive(Debug)]
pub struct Messages {
    recv: h2::RecvStream,
    /// What is left of the last chunk h2 handed over.
    chunk: Bytes,
    /// A message cut across chunks, gathered until it is whole; no room is
    /// held between messages.
    cut: BytesMut,
    /// The stream's status has been read: nothing more comes.
    ended: bool,
}

impl Messages {
    /// The next message; `None` once the agent ends the stream with an OK
    /// status; the agent's status, or what broke, otherwise.
    pub async fn message(&mut self) -> Result<Option<AgentMessage>, Status> {
        loop {
            if let Some(m) = self.next_in_hand()? {
                return Ok(Some(m));
            }
            if self.ended {
                return Ok(None);
            }
            match self.recv.data().await {
                Some(Ok(chunk)) => {
                    // Its room in the flow-control window goes back to the
                    // agent as it is read, as hyper's client does. Fails
                    // only on a stream already gone, which the next read says.
                    let _ = self.recv.flow_control().release_capacity(chunk.len());
                    if self.cut.is_empty() {
                        self.chunk = chunk;
                    } else {
                        self.cut.extend_from_slice(&chunk);
                    }
                }
                Some(Err(e)) => return Err(broken(e)),
                None => return self.end().await,
            }
        }
    }

    /// A whole message from what has arrived, if there is one.
    fn next_in_hand(&mut self) -> Result<Option<AgentMessage>, Status> {
        if !self.cut.is_empty() {
            let Some(body) = whole(&mut self.cut)? else {
                return Ok(None);
            };
            let m = decode(body);
            if self.cut.is_empty() {
                // Let the room go: a message cut in two is rare (a large
                // history batch), and the stream lasts for the session.
                self.cut = BytesMut::new();
            }
            return m.map(Some);
        }
        if self.chunk.is_empty() {
            return Ok(None);
        }
        let mut chunk = std::mem::take(&mut self.chunk);
        match whole(&mut chunk)? {
            Some(body) => {
                self.chunk = chunk;
                decode(body).map(Some)
            }
            None => {
                // The rest of this message comes in later chunks.
                self.cut.extend_from_slice(&chunk);
                Ok(None)
            }
        }
    }

    /// The stream's end: the status in the agent's trailers.
    async fn end(&mut self) -> Result<Option<AgentMessage>, Status> {
        self.ended = true;
        if !self.cut.is_empty() || !self.chunk.is_empty() {
            return Err(Status::internal("the agent's stream ended inside a message"));
        }
        let trailers = self.recv.trailers().await.map_err(broken)?;
        match trailers.as_ref().and_then(Status::from_header_map) {
            Some(status) if status.code() == Code::Ok => Ok(None),
            Some(status) => Err(status),
            None => Err(Status::internal("the agent's stream ended without a gRPC status")),
        }
    }
}

/// Takes one message's bytes off the front of `buf` when all of them are
/// there (`None`, and `buf` untouched, when not yet).
fn whole<B: Buf + AsRef<[u8]>>(buf: &mut B) -> Result<Option<Bytes>, Status> {
    let b = buf.as_ref();
    if b.len() < HEADER_BYTES {
        return Ok(None);
    }
    if b[0] != 0 {
        return Err(Status::internal(
            "the agent sent a compressed message, and the console asked for none",
        ));
    }
    let len = u32::from_be_bytes([b[1], b[2], b[3], b[4]]) as usize;
    if len > MAX_MESSAGE_BYTES {
        return Err(Status::out_of_range(format!(
            "the agent sent a message of {len} bytes; the console takes {MAX_MESSAGE_BYTES} at most"
        )));
    }
    if b.len() < HEADER_BYTES + len {
        return Ok(None);
    }
    buf.advance(HEADER_BYTES);
    Ok(Some(buf.copy_to_bytes(len)))
}

fn decode(body: Bytes) -> Result<AgentMessage, Status> {
    AgentMessage::decode(body)
        .map_err(|e| Status::internal(format!("the agent sent a message that does not decode: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_one_uncompressed_message_after_its_length() {
        let req = SubscribeRequest {
            backfill_s: 300,
            columns: true,
            ..Default::default()
        };
        let frame = grpc_frame(&req);
        let message = req.encode_to_vec();
        assert_eq!(frame[0], 0, "not compressed");
        assert_eq!(
            u32::from_be_bytes([frame[1], frame[2], frame[3], frame[4]]) as usize,
            message.len()
        );
        assert_eq!(SubscribeRequest::decode(&frame[5..]).expect("decodes"), req);
    }
}
