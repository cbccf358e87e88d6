//! The sample stream's connection: h2, with tonic's stream decoder reading
//! what arrives, and nothing between the two.
//!
//! A console holds one of these a node for the whole session and sends one
//! request on it. hyper's client, which the control calls use (`conn`),
//! puts a request queue in front of h2 (a block of 32 slots allocated
//! whole when the connection opens: 8 KiB) and runs a task of its own
//! beside the connection's: about 10 KiB a node that a console of 10,240
//! agents paid for a queue that never held a second request (heaptrack,
//! docs/PERFORMANCE.md). Here the request is written as gRPC frames it (one
//! message, after a flag byte and its length), and the answer is read by
//! tonic's own `Streaming`, status and trailers included, as before.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use fleetop_proto::input::error_line;
use fleetop_proto::pb::{AgentMessage, SubscribeRequest};
use hyper::body::{Body, Frame};
use prost::Message;
use tonic::codegen::{Bytes, http};
use tonic::{Code, Status};

use crate::ingest::conn::{self, KEEPALIVE_INTERVAL, KEEPALIVE_TIMEOUT, Tls};
use crate::model::target::Target;

const SUBSCRIBE: &str = "/fleetop.v1.Agent/Subscribe";

/// The largest message the console takes from an agent (a history batch,
/// a node description with its fault journal).
pub const MAX_MESSAGE_BYTES: usize = 64 << 20;

/// The flow-control windows hyper's client gave these streams (and still
/// gives the control calls): a node's history comes in a few round trips.
const STREAM_WINDOW: u32 = 2 << 20;
const CONNECTION_WINDOW: u32 = 5 << 20;

/// Where a stream's decode buffer starts: a busy 8-GPU node's column delta
/// is about 500 B, not tonic's 8 KiB. It grows to the largest message it
/// is handed and keeps that room for the stream's life.
const DECODE_START_BYTES: usize = 1024;
/// tonic's default; only an encoder reads it.
const YIELD_BYTES: usize = 32 << 10;

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
pub async fn open(target: &Target, tls: Option<&Tls>, token: Option<http::HeaderValue>) -> Result<StreamConn, String> {
    let scheme = if tls.is_some() { "https" } else { "http" };
    let uri = format!("{scheme}://{}{SUBSCRIBE}", target.address());
    let uri = uri.parse().map_err(|e| format!("bad address {uri}: {e}"))?;
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
            why = keepalive(pings) => why,
        };
        tracing::debug!("agent connection ended: {why}");
    });
    Ok(StreamConn { send, uri, token })
}

/// Pings the agent every `KEEPALIVE_INTERVAL` and returns when one goes
/// unanswered: why the connection is to be dropped.
async fn keepalive(pings: Option<h2::PingPong>) -> String {
    // h2 hands out its pinger once, on a connection that was just made.
    let Some(mut pings) = pings else {
        return std::future::pending().await;
    };
    loop {
        tokio::time::sleep(KEEPALIVE_INTERVAL).await;
        match tokio::time::timeout(KEEPALIVE_TIMEOUT, pings.ping(h2::Ping::opaque())).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return format!("keepalive ping failed: {}", error_line(&e)),
            Err(_) => return format!("no answer to a ping within {} s", KEEPALIVE_TIMEOUT.as_secs()),
        }
    }
}

impl StreamConn {
    /// Calls `Subscribe`: the agent's stream, or the status it refused
    /// with. Unbounded in time: the caller bounds it.
    pub async fn subscribe(&self, req: &SubscribeRequest) -> Result<tonic::Streaming<AgentMessage>, Status> {
        let broken = |e: h2::Error| Status::unavailable(format!("HTTP/2: {}", error_line(&e)));
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
        body.send_data(grpc_frame(req), true).map_err(broken)?;
        let response = response.await.map_err(broken)?;
        let decoder = tonic_prost::ProstDecoder::<AgentMessage>::new(tonic::codec::BufferSettings::new(
            DECODE_START_BYTES,
            YIELD_BYTES,
        ));
        let (head, recv) = response.into_parts();
        let body = RecvBody { recv, data_done: false };
        // As tonic's client does: a status among the headers is the whole
        // answer (an agent that refused the call says so there).
        Ok(match Status::from_header_map(&head.headers) {
            Some(status) if status.code() != Code::Ok => return Err(status),
            Some(_) => tonic::Streaming::new_empty(decoder, body),
            None => tonic::Streaming::new_response(decoder, body, head.status, None, Some(MAX_MESSAGE_BYTES)),
        })
    }
}

/// One message as a gRPC request body carries it: not compressed, its
/// length (big-endian), the message.
fn grpc_frame(m: &impl Message) -> Bytes {
    let message = m.encode_to_vec();
    let mut frame = Vec::with_capacity(5 + message.len());
    frame.push(0);
    frame.extend_from_slice(&(message.len() as u32).to_be_bytes());
    frame.extend_from_slice(&message);
    frame.into()
}

/// A stream's received data and trailers as the body tonic's decoder
/// reads. Each chunk's room in the flow-control window goes back to the
/// agent as the chunk is read, as hyper's client does.
struct RecvBody {
    recv: h2::RecvStream,
    data_done: bool,
}

impl Body for RecvBody {
    type Data = Bytes;
    type Error = h2::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, h2::Error>>> {
        let this = &mut *self;
        if !this.data_done {
            match ready!(this.recv.poll_data(cx)) {
                Some(Ok(data)) => {
                    // Fails only on a stream already gone, which the next poll says.
                    let _ = this.recv.flow_control().release_capacity(data.len());
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                None => this.data_done = true,
            }
        }
        let trailers = ready!(this.recv.poll_trailers(cx));
        Poll::Ready(trailers.transpose().map(|t| t.map(Frame::trailers)))
    }
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
