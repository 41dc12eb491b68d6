"""Vendor event logs on the incident's timeline (issue 34): Dell OpenManage Server Administrator's alert
records, read from a real syslog capture, are typed as the SEL's are (``bmc.psu``, ``bmc.power``,
``bmc.thermal``) by the message catalog rows mining reads them with (``data/messages/vendor.toml``)."""

from __future__ import annotations

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

