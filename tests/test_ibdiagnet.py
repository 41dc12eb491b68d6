"""ibdiagnet's PM file (``ibdiagnet2.pm``, issue 34): every port's counters as samples, the 64-bit
``_extended`` counter read over its saturating twin, on a real fabric's file."""

from __future__ import annotations

from pathlib import Path

from forensics.parse import parse_bytes

CASE = Path(__file__).parent / "golden" / "ibcounters" / "ibdiagnet-2.10.0-pm-quantum2-fabric-excerpt-link-downed-01.log"


def test_ibdiagnet_pm_ports_and_their_counters() -> None:
    parsed = parse_bytes(CASE.read_bytes(), file=CASE.name)
    assert parsed.source == "ibcounters"
    assert parsed.events.num_rows == 0  # the head's comments and the rules are no rows; a snapshot gives no event
    rows = parsed.samples.to_pylist()
    by = {(r["device"], r["metric"]): r["value"] for r in rows}
    second = "Sfc6a1c030091cf00/Nfc6a1c030091cf00/P1/1/1"
    assert len({r["device"] for r in rows}) == 2 and len(rows) == 36
    assert by[(second, "link_downed")] == 12 and by[(second, "xmit_discards")] == 85
    # port_xmit_data=0xffffffff saturates at 32 bits: its 64-bit twin is the reading
    assert by[("ib-switch-sequoia/U1/P1/1/1", "xmit_data")] == 0x00000045A9712343
    assert parsed.files.to_pylist()[0]["records"] == 2
