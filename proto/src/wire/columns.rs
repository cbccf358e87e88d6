//! Column deltas: a plain delta (see the parent module) with the readings
//! that change every second moved out of the GPUs and ports into a few
//! packed fields.
//!
//! In a plain delta every reading of every GPU costs a one-byte tag beside
//! its value, and every GPU and port a header, its index and a "processes
//! unchanged" mark: on a busy 8-GPU node with 8 InfiniBand ports, a third
//! of the bytes. A column delta lists a GPU or port only where something
//! besides those readings changed (an XID, a process, a link state), as in
//! a plain delta; the others are their base's. A subscriber asks for it
//! (`SubscribeRequest.columns`), so agents and consoles of different
//! versions keep working; a sample that columns cannot say (a base of
//! another shape, GPUs out of order) travels as a plain delta.

use super::{BadDelta, Kept, can_elide, decode_gpu, decode_port, elide, encode as plain};
use crate::pb::{Columns, Gpm, GpuSample, IbSample, Sample};

/// Calls `$m!` with the GPU gauges that travel in `Columns.values`, each
/// with its bit in `Columns.readings`: one list for the encoder and the
/// decoder.
macro_rules! gauges {
    ($m:ident) => {
        $m!(
            util_pct 0,
            mem_util_pct 1,
            temp_c 2,
            hbm_temp_c 3,
            power_mw 4,
            sm_clock_mhz 5,
            pcie_tx_kbps 6,
            pcie_rx_kbps 7,
            throttle_reasons 8
        )
    };
}

/// The energy counter's bit, then GPM's (four runs of values).
const ENERGY: usize = 9;
const GPM: usize = 10;
const READINGS: usize = 11;

fn gpm_figures(m: &Gpm) -> [u32; 4] {
    [
        m.sm_active_cpct,
        m.sm_occupancy_cpct,
        m.tensor_active_cpct,
        m.dram_bw_cpct,
    ]
}

/// `cur` as sent after `prev` on the same stream: a column delta where it
/// fits, otherwise as `super::encode` sends it. `links` is the last sample
/// sent on the stream that carried NVLink counters, if any: the base of
/// `cur`'s counters.
pub fn encode(prev: Option<&Sample>, links: Option<&Sample>, cur: &Sample) -> Sample {
    let mut out = plain(prev, cur);
    let Some(prev) = prev.filter(|_| out.delta_from_seq != 0) else {
        return out;
    };
    let host_fits = match (&prev.host, &cur.host) {
        (Some(p), Some(c)) => can_elide(&p.mem_total_bytes, &c.mem_total_bytes),
        _ => true,
    };
    // Listed GPUs and ports are found by index in the base's order.
    if !host_fits
        || !increasing(cur.gpus.iter().map(|g| g.index))
        || !increasing(cur.ib_ports.iter().map(|p| p.port))
        || cur.gpus.iter().any(|g| g.nvlink_tx_kib.len() != g.nvlink_rx_kib.len())
    {
        return out;
    }
    let pairs = || prev.gpus.iter().zip(&cur.gpus);
    let mut cols = Columns::default();
    macro_rules! column {
        ($($f:ident $bit:literal),*) => {$(
            if pairs().any(|(p, c)| p.$f != c.$f) {
                cols.readings |= 1 << $bit;
                cols.values.extend(cur.gpus.iter().map(|g| u64::from(g.$f)));
            }
        )*};
    }
    gauges!(column);
    // `out` holds the counters' differences already.
    if out.gpus.iter().any(|g| g.energy_mj != 0) {
        cols.readings |= 1 << ENERGY;
        cols.values.extend(out.gpus.iter().map(|g| g.energy_mj));
    }
    if pairs().any(|(p, c)| p.gpm != c.gpm) {
        cols.readings |= 1 << GPM;
        for k in 0..4 {
            // The first run says which GPUs have figures: 0 for none.
            let figure = |g: &GpuSample| {
                g.gpm
                    .as_ref()
                    .map_or(0, |m| u64::from(gpm_figures(m)[k]) + u64::from(k == 0))
            };
            cols.values.extend(cur.gpus.iter().map(figure));
        }
    }
    if carries_links(cur) {
        let base = links.filter(|l| same_links(l, cur));
        for (i, g) in cur.gpus.iter().enumerate() {
            let held = base.map(|l| &l.gpus[i]);
            cols.nvlink_links.push(g.nvlink_tx_kib.len() as u32);
            cols.nvlink_tx_kib
                .extend(since(&g.nvlink_tx_kib, held.map(|h| &h.nvlink_tx_kib[..])));
            cols.nvlink_rx_kib
                .extend(since(&g.nvlink_rx_kib, held.map(|h| &h.nvlink_rx_kib[..])));
        }
        cols.nvlink_since_seq = base.map_or(0, |l| l.seq);
    }
    if out.ib_ports.iter().any(|p| p.tx_bytes != 0 || p.rx_bytes != 0) {
        cols.ib_bytes.extend(out.ib_ports.iter().map(|p| p.tx_bytes));
        cols.ib_bytes.extend(out.ib_ports.iter().map(|p| p.rx_bytes));
    }
    let gpus = std::mem::take(&mut out.gpus);
    out.gpus = pairs()
        .zip(gpus)
        .filter(|((p, c), _)| !quiet_gpu(p, c))
        .map(|(_, mut d)| {
            strip_gpu(&mut d);
            d
        })
        .collect();
    let ports = std::mem::take(&mut out.ib_ports);
    out.ib_ports = prev
        .ib_ports
        .iter()
        .zip(&cur.ib_ports)
        .zip(ports)
        .filter(|((p, c), _)| !quiet_port(p, c))
        .map(|(_, mut d)| {
            (d.tx_bytes, d.rx_bytes, d.tx_packets, d.rx_packets) = (0, 0, 0, 0);
            d
        })
        .collect();
    out.seq = cur.seq.wrapping_sub(prev.seq);
    out.time_ms = cur.time_ms.wrapping_sub(prev.time_ms);
    if let (Some(h), Some(p)) = (out.host.as_mut(), &prev.host) {
        elide(&mut h.mem_total_bytes, &p.mem_total_bytes);
    }
    out.columns = Some(cols);
    out
}

/// Counters as differences from those `held` (whole without).
fn since<'a>(cur: &'a [u64], held: Option<&'a [u64]>) -> impl Iterator<Item = u64> + 'a {
    let held = held.unwrap_or_default().iter().chain(std::iter::repeat(&0));
    cur.iter().zip(held).map(|(c, h)| c.wrapping_sub(*h))
}

/// Whether `s` carries NVLink counters (every n-th sample of an agent).
pub fn carries_links(s: &Sample) -> bool {
    s.gpus.iter().any(|g| !g.nvlink_tx_kib.is_empty())
}

/// Whether `l`'s NVLink counters can be the base of `cur`'s: the same GPUs
/// with the same number of links each.
fn same_links(l: &Sample, cur: &Sample) -> bool {
    l.gpus.len() == cur.gpus.len()
        && l.gpus.iter().zip(&cur.gpus).all(|(a, b)| {
            a.nvlink_tx_kib.len() == b.nvlink_tx_kib.len() && a.nvlink_rx_kib.len() == b.nvlink_rx_kib.len()
        })
}

/// A stream's NVLink counters as of the last sample that carried them (all
/// GPUs' in turn, as in `Columns`): the base of the next ones in a
/// column delta. Kept by `super::Decoder`.
#[derive(Debug, Default)]
pub struct Links {
    /// The sample they came from; 0 when none has come.
    seq: u64,
    counts: Vec<u32>,
    tx: Vec<u64>,
    rx: Vec<u64>,
}

impl Links {
    /// Takes `s`'s counters if it carries any (in place: the vectors keep
    /// their room, a sample of a node carries as many as the last).
    pub(super) fn keep(&mut self, s: &Sample) {
        if !carries_links(s) {
            return;
        }
        if s.gpus.iter().any(|g| g.nvlink_tx_kib.len() != g.nvlink_rx_kib.len()) {
            // Not a base a column delta is ever sent against.
            self.seq = 0;
            return;
        }
        self.seq = s.seq;
        self.counts.clear();
        self.tx.clear();
        self.rx.clear();
        for g in &s.gpus {
            self.counts.push(g.nvlink_tx_kib.len() as u32);
            self.tx.extend_from_slice(&g.nvlink_tx_kib);
            self.rx.extend_from_slice(&g.nvlink_rx_kib);
        }
    }
}

fn increasing(mut it: impl Iterator<Item = u32>) -> bool {
    let Some(mut last) = it.next() else {
        return true;
    };
    it.all(|x| std::mem::replace(&mut last, x) < x)
}

/// Whether a GPU need not be listed: every field outside the columns as in
/// its base, and no new XID. Every field is named, so a field added to
/// `GpuSample` does not compile here until it is placed.
fn quiet_gpu(p: &GpuSample, c: &GpuSample) -> bool {
    let GpuSample {
        index,
        error,
        util_pct: _,
        mem_util_pct: _,
        mem_used_bytes,
        temp_c: _,
        power_mw: _,
        power_limit_mw,
        sm_clock_mhz: _,
        mem_clock_mhz,
        throttle_reasons: _,
        energy_mj: _,
        hbm_temp_c: _,
        pcie_tx_kbps: _,
        pcie_rx_kbps: _,
        pcie_replay_count,
        ecc_corrected_volatile,
        ecc_uncorrected_volatile,
        retired_pages,
        remapped_rows_pending,
        remapped_rows_failed,
        xids,
        nvlink_down_mask,
        nvlink_tx_kib: _,
        nvlink_rx_kib: _,
        processes,
        processes_unchanged,
        absent,
        remapped_rows_correctable,
        remapped_rows_uncorrectable,
        nvlink_state,
        gpm: _,
        mig,
        pcie_gen,
        pcie_width,
        fabric_state,
        fabric_status,
        persistence,
        pods,
        edge_temp_c,
        ras,
        xgmi_error_status,
        events,
        throttle_detail,
        retired_pages_pending,
        xcc_gfx_busy_pct,
    } = c;
    xids.is_empty()
        && events.is_empty()
        && *index == p.index
        && *error == p.error
        && *mem_used_bytes == p.mem_used_bytes
        && *power_limit_mw == p.power_limit_mw
        && *mem_clock_mhz == p.mem_clock_mhz
        && *pcie_replay_count == p.pcie_replay_count
        && *ecc_corrected_volatile == p.ecc_corrected_volatile
        && *ecc_uncorrected_volatile == p.ecc_uncorrected_volatile
        && *retired_pages == p.retired_pages
        && *remapped_rows_pending == p.remapped_rows_pending
        && *remapped_rows_failed == p.remapped_rows_failed
        && *nvlink_down_mask == p.nvlink_down_mask
        && *processes == p.processes
        && *processes_unchanged == p.processes_unchanged
        && *absent == p.absent
        && *remapped_rows_correctable == p.remapped_rows_correctable
        && *remapped_rows_uncorrectable == p.remapped_rows_uncorrectable
        && *nvlink_state == p.nvlink_state
        && *mig == p.mig
        && *pcie_gen == p.pcie_gen
        && *pcie_width == p.pcie_width
        && *fabric_state == p.fabric_state
        && *fabric_status == p.fabric_status
        && *persistence == p.persistence
        && *pods == p.pods
        // Not a column: an old console refuses a reading bit it does not
        // know, and MI300X has no edge sensor. A GPU whose edge moved is
        // listed, with it.
        && *edge_temp_c == p.edge_temp_c
        && *ras == p.ras
        && *xgmi_error_status == p.xgmi_error_status
        && *throttle_detail == p.throttle_detail
        && *retired_pages_pending == p.retired_pages_pending
        // Not a column either (an old console would refuse its bit): a GPU
        // whose XCCs' busy moved is listed, with them.
        && *xcc_gfx_busy_pct == p.xcc_gfx_busy_pct
}

/// As `quiet_gpu`, for a port: its byte counters travel in the columns,
/// its packet counters not at all.
fn quiet_port(p: &IbSample, c: &IbSample) -> bool {
    let IbSample {
        port,
        state,
        phys_state,
        rate_gbps,
        tx_bytes: _,
        rx_bytes: _,
        tx_packets: _,
        rx_packets: _,
        errors,
        errors_present_mask,
    } = c;
    *port == p.port
        && *state == p.state
        && *phys_state == p.phys_state
        && *rate_gbps == p.rate_gbps
        && *errors == p.errors
        && *errors_present_mask == p.errors_present_mask
}

/// A listed GPU's plain delta without what the columns carry.
fn strip_gpu(d: &mut GpuSample) {
    macro_rules! zero {
        ($($f:ident $bit:literal),*) => {$( d.$f = 0; )*};
    }
    gauges!(zero);
    d.energy_mj = 0;
    d.gpm = None;
    d.nvlink_tx_kib.clear();
    d.nvlink_rx_kib.clear();
}

/// `values` cut into its runs, one a reading sent (by bit), after checking
/// that every run and column has one value a GPU (or port), or none.
fn runs(cols: &Columns, gpus: usize, ports: usize) -> Result<[&[u64]; READINGS], &'static str> {
    if cols.readings >> READINGS != 0 {
        return Err("a reading this console does not know");
    }
    let mut runs: [&[u64]; READINGS] = [&[]; READINGS];
    let mut rest = &cols.values[..];
    for (bit, run) in runs.iter_mut().enumerate() {
        if cols.readings & (1 << bit) != 0 {
            let len = if bit == GPM { 4 * gpus } else { gpus };
            let Some((r, tail)) = rest.split_at_checked(len) else {
                return Err("fewer values than the readings sent");
            };
            (*run, rest) = (r, tail);
        }
    }
    if !rest.is_empty() {
        return Err("more values than the readings sent");
    }
    if !(cols.nvlink_links.is_empty() || cols.nvlink_links.len() == gpus) {
        return Err("NVLink link counts not one a GPU");
    }
    let links: u64 = cols.nvlink_links.iter().map(|&k| u64::from(k)).sum();
    if links != cols.nvlink_tx_kib.len() as u64 || links != cols.nvlink_rx_kib.len() as u64 {
        return Err("NVLink counters not as many as the links");
    }
    if !(cols.ib_bytes.is_empty() || cols.ib_bytes.len() == 2 * ports) {
        return Err("port byte counters not two a port");
    }
    Ok(runs)
}

/// The whole sample from a column delta and its base (checked by the
/// caller to be the one it names); what it repeats of `prev` is moved out.
pub(super) fn decode(prev: &mut Sample, links: &Links, mut got: Sample, kept: &mut Kept) -> Result<Sample, BadDelta> {
    let seq = prev.seq.wrapping_add(got.seq);
    let bad = |what| BadDelta::Malformed { seq, what };
    let cols = got.columns.take().unwrap_or_default();
    let (n, ports) = (prev.gpus.len(), prev.ib_ports.len());
    let runs = runs(&cols, n, ports).map_err(bad)?;
    let since = cols.nvlink_since_seq != 0 && !cols.nvlink_links.is_empty();
    if since && (links.seq != cols.nvlink_since_seq || links.counts != cols.nvlink_links) {
        return Err(bad("NVLink counters against a sample not held"));
    }
    let counters = |held: &[u64], span: std::ops::Range<usize>, sent: &[u64]| -> Vec<u64> {
        match since {
            true => held[span.clone()]
                .iter()
                .zip(&sent[span])
                .map(|(b, d)| b.wrapping_add(*d))
                .collect(),
            false => sent[span].to_vec(),
        }
    };
    let out_of_range = || bad("a reading out of range");

    let mut gpus = std::mem::take(&mut prev.gpus);
    let mut listed = got.gpus.into_iter().peekable();
    let mut link = 0;
    for (i, g) in gpus.iter_mut().enumerate() {
        match listed.next_if(|e| e.index == g.index) {
            Some(mut e) => {
                kept.push(decode_gpu(g, &mut e));
                // Its readings are the base's unless a column says.
                macro_rules! keep {
                    ($($f:ident $bit:literal),*) => {$( e.$f = g.$f; )*};
                }
                gauges!(keep);
                e.gpm = g.gpm.take();
                *g = e;
            }
            None => {
                kept.push(true);
                g.xids.clear();
                g.events.clear();
                // Freed, not cleared: the base holds a node's sample for as
                // long as its stream lasts, and the counters live in `links`
                // between the samples that carry them (2-4 KiB a node of 8
                // GPUs with 18 links, kept empty, before).
                g.nvlink_tx_kib = Vec::new();
                g.nvlink_rx_kib = Vec::new();
            }
        }
        macro_rules! set {
            ($($f:ident $bit:literal),*) => {$(
                if let Some(&v) = runs[$bit].get(i) {
                    g.$f = v.try_into().map_err(|_| out_of_range())?;
                }
            )*};
        }
        gauges!(set);
        if let Some(&d) = runs[ENERGY].get(i) {
            g.energy_mj = g.energy_mj.wrapping_add(d);
        }
        if let Some(&marked) = runs[GPM].get(i) {
            let figure = |v: u64| u32::try_from(v).map_err(|_| out_of_range());
            g.gpm = match marked {
                0 => None,
                _ => Some(Gpm {
                    sm_active_cpct: figure(marked - 1)?,
                    sm_occupancy_cpct: figure(runs[GPM][n + i])?,
                    tensor_active_cpct: figure(runs[GPM][2 * n + i])?,
                    dram_bw_cpct: figure(runs[GPM][3 * n + i])?,
                }),
            };
        }
        if let Some(&k) = cols.nvlink_links.get(i) {
            let span = link..link + k as usize;
            g.nvlink_tx_kib = counters(&links.tx, span.clone(), &cols.nvlink_tx_kib);
            g.nvlink_rx_kib = counters(&links.rx, span, &cols.nvlink_rx_kib);
            link += k as usize;
        }
    }
    if listed.next().is_some() {
        return Err(bad("a GPU listed that its base does not have, or out of order"));
    }

    let mut ib = std::mem::take(&mut prev.ib_ports);
    let mut listed = got.ib_ports.into_iter().peekable();
    for (i, p) in ib.iter_mut().enumerate() {
        if let Some(mut e) = listed.next_if(|e| e.port == p.port) {
            decode_port(p, &mut e);
            *p = e;
        }
        if let (Some(&tx), Some(&rx)) = (cols.ib_bytes.get(i), cols.ib_bytes.get(ports + i)) {
            p.tx_bytes = p.tx_bytes.wrapping_add(tx);
            p.rx_bytes = p.rx_bytes.wrapping_add(rx);
        }
    }
    if listed.next().is_some() {
        return Err(bad("a port listed that its base does not have, or out of order"));
    }
    let mut host = got.host;
    if let (Some(h), Some(p)) = (host.as_mut(), &prev.host)
        && h.mem_total_bytes == 0
    {
        h.mem_total_bytes = p.mem_total_bytes;
    }
    Ok(Sample {
        seq,
        time_ms: prev.time_ms.wrapping_add(got.time_ms),
        host,
        gpus,
        ib_ports: ib,
        delta_from_seq: 0,
        sxids: got.sxids,
        columns: None,
    })
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::super::Decoder;
    use super::*;
    use crate::pb::{GpuEvent, GpuProcess, HostSample, MigInstance, PodRef, RasCount, XidEvent};

    /// A node with something in every field: two GPUs, two ports.
    fn node() -> Sample {
        let gpu = |index: u32| GpuSample {
            index,
            util_pct: 90,
            mem_util_pct: 40,
            mem_used_bytes: 70 << 30,
            temp_c: 60,
            power_mw: 500_000,
            power_limit_mw: 700_000,
            sm_clock_mhz: 1900,
            mem_clock_mhz: 2600,
            throttle_reasons: 4,
            energy_mj: 1 << 40,
            hbm_temp_c: 65,
            pcie_tx_kbps: 1_000_000,
            pcie_rx_kbps: 2_000_000,
            pcie_replay_count: 3,
            ecc_corrected_volatile: 5,
            retired_pages: 1,
            nvlink_tx_kib: vec![1 << 45, 2 << 45],
            nvlink_rx_kib: vec![3 << 45, 4 << 45],
            processes: vec![GpuProcess {
                pid: 100 + index,
                used_mem_bytes: 60 << 30,
                job_id: 7,
                user: "alice".into(),
                command: "python train.py".into(),
            }],
            gpm: Some(Gpm {
                sm_active_cpct: 9000,
                sm_occupancy_cpct: 4000,
                tensor_active_cpct: 6000,
                dram_bw_cpct: 5000,
            }),
            mig: vec![MigInstance {
                gpu_instance_id: 1,
                profile: "3g.40gb".into(),
                ..Default::default()
            }],
            pcie_gen: 5,
            pcie_width: 16,
            fabric_state: 4,
            persistence: 2,
            pods: vec![PodRef {
                namespace: "ml".into(),
                pod: "p".into(),
                container: "c".into(),
                mig_uuid: String::new(),
            }],
            // AMD's: an edge sensor, ECC per RAS block, XGMI, throttle words.
            edge_temp_c: Some(45),
            ras: vec![
                RasCount {
                    block: "UMC".into(),
                    correctable: 3,
                    ..Default::default()
                },
                RasCount {
                    block: "GFX".into(),
                    ..Default::default()
                },
            ],
            xgmi_error_status: Some(0),
            throttle_detail: vec!["ppt_pwr".into(), "PPT0".into()],
            xcc_gfx_busy_pct: vec![88, 90],
            ..Default::default()
        };
        let port = |port: u32| IbSample {
            port,
            state: "ACTIVE".into(),
            phys_state: "LinkUp".into(),
            rate_gbps: 400,
            tx_bytes: 1 << 44,
            rx_bytes: 2 << 44,
            tx_packets: 1 << 30,
            rx_packets: 2 << 30,
            errors: vec![0, 1, 2],
            errors_present_mask: 7,
        };
        Sample {
            seq: 10,
            time_ms: 1_700_000_000_000,
            host: Some(HostSample {
                cpu_permille: 500,
                mem_used_bytes: 1 << 39,
                mem_total_bytes: 2 << 40,
                load1_x100: 900,
                uptime_s: 1_000_000,
            }),
            gpus: vec![gpu(0), gpu(1)],
            ib_ports: vec![port(0), port(1)],
            ..Default::default()
        }
    }

    /// The sample after `base`: one second on, its counters moved.
    fn next(base: &Sample) -> Sample {
        let mut s = base.clone();
        s.seq += 1;
        s.time_ms += 1000;
        for g in &mut s.gpus {
            g.energy_mj += 500_000;
            g.nvlink_tx_kib.iter_mut().for_each(|c| *c += 1 << 20);
            g.nvlink_rx_kib.iter_mut().for_each(|c| *c += 1 << 21);
        }
        for p in &mut s.ib_ports {
            (p.tx_bytes, p.rx_bytes) = (p.tx_bytes + (1 << 33), p.rx_bytes + (1 << 32));
        }
        s
    }

    /// The sample after `base`, one of those that carry no NVLink counters.
    fn next_without_links(base: &Sample) -> Sample {
        let mut s = next(base);
        for g in &mut s.gpus {
            (g.nvlink_tx_kib, g.nvlink_rx_kib) = (vec![], vec![]);
        }
        s
    }

    /// Sends `base` whole then `cur` as a column delta; what the console makes of it.
    fn round_trip(base: &Sample, cur: &Sample) -> (Sample, Sample) {
        let mut rx = Decoder::default();
        rx.decode(base.clone()).expect("whole");
        let wire = encode(Some(base), Some(base), cur);
        (wire.clone(), rx.decode(wire).expect("decodes").clone())
    }

    #[test]
    fn a_steady_node_lists_nothing_and_every_field_outside_the_columns_travels_when_it_alone_changes() {
        let base = node();
        let steady = next(&base);
        let (wire, back) = round_trip(&base, &steady);
        assert!(wire.columns.is_some() && wire.gpus.is_empty() && wire.ib_ports.is_empty());
        assert_eq!(back, steady);

        type Gpu = fn(&mut GpuSample);
        let gpu_changes: [(&str, Gpu); 37] = [
            ("error", |g| g.error = "not_supported: temp".into()),
            ("memory used", |g| g.mem_used_bytes += 1),
            ("power limit", |g| g.power_limit_mw = 600_000),
            ("memory clock", |g| g.mem_clock_mhz = 1000),
            ("PCIe replays", |g| g.pcie_replay_count += 1),
            ("ECC corrected", |g| g.ecc_corrected_volatile += 1),
            ("ECC uncorrected", |g| g.ecc_uncorrected_volatile += 1),
            ("retired pages", |g| g.retired_pages += 1),
            ("remap pending", |g| g.remapped_rows_pending = 1),
            ("remap failed", |g| g.remapped_rows_failed = 1),
            ("rows remapped, correctable", |g| g.remapped_rows_correctable = 2),
            ("rows remapped, uncorrectable", |g| g.remapped_rows_uncorrectable = 2),
            ("an XID", |g| {
                g.xids.push(XidEvent {
                    xid: 79,
                    time_ms: 1,
                    source: 0,
                })
            }),
            ("link down mask", |g| g.nvlink_down_mask = 2),
            ("link states", |g| g.nvlink_state = vec![1, 0]),
            ("a process's memory", |g| g.processes[0].used_mem_bytes += 1),
            ("another process", |g| {
                g.processes.push(GpuProcess {
                    pid: 999,
                    ..Default::default()
                })
            }),
            ("no process", |g| g.processes.clear()),
            ("readings absent", |g| g.absent = 1),
            ("MIG", |g| g.mig[0].mem_used_bytes = 5),
            ("PCIe generation", |g| g.pcie_gen = 1),
            ("PCIe width", |g| g.pcie_width = 8),
            ("fabric state", |g| g.fabric_state = 3),
            ("fabric status", |g| g.fabric_status = 9),
            ("persistence", |g| g.persistence = 1),
            ("pods", |g| g.pods[0].pod = "q".into()),
            ("edge temperature", |g| g.edge_temp_c = Some(46)),
            ("edge sensor gone", |g| g.edge_temp_c = None),
            ("an uncorrectable RAS error", |g| g.ras[0].uncorrectable += 1),
            ("no RAS counts", |g| g.ras.clear()),
            ("XGMI error", |g| g.xgmi_error_status = Some(1)),
            ("XGMI error status unread", |g| g.xgmi_error_status = None),
            ("throttle words", |g| g.throttle_detail = vec!["socket_thrm".into()]),
            ("a page retirement pending", |g| g.retired_pages_pending = 1),
            ("an XCC busier", |g| g.xcc_gfx_busy_pct[1] = 97),
            ("per-XCC busy unread", |g| g.xcc_gfx_busy_pct.clear()),
            ("an AMD event", |g| {
                g.events.push(GpuEvent {
                    kind: "gpu_pre_reset".into(),
                    time_ms: 5,
                    text: "RAS: reset".into(),
                })
            }),
        ];
        for (what, change) in gpu_changes {
            let mut cur = steady.clone();
            change(&mut cur.gpus[1]);
            let (wire, back) = round_trip(&base, &cur);
            assert_eq!(back, cur, "{what}");
            if wire.columns.is_some() {
                let listed: Vec<u32> = wire.gpus.iter().map(|g| g.index).collect();
                assert_eq!(listed, [1], "{what}: the GPU that changed, alone");
            }
        }
        type Port = fn(&mut IbSample);
        let port_changes: [(&str, Port); 5] = [
            ("state", |p| p.state = "DOWN".into()),
            ("physical state", |p| p.phys_state = "Polling".into()),
            ("rate", |p| p.rate_gbps = 200),
            ("an error counter", |p| p.errors[1] += 1),
            ("counters readable", |p| p.errors_present_mask = 3),
        ];
        for (what, change) in port_changes {
            let mut cur = steady.clone();
            change(&mut cur.ib_ports[0]);
            let (wire, back) = round_trip(&base, &cur);
            assert_eq!(back, cur, "{what}");
            if wire.columns.is_some() {
                let listed: Vec<u32> = wire.ib_ports.iter().map(|p| p.port).collect();
                assert_eq!(listed, [0], "{what}");
            }
        }
    }

    #[test]
    fn an_amd_event_travels_once_and_steady_amd_fields_list_no_gpu() {
        let mut base = node();
        base.gpus[0].events.push(GpuEvent {
            kind: "thermal_throttle".into(),
            time_ms: 1,
            text: "thermal throttling: junction 104 C".into(),
        });
        // The next sample: the event was the base's, not this one's.
        let mut cur = next(&base);
        cur.gpus[0].events.clear();
        let (wire, back) = round_trip(&base, &cur);
        assert!(
            wire.columns.is_some() && wire.gpus.is_empty(),
            "nothing but readings changed"
        );
        assert_eq!(back, cur);
        assert!(back.gpus[0].events.is_empty(), "an event is not repeated");
    }

    #[test]
    fn readings_travel_in_columns_gpm_figures_come_and_go_and_packet_counters_stay_behind() {
        let base = node();
        let mut cur = next(&base);
        cur.gpus[0].temp_c = 99;
        cur.gpus[1].throttle_reasons = 0;
        cur.gpus[1].gpm = None;
        cur.gpus[0].util_pct = u32::MAX;
        cur.ib_ports[1].tx_packets += 1_000;
        let (wire, back) = round_trip(&base, &cur);
        assert!(
            wire.columns.is_some() && wire.gpus.is_empty(),
            "readings alone: nothing listed"
        );
        let mut want = cur.clone();
        want.ib_ports[1].tx_packets = base.ib_ports[1].tx_packets;
        assert_eq!(back, want, "lossless, but for the packet counters");
        // And GPM back on the GPU that had none.
        let (_, back) = round_trip(&cur, &next(&base));
        assert_eq!(back.gpus[1].gpm, base.gpus[1].gpm);
    }

    #[test]
    fn nvlink_counters_travel_as_differences_from_the_last_that_carried_them() {
        let carried = node();
        let quiet = next_without_links(&carried);
        let again = next(&next(&carried));
        let mut rx = Decoder::default();
        rx.decode(carried.clone()).expect("whole");
        rx.decode(encode(Some(&carried), Some(&carried), &quiet))
            .expect("quiet");
        let wire = encode(Some(&quiet), Some(&carried), &again);
        let cols = wire.columns.as_ref().expect("columns");
        assert_eq!(cols.nvlink_since_seq, carried.seq);
        assert_eq!(cols.nvlink_tx_kib, [2 << 20; 4], "ten seconds' worth, not the counters");
        assert_eq!(rx.decode(wire.clone()).expect("decodes"), &again);
        // A console that holds other counters refuses rather than invents.
        let mut fresh = Decoder::default();
        fresh.decode(quiet.clone()).expect("whole");
        assert!(matches!(fresh.decode(wire), Err(BadDelta::Malformed { seq: 12, .. })));
        // A link more than the base had: whole counters.
        let mut more = again.clone();
        more.gpus[0].nvlink_tx_kib.push(5);
        more.gpus[0].nvlink_rx_kib.push(6);
        let wire = encode(Some(&quiet), Some(&carried), &more);
        assert_eq!(wire.columns.as_ref().map(|c| c.nvlink_since_seq), Some(0));
    }

    /// The base is held for a stream's whole life, one a node: between the
    /// samples that carry NVLink counters it holds none (they are in
    /// `links`), and its lists are as long as they are, not as prost grew
    /// them.
    #[test]
    fn a_base_holds_no_room_it_does_not_use() {
        let carried = node();
        let quiet = next_without_links(&carried);
        // Received as prost decodes it: its lists grown one at a time.
        let mut rx = Decoder::default();
        let arrived = Sample::decode(carried.encode_to_vec().as_slice()).expect("protobuf");
        rx.decode(arrived).expect("whole");
        let room = |s: &Sample| {
            s.gpus
                .iter()
                .map(|g| {
                    g.processes.capacity() - g.processes.len() + g.nvlink_state.capacity() - g.nvlink_state.len()
                        + g.pods.capacity()
                        - g.pods.len()
                })
                .sum::<usize>()
                + s.ib_ports
                    .iter()
                    .map(|p| p.errors.capacity() - p.errors.len())
                    .sum::<usize>()
        };
        assert_eq!(room(rx.base().expect("base")), 0);
        let base = rx
            .decode(encode(Some(&carried), Some(&carried), &quiet))
            .expect("quiet");
        assert_eq!(base, &quiet);
        let links: usize = base
            .gpus
            .iter()
            .map(|g| g.nvlink_tx_kib.capacity() + g.nvlink_rx_kib.capacity())
            .sum();
        assert_eq!(links, 0, "no NVLink room kept between the samples that carry counters");
    }

    fn cols(s: &mut Sample) -> &mut Columns {
        s.columns.get_or_insert_default()
    }

    #[test]
    fn a_malformed_column_delta_is_refused_by_name_and_a_wrong_base_by_seq() {
        let base = node();
        let good = encode(Some(&base), None, &next(&base));
        type Break = fn(&mut Sample);
        let breaks: [(&str, Break); 10] = [
            ("an unknown reading", |s| cols(s).readings |= 1 << 20),
            ("a value short", |s| {
                cols(s).values.pop();
            }),
            ("a value over", |s| cols(s).values.push(1)),
            ("a reading out of range", |s| {
                let c = cols(s);
                c.readings |= 1;
                c.values.splice(0..0, [u64::MAX, 1]);
            }),
            ("link counts", |s| cols(s).nvlink_links.push(1)),
            ("a link counter short", |s| {
                cols(s).nvlink_tx_kib.pop();
            }),
            ("port counters", |s| {
                cols(s).ib_bytes.pop();
            }),
            ("a GPU the base has not", |s| {
                s.gpus.push(GpuSample {
                    index: 7,
                    ..Default::default()
                })
            }),
            ("GPUs out of order", |s| {
                s.gpus = vec![
                    GpuSample {
                        index: 1,
                        ..Default::default()
                    },
                    GpuSample::default(),
                ]
            }),
            ("columns in a whole sample", |s| s.delta_from_seq = 0),
        ];
        for (what, damage) in breaks {
            let mut bad = good.clone();
            damage(&mut bad);
            let mut rx = Decoder::default();
            rx.decode(base.clone()).expect("whole");
            assert!(
                matches!(rx.decode(bad), Err(BadDelta::Malformed { .. })),
                "{what}: refused as malformed"
            );
        }
        let mut rx = Decoder::default();
        rx.decode(next(&base)).expect("whole");
        assert_eq!(
            rx.decode(good).map(|s| s.seq),
            Err(BadDelta::OutOfSequence {
                seq: 11,
                base: 10,
                have: 11
            })
        );
    }
}
