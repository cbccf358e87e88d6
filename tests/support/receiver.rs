//! A webhook receiver for tests: a small HTTP/1.1 server on loopback that
//! keeps every JSON body POSTed to it (Alertmanager's notifications,
//! fleetop's webhook events) and answers 200.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A webhook receiver: keeps every JSON body POSTed to it.
pub struct Receiver {
    pub port: u16,
    got: Arc<Mutex<Vec<Value>>>,
}

impl Receiver {
    /// On a free loopback port.
    pub fn start() -> Receiver {
        Self::on(TcpListener::bind("127.0.0.1:0").expect("bind receiver"))
    }

    /// On `listener`: one a test bound before the receiver was up (a
    /// `RefusedPort` made to listen), so that no one else takes the port.
    pub fn on(listener: TcpListener) -> Receiver {
        let port = listener.local_addr().expect("addr").port();
        let got = Arc::new(Mutex::new(Vec::new()));
        let store = got.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let store = store.clone();
                std::thread::spawn(move || serve(conn, &store));
            }
        });
        Receiver { port, got }
    }

    pub fn all(&self) -> Vec<Value> {
        self.got.lock().expect("lock").clone()
    }

    /// Waits (at most `within`, a deadline for something to happen, not a
    /// measure of speed) until some notification satisfies `want`.
    pub fn wait(&self, what: &str, within: Duration, want: impl Fn(&Value) -> bool) -> Value {
        let end = Instant::now() + within;
        loop {
            if let Some(v) = self.all().into_iter().find(|v| want(v)) {
                return v;
            }
            assert!(
                Instant::now() < end,
                "no notification {what} within {within:?}; got: {:#?}",
                self.all()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// One HTTP/1.1 request per connection: read it, keep the JSON body, answer 200.
fn serve(conn: TcpStream, store: &Mutex<Vec<Value>>) {
    let mut reader = BufReader::new(conn);
    loop {
        let mut length = 0usize;
        let mut line = String::new();
        // Request line, then headers up to the blank line.
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        loop {
            line.clear();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        if let Ok(v) = serde_json::from_slice(&body) {
            store.lock().expect("lock").push(v);
        }
        let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
        if reader.get_mut().write_all(ok).is_err() {
            return;
        }
    }
}
