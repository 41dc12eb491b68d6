"""Versions as evidence (``forensics/versions.py``): each statement read from a real sample, the conflicts
found on real incidents and samples, and none where the versions agree."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import forensics
from forensics import versions

ROOT = Path(__file__).parents[1]
GOLDEN = "tests/golden"

#: statement id → (a real sample, the line that states it, the facts the line gives)
SAMPLES = {
    "nvrm-banner": (f"{GOLDEN}/kernel/dmesg-T-grep-nvrm-xid79-crash-dump-continuation-01.log", 1, {"kernel_module": "535.161.07"}),
    "nvrm-api-mismatch-client": (f"{GOLDEN}/kernel/syslog-api-mismatch-hash012-escaped-newlines-535-01.log", 1, {"user_space": "535.54.03"}),
    "nvrm-api-mismatch-kmod": (f"{GOLDEN}/journal/journal-dmesg-indented-nvrm-api-mismatch-multiline-555-560-01.log", 4, {"kernel_module": "560.35.03"}),
    "nvsmi-header": (f"{GOLDEN}/nvsmi/nvsmi-table-570.86.16-in-container-root-prompt-rtx2080-truncated-name-01.txt", 4,
                     {"user_space": "570.86.16", "driver": "570.86.16", "cuda_driver": "12.8"}),
    "nvsmi-q-driver": (f"{GOLDEN}/nvsmi/nvsmi-q-560.35.03-titan-v-01.txt", 4, {"driver": "560.35.03"}),
    "nvsmi-q-cuda": (f"{GOLDEN}/nvsmi/nvsmi-q-560.35.03-titan-v-01.txt", 5, {"cuda_driver": "12.6"}),
    "nvml-library-version": (f"{GOLDEN}/nvsmi/nvsmi-error-nvml-version-mismatch-nvml-library-version-570-01.log", 3, {"user_space": "570.124"}),
    "torch-driver-too-old": ("corpus/drv-alphapose-488-torch-driver-too-old-9000/node-a/stderr.log", 2, {"cuda_driver": "9.0"}),
    "torch-collect-env-cuda": (f"{GOLDEN}/torch/collect-env-1.8.1-cu102-a100-mig-driver-450-01.log", 4, {"cuda_runtime": "10.2"}),
    "torch-collect-env-driver": (f"{GOLDEN}/torch/collect-env-1.8.1-cu102-a100-mig-driver-450-01.log", 19, {"driver": "450.80.02"}),
    "torch-collect-env-toolkit": (f"{GOLDEN}/torch/collect-env-2.0.1-cu117-h100-pcie-sm90-warning-driver-535-01.log", 22, {"cuda_toolkit": "12.2"}),
    "torch-collect-env-gpu": (f"{GOLDEN}/torch/collect-env-2.0.1-cu117-h100-pcie-sm90-warning-driver-535-01.log", 24, {"product": "NVIDIA H100 PCIe"}),
    "torch-version-collect-env": (f"{GOLDEN}/torch/collect-env-1.8.1-cu102-a100-mig-driver-450-01.log", 2, {"cuda_runtime": "10.2"}),
    "nccl-banner": (f"{GOLDEN}/nccl/nccl-2.25.1-rtx5090-maxsharedmem-exceeds-net-socket-cloudflarewarp-iface-01.log", 3,
                    {"nccl": "2.25.1", "cuda_runtime": "12.2"}),
    "nccl-cuda-driver": (f"{GOLDEN}/nccl/nccl-2.25.1-rtx5090-maxsharedmem-exceeds-net-socket-cloudflarewarp-iface-01.log", 2, {"cuda_driver": "12.8"}),
    "toolkit-require-cuda": (f"{GOLDEN}/torch/nvidia-docker-2.0-nvcc-9.0-then-hook-require-cuda-9.0-unsatisfied-01.log", 7, {"cuda_required": "9.0"}),
    "toolkit-unsatisfied": ("corpus/drv-testinfra-4366-m60-525-container-requires-cuda-12-1-driver-too-old/ip-10-0-2-162/console.log", 29,
                            {"cuda_required": "12.1"}),
    "nvidia-docker-v1-unsupported": ("corpus/drv-nvdocker-106-uvm-not-loaded-then-driver-cuda70-lt-image-75/belka2-500-311ng/nvidia-docker-run-2.txt", 3,
                                     {"cuda_driver": "7.0", "cuda_required": "7.5"}),
    "nvcc-version": (f"{GOLDEN}/torch/nvidia-docker-2.0-nvcc-9.0-then-hook-require-cuda-9.0-unsatisfied-01.log", 5, {"cuda_toolkit": "9.0"}),
    "tf-kernel-reported": (f"{GOLDEN}/torch/tf-1.x-cuda-diagnostics-kernel-384-libcuda-375-dso-mismatch-01.log", 10, {"kernel_module": "384.130.0"}),
    "tf-libcuda-reported": (f"{GOLDEN}/torch/tf-1.x-cuda-diagnostics-kernel-384-libcuda-375-dso-mismatch-01.log", 6, {"user_space": "375.66.0"}),
    "gsp-firmware-file": (f"{GOLDEN}/kernel/dmesg-api-mismatch-multiline-gsp-firmware-missing-rminitadapter-570-01.log", 13, {"gsp_firmware": "570.144"}),
    "cuda-compat": ("corpus/cr-torchpod-43-nvctk-140-compat-libs-geforce-error-804/node-a/stderr.log", 1, {"compat": "forward compatibility"}),
    "dpkg-user-space": ("corpus/drv-scicomp-70-bock-kmod-520-vs-nvidia-smi-525-mismatch/bock/console.log", 10, {"user_space": "525.85.12"}),
}  # fmt: skip


def _line_facts(path: str, line: int) -> pl.DataFrame:
    text = (ROOT / path).read_text("utf-8", errors="replace").splitlines()[line - 1]
    row = {"incident": ["i"], "host": ["h"], "file": [path], "line": [line], "ts": [None], "message": [text]}
    return versions.facts(pl.DataFrame(row))


@pytest.mark.parametrize("statement", sorted(SAMPLES))
def test_each_statement_reads_its_real_sample(statement: str) -> None:
    path, line, expected = SAMPLES[statement]
    got = _line_facts(path, line).filter(pl.col("statement") == statement)
    assert dict(got.select("component", "version").iter_rows()) == expected


def test_every_statement_has_a_real_sample() -> None:
    assert set(SAMPLES) == {s.id for s in versions.statements()}


def test_the_open_kernel_modules_are_a_fact() -> None:
    facts = _line_facts(f"{GOLDEN}/kernel/dmesg-gsp-init-failed-rminitadapter-talos-5060ti-01.log", 1)
    assert dict(facts.select("component", "version").iter_rows()) == {"open": "Open", "kernel_module": "570.172.08"}
    proprietary = _line_facts(SAMPLES["nvrm-banner"][0], 1)
    assert "open" not in proprietary.get_column("component").to_list()


def test_the_compatibility_tables_are_cited_and_ordered() -> None:
    rows = list(csv.DictReader(io.StringIO((ROOT / "forensics/data/cuda_drivers.csv").read_text("utf-8"))))
    assert all(r["cite"] for r in rows)
    releases = versions.cuda_releases()
    assert [c.cuda for c in releases] == sorted(c.cuda for c in releases)
    assert [c.min_driver for c in releases] == sorted(c.min_driver for c in releases)
    # minor-version compatibility never asks more than the release itself
    assert all(c.compat_driver is None or c.compat_driver <= c.min_driver for c in releases)
    assert all(a.cite for a in versions.architectures())


# -- conflicts on real incidents and samples -----------------------------------------------------------------

#: incident → the conflicts its versions show (empty: the versions agree)
CORPUS = {
    "drv-nvdocker-106-uvm-not-loaded-then-driver-cuda70-lt-image-75": ["cuda_required"],
    "drv-dalle-104-nvml-mismatch-kmod-510-vs-515": ["kernel_user_mismatch"],
    "drv-scicomp-70-bock-kmod-520-vs-nvidia-smi-525-mismatch": ["kernel_user_mismatch"],
    "drv-testinfra-4366-m60-525-container-requires-cuda-12-1-driver-too-old": ["cuda_required"],
    "drv-jade-10-dgx-driver-375-cuda9-insufficient-driver": [],
}
#: a golden sample read as a one-file incident → its conflicts
SAMPLE_INCIDENTS = {
    "torch/collect-env-1.8.1-cu102-a100-mig-driver-450-01.log": ["arch"],
    "torch/collect-env-2.0.1-cu117-h100-pcie-sm90-warning-driver-535-01.log": ["arch"],
    "torch/tf-1.x-cuda-diagnostics-kernel-384-libcuda-375-dso-mismatch-01.log": ["kernel_user_mismatch"],
    "torch/nvidia-docker-2.0-nvcc-9.0-then-hook-require-cuda-9.0-unsatisfied-01.log": [],
    "nccl/nccl-2.25.1-rtx5090-maxsharedmem-exceeds-net-socket-cloudflarewarp-iface-01.log": [],
    "nvsmi/nvsmi-q-560.35.03-titan-v-01.txt": [],
    "kernel/dmesg-gsp-init-failed-rminitadapter-talos-5060ti-01.log": [],
}


def _sample_id(name: str) -> str:
    return "sample-" + Path(name).stem


@pytest.fixture(scope="module")
def ds(tmp_path_factory: pytest.TempPathFactory) -> forensics.store.OpenDataset:
    root = tmp_path_factory.mktemp("versions")
    paths = [ROOT / "corpus" / name for name in CORPUS]
    for name in SAMPLE_INCIDENTS:
        folder = root / "in" / _sample_id(name) / "node-a"
        folder.mkdir(parents=True)
        shutil.copy(ROOT / GOLDEN / name, folder / Path(name).name)
        paths.append(folder.parent)
    forensics.ingest(paths, root / "ds", jobs=1)
    return forensics.open_dataset(root / "ds")


def _expected() -> dict[str, list[str]]:
    return {**CORPUS, **{_sample_id(k): v for k, v in SAMPLE_INCIDENTS.items()}}


def test_conflicts_found_and_not_found(ds: forensics.store.OpenDataset) -> None:
    found = versions.conflicts(versions.facts(ds.events, ds.gpus))
    got = {i: [] for i in _expected()} | {
        i: sorted(json.loads(d)["conflict"] for d in group.get_column("detail"))
        for (i,), group in found.group_by(["incident"])
    }
    assert got == _expected()


def test_a_conflict_is_driver_evidence_with_its_reasoning(ds: forensics.store.OpenDataset) -> None:
    d = forensics.diagnose(ds).select("incident", "root_cause", "rule", "evidence")
    rows = {r["incident"]: r for r in d.iter_rows(named=True)}
    for incident, expected in _expected().items():
        shown = [e for e in rows[incident]["evidence"] if e["kind"] == versions.KIND]
        assert len(shown) == len(expected), incident
        if expected:
            assert rows[incident]["root_cause"] == "driver", incident
    # the conflict with the error it explains: the toolkit's requirement against nvidia-smi's driver
    testinfra = rows["drv-testinfra-4366-m60-525-container-requires-cuda-12-1-driver-too-old"]
    assert testinfra["rule"] == "version-conflict-then-error"
    (conflict,) = [e for e in testinfra["evidence"] if e["kind"] == versions.KIND]
    assert conflict["role"] == "precursor" and conflict["line"] == 29
    assert "requires CUDA 12.1" in conflict["message"] and "525.105.17" in conflict["message"]
    assert "supports CUDA 12.0" in conflict["message"] and "console.log:10" in conflict["message"]
    # alone, with no error line a rule reads: nvidia-docker 1.x's own comparison
    alone = rows["drv-nvdocker-106-uvm-not-loaded-then-driver-cuda70-lt-image-75"]
    assert (alone["root_cause"], alone["rule"]) == ("driver", "version-conflict")


def test_the_events_alone_give_the_same_conflicts_but_those_of_nvidia_smi_dumps(ds: forensics.store.OpenDataset) -> None:
    """A dump's driver is in the ``gpus`` table: the events alone miss only the conflicts that need it."""
    with_gpus = versions.conflicts(versions.facts(ds.events, ds.gpus)).get_column("incident").to_list()
    alone = versions.conflicts(versions.facts(ds.events)).get_column("incident").to_list()
    assert sorted(set(with_gpus) - set(alone)) == ["drv-testinfra-4366-m60-525-container-requires-cuda-12-1-driver-too-old"]


_PIECES = [text for path, line, _ in SAMPLES.values()
           for text in [(ROOT / path).read_text("utf-8", errors="replace").splitlines()[line - 1]]]  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_PIECES), st.text(max_size=30), st.sampled_from(["a", "b", None])),
                max_size=12))  # fmt: skip
def test_any_messages_give_facts_and_conflicts_without_error(lines: list[tuple[str, str, str | None]]) -> None:
    """Real statements cut, joined and mixed with any text on any hosts: facts and conflicts, never an error."""
    messages = [(piece[: len(noise) * 3] + noise + piece[len(noise) :], host) for piece, noise, host in lines]
    frame = pl.DataFrame({"incident": ["i"] * len(messages), "host": [h for _, h in messages], "file": ["f"] * len(messages),
                          "line": list(range(1, len(messages) + 1)), "ts": [None] * len(messages),
                          "message": [m for m, _ in messages]},
                         schema={"incident": pl.String, "host": pl.String, "file": pl.String, "line": pl.Int64,
                                 "ts": pl.Datetime("us", "UTC"), "message": pl.String})  # fmt: skip
    found = versions.facts(frame)
    assert set(found.get_column("component").to_list()) <= set(versions.COMPONENTS)
    conflicts = versions.conflicts(found)
    assert conflicts.get_column("kind").to_list() == [versions.KIND] * conflicts.height
