"""Telemetry (issue 34): BMC event logs, sensor snapshots, GPU series, the samples table and the events derived
from series. The real samples are the goldens of tests/golden/{sel,sensors,gpuseries}; the inputs here are
SYNTHETIC, each written to hit one rule or one form, in the printed layout of the tool it names."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import forensics
from forensics.cli import main
from forensics.ingest import discover, incident
from forensics.schema import KINDS, SAMPLE_METRICS, SAMPLES
from forensics.sources import derive, gpuseries, sel, sensors, vendorhealth


def _events(result) -> list[dict]:  # type: ignore[no-untyped-def]
    return [r | {"detail": json.loads(r["detail"])} for r in result.events.to_pylist()]


def _series(rows: list[tuple[int, str, str, float]], *, file: str = "f", ts: list[str] | None = None) -> pa.Table:
    """Samples of one file: (line, device, metric, value), stamps optional (synthetic)."""
    out = [{"incident": "", "source": "x", "file": file, "line": n, "device": d, "metric": m, "value": v,
            "ts": None if ts is None else pl.Series([ts[i]]).str.to_datetime(time_zone="UTC")[0]}
           for i, (n, d, m, v) in enumerate(rows)]  # fmt: skip
    return pa.Table.from_pylist(out, schema=SAMPLES)


# ---------------------------------------------------------------------------------------- derived events


def test_every_derived_kind_is_a_kind_and_every_metric_in_the_vocabulary() -> None:
    for rule in derive.rules():
        assert rule["kind"] in KINDS and rule["metric"] in SAMPLE_METRICS
        assert rule.get("peer", "temperature_c") in SAMPLE_METRICS
    for table in gpuseries.columns().values():
        assert {metric for metric, _ in table.values()} <= SAMPLE_METRICS


def test_slowdown_temperature_is_one_event_at_its_start_pointing_at_its_sample() -> None:
    s = _series([(1, "0", "temperature_c", 80.0), (2, "0", "temperature_c", 89.0), (3, "0", "temperature_c", 90.0),
                 (4, "1", "temperature_c", 70.0)])  # fmt: skip
    e = derive.events(s)
    assert e.select("line", "kind").rows() == [(2, "gpu.thermal_slowdown")]
    detail = json.loads(e["detail"][0])
    assert detail["samples"] == ["f:2"] and detail["value"] == 89.0 and detail["device"] == "0" and detail["limit"] == 88.0


def test_a_rise_of_ten_degrees_within_ten_minutes_names_its_lowest_reading() -> None:
    stamps = ["2025-01-01T10:00:00", "2025-01-01T10:04:00", "2025-01-01T10:08:00", "2025-01-01T10:30:00",
              "2025-01-01T10:45:00"]  # fmt: skip
    s = _series([(1, "0", "temperature_c", 60.0), (2, "0", "temperature_c", 65.0), (3, "0", "temperature_c", 71.0),
                 (4, "0", "temperature_c", 75.0), (5, "0", "temperature_c", 84.0)], ts=stamps)  # fmt: skip
    e = derive.events(s)
    assert e.select("line", "kind").rows() == [(3, "gpu.temp_rise")]  # 10:30→10:45 is +9 only; 10:08→10:30 is 22 min
    detail = json.loads(e["detail"][0])
    assert detail["samples"] == ["f:1", "f:3"] and detail["delta"] == 11.0 and detail["span"] == 480.0


def test_power_collapse_over_limit_and_narrow_link() -> None:
    rows = [(n, "0", "power_w", v) for n, v in [(1, 300.0), (2, 320.0), (3, 310.0), (4, 305.0), (5, 9.0), (6, 8.0)]]
    rows += [(7, "1", "power_w", 420.0), (7, "1", "power_limit_w", 400.0)]
    rows += [(8, "2", "pcie_width", 8.0), (8, "2", "pcie_width_max", 16.0), (9, "2", "pcie_width", 16.0),
             (9, "2", "pcie_width_max", 16.0)]  # fmt: skip
    e = derive.events(_series(rows))
    assert e.select("line", "kind").rows() == [(5, "gpu.power_drop"), (7, "gpu.power_slowdown"), (8, "gpu.pcie_degraded")]
    drop = json.loads(e["detail"][0])
    assert drop["before"] == 307.5 and drop["samples"] == ["f:1", "f:4", "f:5"]


def test_counters_growing_masks_and_violations() -> None:
    rows = [(1, "0", "pcie_replays", 0.0), (2, "0", "pcie_replays", 0.0), (3, "0", "pcie_replays", 12.0),
            (4, "0", "ecc_dbe", 0.0), (5, "0", "ecc_dbe", 1.0),
            (6, "0", "throttle_reasons", float(0x40)), (7, "1", "throttle_reasons", float(0x4 | 0x1)),
            (8, "1", "power_violation_pct", 35.0), (9, "1", "thermal_violation", 1.0)]  # fmt: skip
    e = derive.events(_series(rows))
    assert e.select("line", "kind").rows() == [
        (3, "gpu.pcie_replays"), (5, "gpu.ecc_uncorrectable"), (6, "gpu.thermal_slowdown"), (7, "gpu.power_slowdown"),
        (8, "gpu.power_slowdown"), (9, "gpu.thermal_slowdown")]  # fmt: skip
    assert json.loads(e["detail"][0])["samples"] == ["f:2", "f:3"]
    assert derive.events(_series(rows), skip=frozenset({"gpu.power_slowdown"})).height == 4


def test_utilization_falling_to_near_zero() -> None:
    rows = [(n, "0", "sm_util_pct", v) for n, v in [(1, 98.0), (2, 97.0), (3, 99.0), (4, 0.0), (5, 0.0), (6, 98.0)]]
    assert derive.events(_series(rows)).select("line", "kind").rows() == [(4, "gpu.util_drop")]


# ------------------------------------------------------------------------------------------------- sel

SEL = (  # synthetic, in ipmitool 1.8's `sel elist` layout
    "   1 | Pre-Init  |  0000000000 | System Event #0xff | Timestamp Clock Sync | Asserted\n"
    "   2 | 03/14/2023 | 02:11:45 | Power Supply PS1 Status | Failure detected | Asserted\n"
    "   3 | 03/14/2023 | 02:13:05 | Power Supply PS1 Status | Failure detected | Deasserted\n"
    "   4 | 03/14/2023 | 02:20:00 | Memory #0x02 | Uncorrectable ECC | Asserted | CPU 1 DIMM 3\n"
    "   5 | 03/14/2023 | 02:21:00 | Temperature GPU3 Temp | Upper Critical going high | Reading 96 > Threshold 95 degrees C\n"
    "   6 | 03/14/2023 | 02:22:00 | Add-in Card GPU_5_Status | Device Absent | Asserted\n"
    "   7 | 03/14/2023 | 02:23:00 PM | Fan FAN1 | Lower Critical going low  | Asserted\n"
    "   8 | 03/14/2023 | 02:23:01 | nonsense without enough columns\n"
)


def test_sel_records_kinds_severities_and_details() -> None:
    got = _events(sel.parse(SEL.encode(), file="sel.txt"))
    assert [(e["line"], e["kind"], e["severity"]) for e in got] == [
        (1, "bmc.event", "notice"), (2, "bmc.psu", "critical"), (3, "bmc.psu", "info"), (4, "bmc.memory", "critical"),
        (5, "bmc.thermal", "error"), (6, "bmc.gpu", "error"), (7, "bmc.fan", "error"), (8, "unparsed", "warning")]  # fmt: skip
    assert got[0]["ts"] is None
    assert got[1]["detail"]["catalog"] == "ipmi.psu_failure" and got[1]["detail"]["asserted"] is True
    assert got[2]["detail"]["asserted"] is False
    assert got[3]["detail"]["dimm"] == "DIMM3"
    assert (got[4]["detail"]["reading"], got[4]["detail"]["threshold"]) == (96.0, 95.0)
    assert got[5]["detail"]["gpu_index"] == 5
    assert got[6]["ts"].hour == 14  # 02:23:00 PM


def test_sel_reads_local_time_in_the_incidents_zone(tmp_path: Path) -> None:
    local = sel.parse(SEL.encode(), file="sel.txt", timezone="America/New_York")
    e = _events(local)[1]
    assert e["ts"].isoformat() == "2023-03-14T06:11:45+00:00" and e["detail"]["ts_from"] == "local"
    inc = tmp_path / "inc"
    (inc / "node1").mkdir(parents=True)
    (inc / "incident.toml").write_text('timezone = "America/New_York"\n')
    (inc / "node1" / "ipmitool-sel-elist.txt").write_text(SEL)
    t = incident.read_incident(discover.find_incidents([inc]).incidents[0])
    ev = pl.from_arrow(t.events).filter(pl.col("kind") == "bmc.psu")
    assert ev["ts"][0].isoformat() == "2023-03-14T06:11:45+00:00" and ev["host"][0] == "node1"


SEL_VERBOSE = (  # synthetic, in ipmitool's `sel get` / `sel elist -v` layout (lib/ipmi_sel.c, verbose entry)
    "ipmitool> sel get 0x18\n"
    "SEL Record ID          : 0018\n"
    " Record Type           : 02\n"
    " Timestamp             : 01/03/2011 00:29:14\n"
    " Generator ID          : 0020\n"
    " EvM Revision          : 04\n"
    " Sensor Type           : Processor\n"
    " Sensor Number         : 70\n"
    " Event Type            : Sensor-specific Discrete\n"
    " Event Direction       : Assertion Event\n"
    " Event Data (RAW)      : 010000\n"
    " Event Interpretation  : Missing\n"
    " Description           : Thermal Trip\n"
    "\n"
    "Sensor ID              : CPU0_Status (0x70)\n"
    " Entity ID             : 3.5\n"
    " Sensor Type (Discrete): Processor\n"
    "\n"
    "SEL Record ID          : 0019\n"
    " Timestamp             : 01/03/2011 00:31:02\n"
    " Sensor Type           : Temperature\n"
    " Sensor Number         : 04\n"
    " Event Type            : Threshold\n"
    " Event Direction       : Deassertion Event\n"
    " Trigger Reading       : 96.000degrees C\n"
    " Trigger Threshold     : 95.000degrees C\n"
    " Description           : Upper Critical going high\n"
    "\n"
    "next command\n"
)


def test_sel_verbose_records_are_one_event_each() -> None:
    got = _events(sel.parse(SEL_VERBOSE.encode(), file="sel-get.txt"))
    assert [(e["line"], e["kind"], e["severity"]) for e in got] == [
        (1, "other", "info"), (2, "bmc.thermal", "critical"), (19, "bmc.thermal", "info"), (29, "other", "info")]  # fmt: skip
    trip, temp = got[1], got[2]
    assert trip["message"] == "Processor CPU0_Status | Thermal Trip | Asserted"
    assert trip["ts"].isoformat() == "2011-01-03T00:29:14+00:00" and trip["detail"]["id"] == "0018"
    assert temp["detail"]["asserted"] is False and (temp["detail"]["reading"], temp["detail"]["threshold"]) == (96.0, 95.0)
    assert sel.sniff(SEL_VERBOSE) == 1.0
    assert forensics.parse_bytes(SEL_VERBOSE.encode(), file="x").events.column("source")[1].as_py() == "sel"


# Real iLO 4 IML lines (HewlettPackard/python-ilorest-library-old issue #8, ex22_dump_iml.py on a Gen9; the
# thread's fix was re-seating a CPU): every severity printed "OK", so the wording is what says how grave.
ILO_IML = (
    "OK: Class 5 / Code 3:   Uncorrectable Machine Check Exception (Board 0, Processor 1, APIC ID 0x00000018, Bank "
    "0x00000013, Status 0xFE200000'000C110A, Address 0x00000040'53500500, Misc 0xE8FCF016'1F002086)\n"
    "OK: Class 20 / Code 5:  Unrecoverable System Error (NMI) has occurred.  System Firmware will log additional "
    "details in a separate IML entry if possible\n"
    "OK: Class 8 / Code 2:   Uncorrectable PCI Express Error (Embedded device, Bus 0, Device 2, Function 0, Error "
    "status 0x00000024)\n"
)


def test_ilo_iml_lines_are_read_by_the_vendor_catalog() -> None:
    from forensics import messages

    read = messages.frame(messages.load(), pl.Series(ILO_IML.splitlines()))
    assert read.select("catalog", "cat_kind", "cat_cause").rows() == [
        ("vendor.hpe_iml_uncorrectable_mce", "bmc.cpu", "host_memory"),
        ("vendor.hpe_iml_unrecoverable_system_error", "bmc.pcie", "pcie_link"),
        ("vendor.hpe_iml_uncorrectable_pcie", "bmc.pcie", "pcie_link")]  # fmt: skip


def test_redfish_entries_whole_or_cut() -> None:
    entry = {"@odata.id": "/redfish/v1/Systems/1/LogServices/SEL/Entries/7", "@odata.type": "#LogEntry.v1_9_0.LogEntry",
             "Id": "7", "EntryType": "SEL", "Severity": "Critical", "Created": "2024-05-01T10:00:00+02:00",
             "SensorType": "Power Supply / Converter", "EntryCode": "Assert", "Message": "Power supply 2 failed."}  # fmt: skip
    whole = _events(sel.parse(json.dumps({"Members": [entry]}, indent=2).encode(), file="sel.json"))
    assert [(e["kind"], e["severity"], e["ts"].isoformat()) for e in whole] == [("bmc.psu", "error", "2024-05-01T08:00:00+00:00")]
    cut = json.dumps({"Members": [entry, entry]}, indent=2)[:-40]  # a paste that stops inside the second entry
    rows = _events(sel.parse(cut.encode(), file="sel.json"))
    assert [e["kind"] for e in rows] == ["bmc.psu", "unparsed"]


# -------------------------------------------------------------------------------------------- vendorhealth

IML = (  # synthetic, in `hpasmcli -s "show iml"`'s layout as check_hpasm's EventSubsystem/CLI.pm reads it
    "Event: 29 Added: 00/00/0000 00:00\n"
    "INFORMATIONAL: Maintenance - IML cleared through hpasmcli\n"
    "\n"
    "Event: 30 Added: 09/22/2011 05:11\n"
    "CRITICAL: POST Messages - POST Error: 1615-Power Supply Failure or Power Supply Unplugged in Bay 2\n"
    "\n"
    "Event: 31 Added: 09/22/2011 05:12\n"
    "CAUTION: PCI Bus - Uncorrectable PCI Express Error (Slot 4, Bus 65, Device 0, Function 0, Error status 0x00004000)\n"
)


def test_iml_records_are_events_in_the_incidents_zone() -> None:
    got = _events(vendorhealth.parse(IML.encode(), file="iml.txt", timezone="Europe/Berlin"))
    assert [(e["line"], e["kind"], e["severity"], e["detail"].get("catalog")) for e in got] == [
        (1, "bmc.event", "info", None), (4, "bmc.psu", "error", "vendor.hpe_iml_psu_failure"),
        (7, "bmc.pcie", "critical", "vendor.hpe_iml_uncorrectable_pcie")]  # fmt: skip
    assert got[0]["ts"] is None and got[1]["ts"].isoformat() == "2011-09-22T03:11:00+00:00"
    assert got[1]["detail"]["ts_from"] == "local" and got[2]["detail"]["class"] == "PCI Bus"
    assert vendorhealth.sniff(IML) == 1.0 and sel.sniff(IML) == 0.0


def test_a_pmbus_status_word_names_its_bits_and_a_healthy_module_gives_no_event() -> None:
    golden = Path(__file__).parent / "golden/vendorhealth"
    off = vendorhealth.parse((golden / "supermicro-pminfo-psu-off-status-word-284a-osm513.log").read_bytes(), file="pm")
    event = _events(off)[0]
    assert (event["kind"], event["severity"]) == ("bmc.psu", "critical")
    assert event["detail"]["pmbus"].split(",") == ["INPUT", "POWER_GOOD#", "OFF", "VIN_UV_FAULT", "CML"]  # 0x284A
    ok = vendorhealth.parse((golden / "supermicro-ipmicfg-pminfo-module1-ok-phpsysinfo393.log").read_bytes(), file="pm")
    assert [e["kind"] for e in _events(ok)] == [] and ok.records == 1
    assert {r["metric"] for r in ok.samples.to_pylist()} == {"voltage_v", "current_a", "temperature_c", "fan_rpm"}


def test_a_failed_supply_in_hpasmcli_is_the_power(tmp_path: Path) -> None:
    """The real `show powersupply` of openstreetmap/operations#239 (PSU 2 FAILED), beside a job that died."""
    inc = tmp_path / "inc"
    (inc / "node1").mkdir(parents=True)
    (inc / "node1" / "hpasmcli.txt").write_bytes(
        (Path(__file__).parent / "golden/vendorhealth/hpasmcli-show-powersupply-prompt-psu2-failed-osm239.log").read_bytes())
    forensics.ingest([inc], tmp_path / "ds", jobs=1)
    ds = forensics.open_dataset(tmp_path / "ds")
    d = forensics.diagnose(ds).row(0, named=True)
    assert (d["root_cause"], d["rule"]) == ("power", "catalog:vendor.hpe_hpasmcli_psu_condition_failed")
    assert ds.samples.filter(pl.col("source") == "vendorhealth").collect()["value"].to_list() == [135.0, 35.0]


# --------------------------------------------------------------------------------------------- sensors

SENSORS = (  # synthetic, ipmitool `sensor` layout (a BMC that says "ok" above its critical threshold, as in
    # openbmc/openbmc#3743), then `sdr elist` lines
    "Ambient_Temp     | 46.000     | degrees C  | ok    | na        | 5.000     | 7.000     | 37.000    | 40.000    | na\n"
    "FAN3             | 300.000    | RPM        | cr    | na        | 500.000   | 700.000   | na        | na        | na\n"
    "PS2 Status       | C9h | ok  | 10.2 | Presence detected, Power Supply AC lost\n"
    "12V              | 30h | ok  |  7.1 | 12.10 Volts\n"
)


def test_sensors_give_samples_and_critical_events() -> None:
    r = sensors.parse(SENSORS.encode(), file="s.txt")
    samples = pl.from_arrow(r.samples).select("line", "device", "metric", "value", "unit").rows()
    assert samples == [(1, "Ambient_Temp", "temperature_c", 46.0, "C"), (2, "FAN3", "fan_rpm", 300.0, "RPM"),
                       (4, "12V", "voltage_v", 12.1, "V")]  # fmt: skip
    got = _events(r)
    assert [(e["line"], e["kind"], e["severity"]) for e in got] == [(1, "bmc.thermal", "error"), (2, "bmc.fan", "error"),
                                                                     (3, "bmc.psu", "error")]  # fmt: skip
    assert got[0]["detail"]["threshold"] == 40.0 and got[0]["detail"]["samples"] == ["s.txt:1"]
    assert got[2]["detail"]["catalog"] == "ipmi.sdr_psu_failed_state"


def test_freeipmi_sensors_with_header_and_state() -> None:
    text = ("ID  | Name        | Type        | State    | Reading    | Units | Event\n"  # synthetic, ipmi-sensors layout
            "1   | CPU1 Temp   | Temperature | Critical | 101.00     | C     | 'At or Above (>=) Upper Critical Threshold'\n"
            "2   | PSU1 Input  | Voltage     | Nominal  | 230.00     | V     | 'OK'\n")  # fmt: skip
    r = sensors.parse(text.encode(), file="s.txt")
    assert pl.from_arrow(r.samples).select("metric", "value").rows() == [("temperature_c", 101.0), ("voltage_v", 230.0)]
    assert [(e["line"], e["kind"]) for e in _events(r)] == [(2, "bmc.thermal")]


# ------------------------------------------------------------------------------------------- gpuseries

DMON_T = (  # synthetic, nvidia-smi dmon -o T layout, header repeated, a row cut short
    "#Time        gpu    pwr  gtemp  mtemp     sm    mem\n"
    "#HH:MM:SS    Idx      W      C      C      %      %\n"
    " 10:00:01      0    300     60      -     98     40\n"
    " 10:00:02      0    \n"
    "#Time        gpu    pwr  gtemp  mtemp     sm    mem\n"
    "#HH:MM:SS    Idx      W      C      C      %      %\n"
    " 10:00:03      0      9     61     70      0      0\n"
)


def test_dmon_time_only_columns_unsupported_values_and_cut_rows() -> None:
    r = gpuseries.parse(DMON_T.encode(), file="dmon.txt")
    s = pl.from_arrow(r.samples)
    assert s["ts"].null_count() == s.height  # -o T alone prints no date
    assert s.filter(pl.col("line") == 3)["metric"].to_list() == ["power_w", "temperature_c", "sm_util_pct", "mem_util_pct"]
    assert s.filter(pl.col("line") == 7)["metric"].to_list() == ["power_w", "temperature_c", "memory_temperature_c",
                                                                 "sm_util_pct", "mem_util_pct"]  # fmt: skip
    assert (r.records, r.unparsed) == (3, 1)
    assert [e["kind"] for e in _events(r)] == ["unparsed"]


def test_dmon_with_date_and_time_reads_local_stamps() -> None:
    text = ("#Date       Time        gpu    pwr  gtemp\n#YYYYMMDD   HH:MM:SS    Idx      W      C\n"  # synthetic
            " 20250301    23:59:59      1    250     70\n")  # fmt: skip
    s = pl.from_arrow(gpuseries.parse(text.encode(), file="d", timezone="Asia/Tokyo").samples)
    assert s["ts"][0].isoformat() == "2025-03-01T14:59:59+00:00" and s["device"][0] == "1"


def test_query_loop_samples_bus_id_units_and_masks() -> None:
    text = ("timestamp, pci.bus_id, index, temperature.gpu, power.draw [W], clocks_throttle_reasons.active, fan.speed [%]\n"
            "2024/07/31 11:22:39.123, 00000000:3B:00.0, 0, 91, 350.50 W, 0x0000000000000040, [N/A]\n")  # synthetic
    r = forensics.parse_bytes(text.encode(), file="q.csv")
    s = pl.from_arrow(r.samples).select("gpu", "device", "metric", "value")
    assert r.source == "nvsmi" and s.rows() == [
        ("0000:3b:00.0", "0", "temperature_c", 91.0), ("0000:3b:00.0", "0", "power_w", 350.5),
        ("0000:3b:00.0", "0", "throttle_reasons", 64.0)]  # fmt: skip
    assert pl.from_arrow(r.samples)["ts"][0].isoformat() == "2024-07-31T11:22:39.123000+00:00"


# ---------------------------------------------------------------------------------- the samples table


def test_ingest_stores_samples_aligned_to_the_gpus_bus_ids(tmp_path: Path) -> None:
    inc = tmp_path / "inc"
    (inc / "node1").mkdir(parents=True)
    golden = Path(__file__).parent / "golden"
    q = next((golden / "nvsmi").glob("nvsmi-q-535.183.01-8x-h100-hbm3-01.txt"))
    (inc / "node1" / "nvidia-smi-q.txt").write_bytes(q.read_bytes())
    (inc / "node1" / "dmon.txt").write_text(
        "# gpu    pwr  gtemp\n# Idx      W      C\n    0    700     90\n    7    690     60\n")  # synthetic
    ds = tmp_path / "ds"
    forensics.ingest([inc], ds, jobs=1)
    samples = forensics.open_dataset(ds).samples.collect()
    assert samples.filter(pl.col("file") == "node1/dmon.txt").select("host", "device", "gpu").unique(maintain_order=True).rows() == [
        ("node1", "0", "0000:53:00.0"), ("node1", "7", "0000:ca:00.0")]  # fmt: skip
    # the Parquet parts are readable without this package
    assert pq.read_table(str(next((ds / "samples").glob("*.parquet")))).schema.names == SAMPLES.names
    derived = forensics.open_dataset(ds).events.filter(pl.col("kind") == "gpu.thermal_slowdown").collect()
    assert derived.filter(pl.col("file") == "node1/dmon.txt")["gpu"].to_list() == ["0000:53:00.0"]


def test_cli_prints_samples(tmp_path: Path) -> None:
    runner = CliRunner()
    (tmp_path / "dmon.txt").write_text("# gpu    pwr  gtemp\n# Idx      W      C\n    0    700      -\n")  # synthetic
    dmon = str(tmp_path / "dmon.txt")
    result = runner.invoke(main, ["parse", dmon, "--table", "samples", "--format", "csv"])
    assert result.exit_code == 0
    assert result.stdout == ("incident,host,source,file,line,ts,gpu,device,metric,value,unit\n"
                             f'"",,gpuseries,{dmon},3,,,0,power_w,700.0,W\n')  # fmt: skip
    result = runner.invoke(main, ["parse", dmon, "--table", "samples"])
    assert result.exit_code == 1 and result.stderr == "Error: --table samples prints as jsonl, csv or parquet\n"


@pytest.mark.parametrize("data", [b"", b"\xff\xfe|||\n", b"# gpu pwr\n# Idx W\n" + b"0 1 2 3\n" * 3, b"{\"EntryType\": ",
                                  b"1 | 2 | 3 | 4 | 5 | 6 | 7\n" * 4])  # fmt: skip
def test_telemetry_sources_are_total_on_odd_input(data: bytes) -> None:
    for module in (sel, sensors, gpuseries):
        r = module.parse(data, file="x")
        assert r.records >= r.unparsed >= 0
        assert r.events.schema == forensics.EVENTS and (r.samples is None or r.samples.schema == SAMPLES)


# ------------------------------------------------------------------------------------------------ rules

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
PSU = {"source": "sel", "file": "h/sel.txt", "kind": "bmc.psu", "severity": "critical",
       "message": "2 | 03/14/2023 | 02:11:45 | Power Supply PS1 Status | Failure detected | Asserted"}  # fmt: skip
DROP = {"source": "gpuseries", "file": "h/dmon.txt", "kind": "gpu.power_drop", "severity": "warning",
        "gpu": "0000:3b:00.0", "message": "GPU power collapsed to 9 W from a median of 300 W"}  # fmt: skip
XID79 = {"kind": "gpu.xid", "code": 79, "severity": "critical", "gpu": "0000:3b:00.0", "message": "Xid 79"}
BOOT = {"kind": "host.boot", "severity": "info", "message": "Linux version 5.15.0"}
RISE = {"source": "gpuseries", "file": "h/dmon.txt", "kind": "gpu.temp_rise", "severity": "warning",
        "gpu": "0000:3b:00.0", "message": "GPU temperature rose 14 °C to 91 °C within 420 s"}  # fmt: skip
HOT = {"source": "sel", "file": "h/sel.txt", "kind": "bmc.thermal", "severity": "error",
       "message": "5 | 03/14/2023 | 02:21:00 | Temperature GPU3 Temp | Upper Critical going high | Reading 96 > Threshold 95"}  # fmt: skip
TIMEOUT = {"source": "torch", "file": "h/train.log", "kind": "torch.watchdog_timeout", "severity": "error", "rank": 3,
           "message": "Watchdog caught collective operation timeout"}  # fmt: skip


def _rule(*rows: dict[str, object]) -> tuple[str, str | None]:
    """The cause and rule the library gives these events (synthetic), each a minute after the one before."""
    base = {"incident": "i", "host": "h", "source": "kernel", "file": "h/dmesg", "uptime_s": None, "kind": "other",
            "severity": "info", "gpu": None, "rank": None, "pid": None, "code": None, "message": "", "detail": "{}"}  # fmt: skip
    filled = [{**base, "line": n, "ts": T0 + timedelta(minutes=n), **r} for n, r in enumerate(rows, start=1)]
    frame = pl.DataFrame(filled, infer_schema_length=None).select(forensics.EVENTS.names)
    events = pl.from_arrow(frame.to_arrow().cast(forensics.EVENTS))
    d = forensics.diagnose(events.lazy()).row(0, named=True)  # type: ignore[union-attr]
    return d["root_cause"], d["rule"]


def test_a_power_fault_then_off_the_bus_or_a_reboot_is_power() -> None:
    assert _rule(PSU, XID79) == ("power", "bmc-power-then-off-bus")
    assert _rule(DROP, XID79) == ("power", "bmc-power-then-off-bus")
    assert _rule(PSU, BOOT) == ("power", "bmc-power-then-reboot")
    assert _rule({**PSU, "severity": "info"}, XID79) == ("gpu_hardware", "off-bus-no-pcie")  # deasserted: no fault
    assert _rule(XID79, PSU)[1] != "bmc-power-then-off-bus"  # after the Xid it explains nothing


def test_heat_then_a_collective_timeout_without_an_xid_is_thermal() -> None:
    assert _rule(RISE, TIMEOUT) == ("thermal", "thermal-rise-then-timeout")
    assert _rule(HOT, TIMEOUT) == ("thermal", "thermal-rise-then-timeout")
    assert _rule(RISE, XID79, TIMEOUT)[1] != "thermal-rise-then-timeout"


def test_verbose_sensor_records_are_read_by_the_grammar() -> None:
    text = ("Sensor ID              : GPU3 Temp (0x31)\n"  # synthetic, ipmitool `sensor get` layout
            " Sensor Type (Threshold)  : Temperature\n"
            " Sensor Reading        : 96 (+/- 1) degrees C\n"
            " Status                : Upper Critical\n"
            " Upper Critical        : 95.000\n"
            "\n"
            "Sensor ID              : broken (0x32)\n"
            "   : 96 degrees C\n")  # fmt: skip
    r = sensors.parse(text.encode(), file="s.txt")
    assert pl.from_arrow(r.samples).select("line", "device", "value").rows() == [(1, "GPU3 Temp", 96.0)]
    got = _events(r)
    assert [(e["line"], e["kind"], e["severity"]) for e in got] == [(1, "bmc.thermal", "error"), (7, "unparsed", "warning")]
    assert got[0]["detail"]["threshold"] == 95.0 and (r.records, r.unparsed) == (2, 1)


# ------------------------------------------------------------- telemetry before the failure (telemetry_chains.toml)
# Hand-made incidents (SYNTHETIC events, one minute apart unless a `ts` is given), each event in the form the
# source that derives it writes (data/telemetry_rules.toml; tests/test_telemetry.py derives them from input).

NARROW = {"source": "gpuseries", "file": "h/query.csv", "kind": "gpu.pcie_degraded", "severity": "warning",
          "gpu": "0000:3b:00.0", "message": "PCIe link x8, below its maximum x16"}  # fmt: skip
IB_ERRORS = {"source": "ibcounters", "file": "h/perfquery.txt", "kind": "net.errors_rising", "severity": "warning",
             "message": "InfiniBand lid 3/1: symbol_errors grew to 57 (from 0)"}  # fmt: skip
NIC_DROPS = {**IB_ERRORS, "source": "nicstats", "severity": "notice", "message": "ib0: rx_drops grew to 5 (from 0)"}
NCCL_IB = {"source": "nccl", "file": "h/train.log", "kind": "nccl.net_error", "severity": "error",
           "message": "NET/IB : Got completion from peer 10.0.0.2<51234> with status=12 opcode=0 len=0 vendor err 129",
           "detail": '{"layer": "fabric"}'}  # fmt: skip
SLOW_DISK = {"source": "disks", "file": "h/iostat.txt", "kind": "disk.await_high", "severity": "notice",
             "message": "disk nvme0n1: await 218.4 ms at 99.8 % utilization (saturated)"}  # fmt: skip
IDLE = {"source": "gpuseries", "file": "h/dmon.txt", "kind": "gpu.util_drop", "severity": "notice",
        "gpu": "0000:3b:00.0", "message": "GPU utilization fell to 0 % from a median of 97 %"}  # fmt: skip
LATE = {"ts": T0 + timedelta(hours=3)}


def test_a_link_trained_down_before_the_failure_is_pcie_link() -> None:
    assert _rule(NARROW, XID79) == ("pcie_link", "link-downtrained-then-off-bus")
    assert _rule(NARROW, TIMEOUT) == ("pcie_link", "link-downtrained-then-timeout")
    assert _rule({**NARROW, "severity": "info"}, XID79)[0] != "pcie_link"  # an idle GPU's slow link: no fault
    assert _rule(XID79, NARROW)[1] != "link-downtrained-then-off-bus"  # after the drop it explains nothing


def test_fabric_errors_growing_before_nccl_fails_are_network() -> None:
    assert _rule(IB_ERRORS, NCCL_IB) == ("network", "fabric-errors-then-nccl-error")
    assert _rule(IB_ERRORS, TIMEOUT) == ("network", "fabric-errors-then-timeout")
    assert _rule(NIC_DROPS, TIMEOUT) == ("hang", "watchdog-timeout")  # drops alone are a notice, not a fault
    assert _rule(IB_ERRORS, {**TIMEOUT, **LATE}) == ("hang", "watchdog-timeout")  # hours before: history


def test_a_saturated_disk_before_a_stall_is_storage() -> None:
    assert _rule(SLOW_DISK, IDLE, TIMEOUT) == ("storage", "disk-saturated-then-gpus-idle-then-stall")
    assert _rule(SLOW_DISK, TIMEOUT) == ("storage", "disk-saturated-then-stall")
    assert _rule(SLOW_DISK)[0] != "storage"  # a busy disk and no failure: nothing to explain
    assert _rule(TIMEOUT, SLOW_DISK) == ("hang", "watchdog-timeout")


def test_heat_or_a_power_collapse_before_the_failure() -> None:
    assert _rule(RISE, XID79) == ("thermal", "thermal-then-off-bus")
    assert _rule(HOT, XID79) == ("thermal", "thermal-then-off-bus")
    assert _rule(DROP, TIMEOUT) == ("power", "power-collapse-then-timeout")
    assert _rule(DROP, XID79, TIMEOUT)[1] != "power-collapse-then-timeout"


@pytest.mark.parametrize("case", sorted((Path(__file__).parent / "golden" / "gpuseries").glob("*.log"))[:4], ids=lambda p: p.stem)
def test_dmon_read_in_small_chunks_gives_the_same_rows(case: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A chunk's rows take the header of the chunk before (real captures, cut every ~200 bytes)."""
    whole = gpuseries.parse(case.read_bytes(), file="d")
    monkeypatch.setattr(gpuseries, "CHUNK_BYTES", 200)
    cut = gpuseries.parse(case.read_bytes(), file="d")
    key = ["line", "metric"]
    assert pl.from_arrow(cut.samples).sort(key).equals(pl.from_arrow(whole.samples).sort(key))  # type: ignore[union-attr]
    assert cut.events.equals(whole.events) and (cut.lines, cut.records, cut.unparsed) == (whole.lines, whole.records, whole.unparsed)
