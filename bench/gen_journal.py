"""A large ``journalctl -o json`` export for the benchmarks, written in a stream, deterministic for a seed.

Entries mix kernel-transport lines drawn from bench/gen_kernel.py (families included) with service lines
(kubelet, containerd, systemd, sshd) and boot changes.

    python bench/gen_journal.py OUT --mb 2048 [--seed 1]
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from gen_common import generator_main
from gen_kernel import generate

SERVICES = [
    ("kubelet", "I0115 10:00:00.{n:06d}    1679 reflector.go:256] watch of *v1.Pod ended with: too old resource version: {n}"),
    ("containerd", 'time="2024-01-15T10:00:00.{n:06d}Z" level=info msg="shim disconnected" id={n:x}'),
    ("systemd", "Started Session {n} of User root."),
    ("sshd", "Accepted publickey for root from 10.0.{a}.{b} port {n} ssh2"),
]


def write(out: Path, megabytes: int, *, seed: int = 1) -> None:
    r = random.Random(seed)
    kernel_lines = [line.split("] ", 1)[1] for line in generate(50_000, seed=seed).decode().splitlines()]
    target = megabytes * 1024 * 1024
    written, n, boot = 0, 0, 0
    with out.open("w", encoding="utf-8") as f:
        while written < target:
            lines = []
            for _ in range(10_000):
                n += 1
                if r.random() < 1e-5:
                    boot += 1
                entry = {"__REALTIME_TIMESTAMP": str(1705312800000000 + n * 1000), "__MONOTONIC_TIMESTAMP": str(n * 1000),
                         "_BOOT_ID": f"{boot:032x}", "_HOSTNAME": "gpu-node-07", "PRIORITY": "6"}  # fmt: skip
                if r.random() < 0.4:
                    entry.update(_TRANSPORT="kernel", SYSLOG_IDENTIFIER="kernel", MESSAGE=kernel_lines[n % len(kernel_lines)])
                else:
                    ident, template = r.choice(SERVICES)
                    entry.update(SYSLOG_IDENTIFIER=ident, _PID=str(r.randint(1, 99999)),
                                 MESSAGE=template.format(n=n, a=r.randint(0, 255), b=r.randint(1, 254)))  # fmt: skip
                lines.append(json.dumps(entry, separators=(",", ":")))
            chunk = "\n".join(lines) + "\n"
            f.write(chunk)
            written += len(chunk)


def main() -> None:
    generator_main(__doc__, "mb", 2048, lambda out, n, seed: write(out, n, seed=seed))


if __name__ == "__main__":
    main()
