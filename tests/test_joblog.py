"""Job output (NCCL, PyTorch/torchrun, training logs): prefixes, records across chunks, mixing, totality."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import forensics
from forensics.reading import prefix
from forensics.sources import joblog, kernel
from forensics.synth.logs import hard_wrap
from forensics.text import split_lines

from .conftest import GOLDEN, first_samples, golden_cases

JOB_SOURCES = ("nccl", "torch", "trainlog")
JOB_CASES = [case for source in JOB_SOURCES for case in golden_cases(source)]
DMESG_CASES = [case for case in golden_cases("kernel") if case.name.startswith("dmesg")]
JOB_LINES = [line for case in JOB_CASES for line in case.read_text("utf-8", "replace").splitlines()]


def _peel(*lines: str) -> list[dict]:
    return prefix.peel(prefix.lines_frame(pl.Series(lines, dtype=pl.String))).to_dicts()


# ---------------------------------------------------------------------------------------- prefixes

PREFIXES = [
    ("[1,0]<stdout>:gpu01:1234:1290 [0] NCCL INFO Bootstrap : Using eth0",
     {"msg": "NCCL INFO Bootstrap : Using eth0", "rank": 0, "host": "gpu01", "pid": 1234, "tid": 1290, "cuda_dev": 0,
      "logger": "nccl"}),
    ("[rank3]:[E1206 18:44:12.765000 140 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught collective operation timeout",
     {"msg": "[Rank 3] Watchdog caught collective operation timeout", "rank": 3, "level": "error", "logger": "glog",
      "yearless_stamp": "12-06T18:44:12.765000", "where": "ProcessGroupNCCL.cpp:607"}),
    ("[default0]:Traceback (most recent call last):", {"msg": "Traceback (most recent call last):", "local_rank": 0}),
    ("(RayWorkerWrapper pid=7046, ip=10.0.0.5) ERROR 04-15 00:31:11 worker_base.py:574] Error executing method",
     {"msg": "Error executing method", "host": "10.0.0.5", "pid": 7046, "level": "error", "logger": "vllm",
      "yearless_stamp": "04-15T00:31:11", "where": "worker_base.py:574"}),
    ("E321 13:21:42.765000 140 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -6)",
     {"msg": "failed (exitcode: -6)", "level": "error", "yearless_stamp": "03-21T13:21:42.765000"}),
    ("[2024-01-04 11:43:42,166] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: 1)",
     {"msg": "failed (exitcode: 1)", "level": "error", "stamp": "2024-01-04T11:43:42.166",
      "where": "torch.distributed.elastic.multiprocessing.api"}),
    ("2024-01-04 11:43:42,166 - INFO - step 5", {"msg": "step 5", "level": "info", "stamp": "2024-01-04T11:43:42.166"}),
    ("2024-05-01 10:00:00.123 | WARNING  | train:step:42 - loss spike",
     {"msg": "loss spike", "level": "warning", "where": "train:step:42"}),
    ("[2024-03-01 10:00:00] gpu01:1:2 [0] NCCL INFO x", {"msg": "NCCL INFO x", "stamp": "2024-03-01T10:00:00", "host": "gpu01"}),
    (" [2024-12-06 18:44:12] iteration      100/  500000 | lm loss: 2.345678E+00",  # Megatron's own stamp
     {"msg": "iteration      100/  500000 | lm loss: 2.345678E+00", "stamp": "2024-12-06T18:44:12"}),
    ("10.1.2.3: iteration 5/ 100 | lm loss: 1.0", {"msg": "iteration 5/ 100 | lm loss: 1.0", "host": "10.1.2.3"}),
    ("\x1b[32m04/15 10:00:01 - mmengine - INFO - \x1b[0mEpoch(train) [1][10/100]",
     {"msg": "Epoch(train) [1][10/100]", "level": "info", "yearless_stamp": "04-15T10:00:01"}),
    ("WARNING:root:overflow", {"msg": "overflow", "level": "warning"}),
    # OpenMPI adds no space after its tag: an indented line keeps its indentation; one pasted space goes.
    ('[1,0]<stdout>:  File "/usr/local/bin/torchrun", line 8, in <module>',
     {"msg": '  File "/usr/local/bin/torchrun", line 8, in <module>', "rank": 0}),
    ("[1,2]<stderr>: iter 100: loss 2.3125", {"msg": "iter 100: loss 2.3125", "rank": 2}),
    # collectors' and launchers' stamps in front of an NCCL prefix: the outer stamp dates the line
    ("Fri Aug 11 12:31:45 2023[1,0]<stdout>:tomte401:1850301:1881341 [0] transport.cc:154 NCCL WARN Cuda failure",
     {"msg": "transport.cc:154 NCCL WARN Cuda failure", "rank": 0, "host": "tomte401", "pid": 1850301,
      "stamp": "2023-08-11T12:31:45", "logger": "nccl"}),
    ("2019-06-02T16:13:44.884Z: [1,12]<stdout>:container-e275-01-000057:815:864 [0] NCCL WARN x",
     {"msg": "NCCL WARN x", "rank": 12, "host": "container-e275-01-000057", "stamp": "2019-06-02T16:13:44.884Z"}),
    ("(train_rft pid=2657296) 2024-05-11 14:10:52.227 n176-080-198:2657296:2658232 [0] include/alloc.h:102 NCCL WARN x",
     {"msg": "include/alloc.h:102 NCCL WARN x", "host": "n176-080-198", "pid": 2657296, "tid": 2658232,
      "stamp": "2024-05-11T14:10:52.227"}),
    ("2025-11-24T03:20:21.001125857Z [2025-11-24 11:20:21] gpu-server320 [5] misc/socket.cc:46 NCCL WARN x",
     {"msg": "misc/socket.cc:46 NCCL WARN x", "host": "gpu-server320", "cuda_dev": 5, "tid": None,
      "stamp": "2025-11-24T03:20:21.001125857Z", "logger": "nccl"}),
    ("2025-11-24T03:20:21.001128133Z gpu-server320 [5] NCCL INFO misc/socket.cc:64 -> 6",
     {"msg": "NCCL INFO misc/socket.cc:64 -> 6", "host": "gpu-server320", "cuda_dev": 5}),
    ("2025-11-09 15:39:31.043 +08:00 [2025-11-09 07:39:30] h100-28:238:1313 [0] transport/net_ib.cc:139 NCCL WARN x",
     {"msg": "transport/net_ib.cc:139 NCCL WARN x", "host": "h100-28", "stamp": "2025-11-09T15:39:31.043+08:00"}),
    ("  | 2025-05-16T16:39:51.208-07:00 | NCCL version 2.21.5+cuda12.8",
     {"msg": "NCCL version 2.21.5+cuda12.8", "stamp": "2025-05-16T16:39:51.208-07:00"}),
    ("  | 2025-05-16T16:39:51.208-07:00ip-10-36-29-253:79:79 [0] NCCL INFO cudaDriverVersion 12040",
     {"msg": "NCCL INFO cudaDriverVersion 12040", "host": "ip-10-36-29-253", "stamp": "2025-05-16T16:39:51.208-07:00"}),
    # paste debris: an ANSI reset without its ESC byte, a markdown backtick, a job's word, a leading space
    ("[0m ip-172-31-0-137:14605:14673 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]",
     {"msg": "misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]", "host": "ip-172-31-0-137"}),
    ("[0m NCCL version 2.7.8+cuda11.1", {"msg": "NCCL version 2.7.8+cuda11.1"}),
    ("`hostname-test:984:1208 [3] ib_plugin.c:1615 NCCL WARN x", {"msg": "ib_plugin.c:1615 NCCL WARN x", "host": "hostname-test"}),
    ("pytorch card-16-final-4509-master-0:22789:28201 [0] graph/rings.cc:38 NCCL WARN Error",
     {"msg": "graph/rings.cc:38 NCCL WARN Error", "host": "card-16-final-4509-master-0", "pid": 22789}),
    (" seyun:17280:17553 [0] INFO NET : Using interface eth0", {"msg": "INFO NET : Using interface eth0", "host": "seyun"}),
    # a site's NCCL logger (rank/world, stamp, site, host:pid), behind grep -r's file name
    ("rank_604.s12gn3064.4031852.log:[0604/1024][2025-02-16 22:31:34,422] [misc/socket.cc:586] [s12gn3064:pid=3942408] "
     "NCCL WARN socketPollConnect poll() returned 1, no POLLOUT events",
     {"msg": "NCCL WARN socketPollConnect poll() returned 1, no POLLOUT events", "rank": 604, "host": "s12gn3064",
      "pid": 3942408, "stamp": "2025-02-16T22:31:34.422", "where": "misc/socket.cc:586", "logger": "nccl"}),
    ("[trainer0|0]:Last error:", {"msg": "Last error:", "local_rank": 0}),
    ("dinov2-giant-nodes.cn-d004 [stderr] [rank13]:[E909 09:55:29.340428860 ProcessGroupNCCL.cpp:607] [Rank 13] Watchdog",
     {"msg": "[Rank 13] Watchdog", "rank": 13, "level": "error"}),
    # an uninitialised cudaDev printed before the device is set is no device
    ("h:1:2 [32523] misc/cudawrap.cc:182 NCCL WARN x", {"host": "h", "cuda_dev": None}),
    ("2024-11-20 14:37:16 [rank3]: torch.OutOfMemoryError: CUDA out of memory.",
     {"msg": "torch.OutOfMemoryError: CUDA out of memory.", "rank": 3, "stamp": "2024-11-20T14:37:16"}),
    # a stamp before plain text is the logger's (not peeled as a collector's)
    ("2024-01-04 11:43:42,166 - INFO - step 5", {"msg": "step 5", "level": "info", "stamp": "2024-01-04T11:43:42.166"}),
]


@pytest.mark.parametrize(("line", "expected"), PREFIXES, ids=[p[0][:40] for p in PREFIXES])
def test_prefix_forms(line: str, expected: dict) -> None:
    (got,) = _peel(line)
    assert {k: got[k] for k in expected} == expected
    assert got["prefix"] + got["msg"] == got["text"]


def test_bracket_numbers_counting_up_are_line_numbers_not_ranks() -> None:
    viewer = _peel("[155] a", "[156] b", "[157] c")
    assert [(r["msg"], r["rank"], r["counter"]) for r in viewer] == [("a", None, 155), ("b", None, 156), ("c", None, 157)]
    ranks = _peel("[3] a", "[0] b", "[3] c", "[1] d")
    assert [(r["msg"], r["rank"]) for r in ranks] == [("a", 3), ("b", 0), ("c", 3), ("d", 1)]


def test_pdsh_host_prefix_doubled_and_only_when_common() -> None:
    rows = _peel("node-3: node-3: kp-1:3468:3905 [4] NCCL WARN x", "node-3: node-3: step 1", "node-4: hello")
    assert [(r["host"], r["msg"]) for r in rows] == [("node-3", "NCCL WARN x"), ("node-3", "step 1"), ("node-4", "hello")]
    # One "word-7: " line among prose is text, not a host.
    rows = _peel("error-2: something broke", "a", "b", "c", "d", "e", "f")
    assert rows[0]["host"] is None and rows[0]["msg"] == "error-2: something broke"


def test_task_labels_are_ranks_never_hosts() -> None:
    """``srun -l`` and ctest number their lines (``52: ``): a number is never a host name, and a label is
    believed beside another one (a line's own neighbours, the same whichever chunk it falls in)."""
    rows = _peel("52: ip-0A0C04E3:76285:76947 [4] graph/rings.cc:38 NCCL WARN Error",
                 "52: ip-0A0C04E3:76285:76947 [4] NCCL INFO init.cc:763 -> 3 ", "91: unknown file: Failure", "91:")
    assert [(r["host"], r["rank"], r["msg"]) for r in rows] == [
        ("ip-0A0C04E3", 52, "graph/rings.cc:38 NCCL WARN Error"), ("ip-0A0C04E3", 52, "NCCL INFO init.cc:763 -> 3 "),
        (None, 91, "unknown file: Failure"), (None, None, "91:"),
    ]  # fmt: skip
    # one numbered line among others, and a clock, are text
    rows = _peel("a", "12: twelve", "b", "02:29:53: train iter: 0 loss_net: 0.94")
    assert [(r["rank"], r["msg"]) for r in rows][1:] == [(None, "12: twelve"), (None, "b"), (None, "02:29:53: train iter: 0 loss_net: 0.94")]


def test_carriage_returns_and_text_glued_after_a_progress_bar() -> None:
    frame = prefix.lines_frame(pl.Series([
        " 10%|█         | 1/10 [00:01<00:09,  1.00it/s]\r 20%|██        | 2/10 [00:02<00:08,  1.00it/s]\r",
        " 30%|███       | 3/10 [00:03<00:07,  1.00it/s][E ProcessGroupNCCL.cpp:458] Some NCCL operations have failed",
        "plain",
    ]))  # fmt: skip
    assert frame.get_column("i").to_list() == [0, 0, 1, 1, 2]
    texts = frame.get_column("text").to_list()
    assert texts[2].endswith("1.00it/s]") and texts[3] == "[E ProcessGroupNCCL.cpp:458] Some NCCL operations have failed"


# ---------------------------------------------------------------------------------------- records


def _rows(data: bytes, **options) -> list[dict]:
    result = joblog.parse(data, file="job.log", **options)
    return result, pl.from_arrow(result.events).to_dicts()


def _key(row: dict) -> tuple:
    return (row["kind"], row["code"], row["message"], row["rank"], row["host"])


def test_chunk_cuts_keep_every_record_whole() -> None:
    data = b"\n".join(case.read_bytes().rstrip(b"\n") + b"\n" for case in JOB_CASES) * 3
    whole, whole_rows = _rows(data)
    # (small chunks, but not so small that a run of marked lines — an assert burst, a traceback — outgrows
    # MAX_GROWTH of them and must be cut at a line end, the documented last resort)
    small, small_rows = _rows(data, chunk_bytes=16384)
    assert (small.lines, small.records, small.unparsed) == (whole.lines, whole.records, whole.unparsed)
    assert [_key(r) + (r["line"],) for r in small_rows] == [_key(r) + (r["line"],) for r in whole_rows]
    assert pl.from_arrow(small.metrics).equals(pl.from_arrow(whole.metrics), null_equal=True)


#: Real logs of lines that start, continue and end no record: progress bars (tqdm rows indented and
#: ending in their ``[elapsed<remaining]`` bracket with blank lines between (axolotl), Lightning-style
#: epoch bars, HF/DeepSpeed, kohya, gluonts, Keras' ``[=====]`` epoch lines) and NCCL's init lines.
OPEN_CUT_CASES = [GOLDEN / "trainlog" / f"trainlog-{name}-01.log" for name in (
    "axolotl-2023-tqdm-dicts-packing-info-before-hang", "tqdm-epoch-bar-loss-postfix-sci-mean-training-loss-nan",
    "deepspeed-hf-tqdm-overflow-scale-64-to-2-then-dict-loss", "kohya-sd-scripts-rich-info-steps-bar-avr-loss-nan",
    "gluonts-mxnet-tqdm-avg-epoch-loss-colon-info-epoch-bracket", "keras-2018-epoch-1-of-1-ms-step-all-nan",
)] + [GOLDEN / "nccl" / f"nccl-{name}-01.log" for name in (  # NCCL's init: "Channel 04/0 : 0[0] -> 7[7] via …"
    "2.22-channels-p2p-cumem-k8s-worker", "channels-net-ib-gdrdma-send-receive-a100", "2.5.6-mpirun-rank-prefix-trees-rings-p2p-ipc",
)]  # fmt: skip


@pytest.mark.parametrize("newline", [b"\n", b"\r\n"], ids=["lf", "crlf"])
@pytest.mark.parametrize("case", OPEN_CUT_CASES, ids=[c.stem for c in OPEN_CUT_CASES])
def test_lines_of_no_record_do_not_hold_a_chunk_open(case: Path, newline: bytes) -> None:
    """Progress-bar rows, NCCL's channel lines, blank lines and CRLF line ends start, continue and end no
    record: a log of them is cut at about the chunk size (it grew to MAX_GROWTH times it: 8x the memory
    of a streamed job log), and the chunks read as the whole does."""
    from io import BytesIO

    from forensics.reading.chunks import iter_chunks

    data = case.read_bytes().replace(b"\n", newline)
    data *= 24_000 // len(data) + 1
    assert max(len(c) for c in iter_chunks(BytesIO(data).read, 2048)) < 2 * 2048
    whole, whole_rows = _rows(data)
    small, small_rows = _rows(data, chunk_bytes=2048)
    assert (small.lines, small.records, small.unparsed) == (whole.lines, whole.records, whole.unparsed)
    assert [_key(r) + (r["line"],) for r in small_rows] == [_key(r) + (r["line"],) for r in whole_rows]
    assert pl.from_arrow(small.metrics).equals(pl.from_arrow(whole.metrics), null_equal=True)


def test_a_job_log_mixing_sources_gives_the_union_of_each_alone() -> None:
    dmesg = [c for c in DMESG_CASES if "xid79" in c.name or "xid48" in c.name or "reltime-aer" in c.name]
    # (a markdown-quoted paste is unquoted when most of its file is quoted: not one part of a mix; the
    # later samples' launcher prefixes are decided by their share of a file's lines: mixed, they change)
    first = first_samples()
    parts = [*(c for c in JOB_CASES if "quoted" not in c.name and c.name in first), *dmesg]

    def records(data: bytes) -> Counter:
        return Counter(
            _key(r) for r in _rows(data)[1]
            if not json.loads(r["detail"]).get("derived") and not (r["kind"] == "other" and r["message"] == "")
        )  # fmt: skip

    alone = sum((records(case.read_bytes()) for case in parts), Counter())
    together = records(b"".join(case.read_bytes().rstrip(b"\n") + b"\n\n" for case in parts))
    assert together == alone
    kinds = {k[0] for k in together}
    assert {"gpu.xid", "gpu.off_bus", "pcie.aer", "nccl.net_error", "torch.watchdog_timeout", "job.child_failed",
            "train.grad_nonfinite", "train.overflow", "cpp.stack"} <= kinds  # fmt: skip


@pytest.mark.parametrize("case", DMESG_CASES, ids=[c.stem for c in DMESG_CASES])
def test_kernel_lines_in_a_job_log_are_read_by_the_kernel_source(case) -> None:
    """(A reporter's own elision line, ``[...]``, joins the kernel record above it in a kernel log and is
    a line of its own in a job log: those pastes are left out.)"""
    if any(line.strip() in (b"[...]", b"...") for line in case.read_bytes().splitlines()):
        pytest.skip("a reporter's elision line")
    def rows(result) -> list[tuple]:
        return [(r["line"], r["kind"], r["code"], r["gpu"], r["message"]) for r in result.events.to_pylist()]

    data = case.read_bytes()
    for all_lines in (False, True):
        assert rows(joblog.parse(data, file="x", all_lines=all_lines)) == rows(kernel.parse(data, file="x", all_lines=all_lines))


def test_stall_is_derived_from_step_times() -> None:
    lines = [f"[2024-05-01 10:{m:02d}:00,000] INFO iteration {m + 1}/ 100 | lm loss: {2.0 - m / 10:.2f} |" for m in range(10)]
    lines.append("[2024-05-01 10:40:00,000] [E ProcessGroupNCCL.cpp:475] [Rank 0] Watchdog caught collective operation "
                 "timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800088 milliseconds "
                 "before timing out.")  # fmt: skip
    result, rows = _rows("\n".join(lines).encode())
    stalls = [r for r in rows if r["kind"] == "train.stall"]
    assert len(stalls) == 1 and stalls[0]["line"] == 10 and stalls[0]["code"] == 10
    detail = json.loads(stalls[0]["detail"])
    assert detail["gap_s"] == 1860 and detail["usual_interval_s"] == 60 and detail["until"] == "error at line 11"
    assert [r["kind"] for r in rows].count("torch.watchdog_timeout") == 1
    assert result.metrics.num_rows == 10 and result.records == 11


def test_nonfinite_loss_is_an_event_at_its_onset_only() -> None:
    losses = ["1.5", "1.4", "nan", "nan", "inf", "1.3", "nan"]
    data = "\n".join(f"iter {n}: loss {v}, time 100.00ms, mfu 30.00%" for n, v in enumerate(losses)).encode()
    result, rows = _rows(data)
    assert [(r["kind"], r["code"]) for r in rows if r["kind"] != "train.step"] == [
        ("train.loss_nonfinite", 2), ("train.loss_nonfinite", 6)
    ]
    loss = pl.from_arrow(result.metrics).filter(pl.col("name") == "loss").get_column("value").to_list()
    assert [str(v) for v in loss] == ["1.5", "1.4", "nan", "nan", "inf", "1.3", "nan"]


# ---------------------------------------------------------------------------------------- totality


def _check(data: bytes) -> None:
    result = joblog.parse(data, file="x", chunk_bytes=1024, all_lines=True)
    # the records of interest alone: the same rows, the others counted (other and train.step rows)
    interest = joblog.parse(data, file="x", chunk_bytes=1024)
    assert (interest.records, interest.lines, interest.unparsed) == (result.records, result.lines, result.unparsed)
    every, kept = result.events.to_pylist(), interest.events.to_pylist()
    # a record is known by its line, source, kind and message (records a bare CR separates share a line number)
    at = {(r["line"], r["source"], r["kind"], r["message"]) for r in kept}
    assert kept == [r for r in every if (r["line"], r["source"], r["kind"], r["message"]) in at]
    assert {r["kind"] for r in every if (r["line"], r["source"], r["kind"], r["message"]) not in at} <= {"other", "train.step"}
    df = pl.from_arrow(result.events)
    logical = prefix.lines_frame(split_lines(data)[0]).height if data else 0
    derived = df.get_column("detail").map_elements(lambda d: bool(json.loads(d).get("derived")), return_dtype=pl.Boolean)
    parsed = df.filter(~derived)
    assert parsed.height == result.records
    assert int(parsed.get_column("message").str.count_matches("\n").sum() or 0) + parsed.height == logical
    assert df.filter(~pl.col("line").is_between(1, max(result.lines, 1))).height == 0
    assert set(df.get_column("kind").to_list()) <= forensics.KINDS
    for metric in result.metrics.column("name").to_pylist():
        assert metric


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=3000))
def test_arbitrary_bytes(data: bytes) -> None:
    _check(data)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.sampled_from(JOB_LINES), st.text(max_size=60)), max_size=60),
       st.sampled_from(["\n", "\r\n", "\r"]), st.integers(0, 300))  # fmt: skip
def test_shuffled_and_truncated_job_lines(lines: list[str], newline: str, cut: int) -> None:
    data = newline.join(lines).encode("utf-8", "surrogatepass")
    _check(data[: max(0, len(data) - cut)])


def test_extract_first_one_pass_and_per_form_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small inputs take the whole alternation at once, large ones a form at a time: same columns."""
    text = "\n".join(p.read_text("utf-8", "replace") for d in ("nccl", "torch", "trainlog") for p in golden_cases(d))
    lines, _ = split_lines(text.encode())
    assert lines.len() > 400
    for forms in (prefix.WRAPPER_FORMS, prefix.LOGGER_FORMS):
        monkeypatch.setattr(prefix, "ONE_PASS_LINES", 10**9)
        one_pass = prefix.extract_first(lines, forms)
        monkeypatch.setattr(prefix, "ONE_PASS_LINES", 0)
        per_form = prefix.extract_first(lines, forms)
        assert one_pass.null_count().sum_horizontal().item() < one_pass.height * one_pass.width  # something matched
        assert one_pass.equals(per_form)


def test_glog_stamps_take_the_year_of_the_printed_stamps_around_them_across_new_year() -> None:
    """glog prints no year (``E0101 00:10:00``): it takes the year of the nearest printed stamp, and a
    January line after a December one is the next year's (a run across New Year), a December line
    before a January one the year before's."""
    log = (
        "[rank0]:[E1231 23:50:00.000000 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600001 "
        "milliseconds before timing out.\n"
        " [2025-01-01 00:00:00] iteration      100/  500000 | consumed samples:       102400 | lm loss: 2.400000E+00 |\n"
        " [2024-12-31 23:59:00] iteration      200/  500000 | consumed samples:       204800 | lm loss: 2.300000E+00 |\n"
        "[rank1]:[E0101 00:10:00.000000 ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600001 "
        "milliseconds before timing out.\n"
    ).encode()
    events = pl.from_arrow(joblog.parse(log, file="train.log").events)
    timeouts = events.filter(pl.col("kind") == "torch.watchdog_timeout").sort("line")
    assert [str(t)[:19] for t in timeouts["ts"]] == ["2024-12-31 23:50:00", "2025-01-01 00:10:00"]


# ---------------------------------------------------------------------------------------- terminal copies

_WATCHDOG = ("[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5123, OpType=BROADCAST, "
             "NumelIn=262144000, NumelOut=262144000, Timeout(ms)=600000) ran for 600123 milliseconds before timing out.")


@pytest.mark.parametrize(("how", "width"), [("words", 116), ("chars", 116), ("chars", 121)])
def test_a_watchdog_line_hard_wrapped_by_a_terminal_is_one_timeout(how: str, width: int) -> None:
    # OpenMPI's tag on the rank's lines; the terminal's rows carry none (121 columns cuts a row before
    # a space, so the next row is indented)
    head = f"[1,3]<stdout>:[rank3]:[E0104 18:26:45.123456 ProcessGroupNCCL.cpp:607] {_WATCHDOG}"
    lines = [f"[1,{r}]<stdout>:gpu01:{100 + r}:{200 + r} [{r}] NCCL INFO Init COMPLETE" for r in range(4)]
    lines += [*hard_wrap(head, how, width), "[1,3]<stdout>:[rank3]:[E0104 18:26:45.123456 ProcessGroupNCCL.cpp:1664] "
              "[PG 0 (default_pg) Rank 3] Exception (either an error or timeout) detected by watchdog at work: 5123, last "
              "enqueued NCCL work: 5124, last completed NCCL work: 5122.", "[1,0]<stdout>:plain text after"]  # fmt: skip
    assert len(hard_wrap(head, how, width)) == 3
    result, rows = _rows("\n".join(lines).encode(), all_lines=True)
    timeouts = [r for r in rows if r["kind"] == "torch.watchdog_timeout"]
    assert len(timeouts) == 1 and result.unparsed == 0
    detail = json.loads(timeouts[0]["detail"])
    assert (timeouts[0]["rank"], timeouts[0]["line"], detail["op"], detail["seq"], detail["ran_ms"]) == (3, 5, "BROADCAST", 5123, 600123)
    assert timeouts[0]["message"].count("\n") == 2  # the rows it was read from, as they were
    assert [r["kind"] for r in rows if r["line"] > 5] == ["torch.watchdog_progress", "other"]


def test_a_watchdog_line_cut_short_does_not_take_the_lines_after_it() -> None:
    lines = ["[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE,",
             "[2024-05-01 10:40:00,000] INFO iteration 5/ 100 | lm loss: 1.0 |", "Traceback (most recent call last):",
             '  File "/w/train.py", line 3, in <module>', "RuntimeError: boom"]  # fmt: skip
    result, rows = _rows("\n".join(lines).encode(), all_lines=True)
    assert [(r["line"], r["kind"]) for r in rows] == [(1, "unparsed"), (2, "train.step"), (3, "py.exception")]


def test_tracebacks_of_eight_ranks_interleaved_out_of_order_stay_apart() -> None:
    def tb(rank: int) -> list[str]:
        return [f"[rank{rank}]: {line}" for line in (
            "Traceback (most recent call last):", '  File "/workspace/megatron/training.py", line 1208, in train_step',
            "    losses_reduced = forward_backward_func(", '  File "/workspace/megatron/core/schedules.py", line 371, in step',
            "    output_tensor = model(tokens)", f"AssertionError: Rank {rank}: found NaN in local grad norm in backwards pass.")]  # fmt: skip

    order = [5, 2, 7, 0, 3, 6, 1, 4]
    streams = {r: tb(r) for r in order}
    lines = [streams[r][n] for n in range(6) for r in order]  # round robin: eight rows between a rank's two
    result, rows = _rows("\n".join(lines).encode())
    assert [(r["line"], r["rank"], r["kind"]) for r in rows] == [(n + 1, r, "train.grad_nonfinite") for n, r in enumerate(order)]
    assert all(r["message"].endswith(f"AssertionError: Rank {r['rank']}: found NaN in local grad norm in backwards pass.") for r in rows)
    assert result.unparsed == 0


def test_a_watchdog_line_glued_after_a_faulthandler_dump() -> None:
    lines = ["Fatal Python error: Aborted", "", "Thread 0x00007f3a2effd640 (most recent call first):", "  <no Python frame>", "",
             "Extension modules: numpy.core._multiarray_umath, torch._C, torch._C._fft (total: 3)[rank3]:[E0104 18:26:45.123456 "
             f"ProcessGroupNCCL.cpp:607] {_WATCHDOG}"]  # fmt: skip
    result, rows = _rows("\n".join(lines).encode(), all_lines=True)
    timeouts = [r for r in rows if r["kind"] == "torch.watchdog_timeout"]
    assert [(r["line"], r["rank"], r["message"]) for r in timeouts] == [(6, 3, _WATCHDOG)] and result.unparsed == 0


def test_device_assert_of_a_windows_build_and_the_fp16_scaler_giving_up() -> None:
    lines = [r"C:\actions-runner\_work\pytorch\pytorch\builder\windows\pytorch\aten\src\ATen\native\cuda\NLLLoss2d.cu:103: "
             r"block: [4,0,0], thread: [96,0,0] Assertion `t >= 0 && t < n_classes` failed.",
             "[rank0]: Traceback (most recent call last):", '[rank0]:   File "/w/train.py", line 3, in <module>',
             "[rank0]:     engine.step()",
             "[rank0]: Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run."]  # fmt: skip
    _, rows = _rows("\n".join(lines).encode())
    assert [r["kind"] for r in rows] == ["cuda.device_assert", "train.grad_nonfinite"]
    detail = json.loads(rows[0]["detail"])
    assert detail["where"].endswith(r"\NLLLoss2d.cu:103") and detail["block"] == "4,0,0" and "kernel" not in detail


def test_peeled_remembers_small_inputs_and_gives_what_peel_gives() -> None:
    """A small file is peeled when sniffed and again when parsed: the second time comes from memory, and
    it is the frame peeling anew gives, on every real golden input."""
    from forensics.text import dedent

    for path in sorted(GOLDEN.rglob("*.log")):
        lines = dedent(split_lines(path.read_bytes())[0])
        assert prefix.peeled(lines).equals(prefix.peel(prefix.lines_frame(lines))), path.name
    lines = pl.Series(["[rank0]: [E1206 18:44:12.715 ProcessGroupNCCL.cpp:607] timeout"])
    before = prefix._peeled_small.cache_info().hits
    first, again = prefix.peeled(lines), prefix.peeled(lines)
    assert again is first and prefix._peeled_small.cache_info().hits == before + 1
    held = pl.Series(["NCCL WARN a\nb", "c"])  # a line holding a newline is peeled as it is, never joined
    assert prefix.peeled(held).equals(prefix.peel(prefix.lines_frame(held)))


def test_folded_step_state_is_the_median_of_every_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    """Step lines fold into per-stream counts of intervals as the log goes (memory bounded by streams and
    distinct intervals); the stalls found are those of every interval kept, folded often or never, and
    each stream's usual interval is Polars' median of its intervals (odd and even counts, repeats)."""
    import random

    rng = random.Random(7)
    lines, clock = [], {0: 0.0, 1: 0.0, 2: 0.0}
    for n in range(240):
        rank = rng.choice([0, 0, 1, 2])
        clock[rank] += rng.randint(1, 40) / 8 * (1 + rank)  # 40 lengths: repeats, and middles apart
        stamp = f"2024-05-01 10:{int(clock[rank] // 60) % 60:02d}:{clock[rank] % 60:06.3f}".replace(".", ",")
        lines.append(f"[rank{rank}]: [{stamp}] iteration {n + 1}/ 1000 | lm loss: 1.5 |")
    lines.append("[2024-05-01 12:59:00,000] [E ProcessGroupNCCL.cpp:475] [Rank 0] Watchdog caught collective "
                 "operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, Timeout(ms)=1) ran for 2 milliseconds "
                 "before timing out.")  # fmt: skip
    data = "\n".join(lines).encode()

    def stalls(fold: int) -> list[dict]:
        monkeypatch.setattr(joblog, "FOLD_STEPS", fold)
        return [r for r in joblog.parse(data, file="x", chunk_bytes=2048).events.to_pylist() if r["kind"] == "train.stall"]

    once, often = stalls(10**9), stalls(7)
    assert len(once) == 3 and once == often
    # the reference: every interval of the stream, in line order, and Polars' median of the positive ones
    steps = pl.DataFrame(joblog.parse(data, file="x").metrics).filter(pl.col("name") == "loss")
    for row in once:
        ts = steps.filter(pl.col("rank") == row["rank"]).sort("line").get_column("ts")
        gaps = ts.diff().dt.total_microseconds().drop_nulls() / 1e6
        assert json.loads(row["detail"])["usual_interval_s"] == round(float(gaps.filter(gaps > 0).median()), 6)


@pytest.mark.parametrize("dump", ["nccl-899-gdb-thread-apply-all-bt-ncclgroupend-rwlock-libcuda-01.log",
                                  "bigscience-tr11-hang-debug-py-spy-train-broadcast-01.log",
                                  "pytorch-585-gdb-run-sigbus-memset-dl-map-segments-wrapped-args-01.log",
                                  "sglang-3745-faulthandler-segfault-current-thread-all-reduce-01.log"])  # fmt: skip
def test_a_stack_dump_pasted_after_a_job_log_is_read_by_the_stacks_source(dump: str) -> None:
    """Two real samples in one file, a job's output and a gdb, py-spy or faulthandler dump after it: the job's lines give
    the rows they give alone, and the dump's threads and signal are the stacks source's, on the file's lines."""
    from forensics.parse import parse_bytes
    from forensics.sources import stacks

    job = (GOLDEN / "nccl" / "nccl-ib-completion-status12-vendor129-ib-plugin-roce-gid-01.log").read_bytes()
    job = job if job.endswith(b"\n") else job + b"\n"
    text = (GOLDEN / "stacks" / dump).read_bytes()
    both = parse_bytes(job + text, file="out.log")
    assert both.source in ("torch", "nccl", "trainlog")
    alone = parse_bytes(job, file="out.log", source=both.source).events.to_pylist()
    rows = both.events.to_pylist()
    n = job.count(b"\n")
    assert [r for r in rows if r["line"] <= n] == alone
    dump_rows = [(r["line"] - n, r["kind"], json.loads(r["detail"]).get("state"), json.loads(r["detail"]).get("signal"))
                 for r in rows if r["source"] == "stacks" and r["kind"] != "other"]  # fmt: skip
    own = [(r["line"], r["kind"], json.loads(r["detail"]).get("state"), json.loads(r["detail"]).get("signal"))
           for r in stacks.parse(text, file="x").events.to_pylist() if r["kind"] != "other"]  # fmt: skip
    assert dump_rows == own and own


# ---------------------------------------------------------------------------------------- one file, every family

_MIX_KERNEL = GOLDEN / "kernel/dmesg-T-xid119-gsp-rpc-timeout-01.log"
_MIX_JOB = GOLDEN / "torch/torch-device-side-assert-rank-prefixed-then-loss-cu-nll-assert-01.log"


def _said_rows(data: bytes, *, all_lines: bool, shift: dict[int, int] | None = None) -> pl.DataFrame:
    """The rows of ``data`` that say something (blank lines are no family's), their lines moved by ``shift``
    (lines from a key on move by its value)."""
    rows = pl.from_arrow(forensics.parse_bytes(data, file="f", all_lines=all_lines).events)
    for at, by in (shift or {}).items():
        rows = rows.with_columns(line=pl.when(pl.col("line") >= at).then(pl.col("line") + by).otherwise("line"))
    return rows.filter(pl.col("message").str.strip_chars() != "").select(
        "source", "line", "kind", "code", "severity", "rank", "message").sort("line")  # type: ignore[return-value]


@pytest.mark.parametrize("all_lines", [False, True])
def test_a_kernel_log_holding_a_job_s_traceback_is_read_by_both_families(all_lines: bool) -> None:
    """A rank's traceback (a real one) pasted between the lines of a real ``dmesg -T``: the file is
    still the kernel's, and each part gives the rows it gives alone, numbered in the whole file; the
    kernel's Xid record does not swallow the traceback, nor the job the kernel's lines."""
    kern, job = _MIX_KERNEL.read_bytes(), _MIX_JOB.read_bytes()
    lines = kern.splitlines(keepends=True)
    at = [i for i, line in enumerate(lines) if b"Xid" in line][1]  # before the second Xid record
    head = b"".join(lines[:at])
    mixed = head + job + kern[len(head):]
    parsed = forensics.parse_bytes(mixed, file="f", all_lines=all_lines)
    assert parsed.source == "kernel" and parsed.files.column("lines")[0].as_py() == mixed.count(b"\n")
    n = job.count(b"\n")
    alone = pl.concat([_said_rows(kern, all_lines=all_lines, shift={at + 1: n}),
                       _said_rows(job, all_lines=all_lines, shift={1: at})])  # fmt: skip
    got = _said_rows(mixed, all_lines=all_lines)
    assert got.equals(alone.sort("line")), (got, alone)
    assert parsed.files.column("families")[0].as_py() == "kernel,torch"


def test_a_job_log_holding_kernel_lines_is_read_by_both_families() -> None:
    """The reverse: the same real lines with the job's first, sniffed as the job's output; the kernel's
    Xid lines are still kernel rows."""
    kern, job = _MIX_KERNEL.read_bytes(), _MIX_JOB.read_bytes()
    xid = b"".join(line for line in kern.splitlines(keepends=True) if b"Xid" in line)
    parsed = forensics.parse_bytes(job + xid, file="f", all_lines=True)
    assert parsed.source == "torch"
    rows = pl.from_arrow(parsed.events)
    xids = rows.filter(pl.col("kind") == "gpu.xid")
    assert xids.height == xid.count(b"\n") and set(xids.get_column("source")) == {"kernel"}
    assert "cuda.device_assert" in rows.get_column("kind").to_list()
