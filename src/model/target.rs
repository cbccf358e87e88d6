//! A node the console talks to: its name (as people and the scheduler call
//! it) and the address of its agent.

/// One node to connect to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Target {
    pub name: String,
    pub host: String,
    pub port: u16,
}

impl Target {
    /// `host:port`, with IPv6 hosts bracketed (`[::1]:50051`) so the port stays unambiguous.
    pub fn address(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// The agents' port where a host gives none: one constant, for every SOURCE.
pub const DEFAULT_AGENT_PORT: u16 = 50051;
