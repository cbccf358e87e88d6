//! One fault that NVML's event set and the kernel log both report travels
//! once: the agent's collector, in process, on the fake NVML (its xids.toml
//! script: XID 79 on GPU 0, 48 on GPU 1, ...) with a kernel log that has the
//! same XID 79 a moment later. Its own test binary: the fake NVML takes its
//! profile from the environment, set here before anything else runs.

use std::io::Write;
use std::path::Path;

use fleetop_agent::backend::{self, Backend, BackendOptions, StateDir};
use fleetop_agent::sim::{Model, Scenario, SimConfig};

#[path = "common/fake_nvml.rs"]
mod fake_nvml;

#[test]
fn nvml_and_kernel_log_report_one_xid_once() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let lib = fake_nvml::fake_lib();
    // SAFETY: the only test of this binary, before it starts any thread.
    unsafe {
        std::env::set_var(
            "FAKE_NVML_PROFILE",
            root.join("tests/fake-nvml/profiles/faults/xids.toml"),
        );
    }

    let dir = tempfile::tempdir().expect("tempdir");
    // A boot 1000 s ago: a record at 1000 s since boot is now, give or take
    // the boot time's whole second, as the kernel would stamp the XID NVML
    // reports now.
    let now_s = fleetop_agent::now_ms() / 1000;
    let proc_root = dir.path().join("proc");
    std::fs::create_dir_all(proc_root.join("sys/kernel/random")).expect("mkdir");
    std::fs::write(proc_root.join("stat"), format!("btime {}\n", now_s - 1000)).expect("w");
    std::fs::write(
        proc_root.join("sys/kernel/random/boot_id"),
        "0b0c0d0e-0000-4000-8000-000000000001\n",
    )
    .expect("w");
    let log = dir.path().join("kmsg");
    std::fs::write(
        &log,
        concat!(
            "3,7,1000000000,-;NVRM: Xid (PCI:0000:18:00): 79, pid=1, name=x, GPU has fallen off the bus.\n",
            " SUBSYSTEM=pci\n",
            // A continuation line is never a record, whatever it says.
            " 3,8,1000000050,-;NVRM: Xid (PCI:0000:ba:00): 13, x\n",
            "3,8,1000000100,-;NVRM: Xid (PCI:0000:ba:00): 31, pid=1, name=x, MMU Fault\n",
        ),
    )
    .expect("w");

    let mut opts = BackendOptions::sim(SimConfig {
        hostname: "t".into(),
        gpus: 8,
        ib_ports: 0,
        model: Model::H100,
        scenario: Scenario::Training,
        seed: 1,
        start_ms: 0,
        problem_ms: None,
        interval_ms: 200,
    });
    opts.backend = Backend::Nvml;
    opts.nvml_lib = Some(lib.to_path_buf());
    opts.ib_sysfs = "/nonexistent".into();
    opts.sysfs_root = "/nonexistent".into();
    opts.proc_root = proc_root;
    opts.kmsg = Some(log.clone());
    opts.state_dir = Some(StateDir {
        path: dir.path().join("state"),
        given: true,
    });
    let (mut c, note) = backend::build(&opts).expect("the fake NVML loads");
    assert!(note.is_none());
    assert!(c.blocks(), "driver calls are made off the async runtime");

    let mut seen = Vec::new();
    for i in 0..10 {
        if i == 5 {
            // The kernel log grows while the agent runs: followed.
            let mut f = std::fs::OpenOptions::new().append(true).open(&log).expect("append");
            writeln!(
                f,
                "3,9,1000000200,-;NVRM: Xid (PCI:0000:5d:00.0): 94, pid=1, name=x, Contained ECC"
            )
            .expect("w");
        }
        std::thread::sleep(std::time::Duration::from_millis(150));
        let s = c.sample(fleetop_agent::now_ms()).expect("a sample");
        for g in &s.gpus {
            for x in &g.xids {
                seen.push((g.index, x.xid, x.source));
            }
        }
    }
    let count = |gpu, code| seen.iter().filter(|(g, x, _)| *g == gpu && *x == code).count();
    assert_eq!(count(0, 79), 1, "one fall off the bus, two reports: {seen:?}");
    assert_eq!(count(1, 48), 1, "NVML's own: {seen:?}");
    assert!(seen.contains(&(1, 48, 0)), "{seen:?}");
    assert!(seen.contains(&(6, 31, 1)), "the kernel log's alone: {seen:?}");
    assert_eq!(count(6, 13), 0, "{seen:?}");
    assert!(seen.contains(&(3, 94, 1)), "appended and read: {seen:?}");
    let journal = &c.info().fault_journal;
    let gpu0_79 = journal.iter().filter(|r| r.code == 79).count();
    assert_eq!(gpu0_79, 1, "{journal:?}");
    assert!(
        journal
            .iter()
            .all(|r| r.boot_id == "0b0c0d0e-0000-4000-8000-000000000001"),
        "{journal:?}"
    );
}
