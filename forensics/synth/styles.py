"""How each synthetic host prints: the printed forms of ``../shared/samples/PROVENANCE.md``'s variant list.

A host draws one :class:`Style` — its dmesg form, its syslog and journal forms, the launcher that
prefixes its job output, its NCCL, PyTorch, torchrun and training-loop generation, its ``nvidia-smi``
column — so that a large corpus holds every form the parsers read, each on a share of hosts, and a
parser tuned to one form fails the tests. ``tests/test_synth.py`` lists the forms and checks that
1,000 incidents hold each of them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

#: The printed forms, by what they print (see PROVENANCE.md "Format variants seen").
DMESG = ("plain", "ctime", "reltime", "iso-x", "iso", "caller", "talos")
SYSLOG = ("host", "host", "nohost", "doublespace")
JOURNAL = ("short-iso", "short", "short-precise", "short-monotonic", "short-localized", "json", "json-spaced", "export")
LAUNCHER = ("", "", "tag-output", "pdsh", "mpirun", "ray")
NCCL = ("2.21", "2.4", "2.26")
IB = ("peer", "old", "status", "ibp")
WATCHDOG = ("glog", "glog", "old", "pg-guid")
AGENT = ("glog", "logging")
TRAIN = ("megatron", "megatron", "hf", "nanogpt", "litgpt", "mmengine")
SMI_COLUMN = (42, 42, 36, 32)
#: The trainer's Python: 3.11 and later print caret lines under the code of each traceback frame.
PYTHON = ("3.10", "3.11", "3.12")
#: The driver generation an earlier job's MMU fault (Xid 31) was printed by (see FACTS.md's Xid wordings).
DRIVER = ("old", "418", "535", "595")
#: The fp16 loss scaler's messages while it warms up: DeepSpeed's, ZeRO-3's 2021 ``[deepscale]`` (glued
#: to a tqdm bar), fused_optimizer's (the message on the line after its logger prefix), or none.
FP16 = ("", "", "", "deepspeed", "deepscale", "fused")
#: How ``nvidia-smi`` was asked: ``-q`` text, or ``-q -x`` XML (DOCTYPE v12, none, or a bare declaration).
SMI_FORM = ("text", "text", "text", "xml-v12", "xml-bare", "xml-nodoctype")
#: Whether a ``nvidia-smi --query-gpu … --format=csv -l`` loop ran beside the job.
SMI_CSV = (False, False, False, True)
AER = ("mid", "mid", "new", "old")
#: Month names of ``journalctl`` in other locales (``LANG=ru_RU``, ``zh_CN``, ``fr_FR``, ``nl_NL``).
LOCAL_MONTHS = {
    "ru": ("янв", "фев", "мар", "апр", "мая", "июн", "июл", "авг", "сен", "окт", "ноя", "дек"),
    "zh": tuple(f"{n}月" for n in range(1, 13)),
    "fr": ("janv.", "févr.", "mars", "avril", "mai", "juin", "juil.", "août", "sept.", "oct.", "nov.", "déc."),
    "nl": ("jan", "feb", "mrt", "apr", "mei", "jun", "jul", "aug", "sep", "okt", "nov", "dec"),
}


@dataclass(frozen=True)
class Style:
    dmesg: str = "plain"
    syslog: str = "host"
    journal: str = "short-iso"
    locale: str = "ru"
    launcher: str = ""
    nccl: str = "2.21"
    ib: str = "peer"
    watchdog: str = "glog"
    agent: str = "glog"
    train: str = "megatron"
    smi_column: int = 42
    aer: str = "mid"
    smi_form: str = "text"
    smi_csv: bool = False
    driver: str = "535"
    fp16: str = ""
    python: str = "3.10"

    @classmethod
    def draw(cls, rng: random.Random) -> Style:
        return cls(
            dmesg=rng.choice(DMESG), syslog=rng.choice(SYSLOG), journal=rng.choice(JOURNAL),
            locale=rng.choice(sorted(LOCAL_MONTHS)), launcher=rng.choice(LAUNCHER), nccl=rng.choice(NCCL),
            ib=rng.choice(IB), watchdog=rng.choice(WATCHDOG), agent=rng.choice(AGENT), train=rng.choice(TRAIN),
            smi_column=rng.choice(SMI_COLUMN), aer=rng.choice(AER), smi_form=rng.choice(SMI_FORM),
            smi_csv=rng.choice(SMI_CSV), driver=rng.choice(DRIVER), fp16=rng.choice(FP16),
            python=rng.choice(PYTHON),
        )  # fmt: skip


def launcher_prefix(style: Style, host: str, rank: int | None) -> str:
    """What the launcher puts before each line a rank prints (nothing, mpirun's tag, pdsh's host)."""
    if style.launcher == "tag-output":
        return f"[1,{rank or 0}]<stdout>:"
    if style.launcher == "pdsh":
        return f"{host}: {host}: "
    if style.launcher == "mpirun" and rank is not None:  # ``mpirun -l``: the workers' lines, not torchrun's own
        return f"[{rank}] "
    if style.launcher == "ray" and rank is not None:  # a Ray actor's output, forwarded to the driver
        return f"(RayWorkerVllm pid={7000 + 7 * rank}) "
    return ""
