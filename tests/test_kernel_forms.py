"""Printed forms and families the real samples do not show, in the shapes FACTS.md and PROVENANCE.md give."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from forensics.ingest.archive import Limits
from forensics.ingest.discover import find_incidents, members
from forensics.parse import parse_bytes
from forensics.reading import envelope
from forensics.reading.base import collect
from forensics.synth import synth
from forensics.text import split_lines


def rows(text: str, **options: Any) -> list[dict[str, Any]]:
    options.setdefault("all_lines", True)  # every record: how lines are read (the lines of interest: test_streaming)
    out = parse_bytes(text.encode(), file="t.log", source="kernel", **options).events.to_pylist()
    for r in out:
        r["detail"] = json.loads(r["detail"])
    return out


def one(text: str, **options: Any) -> dict[str, Any]:
    (row,) = rows(text, **options)
    return row


XID79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."


@pytest.mark.parametrize(
    ("line", "uptime", "ts", "severity", "host"),
    [
        (f"[ 1843.308145] {XID79}", 1843.308145, None, "critical", None),
        (f"<3>[ 1843.308145] {XID79}", 1843.308145, None, "critical", None),                 # dmesg -r
        (f"[   36.764462][  T291] {XID79}", 36.764462, None, "critical", None),              # printk caller id
        (f"3,1234,1843308145,-;{XID79}", 1843.308145, None, "critical", None),              # /dev/kmsg
        (f"kern  :err   : 2025-01-25T10:34:54,859532+00:00 {XID79}", None, "2025-01-25T10:34:54.859532+00:00", "critical", None),
        (f"kern  :info  : [ 12.5] {XID79}", 12.5, None, "critical", None),                  # -x without iso
        (f"<11>1 2025-01-25T10:34:54.859Z gpu07.cluster kernel - - - {XID79}", None, "2025-01-25T10:34:54.859000+00:00", "critical", "gpu07"),
        (f"Jan 25 10:34:54 gpu07 kernel: [ 99.000001] {XID79}", 99.000001, "2025-01-25T10:34:54+00:00", "critical", "gpu07"),
        (f"2025-01-25T10:34:54.123456+00:00 gpu07 kernel: {XID79}", None, "2025-01-25T10:34:54.123456+00:00", "critical", "gpu07"),
        (f"10.0.0.7: kern:     err: [2025-01-25T10:34:54.1Z]: {XID79}", None, "2025-01-25T10:34:54.100000+00:00", "critical", "10.0.0.7"),
        (f"kernel: {XID79}", None, None, "critical", None),                                   # stamp stripped
        (XID79, None, None, "critical", None),                                                # bare
        (f"[  123.456789 <    0.000123>] {XID79}", 123.456789, None, "critical", None),      # dmesg -d
    ],
)  # fmt: skip
def test_envelopes(line: str, uptime: float | None, ts: str | None, severity: str, host: str | None) -> None:
    row = one(line + "\n", year=2025)
    assert (row["kind"], row["code"], row["gpu"]) == ("gpu.xid", 79, "0000:3b:00.0")
    assert row["uptime_s"] == (pytest.approx(uptime) if uptime is not None else None)
    assert (row["ts"].isoformat() if row["ts"] else None) == ts
    assert (row["severity"], row["host"]) == (severity, host)
    assert row["message"] == XID79


def test_kmsg_continuation_lines_join_their_record() -> None:
    (row,) = rows("3,1234,5678901234,-;pcieport 0000:00:01.0: AER: Corrected error received: 0000:01:00.0\n"
                  " SUBSYSTEM=pci\n DEVICE=+pci:0000:00:01.0\n")  # fmt: skip
    assert row["kind"] == "pcie.aer" and row["message"].splitlines()[1:] == ["SUBSYSTEM=pci", "DEVICE=+pci:0000:00:01.0"]


def test_human_and_delta_stamps() -> None:
    first, second = rows(f"[Sep19 16:18] {XID79}\n[  +0.000844] nvme nvme3: I/O 0 QID 0 timeout, reset controller\n", year=2024)
    assert first["ts"].isoformat() == "2024-09-19T16:18:00+00:00"
    assert second["kind"] == "disk.nvme" and second["detail"]["delta_s"] == 0.000844


@pytest.mark.parametrize(
    ("line", "expect"),
    [
        ("NVRM: Xid (PCI:0000:05:00): 31, pid=13705, name=UnrealEditor, channel 0x0000000c, intr 00000000. MMU Fault: ENGINE GRAPHICS GPC2 GPCCLIENT_PROP_0 faulted @ 0x7f1c_40000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_WRITE",
         {"code": 31, "pid": 13705, "process": "UnrealEditor", "channel": 12, "fault_type": "FAULT_PDE", "access_type": "ACCESS_TYPE_VIRT_WRITE"}),
        ("NVRM: Xid (PCI:0000:D8:00): 74, pid='<unknown>', name=<unknown>, NVLink: fatal error detected on link 14(0x100000, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)",
         {"code": 74, "gpu": "0000:d8:00.0", "link": 14, "fatal": True}),
        ("NVRM: Xid (PCI:0019:01:00): 145, pid='<unknown>', name=<unknown>, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0004500a 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)",
         {"code": 145, "gpu": "0019:01:00.0", "unit": "RLW_RXPIPE", "fatal": False, "xc": "XC0", "link": 13, "severity": "warning"}),
        ("NVRM: Xid (PCI:0000:9a:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 08 (0x004505c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)",
         {"code": 149, "unit": "NETIR_LINK_EVT", "fatal": True, "link": 8, "severity": "error"}),
        ("NVRM: Xid (PCI:0000:3b:00): 45, pid=2071, name=python3, Ch 00000010, caused by previous Xid 149",
         {"code": 45, "caused_by_xid": 149, "action": "WORKFLOW_XID_45", "severity": "warning"}),
        ("NVRM: Xid (PCI:0002:00:00): 119, pid=1582259, name=nvc:[driver], Timeout after 45s of waiting for RPC response from GPU1 GSP! Expected function 76 (GSP_RM_CONTROL) sequence 24174 (0x20801322 0x808).",
         {"code": 119, "process": "nvc:[driver]", "rpc_timeout_s": 45, "rpc_function": 76, "gpu": "0002:00:00.0"}),
        ("NVRM: Xid (0000:03:00): 14, Channel 00000001",
         {"code": 14, "gpu": "0000:03:00.0", "channel": 1, "name": None}),
        ("NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping, reset gpu to activate.",
         {"code": 63, "pid": 1896, "remap_pending": True}),
    ],
)  # fmt: skip
def test_xid_generations(line: str, expect: dict[str, Any]) -> None:
    row = one(line + "\n")
    assert row["kind"] == "gpu.xid"
    got = {**row["detail"], "code": row["code"], "gpu": row["gpu"], "pid": row["pid"], "severity": row["severity"]}
    assert {k: got.get(k) for k in expect} == expect


def test_sxid_groups_its_follow_up_lines() -> None:
    (row,) = rows(
        "[ 5.0] nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 20034, Fatal, Link 33 LTSSM Fault Up\n"
        "[ 5.0] nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 20034, Severity 1 Engine instance 60 Sub-engine instance 00\n"
        "[ 5.0] nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 20034, Data {0x10000000, 0x10000000, 0x00000000}\n"
    )
    assert (row["kind"], row["code"], row["gpu"], row["severity"]) == ("gpu.sxid", 20034, "0000:05:00.0", "critical")
    assert row["detail"]["fatal"] is True and row["detail"]["link"] == 33 and row["detail"]["nvswitch"] == 3
    assert row["detail"]["data"] == ["0x10000000", "0x10000000", "0x00000000"]


@pytest.mark.parametrize(
    ("line", "kind", "fields"),
    [
        ("INFO: task python3:2254956 blocked for more than 120 seconds.", "host.hung_task", {"pid": 2254956, "process": "python3", "seconds": 120}),
        ("watchdog: BUG: soft lockup - CPU#18 stuck for 27s! [python3:2254956]", "host.soft_lockup", {"pid": 2254956, "cpu": 18, "seconds": 27}),
        ("rcu: INFO: rcu_sched self-detected stall on CPU", "host.soft_lockup", {"lockup": "rcu_stall"}),
        ("Kernel panic - not syncing: Fatal exception in interrupt", "host.panic", {"reason": "Fatal exception in interrupt"}),
        ("BUG: kernel NULL pointer dereference, address: 0000000000000008", "host.oops", {}),
        ("WARNING: CPU: 3 PID: 1234 at drivers/gpu/drm/drm_gem.c:482 drm_gem_object_release+0x1c/0x40", "host.warning", {"where": "drivers/gpu/drm/drm_gem.c:482"}),
        ("python3[2254956]: segfault at 0 ip 00007f12a4c0e123 sp 00007ffd1c2f3a40 error 4 in libnccl.so.2[7f12a4a00000+1c000]", "host.segfault",
         {"pid": 2254956, "process": "python3", "library": "libnccl.so.2", "error": 4}),
        ("traps: pt_main_thread[123] general protection fault ip:7f0 sp:7ff error:0 in libc.so.6[7f0+100]", "host.segfault", {"pid": 123}),
        ("mce: CPU12: Core temperature above threshold, cpu clock throttled (total events = 7)", "host.cpu_throttle", {"cpu": 12, "events": 7, "state": "throttled"}),
        ("mce: CPU12: Package temperature/speed normal", "host.cpu_throttle", {"state": "normal"}),
        ("Linux version 5.15.0-112-generic (buildd@lcy02-amd64-051) (gcc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0) #122-Ubuntu SMP", "host.boot", {"kernel": "5.15.0-112-generic"}),
        ("EDAC MC0: 1 UE memory read error on CPU_SrcID#0_MC#0_Chan#1_DIMM#0 (channel:1 slot:0 page:0x1234 offset:0x0 grain:32)", "host.edac", {"ue": 1, "ce": 0}),
        ("Memory failure: 0x2031c14: recovery action for dirty LRU page: Recovered", "host.mce", {}),
        ("Out of memory: Killed process 3557 (python) total-vm:62011148kB, anon-rss:15012260kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:30036kB oom_score_adj:0",
         "host.oom_kill", {"pid": 3557, "process": "python", "anon_rss_kb": 15012260, "killed": True}),
        ("blk_update_request: I/O error, dev nvme0n1, sector 1953520 op 0x1:(WRITE) flags 0x0 phys_seg 1 prio class 0", "disk.io_error", {"device": "nvme0n1", "sector": "1953520"}),
        ("Buffer I/O error on dev sda1, logical block 0, async page read", "disk.io_error", {}),
        ("nvme nvme4: controller is down; will reset: CSTS=0xffffffff, PCI_STATUS=0xffff", "disk.nvme", {"device": "nvme4"}),
        ("EXT4-fs error (device md0): ext4_find_entry:1455: inode #2: comm ls: reading directory lblock 0", "fs.error", {"device": "md0"}),
        ("XFS (dm-0): metadata I/O error in \"xfs_trans_read_buf_map\" at daddr 0x2 len 1 error 5", "fs.error", {}),
        ("EXT4-fs (sda1): Remounting filesystem read-only", "fs.readonly", {"device": "sda1"}),
        ("pcieport 0000:00:01.0: DPC: containment event, status:0x1f01 source:0x0000", "pcie.link", {"state": "dpc"}),
        ("pcieport 0000:3a:00.0: pciehp: Slot(3): Link Down", "pcie.link", {"state": "down"}),
        ("nvidia 0000:3b:00.0: AER: Device recovery successful", "pcie.link", {"state": "recovered"}),
        ("mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link DOWN", "net.link", {"state": "down"}),
        ("ice 0000:17:00.0 ens1f0: NIC Link is Down", "net.link", {"state": "down"}),
        ("mlx5_core 0000:1a:00.0: Port module event[error]: module 0, Cable error, High Temperature", "net.nic", {"device": "0000:1a:00.0"}),
        ("NVRM: GPU 0000:18:00.0: GPU has fallen off the bus.", "gpu.off_bus", {}),
        ("NVRM: GPU6 _kgspIsHeartbeatTimedOut: Heartbeat timed out, curtime 0x1 lastHeartbeatTime 0x0", "gpu.driver", {"event": "gsp", "gpu_index": 6}),
        ("NVRM: GPU 0000:91:00.0: GPU serial number is 1653723052734.", "gpu.driver", {"event": "identity"}),
    ],
)  # fmt: skip
def test_families(line: str, kind: str, fields: dict[str, Any]) -> None:
    row = one(f"[ 7.5] {line}\n")
    assert row["kind"] == kind
    got = {**row["detail"], "pid": row["pid"]}
    assert {k: got.get(k) for k in fields} == fields


def test_oom_report_is_one_record_with_the_victim() -> None:
    text = (
        "[ 7097.004932] python invoked oom-killer: gfp_mask=0x100cca(GFP_HIGHUSER_MOVABLE), order=0, oom_score_adj=0\n"
        "[ 7097.004954] CPU: 2 PID: 25671 Comm: python Not tainted 5.4.0-109-generic #123-Ubuntu\n"
        "[ 7097.004960] Call Trace:\n"
        "[ 7097.005000]  dump_stack+0x6d/0x8b\n"
        "[ 7097.005011] Mem-Info:\n"
        "[ 7097.005012] active_anon:3959046 inactive_anon:2 isolated_anon:0\n"
        "[ 7097.005013] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/kubepods/pod1,task_memcg=/kubepods/pod1/c2,task=python,pid=25671,uid=0\n"
        "[ 7097.005014] Memory cgroup out of memory: Killed process 25671 (python) total-vm:30000kB, anon-rss:20000kB, file-rss:0kB\n"
        "[ 7097.010000] oom_reaper: reaped process 25671 (python), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB\n"
        "[ 7097.020000] docker0: port 1(veth1) entered disabled state\n"
    )
    oom, other = rows(text)
    assert (oom["kind"], oom["pid"], other["kind"], other["line"]) == ("host.oom_kill", 25671, "other", 10)
    assert oom["detail"]["process"] == "python" and oom["detail"]["memcg"] == "/kubepods/pod1/c2"
    assert oom["detail"]["cgroup_oom"] is True and oom["message"].count("\n") == 8


def test_a_4_4_oom_report_ends_with_its_killed_process_line() -> None:
    text = (
        "[ 102.000000] python invoked oom-killer: gfp_mask=0x24280ca, order=0, oom_score_adj=0\n"
        "[ 102.000001] python cpuset=/ mems_allowed=0-1\n"
        "[ 102.000002]  ffff880fd3a0bc38 ffffffff813f7583 ffff880fd3a0bd10 ffff880fd3a0bd10\n"
        "[ 102.000003] Call Trace:\n"
        "[ 102.000004]  [<ffffffff8120b18e>] dump_header+0x5a/0x1c5\n"
        "[ 102.000005] Out of memory: Kill process 4242 (python) score 912 or sacrifice child\n"
        "[ 102.000006] Killed process 4242 (python) total-vm:152345676kB, anon-rss:123456kB, file-rss:0kB\n"
        "[ 103.000000] Killed process 77 (other) in a message of its own\n"
    )
    oom, other = rows(text)
    assert (oom["kind"], oom["pid"], oom["detail"]["gfp_mask"], oom["message"].count("\n")) == ("host.oom_kill", 4242, "0x24280ca", 6)
    assert (other["kind"], other["line"]) == ("other", 8)


def test_an_sbridge_block_ends_at_its_count_line() -> None:
    """sb_edac's MCE block takes the CE/UE count that closes it; the next count is an event of its own."""
    text = (
        "[ 104.100000] EDAC sbridge MC1: HANDLING MCE MEMORY ERROR\n"
        "[ 104.100001] EDAC sbridge MC1: CPU 0: Machine Check Event: 0 Bank 7: 8c00004000010090\n"
        "[ 104.100002] EDAC sbridge MC1: TSC 0 \n"
        "[ 104.100003] EDAC MC1: 262 CE memory read error on CPU_SrcID#0_Ha#0_Chan#0_DIMM#0 (channel:0 slot:0 page:0x123 "
        "offset:0x0 grain:32 syndrome:0x0 -  OVERFLOW area:DRAM err_code:0001:0090 socket:0 ha:0 channel_mask:1 rank:0)\n"
        "[ 110.200000] EDAC MC1: 1 UE memory read error on CPU_SrcID#0_Ha#0_Chan#0_DIMM#0 (channel:0 slot:0 page:0x123 "
        "offset:0x0 grain:32 syndrome:0x0)\n"
    )
    ce, ue = rows(text)
    assert (ce["kind"], ce["line"], ce["detail"]["ce"], ce["detail"]["overflow"]) == ("host.edac", 1, 262, True)
    assert (ue["kind"], ue["line"], ue["detail"]["ue"], ue["severity"]) == ("host.edac", 5, 1, "critical")


def test_a_nic_driver_name_inside_a_word_is_no_nic() -> None:
    """``device`` ends in ``ice`` (Intel's NIC driver): nvidia-smi's device-handle error is no net.nic,
    and a file of it alone is an nvidia-smi dump naming the GPU it lost."""
    line = "Unable to determine the device handle for GPU0000:A1:00.0: Unknown Error\n"
    assert [r["kind"] for r in rows(f"[ 2.0] {line}[ 3.0] ice 0000:3b:00.0: Failed to init\n")] == ["other", "net.nic"]
    (row,) = parse_bytes(line.encode(), file="nvidia-smi.txt").events.to_pylist()
    assert (row["source"], row["kind"], row["gpu"]) == ("nvsmi", "gpu.missing", "0000:a1:00.0")


def test_old_aer_requester_id_and_long_bit_names() -> None:
    (row,) = rows(
        "[ 1.0] pcieport 0000:00:1c.0: AER: Corrected error received: id=00e5\n"
        "[ 1.0] pcieport 0000:00:1c.0: PCIe Bus Error: severity=Corrected, type=Data Link Layer, id=00e5(Transmitter ID)\n"
        "[ 1.0] pcieport 0000:00:1c.0:   device [8086:a110] error status/mask=00001000/00002000\n"
        "[ 1.0] pcieport 0000:00:1c.0:    [12] Replay Timer Timeout  \n"
    )
    d = row["detail"]
    assert (d["source"], d["bits"], d["agent"], d["layer"]) == ("0000:00:1c.5", ["Timeout"], "Transmitter", "Data Link Layer")


def test_year_rolls_over_new_year() -> None:
    a, b = rows(f"Dec 31 23:59:59 h kernel: {XID79}\nJan  1 00:00:01 h kernel: {XID79}\n", year=2024)
    assert (a["ts"].year, b["ts"].year) == (2024, 2025)


def test_wrapped_lines_join_but_pasted_family_lines_stand_alone() -> None:
    got = rows(
        "[ 1.0] kubelet: reflector.go:256] watch of *v1.Pod ended with: too old resource version: w\n"
        "atch of *v1.Pod ended\n"
        f"{XID79}\n"
        "[ 2.0] docker0: port 1(veth1) entered disabled state\n"
    )
    assert [(r["line"], r["kind"]) for r in got] == [(1, "other"), (3, "gpu.xid"), (4, "other")]
    assert got[0]["message"].endswith("\natch of *v1.Pod ended")


def test_the_stamped_fast_path_reads_every_line_as_the_whole_envelope_does(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Lines that open with a stamp are read with the shorter regex; on every line of the real samples,
    the golden inputs, the corpus and 100 generated incidents (their printed forms) the columns are the
    ones the whole alternation gives."""
    root = Path(__file__).parents[1]
    texts = [p.read_bytes() for p in sorted((root / "tests" / "golden").rglob("*"))
             if p.is_file() and p.suffix not in (".jsonl", ".md")]  # fmt: skip
    synth(tmp_path / "synth", 100, seed=7)
    incidents = [*find_incidents([root / "corpus"]).incidents, *find_incidents([tmp_path / "synth"]).incidents]
    texts += [item.member.data or b"" for ref in incidents for item in members(ref, Limits())]
    lines = pl.concat([split_lines(data)[0] for data in texts])
    opening = lines.str.contains(envelope._STAMP_OPENING)
    assert 40_000 < opening.sum() < lines.len() - 40_000, (opening.sum(), lines.len())  # both paths, many lines
    whole = (
        pl.LazyFrame({"raw": lines})
        .with_columns(e=pl.col("raw").str.extract_groups(envelope.ENVELOPE))
        .unnest("e")
        .select(**envelope._envelope_columns())
        .pipe(collect, lines.len())
    )
    fast = envelope._envelope_frame(lines)
    assert fast.equals(whole)


# -- issue 32: clocks of pasted forms ----------------------------------------------------------------

# The delta lines are the first four of tests/golden/kernel/dmesg-reltime-aer-fatal-cmplto-nvidia-no-callback-01.log
# (real, `dmesg -H`'s `[  +0.000844]` form); the `[May19 19:57]` header above them is SYNTHETIC, written in
# the form util-linux's dmesg prints when the minute changes (`%b%d %H:%M`).
_RELTIME = Path(__file__).parent / "golden" / "kernel" / "dmesg-reltime-aer-fatal-cmplto-nvidia-no-callback-01.log"


def test_dmesg_h_deltas_are_dated_after_their_header(tmp_path: Path) -> None:
    import polars as pl

    import forensics

    deltas = b"".join(_RELTIME.read_bytes().splitlines(keepends=True)[:4])
    data = b"[May19 19:57] pcieport 0000:00:03.0: AER: Corrected error received: 0000:00:03.0\n" + deltas
    rows = pl.from_arrow(forensics.parse_bytes(data, file="dmesg", year=2024).events)
    assert [str(t) for t in rows.get_column("ts")] == [
        "2024-05-19 19:57:00+00:00", "2024-05-19 19:57:00.000844+00:00", "2024-05-19 19:57:00.000845+00:00",
        "2024-05-19 19:57:00.000853+00:00", "2024-05-19 19:57:00.000854+00:00"]  # fmt: skip
    # without a year the header has no date, nor the deltas; ingest gives them the incident's year
    assert forensics.parse_bytes(data, file="dmesg").events.column("ts").null_count == 5
    (tmp_path / "inc" / "node1").mkdir(parents=True)
    (tmp_path / "inc" / "incident.toml").write_text("year = 2024\n")
    (tmp_path / "inc" / "node1" / "dmesg").write_bytes(data)
    forensics.ingest([tmp_path / "inc"], tmp_path / "ds", jobs=1)
    ingested = forensics.open_dataset(tmp_path / "ds").events.sort("line").collect()
    assert ingested.get_column("ts").to_list() == rows.get_column("ts").to_list()
    # dated, the paste has a first failure to look around (undated, `timeline --around failure` had none)
    from click.testing import CliRunner

    from forensics.cli import main

    out = CliRunner().invoke(main, ["timeline", str(tmp_path / "ds"), "--around", "failure", "--format", "jsonl"])
    assert out.exit_code == 0, out.output
    shown = [json.loads(line) for line in out.output.splitlines()]
    assert shown and all(r["ts"].startswith("2024-05-19T19:57:00") for r in shown)


def test_a_paste_that_lost_its_first_bracket_keeps_the_uptime() -> None:
    """The first line of a real Xid (tests/golden/kernel) pasted without its `[`."""
    import re

    import forensics

    line = next(
        raw for case in sorted((Path(__file__).parent / "golden" / "kernel").glob("*.log"))
        for raw in case.read_bytes().splitlines(keepends=True) if re.match(rb"\[ *\d+\.\d{6}\] NVRM: Xid \(PCI:", raw)
    )  # fmt: skip
    uptime = float(line[1 : line.index(b"]")])
    rows = forensics.parse_bytes(line[1:], file="paste").events.to_pylist()
    assert [(r["kind"], r["uptime_s"], r["message"]) for r in rows] == [
        ("gpu.xid", uptime, line[line.index(b"]") + 2 :].decode().rstrip("\n"))]
