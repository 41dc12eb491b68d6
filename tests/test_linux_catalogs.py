"""The kernel's driver catalogs (linux_rdma, linux_net, linux_pcie, linux_host and linux_storage's block-layer rows) read real
pasted dmesg / kern.log lines of the golden samples as the drivers' maintainers would: which row, which cause."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest

import forensics
from forensics import messages

from .conftest import GOLDEN

CATALOG = messages.load()

#: (sample under tests/golden/kernel, line, the row that reads its record, the cause it names)
READINGS = [
    # added with these catalogs (PROVENANCE.md)
    ("pdsh-dmesg-host-prefix-mlx5-cmd-timeout-create-dct-no-done-completion-01.log", 1, "linux_rdma.mlx5_cmd_timeout",
     "network"),
    ("pdsh-dmesg-host-prefix-mlx5-cmd-timeout-create-dct-no-done-completion-01.log", 3, "linux_rdma.mlx5_cmd_timeout",
     "network"),
    ("dmesg-ata-ncq-timeout-exception-frozen-hard-resetting-link-01.log", 1, "linux_storage.ata_exception", "storage"),
    ("dmesg-ata-ncq-timeout-exception-frozen-hard-resetting-link-01.log", 2, "linux_storage.ata_failed_command",
     "storage"),
    ("dmesg-ata-media-error-unc-read-fpdma-queued-01.log", 5, "linux_storage.ata_media_error", "storage"),
    ("dmesg-ata-media-error-unc-read-fpdma-queued-01.log", 7, "linux_storage.ata_media_error", "storage"),
    ("syslog-nvme-controller-down-csts-ffffffff-nvme-log-error-rpi-01.log", 3, "linux_storage.nvme_controller_down",
     "storage"),
    ("syslog-nvme-controller-down-csts-ffffffff-nvme-log-error-rpi-01.log", 12, "linux_storage.nvme_command_error",
     "storage"),
    ("dmesg-ghes-pcie-error-section-edac-skx-ue-overflow-nvme-01.log", 2, "linux_pcie.ghes_pcie_error", "pcie_link"),
    # samples other issues added, in the wordings of other kernel versions
    ("dmesg-mlx5-health-compromised-irisc-not-responding-01.log", 2, "linux_rdma.mlx5_health_syndrome", "network"),
    ("dmesg-mlx5-cmd-check-rtr2rts-qp-bad-parameter-syndrome-01.log", 1, "linux_rdma.mlx5_cmd_failed_status",
     "network"),
    ("dmesg-netdev-watchdog-old-warning-sch-generic-arm-unwind-4.13-01.log", 3,
     "linux_net.netdev_watchdog_tx_timeout", "network"),
    ("logread-openwrt-year-facility-level-netdev-watchdog-cpu-queue-ms-01.log", 1,
     "linux_net.netdev_watchdog_tx_timeout", "network"),
    ("dmesg-T-pt-br-locale-pciehp-old-slot-link-down-event-01.log", 2, "linux_pcie.pciehp_link_down", "pcie_link"),
    ("dmesg-edr-pciehp-slot-card-present-link-up-thunderbolt-01.log", 9, "linux_pcie.bandwidth_limited", "pcie_link"),
    ("dmesg-nvme-qid0-timeout-reset-removed-01.log", 1, "linux_storage.nvme_io_timeout", "storage"),
    ("dmesg-nvme-qid0-timeout-reset-removed-01.log", 4, "linux_storage.nvme_reset_failed", "storage"),
    ("kernlog-nvme-io-qid1-timeout-disable-controller-01.log", 1, "linux_storage.nvme_io_timeout", "storage"),
    ("dmesg-hung-task-5.15-nvidia-rm-rwlock-persistenced-01.log", 1, "linux_host.hung_task_in_nvidia_driver", "driver"),
]


def _message(name: str, line: int) -> str:
    events = pl.from_arrow(forensics.parse_file(GOLDEN / "kernel" / name, source="kernel", all_lines=True))
    found = events.filter(pl.col("line") == line).get_column("message").to_list()  # type: ignore[union-attr]
    assert len(found) == 1, f"no record starts at {name}:{line}"
    return found[0]


@pytest.mark.parametrize(("name", "line", "row", "cause"), READINGS, ids=[f"{n}:{ln}" for n, ln, _, _ in READINGS])
def test_a_real_driver_line_reads_as_its_row(name: str, line: int, row: str, cause: str) -> None:
    best = CATALOG.best(_message(name, line))
    assert best is not None and (best.id, best.cause) == (row, cause)


def test_a_health_dump_names_the_part_its_syndrome_names() -> None:
    """mlx5's firmware syndrome says which part failed: the NIC's firmware, its PCIe reads, its temperature."""
    dump = "mlx5_core 0000:5e:00.0: device's health compromised - reached miss count\nmlx5_core 0000:5e:00.0: synd 0x{}"
    assert CATALOG.best(dump.format("1: firmware internal error")).cause == "network"  # type: ignore[union-attr]
    assert CATALOG.best(dump.format("a: ICM fetch PCI error")).cause == "pcie_link"  # type: ignore[union-attr]
    assert CATALOG.best(dump.format("10: High temprature")).cause == "thermal"  # type: ignore[union-attr]
    fatal = "mlx5_core 0000:af:00.0: poll_health:739:(pid 0): Fatal error {} detected"
    assert CATALOG.best(fatal.format(1)).cause == "pcie_link" and CATALOG.best(fatal.format(5)).cause == "network"  # type: ignore[union-attr]


def test_a_healthy_boot_line_is_no_evidence() -> None:
    """A cable plugged at boot reads as nothing; a firmware command refused (monitoring agents' ACCESS_REG probes on
    healthy nodes) is weak context, below any initiating reading of weight 0.25."""
    plugged = _message("dmesg-grep-mlx5-boot-port-module-event-cable-plugged-pci-domain-0004-01.log", 7)
    assert "Cable plugged" in plugged and CATALOG.best(plugged) is None
    refused = (GOLDEN / "journal/journal-mlx5-cmd-out-err-access-reg-gpud-json-in-journal-cx7-01.log").read_text()
    best = CATALOG.best(refused.splitlines()[0])
    assert best is not None and best.id == "linux_rdma.mlx5_cmd_failed_status" and best.weight < 0.25


@pytest.mark.parametrize(("name", "cause", "rule"), [
    ("dmesg-ata-media-error-unc-read-fpdma-queued-01.log", "storage", "catalog:linux_storage.ata_media_error"),
    # (pciehp's 4.x "slot(N): Link Down event": read by its row, then typed pcie.link, which the rule reads)
    ("dmesg-T-pt-br-locale-pciehp-old-slot-link-down-event-01.log", "pcie_link", "pcie-link-failure"),
])  # fmt: skip
def test_a_dmesg_only_a_catalog_reads_is_diagnosed(tmp_path: Path, name: str, cause: str, rule: str) -> None:
    """Lines no kernel family typed as a failure (libata's error handler; pciehp's 4.x "slot(N): Link Down event")
    were `unknown` before their rows; now their cause is the diagnosis."""
    (tmp_path / "inc/node-a").mkdir(parents=True)
    shutil.copy(GOLDEN / "kernel" / name, tmp_path / "inc/node-a/dmesg.log")
    forensics.ingest([tmp_path / "inc"], tmp_path / "ds", jobs=1)
    d = forensics.diagnose(forensics.open_dataset(tmp_path / "ds")).row(0, named=True)
    assert (d["root_cause"], d["rule"]) == (cause, rule)
