//! GPU temperatures: the current reading (the versioned call where the
//! driver has it) and the slowdown and shutdown limits for the node
//! description, from the threshold call or the T.Limit field values.

use nvml_wrapper::Device;
use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::{TemperatureSensor, TemperatureThreshold};
use nvml_wrapper::error::NvmlError;
use nvml_wrapper_sys::bindings::{field_id, nvmlFieldValue_t, nvmlReturn_enum_NVML_SUCCESS};

use super::field_value::field_i64;

/// Slowdown and shutdown temperatures, °C: the threshold call while the
/// driver answers it (°C exactly as NVIDIA states them), else the T.Limit
/// field values converted to °C (see `tlimit_limits`); 0 where neither
/// answers. Where both answer and disagree, the agent says so once in
/// its log: the conversion is checked on the fake only (docs/NVML.md),
/// and a GPU will tell.
pub(super) fn temperature_limits(nvml: &Nvml, d: &Device) -> (u32, u32) {
    let legacy = d
        .temperature_threshold(TemperatureThreshold::Slowdown)
        .ok()
        .zip(d.temperature_threshold(TemperatureThreshold::Shutdown).ok());
    let tlimit = tlimit_limits(nvml, d);
    if let Some((l, t)) = legacy.zip(tlimit).filter(|(l, t)| l != t) {
        tracing::warn!(
            "slowdown/shutdown: the threshold call says {} / {} °C, the T.Limit fields {} / {} °C; using the threshold call",
            l.0,
            l.1,
            t.0,
            t.1
        );
    }
    legacy.or(tlimit).unwrap_or((0, 0))
}

/// T.Limit thresholds are degrees below the GPU's maximum operating
/// temperature (negative: above it), which is the temperature now plus
/// the margin to it (nvmlDeviceGetMarginTemperature): nvidia-smi's
/// "Slowdown T.Limit Temp: -2 C" on a GPU at 34 °C with a 51 °C margin is
/// a slowdown at 87 °C. The temperature is read on both sides of the
/// margin, and again if it moved meanwhile.
fn tlimit_limits(nvml: &Nvml, d: &Device) -> Option<(u32, u32)> {
    use nvml_wrapper_sys::bindings::nvmlMarginTemperature_t;
    let lib = nvml.lib();
    let fields = lib.nvmlDeviceGetFieldValues.as_ref().ok()?;
    let margin = lib.nvmlDeviceGetMarginTemperature.as_ref().ok()?;
    let mut req = [
        field_id::NVML_FI_DEV_TEMPERATURE_SLOWDOWN_TLIMIT,
        field_id::NVML_FI_DEV_TEMPERATURE_SHUTDOWN_TLIMIT,
    ]
    .map(|id| {
        // SAFETY: nvmlFieldValue_t is plain old data; all-zero is a valid value.
        let mut v: nvmlFieldValue_t = unsafe { std::mem::zeroed() };
        v.fieldId = id;
        v
    });
    // SAFETY: a valid device handle and a buffer of two field values.
    if unsafe { fields(d.handle(), 2, req.as_mut_ptr()) } != nvmlReturn_enum_NVML_SUCCESS {
        return None;
    }
    let (slowdown, shutdown) = (field_i64(&req[0])?, field_i64(&req[1])?);
    for _ in 0..3 {
        let before = gpu_temperature(nvml, d).ok()?;
        let mut m = nvmlMarginTemperature_t {
            // nvmlMarginTemperature_v1: the struct's size, version 1 in the top byte.
            version: std::mem::size_of::<nvmlMarginTemperature_t>() as u32 | (1 << 24),
            marginTemperature: 0,
        };
        // SAFETY: a valid device handle and a versioned struct NVML fills.
        if unsafe { margin(d.handle(), &mut m) } != nvmlReturn_enum_NVML_SUCCESS {
            return None;
        }
        if gpu_temperature(nvml, d).ok()? == before {
            let max = i64::from(before) + i64::from(m.marginTemperature);
            let at = |tlimit: i64| u32::try_from(max - tlimit).ok();
            return at(slowdown).zip(at(shutdown));
        }
    }
    None
}

/// GPU temperature, °C: nvmlDeviceGetTemperatureV where the driver has
/// it (nvmlDeviceGetTemperature is deprecated), the old call otherwise.
pub(super) fn gpu_temperature(nvml: &Nvml, d: &Device) -> Result<u32, NvmlError> {
    if let Ok(sym) = nvml.lib().nvmlDeviceGetTemperatureV.as_ref() {
        let mut t = nvml_wrapper_sys::bindings::nvmlTemperature_t {
            // nvmlTemperature_v1: the struct's size, version 1 in the top byte.
            version: std::mem::size_of::<nvml_wrapper_sys::bindings::nvmlTemperature_t>() as u32 | (1 << 24),
            sensorType: nvml_wrapper_sys::bindings::nvmlTemperatureSensors_enum_NVML_TEMPERATURE_GPU,
            temperature: 0,
        };
        // SAFETY: a valid device handle and a versioned struct NVML fills.
        let rc = unsafe { sym(d.handle(), &mut t) };
        if rc == nvmlReturn_enum_NVML_SUCCESS {
            return Ok(u32::try_from(t.temperature).unwrap_or(0));
        }
    }
    d.temperature(TemperatureSensor::Gpu)
}
