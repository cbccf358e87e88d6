use super::*;

#[test]
fn wrong_tokens_past_a_short_burst_make_the_peer_wait() {
    let f = FailedTokens::default();
    let addr: IpAddr = "127.0.0.1".parse().expect("ip");
    let ip = Some(addr);
    assert!(f.check(ip).is_ok());
    for _ in 0..FAILURE_BURST as usize {
        assert!(f.check(ip).is_ok(), "within the burst");
        f.failed(ip, "telemetry");
    }
    let e = f.check(ip).expect_err("past the burst");
    assert_eq!(e.code(), tonic::Code::ResourceExhausted);
    assert!(e.message().contains("too many wrong tokens"), "{}", e.message());
    // Another peer is not affected.
    assert!(f.check(Some("127.0.0.2".parse().expect("ip"))).is_ok());
    // The allowance comes back with time: a failure a second, sustained.
    f.peers.lock().expect("lock").get_mut(&addr).expect("peer").last -= FAILURE_EVERY;
    assert!(f.check(ip).is_ok());
    f.failed(ip, "telemetry");
    assert!(f.check(ip).is_err());
}

#[test]
fn failures_are_logged_at_most_once_a_second_per_peer_and_the_table_is_bounded() {
    let f = FailedTokens::default();
    let addr: IpAddr = "10.0.0.1".parse().expect("ip");
    for _ in 0..10 {
        f.failed(Some(addr), "bench");
    }
    // One line for the first; the nine since wait for the next second.
    assert_eq!(f.peers.lock().expect("lock")[&addr].unlogged, 9);
    for i in 0..(MAX_PEERS as u32 + 1000) {
        f.failed(Some(IpAddr::from(std::net::Ipv4Addr::from(0x0b00_0000 + i))), "bench");
    }
    assert!(f.peers.lock().expect("lock").len() <= MAX_PEERS);
}

fn addr(ip: &str, port: u16) -> SocketAddr {
    SocketAddr::new(ip.parse().expect("ip"), port)
}

#[test]
fn a_full_agent_closes_the_oldest_unauthenticated_connection_never_an_authenticated_one() {
    let limits = Limits {
        max_connections: 4,
        max_connections_per_peer: 3,
        ..Limits::default()
    };
    let c = Connections::default();
    let mut kept = Vec::new();
    // A console on its own address, authenticated; and hogs.
    kept.push(c.admit(addr("10.0.0.1", 1), &limits).expect("room"));
    c.authenticated(Some(addr("10.0.0.1", 1)));
    for port in 1..=3 {
        kept.push(c.admit(addr("10.0.0.2", port), &limits).expect("room"));
    }
    assert_eq!(c.open(), 4);
    // Full: a new one from a third address replaces the oldest hog of
    // the address that holds the most, and the hog's connection is told.
    let a = c.admit(addr("10.0.0.3", 1), &limits).expect("room made");
    assert_eq!(a.replaced, Some((addr("10.0.0.2", 1), Refused::Full)));
    assert!(
        kept[1]
            .evict
            .try_recv()
            .is_err_and(|e| e == oneshot::error::TryRecvError::Closed)
    );
    assert!(
        kept[2]
            .evict
            .try_recv()
            .is_err_and(|e| e == oneshot::error::TryRecvError::Empty)
    );
    assert_eq!((c.open(), c.evicted()), (4, 1));
    kept.push(a);
    // A console alone on its address is the last to go, even when it is
    // the newest: here 10.0.0.2 still holds two.
    let a = c.admit(addr("10.0.0.4", 1), &limits).expect("room made");
    assert_eq!(a.replaced, Some((addr("10.0.0.2", 2), Refused::Full)));
    kept.push(a);
    // Authenticated, every one: a new connection is refused, none closed.
    for p in [addr("10.0.0.2", 3), addr("10.0.0.3", 1), addr("10.0.0.4", 1)] {
        c.authenticated(Some(p));
    }
    assert_eq!(c.admit(addr("10.0.0.5", 1), &limits).err(), Some(Refused::Full));
    assert_eq!((c.open(), c.evicted()), (4, 2));
    assert!(
        kept[0]
            .evict
            .try_recv()
            .is_err_and(|e| e == oneshot::error::TryRecvError::Empty)
    );
}

#[test]
fn one_address_past_its_cap_replaces_its_own_oldest_unauthenticated_connection() {
    let limits = Limits {
        max_connections: 100,
        max_connections_per_peer: 3,
        ..Limits::default()
    };
    let c = Connections::default();
    let mut kept = Vec::new();
    for port in 1..=3 {
        kept.push(c.admit(addr("10.0.0.2", port), &limits).expect("room"));
    }
    // The first authenticated: the second is the oldest that may go.
    c.authenticated(Some(addr("10.0.0.2", 1)));
    let a = c.admit(addr("10.0.0.2", 4), &limits).expect("room made");
    assert_eq!(a.replaced, Some((addr("10.0.0.2", 2), Refused::PerPeer)));
    kept.push(a);
    // Another address is not touched by this one's cap.
    assert!(c.admit(addr("10.0.0.3", 1), &limits).expect("room").replaced.is_none());
    // Every connection of the address authenticated: refused.
    c.authenticated(Some(addr("10.0.0.2", 3)));
    c.authenticated(Some(addr("10.0.0.2", 4)));
    assert_eq!(c.admit(addr("10.0.0.2", 5), &limits).err(), Some(Refused::PerPeer));
    assert_eq!(c.open(), 4);
}

#[test]
fn tokens_compare_by_content_and_length() {
    assert!(same_token("abc", "abc"));
    assert!(!same_token("abc", "abd"));
    assert!(!same_token("abc", "ab"));
    assert!(!same_token("abc", ""));
}
