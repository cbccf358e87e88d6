//! TCP bandwidth between two agents: the sender opens several streams to a
//! peer's sink and pushes data for a while. Several streams, because one TCP
//! stream rarely fills a 100-400 Gb/s link. Works on any fabric (IPoIB or
//! Ethernet), with no InfiniBand tools installed.

use std::io::Write;
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Sends to `target` over `streams` connections for `duration`; returns Gb/s.
pub fn send(target: &str, streams: usize, duration: Duration, stop: &AtomicBool) -> Result<f64, String> {
    let addr = target
        .to_socket_addrs()
        .map_err(|e| format!("bad peer address {target}: {e}"))?
        .next()
        .ok_or_else(|| format!("peer address {target} resolves to nothing"))?;
    let sent = AtomicU64::new(0);
    let start = Instant::now();
    let deadline = start + duration;
    let errors: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..streams.max(1))
            .map(|_| {
                s.spawn(|| -> Result<(), String> {
                    let mut c = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
                        .map_err(|e| format!("cannot connect to the peer's sink {addr}: {e}"))?;
                    let _ = c.set_nodelay(true);
                    let buf = vec![0x5au8; 1 << 20];
                    while Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
                        c.write_all(&buf).map_err(|e| format!("sending to {addr}: {e}"))?;
                        sent.fetch_add(buf.len() as u64, Ordering::Relaxed);
                    }
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|h| h.join().unwrap_or(Err("sender thread panicked".into())).err())
            .collect()
    });
    if let Some(e) = errors.first() {
        return Err(e.clone());
    }
    if stop.load(Ordering::Relaxed) {
        return Err("cancelled".into());
    }
    let secs = start.elapsed().as_secs_f64();
    Ok(sent.load(Ordering::Relaxed) as f64 * 8.0 / secs / 1e9)
}

/// A sink: accepts connections on `listener` and discards what arrives,
/// counting it, until `stop`.
pub fn sink(listener: TcpListener, received: Arc<AtomicU64>, stop: Arc<AtomicBool>) {
    let _ = listener.set_nonblocking(true);
    std::thread::scope(|s| {
        while !stop.load(Ordering::Relaxed) {
            match listener.accept() {
                Ok((mut c, _)) => {
                    let (received, stop) = (received.clone(), stop.clone());
                    s.spawn(move || {
                        let _ = c.set_read_timeout(Some(Duration::from_millis(200)));
                        let mut buf = vec![0u8; 1 << 20];
                        while !stop.load(Ordering::Relaxed) {
                            match std::io::Read::read(&mut c, &mut buf) {
                                Ok(0) => return,
                                Ok(n) => {
                                    received.fetch_add(n as u64, Ordering::Relaxed);
                                }
                                Err(e)
                                    if matches!(
                                        e.kind(),
                                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                                    ) => {}
                                Err(_) => return,
                            }
                        }
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(20)),
                Err(_) => return,
            }
        }
    });
}

/// The average bandwidth in Gb/s from `ib_write_bw --report_gbits` output:
/// the row under the header that names "BW average".
pub fn parse_ib_write_bw(out: &str) -> Option<f64> {
    let mut lines = out.lines().map(str::trim);
    let header = lines.find(|l| l.contains("BW average"))?;
    // Column names, with "BW peak[..]" and "BW average[..]" as one name each.
    let words: Vec<&str> = header.split_whitespace().collect();
    let mut names = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let two = words[i] == "BW" && i + 1 < words.len();
        names.push(if two {
            format!("BW {}", words[i + 1])
        } else {
            words[i].to_string()
        });
        i += if two { 2 } else { 1 };
    }
    let col = names.iter().position(|n| n.starts_with("BW average"))?;
    let row = lines.find(|l| l.split_whitespace().next().is_some_and(|w| w.parse::<u64>().is_ok()))?;
    row.split_whitespace().nth(col)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sends_to_a_sink_on_loopback() {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr").to_string();
        let received = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let sink_thread = {
            let (r, s) = (received.clone(), stop.clone());
            std::thread::spawn(move || sink(l, r, s))
        };
        let gbps = send(&addr, 2, Duration::from_millis(300), &AtomicBool::new(false)).expect("sends");
        assert!(gbps > 0.01, "{gbps} Gb/s");
        std::thread::sleep(Duration::from_millis(100));
        stop.store(true, Ordering::Relaxed);
        sink_thread.join().expect("sink ends");
        assert!(received.load(Ordering::Relaxed) > 0);
        assert!(send("127.0.0.1:1", 1, Duration::from_millis(100), &AtomicBool::new(false)).is_err());
    }

    #[test]
    fn parses_perftest_output() {
        let out = "\
---------------------------------------------------------------------------------------
                    RDMA_Write BW Test
 Dual-port       : OFF          Device         : mlx5_0
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
 65536      5000             390.12             389.87               0.743624
---------------------------------------------------------------------------------------
";
        assert_eq!(parse_ib_write_bw(out), Some(389.87));
        assert_eq!(parse_ib_write_bw("garbage"), None);
    }
}
