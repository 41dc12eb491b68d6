"""The driver and OS install stack's catalogs (linux_packaging's dpkg/apt/dnf/DKMS/modpost/Secure Boot rows,
nvidia_installer, nvidia_persistenced, nvidia_modprobe, xorg, conda, vfio) read what users pasted when a driver
install failed: which row, which cause, and the incident's diagnosis."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from forensics import messages
from forensics.parse import parse_bytes

from .conftest import GOLDEN
from .test_messages import _diagnose_files

CATALOG = messages.load()

#: a Debian 12 `apt-get install nvidia-driver` whose DKMS build failed (NVIDIA/nvidia-container-toolkit#361)
DKMS_DEBIAN = GOLDEN / "torch/apt-dpkg-debian12-nvidia-kernel-dkms-bad-return-status-postinst-10-01.log"


def test_a_failed_driver_package_is_read_line_by_line() -> None:
    events = parse_bytes(DKMS_DEBIAN.read_bytes(), file=DKMS_DEBIAN.name, source="torch").events
    lines, texts = events.column("line").to_pylist(), pl.Series(events.column("message").to_pylist(), dtype=pl.String)
    read = messages.frame(CATALOG, texts)
    got = {lines[i]: row for i, row, cause in read.select("i", "catalog", "cat_cause").iter_rows() if cause == "driver"}
    assert got == {
        6: "linux_packaging.dkms_build_failed",
        7: "linux_packaging.dkms_consult_nvidia_make_log",
        8: "linux_packaging.dpkg_error_processing_driver",
        9: "linux_packaging.dpkg_script_failed_driver",
        10: "linux_packaging.dpkg_dependency_problems_driver",
        17: "linux_packaging.dpkg_error_processing_driver",
    }


def test_a_failed_driver_package_is_the_driver(tmp_path: Path) -> None:
    """The job's node printed nothing but the install's failure: the driver, from the first failing line."""
    d = _diagnose_files(tmp_path, {"n/install.log": DKMS_DEBIAN})
    assert d["root_cause"] == "driver" and str(d["rule"]).startswith("catalog:linux_packaging.")


#: (a line users pasted, the row that reads it, the cause); each from a public thread
LINES = [
    # pop-os/beta#310: nvidia-dkms-390 on a 5.15 kernel
    (" installed nvidia-dkms-390 package post-installation script subprocess returned error exit status 10",
     "linux_packaging.dpkg_script_failed_driver", "driver"),
    ("dpkg: dependency problems prevent configuration of nvidia-driver-390:",
     "linux_packaging.dpkg_dependency_problems_driver", "driver"),
    ("Consult /var/lib/dkms/nvidia/390.144/build/make.log for more information.",
     "linux_packaging.dkms_consult_nvidia_make_log", "driver"),
    # NVIDIA/nvidia-installer#17: the postinst's own failure (exit status 1)
    ("dpkg: error processing package nvidia-dkms-470 (--configure):", "linux_packaging.dpkg_error_processing_driver",
     "driver"),
    # JafarAkhondali/acer-predator-turbo-and-rgb-keyboard-linux-module#113: Secure Boot refusing an unsigned module
    ("insmod: ERROR: could not insert module src/facer.ko: Key was rejected by service",
     "linux_packaging.modprobe_key_rejected", "driver"),
    ("[ 1748.999277] Loading of module with unavailable key is rejected",
     "linux_packaging.kernel_unsigned_module_rejected", "driver"),
    # google/gasket-driver#11: systemd-modules-load's wording of the same refusal
    ("Apr 22 18:10:16 host systemd-modules-load[602]: Failed to insert module 'gasket': Key was rejected by service",
     "linux_packaging.modprobe_key_rejected", "driver"),
]  # fmt: skip


@pytest.mark.parametrize(("line", "row", "cause"), LINES, ids=[r for _, r, _ in LINES])
def test_a_real_install_line_reads_as_its_row(line: str, row: str, cause: str) -> None:
    best = CATALOG.best(line)
    assert best is not None and (best.id, best.cause) == (row, cause)


def test_an_nvidia_module_refused_by_secure_boot_outweighs_any_module() -> None:
    """The same refusal names the driver firmly when the module is NVIDIA's, weakly for another module."""
    nvidia = CATALOG.best("modprobe: ERROR: could not insert 'nvidia': Key was rejected by service")
    other = CATALOG.best("modprobe: ERROR: could not insert 'gasket': Key was rejected by service")
    assert nvidia is not None and other is not None
    assert nvidia.id == "linux_packaging.modprobe_nvidia_key_rejected" and nvidia.weight > other.weight


def test_a_package_manager_s_follower_is_not_the_cause() -> None:
    """apt's and dpkg's closing lines only follow the failure they summarise: weak, and cascade."""
    for line in ("E: Sub-process /usr/bin/dpkg returned an error code (1)",
                 "E: Unable to correct problems, you have held broken packages.",
                 "Errors were encountered while processing:"):  # fmt: skip
        hit = CATALOG.best(line)
        assert hit is not None and hit.role == "cascade" and hit.weight <= 0.35, line


def test_a_toolkit_package_is_the_container_runtime_and_a_driver_package_the_driver() -> None:
    toolkit = CATALOG.best("dpkg: error processing package nvidia-container-toolkit (--configure):")
    driver = CATALOG.best("dpkg: error processing package nvidia-driver-535 (--configure):")
    assert toolkit is not None and toolkit.cause == "container_runtime"
    assert driver is not None and driver.cause == "driver"


def test_apt_s_no_candidate_is_read_and_its_removal_notice_is_not() -> None:
    """apt's "has no installation candidate" names the package's layer; "is not installed, so not removed" (a purge
    before an install) is no failure."""
    driver = CATALOG.best("E: Package 'nvidia-driver-535' has no installation candidate")
    toolkit = CATALOG.best("E: Package 'nvidia-container-toolkit' has no installation candidate")
    assert driver is not None and driver.cause == "driver"
    assert toolkit is not None and toolkit.cause == "container_runtime"
    assert CATALOG.best("Package 'nvidia-driver-535' is not installed, so not removed") is None
