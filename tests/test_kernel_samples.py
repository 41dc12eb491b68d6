"""What the real samples must give, stated by hand (the golden files hold every row; this holds the facts).

Each case names a line of a sample in ``tests/golden/kernel`` and the
fields its record must have.
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl
import pytest

import forensics

from .conftest import GOLDEN, golden_cases


def _events(name: str, **options: Any) -> pl.DataFrame:
    options.setdefault("all_lines", True)  # every record: how lines are read (the lines of interest: test_streaming)
    return pl.from_arrow(forensics.parse_file(GOLDEN / "kernel" / name, source="kernel", **options))  # type: ignore[return-value]


def _row(name: str, line: int, **options: Any) -> dict[str, Any]:
    df = _events(name, **options).filter(pl.col("line") == line)
    assert df.height == 1, f"no record starts at {name}:{line}"
    row = df.row(0, named=True)
    row["detail"] = json.loads(row["detail"])
    return row


FACTS = [
    # (sample, line, kind, code, gpu, pid, {detail subset})
    ("dmesg-T-grep-nvrm-xid79-crash-dump-continuation-01.log", 3, "gpu.xid", 79, "0000:a1:00.0", None,
     {"process": None, "name": "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "action": "RESTART_BM"}),
    ("dmesg-T-grep-nvrm-xid79-crash-dump-continuation-01.log", 2, "gpu.driver", None, "0000:a1:00.0", None,
     {"event": "identity", "uuid": "GPU-979426f2-893a-7cbb-c4cf-81472f89a462"}),
    ("dmesg-T-grep-nvrm-xid79-crash-dump-continuation-01.log", 4, "gpu.off_bus", 79, "0000:a1:00.0", None, {}),
    ("dmesg-T-grep-nvrm-xid79-crash-dump-continuation-01.log", 1, "gpu.driver", None, None, None,
     {"event": "driver_load", "driver_version": "535.161.07"}),
    ("dmesg-xid79-fallen-off-bus-multiline-no-xid-01.log", 1, "gpu.off_bus", 79, "0000:b3:00.0", None,
     {"pci_id": "10de:26b5"}),
    ("dmesg-T-xid119-gsp-rpc-timeout-01.log", 3, "gpu.xid", 119, "0000:9b:00.0", 2024380,
     {"process": "nvidia-smi", "rpc_function": 103, "rpc_name": "GSP_RM_ALLOC", "rpc_timeout_s": 6, "gpu_index": 4}),
    ("dmesg-T-xid119-gsp-rpc-timeout-01.log", 2, "gpu.driver", None, None, None, {"serial": "1650124014249"}),
    ("dmesg-T-xid119-gsp-rpc-timeout-01.log", 41, "gpu.driver", None, "0000:9b:00.0", None, {"event": "reset"}),
    ("dmesg-ctime-peermem-xid13-then-xid109-ctxsw-timeout-01.log", 2, "gpu.xid", 13, "0000:cb:00.0", None,
     {"gpc": 7, "tpc": 7, "sm": 0, "exception": "Illegal Instruction Parameter"}),
    ("dmesg-ctime-peermem-xid13-then-xid109-ctxsw-timeout-01.log", 5, "gpu.xid", 109, "0000:cb:00.0", 1797828,
     {"process": "pt_main_thread", "channel": 8, "error_string": "CTX SWITCH TIMEOUT"}),
    ("dmesg-ctime-peermem-xid13-then-xid109-ctxsw-timeout-01.log", 1, "gpu.driver", None, None, None,
     {"event": "peer_memory"}),
    ("dmesg-iso-xid48-dbe-xid63-rowremap-xid94-peermem-01.log", 11, "gpu.xid", 48, "0000:19:00.0", None,
     {"phys_address": "0x12bac1c3e0", "action": "WORKFLOW_XID_48"}),
    ("dmesg-iso-xid48-dbe-xid63-rowremap-xid94-peermem-01.log", 12, "gpu.xid", 63, "0000:19:00.0", None,
     {"remap_row": "0x00000012bac1c3e0", "remap_pending": True}),
    ("dmesg-iso-xid48-dbe-xid63-rowremap-xid94-peermem-01.log", 13, "gpu.xid", 94, "0000:19:00.0", None,
     {"unit": "SM", "reset_required": False, "drain_reset_required": False}),
    ("dmesg-iso-xid48-dbe-xid63-rowremap-xid94-peermem-01.log", 14, "gpu.xid", 94, "0000:19:00.0", 1248209,
     {"process": "python3.10", "channel": 8}),
    ("dmesg-xid31-mmu-fault-old-format-then-xid13-xid32-01.log", 2, "gpu.xid", 31, "0000:01:00.0", None,
     {"channel": 0x3A, "engine": "GRAPHICS", "fault_type": "FAULT_PDE", "access_type": "ACCESS_TYPE_READ"}),
    ("dmesg-xid31-mmu-fault-old-format-then-xid13-xid32-01.log", 8, "gpu.xid", 32, "0000:01:00.0", None,
     {"channel": 0x52}),
    ("dmesg-decode-iso-repeated-xid13-xid43-h100-01.log", 16, "gpu.xid", 43, "0000:38:00.0", 2815167,
     {"process": "pt_main_thread", "channel": 8}),
    ("dmesg-gsp-init-failed-rminitadapter-talos-5060ti-01.log", 8, "gpu.driver", None, "0000:01:00.0", None,
     {"event": "init_failed", "rm_status": "0x62:0x65:1859"}),
    ("dmesg-gsp-init-failed-rminitadapter-talos-5060ti-01.log", 1, "gpu.driver", None, None, None,
     {"event": "driver_load", "driver_version": "570.172.08", "open": True}),
    ("dmesg-reltime-aer-fatal-cmplto-nvidia-no-callback-01.log", 4, "pcie.aer", None, "0000:00:03.0", None,
     {"aer_severity": "fatal", "bits": ["SDES", "CmpltTO"], "first": "CmpltTO", "agent": "Requester",
      "port": "0000:00:03.0", "vendor_device": "8086:6f08", "status": "00004020", "multiple": True}),
    ("dmesg-reltime-aer-fatal-cmplto-nvidia-no-callback-01.log", 1, "pcie.link", None, "0000:03:00.0", None,
     {"state": "recovery_failed", "driver": "nvidia"}),
    ("dmesg-reltime-aer-fatal-cmplto-nvidia-no-callback-01.log", 11, "pcie.link", None, None, None,
     {"state": "reset", "device": "0000:00:03.0"}),
    ("kernlog-aer-correctable-data-link-layer-badtlp-timeout-amd-01.log", 1, "pcie.aer", None, "0000:00:03.1", None,
     {"aer_severity": "corrected", "layer": "Data Link Layer", "agent": "Transmitter", "bits": ["Timeout"],
      "source": "0000:00:00.0"}),
    ("kernlog-aer-correctable-data-link-layer-badtlp-timeout-amd-01.log", 5, "pcie.aer", None, "0000:00:03.1", None,
     {"bits": ["BadTLP"], "agent": "Receiver"}),
    ("dmesg-printk-caller-id-aer-multiple-correctable-rxerr-01.log", 1, "pcie.aer", None, "0000:01:00.0", None,
     {"bits": ["RxErr"], "first": "RxErr", "caller": "T291"}),
    ("dmesg-printk-caller-id-aer-multiple-correctable-rxerr-01.log", 2, "pcie.aer", None, "0000:00:00.0", None,
     {"aer_severity": "corrected", "layer": "Physical Layer", "multiple": True, "mask": "0000e000"}),
    ("journal-ru-locale-nohost-aer-rxerr-corrected-01.log", 1, "pcie.aer", None, "0000:00:1c.5", None,
     {"aer_severity": "corrected", "bits": ["RxErr"], "vendor_device": "8086:9d15"}),
    ("dmesg-T-edac-sbridge-mce-262-ce-overflow-01.log", 1, "host.edac", None, None, None,
     {"mc": 1, "ce": 262, "ue": 0, "dimm": "CPU_SrcID#0_Ha#0_Chan#1_DIMM#0", "overflow": True}),
    ("syslog-nohost-mce-edac-sbridge-ce-scrubbing-01.log", 2, "host.edac", None, None, None,
     {"ce": 1, "error": "memory scrubbing error", "dimm": "CPU_SrcID#1_Ha#0_Chan#0_DIMM#0"}),
    ("syslog-nohost-mce-edac-sbridge-ce-scrubbing-01.log", 1, "host.mce", None, None, None, {}),
    ("dmesg-oom-killer-python-old-kernel-stack-hex-01.log", 1, "host.oom_kill", None, None, None,
     {"invoker": "python", "gfp_mask": "0x24280ca", "order": 0}),
    ("kernlog-oom-killer-gc-thread-calltrace-01.log", 1, "host.oom_kill", None, None, None,
     {"invoker": "GC Thread#9", "gfp_mask": "0x100cca"}),
    ("dmesg-mlx5-health-compromised-irisc-not-responding-01.log", 2, "net.nic", None, None, None,
     {"device": "0000:5e:00.0", "syndrome": "0x7", "syndrome_text": "irisc not responding", "fw_ver": "20.26.4012"}),
    ("dmesg-decode-iso-boot-mlx5-insufficient-pcie-power-nvme-01.log", 136, "net.nic", None, None, None,
     {"device": "0000:1a:00.0"}),
    ("journal-k-gpu-node-boot-mlx5-link-systemd-kmsg-01.log", 9, "net.link", None, None, None,
     {"state": "active", "port": 1, "device": "0000:ab:00.0"}),
    ("dmesg-nvme-qid0-timeout-reset-removed-01.log", 1, "disk.nvme", None, None, None, {"device": "nvme2", "qid": 0}),
    ("dmesg-nvme-qid0-timeout-reset-removed-01.log", 4, "disk.nvme", None, None, None, {"status": -19, "removed": True}),
    ("dmesg-nvme-qid0-timeout-reset-removed-01.log", 5, "disk.nvme", None, None, None, {"device": "nvme2n1", "removed": True}),
]


@pytest.mark.parametrize(("sample", "line", "kind", "code", "gpu", "pid", "detail"), FACTS,
                         ids=[f"{f[0][:40]}:{f[1]}" for f in FACTS])  # fmt: skip
def test_sample_fact(sample: str, line: int, kind: str, code: int | None, gpu: str | None, pid: int | None,
                     detail: dict[str, Any]) -> None:  # fmt: skip
    row = _row(sample, line)
    assert (row["kind"], row["code"], row["gpu"], row["pid"]) == (kind, code, gpu, pid)
    assert {k: row["detail"].get(k) for k in detail} == detail


@pytest.mark.parametrize("case", golden_cases("kernel"), ids=lambda p: p.stem)
def test_no_unparsed_record_in_real_samples(case) -> None:
    df = _events(case.name)
    assert df.filter(pl.col("kind") == "unparsed").height == 0


def test_every_xid_line_is_an_xid_event() -> None:
    for case in golden_cases("kernel"):
        lines = case.read_text("utf-8", "replace").splitlines()
        xid_lines = {i + 1 for i, text in enumerate(lines) if "NVRM: Xid (" in text}
        df = _events(case.name).filter(pl.col("kind") == "gpu.xid")
        assert set(df["line"].to_list()) == xid_lines, case.name


def test_multiline_records_hold_their_continuations() -> None:
    # The Xid 119 report carries its RPC history tables and the stack dump (lines 3-37).
    row = _row("dmesg-T-xid119-gsp-rpc-timeout-01.log", 3)
    assert row["message"].count("\n") == 34 and row["message"].endswith("</TASK>")
    # The crash-dump note continues over two unstamped, indented lines.
    row = _row("dmesg-T-grep-nvrm-xid79-crash-dump-continuation-01.log", 5)
    assert row["message"].splitlines()[1:] == [
        "NVRM: nvidia-bug-report.sh as root to collect this data before",
        "NVRM: the NVIDIA kernel module is unloaded.",
    ]


def test_timestamps_by_form() -> None:
    iso = _row("dmesg-iso-xid48-dbe-xid63-rowremap-xid94-peermem-01.log", 11)
    assert iso["ts"].isoformat() == "2024-11-15T12:02:03.470068+00:00" and iso["detail"]["ts_from"] == "printed"
    ctime = _row("dmesg-T-grep-nvrm-xid79-crash-dump-continuation-01.log", 3, timezone="Europe/Berlin")
    assert ctime["ts"].isoformat() == "2024-04-05T19:29:39+00:00" and ctime["detail"]["ts_from"] == "local"
    mono = _row("dmesg-xid79-fallen-off-bus-multiline-no-xid-01.log", 1)
    assert mono["ts"] is None and mono["uptime_s"] == pytest.approx(1843.308145)
    # kern.log: wall clock without a year, plus the embedded uptime.
    kern = _row("kernlog-aer-correctable-data-link-layer-badtlp-timeout-amd-01.log", 1)
    assert kern["ts"] is None and kern["detail"]["stamp"] == "Sep 19 16:18:02"
    assert kern["uptime_s"] == pytest.approx(68183.61579) and kern["host"] == "bubz"
    kern = _row("kernlog-aer-correctable-data-link-layer-badtlp-timeout-amd-01.log", 1, year=2023)
    assert kern["ts"].isoformat() == "2023-09-19T16:18:02+00:00" and kern["detail"]["ts_from"] == "assumed"
    ru = _row("journal-ru-locale-nohost-aer-rxerr-corrected-01.log", 1, year=2024)
    assert ru["ts"].isoformat() == "2024-02-12T00:48:02+00:00" and ru["host"] is None
    talos = _events("talos-dmesg-kern-warning-nvidia-ioctl-stack-a100-02.log").row(0, named=True)
    assert talos["host"] == "192.168.11.119" and talos["ts"].isoformat() == "2026-04-22T21:27:51.290876+00:00"
    short_iso = _events("journal-short-iso-kernel-docker-veth-a800-01.log").row(0, named=True)
    assert short_iso["ts"].isoformat() == "2025-01-02T07:20:12+00:00" and short_iso["host"] == "jmsph-pro-a800-77-123"


def test_journal_service_lines_are_not_kernel_rows() -> None:
    df = _events("journal-fabricmanager-start-sh-pre-nvl5-nothing-to-do-01.log")
    assert df["source"].to_list() == ["journal"] * 4
    assert df["pid"].to_list() == [4753, 4756, 4753, 1]
    mono = _events("journal-short-monotonic-boot-markers-zero-bootid-01.log")
    assert mono.filter(pl.col("line") == 2)["source"].item() == "journal"
    assert mono.filter(pl.col("line") == 5)["host"].item() == "archlinux"
    assert mono.filter(pl.col("line") == 12)["host"].item() == "H"


def test_same_text_from_journal_and_dmesg_gives_same_kinds() -> None:
    journal = _events("journal-ru-locale-nohost-aer-rxerr-corrected-01.log")
    body = "\n".join(f"[  {i}.000000] " + line.split(" kernel: ", 1)[1]
                     for i, line in enumerate((GOLDEN / "kernel" / "journal-ru-locale-nohost-aer-rxerr-corrected-01.log")
                                               .read_text("utf-8").splitlines()))  # fmt: skip
    dmesg = pl.from_arrow(forensics.parse_bytes(body.encode(), file="x", source="kernel").events)
    keep = ["line", "kind", "gpu", "code", "message"]
    assert journal.select(keep).equals(dmesg.select(keep))  # type: ignore[union-attr]
    envelope_keys = {"stamp", "ts_from", "caller", "delta_s"}

    def fields(df: pl.DataFrame) -> list[dict[str, Any]]:
        return [{k: v for k, v in json.loads(d).items() if k not in envelope_keys} for d in df["detail"]]

    assert fields(journal) == fields(dmesg)  # type: ignore[arg-type]


def test_split_remembers_small_inputs_and_gives_what_splitting_anew_gives() -> None:
    """A small file's envelope is split when sniffed (its head) and again when parsed: the second time
    comes from memory, and it is the frame splitting anew gives, on every real golden input."""
    from forensics.reading import envelope
    from forensics.text import dedent, split_lines

    for path in sorted(GOLDEN.rglob("*.log")):
        lines = dedent(split_lines(path.read_bytes())[0], least=1)
        if lines.len() <= envelope.REMEMBER_LINES:
            for mono in (None, True, False):
                assert envelope.split(lines, journal_mono=mono).equals(envelope._split(lines, journal_mono=mono)), path.name
    lines = pl.Series(["[ 1843.308145] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus."])
    before = envelope._split_small.cache_info().hits
    assert envelope.split(lines) is envelope.split(lines)
    assert envelope._split_small.cache_info().hits == before + 1
    held = pl.Series(["kernel: a\nb", "c"])  # a line holding a newline is split as it is, never joined
    assert envelope.split(held).equals(envelope._split(held, journal_mono=None))
