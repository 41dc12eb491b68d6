"""Training logs: the step lines of common trainers into ``metrics``, and the events among them.

Step lines (``data/train_metrics.toml``): Megatron ``iteration N/ M | lm loss: … | grad norm: … |``,
Hugging Face Trainer dicts ``{'loss': …, 'grad_norm': nan}``, Megatron-DeepSpeed ``step=N, skipped=…``,
tqdm/Lightning bars with ``key=value`` postfixes, nanoGPT/litgpt ``iter N: loss …, time …ms`` and litgpt
2024 ``Epoch 1 | iter 46 step 1 | loss train: …``, fairseq ``| epoch 001:  200 / 1374 loss=…, num_updates=…``
and its epoch summaries, Keras bars ``9595/9595 [====] - 1s - loss: nan - acc: …``, NeMo 2 ``Training epoch 0,
iteration …/… | … | reduced_train_loss: …``, TF cifar10 ``step N, loss = … (… examples/sec; … sec/batch)``,
timm ``Train: 0 [ 50/1251 (4%)]  Loss: …``, mmengine ``Epoch(train) [1][240/735]  lr: …`` (and the older mmcv
form; the step made global across epochs), maskrcnn_benchmark ``iter: N  loss: v (avg)``, RETURNN
``ep 1 train, step N, …``, the PyTorch examples' ``Train Epoch: …  Loss: …``, plain ``step=N loss=…`` /
``step: N, loss: …`` (Paddle's ``nanxxx`` is NaN), an epoch's ``Mean Training loss : nan``, and any other line
printing a loss (``[Loss] nan | … | [step] 104``). Every (step, metric) is a ``metrics`` row (NaN and ±inf
kept; names normalized to ``loss``, ``grad_norm``, ``lr``, ``loss_scale``, ``step_time_s`` …); the step line
itself is a ``train.step`` event, or ``train.loss_nonfinite`` / ``train.grad_nonfinite`` where the value turns
non-finite (once per onset, not every step; Megatron's ``number of nan iterations`` counts too, and so does a
Megatron line with no loss and no skipped iteration), or ``train.overflow`` where Megatron skipped iterations.

Families (``grammars/trainlog.lark``): ``train.overflow`` (DeepSpeed ``OVERFLOW!`` incl. hysteresis and
the 2021 ``[deepscale]`` wording, fused_optimizer's ``Grad overflow on iteration N`` on the line after
its logger prefix, apex, fairseq's ``overflow detected, setting loss scale to:``, "loss scale already at
minimum", fairseq's "Minimum loss scale reached"), ``train.grad_nonfinite`` and ``train.loss_nonfinite``
messages (also Keras TerminateOnNaN's "Invalid loss, terminating training"). ``train.stall`` (derived)
when step lines stop for far longer than the run's usual interval before the log ends or an error appears.

Example::

    10/30 22:19:57 - mmengine - INFO - Epoch(train) [1][240/735]  lr: 1.9813e-04  …  loss: 2.5128  grad_norm: nan

becomes ``kind=train.grad_nonfinite code=240`` and metrics rows ``(240, lr, 0.00019813)`` …
``(240, grad_norm, NaN)``.
"""

from __future__ import annotations

from typing import Any

from . import joblog
from .base import SourceResult

NAME = "trainlog"
FORMS = (
    "Megatron iteration lines (the lm loss field absent on NaN iterations)",
    "Hugging Face Trainer dicts; Megatron-DeepSpeed step=N, skipped=N",
    "tqdm / Lightning progress bars (also carriage-return redraws and text glued after them)",
    "nanoGPT / litgpt iter lines; mmengine / mmcv Epoch(train) lines; maskrcnn_benchmark iter: lines; RETURNN",
    "fairseq progress lines and epoch summaries; Keras bars; NeMo 2; TF cifar10; timm",
    "plain key=value / key: value step lines; any other line printing a loss",
    "DeepSpeed / apex / fairseq fp16 overflow messages (also on the line after their logger prefix)",
)


def sniff(head: str) -> float:
    """How sure we are that a file starting with ``head`` is a training log (0..1)."""
    return joblog.sniff_scores(head)["trainlog"]


def parse(data: bytes, **options: Any) -> SourceResult:
    """Parse job output into ``events`` (and ``metrics``) rows; see :mod:`.joblog`."""
    return joblog.parse(data, source=NAME, **options)
