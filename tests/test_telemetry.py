"""The telemetry sources (issue 34): golden pairs read with each source's own ``parse`` (the ``events`` rows
in ``<case>.jsonl``, the ``samples`` rows in ``<case>.samples.jsonl``), sniffing that claims their files and
no other source's, and any bytes in, rows out."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import forensics
from forensics import output, sources
from forensics.ingest import discover, incident
from forensics.schema import SAMPLES

from .conftest import GOLDEN, golden_cases

TELEMETRY = ("lspci", "ibcounters", "nicstats", "dcgm", "disks", "df")
CASES = [(source, case) for source in TELEMETRY for case in golden_cases(source)]
IDS = [f"{source}/{case.stem}" for source, case in CASES]
OTHERS = [case for folder in sorted(GOLDEN.iterdir()) if folder.is_dir() and folder.name not in TELEMETRY
          for case in golden_cases(folder.name)]  # fmt: skip


def _rows(table: pa.Table) -> list[dict]:
    return [json.loads(line) for line in output.jsonl_lines(table)]


def _check(path: Path, rows: list[dict], update: bool) -> None:
    if update:
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    expected = [json.loads(line) for line in path.read_text("utf-8").splitlines()] if path.exists() else []
    assert rows == expected, path.name


@pytest.mark.parametrize(("source", "case"), CASES, ids=IDS)
def test_golden(source: str, case: Path, update_golden: bool) -> None:
    result = sources.get(source).parse(case.read_bytes(), file=case.name)
    assert result.samples is not None and result.samples.schema == SAMPLES
    _check(case.with_suffix(".jsonl"), _rows(result.events), update_golden)
    _check(case.with_suffix(".samples.jsonl"), _rows(result.samples), update_golden)
    assert set(result.events.column("kind").to_pylist()) <= forensics.KINDS


@pytest.mark.parametrize(("source", "case"), CASES, ids=IDS)
def test_sniff_claims_its_own_files(source: str, case: Path) -> None:
    head = case.read_bytes()[:65536].decode("utf-8", "replace")
    assert sources.sniff(head)[0] == source


@pytest.mark.parametrize("case", OTHERS, ids=[f"{c.parent.name}/{c.stem}" for c in OTHERS])
def test_sniff_leaves_other_sources_files(case: Path) -> None:
    head = case.read_bytes()[:65536].decode("utf-8", "replace")
    assert sources.sniff(head)[0] not in TELEMETRY


@pytest.mark.parametrize("source", TELEMETRY)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=3000))
def test_any_bytes_in_rows_out(source: str, data: bytes) -> None:
    result = sources.get(source).parse(data, file="x")
    assert result.samples is not None and result.samples.schema == SAMPLES
    assert result.lines == data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    for detail in result.events.column("detail").to_pylist():
        json.loads(detail)


@pytest.mark.parametrize("source", TELEMETRY)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_truncated_and_shuffled_real_lines(source: str, data: st.DataObject) -> None:
    lines = [line for case in golden_cases(source) for line in case.read_text("utf-8").splitlines()]
    picked = data.draw(st.lists(st.sampled_from(lines), max_size=60))
    text = "\n".join(picked).encode()
    cut = data.draw(st.integers(0, len(text)))
    result = sources.get(source).parse(text[:cut], file="x")
    assert result.samples.schema == SAMPLES


# SYNTHETIC fixtures: written for these tests after the layouts dcgmi prints (dcgmi/Diag.cpp and Health.cpp of
# NVIDIA/DCGM: a 27-wide left column, a 48-wide right column, messages wrapped at 46 characters); the real
# samples in tests/golden/dcgm/ hold no failed table row and no health report.
DIAG_3X_FAIL_SYNTHETIC = """\
+---------------------------+------------------------------------------------+
| Diagnostic                | Result                                         |
+===========================+================================================+
|-----  Deployment  --------+------------------------------------------------|
| Denylist                  | Pass                                           |
+-----  Integration  -------+------------------------------------------------+
| PCIe                      | Fail - All                                     |
| Warning                   | GPU 1 Error using CUDA API cudaDeviceGetByPCI  |
|                           | BusId Check DCGM and system logs for errors.   |
+-----  Hardware  ----------+------------------------------------------------+
| GPU Memory                | Skip - All                                     |
+---------------------------+------------------------------------------------+
"""
DIAG_4X_FAIL_SYNTHETIC = """\
| Diagnostic                | Result                                         |
+-----  Hardware  ----------+------------------------------------------------+
| memory                    | Fail                                           |
|                           | GPU0: Pass                                     |
|                           | GPU1: Fail                                     |
| Warning: GPU1             | Memory errors detected                         |
"""
HEALTH_SYNTHETIC = """\
+---------------------------+----------------------------------------------------------+
| Health Monitor Report                                                                |
+===========================+==========================================================+
| Overall Health            | Warning                                                  |
| GPU ID: 0                 | Warning                                                  |
|                           | PCIe system: Warning - Detected more than 8 PCIe         |
|                           | replays per minute for GPU 0 : 13                        |
| GPU ID: 1                 | Healthy                                                  |
+---------------------------+----------------------------------------------------------+
"""


def _events(text: str) -> list[dict]:
    rows = sources.get("dcgm").parse(text.encode(), file="x").events.to_pylist()
    return [{**r, "detail": json.loads(r["detail"])} for r in rows if r["kind"] != "other"]


def test_dcgmi_diag_3x_fail_all_names_the_gpus_of_its_warnings() -> None:
    [fail] = _events(DIAG_3X_FAIL_SYNTHETIC)
    assert (fail["kind"], fail["line"], fail["detail"]["test"], fail["detail"]["gpu_index"]) == ("gpu.diag_fail", 7, "PCIe", 1)
    assert fail["detail"]["message"] == ("GPU 1 Error using CUDA API cudaDeviceGetByPCIBusId Check DCGM and system "
                                         "logs for errors.")  # fmt: skip


def test_dcgmi_diag_4x_per_gpu_rows() -> None:
    [fail] = _events(DIAG_4X_FAIL_SYNTHETIC)
    assert (fail["line"], fail["detail"]["gpu_index"], fail["detail"]["message"]) == (5, 1, "Memory errors detected")


def test_dcgmi_health_reports_each_unhealthy_subsystem() -> None:
    [warn] = _events(HEALTH_SYNTHETIC)
    assert (warn["kind"], warn["severity"], warn["line"]) == ("gpu.health", "warning", 6)
    assert warn["detail"] == {"gpu_index": 0, "system": "PCIe", "status": "Warning",
                              "message": "Detected more than 8 PCIe replays per minute for GPU 0 : 13"}  # fmt: skip


def test_dcgm_blank_values_are_no_reading_and_field_ids_join_old_and_new_names() -> None:
    text = ('DCGM_FI_DEV_GPU_TEMP{gpu="0",pci_bus_id="00000000:3B:00.0"} 61\n'
            'DCGM_FI_DEV_GPU_TEMP_CELSIUS{gpu="1",pci_bus_id="00000000:5E:00.0"} 62\n'
            'DCGM_FI_DEV_MEMORY_TEMP{gpu="0"} 9.223372036854776e+18\n'
            'DCGM_FI_PROF_SM_ACTIVE{gpu="0"} 140737488355328.000000\n'
            'DCGM_FI_DEV_XID_ERRORS{gpu="0",err_code="79",err_msg="GPU has fallen off the bus"} 79\n')  # fmt: skip  (SYNTHETIC)
    result = sources.get("dcgm").parse(text.encode(), file="x")
    samples = [(s["gpu"], s["metric"], s["value"]) for s in result.samples.to_pylist()]
    assert samples == [("0000:3b:00.0", "temperature_c", 61.0), ("0000:5e:00.0", "temperature_c", 62.0), (None, "xid_last", 79.0)]
    [xid] = [e for e in result.events.to_pylist() if e["kind"] == "gpu.xid"]
    assert (xid["code"], json.loads(xid["detail"])["text"]) == (79, "GPU has fallen off the bus")


# ------------------------------------------------------------- events derived from disk, NIC and fabric series
# (data/telemetry_rules.toml). No real capture in tests/golden shows a disk at 200 ms or a counter growing
# between two readings (their goldens give no derived event: test_golden), so these inputs are SYNTHETIC,
# each in the printed layout of the tool it names.

IOSTAT_SLOW = """Linux 3.10.0-862.6.3.el7.x86_64 (gpu07)        11/15/2018      _x86_64_        (24 CPU)

11/15/2018 10:35:34 AM
Device:         rrqm/s   wrqm/s     r/s     w/s    rkB/s    wkB/s avgrq-sz avgqu-sz   await r_await w_await  svctm  %util
sda               0.10     5.23    1.57    8.74   108.07   179.64    55.81     0.08    8.05    1.61    9.21   1.58   1.63
nvme0n1           0.00     0.00  310.00    2.00 39680.00    16.00   254.46    68.20  218.40  219.10  110.00   3.20  99.80

11/15/2018 10:35:39 AM
Device:         rrqm/s   wrqm/s     r/s     w/s    rkB/s    wkB/s avgrq-sz avgqu-sz   await r_await w_await  svctm  %util
sda               0.10     5.23    1.57    8.74   108.07   179.64    55.81     0.08  250.05    1.61    9.21   1.58  41.63
nvme0n1           0.00     0.00  305.00    2.00 39040.00    16.00   254.40    70.10  231.90  232.60  105.00   3.25 100.00
"""  # SYNTHETIC, sysstat 10 `iostat -xt 5` layout (tests/golden/disks/icehe-…)


def test_a_disk_at_200_ms_and_full_utilization_is_saturated_once() -> None:
    r = sources.get("disks").parse(IOSTAT_SLOW.encode(), file="io", timezone="Europe/Paris")
    [e] = [e for e in r.events.to_pylist() if e["kind"] == "disk.await_high"]
    detail = json.loads(e["detail"])
    assert (e["line"], e["severity"], str(e["ts"])) == (6, "notice", "2018-11-15 09:35:34+00:00")
    assert detail | {"ts_from": None} == {"metric": "await_ms", "device": "nvme0n1", "value": 218.4, "limit": 200.0,
                                          "util_pct": 99.8, "rule": "at_least", "samples": ["io:6"], "ts_from": None}
    # sda at 250 ms but 42 % busy is slow, not saturated; nvme0n1 still saturated 5 s later is the same event


def test_fabric_and_nic_error_counters_growing_between_readings() -> None:
    perfquery = ("# Port counters: Lid 3 port 1 (CapMask: 0x1400)\n"
                 "SymbolErrorCounter:..............0\nLinkDownedCounter:...............0\n"
                 "# Port counters: Lid 3 port 1 (CapMask: 0x1400)\n"
                 "SymbolErrorCounter:..............57\nLinkDownedCounter:...............2\n")  # SYNTHETIC, perfquery 1.6 layout
    got = [(e["line"], e["kind"], e["severity"], e["message"])
           for e in sources.get("ibcounters").parse(perfquery.encode(), file="pq").events.to_pylist()]  # fmt: skip
    assert got == [(5, "net.errors_rising", "warning", "InfiniBand lid 3/1: symbol_errors grew to 57 (from 0)"),
                   (6, "net.errors_rising", "warning", "InfiniBand lid 3/1: link_downed grew to 2 (from 0)")]
    ip = ("2: ib0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 2044 qdisc mq state UP mode DEFAULT group default qlen 256\n"
          "    RX: bytes  packets  errors  dropped overrun mcast\n    9000       90       3       0       0       0\n"
          "    TX: bytes  packets  errors  dropped carrier collsns\n    8000       80       0       0       0       0\n"
          "2: ib0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 2044 qdisc mq state UP mode DEFAULT group default qlen 256\n"
          "    RX: bytes  packets  errors  dropped overrun mcast\n    9900       99      41       5       0       0\n"
          "    TX: bytes  packets  errors  dropped carrier collsns\n    8800       88       0       0       0       0\n")  # SYNTHETIC, iproute2 4.x
    events = sources.get("nicstats").parse(ip.encode(), file="ip").events.to_pylist()
    rising = [(e["line"], e["severity"], json.loads(e["detail"])["metric"]) for e in events if e["kind"] == "net.errors_rising"]
    assert rising == [(8, "warning", "rx_errors"), (8, "notice", "rx_drops")]
    [errors] = [json.loads(e["detail"]) for e in events if json.loads(e["detail"]).get("metric") == "rx_errors"]
    assert (errors["samples"], errors["before"], errors["value"]) == (["ip:3", "ip:8"], 3.0, 41.0)


def test_sar_error_rates_are_errors_rising_and_a_quiet_edev_report_is_not() -> None:
    edev = ("Linux 4.18.0 (gpu07) \t05/06/24 \t_x86_64_\t(64 CPU)\n\n"
            "10:00:01        IFACE   rxerr/s   txerr/s    coll/s  rxdrop/s  txdrop/s  txcarr/s  rxfram/s  rxfifo/s  txfifo/s\n"
            "10:00:06         eth0      0.00      0.00      0.00      0.00      0.00      0.00      0.00      0.00      0.00\n"
            "10:00:11         eth0     12.40      0.00      0.00      0.00      0.00      0.00      0.00      0.00      0.00\n")  # SYNTHETIC, sysstat 11 `sar -n EDEV 5`
    [e] = [e for e in sources.get("nicstats").parse(edev.encode(), file="s").events.to_pylist() if e["kind"] != "other"]
    assert (e["line"], e["kind"], e["message"]) == (5, "net.errors_rising", "eth0: rx_errors_per_s 12.4")
    quiet = GOLDEN / "nicstats" / "sysstat-tests-sar-n-dev-edev-11.6.5-data-01.log"
    assert not [e for e in sources.get("nicstats").parse(quiet.read_bytes(), file="q").events.to_pylist()
                if e["kind"] == "net.errors_rising"]  # fmt: skip


def test_wall_clock_times_are_read_in_the_incidents_zone() -> None:
    case = GOLDEN / "disks" / "sysstat-374-iostat-xt-12-mb-time-line-01.log"
    paris = sources.get("disks").parse(case.read_bytes(), file="x", timezone="Europe/Paris").samples
    utc = sources.get("disks").parse(case.read_bytes(), file="x").samples
    assert str(paris.column("ts")[0].as_py()) == "2023-10-10 19:01:40+00:00"  # 21:01:40 CEST
    assert str(utc.column("ts")[0].as_py()) == "2023-10-10 21:01:40+00:00"


def test_ingest_reads_iostat_and_sar_clocks_in_the_incidents_zone(tmp_path: Path) -> None:
    """iostat's and sar's stamps are the machine's wall clock: ingest re-reads them in incident.toml's zone, as
    it does the SEL's and dmesg -T's (real captures: the goldens below)."""
    inc = tmp_path / "inc"
    (inc / "node1").mkdir(parents=True)
    (inc / "incident.toml").write_text('timezone = "Europe/Paris"\n')
    for folder, name in (("disks", "sysstat-374-iostat-xt-12-mb-time-line-01.log"),
                         ("nicstats", "sysstat-27-sar-n-dev-git-2014-two-reports-ifutil-01.log")):  # fmt: skip
        (inc / "node1" / name).write_bytes((GOLDEN / folder / name).read_bytes())
    t = incident.read_incident(discover.find_incidents([inc]).incidents[0])
    first = {r["source"]: r["ts"] for r in reversed(t.samples.sort_by("line").to_pylist())}
    assert str(first["disks"]) == "2023-10-10 19:01:40+00:00"  # 21:01:40 CEST
    assert str(first["nicstats"]) == "2014-08-24 04:55:06+00:00"  # 06:55:06 CEST
    iso = sources.get("disks").parse(b"2023-01-05T10:00:00+0100\nDevice r/s w/s %util\nsda 1.0 2.0 3.0\n",
                                     file="x", timezone="Europe/Paris").samples  # fmt: skip  (SYNTHETIC, S_TIME_FORMAT=ISO)
    assert str(iso.column("ts")[0].as_py()) == "2023-01-05 09:00:00+00:00"


def test_an_idle_gpus_slow_link_is_a_note_and_a_narrow_one_a_warning() -> None:
    text = ("3b:00.0 3D controller: NVIDIA Corporation GA100 [A100 SXM4 80GB] (rev a1)\n"
            "\t\tLnkCap:\tPort #0, Speed 16GT/s, Width x16, ASPM not supported\n"
            "\t\tLnkSta:\tSpeed 2.5GT/s (downgraded), Width x16 (ok)\n"
            "5e:00.0 3D controller: NVIDIA Corporation GA100 [A100 SXM4 80GB] (rev a1)\n"
            "\t\tLnkCap:\tPort #0, Speed 16GT/s, Width x16, ASPM not supported\n"
            "\t\tLnkSta:\tSpeed 16GT/s (ok), Width x8 (downgraded)\n")  # fmt: skip  (SYNTHETIC, lspci 3.7 layout)
    rows = sources.get("lspci").parse(text.encode(), file="x").events.to_pylist()
    assert [(r["kind"], r["severity"], r["gpu"]) for r in rows] == [
        ("gpu.pcie_degraded", "info", "0000:3b:00.0"), ("gpu.pcie_degraded", "warning", "0000:5e:00.0")]
