"""The journal source: text modes, boots, service families, -o json and -o export."""

from __future__ import annotations

import json
import struct
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forensics.parse import parse_bytes
from forensics.sources import journal

from .conftest import GOLDEN


def rows(data: bytes | str, **options: Any) -> list[dict[str, Any]]:
    raw = data.encode() if isinstance(data, str) else data
    options.setdefault("all_lines", True)  # every record: how lines are read (the lines of interest: test_streaming)
    out = parse_bytes(raw, file="j.log", source="journal", **options).events.to_pylist()
    for r in out:
        r["detail"] = json.loads(r["detail"])
    return out


def sample(name: str) -> list[dict[str, Any]]:
    return rows((GOLDEN / "journal" / name).read_bytes())


def test_fabricmanager_failure_chain() -> None:
    got = sample("journal-fabricmanager-start-sh-pre-nvl5-nothing-to-do-01.log")
    assert [r["kind"] for r in got] == ["other", "svc.fabricmanager", "svc.fabricmanager", "svc.failed"]
    assert got[1]["detail"]["nv_status"] == "NV_WARN_NOTHING_TO_DO" and got[1]["severity"] == "warning"
    assert got[2]["detail"]["exit_code"] == 1
    failed = got[3]["detail"]
    assert (failed["unit"], failed["event"], failed["status"]) == ("nvidia-fabricmanager.service", "exited", 1)
    assert {r["source"] for r in got} == {"journal"} and got[3]["pid"] == 1


def test_restart_loop_and_kernel_lines_of_a_jetson() -> None:
    got = sample("journal-jetson-nvgpu-audit-kernel-pid-embedded-ts-01.log")
    restart = next(r for r in got if r["kind"] == "svc.failed")
    assert (restart["detail"]["event"], restart["detail"]["restarts"], restart["severity"]) == ("restart", 4, "warning")
    assert [r["source"] for r in got[-2:]] == ["kernel", "kernel"]


def test_boots_are_numbered_from_markers() -> None:
    got = sample("journal-short-monotonic-boot-markers-zero-bootid-01.log")
    assert [(r["line"], r["detail"]["boot"]) for r in got if r["kind"] == "host.boot"] == [(1, 0), (4, 1)]
    assert got[1]["detail"]["boot_id"] == "bc3fc4659c554110994ad36deade2c2c"
    assert got[4]["detail"]["boot_id"] is None  # the bogus all-zero id of systemd 251/252
    assert got[4]["uptime_s"] == 1.343565 and got[4]["host"] == "archlinux"


def test_uptime_going_back_starts_a_boot() -> None:
    text = "[  100.0] h kernel: a\n[  200.0] h kernel: b\n[    1.0] h kernel: Linux version 6.1.0 (x)\n[    2.0] h kernel: c\n"
    assert [r["detail"]["boot"] for r in rows(text)] == [0, 0, 1, 1]


def test_short_full_and_unix_modes() -> None:
    full = rows("Wed 2015-12-02 22:53:58 UTC gpu3 systemd[1]: foo.service: Failed with result 'exit-code'.\n")[0]
    assert full["kind"] == "svc.failed" and full["ts"].isoformat() == "2015-12-02T22:53:58+00:00"
    assert full["detail"]["result"] == "exit-code" and full["host"] == "gpu3"
    unix = rows("1599541804.928338 gpu3 kernel: NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n")[0]
    assert unix["kind"] == "gpu.xid" and unix["ts"].isoformat() == "2020-09-08T05:10:04.928338+00:00"


def test_service_families() -> None:
    text = (
        "Jan 30 10:22:56 n1 kubelet[1679]: E0130 10:22:56.147751    1679 kubelet.go:2855] \"Container runtime network not ready\"\n"
        "Jan 30 10:22:57 n1 containerd[900]: time=\"2024-01-30T10:22:57Z\" level=error msg=\"nvml error: driver/library version mismatch\"\n"
        "Jan 30 10:22:58 n1 nvidia-device-plugin[77]: E0130 failed to get devices: Xid 79 on GPU-1234\n"
        "Jan 30 10:22:59 n1 nvidia-persistenced[55]: Failed to open libnvidia-ml.so.1\n"
        "Jan 30 10:23:00 n1 systemd[1]: Failed to start NVIDIA Persistence Daemon.\n"
        "Jan 30 10:23:01 n1 systemd[1]: foo.service: Main process exited, code=killed, status=9/KILL\n"
    )
    got = rows(text, year=2024)
    assert [r["kind"] for r in got] == ["svc.kubelet", "svc.container_runtime", "svc.device_plugin",
                                        "svc.persistenced", "svc.failed", "svc.failed"]  # fmt: skip
    assert got[4]["detail"]["description"] == "NVIDIA Persistence Daemon" and got[4]["detail"]["event"] == "start_failed"
    assert (got[5]["detail"]["status"], got[5]["detail"]["signal"]) == (9, "KILL")
    assert got[0]["ts"].isoformat() == "2024-01-30T10:22:56+00:00" and got[0]["detail"]["unit"] == "kubelet"


JSON_ENTRIES = [
    {"__REALTIME_TIMESTAMP": "1705312800000000", "__MONOTONIC_TIMESTAMP": "12345678", "_BOOT_ID": "aa" * 16,
     "_HOSTNAME": "gpu7", "PRIORITY": "3", "SYSLOG_IDENTIFIER": "kernel", "_TRANSPORT": "kernel",
     "MESSAGE": "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."},
    {"__REALTIME_TIMESTAMP": "1705312801000000", "__MONOTONIC_TIMESTAMP": "13345678", "_BOOT_ID": "aa" * 16,
     "_HOSTNAME": "gpu7", "PRIORITY": "6", "SYSLOG_IDENTIFIER": "systemd", "_PID": "1",
     "MESSAGE": "nvidia-persistenced.service: Main process exited, code=exited, status=1/FAILURE"},
    {"__REALTIME_TIMESTAMP": "1705312900000000", "__MONOTONIC_TIMESTAMP": "1000000", "_BOOT_ID": "bb" * 16,
     "_HOSTNAME": "gpu7", "PRIORITY": "6", "SYSLOG_IDENTIFIER": "myapp", "MESSAGE": [104, 105, 255]},
]  # fmt: skip


def test_json_compact_and_spaced() -> None:
    compact = "\n".join(json.dumps(e, separators=(",", ":")) for e in JSON_ENTRIES) + "\n"
    spaced = "\n".join(json.dumps(e, separators=(", ", " : ")) for e in JSON_ENTRIES) + "\n"
    for text in (compact, spaced):
        got = rows(text)
        assert [r["kind"] for r in got] == ["gpu.xid", "svc.failed", "other"]
        xid = got[0]
        assert (xid["source"], xid["host"], xid["gpu"], xid["severity"]) == ("kernel", "gpu7", "0000:3b:00.0", "critical")
        assert xid["ts"].isoformat() == "2024-01-15T10:00:00+00:00" and xid["uptime_s"] == 12.345678
        assert xid["detail"]["boot"] == 0 and got[2]["detail"]["boot"] == 1
        assert got[2]["message"] == "hi\\xff" and got[2]["line"] == 3 and got[1]["pid"] == 1


def test_json_with_a_broken_line_keeps_it() -> None:
    text = json.dumps(JSON_ENTRIES[0]) + "\n{not json\n"
    parsed = parse_bytes(text.encode(), file="j.json", source="journal")
    got = parsed.events.to_pylist()
    assert [r["kind"] for r in got] == ["gpu.xid", "other"] and got[1]["message"] == "{not json"
    assert "could not be decoded" in parsed.files.to_pylist()[0]["error"]


def _export(entries: list[dict[str, Any]]) -> bytes:
    out = b""
    for e in entries:
        for key, value in e.items():
            if isinstance(value, list) or (isinstance(value, str) and "\n" in value):
                raw = bytes(value) if isinstance(value, list) else value.encode()
                out += key.encode() + b"\n" + struct.pack("<Q", len(raw)) + raw + b"\n"
            else:
                out += f"{key}={value}\n".encode()
        out += b"\n"
    return out


def test_export_with_binary_fields() -> None:
    entries = [dict(e) for e in JSON_ENTRIES]
    entries[0] = {**entries[0], "MESSAGE": "NVRM: The NVIDIA GPU 0000:b3:00.0\nNVRM: (PCI ID: 10de:26b5) installed in this system has\nNVRM: fallen off the bus and is not responding to commands."}
    data = _export(entries)
    got = rows(data)
    assert [r["kind"] for r in got] == ["gpu.off_bus", "svc.failed", "other"]
    assert got[0]["gpu"] == "0000:b3:00.0" and got[0]["detail"]["pci_id"] == "10de:26b5"
    assert got[2]["message"] == "hi\\xff"
    truncated = rows(data[:-30])
    assert len(truncated) == 3


def test_sniffing_picks_the_journal_for_exports_and_markers() -> None:
    assert journal.sniff(json.dumps(JSON_ENTRIES[0])) == 1.0
    assert journal.sniff("__CURSOR=s=1\nMESSAGE=x\n") == 1.0
    assert journal.sniff("-- Boot bc3fc4659c554110994ad36deade2c2c --\n[ 1.0] h kernel: x\n") == 1.0
    text = (GOLDEN / "journal" / "journal-fabricmanager-start-sh-pre-nvl5-nothing-to-do-01.log").read_bytes()
    assert parse_bytes(text, file="x").source == "journal"
    dmesg = (GOLDEN / "kernel" / "dmesg-nvme-qid0-timeout-reset-removed-01.log").read_bytes()
    assert parse_bytes(dmesg, file="x").source == "kernel"


def test_kernel_lines_in_a_journal_give_the_kernel_sources_rows() -> None:
    name = "journal-ru-locale-nohost-aer-rxerr-corrected-01.log"
    data = (GOLDEN / "journal" / name).read_bytes()
    a = pl.from_arrow(parse_bytes(data, file=name, source="journal").events)
    b = pl.from_arrow(parse_bytes(data, file=name, source="kernel").events)
    keep = ["line", "kind", "gpu", "code", "message", "severity"]
    assert a.select(keep).equals(b.select(keep))  # type: ignore[union-attr]


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=1500), st.sampled_from([b"", b"{\"MESSAGE\":1}\n", b"__CURSOR=x\n"]))
def test_any_bytes_in_any_mode(data: bytes, prefix: bytes) -> None:
    result = journal.parse(prefix + data, file="x")
    for detail in result.events.column("detail").to_pylist():
        json.loads(detail)


def _aer_entries() -> list[dict[str, Any]]:
    lines = [
        "pcieport 0000:00:03.0: AER: Multiple Uncorrected (Fatal) error received: 0000:00:03.0",
        "pcieport 0000:00:03.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Requester ID)",
        "pcieport 0000:00:03.0:   device [8086:6f08] error status/mask=00004020/00000000",
        "pcieport 0000:00:03.0:    [14] CmpltTO                (First)",
    ]
    out = []
    for boot, base in (("aa" * 16, 0), ("bb" * 16, 100)):
        for n, text in enumerate(["docker0: port 1(veth1) entered disabled state", *lines, "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus."]):
            out.append({"__REALTIME_TIMESTAMP": str(1705312800000000 + (base + n) * 1000), "_BOOT_ID": boot, "_TRANSPORT": "kernel",
                        "SYSLOG_IDENTIFIER": "kernel", "MESSAGE": text, "__MONOTONIC_TIMESTAMP": str(1000 + n)})  # fmt: skip
    return out


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 7, 100])
def test_chunked_stream_equals_whole_file(chunk: int) -> None:
    import io

    data = ("\n".join(json.dumps(e) for e in _aer_entries()) + "\n").encode()
    whole = journal.parse(data, file="j.json")
    chunks = list(journal.iter_parse(io.BytesIO(data), file="j.json", chunk_entries=chunk, mode="json"))
    combined = journal.combine(chunks)
    assert combined.events.equals(whole.events)
    assert (combined.records, combined.lines) == (whole.records, whole.lines) == (6, 12)
    kinds = [r["kind"] for r in whole.events.to_pylist()]
    assert kinds == ["other", "pcie.aer", "gpu.xid"] * 2
    assert [json.loads(d)["boot"] for d in whole.events.column("detail").to_pylist()] == [0, 0, 0, 1, 1, 1]
    export = _export(_aer_entries())
    from_export = journal.combine(list(journal.iter_parse(io.BytesIO(export), file="j", chunk_entries=chunk, mode="export")))
    assert [r["kind"] for r in from_export.events.to_pylist()] == kinds


def test_cat_and_with_unit_modes() -> None:
    cat = rows("NVRM: Xid (PCI:0000:3b:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error\nStarted Session 4 of User root.\n")
    assert [r["kind"] for r in cat] == ["gpu.xid", "other"]  # -o cat: messages only, kernel families still apply
    unit = rows("Jan 30 10:23:01 n1 nvidia-fabricmanager.service[900]: [Jan 30 2024 10:23:01] [ERROR] [tid 900] detected NVSwitch fatal error 12028 on fid 0\n")
    # the fabric manager reporting an SXid is the SXid's row (what the NVSwitch rules read)
    assert (unit[0]["kind"], unit[0]["code"], unit[0]["severity"]) == ("gpu.sxid", 12028, "critical")
    assert unit[0]["detail"]["unit"] == "nvidia-fabricmanager.service"


def test_kubelet_under_k3s_and_hyperkube_and_its_runtime_verdicts() -> None:
    pleg = sample("syslog-k3s-kubelet-pleg-not-healthy-lagged-klog-stamp-deadline-exceeded-01.log")
    # PLEG stuck for minutes and the runtime's rpc timeouts: the container runtime, as the rules read it
    assert {(r["kind"], r["severity"], r["detail"]["ident"]) for r in pleg} == {("svc.container_runtime", "error", "k3s")}
    assert [r["detail"]["event"] for r in pleg] == ["pleg_unhealthy"] * 4 + ["runtime_timeout"] * 2
    hyper = sample("journal-hyperkube-kubelet-ident-error-syncing-pod-deadline-exceeded-01.log")
    assert [r["kind"] for r in hyper] == ["svc.kubelet", "other", "other"]
    # k3s' kubelet quoting containerd's error is kubelet's row, with k3s' identifier, not "containerd task"
    (sandbox,) = sample("journal-k3s-embedded-kubelet-createpodsandbox-containerd-shim-nvidia-01.log")
    assert (sandbox["kind"], sandbox["detail"]["ident"]) == ("svc.kubelet", "k3s")


def test_klog_levels_weigh_kubelet_lines() -> None:
    fatal = sample("journal-r-kubelet-fatal-config-status-255-restart-loop-01.log")[2]
    assert (fatal["kind"], fatal["severity"]) == ("svc.kubelet", "critical")
    # the NVIDIA device plugin registering is an I-line of a healthy node, not an error
    registration = sample("journal-kubelet-device-plugin-registration-nvidia-com-gpu-cpumanager-01.log")
    assert {r["kind"] for r in registration} == {"other"}
    # the PLEG line every kubelet start prints is a notice; a kubelet device-plugin failure is the plugin's
    startup = sample("journal-kubelet-1.23-startup-pleg-has-yet-to-be-successful-crio-01.log")[2]
    assert (startup["kind"], startup["severity"], startup["detail"]["event"]) == ("svc.kubelet", "notice", "pleg_startup")
    failing = rows('Jan 30 10:22:56 n1 kubelet[1679]: E0130 10:22:56.1 1679 manager.go:80] "Failed to register device plugin" err="nvidia.com/gpu"\n')
    assert failing[0]["kind"] == "svc.device_plugin" and failing[0]["severity"] == "error"


def test_a_service_named_inside_another_services_message_is_not_that_service() -> None:
    got = sample("journal-short-precise-ocp-crio-conmon-bpf-foreign-scope-01.log")
    assert "svc.container_runtime" not in {r["kind"] for r in got}


def test_slurm_daemons() -> None:
    got = sample("journal-slurmd-gres-conf-fatal-main-process-exited-01.log")
    assert [(r["kind"], r["severity"]) for r in got[1:3]] == [("svc.slurm", "error"), ("svc.slurm", "critical")]
    assert got[2]["detail"]["gpu_config"] is True and got[2]["detail"]["unit"] == "slurmd"
    ctld = sample("journal-xe-slurmctld-duplicated-nodehostname-fatal-01.log")
    assert {(r["kind"], r["detail"]["unit"], r["detail"]["gpu_config"]) for r in ctld} == {("svc.slurm", "slurmctld", False)}


def test_older_systemd_failure_wordings() -> None:
    el7 = sample("systemctl-status-slurmd-el7-main-process-exited-entered-failed-state-01.log")
    exited, entered = el7[-2:]
    assert (exited["kind"], exited["detail"]["status"]) == ("svc.failed", 1)
    assert (entered["kind"], entered["detail"]["unit"]) == ("svc.failed", "slurmd.service")
    no_comma = next(r for r in sample("journal-xe-catalog-subject-block-control-process-no-comma-status-12-01.log") if r["line"] == 16)
    assert (no_comma["kind"], no_comma["detail"]["status"]) == ("svc.failed", 12)
    success = sample("systemctl-status-slurmctld-pid-file-not-readable-yet-01.log")
    assert "svc.failed" not in {r["kind"] for r in success}


def test_userspace_sees_the_driver_fail() -> None:
    udev = sample("journal-short-iso-precise-persistenced-failed-modprobe-udev-worker-01.log")[0]
    assert (udev["kind"], udev["severity"], udev["detail"]["event"]) == ("gpu.driver", "error", "udev")
    xorg = sample("journal-bumblebeed-relayed-xorg-ee-nvidia-gpu0-embedded-uptime-01.log")[0]
    assert (xorg["kind"], xorg["gpu"]) == ("gpu.driver", "0000:01:00.0")  # Xorg's PCI:1:0:0 is decimal
    signal = sample("journal-persistenced-verbose-received-signal-15-shutdown-01.log")[5]
    assert (signal["kind"], signal["severity"], signal["detail"]["signal"]) == ("svc.persistenced", "warning", 15)


def test_backward_monotonic_steps_inside_one_boot() -> None:
    # kernel entries carry the kernel's clock, userspace ones CLOCK_MONOTONIC: small steps back are one boot
    for name in ("journal-short-monotonic-missed-kernel-messages-out-of-order-truncated-audit-01.log",
                 "journal-short-monotonic-backwards-after-suspend-wrapped-elided-01.log"):  # fmt: skip
        assert {r["detail"]["boot"] for r in sample(name)} == {0}


def test_logs_begin_header_dates_short_stamps() -> None:
    pst = sample("journal-xb-1-p3-logs-begin-pst-mce-thermal-throttle-01.log")
    assert (pst[0]["source"], pst[0]["kind"]) == ("journal", "other")  # journalctl's line, not the kernel's
    assert pst[2]["kind"] == "host.cpu_throttle" and pst[2]["ts"].isoformat() == "2019-10-04T10:01:05+00:00"
    # under -f only "Logs begin at" is printed, and the entries come after it: April 2023, not 2022
    follow = sample("journal-u-kubelet-f-logs-begin-pdt-follow-cni-not-initialized-01.log")
    assert follow[1]["ts"].isoformat() == "2023-04-17T05:26:30+00:00"
    plus08 = sample("journal-u-vgpu-mgr-journal-begins-at-tz-plus08-01.log")
    assert plus08[1]["ts"].isoformat() == "2022-05-26T01:01:43+00:00"
    assert journal.header_context("-- Logs begin at Mon 2022-12-05 10:00:00 CST, end at Tue 2023-01-03 10:00:00 CST. --\nDec 30 10:00:00 h x[1]: y") == (2022, None)


def test_pastes_without_stamp_or_behind_a_prefix_keep_their_identifier() -> None:
    (fm,) = sample("journal-noprefix-fabricmanager-driver-interface-version-mismatch-530-01.log")
    assert (fm["source"], fm["kind"], fm["pid"]) == ("journal", "svc.fabricmanager", 3228)
    grep = sample("journal-grep-n-gdm-x-session-nvidia-ee-failed-initialize-egpu-01.log")
    assert {r["host"] for r in grep} == {"130s-p16s-4"}
    assert [r["line"] for r in grep if r["kind"] == "gpu.driver"] == [3, 7]
    quoted = sample("journal-quoted-kubelet-2018-runtime-network-not-ready-cni-gpu-node-01.log")
    assert [(r["kind"], r["host"]) for r in quoted] == [("svc.kubelet", "slspGPU16"), ("other", "slspGPU16")]


def test_verbose_mode_reads_the_message_and_the_cursor_clock() -> None:
    got = sample("journal-o-verbose-output-fields-message-memcg-oom-killed-01.log")
    assert got[0]["kind"] == "host.oom_kill" and got[0]["detail"]["process"] == "tail"
    # the printed "11:49:13.015489 CET" is the cursor's t= (hex microseconds): 10:49:13Z, not 11:49 read as UTC
    assert got[0]["ts"].isoformat() == "2023-02-02T10:49:13.015489+00:00"
    assert got[0]["detail"]["boot_id"] == "796d12a513054cf1bbde201dd1bca9a1"


def test_json_pretty_objects_and_a_cut_off_one() -> None:
    (cut,) = sample("journal-o-json-pretty-systemd-224-spaced-truncated-paste-01.json")
    assert (cut["source"], cut["host"], cut["pid"]) == ("journal", "fogey", 1)
    assert cut["ts"].isoformat() == "2015-08-27T12:44:29.441705+00:00"
    entry = {"__REALTIME_TIMESTAMP": "1440679469441705", "_HOSTNAME": "g1", "SYSLOG_IDENTIFIER": "systemd", "_PID": "1",
             "MESSAGE": "nvidia-fabricmanager.service: Main process exited, code=exited, status=1/FAILURE"}  # fmt: skip
    pretty = json.dumps(entry, indent=8).encode() + b"\n"
    got = rows(pretty + pretty)
    assert [(r["kind"], r["line"], r["detail"]["status"]) for r in got] == [("svc.failed", 1, 1), ("svc.failed", 8, 1)]


def test_fabric_manager_log_file_sxid() -> None:
    got = sample("fmlog-gpud-testdata-multicast-team-nvswitch-nonfatal-12028-01.log")
    (sxid,) = [r for r in got if r["kind"] == "gpu.sxid"]
    assert (sxid["code"], sxid["gpu"], sxid["severity"], sxid["detail"]["link"]) == (12028, "0000:86:00.0", "warning", 61)
    assert sxid["ts"].isoformat() == "2025-02-27T15:10:02+00:00" and sxid["line"] == 17
    # "Message payload details:" goes on the entry before it
    assert {r["source"] for r in got if r["message"]} == {"journal"} and got[0]["message"].count("\n") == 1


def test_dcgm_host_engine_log_file() -> None:
    got = sample("nvhostengine-log-dcgm-2.3-failed-to-initialize-nvml-gpu-err-01.log")
    assert [(r["source"], r["kind"], r["detail"]["unit"]) for r in got] == [("journal", "svc.dcgm", "nv-hostengine")] * 2
    assert got[0]["ts"].isoformat() == "2022-03-03T01:22:10.481000+00:00"
    fm = (GOLDEN / "journal" / "fmlog-gpud-testdata-multicast-team-nvswitch-nonfatal-12028-01.log").read_text()
    assert journal.sniff(fm) == 0.9
