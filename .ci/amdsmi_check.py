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

    v = opt(a.amdsmi_get_violation_status, h)
    keys = ["acc_counter", "acc_prochot_thrm", "acc_ppt_pwr", "acc_socket_thrm", "acc_vr_thrm", "acc_hbm_thrm",
            "per_prochot_thrm", "per_ppt_pwr", "per_socket_thrm", "per_vr_thrm", "per_hbm_thrm",
            "active_prochot_thrm", "active_ppt_pwr", "active_socket_thrm", "active_vr_thrm", "active_hbm_thrm"]
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


def main():
    args = sys.argv[1:]
    if args == ["--child"]:
        print(json.dumps(read_with_amdsmi()))
        return 0
    if len(args) == 3 and args[0] == "one":
        print(json.dumps(with_fake(args[2], lambda tmp: run_profile(args[1], args[2], tmp)), indent=1))
        return 0
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
    else:
        print(text)
        summary_to = sys.stderr
    for b in bad:
        print(b, file=sys.stderr)
    gpus = sum(len(d) for d in data.values())
    print(f"amdsmi {AMDSMI_VERSION} on the fake: {len(data)}/{len(PROFILES)} profiles, {gpus} GPUs read, "
          f"{len(bad)} problems", file=summary_to)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
