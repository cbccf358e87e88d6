//! Init and shut-down, the library's version and status strings, and the socket and processor handles.

use crate::*;

/// Loads a profile and starts the clock (tests call this directly).
pub(crate) fn start(path: &Path, frozen_s: Option<f64>, flags: u64) -> amdsmi_status_t {
    let mut st = state();
    if let Some(fake) = st.as_mut() {
        fake.inits += 1;
        fake.gpus |= flags & AMDSMI_INIT_AMD_GPUS != 0;
        return OK;
    }
    let p = match profile::load(path) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("fake AMD SMI: {e}");
            return AMDSMI_STATUS_INIT_ERROR;
        }
    };
    *st = Some(Fake {
        parts: p.partitions(),
        p,
        start: Instant::now(),
        frozen_s,
        inits: 1,
        gpus: flags & AMDSMI_INIT_AMD_GPUS != 0,
        listening: BTreeMap::new(),
        delivered: HashSet::new(),
    });
    OK
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_init(flags: u64) -> amdsmi_status_t {
    guarded(|| {
        let Some(path) = std::env::var_os("FAKE_AMDSMI_PROFILE") else {
            eprintln!("fake AMD SMI: FAKE_AMDSMI_PROFILE is not set");
            return AMDSMI_STATUS_DRIVER_NOT_LOADED;
        };
        let frozen = std::env::var("FAKE_AMDSMI_TIME_S").ok().and_then(|s| s.parse().ok());
        start(Path::new(&path), frozen, flags)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_shut_down() -> amdsmi_status_t {
    // The state (and its clock) stays for the life of the process, so that
    // a second init sees the same time; calls between answer NOT_INIT.
    on_lib(|f| {
        f.inits -= 1;
        if f.inits == 0 {
            f.listening.clear();
        }
        OK
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_status_code_to_string(status: amdsmi_status_t, out: *mut *const c_char) -> amdsmi_status_t {
    static NAMES: OnceLock<BTreeMap<u32, CString>> = OnceLock::new();
    guarded(|| {
        let names = NAMES.get_or_init(|| {
            (0..=60u32)
                .chain([AMDSMI_STATUS_MAP_ERROR, AMDSMI_STATUS_UNKNOWN_ERROR])
                .filter_map(|s| Some((s, CString::new(status_name(s)?).ok()?)))
                .collect()
        });
        match names.get(&status) {
            Some(s) => put(out, s.as_ptr()),
            None => INVAL,
        }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_lib_version(out: *mut amdsmi_version_t) -> amdsmi_status_t {
    static BUILD: &std::ffi::CStr = c"fleetop fake";
    on_lib(|f| {
        let mut v = amdsmi_version_t::zeroed();
        [v.major, v.minor, v.release] = f.p.lib_version;
        v.build = BUILD.as_ptr();
        put(out, v)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_free_name_value_pairs(_p: *mut c_void) {
    // The fake never hands out name-value pairs (the calls that would are
    // NOT_SUPPORTED), so there is nothing to free.
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_socket_handles(count: *mut u32, out: *mut amdsmi_socket_handle) -> amdsmi_status_t {
    on_lib(|f| {
        let handles: Vec<_> = (0..f.sockets()).map(socket_handle).collect();
        put_list(count, out, &handles, OK)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_socket_info(socket: amdsmi_socket_handle, len: u64, name: *mut c_char) -> amdsmi_status_t {
    on_lib(|f| match f.decode_socket(socket) {
        Some(g) => {
            let bdf = f.p.bdfs[g as usize].rsplit_once('.').map_or("", |(b, _)| b).to_string();
            put_str(name, len as usize, &bdf)
        }
        None => INVAL,
    })
}

fn processors_of(f: &Fake, socket: amdsmi_socket_handle) -> Option<Vec<amdsmi_processor_handle>> {
    let g = f.decode_socket(socket)?;
    Some((0..f.parts).map(|q| processor_handle(g, q)).collect())
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_processor_handles(
    socket: amdsmi_socket_handle,
    count: *mut u32,
    out: *mut amdsmi_processor_handle,
) -> amdsmi_status_t {
    on_lib(|f| match processors_of(f, socket) {
        Some(h) => put_list(count, out, &h, OK),
        None => INVAL,
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_processor_handles_by_type(
    socket: amdsmi_socket_handle,
    kind: processor_type_t,
    out: *mut amdsmi_processor_handle,
    count: *mut u32,
) -> amdsmi_status_t {
    on_lib(|f| match processors_of(f, socket) {
        Some(h) if kind == AMDSMI_PROCESSOR_TYPE_AMD_GPU => put_list(count, out, &h, OK),
        Some(_) => put_list(count, out, &[], OK),
        None => INVAL,
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_processor_handle_from_bdf(bdf: u64, out: *mut amdsmi_processor_handle) -> amdsmi_status_t {
    on_lib(|f| {
        let want = amdsmi_bdf_t { as_uint: bdf };
        for g in 0..f.sockets() {
            for q in 0..f.parts {
                if f.bdf(f.proc_of(g, q)) == want {
                    return put(out, processor_handle(g, q));
                }
            }
        }
        AMDSMI_STATUS_NOT_FOUND
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_processor_type(h: amdsmi_processor_handle, out: *mut processor_type_t) -> amdsmi_status_t {
    on_proc(h, true, |_, _| put(out, AMDSMI_PROCESSOR_TYPE_AMD_GPU))
}
