"""Repeat offenders: does a failure follow the card, the slot, the node or the job?

Over the diagnosed incidents, each hardware failure (causes in :data:`HARDWARE`) is put on its
first-failing **card** (the serial, else the UUID, of the first-failing GPU, from the identities
table), its **slot** (host and PCI address) and its **node** (host). A unit is a repeat offender when
it failed more often than chance allows: under a Poisson model with the mean failures per unit of its
kind (every card, slot and node the identities know is a unit), the chance of its count, times the
number of units (Bonferroni), is below ``alpha``. The kinds are decided in order, each explaining its
failures away before the next is tested:

1. **node**: a host whose failures are spread over it — two or more host-level ones (no GPU named),
   or GPU failures no single slot dominates (at most half in one) — first, so that a bad node's
   GPUs are not each blamed as a card or a slot;
2. **card**: a serial failing in two or more slots (it followed the card when it moved);
3. **slot**: a slot failing with two or more different cards in it;
4. a unit that passes the test but whose failures do not tell card from slot (one card that never
   moved) is **undetermined**.

**job**: software failures (:data:`SOFTWARE`) concentrated in one job beyond the fleet's share
(binomial tail against the job's own incident count, Bonferroni over jobs).
"""

from __future__ import annotations

import math
from typing import Any

import polars as pl

HARDWARE = ("pcie_link", "gpu_hardware", "gpu_memory", "nvlink", "thermal", "power", "host_memory", "storage",
            "network")  # fmt: skip
SOFTWARE = ("code_bug", "numerical", "gpu_oom", "host_oom")
COLUMNS = ("decision", "who", "incidents", "ci_low", "ci_high", "expected", "p_value", "cards", "slots", "hosts", "reason", "incident_ids")


def _poisson_tail(k: int, lam: float) -> float:
    """P(X >= k) for X ~ Poisson(lam) (terms in log space: no underflow for a large ``lam``).

    >>> round(_poisson_tail(3, 0.5), 5), _poisson_tail(0, 2.0), round(_poisson_tail(900, 1000.0), 4)
    (0.01439, 1.0, 0.9994)
    """
    if k <= 0:
        return 1.0
    if lam <= 0:
        return 0.0
    log_lam = math.log(lam)
    cdf = math.fsum(math.exp(i * log_lam - lam - math.lgamma(i + 1)) for i in range(k))
    return min(1.0, max(0.0, 1.0 - cdf))


def poisson_interval(k: int, level: float = 0.95) -> tuple[float, float]:
    """The exact (Garwood) confidence interval of a Poisson mean from one count ``k``.

    >>> [round(x, 3) for x in poisson_interval(0)], [round(x, 3) for x in poisson_interval(10)]
    ([0.0, 3.689], [4.795, 18.39])
    """
    tail = (1 - level) / 2

    def solve(n: int, target: float) -> float:  # the lam where P(X >= n), rising with lam, reaches target
        lo, hi = 0.0, 4.0 * k + 20
        for _ in range(100):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if _poisson_tail(n, mid) < target else (lo, mid)
        return (lo + hi) / 2

    low = 0.0 if k == 0 else solve(k, tail)
    high = solve(k + 1, 1 - tail)  # where P(X <= k) falls to ``tail``
    return low, high


def _binomial_tail(k: int, n: int, p: float) -> float:
    return float(sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1)))


def repeat_offenders(ds: Any, diagnoses: pl.DataFrame | None = None, *, alpha: float = 0.01,
                     min_incidents: int = 3) -> pl.DataFrame:  # fmt: skip
    """The repeat offenders with their decision and reasoning, most incidents first (:data:`COLUMNS`)."""
    from .mine import diagnose

    if diagnoses is None:  # a dataset on disk serves its stored diagnoses where they are fresh
        diagnoses = ds.diagnoses() if hasattr(ds, "diagnoses") else diagnose(ds)
    d = diagnoses
    ids = ds.identities.select("incident", "host", "gpu", card=pl.coalesce("serial", "uuid")).collect()
    known = ids.drop_nulls(["host", "gpu"]).unique(["incident", "host", "gpu"])
    failures = (
        d.filter(pl.col("root_cause").is_in(HARDWARE))
        .select("incident", "root_cause", host="first_host", gpu="first_gpu")
        .join(known, on=["incident", "host", "gpu"], how="left")
        .with_columns(slot=pl.when(pl.col("gpu").is_not_null()).then(pl.concat_str("host", pl.lit(" "), "gpu")))
    )
    units = {"card": ids["card"].drop_nulls().n_unique(),
             "slot": known.select("host", "gpu").unique().height, "node": ids["host"].drop_nulls().n_unique()}  # fmt: skip
    out: list[dict[str, Any]] = []
    left = failures
    for kind in ("node", "card", "slot"):
        key = {"card": "card", "slot": "slot", "node": "host"}[kind]
        scope = left.filter(pl.col(key).is_not_null())
        n_units = max(units[kind], scope[key].n_unique(), 1)
        lam = scope.height / n_units
        explained: list[str] = []
        for who, group in scope.group_by(key, maintain_order=True):
            count = group.height
            p = _poisson_tail(count, lam) * n_units
            if count < min_incidents or p >= alpha:
                continue
            cards, slots, hosts = group["card"].n_unique(), group["slot"].drop_nulls().n_unique(), group["host"].n_unique()
            decision, reason = _decide(kind, count, cards, slots, hosts, group)
            if decision is None:
                continue
            out.append({"decision": decision, "who": str(who[0]), "incidents": count, **_interval(count),
                        "expected": round(lam, 4),
                        "p_value": p, "cards": cards, "slots": slots, "hosts": hosts, "reason": reason,
                        "incident_ids": sorted(group["incident"].to_list())})  # fmt: skip
            explained += group["incident"].to_list()
        left = left.filter(~pl.col("incident").is_in(explained))
    out += _jobs(ds, d, alpha=alpha, min_incidents=min_incidents)
    schema = {"decision": pl.String, "who": pl.String, "incidents": pl.Int64, "ci_low": pl.Float64,
              "ci_high": pl.Float64, "expected": pl.Float64,
              "p_value": pl.Float64, "cards": pl.Int64, "slots": pl.Int64, "hosts": pl.Int64, "reason": pl.String,
              "incident_ids": pl.List(pl.String)}  # fmt: skip
    return pl.DataFrame(out, schema=schema).sort(["incidents", "who"], descending=[True, False])


def _interval(k: int) -> dict[str, float]:
    low, high = poisson_interval(k)
    return {"ci_low": round(low, 2), "ci_high": round(high, 2)}


def _decide(kind: str, count: int, cards: int, slots: int, hosts: int, group: pl.DataFrame) -> tuple[str | None, str]:
    causes = ", ".join(f"{c} {n}" for c, n in group.group_by("root_cause").len().sort("len", descending=True).iter_rows())
    if kind == "card":
        if slots >= 2:
            return "card", f"{count} failures of one card in {slots} slots on {hosts} host(s): it follows the card ({causes})"
        return "undetermined", f"{count} failures of one card that never moved: card or slot ({causes})"
    if kind == "slot":
        if cards >= 2:
            return "slot", f"{count} failures in one slot with {cards} different cards: it stays with the slot ({causes})"
        return None, ""  # one card: decided (or left undetermined) as a card
    gpus = group["gpu"].drop_nulls().n_unique()
    host_level = int(group["gpu"].is_null().sum())
    on_gpus = group.filter(pl.col("gpu").is_not_null())
    top = on_gpus.group_by("gpu").len()["len"].max() if on_gpus.height else 0
    # Spread over the host: host-level failures, or GPU failures that no one slot dominates.
    if host_level >= 2 or (gpus >= 2 and top <= on_gpus.height / 2):  # type: ignore[operator]
        return "node", (f"{count} failures on one host: {gpus} different GPU(s), {host_level} host-level, "
                        f"no card or slot explains them ({causes})")  # fmt: skip
    return None, ""


def _jobs(ds: Any, d: pl.DataFrame, *, alpha: float, min_incidents: int) -> list[dict[str, Any]]:
    jobs = ds.incidents.select("incident", job=pl.col("labels").str.json_path_match("$.job.name")).collect()
    rows = d.select("incident", "root_cause").join(jobs, on="incident").drop_nulls("job")
    if rows.height == 0:
        return []
    share = float(rows["root_cause"].is_in(SOFTWARE).mean())  # type: ignore[arg-type]
    n_jobs = rows["job"].n_unique()
    out = []
    for (job,), group in rows.group_by("job", maintain_order=True):
        soft = group.filter(pl.col("root_cause").is_in(SOFTWARE))
        k, n = soft.height, group.height
        if k < min_incidents or share >= 1:
            continue
        p = _binomial_tail(k, n, share) * n_jobs
        if p < alpha:
            out.append({"decision": "job", "who": str(job), "incidents": k, **_interval(k), "expected": round(n * share, 2),
                        "p_value": p, "cards": None, "slots": None, "hosts": None,
                        "reason": f"{k} of its {n} incidents are software failures against {share:.0%} in the fleet",
                        "incident_ids": sorted(soft["incident"].to_list())})  # fmt: skip
    return out
