//! Per-stream delta encoding of samples, to keep the wire small.
//!
//! Counters are big numbers that change by small amounts: sent as they are,
//! a busy GPU's 36 NVLink counters alone cost ~200 bytes a second. On a
//! stream, each sample after the first is encoded against the previous one
//! sent on that same stream: counters become wrapping differences (exact
//! whatever the counter does, resets included) and unchanged IB state words
//! become empty. The console decodes before anything else sees the sample,
//! so counters still arrive as counters and rates are still derived from two
//! known samples.

use crate::pb::{GpuSample, IbSample, Sample};

pub mod columns;

pub use columns::encode as encode_columns;

/// Why a delta could not be made whole: the stream must start again.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BadDelta {
    #[error("sample {seq} is encoded against sample {base}, but the last one received was {have}")]
    OutOfSequence { seq: u64, base: u64, have: u64 },
    #[error("sample {seq} is not a delta of its base: {what}")]
    Malformed { seq: u64, what: &'static str },
}

/// In a delta, a rarely changing field equal to the base's travels as its
/// default (zero, empty): the decoder puts the base's value back. A field
/// whose new value really is the default, where the base's was not, cannot
/// be said that way, and the sample then travels whole.
fn can_elide<T: Default + PartialEq>(prev: &T, cur: &T) -> bool {
    *cur != T::default() || *prev == T::default()
}

fn elide<T: Default + PartialEq>(cur: &mut T, prev: &T) {
    if cur == prev {
        *cur = T::default();
    }
}

/// The base's value moved, not copied, into a field that travelled as its
/// default: the base is replaced by the decoded sample, and copying its
/// lists (processes, pods, error counters) every second was a tenth of a
/// large console's CPU.
fn restore<T: Default + PartialEq>(cur: &mut T, prev: &mut T) {
    if *cur == T::default() {
        std::mem::swap(cur, prev);
    }
}

/// A pid whose owner and command became unknown cannot say so in a delta
/// (empty there means "as before"): such a sample travels whole.
fn owners_can_elide(prev: &[crate::pb::GpuProcess], cur: &[crate::pb::GpuProcess]) -> bool {
    cur.iter().all(|q| {
        !(q.user.is_empty() && q.command.is_empty())
            || prev
                .iter()
                .find(|w| w.pid == q.pid)
                .is_none_or(|w| w.user.is_empty() && w.command.is_empty())
    })
}

fn same_shape(prev: &Sample, cur: &Sample) -> bool {
    prev.gpus.len() == cur.gpus.len()
        && prev.ib_ports.len() == cur.ib_ports.len()
        && prev.gpus.iter().zip(&cur.gpus).all(|(a, b)| {
            a.index == b.index
                && can_elide(&a.mem_used_bytes, &b.mem_used_bytes)
                && can_elide(&a.power_limit_mw, &b.power_limit_mw)
                && can_elide(&a.mem_clock_mhz, &b.mem_clock_mhz)
                && can_elide(&a.pcie_gen, &b.pcie_gen)
                && can_elide(&a.pcie_width, &b.pcie_width)
                && can_elide(&a.fabric_state, &b.fabric_state)
                && can_elide(&a.fabric_status, &b.fabric_status)
                && can_elide(&a.persistence, &b.persistence)
                && can_elide(&a.pods, &b.pods)
                && can_elide(&a.ras, &b.ras)
                && can_elide(&a.xgmi_error_status, &b.xgmi_error_status)
                && can_elide(&a.throttle_detail, &b.throttle_detail)
                && can_elide(&a.xcc_gfx_busy_pct, &b.xcc_gfx_busy_pct)
                && owners_can_elide(&a.processes, &b.processes)
        })
        && prev.ib_ports.iter().zip(&cur.ib_ports).all(|(a, b)| {
            a.port == b.port
                && a.errors.len() == b.errors.len()
                && can_elide(&a.state, &b.state)
                && can_elide(&a.phys_state, &b.phys_state)
                && can_elide(&a.rate_gbps, &b.rate_gbps)
                && can_elide(&a.errors_present_mask, &b.errors_present_mask)
        })
}

/// Applies `op` to every counter of a GPU with its counterpart in `prev`.
/// NVLink counters are not among them: they travel in every n-th sample
/// only, so the previous sample usually has none to be a base.
fn gpu_counters(p: &GpuSample, c: &mut GpuSample, op: fn(u64, u64) -> u64) {
    c.energy_mj = op(c.energy_mj, p.energy_mj);
    c.pcie_replay_count = op(c.pcie_replay_count, p.pcie_replay_count);
    c.ecc_corrected_volatile = op(c.ecc_corrected_volatile, p.ecc_corrected_volatile);
    c.ecc_uncorrected_volatile = op(c.ecc_uncorrected_volatile, p.ecc_uncorrected_volatile);
}

fn port_counters(p: &IbSample, c: &mut IbSample, op: fn(u64, u64) -> u64) {
    c.tx_bytes = op(c.tx_bytes, p.tx_bytes);
    c.rx_bytes = op(c.rx_bytes, p.rx_bytes);
    c.tx_packets = op(c.tx_packets, p.tx_packets);
    c.rx_packets = op(c.rx_packets, p.rx_packets);
    if !c.errors.is_empty() {
        for (x, y) in c.errors.iter_mut().zip(&p.errors) {
            *x = op(*x, *y);
        }
    }
}

/// A GPU of `cur` (`c`, a copy) as a delta against its base `p`.
fn encode_gpu(p: &GpuSample, c: &mut GpuSample) {
    gpu_counters(p, c, u64::wrapping_sub);
    elide(&mut c.mem_used_bytes, &p.mem_used_bytes);
    elide(&mut c.power_limit_mw, &p.power_limit_mw);
    elide(&mut c.mem_clock_mhz, &p.mem_clock_mhz);
    elide(&mut c.pcie_gen, &p.pcie_gen);
    elide(&mut c.pcie_width, &p.pcie_width);
    elide(&mut c.fabric_state, &p.fabric_state);
    elide(&mut c.fabric_status, &p.fabric_status);
    elide(&mut c.persistence, &p.persistence);
    elide(&mut c.pods, &p.pods);
    // AMD: per-block ECC counts, the XGMI error status and the throttle
    // words stand still for days; unchanged, they travel as nothing.
    elide(&mut c.ras, &p.ras);
    elide(&mut c.xgmi_error_status, &p.xgmi_error_status);
    elide(&mut c.throttle_detail, &p.throttle_detail);
    // Per-XCC busy: as in the base, nothing (an idle or steady GPU).
    elide(&mut c.xcc_gfx_busy_pct, &p.xcc_gfx_busy_pct);
    if !c.processes.is_empty() && c.processes == p.processes {
        c.processes.clear();
        c.processes_unchanged = true;
    } else {
        // A pid's owner and command were sent when it first appeared.
        for q in &mut c.processes {
            if let Some(was) = p.processes.iter().find(|w| w.pid == q.pid)
                && was.user == q.user
                && was.command == q.command
            {
                q.user.clear();
                q.command.clear();
            }
        }
    }
}

fn encode_port(p: &IbSample, c: &mut IbSample) {
    port_counters(p, c, u64::wrapping_sub);
    elide(&mut c.state, &p.state);
    elide(&mut c.phys_state, &p.phys_state);
    elide(&mut c.rate_gbps, &p.rate_gbps);
    elide(&mut c.errors_present_mask, &p.errors_present_mask);
    // Error counters mostly stand still: no increase at all travels as nothing.
    if c.errors.iter().all(|&d| d == 0) {
        c.errors.clear();
    }
}

/// A GPU of a delta (`c`) made whole again from its base `p`, whose
/// repeated fields are moved into it. True where its process list is the
/// base's, moved: the delta said it had not changed.
fn decode_gpu(p: &mut GpuSample, c: &mut GpuSample) -> bool {
    gpu_counters(p, c, u64::wrapping_add);
    restore(&mut c.mem_used_bytes, &mut p.mem_used_bytes);
    restore(&mut c.power_limit_mw, &mut p.power_limit_mw);
    restore(&mut c.mem_clock_mhz, &mut p.mem_clock_mhz);
    restore(&mut c.pcie_gen, &mut p.pcie_gen);
    restore(&mut c.pcie_width, &mut p.pcie_width);
    restore(&mut c.fabric_state, &mut p.fabric_state);
    restore(&mut c.fabric_status, &mut p.fabric_status);
    restore(&mut c.persistence, &mut p.persistence);
    restore(&mut c.pods, &mut p.pods);
    restore(&mut c.ras, &mut p.ras);
    restore(&mut c.xgmi_error_status, &mut p.xgmi_error_status);
    restore(&mut c.throttle_detail, &mut p.throttle_detail);
    restore(&mut c.xcc_gfx_busy_pct, &mut p.xcc_gfx_busy_pct);
    if std::mem::take(&mut c.processes_unchanged) {
        std::mem::swap(&mut c.processes, &mut p.processes);
        return true;
    }
    for q in &mut c.processes {
        if q.user.is_empty()
            && q.command.is_empty()
            && let Some(was) = p.processes.iter().find(|w| w.pid == q.pid)
        {
            q.user.clone_from(&was.user);
            q.command.clone_from(&was.command);
        }
    }
    false
}

fn decode_port(p: &mut IbSample, c: &mut IbSample) {
    port_counters(p, c, u64::wrapping_add);
    restore(&mut c.state, &mut p.state);
    restore(&mut c.phys_state, &mut p.phys_state);
    restore(&mut c.rate_gbps, &mut p.rate_gbps);
    restore(&mut c.errors_present_mask, &mut p.errors_present_mask);
    restore(&mut c.errors, &mut p.errors);
}

/// `cur` as sent after `prev` on the same stream: a delta when the two have
/// the same shape, the sample whole otherwise.
pub fn encode(prev: Option<&Sample>, cur: &Sample) -> Sample {
    let mut out = cur.clone();
    let Some(prev) = prev.filter(|p| same_shape(p, cur)) else {
        return out;
    };
    for (p, c) in prev.gpus.iter().zip(out.gpus.iter_mut()) {
        encode_gpu(p, c);
    }
    for (p, c) in prev.ib_ports.iter().zip(out.ib_ports.iter_mut()) {
        encode_port(p, c);
    }
    out.delta_from_seq = prev.seq;
    out
}

/// A stream's decoding state: the last whole sample, the base of the next
/// delta, and the NVLink counters of the last sample that carried them,
/// the base of the next ones in a column delta.
#[derive(Debug, Default)]
pub struct Decoder {
    base: Option<Sample>,
    links: columns::Links,
    kept: Kept,
}

/// Per GPU of the last sample decoded: whether its process list is the one
/// of the sample before, moved because the delta said so (or, in a column
/// delta, did not list the GPU at all). A reader that turned the sample
/// before into its own types can reuse what it made of that list without
/// looking at it: comparing every process's names with the last sample's,
/// cold in cache a second later, was 7% of a large console's CPU.
pub type Kept = Vec<bool>;

impl Decoder {
    /// The whole sample from what arrived; it stays as the next base.
    pub fn decode(&mut self, got: Sample) -> Result<&Sample, BadDelta> {
        self.decode_kept(got).map(|(whole, _)| whole)
    }

    /// As `decode`, with what `processes_kept` then says.
    pub fn decode_kept(&mut self, got: Sample) -> Result<(&Sample, &[bool]), BadDelta> {
        self.kept.clear();
        let mut whole =
            decode_with(self.base.as_mut(), &self.links, got, &mut self.kept).inspect_err(|_| self.kept.clear())?;
        self.links.keep(&whole);
        compact(&mut whole);
        Ok((self.base.insert(whole), &self.kept))
    }

    /// The last whole sample.
    pub fn base(&self) -> Option<&Sample> {
        self.base.as_ref()
    }

    /// Per GPU of the last whole sample, whether its processes are those of
    /// the sample before (see `Kept`); empty before the first, or after a
    /// sample that was sent whole.
    pub fn processes_kept(&self) -> &[bool] {
        &self.kept
    }
}

/// A base's lists as long as they are, not as prost grew them (4, 8, 16,
/// 32 for 18 links): the base is held for as long as the stream lasts, one
/// a node, and lists that did not change are carried into the next base as
/// they are. A list already at its length is not touched.
fn compact(s: &mut Sample) {
    for g in &mut s.gpus {
        g.processes.shrink_to_fit();
        g.nvlink_state.shrink_to_fit();
        g.pods.shrink_to_fit();
        g.mig.shrink_to_fit();
        g.ras.shrink_to_fit();
        g.throttle_detail.shrink_to_fit();
        g.xcc_gfx_busy_pct.shrink_to_fit();
    }
    for p in &mut s.ib_ports {
        p.errors.shrink_to_fit();
    }
}

/// The whole sample from what arrived and the previous whole sample of the
/// same stream. What the result repeats of `prev` is moved out of it, not
/// copied: `prev` is left for the result to replace. Column deltas whose
/// NVLink counters are differences need a `Decoder`.
pub fn decode(prev: Option<&mut Sample>, got: Sample) -> Result<Sample, BadDelta> {
    decode_with(prev, &columns::Links::default(), got, &mut Kept::new())
}

/// As `decode`, saying in `kept` (empty on entry) which GPUs' process lists
/// were moved from `prev`.
fn decode_with(
    prev: Option<&mut Sample>,
    links: &columns::Links,
    mut got: Sample,
    kept: &mut Kept,
) -> Result<Sample, BadDelta> {
    let columns = got.columns.is_some();
    if got.delta_from_seq == 0 {
        return match columns {
            true => Err(BadDelta::Malformed {
                seq: got.seq,
                what: "columns in a whole sample",
            }),
            false => Ok(got),
        };
    }
    // A column delta's seq is a difference.
    let seq = match columns {
        true => got.delta_from_seq.wrapping_add(got.seq),
        false => got.seq,
    };
    let have = prev.as_ref().map(|p| p.seq).unwrap_or(0);
    let Some(prev) = prev.filter(|p| p.seq == got.delta_from_seq) else {
        return Err(BadDelta::OutOfSequence {
            seq,
            base: got.delta_from_seq,
            have,
        });
    };
    if columns {
        return columns::decode(prev, links, got, kept);
    }
    if prev.gpus.len() != got.gpus.len() || prev.ib_ports.len() != got.ib_ports.len() {
        return Err(BadDelta::Malformed {
            seq: got.seq,
            what: "not as many GPUs or ports as its base",
        });
    }
    kept.extend(
        prev.gpus
            .iter_mut()
            .zip(got.gpus.iter_mut())
            .map(|(p, c)| decode_gpu(p, c)),
    );
    for (p, c) in prev.ib_ports.iter_mut().zip(got.ib_ports.iter_mut()) {
        decode_port(p, c);
    }
    got.delta_from_seq = 0;
    Ok(got)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A change to a GPU's sample.
    type Set = fn(&mut GpuSample);

    /// Each change of `base`, sent as a delta against it and back again
    /// against the changed sample, decodes to exactly what was sent.
    fn each_change_round_trips(base: GpuSample, changes: &[(&str, Set)]) {
        for (what, change) in changes {
            let a = Sample {
                seq: 1,
                gpus: vec![base.clone()],
                ..Default::default()
            };
            let mut b = a.clone();
            b.seq = 2;
            change(&mut b.gpus[0]);
            assert_ne!(a, b, "{what}: a change");
            assert_eq!(
                decode(Some(&mut a.clone()), encode(Some(&a), &b)).expect("decodes"),
                b,
                "{what}"
            );
            // And back again, against the changed sample as base.
            let mut c = a.clone();
            c.seq = 3;
            assert_eq!(
                decode(Some(&mut b.clone()), encode(Some(&b), &c)).expect("decodes"),
                c,
                "{what}: back"
            );
        }
    }

    #[test]
    fn counters_that_go_backwards_survive() {
        let a = Sample {
            seq: 1,
            ib_ports: vec![IbSample {
                tx_bytes: 1 << 40,
                state: "ACTIVE".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut b = a.clone();
        b.seq = 2;
        b.ib_ports[0].tx_bytes = 5;
        let back = decode(Some(&mut a.clone()), encode(Some(&a), &b)).expect("decodes");
        assert_eq!(back, b);
    }

    #[test]
    fn mig_instances_gpm_travels_as_it_is_and_its_absence_too() {
        use crate::pb::{Gpm, GpuSample, MigInstance};
        let inst = |gpm: Option<Gpm>| MigInstance {
            gpu_instance_id: 1,
            profile: "3g.40gb".into(),
            gpm,
            ..Default::default()
        };
        let some = Gpm {
            sm_active_cpct: 9100,
            sm_occupancy_cpct: 5250,
            tensor_active_cpct: 7000,
            dram_bw_cpct: 6600,
        };
        let a = Sample {
            seq: 1,
            gpus: vec![GpuSample {
                energy_mj: 10,
                mig: vec![inst(Some(some))],
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut b = a.clone();
        b.seq = 2;
        b.gpus[0].energy_mj = 20;
        let wire = encode(Some(&a), &b);
        assert_eq!(wire.delta_from_seq, 1, "a delta");
        assert_eq!(decode(Some(&mut a.clone()), wire).expect("decodes"), b);
        // GPM gone (a failed GPM sample): absent, not the previous figures.
        let mut c = b.clone();
        c.seq = 3;
        c.gpus[0].mig[0].gpm = None;
        assert_eq!(decode(Some(&mut b.clone()), encode(Some(&b), &c)).expect("decodes"), c);
    }

    /// A GPU on a Gen5 x16 link, registered with the fabric, persistence on.
    fn linked_gpu() -> crate::pb::GpuSample {
        crate::pb::GpuSample {
            energy_mj: 1_000,
            pcie_gen: 5,
            pcie_width: 16,
            fabric_state: 4,
            persistence: 2,
            ..Default::default()
        }
    }

    #[test]
    fn unchanged_link_fabric_and_persistence_cost_nothing() {
        use prost::Message;
        let a = Sample {
            seq: 1,
            gpus: vec![linked_gpu()],
            ..Default::default()
        };
        let mut b = a.clone();
        b.seq = 2;
        b.gpus[0].energy_mj = 2_000;
        let wire = encode(Some(&a), &b);
        assert_eq!(wire.delta_from_seq, 1, "a delta");
        let g = &wire.gpus[0];
        assert_eq!(
            (g.pcie_gen, g.pcie_width, g.fabric_state, g.fabric_status, g.persistence),
            (0, 0, 0, 0, 0),
            "unchanged: elided"
        );
        // Byte for byte what the same delta costs for a GPU without them.
        let bare = |s: &Sample| {
            let mut s = s.clone();
            for g in &mut s.gpus {
                (g.pcie_gen, g.pcie_width, g.fabric_state, g.persistence) = (0, 0, 0, 0);
            }
            s
        };
        assert_eq!(wire.encoded_len(), encode(Some(&bare(&a)), &bare(&b)).encoded_len());
        assert_eq!(decode(Some(&mut a.clone()), wire).expect("decodes"), b);
    }

    #[test]
    fn a_change_of_link_fabric_or_persistence_is_carried() {
        let changes: [(&str, Set); 8] = [
            ("link trains down to Gen1", |g| g.pcie_gen = 1),
            ("link drops to x8", |g| g.pcie_width = 8),
            ("fabric back to in progress", |g| g.fabric_state = 3),
            ("fabric completed with an error", |g| g.fabric_status = 999),
            ("persistence off", |g| g.persistence = 1),
            // To 0 (unknown) where the base had a reading: whole, not elided.
            ("link generation unknown", |g| g.pcie_gen = 0),
            ("fabric not reported", |g| g.fabric_state = 0),
            ("persistence unknown", |g| g.persistence = 0),
        ];
        each_change_round_trips(linked_gpu(), &changes);
        // A failed registration's status back to success (0): carried too.
        let mut a = Sample {
            seq: 1,
            gpus: vec![linked_gpu()],
            ..Default::default()
        };
        a.gpus[0].fabric_status = 999;
        let mut b = a.clone();
        b.seq = 2;
        b.gpus[0].fabric_status = 0;
        assert_eq!(decode(Some(&mut a.clone()), encode(Some(&a), &b)).expect("decodes"), b);
    }

    #[test]
    fn a_steady_pod_set_costs_nothing_and_changes_travel() {
        use crate::pb::{GpuSample, PodRef};
        use prost::Message;
        let pod = |name: &str| PodRef {
            namespace: "ml".into(),
            pod: name.into(),
            container: "train".into(),
            mig_uuid: String::new(),
        };
        let a = Sample {
            seq: 1,
            gpus: vec![GpuSample {
                energy_mj: 1_000,
                pods: vec![pod("a")],
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut b = a.clone();
        b.seq = 2;
        b.gpus[0].energy_mj = 2_000;
        let wire = encode(Some(&a), &b);
        assert_eq!(wire.delta_from_seq, 1, "a delta");
        assert!(wire.gpus[0].pods.is_empty(), "unchanged: elided");
        // Byte for byte what the same delta costs for a GPU no pod holds.
        let bare = |s: &Sample| {
            let mut s = s.clone();
            s.gpus[0].pods.clear();
            s
        };
        assert_eq!(wire.encoded_len(), encode(Some(&bare(&a)), &bare(&b)).encoded_len());
        assert_eq!(decode(Some(&mut a.clone()), wire).expect("decodes"), b);
        // Another pod, a second one sharing the GPU: carried.
        for pods in [vec![pod("b")], vec![pod("a"), pod("b")]] {
            let mut c = b.clone();
            c.seq = 3;
            c.gpus[0].pods = pods;
            let wire = encode(Some(&b), &c);
            assert_eq!(wire.delta_from_seq, 2);
            assert_eq!(decode(Some(&mut b.clone()), wire).expect("decodes"), c);
        }
        // The last pod goes: empty cannot be said in a delta, so whole.
        let mut c = b.clone();
        c.seq = 3;
        c.gpus[0].pods.clear();
        let wire = encode(Some(&b), &c);
        assert_eq!(wire.delta_from_seq, 0);
        assert_eq!(decode(Some(&mut b.clone()), wire).expect("whole"), c);
    }

    /// An MI300X partition with every AMD field set.
    fn amd_gpu() -> crate::pb::GpuSample {
        use crate::pb::{GpuEvent, RasCount};
        let block = |b: &str, c: u64, u: u64| RasCount {
            block: b.into(),
            correctable: c,
            uncorrectable: u,
            deferred: 0,
        };
        crate::pb::GpuSample {
            energy_mj: 1_000,
            temp_c: 70,
            hbm_temp_c: 60,
            edge_temp_c: Some(50),
            ecc_corrected_volatile: 3,
            ras: vec![block("UMC", 3, 0), block("SDMA", 0, 0), block("XGMI_WAFL", 0, 0)],
            xgmi_error_status: Some(0),
            events: vec![GpuEvent {
                kind: "thermal_throttle".into(),
                time_ms: 1_700_000_000_000,
                text: "thermal throttling: junction 104 C".into(),
            }],
            throttle_reasons: crate::throttle::SW_THERMAL_SLOWDOWN,
            throttle_detail: vec!["socket_thrm".into(), "TEMP_HOTSPOT".into()],
            nvlink_state: vec![1, 1, 0],
            nvlink_down_mask: 4,
            xcc_gfx_busy_pct: vec![91, 92, 90, 93],
            ..Default::default()
        }
    }

    #[test]
    fn amd_fields_travel_whole_and_as_deltas_and_cost_nothing_unchanged() {
        use prost::Message;
        let a = Sample {
            seq: 1,
            gpus: vec![amd_gpu()],
            ..Default::default()
        };
        // Whole, through protobuf: every field as it was.
        let bytes = a.encode_to_vec();
        assert_eq!(Sample::decode(bytes.as_slice()).expect("protobuf"), a);
        assert_eq!(decode(None, a.clone()).expect("whole"), a);
        // The next second: no new event, the rest as it was.
        let mut b = a.clone();
        b.seq = 2;
        b.gpus[0].energy_mj = 2_000;
        b.gpus[0].events.clear();
        let wire = encode(Some(&a), &b);
        assert_eq!(wire.delta_from_seq, 1, "a delta");
        let g = &wire.gpus[0];
        assert!(g.ras.is_empty() && g.throttle_detail.is_empty() && g.xgmi_error_status.is_none());
        assert!(g.xcc_gfx_busy_pct.is_empty(), "per-XCC busy unchanged: nothing");
        // Byte for byte what the same delta costs for a GPU without them.
        let bare = |s: &Sample| {
            let mut s = s.clone();
            for g in &mut s.gpus {
                g.ras.clear();
                g.throttle_detail.clear();
                g.xgmi_error_status = None;
                g.xcc_gfx_busy_pct.clear();
            }
            s
        };
        assert_eq!(wire.encoded_len(), encode(Some(&bare(&a)), &bare(&b)).encoded_len());
        let wire = Sample::decode(wire.encode_to_vec().as_slice()).expect("protobuf");
        assert_eq!(decode(Some(&mut a.clone()), wire).expect("decodes"), b);
    }

    #[test]
    fn a_change_of_an_amd_field_is_carried_and_so_is_its_end() {
        let changes: [(&str, Set); 13] = [
            ("an uncorrectable UMC error", |g| g.ras[0].uncorrectable = 1),
            ("an XCC busier", |g| g.xcc_gfx_busy_pct[2] = 99),
            ("an XCC fewer", |g| g.xcc_gfx_busy_pct.truncate(3)),
            ("per-XCC busy unread", |g| g.xcc_gfx_busy_pct.clear()),
            ("a page retired, pending a reset", |g| g.retired_pages_pending = 1),
            ("XGMI error", |g| g.xgmi_error_status = Some(1)),
            ("throttling ends", |g| g.throttle_detail.clear()),
            ("other throttle words", |g| g.throttle_detail = vec!["ppt_pwr".into()]),
            ("edge sensor moves", |g| g.edge_temp_c = Some(51)),
            ("edge sensor gone", |g| g.edge_temp_c = None),
            // To empty or unread where the base had figures: whole.
            ("RAS counts unread", |g| g.ras.clear()),
            ("XGMI status unread", |g| g.xgmi_error_status = None),
            ("another event", |g| g.events[0].kind = "gpu_pre_reset".into()),
        ];
        each_change_round_trips(amd_gpu(), &changes);
    }

    #[test]
    fn a_state_that_becomes_empty_travels_whole() {
        let a = Sample {
            seq: 1,
            ib_ports: vec![IbSample {
                state: "ACTIVE".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut b = a.clone();
        b.seq = 2;
        b.ib_ports[0].state.clear();
        let wire = encode(Some(&a), &b);
        assert_eq!(wire.delta_from_seq, 0);
        assert_eq!(decode(Some(&mut a.clone()), wire).expect("whole"), b);
    }

    #[test]
    fn a_processs_owner_and_command_travel_once_per_pid() {
        use crate::pb::{GpuProcess, GpuSample};
        let p = |pid: u32, mem: u64, user: &str| GpuProcess {
            pid,
            used_mem_bytes: mem,
            user: user.into(),
            command: if user.is_empty() {
                String::new()
            } else {
                format!("python {pid}.py")
            },
            ..Default::default()
        };
        let a = Sample {
            seq: 1,
            gpus: vec![GpuSample {
                processes: vec![p(7, 100, "alice")],
                ..Default::default()
            }],
            ..Default::default()
        };
        // Its memory moved and a new pid came: only the new one's owner travels.
        let mut b = a.clone();
        b.seq = 2;
        b.gpus[0].processes = vec![p(7, 200, "alice"), p(9, 50, "bob")];
        let wire = encode(Some(&a), &b);
        let sent: Vec<(&str, &str)> = wire.gpus[0]
            .processes
            .iter()
            .map(|q| (q.user.as_str(), q.command.as_str()))
            .collect();
        assert_eq!(sent, [("", ""), ("bob", "python 9.py")]);
        assert_eq!(decode(Some(&mut a.clone()), wire).expect("decodes"), b);
        // An owner that became unknown cannot be said in a delta: whole.
        let mut c = b.clone();
        c.seq = 3;
        c.gpus[0].processes[0] = p(7, 300, "");
        let wire = encode(Some(&b), &c);
        assert_eq!(wire.delta_from_seq, 0);
        assert_eq!(decode(Some(&mut b.clone()), wire).expect("whole"), c);
    }

    #[test]
    fn processes_that_end_are_not_mistaken_for_unchanged() {
        use crate::pb::{GpuProcess, GpuSample};
        let a = Sample {
            seq: 1,
            gpus: vec![GpuSample {
                processes: vec![GpuProcess {
                    pid: 7,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut b = a.clone();
        b.seq = 2;
        let wire = encode(Some(&a), &b);
        assert!(wire.gpus[0].processes_unchanged && wire.gpus[0].processes.is_empty());
        assert_eq!(decode(Some(&mut a.clone()), wire).expect("ok"), b);
        let mut c = b.clone();
        c.seq = 3;
        c.gpus[0].processes.clear();
        assert_eq!(decode(Some(&mut b.clone()), encode(Some(&b), &c)).expect("ok"), c);
    }

    #[test]
    fn a_delta_against_the_wrong_base_is_refused() {
        let a = Sample {
            seq: 1,
            ..Default::default()
        };
        let b = Sample {
            seq: 2,
            ..Default::default()
        };
        let c = Sample {
            seq: 3,
            ..Default::default()
        };
        let wire = encode(Some(&b), &c);
        assert_eq!(
            decode(Some(&mut a.clone()), wire),
            Err(BadDelta::OutOfSequence {
                seq: 3,
                base: 2,
                have: 1
            })
        );
        assert!(decode(None, encode(Some(&b), &c)).is_err());
    }
}
