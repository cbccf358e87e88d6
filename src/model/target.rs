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
    /// Given by its IP address rather than a name (`10.1.0.7`,
    /// `127.0.0.1:7001`): such a node takes the host name its agent reports.
    pub fn by_address(&self) -> bool {
        self.host.parse::<std::net::IpAddr>().is_ok() && (self.name == self.host || self.name == self.address())
    }

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
