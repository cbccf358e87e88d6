//! What a document says of a node that is not there yet.

use super::*;
use crate::detect::Thresholds;
use crate::model::flag::FlagKind;
use crate::model::sample::{NodeDesc, NodeSample};
use crate::model::target::Target;
use crate::model::update::{Event, Update};
use crate::store::Store;

fn store() -> Store {
    let target = Target {
        name: "n1".into(),
        host: "127.0.0.1".into(),
        port: 1,
    };
    Store::new(vec![target], Thresholds::default())
}

fn on(st: &mut Store, event: Event, now_ms: i64) {
    st.apply(Update::Node { node: 0, event }, now_ms);
}

fn node(st: &mut Store, now_ms: i64) -> Node {
    st.tick(now_ms);
    snapshot(st, now_ms).nodes.remove(0)
}

/// A node caught mid-backfill at the deadline (described, its history
/// still arriving, the newest sample so far minutes old) is `connecting`:
/// not `unreachable`, no alert dated minutes back, and it has not
/// answered for `export --once`. Once its history is in and a fresh
/// sample came, it has.
#[test]
fn a_node_still_reading_its_history_is_connecting_not_unreachable() {
    let th = Thresholds::default();
    let now = 1_000_000;
    let mut st = store();
    let desc = NodeDesc {
        interval_ms: 1000,
        ..Default::default()
    };
    on(&mut st, Event::Info(Box::new(desc)), now);
    let old = NodeSample {
        time_ms: now - 8 * 60_000,
        ..Default::default()
    };
    on(&mut st, Event::Sample(Box::new(old)), now);
    let n = node(&mut st, now);
    assert_eq!(n.status, Status::Connecting);
    assert_eq!(n.status_detail.as_deref(), Some("reading its history"));
    assert_eq!(n.health, Health::Unknown, "nothing judged yet");
    assert!(n.flags.iter().all(|f| f.kind != FlagKind::Unreachable), "{:?}", n.flags);
    assert!(!answered(&st.nodes[0], now, &th), "not finished");

    on(&mut st, Event::CaughtUp, now);
    let fresh = NodeSample {
        seq: 1,
        time_ms: now,
        ..Default::default()
    };
    on(&mut st, Event::Sample(Box::new(fresh)), now);
    let n = node(&mut st, now);
    assert_eq!((n.status, n.health), (Status::Ok, Health::Ok));
    assert!(answered(&st.nodes[0], now, &th));
}

/// A node whose agent has not answered yet is `connecting` too; one whose
/// attempt failed is `unreachable` at once, with why and its alert, since
/// a document is read once.
#[test]
fn no_answer_yet_is_connecting_and_a_failed_attempt_is_unreachable() {
    let th = Thresholds::default();
    let mut st = store();
    let n = node(&mut st, 1000);
    assert_eq!(n.status, Status::Connecting);
    assert_eq!(n.status_detail.as_deref(), Some("no answer yet"));
    assert!(n.flags.is_empty(), "{:?}", n.flags);
    assert!(!answered(&st.nodes[0], 1000, &th));

    on(&mut st, Event::Down("connection refused".into()), 1000);
    let n = node(&mut st, 2000);
    assert_eq!(n.status, Status::Unreachable);
    assert_eq!(n.status_detail.as_deref(), Some("connection refused"));
    let f = n
        .flags
        .iter()
        .find(|f| f.kind == FlagKind::Unreachable)
        .expect("its alert");
    assert_eq!(f.since, crate::model::time::rfc3339(1000));
}
