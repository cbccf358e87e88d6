//! Where the console's data comes from: agent streams (decoded once into the
//! domain model), the scheduler, the demo cluster, and which nodes a SOURCE
//! names. Everything read here leaves as `model` types.

pub mod agent;
pub mod amd_exporter;
pub mod conn;
pub mod dcgm;
pub mod decode;
#[cfg(feature = "demo")]
pub mod demo;
pub mod hostlist;
pub mod kube;
pub mod pace;
pub mod prometheus;
pub mod promjson;
pub mod promtext;
pub mod racks;
pub mod ray;
pub mod scrape;
pub mod slurm;
pub mod source;
pub mod stream_conn;
pub mod targets;
