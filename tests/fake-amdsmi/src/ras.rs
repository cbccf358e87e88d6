//! RAS: ECC counts and state, and bad pages.

use crate::*;

fn error_count(c: [u64; 3]) -> amdsmi_error_count_t {
    let mut v = amdsmi_error_count_t::zeroed();
    [v.correctable_count, v.uncorrectable_count, v.deferred_count] = c;
    v
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_ecc_count(
    h: amdsmi_processor_handle,
    block: amdsmi_gpu_block_t,
    out: *mut amdsmi_error_count_t,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        let Some(name) = Fake::block_name(block) else {
            return INVAL;
        };
        if f.ecc_enabled(p.gpu) & block == 0 {
            return if out.is_null() { INVAL } else { NOT_SUPPORTED };
        }
        put(out, error_count(f.ecc(p.gpu, name)))
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_total_ecc_count(
    h: amdsmi_processor_handle,
    out: *mut amdsmi_error_count_t,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        let mut sum = [0u64; 3];
        for (bit, name) in GPU_BLOCKS {
            if f.ecc_enabled(p.gpu) & bit != 0 {
                let c = f.ecc(p.gpu, name);
                for k in 0..3 {
                    sum[k] += c[k];
                }
            }
        }
        put(out, error_count(sum))
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_ecc_enabled(h: amdsmi_processor_handle, out: *mut u64) -> amdsmi_status_t {
    on_proc(h, false, |f, p| put(out, f.ecc_enabled(p.gpu)))
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_ecc_status(
    h: amdsmi_processor_handle,
    block: amdsmi_gpu_block_t,
    out: *mut amdsmi_ras_err_state_t,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| {
        let Some(name) = Fake::block_name(block) else {
            return INVAL;
        };
        let state = if f.ecc_enabled(p.gpu) & block == 0 {
            AMDSMI_RAS_ERR_STATE_DISABLED
        } else {
            match f.ecc(p.gpu, name) {
                [_, u, _] if u > 0 => AMDSMI_RAS_ERR_STATE_MULT_UC,
                [c, _, _] if c > 0 => AMDSMI_RAS_ERR_STATE_SING_C,
                _ => AMDSMI_RAS_ERR_STATE_ENABLED,
            }
        };
        put(out, state)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn amdsmi_get_gpu_bad_page_info(
    h: amdsmi_processor_handle,
    count: *mut u32,
    out: *mut amdsmi_retired_page_record_t,
) -> amdsmi_status_t {
    on_proc(h, false, |f, p| put_list(count, out, &f.bad_pages(p.gpu), OK))
}
