"""The five Arrow schemas every part of gpu-forensics reads and writes, and the event vocabulary.

The column names, order and types are the contract in DESIGN.md ("Tables"); a test compares them.

>>> from forensics.schema import EVENTS
>>> EVENTS.names[:4]
['incident', 'host', 'source', 'file']
"""

from __future__ import annotations

import pyarrow as pa

TS = pa.timestamp("us", tz="UTC")

EVENTS = pa.schema(
    [
        pa.field("incident", pa.string(), nullable=False),
        pa.field("host", pa.string()),
        pa.field("source", pa.string(), nullable=False),
        pa.field("file", pa.string(), nullable=False),
        pa.field("line", pa.int64(), nullable=False),
        pa.field("ts", TS),
        pa.field("uptime_s", pa.float64()),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("severity", pa.string(), nullable=False),
        pa.field("gpu", pa.string()),
        pa.field("rank", pa.int32()),
        pa.field("pid", pa.int64()),
        pa.field("code", pa.int64()),
        pa.field("message", pa.string(), nullable=False),
        pa.field("detail", pa.string(), nullable=False),
    ]
)

GPUS = pa.schema(
    [
        pa.field("incident", pa.string(), nullable=False),
        pa.field("host", pa.string()),
        pa.field("file", pa.string(), nullable=False),
        pa.field("line", pa.int64(), nullable=False),
        pa.field("ts", TS),
        # identity
        pa.field("gpu", pa.string()),
        pa.field("uuid", pa.string()),
        pa.field("serial", pa.string()),
        pa.field("product", pa.string()),
        pa.field("minor", pa.int32()),
        pa.field("driver", pa.string()),
        pa.field("cuda", pa.string()),
        pa.field("vbios", pa.string()),
        # PCIe link
        pa.field("pcie_gen_current", pa.int32()),
        pa.field("pcie_gen_max", pa.int32()),
        pa.field("pcie_width_current", pa.int32()),
        pa.field("pcie_width_max", pa.int32()),
        pa.field("pcie_replays", pa.int64()),
        pa.field("pcie_replay_rollovers", pa.int64()),
        # ECC
        pa.field("ecc_volatile_corrected", pa.int64()),
        pa.field("ecc_volatile_uncorrected", pa.int64()),
        pa.field("ecc_aggregate_corrected", pa.int64()),
        pa.field("ecc_aggregate_uncorrected", pa.int64()),
        pa.field("retired_pages_sbe", pa.int64()),
        pa.field("retired_pages_dbe", pa.int64()),
        pa.field("retired_pages_pending", pa.bool_()),
        pa.field("remapped_rows_correctable", pa.int64()),
        pa.field("remapped_rows_uncorrectable", pa.int64()),
        pa.field("remapped_rows_pending", pa.bool_()),
        pa.field("remapped_rows_failure", pa.bool_()),
        # thermals, power, clocks
        pa.field("temp_gpu_c", pa.float64()),
        pa.field("temp_memory_c", pa.float64()),
        pa.field("power_draw_w", pa.float64()),
        pa.field("power_limit_w", pa.float64()),
        pa.field("clock_sm_mhz", pa.float64()),
        pa.field("clock_mem_mhz", pa.float64()),
        pa.field("clocks_event_reasons", pa.list_(pa.string())),
        pa.field("reset_required", pa.bool_()),
        pa.field("drain_and_reset_recommended", pa.bool_()),
        # added (issue 35): the NVLink fabric registration of `nvidia-smi -q`'s Fabric block, as printed
        pa.field("fabric_state", pa.string()),
        pa.field("fabric_status", pa.string()),
        pa.field("fabric_clique_id", pa.int64()),
        pa.field("fabric_cluster_uuid", pa.string()),
        pa.field("fabric_health_summary", pa.string()),
        pa.field("fabric_health", pa.list_(pa.string())),
    ]
)

METRICS = pa.schema(
    [
        pa.field("incident", pa.string(), nullable=False),
        pa.field("host", pa.string()),
        pa.field("rank", pa.int32()),
        pa.field("file", pa.string(), nullable=False),
        pa.field("line", pa.int64(), nullable=False),
        pa.field("ts", TS),
        pa.field("step", pa.int64()),
        pa.field("name", pa.string(), nullable=False),
        pa.field("value", pa.float64()),
    ]
)

FILES = pa.schema(
    [
        pa.field("incident", pa.string(), nullable=False),
        pa.field("file", pa.string(), nullable=False),
        pa.field("source", pa.string()),
        pa.field("bytes", pa.int64(), nullable=False),
        pa.field("lines", pa.int64(), nullable=False),
        pa.field("records", pa.int64(), nullable=False),
        pa.field("unparsed", pa.int64(), nullable=False),
        pa.field("error", pa.string()),
        # added: the host the file was attributed to (ingest), and how sure sniffing was of its source
        pa.field("host", pa.string()),
        pa.field("confidence", pa.float64()),
        # added: the families whose records the file holds (the `source` of its rows, sorted, comma-separated)
        pa.field("families", pa.string()),
    ]
)

#: added: one row per GPU per host of an incident, every spelling of its identity (see forensics.ingest.align)
IDENTITIES = pa.schema(
    [
        pa.field("incident", pa.string(), nullable=False),
        pa.field("host", pa.string()),
        pa.field("gpu", pa.string()),
        pa.field("uuid", pa.string()),
        pa.field("serial", pa.string()),
        pa.field("minor", pa.int32()),
        pa.field("product", pa.string()),
        pa.field("ranks", pa.list_(pa.int32())),
        pa.field("learnt_from", pa.list_(pa.string())),
    ]
)

#: added (issue 34): one row per reading of a telemetry series or snapshot (BMC sensors, nvidia-smi dmon and
#: query loops, DCGM, fabric and NIC counters, lspci, iostat, SMART). Counters keep raw values; rates are a query.
SAMPLES = pa.schema(
    [
        pa.field("incident", pa.string(), nullable=False),
        pa.field("host", pa.string()),
        pa.field("source", pa.string(), nullable=False),
        pa.field("file", pa.string(), nullable=False),
        pa.field("line", pa.int64(), nullable=False),
        pa.field("ts", TS),
        pa.field("gpu", pa.string()),
        pa.field("device", pa.string()),
        pa.field("metric", pa.string(), nullable=False),
        pa.field("value", pa.float64()),
        pa.field("unit", pa.string()),
    ]
)

#: The ``samples.metric`` vocabulary (DESIGN.md "samples"). Extend it, never rename it: derived events,
#: rules and notebooks match on these strings. Units are fixed by the name (``_c``, ``_w``, ``_mhz``, ``_pct``…);
#: a counter keeps its raw value (rates are a query).
SAMPLE_METRICS: frozenset[str] = frozenset(
    {
        # GPU thermals, power, clocks, utilization (nvidia-smi dmon and --query-gpu loops, DCGM)
        "temperature_c", "memory_temperature_c", "power_w", "power_limit_w", "energy_j",
        "sm_clock_mhz", "mem_clock_mhz", "sm_util_pct", "mem_util_pct", "enc_util_pct", "dec_util_pct",
        "fb_used_mib", "fb_free_mib", "fan_pct",
        # GPU throttling: the clocks-event-reasons bit mask, and dmon's power/thermal violation times
        "throttle_reasons", "power_violation_pct", "thermal_violation",
        # GPU PCIe link and errors (counters)
        "pcie_gen", "pcie_width", "pcie_gen_max", "pcie_width_max", "pcie_replays",
        "pcie_rx_mbps", "pcie_tx_mbps",
        "ecc_sbe", "ecc_dbe", "retired_pages", "remapped_rows",
        "xid",  # DCGM's last Xid (the error code as a value)
        # BMC sensors (ipmitool sensor/sdr, ipmi-sensors): the reading by what it measures
        "fan_rpm", "voltage_v", "current_a",
        # fabric and NIC counters (ibstat, perfquery, ethtool -S, ip -s link)
        "link_state", "link_rate_gbps", "symbol_errors", "link_downed", "link_error_recovery",
        "port_rcv_errors", "port_xmit_discards", "xmit_discards", "port_rcv_remote_physical_errors",
        "local_link_integrity_errors", "excessive_buffer_overrun_errors", "port_xmit_wait",
        "rx_bytes", "tx_bytes", "rx_packets", "tx_packets", "rx_errors", "tx_errors", "rx_drops", "tx_drops",
        # host I/O (iostat -x, sar -n DEV/EDEV) and disks (smartctl, nvme smart-log)
        "await_ms", "r_await_ms", "w_await_ms", "util_pct", "queue_size", "read_kbps", "write_kbps",
        "reallocated_sectors", "pending_sectors", "uncorrectable_sectors", "media_errors", "percentage_used",
        "available_spare_pct", "power_on_hours",
        # the lspci, ibcounters, nicstats, dcgm and disks sources (issue 34): their counters as each tool names them
        "carrier", "collisions", "collisions_per_s", "crc_errors", "critical_warning", "ecc_dbe_aggregate",
        "ecc_sbe_aggregate", "energy_mj", "error_log_entries", "if_util_pct", "link_down_events",
        "offline_uncorrectable", "phys_state", "port_rcv_constraint_errors", "port_rcv_switch_relay_errors",
        "port_xmit_constraint_errors", "power_limit_enforced_w", "pstate", "qp1_dropped", "rate_gbps", "rcv_data",
        "rcv_packets", "reads_per_s", "remap_failure", "remap_pending", "remapped_rows_correctable",
        "remapped_rows_uncorrectable", "reported_uncorrect", "retired_pages_dbe", "retired_pages_pending",
        "retired_pages_sbe", "rx_crc_errors", "rx_discards", "rx_drops_per_s", "rx_errors_per_s", "rx_fifo_errors",
        "rx_fifo_errors_per_s", "rx_frame_errors", "rx_frame_errors_per_s", "rx_kb_per_s", "rx_length_errors",
        "rx_missed", "rx_out_of_buffer", "rx_overruns", "rx_packets_per_s", "rx_symbol_errors",
        "shutdown_temperature_c", "slowdown_temperature_c", "svctm_ms", "tx_aborted_errors", "tx_carrier_errors",
        "tx_carrier_errors_per_s", "tx_discards", "tx_drops_per_s", "tx_errors_per_s", "tx_fifo_errors",
        "tx_fifo_errors_per_s", "tx_heartbeat_errors", "tx_kb_per_s", "tx_packets_per_s", "tx_transitions",
        "tx_window_errors", "unsafe_shutdowns", "vl15_dropped", "writes_per_s", "xid_last", "xmit_data",
        "xmit_packets", "xmit_wait",
        # added (issue 35): df, one reading per mount (device = the mount point)
        "fs_avail_bytes", "fs_ifree", "fs_inodes", "fs_iuse_pct", "fs_iused", "fs_size_bytes", "fs_use_pct",
        "fs_used_bytes",
    }
)  # fmt: skip

INCIDENTS = pa.schema(
    [
        pa.field("incident", pa.string(), nullable=False),
        pa.field("hosts", pa.list_(pa.string())),
        pa.field("first_ts", TS),
        pa.field("last_ts", TS),
        pa.field("labels", pa.string()),  # JSON object from incident.toml
        # added: where the incident was read from, and the digest of its content (ingest skips unchanged ones)
        pa.field("path", pa.string()),
        pa.field("digest", pa.string()),
        pa.field("fingerprint", pa.string()),  # sizes and mtimes of its files: unchanged ones are not reread
    ]
)

#: One row per incident: its diagnosis (forensics.mine.diagnose), written by ``forensics diagnose`` (and by
#: every reader of ``open_dataset(...).diagnoses()``), one file per incident like the tables above but not
#: written by ingest. ``digest`` is the incident's content digest and ``rules`` the fingerprint of the rule
#: library and diagnosis code that gave the row: a row whose either differs is stale and never served.
EVIDENCE = pa.struct([
    pa.field("file", pa.string()), pa.field("line", pa.int64()), pa.field("ts", TS), pa.field("host", pa.string()),
    pa.field("kind", pa.string()), pa.field("code", pa.int64()), pa.field("role", pa.string()),
    pa.field("message", pa.string()), pa.field("copies", pa.list_(pa.string())),
])  # fmt: skip
DIAGNOSES = pa.schema(
    [
        pa.field("incident", pa.string(), nullable=False),
        pa.field("root_cause", pa.string(), nullable=False),
        pa.field("confidence", pa.float64(), nullable=False),
        pa.field("rule", pa.string()),
        pa.field("first_host", pa.string()),
        pa.field("first_rank", pa.int32()),
        pa.field("first_gpu", pa.string()),
        pa.field("first_ts", TS),
        pa.field("evidence", pa.list_(EVIDENCE)),
        pa.field("alternatives", pa.list_(pa.struct([pa.field("root_cause", pa.string()),
                                                     pa.field("score", pa.float64()), pa.field("rule", pa.string())]))),
        pa.field("caveats", pa.list_(pa.string())),
        pa.field("digest", pa.string(), nullable=False),
        pa.field("rules", pa.string(), nullable=False),
    ]
)  # fmt: skip

TABLES: dict[str, pa.Schema] = {
    "events": EVENTS,
    "gpus": GPUS,
    "metrics": METRICS,
    "files": FILES,
    "incidents": INCIDENTS,
    "identities": IDENTITIES,
    "samples": SAMPLES,  # added (issue 34)
}

SEVERITIES = ("debug", "info", "notice", "warning", "error", "critical")

#: The event vocabulary of DESIGN.md plus the kinds this project added (marked "added").
#: Extend it, never rename it: rules, tests and users match on these strings.
KINDS: frozenset[str] = frozenset(
    {
        "gpu.xid", "gpu.sxid", "gpu.off_bus", "gpu.driver",
        "pcie.aer", "pcie.link",
        "net.nic", "net.link",
        "host.mce", "host.edac", "host.oom_kill", "host.hung_task", "host.soft_lockup",
        "host.panic", "host.segfault", "host.cpu_throttle", "host.boot",
        "host.oops", "host.warning",  # added: kernel Oops/BUG and WARNING splats
        "disk.io_error", "disk.nvme", "fs.error", "fs.readonly",
        "nccl.version", "nccl.init", "nccl.warn", "nccl.net_error", "nccl.error_chain",
        # added (NCCL): comm aborted, proxy connection closed by a local rank, RAS report sections
        "nccl.abort", "nccl.conn_closed", "nccl.ras",
        "torch.watchdog_timeout", "torch.heartbeat_timeout", "torch.nccl_error",
        "torch.watchdog_progress",  # added: "last enqueued / last completed NCCL work"
        "torch.collective_mismatch",  # added: TORCH_DISTRIBUTED_DEBUG's "Detected mismatch between collectives"
        "nccl.coll_mismatch",  # added: derived by diagnosis: the ranks' COLL lines or watchdog timeouts disagree
        "job.killed",  # added: a worker or rank killed by a signal it did not send itself (SIGKILL)
        "cuda.illegal_address", "cuda.device_assert", "cuda.launch_failure", "cuda.ecc",
        "cuda.oom", "cuda.error",
        "py.exception", "job.child_failed", "job.exit",
        # added: traceback frames without their exception line; C++ terminate and frame stacks;
        # the head of a torchrun ChildFailedError report
        "py.traceback", "cpp.abort", "cpp.stack", "job.report",
        "train.loss_nonfinite", "train.grad_nonfinite", "train.overflow", "train.stall",
        "train.step",  # added: a trainer's step line (its values are in the metrics table)
        "train.loss_spike",  # added: a finite loss ≥ 1.5× the median of the stream's 20 losses before it
        "gpu.ecc_uncorrectable", "gpu.remap_pending", "gpu.remap_failure", "gpu.retired_pages",
        "gpu.pcie_degraded", "gpu.pcie_replays", "gpu.thermal_slowdown", "gpu.power_slowdown",
        "gpu.missing", "gpu.reset_required",
        "gpu.diag_fail", "gpu.health",  # added (issue 34): a failed dcgmi diag test, a dcgmi health finding
        "disk.smart",  # added (issue 34): smartctl / nvme smart-log health FAILED or critical counters non-zero
        "svc.failed",
        # added (journal services): fabric manager, kubelet, container runtime, device plugin, persistenced
        "svc.fabricmanager", "svc.kubelet", "svc.container_runtime", "svc.device_plugin", "svc.persistenced",
        "svc.slurm", "svc.dcgm",  # added (journal services): Slurm's daemons, DCGM's host engine
        # added (message catalogs, forensics/data/messages/pytorch.toml): a line the sources call `other` or
        # a bare traceback takes these kinds in the diagnosis when PyTorch's catalog reads it
        "torch.store_error", "torch.rendezvous_error", "torch.gloo_error", "torch.dataloader_error", "torch.shm_error",
        # added (message catalogs: ipmi.toml, vendor.toml, linux_thermal.toml): what a BMC's event log, a
        # vendor's health tool or the kernel's thermal code says, by the part it names (issue 34's vocabulary)
        "bmc.psu", "bmc.power", "bmc.thermal", "bmc.fan", "bmc.memory", "bmc.pcie", "bmc.cpu", "bmc.drive", "bmc.event",
        "host.thermal",
        "bmc.gpu",  # added (issue 34, sources/sel.py): a BMC record about a GPU (a sensor named for one)
        # added (issue 34, data/telemetry_rules.toml): derived from a GPU's series
        "gpu.temp_rise", "gpu.power_drop", "gpu.util_drop",
        # added (issue 34, data/telemetry_rules.toml): a disk saturated (iostat), NIC or InfiniBand error counters growing
        "disk.await_high", "net.errors_rising",
        # added (issue 35): a thread's stack and a fatal signal in a dump (sources/stacks.py), a full file
        # system (df), the NVLink fabric state of nvidia-smi -q
        "proc.stack", "proc.signal", "fs.full", "gpu.fabric",
        # added (issue 35, forensics/versions.py): versions that cannot work together on a host, derived by
        # the diagnosis from the versions the logs state
        "env.version_conflict",
        "other", "unparsed",
    }
)  # fmt: skip
