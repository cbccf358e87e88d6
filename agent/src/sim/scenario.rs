//! The named scenarios a simulated node can play (`--scenario`): what goes
//! wrong, as the CLI lists it. Apart from how each one shows in the readings
//! (`gpu`, `ib`, `sampler`), so the list reads as the menu it is.

/// What goes on on a simulated node. `fleetop-agent --help` lists these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Scenario {
    /// Busy training job on every GPU; nothing wrong.
    Training,
    /// No jobs: GPUs idle and empty; nothing wrong either.
    Quiet,
    /// A job holds every GPU but leaves them at 0% (the waste SREs hunt).
    Idle,
    /// One GPU overheats and throttles (HW and SW thermal slowdown).
    ThermalThrottle,
    /// One GPU runs close to its slowdown temperature, not yet throttling.
    Hot,
    /// One GPU's clocks are cut by the power brake (HW power brake slowdown).
    PowerBrake,
    /// One GPU sits at its software power cap for minutes (informational).
    PowerCap,
    /// One GPU falls off the bus: XID 79, then every reading fails.
    Xid79,
    /// One GPU reports uncorrectable ECC errors (XID 94, a row pending remap,
    /// an earlier remap failed).
    EccUncorrectable,
    /// One NVLink link of one GPU goes down.
    NvlinkDown,
    /// One InfiniBand port goes down.
    IbDown,
    /// One InfiniBand port's symbol errors keep rising.
    IbErrors,
    /// The agent's sampling hangs (as when a driver call blocks): the node goes stale.
    Hang,
    /// One GPU is busy by utilization but few of its SMs work (an input-bound
    /// job): what GPM shows and util % hides.
    Underused,
    /// One GPU's NVML calls stop returning: it is reported stuck while the
    /// other GPUs keep reporting.
    NvmlStuck,
    /// One busy GPU's PCIe link trains to half its width (x8 of x16).
    PcieDegraded,
    /// One GPU's NVLink fabric registration fails (completed, with an
    /// error): on an NVSwitch system CUDA will not start on it.
    FabricFailed,
    /// Persistence mode is off on every GPU of the node.
    PersistenceOff,
    /// One GPU is on the PCI bus but not in NVML (as after a bad reboot):
    /// the node lists one GPU fewer than it should have.
    GpuMissing,
    /// An NVSwitch reports a fatal SXid (kernel log).
    SxidFatal,
    /// nvidia_peermem is not loaded on this node with InfiniBand.
    NoPeermem,
    /// The node runs an older driver and VBIOS than the rest of the fleet.
    OldDriver,
    /// AMD: one GPU reports an uncorrectable ECC error in its HBM (RAS block
    /// UMC) and the driver resets it (AMD SMI's gpu_pre_reset and
    /// gpu_post_reset events), retiring the bad page. On an NVIDIA model it
    /// plays ecc-uncorrectable.
    RasUncorrectable,
}

impl Scenario {
    /// Scenario name as written on the command line.
    pub fn name(self) -> String {
        clap::ValueEnum::to_possible_value(&self)
            .map(|v| v.get_name().to_string())
            .unwrap_or_default()
    }

    pub fn all() -> &'static [Scenario] {
        <Scenario as clap::ValueEnum>::value_variants()
    }

    /// Whether the scenario is NVIDIA's alone: its fault is an NVIDIA
    /// thing (an XID, NVML's GPM, the NVLink fabric, persistence mode, an
    /// NVSwitch, nvidia_peermem) or judged against NVIDIA peers. A demo
    /// places these on NVIDIA nodes only.
    pub fn nvidia_only(self) -> bool {
        matches!(
            self,
            Scenario::Xid79
                | Scenario::EccUncorrectable
                | Scenario::Underused
                | Scenario::FabricFailed
                | Scenario::PersistenceOff
                | Scenario::SxidFatal
                | Scenario::NoPeermem
                | Scenario::OldDriver
        )
    }

    /// Whether the scenario is AMD's alone (a demo places it on AMD nodes).
    pub fn amd_only(self) -> bool {
        self == Scenario::RasUncorrectable
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scenario_has_a_cli_name() {
        let names: Vec<String> = Scenario::all().iter().map(|s| s.name()).collect();
        assert!(names.contains(&"thermal-throttle".to_string()));
        assert!(names.contains(&"xid79".to_string()));
        assert!(names.contains(&"ras-uncorrectable".to_string()));
        assert_eq!(names.len(), 23);
    }
}
