//! Reading the kernel log's text: a record's header (`parse_record`), the
//! NVIDIA lines the agent uses in its message (`parse_message`: XIDs, SXids,
//! `GPU at PCI:`), and the PCI addresses they name. Pure functions of text,
//! apart from where the text comes from, and never panicking on any of it.

/// SXid text kept for people, in characters.
const MAX_TEXT_CHARS: usize = 200;

/// A PCI device address without its function: the kernel names a GPU
/// `0000:3b:00` in XID lines where NVML says `00000000:3B:00.0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PciAddr {
    pub domain: u32,
    pub bus: u8,
    pub device: u8,
}

impl PciAddr {
    /// Reads `0000:3b:00`, `0000:3b:00.0`, `00000000:3B:00.0`, `3b:00.0`
    /// (domain 0) and any of them after `PCI:`. Hex, any case.
    pub fn parse(s: &str) -> Option<PciAddr> {
        let s = s.trim();
        let s = match s.get(..4) {
            Some(p) if p.eq_ignore_ascii_case("pci:") => &s[4..],
            _ => s,
        };
        // The function, if any, is not compared: the kernel's XID lines lack it.
        let s = match s.rsplit_once('.') {
            Some((head, func)) if (1..=2).contains(&func.len()) && hex(func, 2).is_some() => head,
            Some(_) => return None,
            None => s,
        };
        let parts: Vec<&str> = s.split(':').collect();
        let (domain, bus, device) = match parts.as_slice() {
            [d, b, v] => (hex(d, 8)?, hex(b, 2)?, hex(v, 2)?),
            [b, v] => (0, hex(b, 2)?, hex(v, 2)?),
            _ => return None,
        };
        Some(PciAddr {
            domain,
            bus: u8::try_from(bus).ok()?,
            device: u8::try_from(device).ok()?,
        })
    }
}

/// Hex digits only (no sign, no prefix), at most `max_digits` of them.
fn hex(s: &str, max_digits: usize) -> Option<u32> {
    if s.is_empty() || s.len() > max_digits || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(s, 16).ok()
}

/// One kernel log record's header and first line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    pub seq: u64,
    /// Microseconds since boot.
    pub time_us: u64,
    pub message: &'a str,
}

/// Reads `priority,seq,time_us,flags[,...];message`; `None` for a
/// continuation line (` KEY=value`) or anything else that is not a record.
pub fn parse_record(line: &str) -> Option<Record<'_>> {
    if line.starts_with(' ') {
        return None;
    }
    let (header, message) = line.split_once(';')?;
    let mut fields = header.split(',');
    let _priority: u32 = fields.next()?.parse().ok()?;
    let seq = fields.next()?.parse().ok()?;
    let time_us = fields.next()?.parse().ok()?;
    // The record's own text ends at its first newline; what follows (on the
    // device) are its continuation lines.
    let message = message.split('\n').next().unwrap_or_default();
    Some(Record { seq, time_us, message })
}

/// What a kernel log message says that the agent uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// `NVRM: Xid (PCI:0000:3b:00): 79, ...`
    Xid { pci: PciAddr, code: u32 },
    /// `nvidia-nvswitch3: SXid (PCI:0000:c8:00.0): 12028, Non-fatal, ...`:
    /// the first line of one; its detail lines are not events.
    Sxid {
        switch_pci: String,
        code: u32,
        fatal: bool,
        text: String,
    },
    /// `NVRM: GPU at PCI:0000:3b:00: GPU-<uuid>`, printed around an XID of a
    /// GPU that fell off the bus: ties the bus id to the GPU's UUID.
    GpuAt { pci: PciAddr, uuid: String },
}

/// The event a message carries, if any. Never panics, whatever the text.
pub fn parse_message(msg: &str) -> Option<Event> {
    if let Some(i) = msg.find("NVRM: Xid (") {
        let (inside, rest) = parenthesised(&msg[i + "NVRM: Xid (".len()..])?;
        let pci = PciAddr::parse(inside)?;
        let (code, _) = leading_code(rest)?;
        return Some(Event::Xid { pci, code });
    }
    if let Some(i) = msg.find("SXid (") {
        let (inside, rest) = parenthesised(&msg[i + "SXid (".len()..])?;
        let switch_pci = inside.trim();
        let switch_pci = match switch_pci.get(..4) {
            Some(p) if p.eq_ignore_ascii_case("pci:") => &switch_pci[4..],
            _ => switch_pci,
        };
        PciAddr::parse(switch_pci)?;
        let (code, after) = leading_code(rest)?;
        let after = after.trim_start().strip_prefix(',')?.trim_start();
        let (word, text) = after.split_once(',').unwrap_or((after, ""));
        // Only the first line of an SXid says how severe it is; its other
        // lines ("Severity 0 Engine instance ...", "Data {...}") repeat the
        // code with details and are not further events.
        let fatal = match word.trim() {
            w if w.eq_ignore_ascii_case("fatal") => true,
            w if w.eq_ignore_ascii_case("non-fatal") => false,
            _ => return None,
        };
        return Some(Event::Sxid {
            switch_pci: switch_pci.to_string(),
            code,
            fatal,
            text: fleetop_proto::input::printable(text.trim(), MAX_TEXT_CHARS),
        });
    }
    if let Some(i) = msg.find("NVRM: GPU at PCI:") {
        let rest = &msg[i + "NVRM: GPU at PCI:".len()..];
        let (addr, rest) = rest.split_once(": ")?;
        let pci = PciAddr::parse(addr)?;
        let uuid: String = rest
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .take(96)
            .collect();
        if !uuid.starts_with("GPU-") || uuid.len() <= 4 {
            return None;
        }
        return Some(Event::GpuAt { pci, uuid });
    }
    None
}

/// `PCI:0000:3b:00): 79, ...` -> (`PCI:0000:3b:00`, `: 79, ...`).
fn parenthesised(s: &str) -> Option<(&str, &str)> {
    let end = s.find(')')?;
    Some((&s[..end], &s[end + 1..]))
}

/// `: 79, ...` -> (79, `, ...`): the code after the colon.
fn leading_code(s: &str) -> Option<(u32, &str)> {
    let s = s.trim_start().strip_prefix(':')?.trim_start();
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    Some((s[..digits].parse().ok()?, &s[digits..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::kmsg::{MAX_PENDING, Pending};

    #[test]
    fn pci_addresses_compare_without_case_domain_width_or_function() {
        let nvml = PciAddr::parse("00000000:3B:00.0").expect("nvml form");
        assert_eq!(PciAddr::parse("0000:3b:00"), Some(nvml));
        assert_eq!(PciAddr::parse("PCI:0000:3b:00"), Some(nvml));
        assert_eq!(PciAddr::parse("pci:0000:3B:00.0"), Some(nvml));
        assert_eq!(PciAddr::parse("3b:00.0"), Some(nvml));
        assert_ne!(PciAddr::parse("0000:3c:00"), Some(nvml));
        assert_ne!(PciAddr::parse("0001:3b:00"), Some(nvml));
        for bad in [
            "",
            "3b",
            "zz:00.0",
            "0000:3b:00.",
            "0000:3b:00.0.0",
            "0000:100:00",
            ":::",
            "0000:3b:00)",
        ] {
            assert_eq!(PciAddr::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn records_and_their_continuation_lines() {
        let r = parse_record("3,1234,5678901234,-;NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.")
            .expect("record");
        assert_eq!(r.seq, 1234);
        assert_eq!(r.time_us, 5_678_901_234);
        assert!(r.message.starts_with("NVRM: Xid"));
        // As one read of the device returns it: the first line is the message.
        let r = parse_record("4,9,10,c,extra;hello\n SUBSYSTEM=pci\n DEVICE=+pci:0000:3b:00.0\n").expect("record");
        assert_eq!(r.message, "hello");
        assert_eq!(parse_record(" SUBSYSTEM=pci"), None);
        assert_eq!(parse_record(" DEVICE=+pci:0000:3b:00.0"), None);
        assert_eq!(parse_record("no header here"), None);
        assert_eq!(parse_record("x,1,2,-;msg"), None);
    }

    #[test]
    fn xid_lines_in_every_form() {
        let pci = PciAddr::parse("0000:3b:00").expect("pci");
        for msg in [
            "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.",
            "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.",
            "NVRM: Xid (PCI:0000:3b:00.0): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
            "NVRM: Xid (PCI:0000:3B:00): 79",
        ] {
            assert_eq!(parse_message(msg), Some(Event::Xid { pci, code: 79 }), "{msg}");
        }
        assert_eq!(
            parse_message("NVRM: GPU at PCI:0000:3b:00: GPU-5f1a2b3c-0000-1111-2222-333344445555"),
            Some(Event::GpuAt {
                pci,
                uuid: "GPU-5f1a2b3c-0000-1111-2222-333344445555".into()
            })
        );
        for noise in [
            "NVRM: GPU Board Serial Number: 1654321012345",
            "NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.",
            "NVRM: Xid (PCI:0000:3b:00): , no code",
            "NVRM: Xid (PCI:nonsense): 79, x",
            "NVRM: Xid (PCI:0000:3b:00: 79 unclosed",
            "NVRM: Xid (PCI:0000:3b:00): 99999999999, too big",
            "usb 1-1: new high-speed USB device number 2",
        ] {
            assert_eq!(parse_message(noise), None, "{noise}");
        }
    }

    #[test]
    fn sxid_first_lines_are_events_and_their_detail_lines_are_not() {
        assert_eq!(
            parse_message(
                "nvidia-nvswitch3: SXid (PCI:0000:c8:00.0): 12028, Non-fatal, Link 47 egress non-posted PRIV error (First)"
            ),
            Some(Event::Sxid {
                switch_pci: "0000:c8:00.0".into(),
                code: 12028,
                fatal: false,
                text: "Link 47 egress non-posted PRIV error (First)".into()
            })
        );
        assert_eq!(
            parse_message("nvidia-nvswitch0: SXid (PCI:0000:c8:00.0): 20034, Fatal, Link 30 LTSSM Fault Up"),
            Some(Event::Sxid {
                switch_pci: "0000:c8:00.0".into(),
                code: 20034,
                fatal: true,
                text: "Link 30 LTSSM Fault Up".into()
            })
        );
        for detail in [
            "nvidia-nvswitch3: SXid (PCI:0000:c8:00.0): 12028, Severity 0 Engine instance 47 Sub-engine instance 00",
            "nvidia-nvswitch3: SXid (PCI:0000:c8:00.0): 12028, Data {0x00000000, 0x00000000, 0x00000000}",
        ] {
            assert_eq!(parse_message(detail), None, "{detail}");
        }
    }

    #[test]
    fn garbage_never_panics() {
        // A small xorshift: the same "random" bytes on every run.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let pieces = [
            "NVRM: Xid (",
            "SXid (",
            "PCI:",
            "0000:3b:00",
            ".0",
            "): ",
            "79",
            ", ",
            "Fatal",
            "Non-fatal",
            ";",
            ",",
            "\n",
            " ",
            "NVRM: GPU at PCI:",
            ": GPU-",
            "é",
            "\u{0}",
            "ÿ",
            ")",
            "(",
        ];
        let mut pending = Pending::default();
        for _ in 0..20_000 {
            let mut bytes = Vec::new();
            for _ in 0..(next() % 24) {
                if next() % 3 == 0 {
                    bytes.extend_from_slice(pieces[(next() % pieces.len() as u64) as usize].as_bytes());
                } else {
                    bytes.push(next() as u8);
                }
            }
            let text = String::from_utf8_lossy(&bytes);
            let _ = parse_record(&text);
            let _ = parse_message(&text);
            let _ = PciAddr::parse(&text);
            pending.record(&format!("3,1,2,-;{text}"));
            pending.record(&text);
        }
        assert!(pending.events.len() <= MAX_PENDING);
    }
}
