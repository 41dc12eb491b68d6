"""How right ``diagnose`` is: its answers against the ``[label]`` of each ``incident.toml``.

Only incidents with a ``label.root_cause`` count. Reported: accuracy, per-cause precision, recall and
support, the confusion matrix (truth × answer), and how often the first-failing host, GPU and rank
agree with ``label.first_host`` / ``first_gpu`` / ``first_rank`` where the label names them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from .diagnose import diagnose
from .language import CAUSES, Library


@dataclass(frozen=True)
class Evaluation:
    rows: pl.DataFrame  # incident, truth, answer, confidence, and the first-failure comparisons
    per_cause: pl.DataFrame  # cause, support, answered, correct, precision, recall
    confusion: pl.DataFrame  # truth, then one column per answered cause

    @property
    def accuracy(self) -> float:
        return float(self.rows.select((pl.col("truth") == pl.col("answer")).mean()).item() or 0.0)

    def first_failure(self) -> dict[str, float | None]:
        """The share of labelled first failures found, per field (None when no label names it)."""
        out: dict[str, float | None] = {}
        for field in ("host", "gpu", "rank"):
            col = self.rows.get_column(f"{field}_ok").drop_nulls()
            out[field] = float(col.mean()) if len(col) else None  # type: ignore[arg-type]
        return out


def evaluate(ds: Any, *, library: Library | None = None) -> Evaluation:
    """Diagnose every labelled incident of the open dataset ``ds`` and compare."""
    labels = ds.incidents.select(
        "incident",
        truth=pl.col("labels").str.json_path_match("$.label.root_cause"),
        l_host=pl.col("labels").str.json_path_match("$.label.first_host"),
        l_gpu=pl.col("labels").str.json_path_match("$.label.first_gpu"),
        l_rank=pl.col("labels").str.json_path_match("$.label.first_rank").cast(pl.Int32, strict=False),
    ).collect().filter(pl.col("truth").is_not_null())
    # a dataset on disk serves its stored diagnoses where they are fresh (the same ones `diagnose` shows)
    answers = ds.diagnoses(library=library) if hasattr(ds, "diagnoses") else diagnose(ds, library=library)
    rows = labels.join(answers, on="incident", how="left").select(
        "incident", "truth", answer=pl.col("root_cause").fill_null("unknown"), confidence="confidence",
        host_ok=pl.when(pl.col("l_host").is_not_null()).then(pl.col("first_host") == pl.col("l_host")),
        gpu_ok=pl.when(pl.col("l_gpu").is_not_null()).then(pl.col("first_gpu") == pl.col("l_gpu")),
        rank_ok=pl.when(pl.col("l_rank").is_not_null()).then(pl.col("first_rank") == pl.col("l_rank")),
    )
    causes = [c for c in CAUSES if c in set(rows["truth"]) | set(rows["answer"])]
    per_cause = pl.DataFrame(
        [
            {
                "cause": c,
                "support": int((rows["truth"] == c).sum()),
                "answered": int((rows["answer"] == c).sum()),
                "correct": int(((rows["truth"] == c) & (rows["answer"] == c)).sum()),
            }
            for c in causes
        ],
        schema={"cause": pl.String, "support": pl.Int64, "answered": pl.Int64, "correct": pl.Int64},
    ).with_columns(
        precision=pl.when(pl.col("answered") > 0).then(pl.col("correct") / pl.col("answered")),
        recall=pl.when(pl.col("support") > 0).then(pl.col("correct") / pl.col("support")),
    )
    confusion = (
        rows.group_by("truth", "answer").len()
        .pivot(on="answer", index="truth", values="len", sort_columns=False)
        .fill_null(0)
    )  # fmt: skip
    ordered = [c for c in causes if c in confusion.columns]
    confusion = confusion.select("truth", *ordered).sort(
        pl.col("truth").replace_strict({c: n for n, c in enumerate(CAUSES)}, return_dtype=pl.Int32)
    )
    return Evaluation(rows, per_cause, confusion)
