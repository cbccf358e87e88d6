#!/usr/bin/env python3
"""The fake AMD SMI's ABI, read by code AMD wrote.

For each profile of tests/fake-amdsmi, loads the fake libamd_smi.so with
AMD's own Python package (`amdsmi` 7.0.2 from PyPI: a ctypes binding of
amdsmi.h that binds 184 functions when imported), reads every value fleetop
reports for every GPU, and dumps them as JSON: profile, then GPU index (as
amd-smi numbers them: partitions are GPUs), then field, in fleetop's units
(bytes, mW, mJ, °C, MHz, percent, KB for XGMI counters). `None` is a value
the library answered "not supported" for.

amdsmi finds the library as AMD's tools do: $ROCM_PATH/lib/libamd_smi.so, so
each profile runs in a child process with ROCM_PATH pointing at a temporary
directory whose lib/ holds the fake (the library keeps its profile for the
life of the process). FAKE_AMDSMI_TIME_S freezes the fake's clock at a
moment after every fault, so that another reader (the agent) can be
compared with this dump.

It fails (exit 1) when amdsmi cannot be imported on the fake, when a call
fleetop uses raises (other than on a GPU the profile loses), or when a fault
the profile scripts does not show.

Usage:
  amdsmi_check.py dump PROFILE_DIR LIB [--out FILE]
      every profile; JSON to FILE (else stdout), a one-line summary to
      stdout (stderr when the JSON goes to stdout)
  amdsmi_check.py one PROFILE LIB
      one profile's dump, JSON to stdout
  amdsmi_check.py compare PROFILE_DIR LIB AGENT [--out FILE]
      the dump and its checks, then the agent (`AGENT sample --once
      --backend amd`, on the same fake at the same frozen moment) for every
      profile: each value the agent reports must equal amdsmi's, in
      fleetop's units; one line per difference, a one-line summary

Run it with the Python of a venv that has amdsmi==7.0.2 (.ci/run makes one
in ~/.cache/fleetop/amdsmi-7.0.2).
"""

import json
import os
import subprocess
import sys
import tempfile

AMDSMI_VERSION = "7.0.2"
MOMENT_S = "20"

# Each profile, with what must show in it at MOMENT_S: GPU index -> checks
# on its dump, and the GPUs that are lost (every call on them raises).
# Left out on purpose: faults/hang-at-start.toml (a GPU blocks 30 s in
# every call; amdsmi would wait for it; agent/tests/start_hang.rs reads it).
PROFILES = {
    "mi300x-oam.toml": {},
    "mi300x-cpx-nps4.toml": {},
    "faults/ras-uncorrectable.toml": {
        "expect": {3: lambda g: g["ecc"]["UMC"][1] == 1 and len(g["bad_pages"]) == 1
                   and [e["event"] for e in g["events"]] == ["GPU_PRE_RESET", "GPU_POST_RESET"]},
    },
    "faults/xgmi-link-down.toml": {
        "expect": {1: lambda g: g["xgmi_link_status"][3] == "D" and g["xgmi_error_status"] == 1,
                   4: lambda g: g["xgmi_link_status"][1] == "D" and g["metrics_xgmi_link_status"][1] == 0},
    },
    "faults/thermal-throttle.toml": {
        "expect": {5: lambda g: g["temp_hotspot_c"] == 104 and g["gfx_clock_mhz"] == 1350
                   and g["violation"]["active_socket_thrm"] is True and g["indep_throttle_status"] != 0
                   and [e["event"] for e in g["events"]] == ["THERMAL_THROTTLE"]},
    },
    "faults/gpu-lost.toml": {"lost": [6]},
}

# Names fleetop reads ECC per block by: every block AMD SMI 7.0.2 knows.
BLOCKS = ["UMC", "SDMA", "GFX", "MMHUB", "ATHUB", "PCIE_BIF", "HDP", "XGMI_WAFL", "DF", "SMN", "SEM",
          "MP0", "MP1", "FUSE", "MCA", "VCN", "JPEG", "IH", "MPIO"]


def read_with_amdsmi():
    """Runs in the child: every value fleetop reports, as amdsmi reads it.
    Returns {gpu index: {field: value}}."""
    import amdsmi as a
    from amdsmi import amdsmi_wrapper as w
    from amdsmi.amdsmi_exception import AmdSmiLibraryException

    not_supported = w.AMDSMI_STATUS_NOT_SUPPORTED

    def opt(f, *args):
        """A call whose "not supported" fleetop takes as absent."""
        try:
            return f(*args)
        except AmdSmiLibraryException as e:
            if e.get_error_code() == not_supported:
                return None
            raise

    def na(v):
        """amd-smi's "N/A" (an all-ones field) as None."""
        return None if v == "N/A" else v

    def raw(fn, struct, h):
        """A struct through AMD's ctypes binding itself, where the Python
        interface drops or reshapes a field fleetop reads (the throttle
        fields become booleans; the PCIe maximum generation is left out)."""
        import ctypes
        m = struct()
        code = fn(h, ctypes.byref(m))
        if code != w.AMDSMI_STATUS_SUCCESS:
            raise AmdSmiLibraryException(code)
        return m

    a.amdsmi_init(a.AmdSmiInitFlags.INIT_AMD_GPUS)
    handles = a.amdsmi_get_processor_handles()
    index = {h.value: i for i, h in enumerate(handles)}
    # The first processor of each physical GPU, by BDF without the function
    # (AMD SMI puts the partition there).
    first = {}
    for i, h in enumerate(handles):
        first.setdefault(a.amdsmi_get_gpu_device_bdf(h).rsplit(".", 1)[0], i)

    T = a.AmdSmiTemperatureType
    M = a.AmdSmiTemperatureMetric
    out = {}
    for i, h in enumerate(handles):
        g = {"bdf": a.amdsmi_get_gpu_device_bdf(h),
             "processor_type": a.amdsmi_get_processor_type(h)["processor_type"]}
        out[i] = g
        try:
            read_gpu(a, w, h, g, opt, na, raw, T, M, handles, first)
        except AmdSmiLibraryException as e:
            g["error"] = w.amdsmi_status_t__enumvalues.get(e.get_error_code(), str(e.get_error_code()))

    # Events: every GPU asked for every kind, then one read (it returns the
    # events of all GPUs listening); none is AMDSMI_STATUS_NO_DATA.
    kinds = [k for k in a.AmdSmiEvtNotificationType if k != a.AmdSmiEvtNotificationType.NONE]
    readers = [a.AmdSmiEventReader(h, kinds) for h in handles]
    for g in out.values():
        g["events"] = []
    try:
        got = readers[0].read(0, 64) if readers else []
    except AmdSmiLibraryException as e:
        if e.get_error_code() != w.AMDSMI_STATUS_NO_DATA:
            raise
        got = []
    for e in got:
        out[index[e["processor_handle"].value]]["events"].append({"event": e["event"], "message": e["message"]})
    for r in readers:
        r.stop()
    a.amdsmi_shut_down()
    return out


def read_gpu(a, w, h, g, opt, na, raw, T, M, handles, first):
    asic = a.amdsmi_get_gpu_asic_info(h)
    board = a.amdsmi_get_gpu_board_info(h)
    g["uuid"] = a.amdsmi_get_gpu_device_uuid(h)
    g["market_name"] = asic["market_name"]
    g["product_name"] = board["product_name"]
    # The board's part number and serial: AMD's exporter's card_model and
    # serial_number labels.
    g["board_part_number"] = "" if board["model_number"] == "N/A" else board["model_number"]
    g["board_serial"] = "" if board["product_serial"] == "N/A" else board["product_serial"]
    g["device_id"] = asic["device_id"]
    g["serial"] = asic["asic_serial"]
    g["oam_id"] = na(asic["oam_id"])
    g["compute_units"] = na(asic["num_compute_units"])
    g["gfx_version"] = asic["target_graphics_version"]
    vbios = a.amdsmi_get_gpu_vbios_info(h)
    g["vbios_version"] = vbios["version"]
    g["vbios_part_number"] = vbios["part_number"]
    drv = a.amdsmi_get_gpu_driver_info(h)
    g["driver_name"] = drv["driver_name"]
    g["driver_version"] = drv["driver_version"]
    g["firmware"] = {f["fw_name"].name.replace("AMDSMI_FW_ID_", ""): f["fw_version"]
                     for f in a.amdsmi_get_fw_info(h)["fw_list"]}
    g["partition_id"] = na(a.amdsmi_get_gpu_kfd_info(h)["current_partition_id"])
    g["compute_partition"] = a.amdsmi_get_gpu_compute_partition(h)
    g["memory_partition"] = a.amdsmi_get_gpu_memory_partition(h)

    act = a.amdsmi_get_gpu_activity(h)
    g["util_pct"] = na(act["gfx_activity"])
    g["mem_util_pct"] = na(act["umc_activity"])
    vram = a.AmdSmiMemoryType.VRAM
    g["vram_total_bytes"] = a.amdsmi_get_gpu_memory_total(h, vram)
    g["vram_used_bytes"] = a.amdsmi_get_gpu_memory_usage(h, vram)

    for sensor, name in [(T.EDGE, "edge"), (T.HOTSPOT, "hotspot"), (T.VRAM, "vram")]:
        g[f"temp_{name}_c"] = opt(a.amdsmi_get_temp_metric, h, sensor, M.CURRENT)
        g[f"temp_{name}_critical_c"] = opt(a.amdsmi_get_temp_metric, h, sensor, M.CRITICAL)
        g[f"temp_{name}_emergency_c"] = opt(a.amdsmi_get_temp_metric, h, sensor, M.EMERGENCY)

    power = a.amdsmi_get_power_info(h)
    # W on Linux bare metal; MI300 gives the current socket power.
    g["power_mw"] = power["current_socket_power"] * 1000
    g["socket_power_mw"] = power["socket_power"] * 1000
    cap = a.amdsmi_get_power_cap_info(h)
    # µW.
    g["power_cap_mw"] = cap["power_cap"] // 1000
    g["power_cap_default_mw"] = cap["default_power_cap"] // 1000
    g["power_cap_min_mw"] = cap["min_power_cap"] // 1000
    g["power_cap_max_mw"] = cap["max_power_cap"] // 1000
    energy = a.amdsmi_get_energy_count(h)
    # counts x µJ per count; fleetop reports mJ.
    g["energy_mj"] = int(energy["energy_accumulator"] * energy["counter_resolution"] / 1000)

    gfx = a.amdsmi_get_clock_info(h, a.AmdSmiClkType.GFX)
    mem = a.amdsmi_get_clock_info(h, a.AmdSmiClkType.MEM)
    g["gfx_clock_mhz"], g["gfx_max_clock_mhz"] = na(gfx["clk"]), na(gfx["max_clk"])
    g["mem_clock_mhz"], g["mem_max_clock_mhz"] = na(mem["clk"]), na(mem["max_clk"])

    m = raw(w.amdsmi_get_gpu_metrics_info, w.amdsmi_gpu_metrics_t, h)
    g["throttle_status"] = None if m.throttle_status == 0xFFFFFFFF else m.throttle_status
    g["indep_throttle_status"] = None if m.indep_throttle_status == 2**64 - 1 else m.indep_throttle_status
    g["xgmi_read_kb"] = [None if v == 2**64 - 1 else v for v in m.xgmi_read_data_acc]
    g["xgmi_write_kb"] = [None if v == 2**64 - 1 else v for v in m.xgmi_write_data_acc]
    g["metrics_xgmi_link_status"] = [None if v == 0xFFFF else v for v in m.xgmi_link_status]
    g["pcie_link_speed_gts_x10"] = m.pcie_link_speed
    g["metrics_socket_power_mw"] = m.current_socket_power * 1000
    g["metrics_gfx_activity_pct"] = m.average_gfx_activity
    g["metrics_hotspot_c"] = m.temperature_hotspot
    # GFX busy per XCC of this partition, through amdsmi's own reading of
    # the table (its "N/A" for an XCC not reported): up to the first such.
    gm = a.amdsmi_get_gpu_metrics_info(h)
    g["num_partition"] = gm["num_partition"]
    part = g["partition_id"] or 0
    per_xcp = gm["xcp_stats.gfx_busy_inst"]
    busy = []
    if (gm["num_partition"] == "N/A" or part < gm["num_partition"]) and part < len(per_xcp):
        for v in per_xcp[part]:
            if v == "N/A":
                break
            busy.append(v)
    g["xcc_gfx_busy_pct"] = busy

    v = opt(a.amdsmi_get_violation_status, h)
    keys = ["acc_counter", "acc_prochot_thrm", "acc_ppt_pwr", "acc_socket_thrm", "acc_vr_thrm", "acc_hbm_thrm",
            "per_prochot_thrm", "per_ppt_pwr", "per_socket_thrm", "per_vr_thrm", "per_hbm_thrm",
            "active_prochot_thrm", "active_ppt_pwr", "active_socket_thrm", "active_vr_thrm", "active_hbm_thrm",
            "active_gfx_clk_below_host_limit"]
    g["violation"] = None if v is None else {k: na(v[k]) for k in keys}

    enabled = a.amdsmi_get_gpu_ecc_enabled(h)
    g["ecc_enabled_blocks"] = [b for b in BLOCKS if enabled & getattr(a.AmdSmiGpuBlock, b)]
    ecc = {}
    for b in g["ecc_enabled_blocks"]:
        c = a.amdsmi_get_gpu_ecc_count(h, getattr(a.AmdSmiGpuBlock, b))
        ecc[b] = [c["correctable_count"], c["uncorrectable_count"], c["deferred_count"]]
    g["ecc"] = ecc
    t = a.amdsmi_get_gpu_total_ecc_count(h)
    g["ecc_total"] = [t["correctable_count"], t["uncorrectable_count"], t["deferred_count"]]
    g["bad_pages"] = [{"address": p["page_address"], "size": p["page_size"], "status": p["status"]}
                      for p in a.amdsmi_get_gpu_bad_page_info(h)]

    pcie = a.amdsmi_get_pcie_info(h)
    s, mt = pcie["pcie_static"], pcie["pcie_metric"]
    g["pcie_gen"] = na(s["pcie_interface_version"])
    max_gen = raw(w.amdsmi_get_pcie_info, w.amdsmi_pcie_info_t, h).pcie_static.max_pcie_interface_version
    g["pcie_max_gen"] = None if max_gen == 0xFFFFFFFF else max_gen
    g["pcie_width"] = na(mt["pcie_width"])
    g["pcie_max_width"] = na(s["max_pcie_width"])
    g["pcie_speed_mts"] = na(mt["pcie_speed"])
    g["pcie_max_speed_mts"] = na(s["max_pcie_speed"])
    g["pcie_bandwidth_mbps"] = na(mt["pcie_bandwidth"])
    g["pcie_replay_count"] = na(mt["pcie_replay_count"])
    g["pcie_slot"] = s["slot_type"]

    ls = a.amdsmi_get_gpu_xgmi_link_status(h)
    g["xgmi_link_status"] = ls["status"]
    lm = a.amdsmi_get_link_metrics(h)
    g["xgmi_links"] = [{"peer_bdf": x["bdf"], "bit_rate_gbps": x["bit_rate"], "max_bandwidth_gbs": x["max_bandwidth"],
                        "type": x["link_type"], "read_kb": x["read"], "write_kb": x["write"]}
                       for x in lm["links"][:lm["num_links"]]]
    g["xgmi_error_status"] = a.amdsmi_gpu_xgmi_error_status(h)
    topo = {}
    for bdf, j in first.items():
        if bdf != g["bdf"].rsplit(".", 1)[0]:
            t = a.amdsmi_topo_get_link_type(h, handles[j])
            topo[j] = [t["hops"], t["type"]]
    g["links_to"] = topo

    g["processes"] = [{"pid": p["pid"], "name": p["name"], "vram_bytes": p["memory_usage"]["vram_mem"],
                       "gtt_bytes": p["memory_usage"]["gtt_mem"], "mem_bytes": p["mem"]}
                      for p in a.amdsmi_get_gpu_process_list(h)]


def check(name, spec, dump):
    """What is wrong with one profile's dump: calls that raised, faults
    that do not show."""
    bad = []
    lost = set(spec.get("lost", []))
    for i, g in dump.items():
        if "error" in g and int(i) not in lost:
            bad.append(f"{name}: GPU {i}: {g['error']}")
        if int(i) in lost and "error" not in g:
            bad.append(f"{name}: GPU {i} should be lost, answered")
    for i, ok in spec.get("expect", {}).items():
        g = dump.get(str(i)) or dump.get(i)
        try:
            if g is None or not ok(g):
                bad.append(f"{name}: GPU {i}: the fault does not show")
        except (KeyError, TypeError, IndexError) as e:
            bad.append(f"{name}: GPU {i}: {e!r}")
    return bad


def run_profile(path, lib, tmp):
    """One profile's dump, read in a child process."""
    env = dict(os.environ, ROCM_PATH=tmp, FAKE_AMDSMI_PROFILE=os.path.abspath(path), FAKE_AMDSMI_TIME_S=MOMENT_S)
    env.pop("ROCM_HOME", None)
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--child"], env=env, capture_output=True,
                       text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{path}: amdsmi failed:\n{r.stderr.strip()}")
    return json.loads(r.stdout)


def with_fake(lib, fn):
    """Runs fn(tmp) with tmp/lib/libamd_smi.so the fake."""
    with tempfile.TemporaryDirectory() as tmp:
        os.mkdir(os.path.join(tmp, "lib"))
        os.symlink(os.path.abspath(lib), os.path.join(tmp, "lib", "libamd_smi.so"))
        return fn(tmp)


def dump(profile_dir, lib):
    """Every profile: ({profile: {gpu: {field: value}}}, problems)."""
    out, bad = {}, []

    def go(tmp):
        for name, spec in PROFILES.items():
            try:
                d = run_profile(os.path.join(profile_dir, name), lib, tmp)
            except RuntimeError as e:
                bad.append(str(e))
                continue
            out[name] = d
            bad.extend(check(name, spec, d))

    with_fake(lib, go)
    return out, bad


# ---- compare: the agent against amdsmi ------------------------------------------

# NVML's throttle-reason bits (nvml.h), which the agent maps AMD's reasons
# onto so that fleetop's flags mean the same on both vendors.
SW_POWER_CAP, HW_SLOWDOWN, SW_THERMAL = 0x4, 0x8, 0x20

# MI300's violation status (amdsmi.h's active_* fields), each with its NVML bit.
VIOLATIONS = [("prochot_thrm", HW_SLOWDOWN), ("ppt_pwr", SW_POWER_CAP), ("socket_thrm", SW_THERMAL),
              ("vr_thrm", HW_SLOWDOWN), ("hbm_thrm", SW_THERMAL), ("gfx_clk_below_host_limit", 0)]

# The kernel's ASIC-independent throttler bits (amdgpu_smu.h, SMU_THROTTLER_<name>_BIT).
THROTTLERS = {0: "PPT0", 1: "PPT1", 2: "PPT2", 3: "PPT3", 4: "SPL", 5: "FPPT", 6: "SPPT", 7: "SPPT_APU",
              16: "TDC_GFX", 17: "TDC_SOC", 18: "TDC_MEM", 19: "TDC_VDD", 20: "TDC_CVIP", 21: "EDC_CPU",
              22: "EDC_GFX", 23: "APCC", 32: "TEMP_GPU", 33: "TEMP_CORE", 34: "TEMP_MEM", 35: "TEMP_EDGE",
              36: "TEMP_HOTSPOT", 37: "TEMP_SOC", 38: "TEMP_VR_GFX", 39: "TEMP_VR_SOC", 40: "TEMP_VR_MEM0",
              41: "TEMP_VR_MEM1", 42: "TEMP_LIQUID0", 43: "TEMP_LIQUID1", 44: "VRHOT0", 45: "VRHOT1",
              46: "PROCHOT_CPU", 47: "PROCHOT_GFX", 56: "PPM", 57: "FIT"}


def throttler_bit(name):
    """NVML's bit for a throttler: power limits are the software power cap,
    temperatures the software thermal slowdown, voltage regulators and
    PROCHOT the hardware slowdown; the rest none."""
    if name.startswith(("PPT", "SPL", "FPPT", "SPPT", "TDC")):
        return SW_POWER_CAP
    if name.startswith(("TEMP_VR", "VRHOT", "PROCHOT")):
        return HW_SLOWDOWN
    if name.startswith("TEMP_"):
        return SW_THERMAL
    return 0


def expected_throttle(g):
    """(NVML bits, AMD's words) from amdsmi's violation status and throttler
    bits; None when neither was read."""
    bits, words, read = 0, [], False
    v = g.get("violation") or {}
    for name, bit in VIOLATIONS:
        active = v.get("active_" + name)
        if active is None or active == "N/A":
            continue
        read = True
        if active:
            bits |= bit
            words.append(name)
    indep = g.get("indep_throttle_status")
    if indep is not None:
        read = True
        for k in range(64):
            if indep >> k & 1:
                name = THROTTLERS.get(k, f"THROTTLER_BIT_{k}")
                bits |= throttler_bit(name)
                words.append(name)
    return (bits, words) if read else None


# GpuSample.absent's bits (proto/src/absent.rs) the comparison reads.
ABSENT = {"util": 1 << 0, "mem_util": 1 << 1, "temp": 1 << 2, "hbm_temp": 1 << 3, "power": 1 << 4,
          "energy": 1 << 5, "sm_clock": 1 << 6, "mem_clock": 1 << 7, "throttle": 1 << 8, "pcie_replay": 1 << 10,
          "ecc": 1 << 11, "processes": 1 << 13, "mem_used": 1 << 14, "power_limit": 1 << 15}


def compare_gpu(g, info, s, driver):
    """The differences between amdsmi's reading of one GPU (`g`) and the
    agent's description (`info`) and sample (`s`) of it: (field, agent, amdsmi)."""
    out = []

    def eq(field, agent, want):
        if agent != want:
            out.append((field, agent, want))

    if "error" in g:
        # A GPU that does not answer: lost, with what AMD SMI kept from init.
        eq("error", s["error"], "gpu_lost")
        eq("pci_bus_id", info["pci_bus_id"], g["bdf"])
        return out
    eq("error", s["error"], "")
    absent = s["absent"]

    def reading(field, key, want):
        # A reading amdsmi calls not supported must be absent, not 0.
        if want is None:
            eq(field + " absent", bool(absent & ABSENT[key]), True)
        else:
            eq(field + " absent", bool(absent & ABSENT[key]), False)
            eq(field, s[field], want)

    eq("uuid", info["uuid"], g["uuid"])
    eq("model", info["model"], g["market_name"])
    eq("pci_bus_id", info["pci_bus_id"], g["bdf"])
    eq("vendor", info["vendor"], "AMD")
    eq("vbios_version", info["vbios_version"], g["vbios_version"])
    eq("driver_version", driver, g["driver_version"])
    eq("firmware", {f["name"]: f["version"] for f in info["firmware"]}, g["firmware"])
    eq("partition_id", info["partition_id"], g["partition_id"] or 0)
    eq("compute_partition", info["compute_partition"], g["compute_partition"])
    eq("memory_partition", info["memory_partition"], g["memory_partition"])
    eq("mem_total_bytes", info["mem_total_bytes"], g["vram_total_bytes"])
    eq("power_limit_mw (info)", info["power_limit_mw"], g["power_cap_mw"])
    eq("max_sm_clock_mhz", info["max_sm_clock_mhz"], g["gfx_max_clock_mhz"] or 0)
    eq("max_mem_clock_mhz", info["max_mem_clock_mhz"], g["mem_max_clock_mhz"] or 0)
    eq("slowdown_temp_c", info["slowdown_temp_c"], g["temp_hotspot_critical_c"] or 0)
    eq("shutdown_temp_c", info["shutdown_temp_c"], g["temp_hotspot_emergency_c"] or 0)
    eq("hbm_slowdown_temp_c", info["hbm_slowdown_temp_c"], g["temp_vram_critical_c"] or 0)
    eq("hbm_shutdown_temp_c", info["hbm_shutdown_temp_c"], g["temp_vram_emergency_c"] or 0)
    eq("pcie_max_gen", info["pcie_max_gen"], g["pcie_max_gen"] or 0)
    eq("pcie_max_width", info["pcie_max_width"], g["pcie_max_width"] or 0)
    eq("board_part_number", info.get("board_part_number", ""), g["board_part_number"])
    eq("serial_number", info.get("serial_number", ""), g["board_serial"])

    reading("util_pct", "util", g["util_pct"])
    reading("mem_util_pct", "mem_util", g["mem_util_pct"])
    reading("mem_used_bytes", "mem_used", g["vram_used_bytes"])
    reading("temp_c", "temp", g["temp_hotspot_c"])
    reading("hbm_temp_c", "hbm_temp", g["temp_vram_c"])
    eq("edge_temp_c", s["edge_temp_c"], g["temp_edge_c"])
    reading("power_mw", "power", g["power_mw"])
    reading("power_limit_mw", "power_limit", g["power_cap_mw"])
    reading("energy_mj", "energy", g["energy_mj"])
    reading("sm_clock_mhz", "sm_clock", g["gfx_clock_mhz"])
    reading("mem_clock_mhz", "mem_clock", g["mem_clock_mhz"])
    t = expected_throttle(g)
    if t is None:
        eq("throttle absent", bool(absent & ABSENT["throttle"]), True)
    else:
        eq("throttle absent", bool(absent & ABSENT["throttle"]), False)
        eq("throttle_reasons", s["throttle_reasons"], t[0])
        eq("throttle_detail", s["throttle_detail"], t[1])
    eq("pcie_gen", s["pcie_gen"], g["pcie_gen"] or 0)
    eq("pcie_width", s["pcie_width"], g["pcie_width"] or 0)
    eq("xcc_gfx_busy_pct", s.get("xcc_gfx_busy_pct", []), g["xcc_gfx_busy_pct"])
    reading("pcie_replay_count", "pcie_replay", g["pcie_replay_count"])

    eq("ras", {r["block"]: [r["correctable"], r["uncorrectable"], r["deferred"]] for r in s["ras"]}, g["ecc"])
    eq("ras order", [r["block"] for r in s["ras"]], [b for b in BLOCKS if b in g["ecc"]])
    reading("ecc_corrected_volatile", "ecc", g["ecc_total"][0] if g["ecc_enabled_blocks"] else None)
    if g["ecc_enabled_blocks"]:
        eq("ecc_uncorrected_volatile", s["ecc_uncorrected_volatile"], g["ecc_total"][1])
    eq("retired_pages", s["retired_pages"], len(g["bad_pages"]))
    eq("retired_pages_pending", s["retired_pages_pending"], sum(1 for p in g["bad_pages"] if p["status"] == 1))

    # XGMI in the NVLink fields: the links not disabled ("X"), by number.
    links = [k for k, st in enumerate(g["xgmi_link_status"]) if st != "X"]
    eq("nvlinks", [l["link"] for l in info["nvlinks"]], links)
    peers = [x["peer_bdf"] for x in g["xgmi_links"]]
    eq("nvlink peers", [l["peer_pci_bus_id"] for l in info["nvlinks"]],
       [peers[k] if k < len(peers) else "" for k in links])
    up = [1 if g["xgmi_link_status"][k] == "U" else 0 for k in links]
    eq("nvlink_state", s["nvlink_state"] or [1] * len(links), up)
    eq("nvlink_down_mask", s["nvlink_down_mask"], sum(1 << i for i, u in enumerate(up) if not u and i < 32))
    eq("nvlink_tx_kib", s["nvlink_tx_kib"], [g["xgmi_write_kb"][k] or 0 for k in links])
    eq("nvlink_rx_kib", s["nvlink_rx_kib"], [g["xgmi_read_kb"][k] or 0 for k in links])
    eq("xgmi_error_status", s["xgmi_error_status"], g["xgmi_error_status"])

    reading("processes", "processes", [(p["pid"], p["vram_bytes"]) for p in g["processes"]])
    if not absent & ABSENT["processes"]:
        out = [o for o in out if o[0] != "processes"]
        eq("processes", [(p["pid"], p["used_mem_bytes"]) for p in s["processes"]],
           [(p["pid"], p["vram_bytes"]) for p in g["processes"]])
    return out


def compare_events(g, s):
    """Events: amdsmi reads every pending event once, the agent's first sample
    carries them (AMD's names, lower case, and their messages)."""
    got = [(e["kind"], e["text"]) for e in s["events"]]
    want = [(e["event"].lower(), e["message"]) for e in g["events"]]
    return [] if got == want else [("events", got, want)]


def run_agent(agent, path, tmp):
    """The agent's one sample (`sample --once --backend amd`) of one profile."""
    env = dict(os.environ, ROCM_PATH=tmp, FAKE_AMDSMI_PROFILE=os.path.abspath(path), FAKE_AMDSMI_TIME_S=MOMENT_S)
    env.pop("ROCM_HOME", None)
    r = subprocess.run([os.path.abspath(agent), "sample", "--once", "--backend", "amd", "--format", "json",
                        "--kmsg", "none"], env=env, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"{path}: the agent failed:\n{r.stderr.strip()}")
    return json.loads(r.stdout)


def compare(profile_dir, lib, agent, data):
    """Every profile's differences between the agent and amdsmi's dump, as lines."""
    bad = []

    def go(tmp):
        for name in PROFILES:
            if name not in data:
                continue
            try:
                doc = run_agent(agent, os.path.join(profile_dir, name), tmp)
            except (RuntimeError, ValueError, subprocess.TimeoutExpired) as e:
                bad.append(f"{name}: {e}")
                continue
            info, sample = doc["info"], doc["sample"]
            if info["backend"] != "amdsmi":
                bad.append(f"{name}: backend {info['backend']!r}, not 'amdsmi'")
            dump = data[name]
            if len(info["gpus"]) != len(dump) or len(sample["gpus"]) != len(dump):
                bad.append(f"{name}: the agent reports {len(info['gpus'])} GPUs, amdsmi {len(dump)}")
                continue
            for i in range(len(dump)):
                g = dump[str(i)] if str(i) in dump else dump[i]
                gi = next(x for x in info["gpus"] if x["index"] == i)
                gs = next(x for x in sample["gpus"] if x["index"] == i)
                for field, got, want in compare_gpu(g, gi, gs, info["driver_version"]) + compare_events(g, gs):
                    bad.append(f"{name}: GPU {i}: {field}: agent {got!r}, amdsmi {want!r}")

    with_fake(lib, go)
    return bad


def main():
    args = sys.argv[1:]
    if args == ["--child"]:
        print(json.dumps(read_with_amdsmi()))
        return 0
    if len(args) == 3 and args[0] == "one":
        print(json.dumps(with_fake(args[2], lambda tmp: run_profile(args[1], args[2], tmp)), indent=1))
        return 0
    agent = None
    if args[:1] == ["compare"] and len(args) in (4, 6):
        agent = args.pop(3)
        args[0] = "dump"
    if len(args) not in (3, 5) or args[0] != "dump" or (len(args) == 5 and args[3] != "--out"):
        print(__doc__, file=sys.stderr)
        return 2
    profile_dir, lib = args[1], args[2]
    try:
        from importlib.metadata import version
        have = version("amdsmi")
    except Exception:
        have = None
    if have != AMDSMI_VERSION:
        print(f"amdsmi_check: needs amdsmi=={AMDSMI_VERSION} in this Python, found {have}", file=sys.stderr)
        return 1
    data, bad = dump(profile_dir, lib)
    text = json.dumps(data, indent=1, sort_keys=True)
    summary_to = sys.stdout
    if len(args) == 5:
        with open(args[4], "w") as f:
            f.write(text + "\n")
    elif agent is None:
        print(text)
        summary_to = sys.stderr
    for b in bad:
        print(b, file=sys.stderr)
    gpus = sum(len(d) for d in data.values())
    print(f"amdsmi {AMDSMI_VERSION} on the fake: {len(data)}/{len(PROFILES)} profiles, {gpus} GPUs read, "
          f"{len(bad)} problems", file=summary_to)
    if agent is None:
        return 1 if bad else 0
    diffs = compare(profile_dir, lib, agent, data)
    for d in diffs:
        print(d, file=sys.stderr)
    print(f"fleetop-agent against amdsmi {AMDSMI_VERSION}: {len(data)} profiles, {gpus} GPUs, "
          f"{len(diffs)} differences", file=summary_to)
    return 1 if bad or diffs else 0


if __name__ == "__main__":
    sys.exit(main())
