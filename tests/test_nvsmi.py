"""nvidia-smi: -q text, -q -x XML and --query-gpu CSV into gpus rows and derived events."""

from __future__ import annotations

import json
from typing import Any

import pytest

from forensics.parse import parse_bytes
from forensics.schema import GPUS

from .conftest import GOLDEN


def parse(name_or_text: str, *, text: bool = False) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    data = name_or_text.encode() if text else (GOLDEN / "nvsmi" / name_or_text).read_bytes()
    parsed = parse_bytes(data, file="nvsmi.txt", source="nvsmi")
    events = parsed.events.to_pylist()
    for e in events:
        e["detail"] = json.loads(e["detail"])
    return parsed.gpus.to_pylist(), events


def test_h100_dump_every_gpu_with_identity_and_counters() -> None:
    gpus, events = parse("nvsmi-q-535.161.08-8x-h100-hbm3-replays-01.txt")
    assert len(gpus) == 8 and len({g["uuid"] for g in gpus}) == 8
    first = gpus[0]
    assert (first["gpu"], first["uuid"], first["serial"]) == ("0000:19:00.0", "GPU-ee7954ec-da95-fd7a-ddfd-c6b32cc2f8aa", "1650124031592")
    assert (first["product"], first["driver"], first["cuda"], first["minor"]) == ("NVIDIA H100 80GB HBM3", "535.161.08", "12.2", 0)
    assert (first["pcie_gen_max"], first["pcie_width_max"], first["pcie_replays"]) == (5, 16, 67)
    assert first["ecc_volatile_uncorrected"] == 0 and first["remapped_rows_pending"] is False
    assert first["ts"].isoformat() == "2024-07-31T11:22:39+00:00"
    replays = [e for e in events if e["kind"] == "gpu.pcie_replays"]
    assert [e["code"] for e in replays] == [67, 63, 52, 43, 49, 53, 82, 67]
    assert all(e["line"] > 0 and e["source"] == "nvsmi" for e in events)


def test_remap_pending_on_an_a10() -> None:
    (gpu,), events = parse("nvsmi-q-535.129.03-a10-remapped-rows-pending-01.txt")
    assert (gpu["remapped_rows_uncorrectable"], gpu["remapped_rows_pending"], gpu["remapped_rows_failure"]) == (4, True, False)
    (event,) = [e for e in events if e["kind"] == "gpu.remap_pending"]
    lines = (GOLDEN / "nvsmi" / "nvsmi-q-535.129.03-a10-remapped-rows-pending-01.txt").read_text().splitlines()
    assert "Pending" in lines[event["line"] - 1] and "Yes" in lines[event["line"] - 1]
    assert event["detail"]["uncorrectable"] == 4 and event["gpu"] == "0000:07:00.0"


def test_old_drivers_and_four_digit_domains() -> None:
    (gpu,), _ = parse("nvsmi-q-d-temperature-304.108-old-4digit-domain-busid-01.txt")
    assert (gpu["gpu"], gpu["driver"]) == ("0000:01:05.0", "304.108")
    (gpu,), _ = parse("nvsmi-q-396.54-gtx1080-36col-partial-01.txt")
    assert gpu["product"] == "GeForce GTX 1080" and gpu["driver"] == "396.54"


@pytest.mark.parametrize(
    ("name", "expect"),
    [
        ("nvsmi-q-x-515.105.01-a10g-remapped-rows-01.xml", {"product": "NVIDIA A10G", "pcie_width_current": 8, "pcie_width_max": 16, "remapped_rows_pending": False}),
        ("nvsmi-q-x-515.105.01-tesla-t4-retired-pages-01.xml", {"product": "Tesla T4", "retired_pages_dbe": 0, "retired_pages_sbe": 0}),
        ("nvsmi-q-x-535.54.03-a100-sxm4-mig-v12-dtd-01.xml", {"gpu": "0000:01:00.0", "remapped_rows_pending": None, "temp_gpu_c": 27.0}),
        ("nvsmi-q-x-418.43-quadro-p400-old-schema-01.xml", {"product": "Quadro P400", "driver": "418.43"}),
    ],
)  # fmt: skip
def test_xml(name: str, expect: dict[str, Any]) -> None:
    gpus, events = parse(name)
    assert {k: gpus[0][k] for k in expect} == expect
    assert all(e["line"] >= 1 for e in events)


def test_truncated_xml_keeps_what_closed_and_says_so() -> None:
    parsed = parse_bytes((GOLDEN / "nvsmi" / "nvsmi-q-x-390.157-v9-dtd-redacted-uuid-partial-01.xml").read_bytes(), file="x.xml")
    assert parsed.source == "nvsmi" and parsed.gpus.num_rows == 1
    assert parsed.gpus.column("driver")[0].as_py() == "390.157"
    assert "XML cut" in parsed.files.column("error")[0].as_py()


def test_csv_loop() -> None:
    gpus, _ = parse("nvsmi-query-gpu-csv-loop-index-temp-util-pstate-power-01.csv")
    assert len(gpus) == 13 and gpus[0]["line"] == 2
    assert (gpus[0]["temp_gpu_c"], gpus[0]["power_draw_w"], gpus[0]["clock_sm_mhz"]) == (56.0, 83.92, 1320.0)



def sniffed(name: str) -> tuple[str | None, list[dict[str, Any]]]:
    """The source sniffing picks for a golden sample, and its gpus rows."""
    parsed = parse_bytes((GOLDEN / "nvsmi" / name).read_bytes(), file=name)
    return parsed.source, parsed.gpus.to_pylist()


WIDE = "nvsmi-query-gpu-csv-wide-590.48.01-h100-fabric-cliqueid-sram-l2-01.csv"


def test_wide_query_gpu_csv_with_capitals_and_digits_in_field_names() -> None:
    # 212 fields, among them fabric.cliqueId, pci.baseClass, ecc.errors.uncorrected.aggregate.sram.l2
    (gpu,), events = parse(WIDE)
    assert (gpu["gpu"], gpu["product"], gpu["driver"], gpu["uuid"]) == (
        "0000:00:09.0", "NVIDIA H100 80GB HBM3", "590.48.01", "GPU-00000000-0000-0000-0000-000000000000")
    assert [gpu[c] for c in ("pcie_gen_current", "pcie_gen_max", "pcie_width_current", "pcie_width_max")] == [5, 5, 16, 16]
    assert [gpu[f"ecc_{s}_{k}"] for s in ("volatile", "aggregate") for k in ("corrected", "uncorrected")] == [0, 0, 0, 0]
    assert [gpu[c] for c in ("remapped_rows_correctable", "remapped_rows_uncorrectable", "remapped_rows_pending",
                             "remapped_rows_failure")] == [0, 0, False, False]  # fmt: skip
    assert (gpu["temp_gpu_c"], gpu["power_draw_w"], gpu["power_limit_w"]) == (41.0, 69.85, 700.0)
    assert (gpu["clock_sm_mhz"], gpu["clock_mem_mhz"], gpu["clocks_event_reasons"]) == (345.0, 2619.0, ["gpu_idle"])
    assert gpu["retired_pages_dbe"] is None  # [N/A] is unknown, not 0
    assert gpu["ts"].isoformat() == "2026-07-14T08:12:38.696000+00:00" and events == []
    assert sniffed(WIDE)[0] == "nvsmi" and len(sniffed(WIDE)[1]) == 1


def test_query_gpu_csv_below_its_command_line_among_other_lines() -> None:
    name = "nvsmi-query-gpu-csv-time-wrapper-2gpu-1080ti-1060-tab-timing-01.log"
    source, gpus = sniffed(name)
    assert source == "nvsmi"
    assert [(g["line"], g["product"], g["temp_gpu_c"], g["power_draw_w"], g["clock_mem_mhz"]) for g in gpus] == [
        (3, "GeForce GTX 1080 Ti", 60.0, 106.56, 5508.0), (4, "GeForce GTX 1060 6GB", 49.0, 5.68, 405.0)]  # the `time` lines are no GPUs


def test_noheader_query_gpu_csv() -> None:
    source, (gpu,) = sniffed("nvsmi-query-gpu-csv-noheader-nounits-mig-vgpu-h100l-na-clock-01.csv")
    assert (source, gpu["product"], gpu["clock_sm_mhz"]) == ("nvsmi", "NVIDIA H100L-2-24C", None)
    # fan.speed alone: nvidia-smi's, but nothing the gpus table holds
    assert sniffed("nvsmi-query-gpu-csv-noheader-nounits-single-field-na-laptop-01.log") == ("nvsmi", [])
    # the command names the columns of a noheader capture
    text = ("$ nvidia-smi --query-gpu=gpu_bus_id,temperature.gpu,clocks_throttle_reasons.hw_thermal_slowdown,"
            "ecc.errors.uncorrected.volatile.total --format=csv,noheader,nounits\n00000000:3B:00.0, 91, Active, 2\n")  # fmt: skip
    (gpu,), events = parse(text, text=True)
    assert (gpu["gpu"], gpu["temp_gpu_c"], gpu["clocks_event_reasons"], gpu["ecc_volatile_uncorrected"]) == (
        "0000:3b:00.0", 91.0, ["hw_thermal_slowdown"], 2)
    assert sorted((e["kind"], e["line"]) for e in events) == [("gpu.ecc_uncorrectable", 2), ("gpu.thermal_slowdown", 2)]
    assert parse_bytes(text.encode(), file="q.log").source == "nvsmi"


def test_query_gpu_aliases_and_bracketed_values() -> None:
    gpus, _ = parse("nvsmi-query-gpu-csv-azhpc-nospace-gpu-bus-id-nonzero-domain-retired-dbe-01.csv")
    assert [(g["gpu"], g["retired_pages_dbe"], g["retired_pages_sbe"]) for g in gpus] == [
        ("0001:00:00.0", 0, 0), ("0002:00:00.0", 0, 0), ("000a:00:00.0", 0, 0), ("000d:00:00.0", 0, 0)]
    text = ("gpu_name, gpu_serial, gpu_uuid, gpu_bus_id, power.draw.average [W], enforced.power.limit [W], "
            "retired_pages.double_bit.count, retired_pages.pending, clocks_event_reasons.active, temperature.gpu\n"
            "NVIDIA A100-SXM4-80GB, 1321, GPU-11111111-2222-3333-4444-555555555555, 00000000:07:00.0, 88.10 W, "
            "400.00 W, 2, Yes, 0x0000000000000048, [Unknown Error]\n"
            "NVIDIA A100-SXM4-80GB, 1322, [GPU is lost], 00000000:0F:00.0, [GPU is lost], [GPU is lost], "
            "[GPU is lost], [GPU is lost], [GPU is lost], [GPU is lost]\n")  # fmt: skip
    (a, b), events = parse(text, text=True)
    assert (a["product"], a["serial"], a["uuid"], a["power_draw_w"], a["power_limit_w"]) == (
        "NVIDIA A100-SXM4-80GB", "1321", "GPU-11111111-2222-3333-4444-555555555555", 88.1, 400.0)
    assert (a["retired_pages_dbe"], a["retired_pages_pending"], a["temp_gpu_c"]) == (2, True, None)
    assert a["clocks_event_reasons"] == ["hw_slowdown", "hw_thermal_slowdown"]  # from the NVML bit mask
    assert (b["gpu"], b["uuid"], b["power_draw_w"]) == ("0000:0f:00.0", None, None)
    assert [(e["kind"], e["line"], e["gpu"]) for e in events] == [
        ("gpu.retired_pages", 2, "0000:07:00.0"), ("gpu.thermal_slowdown", 2, "0000:07:00.0"),
        ("gpu.missing", 3, "0000:0f:00.0")]  # fmt: skip


TABLES = {  # sample → (GPUs, first GPU's bus id, product, temp, power draw, power cap, driver, cuda)
    "nvsmi-table-325.15-3-of-4-gtx-titan-lost-gpu-01.txt": (3, "0000:03:00.0", "GeForce GTX TITAN", 44.0, None, None, "325.15", None),
    "nvsmi-table-361.89-p100-sxm2-power8-nonzero-4digit-domain-partial-01.txt": (3, "0002:01:00.0", "Tesla P100-SXM2...", 25.0, 35.0, 300.0, "361.89", None),
    "nvsmi-table-384.111-quadro-p5000-ecc-zero-cntk-process-01.txt": (1, "0000:65:00.0", "Quadro P5000", 39.0, 42.0, 180.0, "384.111", None),
    "nvsmi-table-390.30-k80-aws-p2-python-process-01.txt": (1, "0000:00:1e.0", "Tesla K80", 45.0, 69.0, 149.0, "390.30", None),
    "nvsmi-table-418-era-err-power-usage-v100-azure-domain-fragment-01.txt": (1, "8ed0:00:00.0", "Tesla V100-PCIE...", 29.0, None, 250.0, None, None),
    "nvsmi-table-535.129.03-rtx4090-driver-container-leading-space-partial-01.txt": (1, "0000:01:00.0", "NVIDIA GeForce RTX 4090", 45.0, 37.0, 480.0, "535.129.03", "12.2"),
    "nvsmi-table-536.40-windows-tcc-wddm-header-gtx1060-partial-01.txt": (1, "0000:01:00.0", "NVIDIA GeForce GTX 1060 3GB", None, None, None, "536.40", "12.2"),
    "nvsmi-table-550.127.05-a10-no-running-processes-gpud-mock-01.txt": (1, "0000:06:00.0", "NVIDIA A10", 32.0, 21.0, 150.0, "550.127.05", "12.4"),
    "nvsmi-table-550.90.07-8x-h100-hbm3-healthy-no-trailing-newline-01.txt": (8, "0000:19:00.0", "NVIDIA H100 80GB HBM3", 27.0, 72.0, 700.0, "550.90.07", "12.4"),
    "nvsmi-table-555.85-windows-tcc-driver-model-column-l40s-partial-01.txt": (1, "0000:61:00.0", "NVIDIA L40S", 17.0, 21.0, 350.0, "555.85", "12.5"),
    "nvsmi-table-570.86.16-in-container-root-prompt-rtx2080-truncated-name-01.txt": (1, "0000:01:00.0", "NVIDIA GeForce RTX 2080 ...", 36.0, 16.0, 250.0, "570.86.16", "12.8"),
    "nvsmi-table-580.95.05-b200-1000w-cap-partial-01.txt": (1, "0000:05:00.0", "NVIDIA B200", 33.0, 192.0, 1000.0, "580.95.05", "13.0"),
}  # fmt: skip


@pytest.mark.parametrize(("name", "expect"), TABLES.items(), ids=[n.split("-")[2] for n in TABLES])
def test_plain_table_of_every_layout(name: str, expect: tuple[Any, ...]) -> None:
    source, gpus = sniffed(name)
    g = gpus[0]
    assert source == "nvsmi"
    assert (len(gpus), g["gpu"], g["product"], g["temp_gpu_c"], g["power_draw_w"], g["power_limit_w"], g["driver"], g["cuda"]) == expect
    assert not parse(name)[1]  # healthy tables (a transient ERR! power reading included) give no event


def test_plain_table_err_row_is_a_gpu_nvidia_smi_cannot_read() -> None:
    (dead, alive), events = parse("nvsmi-table-525.125.06-a40-err-row-gpu-operator-partial-01.txt")
    assert (dead["gpu"], dead["product"], dead["temp_gpu_c"], dead["ecc_volatile_uncorrected"]) == ("0000:19:00.0", None, None, None)
    assert (alive["gpu"], alive["product"], alive["temp_gpu_c"], alive["power_draw_w"], alive["power_limit_w"]) == (
        "0000:1a:00.0", "NVIDIA A40", 26.0, 12.0, 300.0)
    assert dead["ts"].isoformat() == "2023-07-28T08:01:28+00:00"
    ((kind, severity, gpu, line),) = [(e["kind"], e["severity"], e["gpu"], e["line"]) for e in events]
    assert (kind, severity, gpu, line) == ("gpu.missing", "critical", "0000:19:00.0", 10)


def test_610_deprecated_version_suffix_and_ceiling_power_limit() -> None:
    (gpu,), _ = parse("nvsmi-q-610.43.02-h200-mig-kmd-version-deprecated-suffix-specification-keys-01.txt")
    assert (gpu["driver"], gpu["cuda"], gpu["power_limit_w"], gpu["power_draw_w"]) == ("610.43.02", "13.3", 700.0, 130.28)
    # "Memory Max Operating T.Limit Temp Specification: 0 C" (no space before the colon) breaks nothing
    assert gpu["temp_memory_c"] == 39.0


def test_old_gpu_temperature_key() -> None:
    for name, temp in (("nvsmi-q-d-temperature-325.15-9400m-36col-gpu-key-01.txt", 39.0),
                       ("nvsmi-q-d-temperature-304.108-old-4digit-domain-busid-01.txt", 49.0)):  # fmt: skip
        (gpu,), _ = parse(name)
        assert gpu["temp_gpu_c"] == temp


def test_xml_cuda_not_found_and_vgpu_scalar_throttle_reasons_are_unknown() -> None:
    (gpu,), _ = parse("nvsmi-q-x-430.26-v10-dtd-k80-azure-cuda-not-found-retired-no-timestamp-partial-01.xml")
    assert (gpu["driver"], gpu["cuda"]) == ("430.26", None)
    (gpu,), _ = parse("nvsmi-q-x-513.46-v11-dtd-grid-p4-1q-vgpu-guest-throttle-na-scalar-01.xml")
    assert gpu["clocks_event_reasons"] is None  # <clocks_throttle_reasons>N/A</...>: unknown, not "none active"


@pytest.mark.parametrize(("name", "line", "kind", "gpu"), [
    ("nvsmi-error-couldnt-communicate-with-driver-unattended-upgrade-01.log", 2, "gpu.driver", None),
    ("nvsmi-error-couldnt-communicate-two-lines-curly-apostrophe-dkms-01.log", 1, "gpu.driver", None),
    ("nvsmi-error-couldnt-communicate-markdown-quote-wrapped-01.log", 1, "gpu.driver", None),
    ("nvsmi-error-windows-unable-to-detect-device-handle-a10-gpu-pv-01.log", 1, "gpu.missing", "0000:b1:00.0"),
])  # fmt: skip
def test_nvidia_smi_failure_lines(name: str, line: int, kind: str, gpu: str | None) -> None:
    parsed = parse_bytes((GOLDEN / "nvsmi" / name).read_bytes(), file=name)
    ((got_line, got_kind, severity, got_gpu),) = [(e["line"], e["kind"], e["severity"], e["gpu"]) for e in parsed.events.to_pylist()]
    assert (parsed.source, got_line, got_kind, severity, got_gpu) == ("nvsmi", line, kind, "critical", gpu)


def test_nvml_failure_stays_torchs_unless_the_file_is_nvidia_smis() -> None:
    name = "nvsmi-error-nvml-version-mismatch-nvml-library-version-570-01.log"
    assert parse_bytes((GOLDEN / "nvsmi" / name).read_bytes(), file=name).source == "torch"
    (event,) = parse(name)[1]  # read as nvidia-smi's: the same kind and detail as torch gives, with the version
    assert (event["kind"], event["line"], event["detail"]) == (
        "cuda.error", 2, {"error": "Failed to initialize NVML: Driver/library version mismatch", "traceback": False,
                          "nvml_version": "570.124"})  # fmt: skip


TEXT_DUMP = """
==============NVSMI LOG==============

Timestamp                                 : Tue Mar  5 10:00:00 2024
Driver Version                            : 550.54.15
CUDA Version                              : 12.4

Attached GPUs                             : 1
GPU 00000000:3B:00.0
    Product Name                          : NVIDIA H100 80GB HBM3
    Serial Number                         : 1650000000001
    GPU UUID                              : GPU-00000000-1111-2222-3333-444444444444
    Minor Number                          : 3
    VBIOS Version                         : 96.00.74.00.0D
    GPU Reset Status
        Reset Required                    : Yes
        Drain and Reset Recommended       : No
    PCI
        Bus Id                            : 00000000:3B:00.0
        GPU Link Info
            PCIe Generation
                Max                       : 5
                Current                   : 5
            Link Width
                Max                       : 16x
                Current                   : 8x
        Replays Since Reset               : 12
        Replay Number Rollovers           : 0
    Clocks Event Reasons
        Idle                              : Not Active
        HW Slowdown                       : Active
            HW Thermal Slowdown           : Active
            HW Power Brake Slowdown       : Not Active
        SW Thermal Slowdown               : Not Active
    ECC Errors
        Volatile
            SRAM Correctable              : 1
            SRAM Uncorrectable Parity     : 0
            SRAM Uncorrectable SEC-DED    : 0
            DRAM Correctable              : 2
            DRAM Uncorrectable            : 3
        Aggregate
            SRAM Correctable              : 10
            SRAM Uncorrectable Parity     : 0
            SRAM Uncorrectable SEC-DED    : 0
            DRAM Correctable              : 20
            DRAM Uncorrectable            : 3
    Remapped Rows
        Correctable Error                 : 0
        Uncorrectable Error               : 3
        Pending                           : Yes
        Remapping Failure Occurred        : Yes
    Temperature
        GPU Current Temp                  : 88 C
        Memory Current Temp               : 95 C
    GPU Power Readings
        Power Draw                        : 690.12 W
        Current Power Limit               : 700.00 W
    Clocks
        SM                                : 1410 MHz
        Memory                            : 2619 MHz
"""

XML_DUMP = """<?xml version="1.0" ?>
<nvidia_smi_log>
	<timestamp>Tue Mar  5 10:00:00 2024</timestamp>
	<driver_version>550.54.15</driver_version>
	<cuda_version>12.4</cuda_version>
	<attached_gpus>1</attached_gpus>
	<gpu id="00000000:3B:00.0">
		<product_name>NVIDIA H100 80GB HBM3</product_name>
		<serial>1650000000001</serial>
		<uuid>GPU-00000000-1111-2222-3333-444444444444</uuid>
		<minor_number>3</minor_number>
		<vbios_version>96.00.74.00.0D</vbios_version>
		<gpu_reset_status>
			<reset_required>Yes</reset_required>
			<drain_and_reset_recommended>No</drain_and_reset_recommended>
		</gpu_reset_status>
		<pci>
			<pci_bus_id>00000000:3B:00.0</pci_bus_id>
			<pci_gpu_link_info>
				<pcie_gen><max_link_gen>5</max_link_gen><current_link_gen>5</current_link_gen></pcie_gen>
				<link_widths><max_link_width>16x</max_link_width><current_link_width>8x</current_link_width></link_widths>
			</pci_gpu_link_info>
			<replay_counter>12</replay_counter>
			<replay_rollover_counter>0</replay_rollover_counter>
		</pci>
		<clocks_event_reasons>
			<clocks_event_reason_gpu_idle>Not Active</clocks_event_reason_gpu_idle>
			<clocks_event_reason_hw_slowdown>Active</clocks_event_reason_hw_slowdown>
			<clocks_event_reason_hw_thermal_slowdown>Active</clocks_event_reason_hw_thermal_slowdown>
			<clocks_event_reason_hw_power_brake_slowdown>Not Active</clocks_event_reason_hw_power_brake_slowdown>
			<clocks_event_reason_sw_thermal_slowdown>Not Active</clocks_event_reason_sw_thermal_slowdown>
		</clocks_event_reasons>
		<ecc_errors>
			<volatile><sram_correctable>1</sram_correctable><sram_uncorrectable_parity>0</sram_uncorrectable_parity><sram_uncorrectable_secded>0</sram_uncorrectable_secded><dram_correctable>2</dram_correctable><dram_uncorrectable>3</dram_uncorrectable></volatile>
			<aggregate><sram_correctable>10</sram_correctable><sram_uncorrectable_parity>0</sram_uncorrectable_parity><sram_uncorrectable_secded>0</sram_uncorrectable_secded><dram_correctable>20</dram_correctable><dram_uncorrectable>3</dram_uncorrectable></aggregate>
		</ecc_errors>
		<remapped_rows>
			<remapped_row_corr>0</remapped_row_corr>
			<remapped_row_unc>3</remapped_row_unc>
			<remapped_row_pending>Yes</remapped_row_pending>
			<remapped_row_failure>Yes</remapped_row_failure>
		</remapped_rows>
		<temperature><gpu_temp>88 C</gpu_temp><memory_temp>95 C</memory_temp></temperature>
		<gpu_power_readings><power_draw>690.12 W</power_draw><current_power_limit>700.00 W</current_power_limit></gpu_power_readings>
		<clocks><sm_clock>1410 MHz</sm_clock><mem_clock>2619 MHz</mem_clock></clocks>
	</gpu>
</nvidia_smi_log>
"""


def test_text_and_xml_of_the_same_gpu_agree_on_every_shared_field() -> None:
    (text_gpu,), text_events = parse(TEXT_DUMP, text=True)
    (xml_gpu,), xml_events = parse(XML_DUMP, text=True)
    shared = [n for n in GPUS.names if n not in ("line", "file")]
    assert {n: text_gpu[n] for n in shared} == {n: xml_gpu[n] for n in shared}
    assert text_gpu["ecc_volatile_uncorrected"] == 3 and text_gpu["ecc_aggregate_corrected"] == 30
    assert text_gpu["clocks_event_reasons"] == ["hw_slowdown", "hw_thermal_slowdown"]
    kinds = ["gpu.ecc_uncorrectable", "gpu.remap_pending", "gpu.remap_failure", "gpu.pcie_degraded",
             "gpu.pcie_replays", "gpu.thermal_slowdown", "gpu.reset_required"]  # fmt: skip
    assert sorted(e["kind"] for e in text_events) == sorted(kinds)
    assert sorted(e["kind"] for e in xml_events) == sorted(kinds)
    ecc = next(e for e in text_events if e["kind"] == "gpu.ecc_uncorrectable")
    assert (ecc["code"], ecc["severity"], ecc["gpu"]) == (3, "critical", "0000:3b:00.0")


def test_missing_gpus_and_several_dumps() -> None:
    text = TEXT_DUMP + TEXT_DUMP.replace("10:00:00", "10:05:00") + "Unable to determine the device handle for GPU0000:A1:00.0: Unknown Error\n"
    gpus, events = parse(text, text=True)
    assert [g["ts"].isoformat() for g in gpus] == ["2024-03-05T10:00:00+00:00", "2024-03-05T10:05:00+00:00"]
    (missing,) = [e for e in events if e["kind"] == "gpu.missing"]
    assert (missing["gpu"], missing["severity"]) == ("0000:a1:00.0", "critical")
    assert parse("No devices were found\n", text=True)[1][0]["kind"] == "gpu.missing"


def test_ragged_indentation_still_parses() -> None:
    ragged = TEXT_DUMP.replace("            PCIe Generation", "           PCIe Generation")
    (gpu,), _ = parse(ragged, text=True)
    assert gpu["serial"] == "1650000000001"


def test_not_a_dump_is_an_unparsed_row() -> None:
    parsed = parse_bytes(b"GPU 0000:01:00.0\n\tweird\n  : : :\n", file="x", source="nvsmi")
    assert parsed.events.num_rows >= 0 and parsed.files.num_rows == 1


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


HEADS = ["", "==============NVSMI LOG==============\n\nGPU 00000000:3B:00.0\n", "<?xml version=\"1.0\" ?>\n<nvidia_smi_log>\n<gpu id=\"x\">",
         "timestamp, name, pci.bus_id, temperature.gpu, clocks_event_reasons.active\n",
         "$ nvidia-smi --query-gpu=name,uuid --format=csv,noheader\n",
         "| NVIDIA-SMI 550.1   Driver Version: 550.1  CUDA Version: 12.4 |\n|   0  X  On  | 00000000:01:00.0 Off | ERR! |\n"]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list(" \t:\n-abcGPU0123456789.=<>/x,|[]\"\r")), max_size=400), st.sampled_from(HEADS))
def test_any_text_after_a_dump_header_never_raises(body: str, head: str) -> None:
    parsed = parse_bytes((head + body).encode(), file="x", source="nvsmi")
    assert parsed.files.num_rows == 1 and parsed.gpus.schema == GPUS


def test_cli_prints_the_gpus_table(tmp_path) -> None:
    from click.testing import CliRunner

    from forensics.cli import main

    path = tmp_path / "nvsmi.txt"
    path.write_text(TEXT_DUMP)
    result = CliRunner().invoke(main, ["parse", "--table", "gpus", "--format", "jsonl", str(path)])
    assert result.exit_code == 0
    row = json.loads(result.stdout)
    assert (row["gpu"], row["serial"], row["ts"], row["clocks_event_reasons"]) == (
        "0000:3b:00.0", "1650000000001", "2024-03-05T10:00:00.000000Z", ["hw_slowdown", "hw_thermal_slowdown"])
    result = CliRunner().invoke(main, ["parse", "--table", "gpus", str(path)])
    assert result.exit_code == 1 and result.stderr == "Error: --table gpus prints as jsonl, csv or parquet\n"
