//! Acknowledged and silenced alerts, kept in the state dir next to the audit
//! log (`silences.json`) so they outlive the console, and logged to the
//! audit log like any action: who hid what, and until when.

use std::path::PathBuf;

use crate::model::action::{NodeAction, NodeResult, Plan, Stage};
use crate::model::flag::Silence;
use crate::model::time::now_ms;
use crate::ops::audit;

/// `silences.json` beside the audit log.
pub fn path() -> PathBuf {
    audit::audit_path().with_file_name("silences.json")
}

/// The silences still live; a missing file is none, a damaged one is none
/// too (logged): a bad file must not keep the console from starting.
pub fn load() -> Vec<Silence> {
    load_from(&path(), now_ms())
}

fn load_from(p: &std::path::Path, now: i64) -> Vec<Silence> {
    let text = match crate::ops::state_file::read(p, fleetop_proto::input::MAX_FILE_BYTES) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            tracing::warn!("{}: {e}; no silences loaded", p.display());
            return Vec::new();
        }
    };
    match serde_json::from_str::<Vec<Silence>>(&text) {
        Ok(v) => v.into_iter().filter(|s| s.live(now)).collect(),
        Err(e) => {
            tracing::warn!("{}: {e}; no silences loaded", p.display());
            Vec::new()
        }
    }
}

/// Saves the live ones (written whole to a temporary file, then renamed:
/// never half a file) and logs `made` to the audit log.
pub fn save(all: &[Silence], made: &Silence) -> anyhow::Result<()> {
    // Who, from the password database (as the audit log has it), never
    // from $USER, which may be unset or anything.
    let who = audit::actor().display();
    let signed = |s: &Silence| Silence {
        by: if s.by.is_empty() { who.clone() } else { s.by.clone() },
        ..s.clone()
    };
    let all: Vec<Silence> = all.iter().map(signed).collect();
    let made = &signed(made);
    store(&path(), &all, now_ms())?;
    let what = match (&made.ack, made.until_ms) {
        (Some((subject, _)), _) => format!("acknowledged {} on {subject}", made.kind.name()),
        (None, Some(until)) => format!(
            "silenced {} for {} min",
            made.kind.name(),
            (until - made.at_ms).max(0) / 60_000
        ),
        (None, None) => format!("silence of {} lifted", made.kind.name()),
    };
    let plan = Plan::new(
        NodeAction::Silence,
        vec![made.node.clone()],
        Some(what.clone()),
        Vec::new(),
    );
    let result = NodeResult {
        node: made.node.clone(),
        ok: true,
        message: what,
        state_before: None,
        state_after: None,
    };
    audit::log(&audit::report(&plan, Stage::Done, None, vec![result]))?;
    Ok(())
}

fn store(p: &std::path::Path, all: &[Silence], now: i64) -> anyhow::Result<()> {
    let live: Vec<&Silence> = all.iter().filter(|s| s.live(now)).collect();
    super::state_file::replace(p, &serde_json::to_vec_pretty(&live)?)
        .map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::flag::FlagKind;

    #[test]
    fn silences_outlive_the_console_until_they_end_and_bad_files_load_as_none() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("state").join("silences.json");
        let s = |until_ms: Option<i64>, ack: bool| Silence {
            node: "gpu01".into(),
            kind: FlagKind::Xid,
            ack: ack.then(|| ("gpu3".into(), 500)),
            until_ms,
            by: "sre".into(),
            at_ms: 1_000,
        };
        let all = vec![s(Some(3_601_000), false), s(Some(2_000), false), s(None, true)];
        store(&p, &all, 1_500).expect("saved");
        // Read back later: the silence over by then is gone, the rest stay.
        let back = load_from(&p, 3_000);
        assert_eq!(back, vec![all[0].clone(), all[2].clone()]);
        assert!(load_from(&p, 3_601_000).iter().all(|x| x.ack.is_some()));
        std::fs::write(&p, "{not json").expect("write");
        assert!(load_from(&p, 0).is_empty());
        assert!(load_from(&dir.path().join("none.json"), 0).is_empty());
    }
}
