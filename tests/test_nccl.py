"""NCCL debug output read from real samples (tests/golden/nccl): which source a file is, fabric events,
the CUDA error inside a WARN, error chains, init lines and nccl-tests' failure lines."""

from __future__ import annotations

import json

import polars as pl
import pytest

from forensics import sources
from forensics.parse import parse_bytes

from .conftest import GOLDEN

NCCL = GOLDEN / "nccl"


def _rows(name: str) -> list[dict]:
    data = (NCCL / f"{name}.log").read_bytes()
    rows = pl.from_arrow(parse_bytes(data, file=name, source="nccl").events).to_dicts()
    return [{**r, "detail": json.loads(r["detail"])} for r in rows]


def _line(name: str, line: int) -> dict:
    return next(r for r in _rows(name) if r["line"] == line)


#: Files whose every NCCL line sits behind a prefix the sniffer did not see through (they were read as
#: kernel logs, or by no source), or that hold a WARN without any prefix.
BEHIND_A_PREFIX = [
    "nccl-2.18.3-mpirun-timestamp-output-tag-transport-cuda-invalid-argument-service-thread-01",
    "nccl-2.4-iso-ts-tag-output-net-ib-cu-async-event-local-catastrophic-error-01",
    "nccl-ray-worker-prefix-embedded-ts-alloc-h-cuda-failure-1-invalid-argument-01",
    "nccl-2.2x-k8s-rfc3339-prefix-socketprogressopt-reset-by-peer-bootstrap-chain-01",
    "nccl-2.2x-logger-tz-ts-plus-debug-ts-fatal-error-ncclibtest-async-fatal-qp-status4-hca-01",
    "nccl-2.12.12-pytorch-job-prefix-stray-line-number-ring-does-not-loop-back-hostid-01",
    "nccl-2.7.8-ansi-reset-remnant-prefix-ibvwrap-failed-open-libibverbs-ipv6-veth-01",
    "nccl-2.21.5-cloudwatch-table-prefix-ofi-plugin-init-efa-empty-01",
    "nccl-2.27.3-bare-warn-no-prefix-ibv-reg-mr-iova2-invalid-argument-trailing-space-01",
    "nccl-2.3-old-warn-without-nccl-word-socket-creation-failed-01",
    "nccl-2.0-redacted-host-socket-h-call-to-connect-failed-nccl-failure-unhandled-system-01",
    "nccl-custom-logger-rank-bracket-socketpollconnect-timed-out-retrying-01",
    "nccl-ofi-test-pdsh-prefix-function-line-warn-no-provider-01",
]


@pytest.mark.parametrize("name", BEHIND_A_PREFIX)
def test_files_behind_a_prefix_are_nccl(name: str) -> None:
    head = (NCCL / f"{name}.log").read_text("utf-8", "replace")
    assert sources.sniff(head)[0] == "nccl"


def test_collector_stamp_with_an_offset_dates_the_line() -> None:
    """``2025-11-09 15:39:31.043 +08:00 [2025-11-09 07:39:30] h100-28:238:1313 [0] …``: the collector's
    stamp is the time (its offset applied), the host is read behind both stamps."""
    row = _line("nccl-2.2x-logger-tz-ts-plus-debug-ts-fatal-error-ncclibtest-async-fatal-qp-status4-hca-01", 1)
    assert (row["ts"].isoformat(), row["detail"]["ts_from"], row["host"], row["pid"]) == (
        "2025-11-09T07:39:31.043000+00:00", "printed", "h100-28", 238)


def test_mpirun_timestamp_output_gives_rank_time_and_host() -> None:
    row = _line("nccl-2.18.3-mpirun-timestamp-output-tag-transport-cuda-invalid-argument-service-thread-01", 6)
    assert (row["kind"], row["host"], row["rank"], row["ts"].isoformat(), row["detail"]["where"]) == (
        "nccl.warn", "tomte401", 3, "2023-08-11T12:31:45+00:00", "transport.cc:154")


def test_ib_async_events_are_fabric_errors_with_their_fields() -> None:
    old = _line("nccl-prefixless-net-ib-async-event-port-error-flapping-link-01", 1)
    assert (old["kind"], old["detail"]["event"], old["detail"]["layer"]) == ("nccl.net_error", "port error", "fabric")
    dev = _line("nccl-quoted-autolinked-paste-async-event-local-access-violation-status9-vendor138-01", 1)
    assert {k: dev["detail"][k] for k in ("device", "port", "event")} == {
        "device": "mlx5_0", "port": 1, "event": "local access violation work queue error"}
    qp = _line("nccl-2.25.1-net-ib-async-fatal-event-on-qp-invalid-request-wq-error-h100-01", 1)
    assert (qp["kind"], qp["detail"]["device"], qp["detail"]["port"], qp["detail"]["object"], qp["detail"]["handle"],
            qp["detail"]["event"]) == ("nccl.net_error", "mlx5_1", 1, "QP", "0x7309dc3bb338",
                                       "invalid request local work queue error")  # fmt: skip
    catastrophic = _line("nccl-2.4-iso-ts-tag-output-net-ib-cu-async-event-local-catastrophic-error-01", 1)
    assert (catastrophic["kind"], catastrophic["rank"], catastrophic["detail"]["event"]) == (
        "nccl.net_error", 12, "local catastrophic error")


def test_gid_table_change_and_fatal_error_detected_in_ib() -> None:
    from forensics.sources.joblog import parse_record

    fields, _, _ = parse_record("transport/net_ib.cc:97 NCCL WARN NET/IB : mlx5_2:1 GID table changed")
    assert (fields["kind"], fields["detail"]["event"], fields["detail"]["device"]) == ("nccl.net_error", "GID table change", "mlx5_2")
    fatal = _line("nccl-2.2x-logger-tz-ts-plus-debug-ts-fatal-error-ncclibtest-async-fatal-qp-status4-hca-01", 1)
    assert (fatal["kind"], fatal["detail"]["detected_in"]) == ("nccl.net_error", "ncclIbTest")


def test_new_completion_wording_names_the_hca() -> None:
    row = _line("nccl-2.2x-logger-tz-ts-plus-debug-ts-fatal-error-ncclibtest-async-fatal-qp-status4-hca-01", 3)
    assert {k: row["detail"][k] for k in ("status", "vendor_err", "direction", "device", "peer", "peer_port")} == {
        "status": 4, "vendor_err": 83, "direction": "Send", "device": "mlx5_ib0", "peer": "172.16.12.34", "peer_port": 38081}


def test_socket_call_failures_name_their_peer_and_errno() -> None:
    recv = _line("nccl-2.14.3-aws-pcluster-net-recv-broken-pipe-proxy-service-connect-closed-by-peer-01", 1)
    assert {k: recv["detail"][k] for k in ("peer", "peer_port", "errno", "layer")} == {
        "peer": "10.200.84.247", "peer_port": 58355, "errno": "Broken pipe", "layer": "socket"}
    send = _line("nccl-2.2x-k8s-rfc3339-prefix-socketprogressopt-reset-by-peer-bootstrap-chain-01", 1)
    assert (send["host"], send["detail"]["peer"], send["detail"]["peer_port"], send["detail"]["errno"]) == (
        "gpu-server320", "10.44.137.149", 52905, "Connection reset by peer")


@pytest.mark.parametrize(("name", "line", "code", "cuda_name"), [
    ("nccl-2.18-narval-socketprogress-proxy-recv-failed-alloc-h-oom-cuda-calloc-proxy-setup-01", 14, 2, "cudaErrorMemoryAllocation"),
    ("nccl-ray-worker-prefix-embedded-ts-alloc-h-cuda-failure-1-invalid-argument-01", 9, 1, "cudaErrorInvalidValue"),
    ("nccl-2.26.2-debug-timestamp-prefix-nvls-cuda-failure-401-multicast-h100-01", 1, 401, "cudaErrorIllegalState"),
    ("nccl-2.7.8-ray-pid-prefix-p2p-failed-open-cuda-ipc-handle-217-peer-access-01", 8, 217, "cudaErrorPeerAccessUnsupported"),
    ("nccl-garbage-cudadev-32523-cudawrap-cuda-driver-insufficient-raft-01", 1, 35, "cudaErrorInsufficientDriver"),
])  # fmt: skip
def test_cuda_failures_in_a_warn_keep_the_cuda_error(name: str, line: int, code: int, cuda_name: str) -> None:
    row = _line(name, line)
    assert (row["kind"], row["code"], row["detail"]["cuda_code"], row["detail"]["cuda_name"]) == ("nccl.warn", code, code, cuda_name)


def test_garbage_cuda_dev_is_no_device() -> None:
    row = _line("nccl-garbage-cudadev-32523-cudawrap-cuda-driver-insufficient-raft-01", 1)
    assert "cuda_dev" not in row["detail"] and row["host"] == "VM-192-150-centos"


def test_error_chain_without_thread_ids_is_folded() -> None:
    rows = [r for r in _rows("nccl-2.2x-k8s-rfc3339-prefix-socketprogressopt-reset-by-peer-bootstrap-chain-01")
            if r["kind"] == "nccl.error_chain"]
    assert len(rows) == 1 and len(rows[0]["detail"]["stack"]) == 6 and rows[0]["code"] == 6


def test_error_chain_code_is_where_the_error_began() -> None:
    """``shm.cc:551 -> 2`` (/dev/shm full) then a later ``socket.cc:28 -> 3`` of the same thread: the chain
    is the system error it began with."""
    row = _line("nccl-2.2x-k8s-runner-shmutils-failed-extend-dev-shm-no-space-28-socket-recv-failed-01", 4)
    assert (row["kind"], row["code"], row["detail"]["result"]) == ("nccl.error_chain", 2, "ncclSystemError")


def test_init_lines_of_old_and_new_versions() -> None:
    comm = _line("nccl-2.2x-quoted-gt-prefix-nvls-nchannels-0-comm-nranks-nnodes-mnnvl-01", 8)
    assert (comm["kind"], comm["rank"], comm["detail"]["nranks"], comm["detail"]["nnodes"], comm["detail"]["local_rank"]) == (
        "nccl.init", 7, 8, 2, 3)
    old = _line("nccl-2.3.7-init-net-using-interface-net-ib-per-device-list-internal-network-ib-01", 12)
    assert (old["kind"], old["rank"], old["detail"]["nranks"]) == ("nccl.init", 0, 8)
    table = _line("nccl-1.0-nccl-tests-header-failure-all-reduce-unhandled-cuda-error-p100-01", 4)
    assert (table["kind"], table["rank"], table["host"], table["gpu"]) == ("nccl.init", 0, "node03", None)


@pytest.mark.parametrize(("name", "line", "code", "host"), [
    ("nccl-1.0-nccl-tests-header-failure-all-reduce-unhandled-cuda-error-p100-01", 15, 1, None),
    ("nccl-2.3-nccl-tests-net-ib-cu-completion-error12-proxy-thread-illegal-memory-access-01", 15, 1, "gpu5"),
    ("nccl-2.0-redacted-host-socket-h-call-to-connect-failed-nccl-failure-unhandled-system-01", 2, 2, None),
    ("nccl-lmdeploy-prefixless-init-cc-cuda-driver-insufficient-turbomind-failed-illegal-instruction-01", 6, 1, None),
])  # fmt: skip
def test_application_nccl_failure_lines(name: str, line: int, code: int, host: str | None) -> None:
    row = _line(name, line)
    assert (row["kind"], row["code"], row["host"], row["detail"]["via"]) == ("nccl.error_chain", code, host, "application")


def test_warn_without_the_word_nccl() -> None:
    row = _line("nccl-2.3-old-warn-without-nccl-word-socket-creation-failed-01", 1)
    assert (row["kind"], row["detail"]["where"], row["detail"]["text"]) == (
        "nccl.warn", "include/socket.h:344", "Socket creation failed : Address family not supported by protocol")


def test_site_logger_and_aws_ofi_own_log() -> None:
    row = _line("nccl-custom-logger-rank-bracket-socketpollconnect-timed-out-retrying-01", 1)
    assert (row["kind"], row["rank"], row["host"], row["detail"]["where"], row["detail"]["peer"], row["detail"]["peer_port"]) == (
        "nccl.net_error", 3, "s11gn1268", "misc/socket.cc:602", "172.16.30.229", 39953)
    ofi = _line("nccl-ofi-test-pdsh-prefix-function-line-warn-no-provider-01", 4)
    assert (ofi["kind"], ofi["host"], ofi["detail"]["where"], ofi["detail"]["transport"], ofi["detail"]["layer"]) == (
        "nccl.net_error", "10.3.35.83", "find_ofi_provider:543", "OFI", "fabric")


def test_markdown_autolinks_are_their_text() -> None:
    """GitHub turned ``net_ib.cc:1909`` and ``10.1.3.201`` into links: the site, the peer and the chain
    after it are read as printed."""
    name = "nccl-quoted-autolinked-paste-async-event-local-access-violation-status9-vendor138-01"
    row = _line(name, 7)
    assert (row["detail"]["where"], row["detail"]["peer"], row["detail"]["peer_port"]) == ("transport/net_ib.cc:1909", "10.1.3.201", 33057)
    chain = _line(name, 8)
    assert (chain["kind"], chain["detail"]["stack"]) == ("nccl.error_chain", ["transport/net.cc:1137", "proxy.cc:698"])
