//! What a device is: its index, name, UUID and PCI identity.

use crate::*;

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetIndex(d: nvmlDevice_t, i: *mut c_uint) -> nvmlReturn_t {
    with("nvmlDeviceGetIndex", Some(d), |_, d| match d {
        Some(Dev::Gpu(g)) => {
            out!(i, g);
            SUCCESS
        }
        _ => INVALID,
    })
}

fn uuid(gpu: u32, mig: Option<u32>) -> String {
    match mig {
        None => format!("GPU-fa4e0000-0000-4000-8000-{:012x}", 0xfa4e_0000 + gpu),
        Some(k) => format!("MIG-fa4e0000-0000-4000-9000-{:012x}", 0xfa4e_0000 + gpu * 16 + k),
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetName(d: nvmlDevice_t, buf: *mut c_char, len: c_uint) -> nvmlReturn_t {
    with("nvmlDeviceGetName", Some(d), |f, d| match d {
        Some(Dev::Gpu(g)) => write_str(buf, len, &f.spec(g).model),
        Some(Dev::Mig(g, k)) => {
            let s = f.spec(g);
            match s.mig.get(k as usize) {
                Some(m) => write_str(buf, len, &format!("{} MIG {}", s.model, m.profile)),
                None => INVALID,
            }
        }
        None => INVALID,
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetUUID(d: nvmlDevice_t, buf: *mut c_char, len: c_uint) -> nvmlReturn_t {
    with("nvmlDeviceGetUUID", Some(d), |_, d| match d {
        Some(Dev::Gpu(g)) => write_str(buf, len, &uuid(g, None)),
        Some(Dev::Mig(g, k)) => write_str(buf, len, &uuid(g, Some(k))),
        None => INVALID,
    })
}

/// nvmlPciInfo_t for a bus id "DDDDDDDD:BB:DD.F".
pub(crate) fn pci_info(bus_id: &str) -> nvmlPciInfo_t {
    // SAFETY: plain old data; all-zero is valid.
    let mut p: nvmlPciInfo_t = unsafe { std::mem::zeroed() };
    let hex = |s: &str| u32::from_str_radix(s, 16).unwrap_or(0);
    let parts: Vec<&str> = bus_id.split([':', '.']).collect();
    if parts.len() == 4 {
        p.domain = hex(parts[0]);
        p.bus = hex(parts[1]);
        p.device = hex(parts[2]);
    }
    // 0x2330 is the H100 SXM5's PCI device id; the agent does not read it.
    p.pciDeviceId = 0x2330_10de;
    p.pciSubSystemId = 0x16c1_10de;
    for (dst, src) in p.busId.iter_mut().zip(bus_id.bytes().take(31)) {
        *dst = src as c_char;
    }
    let legacy = bus_id.get(4..).unwrap_or("");
    for (dst, src) in p.busIdLegacy.iter_mut().zip(legacy.bytes().take(15)) {
        *dst = src as c_char;
    }
    p
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetPciInfo_v3(d: nvmlDevice_t, p: *mut nvmlPciInfo_t) -> nvmlReturn_t {
    with("nvmlDeviceGetPciInfo_v3", Some(d), |f, d| match gpu_of(d) {
        Some(g) => {
            out!(p, pci_info(&f.p.pci_bus_ids[g as usize]));
            SUCCESS
        }
        None => INVALID,
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetPciInfo_v2(d: nvmlDevice_t, p: *mut nvmlPciInfo_t) -> nvmlReturn_t {
    nvmlDeviceGetPciInfo_v3(d, p)
}
