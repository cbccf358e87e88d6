//! How the agent is reached: the gRPC service (`server`), its connections
//! and their limits (`net`), TLS (`tls`), the signals a console may send a
//! GPU process (`signal`) and the Prometheus endpoint (`metrics`).

pub mod metrics;
pub mod net;
pub mod server;
pub mod signal;
pub mod tls;
