"""The synthetic incident generator: deterministic, labelled, and read by our parsers as planted."""

from __future__ import annotations

import tarfile
import tomllib
from collections import Counter
from datetime import datetime
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from forensics.cli import main
from forensics.ingest import discover, incident
from forensics.synth import CAUSES, synth


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _labels(root: Path) -> list[dict]:
    """The ``[label]`` of every incident, folders and tarballs alike."""
    out = []
    for path in sorted(root.iterdir()):
        if path.name.endswith(".tar.gz"):  # read as a stream: a damaged tarball still gives its first member
            with tarfile.open(path, "r|gz") as tar:
                first = next(iter(tar))
                assert first.name.endswith("/incident.toml")
                text = tar.extractfile(first).read().decode()  # type: ignore[union-attr]
        elif path.is_dir():
            text = (path / "incident.toml").read_text()
        else:
            continue
        out.append(tomllib.loads(text)["label"])
    return out


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path: Path) -> None:
    a, b, c = (synth(tmp_path / n, 12, seed=s).out for n, s in (("a", 6), ("b", 6), ("c", 7)))
    tree = _tree(a)
    assert tree == _tree(b) and tree != _tree(c)
    assert any(name.endswith(".tar.gz") for name in tree) and any(name.endswith("/train.log") for name in tree)


# What each planted cause must leave, as our parsers read it: (kind, code or None) on the first-failing host.
SIGNATURES = {
    "pcie_link": [("pcie.aer", None), ("gpu.off_bus", None)], "gpu_hardware": [("torch.watchdog_timeout", None)],
    "gpu_memory": [("gpu.xid", 48), ("gpu.xid", 63), ("gpu.remap_pending|gpu.retired_pages", None), ("cuda.ecc", None)],
    "nvlink": [("gpu.xid", 74)], "thermal": [("gpu.thermal_slowdown", None)], "power": [("gpu.power_slowdown", None)],
    "network": [("net.link", None), ("nccl.net_error", None)],
    "numerical": [("train.loss_nonfinite", None), ("cuda.illegal_address|train.grad_nonfinite", None)],
    "code_bug": [("py.exception|cuda.device_assert", None)], "gpu_oom": [("cuda.oom", None)], "host_oom": [("host.oom_kill|job.killed", None)],
    "host_memory": [("host.edac", None), ("host.mce", None)], "storage": [("disk.nvme", None), ("fs.readonly", None)],
    "driver": [("gpu.driver|cuda.error", None)], "container_runtime": [("cuda.error", None)],
    "hang": [("torch.watchdog_timeout|torch.collective_mismatch", None)], "unknown": [("job.child_failed", None)],
}  # fmt: skip


@pytest.mark.parametrize("cause", CAUSES)
def test_every_cause_is_read_back_as_planted(tmp_path: Path, cause: str) -> None:
    out = synth(tmp_path / "s", 1, seed=11, hosts_per_incident=(1, 1), causes=[cause], lemons=()).out
    ref = discover.find_incidents([out]).incidents[0]
    label = ref.config["label"]
    assert label["root_cause"] == cause
    t = incident.read_incident(ref)
    files = pl.from_arrow(t.files)
    damaged = ref.config.get("synth", {}).get("damage") or ""  # files the generator damaged on purpose
    assert files["unparsed"].sum() == 0
    assert all(f.split("/", 1)[-1] in damaged for f in files.filter(pl.col("error").is_not_null())["file"]), files
    # A bug report's header section (its Date and uname only) is no source's: counted, not an error.
    assert files.filter(~pl.col("file").str.ends_with("#header"))["source"].null_count() == 0
    assert {"kernel", "nvsmi"} <= set(files["source"])
    assert set(files["source"]) & {"nccl", "torch", "trainlog"}  # the job log, sniffed by its first lines
    ev = pl.from_arrow(t.events).filter(pl.col("host") == label["first_host"])
    for kind, code in SIGNATURES[cause]:
        hit = ev.filter(pl.col("kind").is_in(kind.split("|")))
        hit = hit if code is None else hit.filter(pl.col("code") == code)
        assert hit.height, f"{cause}: no {kind} {code or ''}"
    if label.get("first_gpu"):  # the GPU-level evidence names the planted GPU
        gpu_kinds = {"gpu.xid", "pcie.aer", "gpu.remap_pending", "gpu.thermal_slowdown"}
        named = ev.filter(pl.col("kind").is_in(gpu_kinds & {k for k, _ in SIGNATURES[cause]}))
        assert set(named["gpu"]) <= {label["first_gpu"]} | (set(ev.filter(pl.col("code") == 74)["gpu"]) if cause == "nvlink" else set())
    if cause == "numerical":  # the NaN comes before the MMU fault (when the training log prints a time)
        nan = ev.filter(pl.col("kind") == "train.loss_nonfinite")["ts"].min()
        fault = ev.filter((pl.col("kind") == "gpu.xid") & (pl.col("code") == 31))
        if ev.filter(pl.col("kind") == "cuda.illegal_address").height:  # a kernel faulted, not the trainer's own check
            assert fault.height and (nan is None or nan < fault["ts"].min())


def test_lemons_are_planted_and_move(tmp_path: Path) -> None:
    report = synth(tmp_path / "s", 300, seed=3)  # 12% lemons: about 12 of each kind
    labels = _labels(report.out)
    lemons = report.lemons
    assert set(lemons) == {"card", "slot", "node"}
    by = Counter(lab.get("lemon") for lab in labels)
    assert all(by[k] >= 3 for k in ("card", "slot", "node")), by
    card = [lab for lab in labels if lab.get("lemon") == "card"]
    assert {lab["first_serial"] for lab in card} == {lemons["card"]}
    assert len({(lab["first_host"], lab["first_gpu"]) for lab in card}) >= 2  # the card moved between slots
    slot_host, slot_bus = lemons["slot"].split("/")
    slot = [lab for lab in labels if lab.get("lemon") == "slot"]
    assert len({(lab["first_host"], lab["first_gpu"]) for lab in slot}) == 1
    assert slot[0]["first_host"] == slot_host and slot[0]["first_gpu"].endswith(f":{slot_bus}:00.0")
    assert {lab["first_host"] for lab in labels if lab.get("lemon") == "node"} == {lemons["node"]}
    # no other card, slot or node repeats like a lemon does
    others = [lab for lab in labels if not lab.get("lemon")]
    serials = Counter(lab.get("first_serial") for lab in others if lab.get("first_serial"))
    assert lemons["card"] not in serials and max(serials.values()) <= 2
    assert lemons["node"] not in {lab["first_host"] for lab in others}


def test_cli_synth(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["synth", "-o", str(tmp_path / "s"), "-n", "4", "--seed", "2",
                                       "--causes", "hang,gpu_oom", "--lemons", "none"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.output == f"{tmp_path / 's'}: 4 incidents, 57 files, 0.6 MB\n  gpu_oom                 3\n  hang                    1\n"
    toml = tomllib.loads((next(p for p in sorted((tmp_path / "s").rglob("incident.toml")))).read_text())
    assert toml["label"]["root_cause"] in {"hang", "gpu_oom"} and toml["job"]["gpus"] % 8 == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--causes", "cosmic_rays"], "Error: unknown cause 'cosmic_rays'"),
        (["--lemons", "gpu"], "Error: unknown lemon kind 'gpu'"),
        (["--hosts-per-incident", "3-1"], "Error: --hosts-per-incident 3-1: need 1 <= A <= B"),
    ],
)
def test_cli_synth_errors(tmp_path: Path, args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, ["synth", "-o", str(tmp_path / "s"), "-n", "2", *args])
    assert result.exit_code == 1 and message in result.output


def test_synth_never_replaces_a_folder_it_did_not_write(tmp_path: Path) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    result = CliRunner().invoke(main, ["synth", "-o", str(tmp_path / "mine"), "-n", "1"])
    assert result.exit_code == 1 and "a folder with other content" in result.output
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"


def test_identities_agree_across_nvrm_nvidia_smi_and_nccl(tmp_path: Path) -> None:
    out = synth(tmp_path / "s", 1, seed=4, hosts_per_incident=(2, 2), causes=["hang"], lemons=()).out
    t = incident.read_incident(discover.find_incidents([out]).incidents[0])
    ids = pl.from_arrow(t.identities)
    assert ids.height == 16 and ids["gpu"].null_count() == 0
    assert ids.filter(pl.col("serial").is_null() | pl.col("uuid").is_null() | pl.col("minor").is_null()).height == 0
    assert ids["ranks"].list.len().to_list() == [1] * 16 and sorted(ids["ranks"].explode()) == list(range(16))
    assert set(ids["learnt_from"].explode()) == {"NCCL", "NVRM", "nvidia-smi"}
    assert ids["learnt_from"].list.len().min() == 3  # every GPU was matched by all three, not split into rows


def test_local_time_skew_bug_reports_and_rotation_read_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every host in local time, archived as a bug report or with a rotated, compressed kern.log: the
    failure still lands within its host's clock error of the true time."""
    import forensics.synth as synth_module

    for name, share in (("LOCAL_TIME_SHARE", 1.0), ("ROTATED_SHARE", 1.0), ("BUG_REPORT_SHARE", 0.5), ("TARBALL_SHARE", 0.0)):
        monkeypatch.setattr(synth_module, name, share)
    # (a seed whose six hosts draw both a bug report and a rotated kern.log: the assertion below says so)
    out = synth(tmp_path / "s", 1, seed=26, hosts_per_incident=(6, 6), causes=["gpu_memory"], lemons=()).out
    ref = discover.find_incidents([out]).incidents[0]
    assert ref.config["timezone"] != "UTC"
    names = {p.name for p in ref.path.rglob("*")}
    assert "nvidia-bug-report.log.gz" in names and ({"kern.log.1", "kern.log.1.gz"} & names)
    t = incident.read_incident(ref)
    files = pl.from_arrow(t.files)
    damaged = ref.config.get("synth", {}).get("damage") or ""  # files the generator damaged on purpose
    assert files["unparsed"].sum() == 0
    assert all(f.split("/", 1)[-1] in damaged for f in files.filter(pl.col("error").is_not_null())["file"]), files
    assert {"kernel", "nvsmi"} <= set(files.filter(pl.col("file").str.contains("#"))["source"])
    label, skew = ref.config["label"], ref.config["synth"]["clock_skew_s"]
    ev = pl.from_arrow(t.events)
    xid48 = ev.filter((pl.col("host") == label["first_host"]) & (pl.col("code") == 48) & pl.col("ts").is_not_null())
    truth = datetime.fromisoformat(label["failed_at"])
    assert xid48.height and all(abs((ts - truth).total_seconds() - skew[label["first_host"]]) < 1.5 for ts in xid48["ts"])


def test_a_tarball_of_the_incident_folder_keeps_its_hosts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``tar czf synth-000000.tar.gz synth-000000/``: the folder inside is not a host."""
    import forensics.synth as synth_module

    monkeypatch.setattr(synth_module, "TARBALL_SHARE", 1.0)
    monkeypatch.setattr(synth_module, "CORRUPT_TARBALL_SHARE", 0.0)
    out = synth(tmp_path / "s", 1, seed=5, hosts_per_incident=(2, 2), causes=["hang"], lemons=()).out
    ref = discover.find_incidents([out]).incidents[0]
    assert ref.path.name == "synth-000000.tar.gz"
    t = incident.read_incident(ref)
    files = pl.from_arrow(t.files)
    assert files["host"].str.starts_with("gpu-node-").all() and files["file"].str.starts_with("gpu-node-").all()
    assert t.id == "synth-000000" and "hang" in t.incidents.column("labels")[0].as_py()


# Every printed form of PROVENANCE.md's "Format variants seen" that the generator writes, as a regex on
# one line of the generated files (launcher prefixes allowed). A corpus of 1,000 incidents holds each.
VARIANTS = {
    # kernel
    "dmesg plain": r"^\[ *\d+\.\d{6}\] ",
    "dmesg -T, day space-padded": r"^\[[A-Z][a-z]{2} [A-Z][a-z]{2}  \d \d\d:\d\d:\d\d \d{4}\] ",
    "dmesg --reltime": r"^\[ *\+\d+\.\d{6}\] ",
    "dmesg -x --time-format iso": r"^kern  :(?:info|err) *: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d{6}[+-]\d\d:\d\d ",
    "dmesg --time-format iso": r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d{6}[+-]\d\d:\d\d NVRM",
    "printk caller id": r"^\[ *\d+\.\d{6}\]\[ *T\d+\] ",
    "talos dmesg": r"^\d+\.\d+\.\d+\.\d+: kern: \w+: \[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{1,9}Z\]: ",
    "syslog with host and uptime": r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d gpu-node-\d+ kernel: \[ *\d+\.\d+\] ",
    "syslog without host": r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d kernel: \[",
    "syslog double space": r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d  kernel: ",
    "NVRM continuation without stamp": r"^ {10,}NVRM: \(PCI ID: ",
    "Xid 79 plain": r"NVRM: Xid \(PCI:0000:[0-9a-f]{2}:00\): 79, GPU has fallen off the bus\.",
    "Xid 79 with quoted pid": r"\): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus\.",
    "Xid 119 6 s": r"\): 119, .*Timeout after 6s of waiting for RPC response from GPU\d GSP! Expected function 76 \(GSP_RM_CONTROL\) \(",
    "Xid 119 45 s with sequence": r"\): 119, .*Timeout after 45s .* sequence \d+ \(",
    "Xid 31, oldest driver (Ch, engmask)": r"\): 31, Ch 00000003, engmask 00000101, intr 10000000$",
    "Xid 32, oldest driver": r"\): 32, Channel ID 00000000 intr 00004000$",
    "Xid 31, 418 (MMU Fault, no pid)": r"\): 31, Ch 0000003a, intr 10000000\. MMU Fault: ENGINE GRAPHICS ",
    "Xid 31, 515-535 (pid, name, Ch)": r"\): 31, pid=\d+, name=python3\.10, Ch 00000008, intr 00000000\. MMU Fault: ",
    "Xid 31, 595 open (channel 0x)": r"\): 31, pid=\d+, name=python, channel 0x0000000c, intr 00000000\. MMU Fault: ",
    "NVLink5 Nonfatal unit error": r"\): 145, RLW_\w+ Nonfatal XC[01] i0 Link \d\d \(0x[0-9a-f]{8}(?: 0x[0-9a-f]{8}){5}\)$",
    "NVLink5 Fatal unit error": r"\): 149, NETIR_LINK_EVT Fatal XC[01] i0 Link \d\d \(0x[0-9a-f]{8}",
    "Xid 45 caused by previous Xid": r"\): 45, pid=\d+, name=python, Ch [0-9a-f]{8}, caused by previous Xid 149$",
    "Xid 94 contained": r"\): 94, .*Contained: SM \(0x1\)\. RST: No, D-RST: No",
    "AER old id=": r"AER: Corrected error received: id=[0-9a-f]{4}$",
    "AER old id=(Receiver ID)": r"PCIe Bus Error: severity=Corrected, type=.*, id=[0-9a-f]{4}\(Receiver ID\)",
    "AER old bit names": r"\] (?:Receiver Error|Bad TLP|Bad DLLP|Replay Timer Timeout) ",
    "AER error message received from": r"AER: Correctable error message received from 0000:",
    "AER tag on continuation lines": r"nvidia 0000:[0-9a-f]{2}:00\.0: AER: PCIe Bus Error: severity=Correctable",
    "AER short bit names, trailing spaces": r"\] (?:RxErr|BadTLP|BadDLLP|Timeout) {10,}\(First\)",
    "AER fatal": r"AER: Uncorrected \(Fatal\) error (?:message )?received",
    "Xid in a non-zero PCI domain": r"NVRM: Xid \(PCI:00(?:01|19):[0-9a-f]{2}:00\): \d+, ",
    "NVRM GPU-index prefix": r"NVRM: GPU\d _kgspIsHeartbeatTimedOut: Heartbeat timed out, curtime 0x",
    "Xid 119 star banner": r"NVRM: GPU\d _kgspLogXid119: \*{33} GSP Timeout \*{34}$",
    "OOM killer 4.4, gfp_mask without flags": r"python invoked oom-killer: gfp_mask=0x24280ca, order=0, oom_score_adj=0$",
    "OOM raw stack words": r" (?:ffff88[0-9a-f]{10} ){3}ffff88[0-9a-f]{10}$",
    "[<ffffffff…>] call trace": r" \[<ffffffff[0-9a-f]{8}>\] dump_header\+0x5a/0x1c5$",
    "OOM Kill process … or sacrifice child": r"Out of memory: Kill process \d+ \(python\) score \d+ or sacrifice child$",
    "OOM invoker with a space in its name": r"GC Thread#9 invoked oom-killer: ",
    "EDAC sbridge MCE block": r"EDAC sbridge MC1: HANDLING MCE MEMORY ERROR$",
    "EDAC CE OVERFLOW": r"EDAC MC1: 262 CE memory read error on .* OVERFLOW area:DRAM",
    "EDAC oldest wording": r"EDAC MC0: 1 UE error on CPU#0Channel#2_DIMM#0 \(",
    "pstore record, <N> priorities": r"^<6>\[ *\d+\.\d{6}\] sysrq: Trigger a crash$",
    "AER uncorrectable non-fatal": r"AER: Uncorrect(?:ed|able) \(Non-Fatal\) error (?:message )?received",
    "syslog kernel tag with klogd's pid": r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d(?: \S+ | {1,2})kernel\[\d+\]: \[ *\d+\.\d+\] ",
    "kernel line, stamp cut off": r"^kernel: NVRM: (?:Xid|GPU)",
    "kernel line, stamp and tag cut off": r"^NVRM: (?:Xid|GPU) ",
    # (the real samples gathered in December 2026)
    "dmesg -T, Dutch names": r"^\[(?:ma|di|wo|do|vr|za|zo) (?:jan|feb|mrt|apr|mei|jun|jul|aug|sep|okt|nov|dec) [ \d]\d \d\d:\d\d:\d\d \d{4}\] ",
    "dmesg -T, Portuguese names": r"^\[(?:Seg|Ter|Qua|Qui|Sex|Sáb|Dom) (?:Jan|Fev|Mar|Abr|Mai|Jun|Jul|Ago|Set|Out|Nov|Dez) [ \d]\d \d\d:\d\d:\d\d \d{4}\] ",
    "dmesg -T, Polish names": r"^\[(?:pon|wt|śr|czw|pt|sob|nie) (?:sty|lut|mar|kwi|maj|cze|lip|sie|wrz|paź|lis|gru) [ \d]\d \d\d:\d\d:\d\d \d{4}\] ",
    "pasted NVRM lines, indented": r"^ {2,4}(?:kernel: )?NVRM: (?:Xid|GPU) ",
    "Xid with its PCI id crossed out": r"NVRM: Xid \(PCI:\.\.\.\): \d+, ",
    "AER tag, one space, bit unpadded": r"nvidia [0-9a-f]{4}:[0-9a-f]{2}:00\.0: AER: \[[ \d]\d\] (?:RxErr|BadTLP|BadDLLP|Timeout|CmpltTO|SurpDn|MalfTLP)$",
    "NVLink5 NETIR on Link -1": r"\): 149, NETIR Fatal XC[01] i0 Link -1 \(0x[0-9a-f]{8}",
    "off the bus, oldest one-line": r"NVRM: GPU at [0-9a-f]{4}:[0-9a-f]{2}:00\.0 has fallen off the bus\.$",
    "mlx5 Cable unplugged": r"mlx5_core 0000:[0-9a-f]{2}:00\.0: Port module event: module \d, Cable unplugged$",
    "NETDEV WATCHDOG, interface first (5.x)": r"NETDEV WATCHDOG: ibp\d+s0 \(mlx5_core\): transmit queue \d timed out$",
    "NETDEV WATCHDOG, CPU and ms (6.x)": r"ibp\d+s0: NETDEV WATCHDOG: CPU: \d+: transmit queue \d timed out \d+ ms$",
    "NVRM API mismatch, multi-line": r"NVRM: API mismatch: the client has the version \d",
    "NVRM API mismatch naming the client": r"NVRM: API mismatch: the client 'python' \(pid \d+\)$",
    # journal
    "journal short-iso": r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4} gpu-node-\d+ ",
    "journal short": r"^[A-Z][a-z]{2} \d\d \d\d:\d\d:\d\d gpu-node-\d+ ",
    "journal short-precise": r"^[A-Z][a-z]{2} \d\d \d\d:\d\d:\d\d\.\d{6} gpu-node-\d+ ",
    "journal short-monotonic": r"^\[ *\d+\.\d{6}\] gpu-node-\d+ (?:kernel|systemd|kubelet|sshd|nvidia)",
    "journal Polish month, no host": r"^(?:sty|lut|kwi|maj|cze|lip|sie|wrz|paź|lis|gru) \d\d \d\d:\d\d:\d\d (?:kernel|systemd)",
    "journal localized month, no host": r"^(?:янв|фев|мар|апр|мая|июн|июл|авг|сен|окт|ноя|дек|\d{1,2}月|janv\.|févr\.|mars|avril|mai|juin|juil\.|août|sept\.|oct\.|nov\.|déc\.|mrt|mei|okt) \d\d \d\d:\d\d:\d\d (?:kernel|systemd)",
    "journal boot marker": r"^-- Boot [0-9a-f]{32} --$",
    "journal logs begin": r"^-- Logs begin at \w{3} \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+, end at ",
    "journal embedded klog stamp": r"kubelet\[\d+\]: I\d{4} \d\d:\d\d:\d\d\.\d{6} ",
    "journal -o json, compact": r'^\{"__CURSOR":"s=[0-9a-f]{32};i=[0-9a-f]+;b=',
    "journal -o json, spaced (older systemd)": r'^\{ "__CURSOR" : "s=[0-9a-f]{32};',
    "journal json MESSAGE as a byte array": r'"MESSAGE" ?: ?\[\d+(?:, ?\d+){10,}\]',
    "journal -o export": r"^__REALTIME_TIMESTAMP=\d{16}$",
    "journal export binary-safe field": r"^MESSAGE$",
    "journal -- Reboot --": r"^-- Reboot --$",
    "journal all-zero boot id": r"^-- Boot 0{32} --$",
    "journal host name set late (localhost first)": r"^(?:\d{4}-\d\d-\d\dT\S+|[A-Z][a-z]{2} \d\d \d\d:\d\d:\d\d(?:\.\d{6})?|\[ *\d+\.\d{6}\]) localhost kernel: ",
    "journal embedded fabric manager stamp": r"nv-fabricmanager\[\d+\]: \[[A-Z][a-z]{2} \d\d \d{4} \d\d:\d\d:\d\d\] \[INFO\] \[tid \d+\] ",
    "journal embedded driverdog stamp": r"driverdog\[\d+\]: \d\d:\d\d:\d\d \[INFO\] ",
    # (a line that matches the first and not the second regex)
    "journal pager truncation": (r" kernel: Linux version \d", r"-Ubuntu SMP$"),
    "journal terminal hard-wrap": (r'dcgm-exporter-7x2kq"$', r"kubelet\[\d+\]"),
    # nccl
    "NCCL 2.4 banner": r"NCCL INFO NCCL version 2\.4\.7\+cuda10\.0$",
    "NCCL 2.2x banner": r"NCCL INFO NCCL version 2\.2\d\.\d\+cuda12\.4$",
    "NCCL 2.26 bare banner, compiled with": r"^NCCL version 2\.26\.2 compiled with CUDA 12\.4$",
    "NCCL ring via P2P/IPC/read": r"NCCL INFO Ring 00 : \d+\[[0-9a-f]+\] -> \d+\[[0-9a-f]+\] via P2P/IPC/read$",
    "NCCL channel via SHM/direct/direct": r"NCCL INFO Channel 00/0 : \d+\[\d\] -> \d+\[\d\] via SHM/direct/direct$",
    "NCCL ring via P2P/IPC": r"NCCL INFO Ring 00 : \d+\[[0-9a-f]+\] -> \d+\[[0-9a-f]+\] via P2P/IPC",
    "NCCL channel via P2P/CUMEM": r"NCCL INFO Channel 00/0 : \d+\[\d\] -> \d+\[\d\] via P2P/CUMEM",
    "NCCL channel via NET/IB/GDRDMA": r"NCCL INFO Channel 01/1 : \d+\[\d\] -> \d+\[\d\] \[send\] via NET/IB/\d/GDRDMA",
    "NCCL WARN with file:line": r"transport/net_ib\.cc:\d+ NCCL WARN ",
    "IB completion, old": r"NET/IB : Got completion with error 12, opcode 0, len 0, vendor err 129$",
    "IB completion from peer": r"NET/IB : Got completion from peer [\d.]+<\d+> with error 12, opcode 0",
    "IB completion status= remoteGids": r"with status=12 opcode=0 len=0 vendor err 129 \(Recv\) localGid fd00::\d+ remoteGidsfd00::",
    "IB completion NET/IBP": r"NET/IBP : Got completion from peer",
    "NCCL error chain": r"NCCL INFO proxy\.cc:\d+ -> 6 \[Progress Thread\]",
    "NCCL service thread, connection closed": r"NCCL INFO \[Service thread\] Connection closed by localRank \d$",
    "NCCL busId in a non-zero domain": r"busId (?:1|19)[0-9a-f]{5} commId",
    "NCCL WARN misc/socket.cc, closed by remote peer": r"misc/socket\.cc:49 NCCL WARN socketProgress: Connection closed by remote peer \S+<\d+>$",
    "NCCL WARN include/socket.h (2.4)": r"include/socket\.h:423 NCCL WARN Net : Connection closed by remote peer [\d.]+<\d+>$",
    "NCCL WARN ib_plugin.c": r"ib_plugin\.c:1615 NCCL WARN NET/IBP? : Got completion from peer",
    "NCCL async thread's -> 3": r"NCCL INFO group\.cc:65 -> 3 \[Async thread\]$",
    "NCCL host name redacted": r"^<(?:cluster_name|hostname)>:\d+:\d+ \[\d\] NCCL INFO ",
    "NCCL and torchrun naming a container's host": r"^(?:user|hostname-test|[0-9a-f]{12}):\d+:\d+ \[\d\] NCCL INFO ",
    "host named by its address": r"^10-\d+-\d+-\d+:\d+:\d+ \[\d\] NCCL INFO ",
    "host named as a Kubernetes pod": r"^job-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-worker-\d:\d+:\d+ \[\d\] NCCL INFO ",
    "aws-ofi-nccl completion error": r"NCCL WARN NET/OFI Request 0x[0-9a-f]+ completed with error\. RC: 21\. ",
    "aws-ofi-nccl register_mr_buffers": r"register_mr_buffers:465 NCCL WARN NET/OFI Unable to register memory \(type = 1\)",
    "NCCL RAS report, MISMATCH": r"^  \d+ ranks have launched up to operation \d+$",
    "NCCL RAS report, rank listing": r"^  Rank \d+ -- GPU \d managed by process \d+ on node 10\.20\.",
    "launcher tag-output": r"^\[1,\d+\]<stdout>:",
    "launcher pdsh doubled": r"^(gpu-node-\d+): (gpu-node-\d+): ",
    "launcher mpirun rank": r"^\[\d+\] \S",
    "launcher Ray actor": r"^\(RayWorkerVllm pid=\d+\) \S",
    "launcher pdsh by address, doubled": r"^10\.20\.\d+\.\d+: 10\.20\.\d+\.\d+: ",
    "log viewer's line numbers": r"^\[\d+\] (?:\[rank\d+\]:|\[1,\d+\]<stdout>:|\[\d+\] |gpu-node-\d+: |\S+:\d+:\d+ \[\d\] NCCL)",
    # torch
    "watchdog glog, ns, rank prefix": r"\[rank\d+\]:\[E\d{4} \d\d:\d\d:\d\d\.\d{6} ProcessGroupNCCL\.cpp:\d+\] \[Rank \d+\] Watchdog caught",
    "watchdog old, no numel": r"^(?:.*\] )?\[E ProcessGroupNCCL\.cpp:737\] \[Rank \d+\] Watchdog caught .*OpType=ALLREDUCE, Timeout\(ms\)",
    "watchdog PG GUID": r"\[PG ID 0 PG GUID 0\(default_pg\) Rank \d+\] Exception \(either an error or timeout\)",
    "watchdog PG (default_pg)": r"\[PG 0 \(default_pg\) Rank \d+\] Exception \(either an error or timeout\) detected by watchdog",
    "heartbeat monitor timed out": r"^\[rank\d+\]:\[E ProcessGroupNCCL\.cpp:1316\] \[PG 0 Rank \d+\] Heartbeat monitor timed out! ",
    "glog F (fatal) line": r"^\[rank\d+\]:\[F ProcessGroupNCCL\.cpp:1169\] .*watchdog got stuck for 600 seconds",
    "terminate called, c10::DistBackendError": r"^\[rank\d+\]: terminate called after throwing an instance of 'c10::DistBackendError'$",
    "terminate called, old c10::Error": r"^terminate called after throwing an instance of 'c10::Error'$",
    "what(), two spaces, new wording": r"  what\(\):  \[PG .*Rank \d+\] Process group watchdog thread terminated with exception: ",
    "what(), old wording": r"^  what\(\):  \[Rank \d+\] NCCL watchdog thread terminated with exception: ",
    "Exception raised from (most recent call first)": r"Exception raised from checkTimeout at \.\./torch/csrc/distributed/c10d/ProcessGroupNCCL\.cpp:\d+ \(most recent call first\):$",
    "C++ frame, watchdogHandler": r"frame #2: c10d::ProcessGroupNCCL::watchdogHandler\(\) \+ 0x[0-9a-f]+ \(0x[0-9a-f]+ in /",
    "C++ frame, workCleanupLoop": r"^frame #2: c10d::ProcessGroupNCCL::workCleanupLoop\(\) \+ 0x[0-9a-f]+ \(0x[0-9a-f]+ in /",
    "torchrun agent glog": r"^E\d{4} \d\d:\d\d:\d\d\.\d{6} \d+ torch/distributed/elastic/multiprocessing/api\.py:\d+\] failed \(exitcode: -?\d+\)",
    "torchrun agent logging": r"^ERROR:torch\.distributed\.elastic\.multiprocessing\.api:failed \(exitcode: -?\d+\)",
    "ChildFailedError with trailing space": r"ChildFailedError: $",
    "torchrun root cause": r"^Root Cause \(first observed failure\):$",
    "torchrun no other failures": r"<NO_OTHER_FAILURES>",
    "torchrun signal traceback": r"traceback : Signal 6 \(SIGABRT\) received by PID \d+",
    "Python 3.11+ caret lines": r"^\[rank\d+\]:     \^{5,}$",
    "rank-prefixed traceback": r"^\[rank\d+\]: Traceback \(most recent call last\):",
    "torch.OutOfMemoryError": r"torch\.OutOfMemoryError: CUDA out of memory\. Tried to allocate",
    "device-side assert": r"Loss\.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: \[0,0,0\], thread: \[\d,0,0\] Assertion",
    "device-side assert after the traceback": r"device-side assert triggered\n(?:.*: )?\[rank\d+\]: .*: block: \[\d,0,0\], thread: \[0,0,0\] Assertion",
    "THCUNN device-side assert": r"THCUNN/SpatialClassNLLCriterion\.cu:104: void cunn_.*\[with T = float, AccumT = float\]: block: \[0,0,0\], thread: \[\d+,0,0\] Assertion",
    "vLLM worker_base prefix": r"^ERROR \d\d-\d\d \d\d:\d\d:\d\d worker_base\.py:574\] Traceback \(most recent call last\):$",
    "watchdog glued to a progress bar": r"v_num=0\]\[rank\d+\]:\[E\d{4} \d\d:\d\d:\d\d\.\d{6} ProcessGroupNCCL\.cpp:607\] ",
    "old watchdog glued to a progress bar": r"v_num=0\]\[E ProcessGroupNCCL\.cpp:737\] \[Rank \d+\] Watchdog caught",
    "torch.cuda.OutOfMemoryError (PyTorch 2.0)": r"torch\.cuda\.OutOfMemoryError: CUDA out of memory\. Tried to allocate 4\.00 GiB \(GPU \d; 79\.10 GiB total capacity;",
    "OOM naming another process": r"is free\. Process \d+ has 6\.00 GiB memory in use\. Including non-PyTorch memory",
    "OOM with CUDA Graphs' private pools": r"with 46\.00 MiB allocated in private pools \(e\.g\., CUDA Graphs\), and",
    "device-side assert, Windows path": r"^\[rank\d+\]: C:\\actions-runner\\_work\\pytorch\\.*\\NLLLoss2d\.cu:103: block: \[4,0,0\], thread: \[\d+,0,0\] Assertion",
    "watchdog [PG 1 Rank N]": r"\[PG 1 Rank \d+\] Exception \(either an error or timeout\) detected by watchdog",
    "watchdog glued to faulthandler's Extension modules": r"\(total: \d+\)(?:\[rank\d+\]:\[E\d{4} |\[E ProcessGroupNCCL\.cpp:737\] )",
    "watchdog hard-wrapped between words, rows padded": r"Watchdog caught .* $",
    "watchdog hard-wrapped mid-token": (r"Watchdog caught .*\S$", r"timing out\.$"),
    "multi-rank tracebacks interleaved": r"\[rank\d+\]: Traceback \(most recent call last\):\n(?:.*: )?\[rank\d+\]: Traceback \(most recent",
    "Megatron NaN grad-norm assertion": r"AssertionError: Rank \d+: found NaN in local grad norm in backwards pass\. Device: \d, node: ",
    "NVML driver/library version mismatch": r"Failed to initialize NVML: Driver/library version mismatch$",
    "CUDA error 802, bare": r"^RuntimeError: CUDA error: system not yet initialized$",
    "NVML Unknown Error in a container": r"^Failed to initialize NVML: Unknown Error$",
    "docker could not select device driver": r'^docker: Error response from daemon: could not select device driver "" with capabilities: \[\[gpu\]\]\.$',
    "THCudaCheck FAIL, no device (error 38)": r"THCudaCheck FAIL file=\S+ line=\d+ error=38 : no CUDA-capable device is detected$",
    "THCudaCheck FAIL, out of memory (error 2)": r"THCudaCheck FAIL file=\S+ line=\d+ error=2 : out of memory$",
    "CUDA OOM, cached (PyTorch 1.0-1.3)": r"RuntimeError: CUDA out of memory\. Tried to allocate .*; \d+\.\d\d GiB cached\)$",
    "CUDA OOM, reserved in total by PyTorch": r"RuntimeError: CUDA out of memory\. Tried to allocate .* reserved in total by PyTorch\)$",
    "CUDA OOM line without a traceback": r"^RuntimeError: CUDA out of memory\. Tried to allocate ",
    "DataLoader worker killed by signal": r"RuntimeError: DataLoader worker \(pid \d+\) is killed by signal: Killed\.$",
    "collective mismatch (TORCH_DISTRIBUTED_DEBUG)": r"RuntimeError: Detected mismatch between collectives on ranks\. Rank \d+ is running inconsistent collective: CollectiveFingerPrint\(OpType=ALLGATHER, ",
    "DeepSpeed loss scale at minimum": r"Exception: Current loss scale already at minimum - cannot decrease scale anymore\. Exiting run\.$",
    # nvidia-smi
    "nvidia-smi -q, colon at 42": r"^    Product Name {26}: ",
    "nvidia-smi -q, colon at 36": r"^    Product Name {20}: ",
    "nvidia-smi -q, colon at 32": r"^    Product Name {16}: ",
    "nvidia-smi 8-digit domain": r"^GPU 00000000:[0-9A-F]{2}:00\.0$",
    "nvidia-smi -q -x, DTD v12": r'^<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12\.dtd">$',
    "nvidia-smi -q -x, declaration without encoding": r'^<\?xml version="1\.0" \?>$',
    "nvidia-smi -q -x, tabs": r'^\t<gpu id="00000000:[0-9A-F]{2}:00\.0">$',
    "nvidia-smi -q -x, four spaces": r'^    <gpu id="00000000:[0-9A-F]{2}:00\.0">$',
    "nvidia-smi --query-gpu csv, units in header": r"^timestamp, index, pci\.bus_id, serial, temperature\.gpu, power\.draw \[W\]",
    "nvidia-smi: device handle error": r"^Unable to determine the device handle for GPU00(?:00|01|19):[0-9A-F]{2}:00\.0: Unknown Error$",
    "nvidia-smi -q, non-zero domain": r"^GPU 0000(?:0001|0019):[0-9A-F]{2}:00\.0$",
    "nvidia-smi -q, N/A value": r"^    Fan Speed +: N/A$",
    "nvidia-smi -q, error string value (575)": r"^        Reset Required +: Requested functionality has been deprecated$",
    "nvidia-smi -q -x, DTD v11": r'^<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v11\.dtd">$',
    "nvidia-smi -q -x, v11 throttle reasons": r"^\s+<clocks_throttle_reasons>$",
    "nvidia-smi -q -x, DTD v13": r'^<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v13\.dtd">$',
    "nvidia-smi -q, four-digit domain (304.x)": r"^GPU 0000:[0-9A-F]{2}:00\.0$",
    "nvidia-smi -q, Clocks Throttle Reasons": r"^    Clocks Throttle Reasons$",
    "nvidia-smi -q, Retired Pages": r"^        Pending Page Blacklist +: (?:Yes|No)$",
    "nvidia-smi -q, Remapped Rows N/A on one line": r"^    Remapped Rows +: N/A$",
    "nvidia-smi -q, Unknown Error value": r"^        (?:GPU Current Temp|Power Draw) +: Unknown Error$",
    "nvidia-smi -q, MIG mode": r"^    MIG Mode$",
    "nvidia-smi -q, Inforom BBX Object Flush": r"^        Latest Timestamp +: \d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{3}$",
    "nvidia-smi -q, SRAM ECC breakdown": r"^            SRAM Uncorrectable SEC-DED +: 0$",
    "nvidia-smi -q, GPU C2C Mode": r"^    GPU C2C Mode +: N/A$",
    "nvidia-smi -q, Fabric State/Status": r"^        State +: Completed$",
    "nvidia-smi -q -x, MIG mode": r"^\s+<current_mig>Disabled</current_mig>$",
    "nvidia-smi -q -x, eight spaces": r'^        <gpu id="00000000:[0-9A-F]{2}:00\.0">$',
    "nvidia-smi -q -x, DTD v9": r'^<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v9\.dtd">$',
    "nvidia-smi -q -x, DTD v10": r'^<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v10\.dtd">$',
    "nvidia-smi -q -x, retired pages": r"^\s+<pending_retirement>(?:Yes|No)</pending_retirement>$",
    "nvidia-smi -q -x, scalar remapped rows": r"^\s+<remapped_rows>N/A</remapped_rows>$",
    "nvidia-smi -q -x, ECC per structure": r"^\s+<double_bit>$",
    "nvidia-smi -q -x, redacted UUID": r"<uuid>GPU-[0-9a-f]{4}x{4}-[0-9a-f]{2}x{2}-[0-9a-f]{2}x{2}-",
    "nvidia-smi csv, units in values and [N/A]": r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{3}, \d, .*, \[N/A\], \d+ %, \d+$",
    # telemetry of the failing host (issue 34): dmon -o DT, the SEL, iostat -x -t, a --query-gpu PCIe loop
    "nvidia-smi dmon -o DT, 5xx header": r"^#Date       Time        gpu    pwr  gtemp  mtemp     sm    mem ",
    "ipmitool sel elist, PSU failure": r"^ +[0-9a-f]+ \| \d\d/\d\d/\d{4} \| \d\d:\d\d:\d\d \| Power Supply PS\d Status \| Failure detected \| Asserted$",
    "iostat -x -t, sysstat 12 head": r"^Device +r/s +rkB/s +rrqm/s +%rrqm r_await rareq-sz .* f_await  aqu-sz  %util$",
    "nvidia-smi --query-gpu PCIe link loop": r"^timestamp, index, pci\.bus_id, pcie\.link\.gen\.current, pcie\.link\.gen\.max, ",
    # training logs
    "Megatron iteration": r"^ \[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] iteration +\d+/ +500000 \| ",
    "Megatron NaN iteration, lm loss gone": r"iteration .*\| loss scale: 1\.0 \| grad norm: nan \|",
    "HF Trainer dict": r"^\{'loss': (?:nan|\d+\.\d+), 'grad_norm': ",
    "nanoGPT": r"^iter \d+: loss (?:nan|\d+\.\d+), time \d+\.\d+ms, mfu",
    "litgpt": r"^iter \d+ step \d+: loss (?:nan|\d+\.\d+), iter time: \d+\.\d+ms",
    "DeepSpeed OVERFLOW, hysteresis": r"\[deepspeed\] OVERFLOW! Rank 0 Skipping step\. Attempted loss scale: \d+, but hysteresis is 2\. Reducing hysteresis to 1$",
    "DeepSpeed OVERFLOW, reducing": r"\[deepspeed\] OVERFLOW! Rank 0 Skipping step\. Attempted loss scale: \d+, reducing to \d+$",
    "ZeRO-3 [deepscale], float scale, glued to tqdm": r"s/it\]\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] \[INFO\] \[stage3\.py:2323:_overflow_clean_up\] \[deepscale\] OVERFLOW! .* \d+\.0, reducing to \d+\.0$",
    "fused_optimizer overflow on the next line": r"^Grad overflow on iteration \d+$",
    "mmengine": r" - mmengine - INFO - Epoch\(train\) \[1\]\[\d+/\d+\]  lr: ",
    "maskrcnn_benchmark": r" maskrcnn_benchmark\.trainer INFO: eta: \d+:\d\d:\d\d  iter: \d+  loss: (?:nan \(nan\)|\d+\.\d{4} \(\d+\.\d{4}\))  ",
    "RETURNN": r"^ep 1 train, step \d+, acc \d\.\d{3}, loss (?:nan|\d+\.\d{3}), ",
    "mmcv, TAB after the counter": r" - mmdet - INFO - Epoch \[1\]\[\d+/62598\]\tlr: ",
}


def _lines_of(root: Path) -> pl.Series:
    """Every line of every generated file, tarballs and compressed files opened as ingest opens them."""
    from forensics.ingest.archive import Limits, expand_file

    texts = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        for member in expand_file(str(path), path.name, limits=Limits(incident_bytes=1 << 40)):
            if member.data:
                texts.append(member.data.decode("utf-8", "replace"))
    return pl.Series("line", "\n".join(texts).split("\n"))


def test_every_printed_form_is_in_a_thousand_incidents(tmp_path: Path) -> None:
    synth(tmp_path / "s", 1000, seed=1)
    lines = _lines_of(tmp_path / "s")
    # The launcher's prefix comes off first, as the parsers peel it.
    pair = lines + "\n" + lines.shift(-1).fill_null("")  # each line with the next (interleaving)
    bare = lines.str.replace(r"^(?:\[1,\d+\]<stdout>:|(?:gpu-node-\d+|10\.20\.\d+\.\d+): (?:gpu-node-\d+|10\.20\.\d+\.\d+): |\[\d+\] (?:\[\d+\] )?|\(RayWorkerVllm pid=\d+\) )", "")
    frame = pl.DataFrame({"line": lines, "bare": bare, "pair": pair})
    def holds(rx: str | tuple[str, str], column: str) -> pl.Expr:
        if isinstance(rx, tuple):  # a line that matches the first and not the second
            return (pl.col(column).str.contains(rx[0]) & ~pl.col(column).str.contains(rx[1])).any()
        return pl.col(column).str.contains(rx).any()

    found = frame.select(**{name: holds(rx, "pair" if "\\n" in str(rx) else "line") | holds(rx, "bare")
                            for name, rx in VARIANTS.items()}).row(0, named=True)  # fmt: skip
    missing = [name for name, hit in found.items() if not hit]
    assert missing == [], missing
    # an nvidia-smi -q -x pasted by hand, cut off before its end (not well-formed)
    damage = [lab for lab in (tomllib.loads(p.read_text()).get("synth", {}).get("damage") or ""
                              for p in (tmp_path / "s").glob("*/incident.toml"))]  # fmt: skip
    assert any("nvidia-smi-q.xml truncated" in d for d in damage)


#: What each cause's telemetry shows on the failing host, as the sources read it back (issue 34, point 6).
TELEMETRY = {
    "thermal": ("gpuseries", ["gpu.temp_rise", "gpu.thermal_slowdown"]),
    "power": ("sel", ["bmc.psu", "bmc.power"]),
    "storage": ("disks", []),
    "pcie_link": ("nvsmi", ["gpu.pcie_degraded"]),
}


@pytest.mark.parametrize("cause", sorted(TELEMETRY))
def test_telemetry_shows_the_cause_before_the_failure(tmp_path: Path, cause: str) -> None:
    out = synth(tmp_path / "s", 1, seed=7, hosts_per_incident=(2, 2), causes=[cause], lemons=()).out  # (a folder, not a tarball)
    ref = discover.find_incidents([out]).incidents[0]
    label = ref.config["label"]
    failed_at = datetime.fromisoformat(label["failed_at"].replace("Z", "+00:00"))
    t = incident.read_incident(ref)
    source, kinds = TELEMETRY[cause]
    files = pl.from_arrow(t.files).filter(pl.col("file").str.contains(r"/(?:nvidia-smi-dmon|ipmitool-sel|iostat|nvidia-smi-pcie)"))
    assert set(files["source"]) == ({source, "gpuseries"} if cause == "power" else {source})
    assert files.height and files["unparsed"].sum() == 0 and set(files["file"].str.split("/").list.first()) == {label["first_host"]}
    samples = pl.from_arrow(t.samples).filter(pl.col("file").is_in(files["file"].to_list()))
    ev = pl.from_arrow(t.events).filter(pl.col("file").is_in(files["file"].to_list()) & pl.col("kind").is_in(kinds))
    if label.get("first_gpu"):  # the planted GPU's readings say it, the others' do not
        assert set(ev["gpu"]) == {label["first_gpu"]}
    assert ev["ts"].min() is None or ev["ts"].min() < failed_at  # (a time in the host's own zone, read back)
    if cause == "thermal":  # the temperature climbs, then the clocks fall
        gpu = samples.filter(pl.col("gpu") == label["first_gpu"]).sort("ts")
        assert gpu.filter(pl.col("metric") == "temperature_c")["value"].max() >= 88
        assert gpu.filter(pl.col("metric") == "sm_clock_mhz")["value"].min() < 1980
    if cause == "power":  # the PSU failed, the GPUs' power collapsed
        assert ev.filter(pl.col("severity").is_in(["warning", "error", "critical"])).height
        dmon = pl.from_arrow(t.events).filter(pl.col("kind") == "gpu.power_drop")
        assert dmon.height >= 8 and (dmon["ts"] < failed_at).all()
    if cause == "storage":  # await in the seconds at 100% utilization, on the disk the kernel named
        slow = samples.filter((pl.col("metric") == "await_ms") & (pl.col("value") >= 200))
        # (iostat's wall clock is not re-read in the incident's zone by ingest yet: its times are not compared)
        assert set(slow["device"]) == {"nvme1n1"} and slow["ts"].min() > samples["ts"].min()
        busy = samples.filter((pl.col("metric") == "util_pct") & (pl.col("device") == "nvme1n1") & (pl.col("ts") >= slow["ts"].min()))
        assert (busy["value"] == 100).all()
