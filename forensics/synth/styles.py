"""How each synthetic host prints: the printed forms of ``tests/golden/PROVENANCE.md``'s variant list.

A host draws one :class:`Style` — its dmesg form, its syslog and journal forms, the launcher that
prefixes its job output, its NCCL, PyTorch, torchrun and training-loop generation, its ``nvidia-smi``
column — so that a large corpus holds every form the parsers read, each on a share of hosts, and a
parser tuned to one form fails the tests. ``tests/test_synth.py`` lists the forms and checks that
1,000 incidents hold each of them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

#: The printed forms, by what they print (see PROVENANCE.md "Format variants seen").
DMESG = ("plain", "ctime", "reltime", "iso-x", "iso", "caller", "talos")
SYSLOG = ("host", "host", "nohost", "doublespace")
JOURNAL = ("short-iso", "short", "short-precise", "short-monotonic", "short-localized", "json", "json-spaced", "export")
LAUNCHER = ("", "", "tag-output", "pdsh", "pdsh-ip", "mpirun", "ray")
NCCL = ("2.21", "2.4", "2.26")
#: How the NCCL network plugin words a completion error: NET/IB generations, NET/IBP, aws-ofi-nccl (EFA).
IB = ("peer", "old", "status", "ibp", "ofi")
WATCHDOG = ("glog", "glog", "old", "pg-guid")
AGENT = ("glog", "logging")
TRAIN = ("megatron", "megatron", "hf", "nanogpt", "litgpt", "mmengine", "mmcv")
#: Training loops of the older frameworks some teams still run (drawn from the host's second stream,
#: :meth:`Style.draw`): maskrcnn_benchmark's ``loss: v (mean)`` lines and RETURNN's untimed step lines.
OLD_TRAIN = ("maskrcnn", "returnn")
SMI_COLUMN = (42, 42, 36, 32)
#: The trainer's Python: 3.11 and later print caret lines under the code of each traceback frame.
PYTHON = ("3.10", "3.11", "3.12")
#: The driver generation an earlier job's MMU fault (Xid 31) was printed by (see FACTS.md's Xid wordings).
DRIVER = ("old", "418", "535", "595")
#: The fp16 loss scaler's messages while it warms up: DeepSpeed's, ZeRO-3's 2021 ``[deepscale]`` (glued
#: to a tqdm bar), fused_optimizer's (the message on the line after its logger prefix), or none.
FP16 = ("", "", "", "deepspeed", "deepscale", "fused")
#: How ``nvidia-smi`` was asked: ``-q`` text, or ``-q -x`` XML (DOCTYPE v12, none, or a bare declaration).
SMI_FORM = ("text", "text", "text", "text", "xml-v12", "xml-v11", "xml-v13", "xml-bare", "xml-nodoctype")
#: The driver that printed ``nvidia-smi -q`` text: 575 answers "Reset Required" with an error string.
SMI_DRIVER = ("550", "550", "575")
#: Whether a ``nvidia-smi --query-gpu … --format=csv -l`` loop ran beside the job.
SMI_CSV = (False, False, False, True)
AER = ("mid", "mid", "new", "old")
#: (``tight``, drawn from the second stream: ``new`` with one space after the tag of every line, the bit
#: name unpadded and no ``(First)``, as PROVENANCE's ``nots-leading-space-aer-tag-…`` prints it)
#: The kernel generation: 4.4 prints the OOM killer's gfp_mask without flag names, raw stack words and
#: ``[<ffffffff…>]`` call traces.
KERNEL = ("modern", "modern", "modern", "modern", "4.4")
#: The EDAC driver reporting DRAM errors: skx_edac (today), sb_edac's multi-line MCE block, or the
#: oldest ``CE error on CPU#0Channel#2_DIMM#0`` wording.
EDAC = ("skx", "sbridge", "old")
#: How the journal text was copied: whole, through a pager that cut long lines at the terminal's
#: width, or from a terminal that hard-wrapped them (the rest on a line of its own, no prefix).
TERMINAL = ("", "", "", "", "pager", "wrap")
#: Whether the trainer draws a tqdm/Lightning progress bar, onto whose end other output gets glued.
PROGRESS = (False, False, False, True)
#: How a copied job log shows watchdog lines longer than the terminal: whole, word-wrapped at 116
#: columns with the rows padded by spaces, or cut at the width mid-token (``OpTy`` / ``pe=BROADCAST``).
JOB_WRAP = ("", "", "", "", "", "", "words", "chars")
#: ``nvidia-smi -q -x`` of pre-Ampere drivers: DTD v9 (390.x) and v10 (430.x), retired pages and a
#: scalar ``<remapped_rows>N/A</remapped_rows>``.
OLD_XML = ("xml-v9", "xml-v10")
#: What NCCL names the host as in a copy whose host names were redacted (PROVENANCE's ``<cluster_name>``);
#: a container's own host name (``user``, ``hostname-test``, a hex id) is :attr:`Style.container`.
NCCL_HOST = ("<cluster_name>", "<hostname>")
#: Where a device-side assert's kernel source lives: a Linux build tree, or a Windows CI runner's.
ASSERT_PATH = ("linux", "linux", "linux", "windows")
#: Month names of ``journalctl`` in other locales (``LANG=ru_RU``, ``zh_CN``, ``fr_FR``, ``nl_NL``, ``pl_PL``).
LOCAL_MONTHS = {
    "ru": ("янв", "фев", "мар", "апр", "мая", "июн", "июл", "авг", "сен", "окт", "ноя", "дек"),
    "zh": tuple(f"{n}月" for n in range(1, 13)),
    "fr": ("janv.", "févr.", "mars", "avril", "mai", "juin", "juil.", "août", "sept.", "oct.", "nov.", "déc."),
    "nl": ("jan", "feb", "mrt", "apr", "mei", "jun", "jul", "aug", "sep", "okt", "nov", "dec"),
    "pl": ("sty", "lut", "mar", "kwi", "maj", "cze", "lip", "sie", "wrz", "paź", "lis", "gru"),
}
#: The locales the first stream draws from (Polish came later: it is drawn from the second).
FIRST_LOCALES = ("fr", "nl", "ru", "zh")
#: ``dmesg -T`` under another ``LC_TIME`` (drawn from the second stream): day and month names as glibc
#: abbreviates them, Dutch lower-case (``[wo jul 28 05:19:43 2021]``), Portuguese capitalised
#: (``[Ter Set 19 06:01:41 2017]``), Polish (``[wt lip 15 …]``); weekday first, Monday first.
DMESG_LOCALES = {
    "nl": (("ma", "di", "wo", "do", "vr", "za", "zo"), LOCAL_MONTHS["nl"]),
    "pt": (("Seg", "Ter", "Qua", "Qui", "Sex", "Sáb", "Dom"),
           ("Jan", "Fev", "Mar", "Abr", "Mai", "Jun", "Jul", "Ago", "Set", "Out", "Nov", "Dez")),
    "pl": (("pon", "wt", "śr", "czw", "pt", "sob", "nie"), LOCAL_MONTHS["pl"]),
}
#: How a pasted copy of the kernel log is indented (a markdown list, an rst literal block): by nothing,
#: two or four spaces (PROVENANCE: ``dmesg-indented-4sp-…``, ``journal-dmesg-indented-…``).
PASTE_INDENT = ("", "", "  ", "    ")


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
    smi_driver: str = "550"
    kernel: str = "modern"
    edac: str = "skx"
    terminal: str = ""
    late_hostname: bool = False  # the journal's first lines of a boot say "localhost"
    progress: bool = False
    job_wrap: str = ""
    assert_path: str = "linux"
    nccl_host: str = ""  # the name NCCL prints instead of the host's (empty: the host's)
    container: str = ""  # the job's container's own host name, which NCCL and torchrun print (empty: none)
    line_numbers: int = 0  # copied from a log viewer that numbers its lines (``[80746] ``) from this one; 0: none
    dmesg_locale: str = ""  # ``dmesg -T``'s day and month names (:data:`DMESG_LOCALES`; empty: English)
    paste_indent: str = ""  # what the NVRM lines pasted into the ticket are indented by (:data:`PASTE_INDENT`)
    redacted_pci: bool = False  # the pasted NVRM lines have their PCI ids crossed out: ``Xid (PCI:...)``

    @classmethod
    def draw(cls, rng: random.Random, side: random.Random | None = None, late: random.Random | None = None) -> Style:
        """A host's style from ``rng``; the forms added later come from ``side``, a stream of the host's
        own, so that adding forms mostly leaves the draws of the rest of a seed's corpus as they were;
        those of the real samples gathered in December 2026 from ``late``, a third, so that the second
        stream's draws stay as they were too."""
        side, late = side or random.Random(0), late or random.Random(1)
        style = cls(
            dmesg=rng.choice(DMESG), syslog=rng.choice(SYSLOG), journal=rng.choice(JOURNAL),
            locale=rng.choice(FIRST_LOCALES), launcher=rng.choice(LAUNCHER), nccl=rng.choice(NCCL),
            ib=rng.choice(IB), watchdog=rng.choice(WATCHDOG), agent=rng.choice(AGENT), train=rng.choice(TRAIN),
            smi_column=rng.choice(SMI_COLUMN), aer=rng.choice(AER), smi_form=rng.choice(SMI_FORM),
            smi_csv=rng.choice(SMI_CSV), driver=rng.choice(DRIVER), fp16=rng.choice(FP16),
            python=rng.choice(PYTHON), smi_driver=rng.choice(SMI_DRIVER), kernel=rng.choice(KERNEL),
            edac=rng.choice(EDAC), terminal=rng.choice(TERMINAL), late_hostname=rng.random() < 0.3,
            progress=rng.choice(PROGRESS),
        )  # fmt: skip
        extra: dict[str, object] = {"job_wrap": side.choice(JOB_WRAP), "assert_path": side.choice(ASSERT_PATH)}
        if side.random() < 0.04:
            extra["nccl_host"] = side.choice(NCCL_HOST)
        if side.random() < 0.04:  # a container started without --hostname: its id, or an image's placeholder
            extra["container"] = side.choice(["user", "hostname-test", f"{side.getrandbits(48):012x}"])
        if side.random() < 0.05:  # the job's log copied out of a web log viewer, its line numbers kept
            extra["line_numbers"] = side.randrange(1, 90000)
        if side.random() < 0.08:  # an older framework's training loop
            extra["train"] = side.choice(OLD_TRAIN)
        if style.smi_form != "text" and side.random() < 0.25:  # a pre-Ampere driver's XML
            extra["smi_form"] = side.choice(OLD_XML)
        # (the forms of the real samples gathered in December 2026; from the third stream)
        if late.random() < 0.4:
            extra["dmesg_locale"] = late.choice(sorted(DMESG_LOCALES))
        if style.journal == "short-localized" and late.random() < 0.25:
            extra["locale"] = "pl"
        extra["paste_indent"] = late.choice(PASTE_INDENT)
        extra["redacted_pci"] = late.random() < 0.2
        if style.aer == "new" and late.random() < 0.5:  # one space after each line's AER: tag, no (First)
            extra["aer"] = "tight"
        return replace(style, **extra)  # type: ignore[arg-type]


def address(host: str) -> str:
    """The host's address on the cluster network (what pdsh run by address and Talos print)."""
    return f"10.20.{sum(map(ord, host)) % 250}.{len(host)}"


def launcher_prefix(style: Style, host: str, rank: int | None, pid: int | None = None) -> str:
    """What the launcher puts before each line a rank prints (nothing, mpirun's tag, pdsh's host or
    address, a Ray actor's name and pid: the worker's own)."""
    if style.launcher == "tag-output":
        return f"[1,{rank or 0}]<stdout>:"
    if style.launcher == "pdsh":
        return f"{host}: {host}: "
    if style.launcher == "pdsh-ip":
        return f"{address(host)}: {address(host)}: "
    if style.launcher == "mpirun" and rank is not None:  # ``mpirun -l``: the workers' lines, not torchrun's own
        return f"[{rank}] "
    if style.launcher == "ray" and rank is not None:  # a Ray actor's output, forwarded to the driver
        return f"(RayWorkerVllm pid={pid if pid is not None else 7000 + 7 * rank}) "
    return ""
