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
mod tests;
