"""NCCL_DEBUG output: ``host:pid:tid [cudaDev] NCCL INFO|WARN|TRACE`` lines of every NCCL version seen,
behind any launcher prefix (mpirun, pdsh, ``srun -l``, torchrun, Ray, a log viewer's line numbers) and
any collector's stamp (container runtime, log shipper, ``mpirun --timestamp-output``, CloudWatch).

Families (``grammars/nccl.lark``): ``nccl.version`` (``NCCL version 2.4.7+cuda10.0``, ``NCCL version 2.26.2
compiled with CUDA 12.4``), ``nccl.init`` (``comm … rank R nranks N cudaDev D … busId B … Init COMPLETE``
and nccl-tests' rank table: the rank ↔ host ↔ pid ↔ GPU map that fills ``rank`` and ``gpu`` of the
process's other NCCL lines), ``nccl.abort``, ``nccl.warn`` (``where`` file:line, ``function``),
``nccl.net_error`` (IB/RoCE completion errors, old ``error N, opcode, len, vendor err`` and new
``status=N … localGid … remoteGids…`` / ``… hca mlx5_0``, IB async events ``Got async event : port error``,
``mlx5_1:1 async fatal event on QP (0x…): …``, ``GID table changed``, ``NET/IBP``, aws-ofi ``NET/OFI``;
socket errors with their peer and errno), ``nccl.warn`` also keeps a CUDA failure's number and name
(``Cuda failure 'out of memory'`` → ``cuda_code`` 2, ``cudaErrorMemoryAllocation``), ``nccl.error_chain``
(consecutive ``file:line -> N`` lines of a thread, folded, ``code`` = the ncclResult it began with; and an
application's ``NCCL failure file.cu:95 'unhandled cuda error'``, ``via`` application), ``nccl.conn_closed``
and ``nccl.ras`` (the RAS report's sections, one record each).

A job log interleaves NCCL, PyTorch and trainer output: this source, :mod:`.torch` and :mod:`.trainlog`
read a file alike (:mod:`.joblog`); sniffing only decides the file's label.

Example::

    kp-ddp-worker-0:3468:3905 [4] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer 10.216.210.236<54862> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid fd00:… remoteGidsfd00:…

becomes ``kind=nccl.net_error code=12 host=kp-ddp-worker-0 pid=3468`` with ``detail`` ``{"status_name":
"IBV_WC_RETRY_EXC_ERR", "vendor_err": 129, "peer": "10.216.210.236", "direction": "Recv", …}``.
"""

from __future__ import annotations

from typing import Any

from . import joblog
from .base import SourceResult

NAME = "nccl"
FORMS = (
    "host:pid:tid [cudaDev] NCCL INFO|WARN|TRACE lines (NCCL 2.0 to 2.29), optional [%F %T] stamp; host [cudaDev]",
    "file.cc:N WARN without the word NCCL (up to 2.3) or without any host prefix",
    "NCCL version banners (+cudaX.Y / compiled with CUDA X.Y)",
    "NCCL RAS report sections (2.24+)",
    "nccl-tests rank table (#  Rank N Pid P on host device D [0xbus]; 1.x without Group/Pid) and NCCL failure lines",
    "launcher prefixes: mpirun [1,0]<stdout>: / [155], pdsh host: (doubled), srun -l N:, torchrun [rank3]:, Ray (pid=N)",
    "collector stamps: RFC3339 / ISO with offset, mpirun --timestamp-output ctime, CloudWatch | ts |",
)


def sniff(head: str) -> float:
    """How sure we are that a file starting with ``head`` is NCCL debug output (0..1)."""
    return joblog.sniff_scores(head)["nccl"]


def parse(data: bytes, **options: Any) -> SourceResult:
    """Parse job output into ``events`` (and ``metrics``) rows; see :mod:`.joblog`."""
    return joblog.parse(data, source=NAME, **options)
