//! TEMPORARY stand-in with the final API (replaced by the cudarc module).
use std::sync::atomic::AtomicBool;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    pub name: String,
    pub gpu: Option<u32>,
    pub peer: Option<u32>,
    pub value: f64,
    pub unit: &'static str,
    pub samples: usize,
}
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum GpuBenchError {
    #[error("no CUDA driver: {0}")]
    NoDriver(String),
    #[error("{lib} not available: {why}")]
    NoLibrary { lib: &'static str, why: String },
    #[error("CUDA error: {0}")]
    Cuda(String),
}
#[derive(Debug, Clone)]
pub struct GpuBenchConfig {
    pub bytes: usize,
    pub warmup: u32,
    pub iterations: u32,
}
fn none<T>() -> Result<T, GpuBenchError> {
    Err(GpuBenchError::NoDriver("stand-in".into()))
}
pub fn device_count() -> Result<u32, GpuBenchError> {
    none()
}
pub fn hbm_copy(_: u32, _: &GpuBenchConfig) -> Result<Measurement, GpuBenchError> {
    none()
}
pub fn pcie_h2d(_: u32, _: &GpuBenchConfig) -> Result<Measurement, GpuBenchError> {
    none()
}
pub fn pcie_d2h(_: u32, _: &GpuBenchConfig) -> Result<Measurement, GpuBenchError> {
    none()
}
pub fn p2p_copy(_: u32, _: u32, _: &GpuBenchConfig) -> Result<Measurement, GpuBenchError> {
    none()
}
pub fn nccl_allreduce(_: &[u32], _: &GpuBenchConfig) -> Result<[Measurement; 2], GpuBenchError> {
    none()
}
pub fn gemm_burn(_: u32, _: Duration, _: &AtomicBool) -> Result<Measurement, GpuBenchError> {
    none()
}
pub fn median(xs: &[f64]) -> Option<f64> {
    super::median(xs)
}
