//! Subscribe: the node's description, then its history from the ring,
//! then live samples, each encoded against the one sent before it. Apart
//! from the other calls: the one stream every console holds open.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use prost::Message;
use tokio::sync::{broadcast, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use super::{AgentService, Shared};
use crate::keep::ring::Backlog;
use crate::proto::agent_message::Kind;
use crate::proto::{AgentMessage, Sample, SubscribeRequest};

/// Counts a subscriber for as long as its producer task runs.
struct SubscriberSlot(Arc<Shared>);

impl Drop for SubscriberSlot {
    fn drop(&mut self) {
        self.0.subscribers.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The most bytes of encoded samples in one History message (unless one
/// sample is larger): a few samples of a big node. A console's stream keeps
/// a read buffer the size of the largest message it was sent for as long
/// as the stream lasts, 10,000 of them in a large console; 4 KiB is about
/// the size of the node's description, which every stream starts with.
const HISTORY_BATCH_BYTES: usize = 4 * 1024;

fn history(batch: &mut crate::proto::History) -> AgentMessage {
    AgentMessage {
        kind: Some(Kind::History(std::mem::take(batch))),
    }
}

/// Sends `backlog` as History messages; the number of samples sent, or
/// `None` when the subscriber went (or an entry could not be read).
async fn send_history_batches<F, Fut>(backlog: &Backlog, send: &F) -> Option<u64>
where
    F: Fn(AgentMessage) -> Fut,
    Fut: std::future::Future<Output = Result<(), mpsc::error::SendError<Result<AgentMessage, Status>>>>,
{
    let mut sent = 0u64;
    let mut batch = crate::proto::History::default();
    let mut bytes = 0;
    for e in backlog.encoded() {
        let e = match e {
            Ok(e) => e,
            Err(e) => {
                tracing::error!("history entry unreadable: {e}");
                return None;
            }
        };
        if !batch.samples.is_empty() && bytes + e.len() > HISTORY_BATCH_BYTES {
            sent += batch.samples.len() as u64;
            send(history(&mut batch)).await.ok()?;
            bytes = 0;
        }
        bytes += e.len();
        batch.samples.push(e.to_vec());
    }
    if !batch.samples.is_empty() {
        sent += batch.samples.len() as u64;
        send(history(&mut batch)).await.ok()?;
    }
    Some(sent)
}

/// Sends `backlog` one Sample message a sample (to a subscriber that did
/// not ask for batches); the number sent, or `None` as above.
async fn send_history_samples<F, Fut>(backlog: &Backlog, send: &F) -> Option<u64>
where
    F: Fn(AgentMessage) -> Fut,
    Fut: std::future::Future<Output = Result<(), mpsc::error::SendError<Result<AgentMessage, Status>>>>,
{
    let mut sent = 0u64;
    for s in backlog.samples() {
        let s = match s {
            Ok(s) => s,
            Err(e) => {
                tracing::error!("history entry unreadable: {e}");
                return None;
            }
        };
        send(AgentMessage {
            kind: Some(Kind::Sample(s)),
        })
        .await
        .ok()?;
        sent += 1;
    }
    Some(sent)
}

/// What reaches a live stream next.
enum Live {
    Sample(Result<Arc<Sample>, broadcast::error::RecvError>),
    BurnIn(Box<crate::proto::BurnInRecord>),
}

impl AgentService {
    pub(super) async fn subscribe_stream(
        &self,
        req: Request<SubscribeRequest>,
    ) -> Result<Response<ReceiverStream<Result<AgentMessage, Status>>>, Status> {
        self.authorize_telemetry(&req)?;
        let max = self.shared.max_subscribers as u64;
        if self
            .shared
            .subscribers
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| (n < max).then_some(n + 1))
            .is_err()
        {
            return Err(Status::resource_exhausted(format!(
                "this agent already serves {max} subscribers (its --max-subscribers); try again later"
            )));
        }
        let slot = SubscriberSlot(self.shared.clone());
        let stream = self.shared.connections.stream(req.remote_addr());
        let req = req.into_inner();
        let mut ready = self.shared.ready.clone();
        let since = if req.no_backfill {
            None
        } else if req.backfill_s == 0 {
            Some(i64::MIN)
        } else {
            Some(self.shared.now_ms() - i64::from(req.backfill_s) * 1000)
        };
        let batches = req.history_batches;
        let columns = req.columns;
        let known_instance = req.known_instance;
        let mut info = self.shared.info.clone();
        info.agent_time_ms = self.shared.now_ms();
        if let Some(j) = &self.shared.fault_journal {
            info.fault_journal = j.read().unwrap_or_else(|e| e.into_inner()).clone();
        }
        // Taken with the journal's lock held, so a burn-in recorded now is
        // in the description or on this receiver (or both: a console keeps
        // a record once).
        let mut burn_live = {
            let b = self.shared.burn_ins.lock().unwrap_or_else(|e| e.into_inner());
            info.burn_ins = b.records().to_vec();
            self.shared.burn_in_live.subscribe()
        };
        let shared = self.shared.clone();
        let mut stop = self.stop.clone();
        // Small: a subscriber that stops reading holds at most this many
        // messages here (the live ones are skipped on the broadcast instead).
        let (tx, rx) = mpsc::channel(8);
        tokio::spawn(async move {
            let _slot = (slot, stream);
            let send = |msg: AgentMessage| {
                shared.bytes_sent.fetch_add(msg.encoded_len() as u64, Ordering::Relaxed);
                tx.send(Ok(msg))
            };
            // Each sample goes out encoded against the previous one sent on
            // this stream (see `wire`); a lagging subscriber's skipped
            // samples are then simply not in its chain. The backlog is held
            // in that form already (see `ring`): it goes out as it is.
            let known = known_instance != 0 && known_instance == info.agent_instance;
            if !known
                && send(AgentMessage {
                    kind: Some(Kind::Info(info)),
                })
                .await
                .is_err()
            {
                return;
            }
            // All of the invented history, not the part made so far. The
            // description is out already: the subscriber knows the agent
            // answers (a thousand agents of a demo make theirs in turn).
            tokio::select! {
                r = ready.wait_for(|r| *r) => if r.is_err() { return },
                _ = stop.wait_for(|s| *s) => return,
            }
            let (backlog, mut live) = shared.subscribe(since);
            let mut sent = 0u64;
            let mut last_sent: Option<Arc<Sample>> = None;
            if let Some(backlog) = backlog {
                let sent_all = if batches {
                    send_history_batches(&backlog, &send).await
                } else {
                    send_history_samples(&backlog, &send).await
                };
                match sent_all {
                    Some(n) => sent = n,
                    None => return,
                }
                last_sent = backlog.last;
            }
            // The last sample sent live that carried NVLink counters: the
            // base of the next ones in a column delta.
            let mut last_links: Option<Arc<Sample>> = None;
            let mut wrap = |s: &Arc<Sample>| {
                let delta = match columns {
                    true => crate::wire::encode_columns(last_sent.as_deref(), last_links.as_deref(), s),
                    false => crate::wire::encode(last_sent.as_deref(), s),
                };
                let msg = AgentMessage {
                    kind: Some(Kind::Sample(delta)),
                };
                if crate::wire::columns::carries_links(s) {
                    last_links = Some(s.clone());
                }
                last_sent = Some(s.clone());
                msg
            };
            if send(AgentMessage {
                kind: Some(Kind::CaughtUp(sent)),
            })
            .await
            .is_err()
            {
                return;
            }
            loop {
                let next = tokio::select! {
                    r = live.recv() => Live::Sample(r),
                    b = burn_live.recv() => match b {
                        Ok(b) => Live::BurnIn(Box::new(b)),
                        Err(_) => continue,
                    },
                    _ = stop.wait_for(|s| *s) => return,
                };
                let next = match next {
                    Live::Sample(r) => r,
                    // A burn-in recorded on this node: every console sees it now.
                    Live::BurnIn(b) => {
                        if send(AgentMessage {
                            kind: Some(Kind::BurnIn(*b)),
                        })
                        .await
                        .is_err()
                        {
                            return;
                        }
                        continue;
                    }
                };
                match next {
                    Ok(s) => {
                        let msg = wrap(&s);
                        if send(msg).await.is_err() {
                            return; // the subscriber is gone
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        tracing::debug!("slow subscriber skipped {n} samples");
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}
