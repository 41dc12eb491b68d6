"""The simulated fleet: hosts with eight GPUs each, their identities, and the planted repeat offenders.

Every GPU is a *card* (serial, UUID) in a *slot* (host, PCI bus id). Identities stay consistent across
everything the generator writes for an incident (NVRM lines, ``nvidia-smi -q``, NCCL init lines), and
the fleet changes over time the way a real one does: a card that failed is swapped out, and the
planted lemon card is moved to another slot (the "RMA came back no fault found" story), so that
repeat-offender analysis must follow the card, not the slot.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

#: Bus ids of the eight GPUs of an HGX H100 board, and the NIC each GPU pairs with.
GPU_BUSES = ("18", "2a", "3a", "5d", "9a", "ab", "ba", "db")
NIC_BUSES = ("0c", "26", "3c", "4d", "8c", "a6", "bc", "cc")
PRODUCT = "NVIDIA H100 80GB HBM3"
DEVICE_ID = "10de:2330"

LEMON_KINDS = ("card", "slot", "node")


#: The PCI domains of hosts whose GPUs are not in domain 0 (VMs that pass GPUs through on a domain
#: of their own, Grace systems with a domain per socket): PROVENANCE's ``PCI:0001:6c:00``, ``PCI:0019:01:00``.
DOMAINS = ("0001", "0019")
DOMAIN_SHARE = 0.08
#: Shares of hosts named by an address (``10-90-43-152``) or as a Kubernetes pod
#: (``job-<uuid>-worker-0``, archived per pod) instead of ``gpu-node-NNN``.
ADDRESS_NAME_SHARE = 0.06
POD_NAME_SHARE = 0.04


def bdf(pci: str) -> str:
    """``0000:18:00.0``: the GPU's PCI address (``pci`` is ``domain:bus``) as the kernel prints it."""
    return f"{pci}:00.0"


def port_of(pci: str) -> str:
    """The PCIe switch downstream port above a GPU (the AER reporter), in the GPU's domain."""
    domain, bus = pci.split(":")
    return f"{domain}:{int(bus, 16) - 1:02x}:00.0"


def host_name(rng: random.Random, n: int) -> str:
    """Most hosts are ``gpu-node-NNN``; some are named by their address or as a pod."""
    roll = rng.random()
    if roll < ADDRESS_NAME_SHARE:
        return f"10-{rng.randrange(16, 120)}-{rng.randrange(256)}-{rng.randrange(1, 255)}"
    if roll < ADDRESS_NAME_SHARE + POD_NAME_SHARE:
        h = f"{rng.getrandbits(128):032x}"
        return f"job-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}-worker-{n % 4}"
    return f"gpu-node-{n:03d}"


@dataclass
class Card:
    serial: str
    uuid: str


@dataclass
class Fleet:
    """``hosts`` names, each with its eight slots' current cards; the planted lemons."""

    hosts: list[str]
    cards: dict[tuple[str, str], Card]
    domains: dict[str, str] = field(default_factory=dict)  # host -> the PCI domain of its GPUs
    lemons: dict[str, str] = field(default_factory=dict)  # kind -> serial (card), "host/bus" (slot), host (node)
    spare_serial: int = 0

    @classmethod
    def build(cls, rng: random.Random, size: int, lemons: tuple[str, ...]) -> Fleet:
        hosts = list(dict.fromkeys(host_name(rng, i) for i in range(1, size + 1)))
        fleet = cls(hosts, {}, spare_serial=1654922000000 + rng.randrange(10**6))
        for host in hosts:
            fleet.domains[host] = rng.choice(DOMAINS) if rng.random() < DOMAIN_SHARE else "0000"
            for bus in GPU_BUSES:
                fleet.cards[(host, bus)] = fleet.new_card(rng)
        picks = rng.sample(hosts, 3)
        if "card" in lemons:
            fleet.lemons["card"] = fleet.cards[(picks[0], rng.choice(GPU_BUSES))].serial
        if "slot" in lemons:
            fleet.lemons["slot"] = f"{picks[1]}/{rng.choice(GPU_BUSES)}"
        if "node" in lemons:
            fleet.lemons["node"] = picks[2]
        return fleet

    def new_card(self, rng: random.Random) -> Card:
        self.spare_serial += 1 + rng.randrange(40)
        h = f"{rng.getrandbits(128):032x}"
        return Card(str(self.spare_serial), f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}")

    def where(self, serial: str) -> tuple[str, str]:
        return next(slot for slot, card in self.cards.items() if card.serial == serial)

    def after_failure(self, rng: random.Random, host: str, bus: str, cause: str) -> None:
        """What the site does after an incident: a card that failed in hardware (its memory, itself,
        NVLink, or its PCIe link: the card is the first suspect) is replaced, except the lemon card,
        which comes back from repair and is put in another host's slot. A bad slot so fails with one
        new card after another."""
        card = self.cards[(host, bus)]
        if card.serial == self.lemons.get("card"):
            other = (rng.choice([h for h in self.hosts if h != host]), rng.choice(GPU_BUSES))
            self.cards[(host, bus)], self.cards[other] = self.cards[other], card
        elif cause in ("gpu_memory", "gpu_hardware", "nvlink", "pcie_link"):
            self.cards[(host, bus)] = self.new_card(rng)
