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

This module holds the source's name, forms and families (the knowledge); the reading of a job log is
:mod:`.joblog`'s, which registers the source (``joblog.SOURCES['trainlog']``: ``sniff`` and ``parse``).
"""

from __future__ import annotations

import re
from typing import Any

from ..families import Families, row
from ..reading.fields import _find, _first, _generic, to_float, to_int

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


# ---------------------------------------------------------------------------------------- families


#: A loss scale as printed: ``65536``, ``32768.0``, apex's ``8.165126103939127e-202``.
_SCALE = r"(\d[\d.]*(?:[eE][-+]?\d+)?)"


def _overflow(parts: dict[str, Any], text: str) -> dict[str, Any]:
    step = to_int(_find(r"(?:on iteration|iteration) (\d+)", text))
    fields = {
        "rank": to_int(_find(r"\bRank (\d+)\b", text)),
        "attempted_scale": to_float(_find(rf"Attempted loss scale: {_SCALE}", text)),
        "new_scale": to_float(_find(rf"(?:reducing to|reducing loss scale to|dynamic loss scale from [\d.eE+-]+ to"
                                  rf"|setting loss scale to:) {_SCALE}", text)),
        "hysteresis": to_int(_find(r"Reducing hysteresis to (\d+)", text)),
        "at_minimum": True if re.search(r"already at minimum|Minimum loss scale reached", text) else None,
    }  # fmt: skip
    # the scale the step was tried at (else, apex, the one it falls to): a run of overflows at one scale
    # repeats it, a scaler searching halves it
    fields["scale"] = fields["attempted_scale"] if fields["attempted_scale"] is not None else fields["new_scale"]
    rank = fields.pop("rank")
    out = row("train.overflow", "error" if fields["at_minimum"] else "warning",
              {k: v for k, v in fields.items() if v is not None}, code=step)  # fmt: skip
    out["rank"] = rank
    return out



def _nonfinite(kind: str):  # noqa: ANN202 - an enricher
    def enrich(parts: dict[str, Any], text: str) -> dict[str, Any]:
        out = row(kind, "error", text=_first(text), device=to_int(_find(r"Device: (\d+)", text)),
                  node=_find(r"node: (\S+)", text))  # fmt: skip
        out["detail"] = {k: v for k, v in out["detail"].items() if v is not None}
        out["rank"] = to_int(_find(r"\bRank (\d+)\b", text))
        return out

    return enrich


TRAIN = Families("trainlog", {
    "train.overflow": _overflow, "train.grad_nonfinite": _nonfinite("train.grad_nonfinite"),
    "train.loss_nonfinite": _nonfinite("train.loss_nonfinite"),
}, generic=_generic)  # fmt: skip
