"""Collectives compared across ranks: the ranks of one communicator disagreeing on a collective.

NCCL prints each collective a rank enqueues when ``NCCL_DEBUG_SUBSYS`` holds ``COLL``, in one format from
2.3 to 2.30 (``src/enqueue.cc``; ``%lx`` prints the op count in hex)::

    host:pid:tid [dev] NCCL INFO Broadcast: opCount 0 sendbuff 0x7f… recvbuff 0x7f… count 53 datatype 4 op 0 root 0 comm 0x7f… [nranks=8] stream 0x55…

and PyTorch's ProcessGroupNCCL watchdog prints the work that timed out on each rank
(``WorkNCCL(SeqNum=…, OpType=…, NumelIn=…, NumelOut=…)``, read by the torch source as
``torch.watchdog_timeout`` with ``seq``, ``op``, ``numel_in``, ``pg``). Every rank of a communicator
calls the same collectives in the same order with the same count and type; when two ranks' lines for the
same op count (or the same ``SeqNum`` of one process group) name another collective, count, type, root or
reduction, the ranks called mismatched collectives and the job hangs (NCCL/nccl#147). :func:`derived`
gives one ``nccl.coll_mismatch`` row per such disagreement, on the line of the rank that differs from
the most ranks, which the rules read as a hang.

A rank is told by its communicator's address (``comm 0x…``): each rank's communicator is its own object.
Only communicators that can be one (no more addresses for a size than that size, and one address per
process of a size) are compared: two process groups of the same size run different collectives at the
same op count, and that is no mismatch.
"""

from __future__ import annotations

import json

import polars as pl

KIND = "nccl.coll_mismatch"
#: NCCL's COLL line (src/enqueue.cc, 2.3 .. 2.30), the last one of a message (pastes interleave lines).
COLL = (r".*\b(?P<op>[A-Za-z]+): opCount (?P<opcount>[0-9a-fA-F]+) sendbuff \S+ recvbuff \S+ count (?P<count>\d+) "
        r"datatype (?P<datatype>\d+) op (?P<redop>\d+) root (?P<root>-?\d+) comm (?P<comm>0x[0-9a-fA-F]+) "
        r"\[nranks=(?P<nranks>\d+)\]")  # fmt: skip
#: The ``host:pid:tid [dev]`` NCCL prefix of that last COLL line, when the message still holds it.
_PROCESS = r".*\b(?P<phost>[\w.-]+):(?P<ppid>\d+):\d+ \[\d+\] NCCL INFO [A-Za-z]+: opCount "
#: A cheap test of a message for :data:`COLL`.
ANCHOR = r": opCount [0-9a-fA-F]+ sendbuff "
_SIGNATURE = ["op", "count", "datatype", "redop", "root"]


def derived(p: pl.DataFrame) -> pl.DataFrame:
    """The ``nccl.coll_mismatch`` rows of the rows ``p`` (``incident``, ``host``, ``file``, ``line``,
    ``message``, ``kind``, ``detail`` and the other event columns): one per op count, or per watchdog
    ``SeqNum``, at which the ranks disagree, in the columns of ``p``."""
    out = [_from_coll_lines(p), _from_watchdog(p)]
    out = [f.select(p.columns) for f in out if f.height]
    return pl.concat(out) if out else p.clear()


def _from_coll_lines(p: pl.DataFrame) -> pl.DataFrame:
    rows = p.filter(pl.col("message").str.contains(ANCHOR).fill_null(False))
    if rows.height == 0:
        return p.clear()
    coll = rows.with_columns(
        pl.col("message").str.extract_groups(COLL).alias("_c"),
        pl.col("message").str.extract_groups(_PROCESS).alias("_p"),
    ).unnest("_c", "_p").drop_nulls("comm")
    coll = coll.with_columns(
        opcount=pl.col("opcount").str.to_integer(base=16, strict=False),
        nranks=pl.col("nranks").cast(pl.Int64, strict=False),
        process=pl.concat_str("phost", pl.lit(":"), "ppid"),
    )
    # One communicator per size, as far as the lines can tell: no more addresses than ranks, one per process.
    per_process = coll.drop_nulls("process").group_by("incident", "nranks", "process").agg(n=pl.col("comm").n_unique())
    sizes = coll.group_by("incident", "nranks").agg(comms=pl.col("comm").n_unique()).join(
        per_process.group_by("incident", "nranks").agg(per_process=pl.col("n").max()), on=["incident", "nranks"],
        how="left")  # fmt: skip
    sizes = sizes.filter((pl.col("comms") <= pl.col("nranks")) & (pl.col("per_process").fill_null(1) <= 1))
    coll = coll.join(sizes.select("incident", "nranks"), on=["incident", "nranks"])
    slot = ["incident", "nranks", "opcount"]
    # each rank's line once per slot (a paste repeats lines), then the signatures the ranks gave
    one = coll.sort("file", "line").unique([*slot, "comm"], keep="first", maintain_order=True)
    return _odd_ones(one, slot, _SIGNATURE, "comm", lambda r: {
        "opcount": r["opcount"], "nranks": r["nranks"], "op": r["op"], "count": int(r["count"]),
        "datatype": int(r["datatype"]), "root": int(r["root"]),
    })  # fmt: skip


def _from_watchdog(p: pl.DataFrame) -> pl.DataFrame:
    rows = p.filter(pl.col("kind") == "torch.watchdog_timeout")
    if rows.height == 0 or "detail" not in rows.columns:
        return p.clear()
    fields = {"seq": pl.Int64, "op": pl.String, "numel_in": pl.Int64, "pg": pl.String}
    wd = rows.with_columns(
        [pl.col("detail").str.json_path_match(f"$.{k}").cast(t, strict=False).alias(f"_{k}") for k, t in fields.items()]
    ).drop_nulls(["_seq", "_op", "rank"])
    wd = wd.with_columns(_pg=pl.col("_pg").fill_null("0"))
    slot = ["incident", "_pg", "_seq"]
    one = wd.sort("file", "line").unique([*slot, "rank"], keep="first", maintain_order=True)

    def fields(r: dict) -> dict:  # type: ignore[type-arg]
        return {"seq": r["_seq"], "pg": r["_pg"], "op": r["_op"], "numel_in": r["_numel_in"]}

    # the op compared on every rank; the element count on the ranks that print it (PyTorch 2.x; 1.x did not)
    found = pl.concat([_odd_ones(one, slot, ["_op"], "rank", fields),
                       _odd_ones(one.drop_nulls("_numel_in"), slot, ["_op", "_numel_in"], "rank", fields)])  # fmt: skip
    return found.unique(["incident", "file", "line"], keep="first", maintain_order=True)


def _odd_ones(rows: pl.DataFrame, slot: list[str], signature: list[str], rank: str, fields) -> pl.DataFrame:  # type: ignore[no-untyped-def]
    """One row per ``slot`` whose ranks (``rank``) gave more than one ``signature``: the first line of the
    signature the fewest ranks gave, its kind :data:`KIND`, its detail what each signature was."""
    sig = pl.concat_str([pl.col(c).cast(pl.String).fill_null("") for c in signature], separator="|")
    keyed = rows.with_columns(_sig=sig)
    split = keyed.group_by(slot).agg(pl.col("_sig").n_unique().alias("_n")).filter(pl.col("_n") > 1)
    if split.height == 0:
        return rows.clear().select([c for c in rows.columns if not c.startswith("_")]).clear()
    keyed = keyed.join(split.select(slot), on=slot)
    counted = keyed.with_columns(_ranks=pl.col(rank).n_unique().over([*slot, "_sig"]))
    odd = counted.sort([*slot, "_ranks", "file", "line"]).unique(slot, keep="first", maintain_order=True)
    out = []
    for r in odd.iter_rows(named=True):
        others = counted.filter(pl.all_horizontal([pl.col(c) == r[c] for c in slot]))
        seen = others.group_by("_sig").agg(pl.col("_ranks").first()).sort("_ranks", descending=True)
        detail = {**fields(r), "signatures": {s: n for s, n in seen.iter_rows()}, "ranks": others.get_column(rank).n_unique()}
        out.append({**r, "kind": KIND, "severity": "error", "detail": json.dumps(detail, default=str)})
    keep = [c for c in rows.columns if not c.startswith("_") or c in ("_i",)]
    return pl.DataFrame(out).select(keep).cast(rows.select(keep).schema)  # type: ignore[arg-type]
