"""Vendor event logs on the incident's timeline (issue 34): Dell OpenManage Server Administrator's alert
records, read from a real syslog capture, are typed as the SEL's are (``bmc.psu``, ``bmc.power``,
``bmc.thermal``) by the message catalog rows mining reads them with (``data/messages/vendor.toml``)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from forensics import messages
from forensics.parse import parse_bytes

OMSA = Path(__file__).parent / "golden" / "kernel" / "ossec-docs-omsa-syslog-psu-failure-redundancy-lost.log"


def test_omsa_alert_records_in_syslog_are_typed_as_the_sels() -> None:
    parsed = parse_bytes(OMSA.read_bytes(), file=OMSA.name, all_lines=True)
    rows = parsed.events.to_pylist()
    read = messages.frame(messages.load(), pl.Series([r["message"] for r in rows], dtype=pl.String))
    by_line = {rows[i]["line"]: (c, k) for i, c, k in read.select("i", "catalog", "cat_kind").iter_rows()}
    # 1354 (PS 2 failed, AC lost) three times, 1306 (PS redundancy lost) twice, 1053 (a temperature warning)
    assert by_line == {
        1: ("vendor.dell_omsa_psu_failure", "bmc.psu"), 7: ("vendor.dell_omsa_psu_failure", "bmc.psu"),
        13: ("vendor.dell_omsa_psu_failure", "bmc.psu"),
        6: ("vendor.dell_omsa_redundancy_lost", "bmc.power"), 12: ("vendor.dell_omsa_redundancy_lost", "bmc.power"),
        17: ("vendor.dell_omsa_temp_warning", "bmc.thermal"),
    }  # fmt: skip
    # the back-to-normal (1052) and OMSA's start-up records are no event
    assert all("returned to a normal value" not in rows[i]["message"] for i in read.get_column("i").to_list())



HPASMCLI = Path(__file__).parent / "golden" / "vendorhealth"


def _parsed(data: bytes, name: str = "f") -> tuple[list[dict], list[dict]]:
    p = parse_bytes(data, file=name)
    assert p.source == "vendorhealth"
    return p.events.to_pylist(), p.samples.to_pylist()


def test_hpasmcli_show_fans_psu_temp_script_mode_gives_readings_and_no_fault() -> None:
    # the brief's command, `hpasmcli -s 'show fans; show powersupply; show temp'` of a healthy Microserver Gen8
    events, samples = _parsed((HPASMCLI / "hpasmcli-s-show-fans-powersupply-temp-microserver-gen8-hpasm2csv.log").read_bytes())
    assert [e["kind"] for e in events] == ["other"]  # the shell prompt line
    fans = [(s["device"], s["value"]) for s in samples if s["metric"] == "fan_pct"]
    temps = {s["device"]: s["value"] for s in samples if s["metric"] == "temperature_c"}
    assert fans == [("Fan #1 SYSTEM", 9.0)]
    assert len(temps) == 9 and temps["Sensor #2 PROCESSOR_ZONE"] == 40.0 and "Sensor #4 SYSTEM_BD" not in temps  # "-": none


def test_a_failed_fan_and_a_sensor_at_its_threshold_are_events() -> None:
    # the real 8-fan paste with fan #3 as check_hpasm reads a failed one (FAILED in the speed column), and the real
    # temperature table with sensor #2 at its 70 C threshold
    fans = (HPASMCLI / "hpasmcli-s-show-fans-proliant-8-fans-lkml-zary.log").read_bytes()
    failed = fans.replace(b"#3   I/O_ZONE        Yes     NORMAL  11%", b"#3   I/O_ZONE        Yes     FAILED  N/A")
    events, samples = _parsed(failed)
    fan = [e for e in events if e["kind"] == "bmc.fan"]
    assert len(fan) == 1 and fan[0]["line"] == 7 and fan[0]["severity"] == "error"
    assert json.loads(fan[0]["detail"])["catalog"] == "vendor.hpe_hpasmcli_fan_failed"
    assert len([s for s in samples if s["metric"] == "fan_pct"]) == 7  # no reading of the failed fan
    temps = (HPASMCLI / "hpasmcli-s-show-fans-powersupply-temp-microserver-gen8-hpasm2csv.log").read_bytes()
    hot = temps.replace(b"#2        PROCESSOR_ZONE       40C/104F", b"#2        PROCESSOR_ZONE       70C/158F")
    thermal = [e for e in _parsed(hot)[0] if e["kind"] == "bmc.thermal"]
    assert [(e["line"], e["severity"]) for e in thermal] == [(17, "warning")]
    assert json.loads(thermal[0]["detail"])["condition"] == "70 C at or above its threshold 70 C"
