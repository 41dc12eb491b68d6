"""Which kind a kernel record gets when two families' words meet in it: the PCIe hot-plug driver's slot events
against a NIC's link lines, a firmware-first (APEI GHES) PCIe error against a machine check, mlx5's refused
commands against its faults, and a 4.x hung-task report against its own stack. Real lines of the golden samples,
and lines built from the kernel's format strings of each generation (cited beside each)."""

from __future__ import annotations

import json
from typing import Any

import polars as pl
import pytest

import forensics
from forensics.sources import kernel

from .conftest import GOLDEN


def _rows(name: str) -> list[dict[str, Any]]:
    events = pl.from_arrow(forensics.parse_file(GOLDEN / "kernel" / name, source="kernel"))
    return events.to_dicts()  # type: ignore[union-attr]


def _kind(line: str) -> tuple[str | None, str | None, dict[str, Any]]:
    fields, error = kernel.parse_record(line)
    assert error is None, error
    return (fields["kind"], fields["severity"], fields["detail"]) if fields else (None, None, {})


# drivers/pci/hotplug/pciehp_ctrl.c and pciehp_hpc.c: ctrl_info() prints through the port service device
# ("pciehp 0000:00:1c.0:pcie004: ", <= 4.18) or the port with dev_fmt "pciehp: " ("pcieport 0000:00:1c.0: pciehp: ").
HOTPLUG = [
    ("pcieport 0000:00:1c.0: pciehp: Slot(6): Link Down", "down"),  # 4.19+ pciehp_handle_presence_or_link_change
    ("pcieport 0000:00:1c.0: pciehp: Slot(6): Card not present", "down"),
    ("pcieport 0000:00:1c.0: pciehp: Slot(6): Link Up", "up"),
    ("pciehp 0000:00:1c.0:pcie004: Slot(6): Link Down", "down"),  # 4.7-4.18 pciehp_isr "Slot(%s): Link %s"
    ("pciehp 0000:00:1c.0:pcie004: Slot(6): Card not present", "down"),  # 4.7-4.18 "Slot(%s): Card %spresent"
    ("pciehp 0000:02:05.0:pcie24: slot(6): Link Down event", "down"),  # <= 4.6 pciehp_handle_linkstate_change
    ("pciehp 0000:02:05.0:pcie24: Card not present on Slot(6)", "down"),  # <= 4.6 pciehp_handle_presence_change
    ("pciehp 0000:02:05.0:pcie24: Link Down event queued on slot(6): currently getting powered on", "down"),
    ("pciehp 0000:02:05.0:pcie24: Surprise Removal", "down"),  # <= 4.18 interrupt_event_handler (ctrl_dbg)
    ("pcieport 0000:00:03.0: pciehp: Slot(7): Power fault", "power_fault"),  # pciehp_ist
]


@pytest.mark.parametrize(("line", "state"), HOTPLUG)
def test_a_hot_plug_slot_event_is_a_pcie_link_event(line: str, state: str) -> None:
    kind, _, detail = _kind(line)
    assert (kind, detail["state"], detail["device"]) == ("pcie.link", state, line.split()[1].split(":pcie")[0].rstrip(":"))


# A NIC's link lines (netdev_info of each driver) stay net.link.
NIC_LINKS = [
    "mlx5_core 0000:0c:00.0 ibp12s0: Link down",  # mlx5e_update_carrier "Link %s"
    "igb 0000:02:00.0 eno1: igb: eno1 NIC Link is Down",  # igb_watchdog_task
    "e1000e 0000:00:19.0 eth0: NIC Link is Down",
    "r8169 0000:03:00.0 enp3s0: Link is Down",  # phy_print_status
    "bnxt_en 0000:3b:00.0 eth0: NIC Link is Down",
]


@pytest.mark.parametrize("line", NIC_LINKS)
def test_a_nic_link_line_stays_a_net_link_event(line: str) -> None:
    kind, _, detail = _kind(line)
    assert (kind, detail["state"]) == ("net.link", "down")


def test_the_real_4x_pciehp_line_is_the_slot_s_link_loss() -> None:
    rows = [r for r in _rows("dmesg-T-pt-br-locale-pciehp-old-slot-link-down-event-01.log") if r["line"] == 2]
    assert [(r["kind"], r["severity"], json.loads(r["detail"])["state"]) for r in rows] == [("pcie.link", "error", "down")]


def test_a_ghes_pcie_section_is_one_pcie_aer_event_with_its_device() -> None:
    """The real record (edac skx + GHES): nine "{1}[Hardware Error]:" lines are one event of the device the
    section names, not nine machine checks; the part the MCE line cut off stays PCIe."""
    rows = _rows("dmesg-ghes-pcie-error-section-edac-skx-ue-overflow-nvme-01.log")
    cper = [(r["line"], r["kind"], r["gpu"]) for r in rows if "[Hardware Error]" in r["message"]]
    assert cper == [(2, "pcie.aer", "0000:5e:00.0"), (11, "host.mce", None), (12, "pcie.aer", None)]
    detail = json.loads(next(r["detail"] for r in rows if r["line"] == 2))
    assert (detail["aer_severity"], detail["port_type"], detail["command"], detail["pci_status"]) == (
        "nonfatal", "PCIe end point", "0x0546", "0xc110")


def test_a_fatal_ghes_pcie_section_decodes_its_aer_registers() -> None:
    """cper_print_pcie (drivers/firmware/efi/cper.c): a fatal section prints the AER registers too."""
    text = "\n".join("{3}[Hardware Error]: " + s for s in (
        "Hardware error from APEI Generic Hardware Error Source: 3", "event severity: fatal",
        " Error 0, type: fatal", "  section_type: PCIe error", "  port_type: 4, root port", "  version: 3.0",
        "  command: 0x0547, status: 0x0010", "  device_id: 0000:17:02.0", "  slot: 0", "  secondary_bus: 0x18",
        "  vendor_id: 0x8086, device_id: 0x2032", "  class_code: 060400",
        "  aer_uncor_status: 0x00004000, aer_uncor_mask: 0x00000000", "  aer_uncor_severity: 0x00062030",
        "  TLP Header: 40000001 0000000f 9c800000 00000000"))
    kind, severity, detail = _kind(text)
    assert (kind, severity, detail["aer_severity"], detail["bits"], detail["vendor_device"]) == (
        "pcie.aer", "critical", "fatal", ["CmpltTO"], "8086:2032")
    memory = text.replace("PCIe error", "memory error").split("\n")[:4]
    assert _kind("\n".join(memory))[0] == "host.mce"


# mlx5 cmd.c: "%s(0x%x) op_mod(0x%x) failed, status %s(0x%x), syndrome (0x%x)" (mlx5_cmd_check <= 5.17, with
# ", err(%d)" in mlx5_cmd_out_err 5.18+; uid(%d) in the DEVX debug line).
MLX5_COMMANDS = [
    ("mlx5_core 0000:04:00.0: mlx5_cmd_check:795:(pid 9993): RTR2RTS_QP(0x504) op_mod(0x0) failed, status bad "
     "parameter(0x3), syndrome (0x1a2d2a)", "warning", 0x3),
    ("mlx5_core 0000:d2:00.0: mlx5_cmd_out_err:838:(pid 1441871): ACCESS_REG(0x805) op_mod(0x1) failed, status bad "
     "operation(0x2), syndrome (0x9a6171), err(-22)", "warning", 0x2),
    ("mlx5_core 0000:d2:00.0: mlx5_cmd_out_err:838:(pid 9): SET_FLOW_TABLE_ENTRY(0x936) op_mod(0x0) uid(3) failed, "
     "status bad packet (discarded)(0x30), syndrome (0x1), err(-22)", "warning", 0x30),
    ("mlx5_core 0000:3b:00.0: mlx5_cmd_check:772:(pid 1203): QUERY_VPORT_COUNTER(0x770) op_mod(0x0) failed, status "
     "bad system state(0x4), syndrome (0x368b01)", "error", 0x4),
    ("mlx5_core 0000:3b:00.0: mlx5_cmd_out_err:838:(pid 5): create_mkey(0x200) op_mod(0x0) failed, status internal "
     "error(0x1), syndrome (0x2), err(-5)", "error", 0x1),
]


@pytest.mark.parametrize(("line", "severity", "status"), MLX5_COMMANDS)
def test_a_refused_mlx5_command_is_a_warning_unless_the_status_is_a_fault(line: str, severity: str, status: int) -> None:
    kind, sev, detail = _kind(line)
    assert (kind, sev, detail["status_code"]) == ("net.nic", severity, status)
    best = forensics.messages.load().best(line)
    assert best is not None and best.id == ("linux_rdma.mlx5_cmd_failed_fault" if severity == "error"
                                            else "linux_rdma.mlx5_cmd_failed_status")  # fmt: skip


def test_a_4_4_hung_task_report_keeps_its_stack() -> None:
    """4.4's sched_show_task line ("%-15.15s %c %016lx %5lu %5d %6d 0x%08lx") no longer cuts the report: its stack
    words and Call Trace are the hung task's record, as 5.10+'s "task:… state:D" report's are."""
    rows = _rows("dmesg-hung-task-4.4-task-name-with-colon-brackets-nvc-driver-uvm-01.log")
    hung = [r for r in rows if r["kind"] == "host.hung_task"]
    assert len(hung) == 1 and "uvm_gpu_retain_by_uuid" in hung[0]["message"]
    assert "nvc:[driver]    D ffff883f2cc43bd8" in hung[0]["message"]
    # 4.14-5.9 print no saved pc; a running task prints "  running task    "
    for task in ("python3         D    0 12345  12000 0x00000000", "python3         R  running task        0  4242      1 0x00000008"):
        report = f"INFO: task python3:12345 blocked for more than 120 seconds.\n{task}\nCall Trace:\n ? __schedule+0x2d0/0x870"
        parsed = pl.from_arrow(kernel.parse(report.encode(), file="x").events)
        assert parsed.height == 1 and parsed.item(0, "kind") == "host.hung_task", task  # type: ignore[union-attr]


def test_a_pdsh_collection_keeps_each_node_s_host_and_stamp() -> None:
    """pdsh / clush put "host: " before each line a node printed: the real sample's lines are read with their host
    and uptime, and a block of lines (an AER event, a hung task's stack) is grouped as without the prefix."""
    rows = _rows("pdsh-dmesg-host-prefix-mlx5-cmd-timeout-create-dct-no-done-completion-01.log")
    assert {(r["host"], r["kind"]) for r in rows} == {("b1360", "net.nic")}
    assert rows[0]["uptime_s"] == pytest.approx(14280.445220) and rows[0]["message"].startswith("mlx5_core 0000:61:00.0:")
    report = "\n".join(f"gpu-node-{n:02d}: [ 8012.33{i:04d}] {line}" for i, (n, line) in enumerate([
        (7, "pcieport 0000:00:03.0: AER: Uncorrected (Fatal) error received: 0000:3b:00.0"),
        (7, "nvidia 0000:3b:00.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Requester ID)"),
        (7, "nvidia 0000:3b:00.0:   device [10de:2330] error status/mask=00004000/00000000"),
        (7, "nvidia 0000:3b:00.0:    [14] CmpltTO                (First)"),
        (12, "pcieport 0000:00:1c.0: pciehp: Slot(6): Link Down"),
        (12, "INFO: task python3:2254956 blocked for more than 120 seconds."),
        (12, "Call Trace:"),
        (12, " __schedule+0x2d0/0x870"),
    ]))  # fmt: skip
    events = pl.from_arrow(kernel.parse(report.encode(), file="x").events)
    got = [(r["host"], r["kind"], r["gpu"]) for r in events.iter_rows(named=True)]  # type: ignore[union-attr]
    assert got == [("gpu-node-07", "pcie.aer", "0000:3b:00.0"), ("gpu-node-12", "pcie.link", None),
                   ("gpu-node-12", "host.hung_task", None)]  # fmt: skip
    assert "CmpltTO" in json.loads(events.item(0, "detail"))["bits"]  # type: ignore[union-attr]


def test_a_line_that_opens_with_a_program_s_name_is_no_collector_s_host() -> None:
    """Unstamped lines of a device ("nvidia-nvswitch3: SXid …", "nvme0n1: p1 p2") keep their words: a prefix is a
    collector's only when a stamp follows it."""
    text = "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 20034, Fatal, Link 33 LTSSM Fault Up\nnvme0n1: p1 p2\n"
    events = pl.from_arrow(kernel.parse(text.encode(), file="x", all_lines=True).events)
    assert events.get_column("message").to_list()[0].startswith("nvidia-nvswitch3: SXid")  # type: ignore[union-attr]
    assert events.get_column("host").to_list() == [None, None]  # type: ignore[union-attr]
