"""The message catalogs (forensics/data/messages): every row well formed and reading what its program
prints, every code of the enums present, one code whatever its spelling, and the diagnosis using them."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import polars as pl
import pytest

import forensics
from forensics import messages
from forensics.mine.language import CAUSES
from forensics.parse import parse_bytes
from forensics.regex import ascii_classes, for_python
from forensics.schema import KINDS

from .test_mine import _events

CATALOG = messages.load()
ROOT = Path(__file__).parents[1]
GOLDEN = ROOT / "tests/golden"
ENTRIES = {e.id: e for e in CATALOG.entries}


def test_ids_are_unique() -> None:
    assert len(ENTRIES) == len(CATALOG.entries)


@pytest.mark.parametrize("entry_id", sorted(ENTRIES))
def test_a_row_is_well_formed_and_cited(entry_id: str) -> None:
    e = ENTRIES[entry_id]
    assert e.id.startswith(f"{e.emitter}.")
    assert e.role in messages.ROLES
    assert e.kind in KINDS
    assert all(c in CAUSES and 0 < w <= 1 for c, w in e.causes), e.causes
    assert e.cite and e.example
    # Python's re and Polars' Rust regex both take the pattern
    re.compile(for_python(ascii_classes(e.pattern)))
    assert pl.Series([e.example]).str.contains(ascii_classes(messages._unnamed(e.pattern))).item()


_CONVERSION = re.compile(
    r'%[-+ #0]*\d*(?:\.\d+)?(?:hh|h|ll|l|z|j|t)?([diouxXeEfgGcspu])|%"\s*PRI([diux])\d+\s*"|\{[^}]*\}')
_SAMPLE = {"d": "7", "i": "7", "u": "7", "o": "7", "x": "7f", "X": "7F", "p": "0x7f00", "f": "1.5", "e": "1.5",
           "g": "1.5", "c": "x"}  # fmt: skip


def built(fmt: str) -> str:
    """A message built from a printf or Python format string: numbers for numeric conversions, a word
    for the others."""
    return _CONVERSION.sub(lambda m: _SAMPLE.get(m.group(1) or m.group(2) or "", "xyz"), fmt)


def _words(text: str) -> set[str]:
    return {w.lower() for w in re.findall(r"[A-Za-z]{3,}", text)}


@pytest.mark.parametrize("entry_id", sorted(ENTRIES))
def test_a_row_reads_what_its_format_prints(entry_id: str) -> None:
    """The catalog reads the message built from the row's format string as the row says: its kind and its
    causes (or those of the code the message names). A row made for one value of a parameter (a signal's
    name, a completion status) or for one line of a message printed over several reads its example
    instead, whose words are the format's."""
    e = ENTRIES[entry_id]
    message = built(e.format) if e.format else e.example
    hits = {h.id: h for h in CATALOG.read(message)}
    if e.id not in hits:
        words, printed = _words(e.example), _words(e.format)
        shared = len(words & printed)
        assert shared >= 0.6 * len(printed) or shared >= 0.6 * len(words), (e.format, e.example)
        message, hits = e.example, {h.id: h for h in CATALOG.read(e.example)}
    assert e.id in hits, (message, sorted(hits))
    hit = hits[e.id]
    if hit.code is None:
        assert (hit.kind, hit.causes, hit.role) == (e.kind, e.causes, e.role)
    else:  # the code's candidates when it has any, else the row's
        assert hit.causes == (hit.code.causes or e.causes)


# The values of each enum in its newest header, as the headers number them (CUDA 13 driver_types.h
# and cuda.h, nvml.h of NVML API 13, nccl.h of 2.2x): a sample of each across its ranges, and every value
# of the small ones.
CUDA_RUNTIME = {0: "cudaSuccess", 1: "cudaErrorInvalidValue", 2: "cudaErrorMemoryAllocation",
                3: "cudaErrorInitializationError", 4: "cudaErrorCudartUnloading", 35: "cudaErrorInsufficientDriver",
                46: "cudaErrorDevicesUnavailable", 98: "cudaErrorInvalidDeviceFunction", 100: "cudaErrorNoDevice",
                101: "cudaErrorInvalidDevice", 200: "cudaErrorInvalidKernelImage",
                209: "cudaErrorNoKernelImageForDevice", 214: "cudaErrorECCUncorrectable",
                700: "cudaErrorIllegalAddress", 701: "cudaErrorLaunchOutOfResources", 702: "cudaErrorLaunchTimeout",
                710: "cudaErrorAssert", 719: "cudaErrorLaunchFailure", 802: "cudaErrorSystemNotReady",
                803: "cudaErrorSystemDriverMismatch", 804: "cudaErrorCompatNotSupportedOnDevice",
                999: "cudaErrorUnknown"}  # fmt: skip
CUDA_DRIVER = {0: "CUDA_SUCCESS", 1: "CUDA_ERROR_INVALID_VALUE", 2: "CUDA_ERROR_OUT_OF_MEMORY",
               3: "CUDA_ERROR_NOT_INITIALIZED", 4: "CUDA_ERROR_DEINITIALIZED", 100: "CUDA_ERROR_NO_DEVICE",
               101: "CUDA_ERROR_INVALID_DEVICE", 200: "CUDA_ERROR_INVALID_IMAGE", 214: "CUDA_ERROR_ECC_UNCORRECTABLE",
               700: "CUDA_ERROR_ILLEGAL_ADDRESS", 719: "CUDA_ERROR_LAUNCH_FAILED", 802: "CUDA_ERROR_SYSTEM_NOT_READY",
               999: "CUDA_ERROR_UNKNOWN"}  # fmt: skip
NVML = dict(enumerate(
    ["SUCCESS", "ERROR_UNINITIALIZED", "ERROR_INVALID_ARGUMENT", "ERROR_NOT_SUPPORTED", "ERROR_NO_PERMISSION",
     "ERROR_ALREADY_INITIALIZED", "ERROR_NOT_FOUND", "ERROR_INSUFFICIENT_SIZE", "ERROR_INSUFFICIENT_POWER",
     "ERROR_DRIVER_NOT_LOADED", "ERROR_TIMEOUT", "ERROR_IRQ_ISSUE", "ERROR_LIBRARY_NOT_FOUND",
     "ERROR_FUNCTION_NOT_FOUND", "ERROR_CORRUPTED_INFOROM", "ERROR_GPU_IS_LOST", "ERROR_RESET_REQUIRED",
     "ERROR_OPERATING_SYSTEM", "ERROR_LIB_RM_VERSION_MISMATCH", "ERROR_IN_USE", "ERROR_MEMORY", "ERROR_NO_DATA",
     "ERROR_VGPU_ECC_NOT_SUPPORTED", "ERROR_INSUFFICIENT_RESOURCES", "ERROR_FREQ_NOT_SUPPORTED",
     "ERROR_ARGUMENT_VERSION_MISMATCH", "ERROR_DEPRECATED", "ERROR_NOT_READY", "ERROR_GPU_NOT_FOUND",
     "ERROR_INVALID_STATE"])) | {999: "ERROR_UNKNOWN"}  # fmt: skip
NCCL = dict(enumerate(["ncclSuccess", "ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError",
                       "ncclInvalidArgument", "ncclInvalidUsage", "ncclRemoteError", "ncclInProgress"]))  # fmt: skip
WC = {0: "IBV_WC_SUCCESS", 5: "IBV_WC_WR_FLUSH_ERR", 12: "IBV_WC_RETRY_EXC_ERR", 13: "IBV_WC_RNR_RETRY_EXC_ERR",
      21: "IBV_WC_GENERAL_ERR"}  # fmt: skip
ERRNO = {5: "EIO", 12: "ENOMEM", 28: "ENOSPC", 30: "EROFS", 104: "ECONNRESET", 110: "ETIMEDOUT",
         111: "ECONNREFUSED", 113: "EHOSTUNREACH", 116: "ESTALE", 122: "EDQUOT"}  # fmt: skip


@pytest.mark.parametrize(("enum", "values", "prefix", "every"), [
    ("cudaError_t", CUDA_RUNTIME, "", False), ("CUresult", CUDA_DRIVER, "", False),
    ("nvmlReturn_t", NVML, "NVML_", True), ("ncclResult_t", NCCL, "", True),
    ("ibv_wc_status", WC, "", False), ("errno", ERRNO, "", False),
])  # fmt: skip
def test_every_value_of_an_enum_is_present(enum: str, values: dict[int, str], prefix: str, every: bool) -> None:
    have = {c.code: c for c in CATALOG.codes if c.enum == enum}
    for code, name in values.items():
        assert code in have and CATALOG.code(enum, code).name == prefix + name, (enum, code, name)  # type: ignore[union-attr]
        assert CATALOG.code(enum, prefix + name).code == code  # type: ignore[union-attr]
    if every:  # the small enums: no value missing between the first and the last
        assert set(range(max(c for c in values if c < 999) + 1)) <= set(have)
    assert all(c.string or c.enum in ("CUresult", "nvmlReturn_t") for c in have.values())


def test_the_renumbered_runtime_codes_keep_both_numberings() -> None:
    """CUDA 10.1 moved cudaError_t onto the CUresult numbers: ECC uncorrectable was 39, is 214. A number two
    releases gave to two codes is told by the string printed beside it (code-hrnetseg-171, PyTorch 1.1)."""
    old = [c for c in CATALOG.codes if c.enum == "cudaError_t" and c.name == "cudaErrorECCUncorrectable"]
    assert {c.code for c in old} >= {39, 214}
    assert CATALOG.code("cudaError_t", 214).causes[0][0] == "gpu_memory"
    line = "THCudaCheck FAIL file=/pytorch/torch/csrc/cuda/Module.cpp line=33 error=10 : invalid device ordinal"
    assert CATALOG.best(line).code.name == "cudaErrorInvalidDevice"  # type: ignore[union-attr]


@pytest.mark.parametrize("text", [
    "THCudaCheck FAIL file=/pytorch/aten/src/THC/THCGeneral.cpp line=50 error=35 : CUDA driver version is insufficient",
    "RuntimeError: cuda runtime error (35) : CUDA driver version is insufficient for CUDA runtime version at x.cpp:51",
    "CUDA error 35 at cudaMalloc",
    "cudaErrorInsufficientDriver",
    "RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version",
])  # fmt: skip
def test_one_code_whatever_its_spelling(text: str) -> None:
    hit = CATALOG.best(text)
    assert hit is not None and hit.code is not None
    assert (hit.code.enum, hit.code.code, hit.cause) == ("cudaError_t", 35, "driver")


def test_a_follower_that_names_its_cause_makes_it_the_candidate() -> None:
    """The driver's Xid 45 says which Xid it cleans up after (kernel_rc.c): that Xid's cause is read."""
    hit = CATALOG.best("NVRM: Xid (PCI:0000:1b:00): 45, pid=2311, name=python3, Ch 00000008 caused by previous Xid 74")
    assert hit is not None and (hit.cause, hit.code.code, hit.role) == ("nvlink", 74, "initiating")  # type: ignore[union-attr]
    assert CATALOG.code("xid", 45).role == "cascade"  # type: ignore[union-attr]


def test_a_program_s_own_row_wins_over_a_bare_errno_string() -> None:
    hit = CATALOG.best("include/shm.h:28 NCCL WARN Call to posix_fallocate failed: No space left on device")
    assert hit is not None and (hit.id, hit.cause) == ("nccl.shm_posix_fallocate_failed", "container_runtime")


def test_frame_reads_a_column_in_one_pass() -> None:
    col = pl.Series(["nothing here", None, "socketStartConnect: Connect to 10.1.1.2<3456> failed : No route to host"])
    out = messages.frame(CATALOG, col)
    assert out.select("i", "cat_cause").rows() == [(2, "network")]


# ---------------------------------------------------------------------------------------- diagnosis


def _diagnose_files(tmp_path: Path, files: dict[str, str | Path]) -> dict[str, object]:
    inc = tmp_path / "inc"
    for name, content in files.items():
        (inc / name).parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Path):
            shutil.copy(content, inc / name)
        else:
            (inc / name).write_text(content)
    forensics.ingest([inc], tmp_path / "ds", jobs=1)
    return forensics.diagnose(forensics.open_dataset(tmp_path / "ds")).row(0, named=True)


def test_a_reading_in_its_own_words_beats_a_generic_one_inside_it() -> None:
    """Real lines: NCCL's NVLS bind failure holds "CUDA error 2 'out of memory'", which a generic CUDA row reads
    as the GPU's memory; NCCL's own row, whose words hold that match, reads the fabric (nccl#2077). A wrapper that
    takes the inner message as a group does not win that way: the container CLI's "<stage> error: %s" leaves the
    requirement error inside it to its own row (nvidia-docker#1442), and PyTorch's "CUDA initialization: %s" the
    "driver too old" inside it."""
    catalog = messages.load()
    nvls = (ROOT / "corpus/nvlink-nccl-2077-h200-nvls-multicast-slots-exhausted-bind-oom/node-a/stderr.log").read_text()
    line = next(x for x in nvls.splitlines() if x.startswith("Failed to bind NVLink SHARP"))
    assert "cuda.check_macro_code" in {h.id for h in catalog.read(line)}
    best = catalog.best(line)
    assert (best.id, best.cause) == ("nccl.nvls_bind_failed", "nvlink")
    docker = (ROOT / "corpus/drv-nvdocker-1442-cuda11-container-driver-too-old/node-a/console.log").read_text().splitlines()[0]
    assert "nvidia_container.cli_stage_error" in {h.id for h in catalog.read(docker)}
    best = catalog.best(docker)
    assert (best.id, best.cause) == ("nvidia_container.cli_requirement_cuda", "driver")


def test_ucx_status_strings_are_read_as_their_codes() -> None:
    """UCX-Py's error callback prints ucs_status_string() after the status number (dask-cuda#817, real)."""
    log = (ROOT / "corpus/net-daskcuda-817-ucx-destination-unreachable-interface-hsn0/nid001168/dask-worker.log").read_text()
    line = next(x for x in log.splitlines() if "status -6" in x)
    best = messages.load().best(line)
    assert best is not None and best.code is not None
    assert (best.code.enum, best.code.code, best.code.name, best.cause) == ("ucs_status_t", -6, "UCS_ERR_UNREACHABLE", "network")


def test_a_string_several_enums_print_is_read_as_the_gpu_s() -> None:
    """"out of memory" is cudaErrorMemoryAllocation's string and UCS_ERR_NO_MEMORY's, "invalid argument" also
    EINVAL's: PyTorch's "CUDA error: %s" prints CUDA's (the UCX row of the same string once took it over)."""
    cat = messages.load()
    oom = cat.best("RuntimeError: CUDA error: out of memory")
    assert oom is not None and oom.code is not None
    assert (oom.code.enum, oom.code.code, oom.cause) == ("cudaError_t", 2, "gpu_oom")
    bad = cat.best("RuntimeError: CUDA error: invalid argument")
    assert bad is not None and bad.code is not None and (bad.code.enum, bad.code.code) == ("cudaError_t", 1)


def test_a_code_s_string_followed_by_where_it_was_raised_is_the_code() -> None:
    """lc0 prints "CUDA error: %s (%s:%d)" (LeelaChessZero/lc0#1461, real): the string before the location is
    cudaErrorLaunchFailure, whose residual device exception points at the board before the program."""
    log = ROOT / "corpus/gpuhw-lc0-1461-alienware-rtx2080maxq-launch-failure-board-replaced/node-a/lc0-cuda-fp16.log"
    best = messages.load().best(log.read_text().splitlines()[0])
    assert best is not None and best.code is not None
    assert (best.code.code, best.code.name, best.cause) == (719, "cudaErrorLaunchFailure", "gpu_hardware")


def test_a_warning_that_names_the_driver_is_the_cause(tmp_path: Path) -> None:
    """A real UserWarning (drv-yuan2-65): PyTorch's "driver on your system is too old" is the driver."""
    d = _diagnose_files(tmp_path, {"n/stderr.log": ROOT / "corpus/drv-yuan2-65-torch-driver-too-old-11000/node-a/stderr.log"})
    assert (d["root_cause"], d["rule"]) == ("driver", "catalog:pytorch.cuda_driver_too_old")


def test_an_unclaimed_file_is_read_by_the_catalogs(tmp_path: Path) -> None:
    """smartd's mail belongs to no source; its failure line is still the evidence (storage-osm-232)."""
    mail = ROOT / "corpus/storage-osm-232-urmel-smartd-impending-failure/urmel/smartd-mail.txt"
    kept = parse_bytes(mail.read_bytes(), file="m")
    assert kept.source is None and kept.files.column("lines")[0].as_py() == mail.read_bytes().count(b"\n")
    assert any("SMART Failure" in m for m in kept.events.column("message").to_pylist())
    d = _diagnose_files(tmp_path, {"urmel/smartd-mail.txt": mail})
    assert (d["root_cause"], d["rule"]) == ("storage", "catalog:host.smartd_scsi_smart_failure")


def test_an_incident_nothing_explains_lists_what_it_found(tmp_path: Path) -> None:
    log = "2024-05-01 10:00:00 ERROR frobnicator lost its widget\n2024-05-01 10:00:01 WARNING retrying the widget\n"
    d = _diagnose_files(tmp_path, {"n/app.log": log})
    assert d["root_cause"] == "unknown"
    assert [e["role"] for e in d["evidence"]] and {e["role"] for e in d["evidence"]} == {"found"}


def test_ecc_before_an_oom_on_the_host_is_the_memory(tmp_path: Path) -> None:
    """mem-bigscience-tr1-13b: the ECC error of one job, then the next job's OOM on the same node."""
    src = ROOT / "corpus/mem-bigscience-tr1-13b-ecc-uncorrectable-then-oom/node-a"
    d = _diagnose_files(tmp_path, {f"node-a/{p.name}": p for p in src.iterdir()})
    assert d["root_cause"] == "gpu_memory"


def test_a_job_log_opening_with_nvidia_smi_keeps_every_event_after_it() -> None:
    table = (ROOT / "tests/golden/nvsmi").glob("nvsmi-table-*.txt")
    head = next(iter(sorted(table)), None)
    assert head is not None
    tail = ("Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n    x.cuda()\n"
            "RuntimeError: cuda runtime error (35) : CUDA driver version is insufficient for CUDA runtime version "
            "at /pytorch/aten/src/THC/THCGeneral.cpp:74\n")  # fmt: skip
    data = head.read_bytes().rstrip(b"\n") + b"\n" + tail.encode()
    alone = parse_bytes(head.read_bytes(), file="t")
    both = parse_bytes(data, file="t")
    assert both.gpus.num_rows == alone.gpus.num_rows
    after = [r for r in both.events.to_pylist() if r["line"] > head.read_bytes().count(b"\n")]
    assert [(r["line"], r["source"]) for r in after] == [(head.read_bytes().count(b"\n") + 1, "torch")]
    assert "cuda runtime error (35)" in after[0]["message"]
    assert both.files.column("lines")[0].as_py() == data.count(b"\n")
    assert both.files.column("source")[0].as_py() == "nvsmi"


def test_an_unclaimed_file_too_large_to_read_is_counted_and_said(monkeypatch: pytest.MonkeyPatch) -> None:
    import forensics.parse

    mail = (ROOT / "corpus/storage-osm-232-urmel-smartd-impending-failure/urmel/smartd-mail.txt").read_bytes()
    assert parse_bytes(mail, file="m").events.num_rows > 0
    monkeypatch.setattr(forensics.parse, "UNCLAIMED_READ_BYTES", 100)
    big = parse_bytes(mail, file="m")
    row = big.files.to_pylist()[0]
    assert big.events.num_rows == 0 and row["lines"] == mail.count(b"\n") and "not read" in row["error"]


def test_a_hung_task_blocked_in_a_filesystem_is_the_storage(tmp_path: Path) -> None:
    """storage-m4logs-tr141: python blocked in GPFS's write path (mmfs26 frames) for minutes: the storage."""
    dmesg = ROOT / "corpus/storage-m4logs-tr141-gpfs-freeze-rank0-hung-task-d-state/jean-zay-iam06/dmesg.log"
    d = _diagnose_files(tmp_path, {"jean-zay-iam06/dmesg.log": dmesg})
    assert (d["root_cause"], d["rule"]) == ("storage", "catalog:linux_storage.hung_task_in_filesystem_io")
    # a hung task whose stack names no filesystem or block-layer wait says nothing of storage
    assert CATALOG.best("INFO: task python:1 blocked for more than 120 seconds.\nCall Trace:\n schedule+0x35/0xa0\n"
                        " futex_wait_queue_me+0xb6/0x110") is None


def test_dcgm_s_own_error_strings_are_read(tmp_path: Path) -> None:
    """drv-dcgmexp-319: dcgm-exporter dies on DCGM_ST_PROFILING_LIBRARY_ERROR's string (errorString)."""
    log = ROOT / "corpus/drv-dcgmexp-319-g5-a10-os-driver-535-gsp-profiling-fatal/node-a/dcgm-exporter.log"
    d = _diagnose_files(tmp_path, {"node-a/dcgm-exporter.log": log})
    assert (d["root_cause"], d["rule"]) == ("driver", "catalog:dcgm.st_profiling_library_error")
    hit = CATALOG.best("Detected XID 79 for GPU 3")  # the health check relays an Xid: the Xid's causes
    assert hit is not None and hit.code is not None and hit.code.code == 79 and hit.causes == CATALOG.code("xid", 79).causes  # type: ignore[union-attr]


def test_an_exception_line_without_its_traceback_is_an_exception(tmp_path: Path) -> None:
    """code-torchtitan-3764: one relayed "SafetensorError: …" line is the exception; a line its source already
    typed (a failed torch.save is fs.error) keeps its kind and its cause."""
    src = ROOT / "corpus/code-torchtitan-3764-qwen3-weight-tying-empty-safetensors-shard"
    d = _diagnose_files(tmp_path / "a", {str(p.relative_to(src)): p for p in src.rglob("*") if p.is_file() and p.name != "incident.toml"})
    assert (d["root_cause"], d["rule"]) == ("code_bug", "python-exception")
    full = ROOT / "corpus/storage-h2o-llmstudio-214-output-volume-full-checkpoint/node-a/llmstudio.log"
    d = _diagnose_files(tmp_path / "b", {"node-a/llmstudio.log": full})
    assert d["root_cause"] == "storage"
    # an errno printed by OSError takes the errno's kind and causes
    hit = CATALOG.best("OSError: [Errno 28] No space left on device: '/dev/shm/torch_1234_2964133012_0'")
    assert hit is not None and hit.id == "python.oserror_enospc_dev_shm" and hit.causes[0][0] == "container_runtime"
    hit = CATALOG.best("OSError: [Errno 122] Disk quota exceeded: '/home/u/ckpt.pt'")
    assert hit is not None and hit.kind == "fs.error" and hit.causes == (("storage", 0.8),)


def test_a_message_wrapped_over_lines_is_read_whole(tmp_path: Path) -> None:
    """PyTorch's DataLoader message (its catalog row's own text), wrapped as a narrow terminal pastes it: the
    first line alone reads as a CUDA error, the three together as the container's shared memory. A line whose
    neighbour reads on its own does not take the neighbour's reading (synthetic: the wording is PyTorch's, the
    wrapping ours)."""
    log = ("Epoch 3: 45%|####5     | 450/1000 [10:02<12:15,  1.34s/it]\n"
           "ERROR: DataLoader worker (pid 4567) is killed by signal: Bus\n"
           "error. It is possible that dataloader's workers are out of shared\n"
           "memory. Please try to raise your shared memory limit.\n"
           "2024-05-01 10:00:00 ERROR frobnicator lost its widget\n"
           "OSError: [Errno 28] No space left on device: '/dev/shm/torch_1234_2964133012_0'\n")  # fmt: skip
    d = _diagnose_files(tmp_path, {"n/stderr.log": log})
    assert (d["root_cause"], d["rule"]) == ("container_runtime", "catalog:pytorch.dataloader_killed_bus_error")
    lines = sorted(e["line"] for e in d["evidence"])
    assert 2 in lines and 5 not in lines




def test_a_code_s_string_wrapped_over_lines_is_read_as_the_code(tmp_path: Path) -> None:
    """cudaErrorContained's string (CUDA 12.8's cudaGetErrorString) as PyTorch prints it, wrapped by a narrow
    terminal: the first line alone is only a generic "CUDA error: %s" whose text is no code's string (a weak
    reading); joined with the next it is the code, whose candidates replace the generic ones (synthetic: the
    wording is CUDA's and PyTorch's, the wrapping ours)."""
    log = ("torch.AcceleratorError: CUDA error: Invalid access of peer GPU memory\n"
           "over nvlink or a hardware error\n")  # fmt: skip
    d = _diagnose_files(tmp_path, {"n/stderr.log": log})
    assert (d["root_cause"], d["rule"]) == ("gpu_memory", "catalog:pytorch.cuda_error")
# Real pasted lines of the user-space programs around a job (tests/golden/PROVENANCE.md): the loader, the shells,
# systemd, a FUSE mount, Horovod. Each line a catalog reads: (row, cause); the other lines are read by none.
USER_SPACE = {
    "torch/ldso-llamacpp-server-cuda-image-libcuda-missing-01.log": {1: ("glibc.nvidia_driver_library_missing", "driver")},
    "torch/python-importerror-libcuda-k8s-pod-xinference-01.log": {1: ("glibc.nvidia_driver_library_missing", "driver")},
    "torch/ldso-nvidia-container-cli-libnvidia-container-missing-01.log": {
        1: ("glibc.nvidia_container_library_missing", "container_runtime")},
    "torch/shell-bus-error-core-dumped-pbg-docker-shm-01.log": {4: ("launchers.shell_bus_error", "container_runtime")},
    "torch/shell-killed-bare-after-config-loaded-lte-01.log": {3: ("launchers.shell_killed", "host_oom")},
    "torch/python-oserror-enotconn-csi-s3-training-output-01.log": {1: ("fuse.mount_disconnected", "storage")},
    "torch/horovod-0.21-stall-inspector-missing-ranks-01.log": {1: ("horovod.stalled_ranks", "hang")},
    "journal/syslog-s3fs-1.89-unable-to-access-mountpoint-enotconn-01.log": {1: ("fuse.mount_disconnected", "storage")},
    "journal/journal-iso-nvidia-persistenced-failed-with-result-popos-01.log": {
        n: ("systemd.nvidia_persistenced_failed", "driver") for n in (1, 2, 3)},
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(USER_SPACE))
def test_the_lines_of_the_programs_around_a_job_are_read(name: str) -> None:
    path = GOLDEN / name
    events = parse_bytes(path.read_bytes(), file=path.name, source=name.split("/")[0]).events
    lines, texts = events.column("line").to_pylist(), pl.Series(events.column("message").to_pylist(), dtype=pl.String)
    read = messages.frame(CATALOG, texts)
    got = {lines[i]: (row, cause) for i, row, cause in read.select("i", "catalog", "cat_cause").iter_rows()}
    assert got == USER_SPACE[name]


@pytest.mark.parametrize(("name", "cause", "rule"), [
    ("torch/shell-killed-bare-after-config-loaded-lte-01.log", "host_oom", "catalog:launchers.shell_killed"),
    ("torch/shell-bus-error-core-dumped-pbg-docker-shm-01.log", "container_runtime", "catalog:launchers.shell_bus_error"),
    ("torch/ldso-nvidia-container-cli-libnvidia-container-missing-01.log", "container_runtime",
     "catalog:glibc.nvidia_container_library_missing"),
])  # fmt: skip
def test_a_shell_s_or_the_loader_s_line_alone_is_a_weak_diagnosis(tmp_path: Path, name: str, cause: str, rule: str) -> None:
    """A job that printed nothing but the shell's job status or the loader's error: that line is the evidence,
    and a weak one when it is the shell's (role context: SIGKILL and SIGBUS have other senders)."""
    d = _diagnose_files(tmp_path, {"n/stderr.log": GOLDEN / name})
    assert (d["root_cause"], d["rule"]) == (cause, rule)
    assert d["confidence"] < (0.3 if "shell" in name else 0.6)


# ---------------------------------------------------------------------------------------- emitters' defaults

DEFAULTS = {d.id: d for d in CATALOG.defaults}


@pytest.mark.parametrize("default_id", sorted(DEFAULTS))
def test_an_emitter_s_default_is_cited_and_reads_its_envelope(default_id: str) -> None:
    """Each ``[catalog.default]``: a weak cause, cited, and its recognition reads its example (a typed line
    at error severity when the emitter is recognised by the kind its source gives it)."""
    d = DEFAULTS[default_id]
    assert d.causes and all(c in CAUSES and 0 < w <= 0.5 for c, w in d.causes), d.causes
    assert d.cite and d.example and (d.kinds or d.pattern)
    assert set(d.kinds) <= KINDS and set(d.severities) <= {"warning", "error", "critical"}
    row = {"kind": d.kinds[0] if d.kinds else "other", "severity": "error" if d.kinds else "info", "message": d.example}
    assert pl.DataFrame([row]).select(d.expr()).item()
    re.compile(for_python(ascii_classes(d.pattern)))
    other = {"kind": "other", "severity": "error", "message": "usb 1-1: new high-speed USB device number 2"}
    assert not pl.DataFrame([other]).select(d.expr()).item()


def test_a_row_s_reading_beats_the_emitter_s_default() -> None:
    """The fabric manager's lines as gpud documents them (a row reads the fatal NVSwitch error) and as
    pytorch/ci-infra#552 pasted them (no row reads them): the row wins where it reads, the emitter's default
    (nvlink, role context) reads the others; a line of no emitter gets nothing."""
    fatal = ("[Jul 23 2024 07:53:55] [ERROR] [tid 841] detected NVSwitch fatal error 20034 on fid 0 on NVSwitch pci "
             "bus id 00000000:86:00.0 physical id 3 port 33")
    lines = (ROOT / "corpus/nvlink-pytorchciinfra-552-h100-fm-cloudinit-race-config-error-8/node-a/fabricmanager.log")
    pasted = lines.read_text().splitlines()
    rows = [{"kind": "other", "severity": "info", "message": m} for m in [fatal, *pasted, "usb 1-1: new device"]]
    frame = pl.DataFrame(rows)
    read = messages.frame(CATALOG, frame.get_column("message"))
    assert read.get_column("i").to_list() == [0] and read.item(0, "catalog") == "fabricmanager.nvswitch_fatal_error"
    unread = frame.with_row_index("_i").filter(~pl.col("_i").is_in(read.get_column("i").implode()))
    defaults = messages.default_frame(CATALOG, unread)
    named = [n for n, m in enumerate(pasted) if "fabric manager" in m.lower()]
    assert defaults.get_column("i").to_list() == named and len(named) >= 2
    assert set(defaults.get_column("catalog")) == {"fabricmanager.default"}
    assert set(defaults.get_column("cat_cause")) == {"nvlink"} and set(defaults.get_column("cat_role")) == {"context"}


def test_an_emitter_s_typed_error_is_read_by_its_kind(tmp_path: Path) -> None:
    """A journal's service line is recognised by the kind its unit gives it: the kubelet's klog E lines of
    k8s-device-plugin#306, cut by the pager so no row reads them, are the container layer (a weak candidate,
    named ``catalog:kubernetes.default``)."""
    log = GOLDEN / "journal/journal-r-kubelet-logs-begin-ist-pager-truncated-01.log"
    d = _diagnose_files(tmp_path, {"n/journal.txt": log})
    assert (d["root_cause"], d["rule"]) == ("container_runtime", "catalog:kubernetes.default")
    assert d["confidence"] < 0.3


def test_a_line_typing_row_hides_no_reading_and_a_wrapper_yields_to_what_it_quotes() -> None:
    """The bare exception line ("<Type>Error: ", a row that only types the line) once hid the readings that
    start with it: "MemoryError: Unable to allocate …" read as a bare exception, not the host's memory. A
    harmless INFO quoting dlopen's error still hides it; the container CLI's "<stage> error: %s" gives way to
    the row reading the NVML error it quotes."""
    catalog = messages.load()
    cases = {
        "MemoryError: Unable to allocate 7.45 GiB for an array with shape (1000000000, 2) and data type float32":
            ("python.memory_error", "host_oom"),
        "FloatingPointError: Predicted boxes or scores contain Inf/NaN. Training has diverged.":
            ("python.floating_point_error", "numerical"),
        "nvidia-container-cli: initialization error: nvml error: unknown error": ("nvidia_container.cli_nvml_error", "driver"),
        # libnvidia-container <= 1.7's RPC error, quoted by the stage wrapper that reads more words of its own
        "nvidia-container-cli: initialization error: driver error: timed out": ("nvidia_container.cli_driver_error_legacy", "driver"),
        "::16674:16674 [0] NCCL INFO NET/Plugin : Plugin load (libnccl-net.so) returned 2 : libnccl-net.so: cannot open "
        "shared object file: No such file or directory": ("nccl.plugin_not_loaded_info", None),
        "KeyError: 'labels'": ("python.argument_error", "code_bug"),
        "safetensors_rust.SafetensorError: Error while deserializing header: MetadataIncompleteBuffer":
            ("python.exception_line", None),
    }  # fmt: skip
    for line, (row, cause) in cases.items():
        best = catalog.best(line)
        assert (best.id, best.cause) == (row, cause), line


def test_nccl_s_result_code_carries_what_its_warning_said() -> None:
    """CSCS's nccl-tests with NCCL_NET="AWS Libfabric" and the plugin not loaded: NCCL WARNs that the network
    is not found, and the test then prints the code, "invalid usage (run with NCCL_DEBUG=WARN for details)".
    The code is the cascade of the WARN, not the user's misuse."""
    base = {"host": "nid006352", "source": "nccl", "file": "nid006352/nccl.log", "severity": "error"}
    events = _events(
        {**base, "line": 1, "kind": "nccl.warn", "message": "nid006352:34157:34217 [1] net.cc:626 NCCL WARN Error: network AWS Libfabric not found."},
        {**base, "line": 2, "kind": "other", "message": "nid006352: Test NCCL failure common.cu:958 'invalid usage (run with NCCL_DEBUG=WARN for details)"},
    )  # fmt: skip
    assert forensics.diagnose(events).row(0, named=True)["root_cause"] == "network"
    alone = _events({**base, "line": 2, "kind": "other",
                     "message": "Test NCCL failure common.cu:958 'invalid usage (run with NCCL_DEBUG=WARN for details)"})
    assert forensics.diagnose(alone).row(0, named=True)["root_cause"] == "code_bug"
