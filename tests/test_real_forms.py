"""Forms real producers print that the parsers once misread, each found by a peer's test suite or by a
real incident of corpus/ (issue: real logs, not our generator). Every test here failed before its fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forensics.parse import parse_bytes

from .conftest import GOLDEN


def _rows(text: str | bytes, source: str = "auto") -> list[dict]:
    data = text.encode() if isinstance(text, str) else text
    # every record: how lines are read (the lines of interest: test_streaming)
    rows = parse_bytes(data, file="x.log", source=source, all_lines=True).events.to_pylist()
    return [{**r, "detail": json.loads(r["detail"]) if r["detail"] else {}} for r in rows]


def _sample(name: str) -> bytes:
    return next(GOLDEN.glob(f"*/{name}")).read_bytes()


def test_nvlink5_unit_xids_with_link_minus_one_and_padded_columns() -> None:
    real = _rows(_sample("kmsg-line-xid149-netir-fatal-link-minus1-pci-domain-0019-01.log"), "kernel")
    xid = next(r for r in real if r["kind"] == "gpu.xid")
    assert (xid["code"], xid["gpu"]) == (149, "0019:01:00.0")
    assert {k: xid["detail"][k] for k in ("unit", "fatal", "link", "intrinfo")} == {
        "unit": "NETIR", "fatal": True, "link": -1, "intrinfo": "0x000fe406"}  # fmt: skip
    padded = _rows("NVRM: Xid (PCI:0000:3b:00): 149, NETIR_LINK_EVT  Fatal   XC0 i0 Link 08 (0x004505c6 0x00000000)\n", "kernel")
    assert {k: padded[0]["detail"][k] for k in ("unit", "fatal", "link", "error_status")} == {
        "unit": "NETIR_LINK_EVT", "fatal": True, "link": 8, "error_status": "0x00000000"}  # fmt: skip


def test_an_xid_line_may_end_after_pid_and_name() -> None:
    rows = _rows("[ 12.5] NVRM: Xid (PCI:0000:3b:00): 13, pid=1234, name=python3\n"
                 "[ 12.6] NVRM: Xid (PCI:0000:3b:00): 62, pid='<unknown>', name=<unknown>,\n", "kernel")  # fmt: skip
    assert [(r["kind"], r["code"], r["pid"]) for r in rows] == [("gpu.xid", 13, 1234), ("gpu.xid", 62, None)]
    assert rows[0]["detail"]["process"] == "python3"


def test_every_generation_of_the_off_bus_message_without_an_xid() -> None:
    text = (
        "[   36.508494] NVRM: GPU at 0000:01:00.0 has fallen off the bus.\n"  # old drivers (tests/golden/kernel)
        "[   37.000000] NVRM: GPU 0000:06:00.0: GPU has fallen off the bus.\n"
        "[   38.000000] NVRM: The NVIDIA GPU 0000:b3:00.0 installed in this system has fallen off the bus and is not responding to commands.\n"
        "[   39.000000] NVRM: The NVIDIA GPU 0000:b4:00.0\n"  # 570: the PCI ID line may be missing
        "               NVRM: installed in this system has\n"
        "               NVRM: fallen off the bus and is not responding to commands.\n"
        "[   40.000000] NVRM: The NVIDIA GPU 0000:01:00.0 (PCI ID: 10de:1f95)\n"  # the same opening, another message
        "               NVRM: installed in this system is not supported by the\n"
        "               NVRM: NVIDIA 470.86 driver release.\n"
    )
    rows = _rows(text, "kernel")
    assert [(r["kind"], r["gpu"]) for r in rows] == [
        ("gpu.off_bus", "0000:01:00.0"), ("gpu.off_bus", "0000:06:00.0"), ("gpu.off_bus", "0000:b3:00.0"),
        ("gpu.off_bus", "0000:b4:00.0"), ("gpu.driver", "0000:01:00.0"),
    ]  # fmt: skip


def test_an_oom_report_copied_without_stamps_or_its_head_names_its_victim() -> None:
    # as cAdvisor and containers copy it: memory: usage…, the task table, then the kill
    text = (
        "memory: usage 8388608kB, limit 8388608kB, failcnt 52\n"
        "memory+swap: usage 8388608kB, limit 9007199254740988kB, failcnt 0\n"
        "Memory cgroup stats for /kubepods/burstable/pod1: cache:0KB rss:8388608KB\n"
        "[ pid ]   uid  tgid total_vm      rss nr_ptes swapents oom_score_adj name\n"
        "[12345]     0 12345   123456    65432     123        0           999 python\n"
        "Memory cgroup out of memory: Kill process 12345 (python) score 1999 or sacrifice child\n"
        "Killed process 12345 (python) total-vm:493824kB, anon-rss:261728kB, file-rss:0kB\n"
    )
    kill = [r for r in _rows(text, "kernel") if r["kind"] == "host.oom_kill"]
    assert [(r["pid"], r["detail"]["process"], r["detail"]["cgroup_oom"]) for r in kill] == [(12345, "python", True)]
    # a real 3.10 excerpt that starts at the task table: the victim is the child "Killed process" names
    real = _rows(_sample("dmesg-T-oom-memcg-kill-process-score-sacrifice-child-3.10-el7-01.log"), "kernel")
    kill = [r for r in real if r["kind"] == "host.oom_kill" and r["detail"]["killed"]]
    assert [(r["line"], r["pid"], r["detail"]["process"]) for r in kill] == [(4, 28438, "java")]


def test_nic_module_events_and_transmit_timeouts_are_nic_errors() -> None:
    text = (
        "[ 5.1] mlx5_core 0000:0c:00.0: mlx5_port_module_event:1151:(pid 0): Port module event: module 0, Cable unplugged\n"
        "[ 5.2] mlx5_core 0000:0c:00.0: Port module event: module 0, Cable plugged\n"
        "[ 91.153715] NETDEV WATCHDOG: eth0 (ftgmac100): transmit queue 0 timed out\n"
    )
    rows = _rows(text, "kernel")
    assert [(r["kind"], r["severity"]) for r in rows] == [("net.nic", "warning"), ("other", "info"), ("net.nic", "error")]
    assert (rows[0]["detail"]["module_status"], rows[2]["detail"]["tx_queue"]) == ("Cable unplugged", 0)


@pytest.mark.parametrize("stamp", ["[...]", "[123]", "kern  :      : ", "Tue Apr 15 16:50:03 2025]"])
def test_an_odd_stamp_does_not_hide_the_family_in_the_message(stamp: str) -> None:
    rows = _rows(f"{stamp} NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=python, GPU has fallen off the bus.\n", "kernel")
    assert [(r["kind"], r["code"], r["gpu"]) for r in rows] == [("gpu.xid", 79, "0000:3b:00.0")]


def test_a_short_job_log_with_one_decisive_line_is_the_jobs_output() -> None:
    text = ("$ python train.py --batch-size 64\n"
            "RuntimeError: CUDA out of memory. Tried to allocate 12.50 MiB (GPU 0; 10.92 GiB total capacity; "
            "8.57 MiB already allocated; 9.28 GiB free; 4.68 MiB cached)\n")  # fmt: skip
    parsed = parse_bytes(text.encode(), file="stderr.log")
    assert parsed.source == "torch"
    oom = [r for r in parsed.events.to_pylist() if r["kind"] == "cuda.oom"]
    assert len(oom) == 1 and json.loads(oom[0]["detail"])["tried_bytes"] == int(12.5 * 2**20)


@pytest.mark.parametrize(("line", "kind", "code"), [
    ("THCudaCheck FAIL file=/pytorch/aten/src/THC/THCGeneral.cpp line=50 error=802 : system not yet initialized", "cuda.error", 802),
    ("RuntimeError: cuda runtime error (2) : out of memory at /pytorch/aten/src/THC/THCCachingAllocator.cpp:510", "cuda.oom", 2),
    ("F1119 18:06:58.546988 14145 math_functions.cu:79] Check failed: error == cudaSuccess (4 vs. 0)  unspecified launch failure", "cuda.launch_failure", 4),
    ("Failed to initialize NVML: Driver/library version mismatch", "cuda.error", None),
    ("RuntimeError: DataLoader worker (pid 19597) is killed by signal: Killed.", "job.killed", None),
    ("RuntimeError: Detected mismatch between collectives on ranks. Rank 0 is running collective: CollectiveFingerPrint(OpType=ALLGATHER", "torch.collective_mismatch", None),
    ("ERROR: megatron.core.dist_checkpointing.strategies.filesystem_async: Local process 0 encountered an error: [Errno 5] Input/output error", "fs.error", None),
    ("fabric manager NVIDIA GPU driver interface version 590.48.01 don't match with driver version 580.126.09.", "svc.fabricmanager", None),
    ("tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with shape[64,1024]", "cuda.oom", None),
])  # fmt: skip
def test_an_error_line_without_its_traceback_is_read(line: str, kind: str, code: int | None) -> None:
    rows = [r for r in _rows(line + "\n") if r["kind"] != "other"]
    assert [(r["source"], r["kind"], r["code"]) for r in rows] == [("torch", kind, code)]


def test_an_nccl_error_seen_through_pytorch_keeps_its_result_and_last_error() -> None:
    path = Path(__file__).parents[1] / "corpus" / "net-nccl-2076-v100-ddp-ib-nodes-connection-reset"
    rows = _rows(next(path.glob("*/stderr.log")).read_bytes())
    [err] = [r for r in rows if r["kind"] == "torch.nccl_error"]
    assert (err["code"], err["detail"]["result"], err["detail"]["nccl_version"]) == (6, "ncclRemoteError", "2.21.5")
    assert err["detail"]["last_error"].endswith("Connection reset by peer")
    assert [r["kind"] for r in rows] == ["torch.nccl_error"]  # the continuation lines are the record's
