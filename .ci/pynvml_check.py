#!/usr/bin/env python3
"""The fake NVML's ABI, checked by code NVIDIA wrote.

For each profile, loads the fake libnvidia-ml.so.1 with NVIDIA's own Python
bindings (pip package nvidia-ml-py, module pynvml), reads every field the
agent reads, and compares with what
`fleetop-agent sample --once --format json --backend nvml --nvml-lib FAKE`
reports for the same profile and moment (FAKE_NVML_TIME_S freezes the fake's
clock). pynvml runs in a child process per profile: the library, once loaded,
keeps its profile for the life of the process.

Usage: pynvml_check.py AGENT_BIN FAKE_LIB PROFILE_DIR
"""

import json
import os
import subprocess
import sys
import tempfile

# Left out on purpose: faults/hang-at-start.toml and
# faults/hang-every-gpu-at-start.toml (a GPU blocks 300 s at start;
# pynvml would wait for it; agent/tests/start_hang.rs reads them).
PROFILES = [
    "h100-sxm5.toml",
    "h200.toml",
    "a100-sxm4-80gb-mig.toml",
    "h100-sxm5-mig.toml",
    "faults/remap.toml",
    "faults/nvlink.toml",
    "faults/degraded.toml",
    "faults/pcie-degraded.toml",
    "faults/fabric.toml",
    "faults/persistence-off.toml",
]
MOMENT_S = "15"

# GpuSample.absent bits (proto/src/absent.rs).
ABSENT = {
    "util": 1 << 0, "mem_util": 1 << 1, "temp": 1 << 2, "hbm_temp": 1 << 3,
    "power": 1 << 4, "energy": 1 << 5, "sm_clock": 1 << 6, "mem_clock": 1 << 7,
    "throttle": 1 << 8, "pcie": 1 << 9, "pcie_replay": 1 << 10, "ecc": 1 << 11,
    "remap": 1 << 12, "processes": 1 << 13, "mem_used": 1 << 14, "power_limit": 1 << 15,
}



def temperature_limits(n, h):
    """Slowdown and shutdown, °C, as the agent takes them: the threshold
    call while the driver answers it, else the T.Limit fields (degrees below
    the maximum operating temperature = the temperature now + the margin),
    0 for neither."""
    def legacy(kind):
        return n.nvmlDeviceGetTemperatureThreshold(h, kind)
    try:
        return legacy(n.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN), legacy(n.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN)
    except n.NVMLError:
        pass
    try:
        vals = n.nvmlDeviceGetFieldValues(h, [n.NVML_FI_DEV_TEMPERATURE_SLOWDOWN_TLIMIT,
                                              n.NVML_FI_DEV_TEMPERATURE_SHUTDOWN_TLIMIT])
        if all(v.nvmlReturn == n.NVML_SUCCESS for v in vals):
            for _ in range(3):
                before = n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU)
                margin = n.nvmlDeviceGetMarginTemperature(h)
                if n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU) == before:
                    top = before + margin
                    return top - vals[0].value.siVal, top - vals[1].value.siVal
    except n.NVMLError:
        pass
    return 0, 0

def fabric(n, h):
    """The GPU's fabric registration as the wire carries it: (NVML's state
    + 1, and once completed its status), (0, 0) where not reported. Read
    with nvmlDeviceGetGpuFabricInfoV and the v2 struct, as the agent does;
    the v3 struct and the deprecated unversioned call must say the same
    (the fake serves all three), else a third element says how they differ."""
    def via(make, fn):
        info = make()
        try:
            fn(h, byref(info))
        except n.NVMLError:
            return (0, 0)
        # nvml.h's state is one byte; pynvml declares it a 4-byte c_uint,
        # which takes in the padding after it: the low byte is the state.
        state = info.state & 0xFF
        done = state == n.NVML_GPU_FABRIC_STATE_COMPLETED
        return (state + 1, info.status if done else 0)
    from ctypes import byref
    v2 = via(n.c_nvmlGpuFabricInfo_v2_t, n.nvmlDeviceGetGpuFabricInfoV)
    v3 = via(n.c_nvmlGpuFabricInfo_v3_t, n.nvmlDeviceGetGpuFabricInfoV)
    v1 = via(n.c_nvmlGpuFabricInfo_t, n.nvmlDeviceGetGpuFabricInfo)
    if v2 != v3 or v2 != v1:
        return v2 + (f"v2 {v2}, v3 {v3}, unversioned {v1}",)
    return v2


def read_with_pynvml():
    """Runs in the child: everything the agent reads, as pynvml reads it."""
    import pynvml as n

    def call(f, *a):
        try:
            return f(*a)
        except n.NVMLError:
            return None

    def text(v):
        return v.decode() if isinstance(v, bytes) else v

    n.nvmlInit()
    out = {"driver_version": text(n.nvmlSystemGetDriverVersion()),
           "cuda_version": n.nvmlSystemGetCudaDriverVersion_v2(), "gpus": []}
    for i in range(n.nvmlDeviceGetCount()):
        try:
            h = n.nvmlDeviceGetHandleByIndex(i)
        except n.NVMLError as e:
            out["gpus"].append({"index": i, "open_error": str(e)})
            continue
        g = {"index": i}
        g["uuid"] = text(n.nvmlDeviceGetUUID(h))
        g["model"] = text(n.nvmlDeviceGetName(h))
        g["pci_bus_id"] = text(n.nvmlDeviceGetPciInfo(h).busId)
        mem = n.nvmlDeviceGetMemoryInfo(h, version=n.nvmlMemory_v2)
        g["mem_total_bytes"] = mem.total
        g["mem_used_bytes"] = mem.used
        g["power_limit_mw"] = n.nvmlDeviceGetEnforcedPowerLimit(h)
        g["max_sm_clock_mhz"] = n.nvmlDeviceGetMaxClockInfo(h, n.NVML_CLOCK_SM)
        g["max_mem_clock_mhz"] = n.nvmlDeviceGetMaxClockInfo(h, n.NVML_CLOCK_MEM)
        g["slowdown_temp_c"], g["shutdown_temp_c"] = temperature_limits(n, h)
        g["vbios_version"] = text(call(n.nvmlDeviceGetVbiosVersion, h) or "")
        g["pcie_max_gen"] = call(n.nvmlDeviceGetMaxPcieLinkGeneration, h) or 0
        g["pcie_max_width"] = call(n.nvmlDeviceGetMaxPcieLinkWidth, h) or 0
        g["pcie_gen"] = call(n.nvmlDeviceGetCurrPcieLinkGeneration, h) or 0
        g["pcie_width"] = call(n.nvmlDeviceGetCurrPcieLinkWidth, h) or 0
        # Wire: 0 unknown, 1 off, 2 on.
        mode = call(n.nvmlDeviceGetPersistenceMode, h)
        g["persistence"] = 0 if mode is None else (2 if mode == n.NVML_FEATURE_ENABLED else 1)
        g["fabric"] = fabric(n, h)
        u = call(n.nvmlDeviceGetUtilizationRates, h)
        g["util_pct"] = u.gpu if u else None
        g["mem_util_pct"] = u.memory if u else None
        g["temp_c"] = n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU)
        g["power_mw"] = n.nvmlDeviceGetPowerUsage(h)
        g["energy_mj"] = n.nvmlDeviceGetTotalEnergyConsumption(h)
        g["sm_clock_mhz"] = n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM)
        g["mem_clock_mhz"] = n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_MEM)
        g["throttle_reasons"] = n.nvmlDeviceGetCurrentClocksEventReasons(h)
        g["pcie_tx_kbps"] = n.nvmlDeviceGetPcieThroughput(h, n.NVML_PCIE_UTIL_TX_BYTES)
        g["pcie_rx_kbps"] = n.nvmlDeviceGetPcieThroughput(h, n.NVML_PCIE_UTIL_RX_BYTES)
        g["pcie_replay_count"] = n.nvmlDeviceGetPcieReplayCounter(h)
        g["ecc_corrected_volatile"] = n.nvmlDeviceGetTotalEccErrors(
            h, n.NVML_MEMORY_ERROR_TYPE_CORRECTED, n.NVML_VOLATILE_ECC)
        g["ecc_uncorrected_volatile"] = n.nvmlDeviceGetTotalEccErrors(
            h, n.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, n.NVML_VOLATILE_ECC)
        corr, unc, pending, failed = n.nvmlDeviceGetRemappedRows(h)
        g["remapped_rows_correctable"] = corr
        g["remapped_rows_uncorrectable"] = unc
        g["remapped_rows_pending"] = pending
        g["remapped_rows_failed"] = failed
        links = []
        for link in range(36):
            if call(n.nvmlDeviceGetNvLinkState, h, link) is None:
                continue
            links.append(link)
        g["nvlinks"] = [{"link": l, "peer_pci_bus_id": text(n.nvmlDeviceGetNvLinkRemotePciInfo(h, l).busId)}
                        for l in links]
        ids = [(n.NVML_FI_DEV_MEMORY_TEMP, 0)]
        for l in links:
            ids += [(n.NVML_FI_DEV_NVLINK_GET_STATE, l), (n.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, l),
                    (n.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, l)]
        vals = n.nvmlDeviceGetFieldValues(h, ids)

        def value(v):
            if v.nvmlReturn != n.NVML_SUCCESS:
                return None
            return {n.NVML_VALUE_TYPE_UNSIGNED_INT: v.value.uiVal,
                    n.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: v.value.ullVal}[v.valueType]

        g["hbm_temp_c"] = value(vals[0])
        g["nvlink_state"] = [value(vals[1 + 3 * k]) for k in range(len(links))]
        g["nvlink_tx_kib"] = [value(vals[2 + 3 * k]) for k in range(len(links))]
        g["nvlink_rx_kib"] = [value(vals[3 + 3 * k]) for k in range(len(links))]
        procs = call(n.nvmlDeviceGetComputeRunningProcesses, h)
        g["processes"] = None if procs is None else [
            {"pid": p.pid, "used_mem_bytes": p.usedGpuMemory} for p in procs]
        out["gpus"].append(g)
    n.nvmlShutdown()
    return out


def compare(name, agent, py):
    info, sample = agent["info"], agent["sample"]
    bad = []

    def eq(what, a, b):
        if a != b:
            bad.append(f"{name}: {what}: agent {a!r}, pynvml {b!r}")

    eq("driver_version", info.get("driver_version"), py["driver_version"])
    v = py["cuda_version"]
    eq("cuda_version", info.get("cuda_version"), f"{v // 1000}.{v % 1000 // 10}")
    descs = {g["index"]: g for g in info["gpus"]}
    samples = {g["index"]: g for g in sample["gpus"]}
    eq("GPU count", sorted(samples), [g["index"] for g in py["gpus"]])
    for p in py["gpus"]:
        i = p["index"]
        d, s = descs.get(i, {}), samples.get(i, {})
        if "open_error" in p:
            eq(f"GPU {i} error", bool(s.get("error")), True)
            continue
        # A call that hangs (the degraded profile's 3 s power reading): the
        # agent does not wait for it and reports the GPU stuck, with no
        # readings, while pynvml waited and read them. Its description must
        # still agree; its readings cannot.
        stuck = str(s.get("error", "")).startswith("nvml_stuck")
        absent = s.get("absent", 0)
        for k in ["uuid", "model", "pci_bus_id", "mem_total_bytes", "power_limit_mw", "max_sm_clock_mhz",
                  "max_mem_clock_mhz", "slowdown_temp_c", "shutdown_temp_c", "vbios_version", "pcie_max_gen",
                  "pcie_max_width"]:
            eq(f"GPU {i} {k}", d.get(k, "" if k in ("uuid", "model", "pci_bus_id", "vbios_version") else 0), p[k])
        eq(f"GPU {i} nvlinks", [{"link": l["link"], "peer_pci_bus_id": l.get("peer_pci_bus_id", "")}
                                for l in d.get("nvlinks", [])], p["nvlinks"])
        if stuck:
            eq(f"GPU {i} stuck in", "nvmlDeviceGetPowerUsage" in s["error"] and name.startswith("faults/degraded"), True)
            continue
        for k, bit in [("util_pct", "util"), ("mem_util_pct", "mem_util"), ("hbm_temp_c", "hbm_temp")]:
            agent_v = None if absent & ABSENT[bit] else s.get(k, 0)
            eq(f"GPU {i} {k}", agent_v, p[k])
        for k in ["mem_used_bytes", "temp_c", "power_mw", "energy_mj", "sm_clock_mhz", "mem_clock_mhz",
                  "throttle_reasons", "pcie_tx_kbps", "pcie_rx_kbps", "pcie_replay_count",
                  "ecc_corrected_volatile", "ecc_uncorrected_volatile", "remapped_rows_correctable",
                  "remapped_rows_uncorrectable", "remapped_rows_pending", "remapped_rows_failed"]:
            eq(f"GPU {i} {k}", s.get(k, 0), p[k])
        for k in ["pcie_gen", "pcie_width", "persistence"]:
            eq(f"GPU {i} {k}", s.get(k, 0), p[k])
        eq(f"GPU {i} fabric (state + 1, status)", (s.get("fabric_state", 0), s.get("fabric_status", 0)),
           tuple(p["fabric"]))
        # No states on the wire means every link active.
        states = s.get("nvlink_state") or [1] * len(d.get("nvlinks", []))
        eq(f"GPU {i} nvlink_state", states, p["nvlink_state"])
        # The first sample carries the NVLink counters.
        eq(f"GPU {i} nvlink_tx_kib", s.get("nvlink_tx_kib", []), p["nvlink_tx_kib"])
        eq(f"GPU {i} nvlink_rx_kib", s.get("nvlink_rx_kib", []), p["nvlink_rx_kib"])
        procs = None if absent & ABSENT["processes"] else [
            {"pid": x["pid"], "used_mem_bytes": x.get("used_mem_bytes", 0)} for x in s.get("processes", [])]
        eq(f"GPU {i} processes", procs, p["processes"])
    return bad


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "--child":
        print(json.dumps(read_with_pynvml()))
        return 0
    agent_bin, fake_lib, profile_dir = sys.argv[1:4]
    bad = []
    with tempfile.TemporaryDirectory() as tmp:
        # pynvml opens "libnvidia-ml.so.1" by name: the fake under that name.
        os.symlink(os.path.abspath(fake_lib), os.path.join(tmp, "libnvidia-ml.so.1"))
        for prof in PROFILES:
            env = dict(os.environ, FAKE_NVML_PROFILE=os.path.join(profile_dir, prof), FAKE_NVML_TIME_S=MOMENT_S,
                       FLEETOP_LOG="error", LD_LIBRARY_PATH=tmp)
            agent = subprocess.run(
                [agent_bin, "sample", "--once", "--format", "json", "--backend", "nvml", "--kmsg", "none", "--nvml-lib", fake_lib,
                 "--ib-sysfs", "/nonexistent"], env=env, check=True, capture_output=True, text=True)
            py = subprocess.run([sys.executable, __file__, "--child"], env=env, check=True, capture_output=True,
                                text=True)
            found = compare(prof, json.loads(agent.stdout), json.loads(py.stdout))
            print(f"{prof}: {'ok' if not found else f'{len(found)} differences'}")
            bad += found
    for b in bad:
        print(b, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
