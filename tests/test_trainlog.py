"""Training logs: the trainers' step lines and messages, on the real samples of tests/golden/trainlog."""

from __future__ import annotations

import io
import json
from pathlib import Path

import polars as pl
import pytest

from forensics import sources
from forensics.parse import parse_bytes
from forensics.sources import joblog

GOLDEN = Path(__file__).parent / "golden" / "trainlog"


def _parse(name: str, *, all_lines: bool = False) -> tuple[str | None, pl.DataFrame, pl.DataFrame]:
    """A golden sample as ``forensics parse`` reads it (sniffed): its source, events and metrics."""
    path = GOLDEN / f"{name}.log"
    parsed = parse_bytes(path.read_bytes(), file=path.name, source="auto", all_lines=all_lines)
    return parsed.source, pl.from_arrow(parsed.events), pl.from_arrow(parsed.metrics)  # type: ignore[return-value]


def _text(data: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    result = joblog.parse(data.encode(), file="job.log")
    return pl.from_arrow(result.events), pl.from_arrow(result.metrics)  # type: ignore[return-value]


def _events(events: pl.DataFrame) -> list[tuple]:
    return [(r["line"], r["kind"], r["code"], json.loads(r["detail"]).get("metric"))
            for r in events.filter(pl.col("kind") != "train.step").filter(pl.col("kind") != "other").iter_rows(named=True)]  # fmt: skip


def _metric(metrics: pl.DataFrame, name: str) -> list[tuple]:
    return [(s, v) for s, v in metrics.filter(pl.col("name") == name).select("step", "value").iter_rows()]


# ------------------------------------------------------------------------------ trainers read at all


@pytest.mark.parametrize("name", [
    "trainlog-fairseq-2019-progress-pipe-overflow-warning-loss-scale-halving-01",
    "trainlog-fairseq-2019-epoch-summary-overflow-cascade-to-min-scale-traceback-01",
    "trainlog-fairseq-2020-pipe-logger-train-inner-note-overflow-loss-scale-0-01",
    "trainlog-keras-2016-epoch-end-loss-nan-acc-val-loss-nan-01",
    "trainlog-keras-2018-epoch-1-of-1-ms-step-all-nan-01",
    "trainlog-keras-per-batch-loss-nan-mse-nan-glued-user-print-01",
    "trainlog-keras-tf2-terminateonnan-invalid-loss-glued-loss-inf-01",
    "trainlog-litgpt-2024-epoch-iter-step-loss-train-val-na-01",
    "trainlog-litgpt-derived-padded-iter-step-seconds-grep-output-01",
    "trainlog-nemo2-bionemo-training-epoch-iteration-reduced-train-loss-timing-01",
    "trainlog-custom-realnvp-arrow-average-train-loss-nan-01",
])  # fmt: skip
def test_files_of_trainer_lines_sniff_as_training_logs(name: str) -> None:
    path = GOLDEN / f"{name}.log"
    assert sources.sniff(path.read_text("utf-8", "replace"))[0] == "trainlog"


def test_fairseq_progress_lines_and_overflows_of_every_generation() -> None:
    _, events, metrics = _parse("trainlog-fairseq-2019-progress-pipe-overflow-warning-loss-scale-halving-01")
    assert _metric(metrics, "loss")[0] == (190, 14.351)  # the step is num_updates, not the batch (200 / 1374)
    assert _metric(metrics, "grad_norm")[0] == (190, 3.901)
    assert _metric(metrics, "loss_scale")[0] == (190, 0.062)
    overflows = events.filter(pl.col("kind") == "train.overflow")
    assert [json.loads(d)["new_scale"] for d in overflows.get_column("detail")][:2] == [0.0625, 0.03125]
    _, events, metrics = _parse("trainlog-fairseq-2020-pipe-logger-train-inner-note-overflow-loss-scale-0-01")
    assert _metric(metrics, "loss") == [(695, 9.803), (700, 9.44)]  # the epoch summary, then train_inner
    assert (events.get_column("kind") == "train.overflow").sum() == 2  # "| fairseq.trainer | NOTE: overflow …"
    _, events, _ = _parse("trainlog-fairseq-2019-epoch-summary-overflow-cascade-to-min-scale-traceback-01")
    scales = [json.loads(d)["new_scale"] for d in events.filter(pl.col("kind") == "train.overflow").get_column("detail")]
    assert len(scales) == 12 and scales[-1] == 0.0001220703125
    fields, _, _ = joblog.parse_record("FloatingPointError: Minimum loss scale reached (0.0001). Your loss is probably exploding.")
    assert fields is not None and (fields["kind"], fields["detail"]["at_minimum"]) == ("train.overflow", True)


def test_keras_progress_lines_per_epoch_and_per_batch() -> None:
    _, events, metrics = _parse("trainlog-keras-2016-epoch-end-loss-nan-acc-val-loss-nan-01")
    assert _events(events) == [(4, "train.loss_nonfinite", 9595, "loss")]
    assert _metric(metrics, "loss")[0] == (9595, 0.6242)
    _, events, metrics = _parse("trainlog-keras-per-batch-loss-nan-mse-nan-glued-user-print-01", all_lines=True)
    assert _events(events) == [(2, "train.loss_nonfinite", 2, "loss")]  # every bar its own line, not a kernel record
    assert events.height == 13 and _metric(metrics, "loss")[0] == (1, 0.0838)
    assert not {"eta"} & set(metrics.get_column("name"))
    _, events, _ = _parse("trainlog-keras-tf2-terminateonnan-invalid-loss-glued-loss-inf-01")
    assert _events(events) == [(4, "train.loss_nonfinite", 4, "loss")]
    fields, _, _ = joblog.parse_record("Batch 3: Invalid loss, terminating training")  # TerminateOnNaN on its own line
    assert fields is not None and fields["kind"] == "train.loss_nonfinite"


def test_litgpt_2024_and_nemo2_step_lines() -> None:
    _, _, metrics = _parse("trainlog-litgpt-2024-epoch-iter-step-loss-train-val-na-01")
    assert _metric(metrics, "loss")[0] == (1, 3.724)
    assert _metric(metrics, "step_time_s")[0] == (1, pytest.approx(0.04573))
    _, _, metrics = _parse("trainlog-litgpt-derived-padded-iter-step-seconds-grep-output-01")
    assert _metric(metrics, "step_time_s")[:2] == [(1, 103.335), (2, 7.555)]
    _, _, metrics = _parse("trainlog-nemo2-bionemo-training-epoch-iteration-reduced-train-loss-timing-01")
    assert _metric(metrics, "loss")[0] == (120, 1.233)
    assert _metric(metrics, "step_time_s")[0] == (120, 0.03146)


def test_paddle_nanxxx_and_quoted_keys_are_nan() -> None:
    _, events, metrics = _parse("trainlog-paddleocr-2.1-root-info-loss-nanxxx-01")
    assert _events(events) == [(6, "train.loss_nonfinite", 10, "loss")]
    assert [str(v) for _, v in _metric(metrics, "loss")] == ["nan", "nan"]
    _, events, _ = _parse("trainlog-paddleocr-2.6-ppocr-global-step-ctc-sar-loss-nanxxx-01")
    assert _events(events) == [(1, "train.loss_nonfinite", 737800, "loss")]
    _, events, metrics = _parse("trainlog-paddleocr-1.1-dash-info-quoted-loss-nan-01")
    assert _events(events) == [(1, "train.loss_nonfinite", 2, "loss")]


def test_tf_cifar10_and_timm_step_lines() -> None:
    # TF models' cifar10_train.py (the lines of corpus/hw-tf-40042-cifar10-gpu-overheated-slowdown)
    events, metrics = _text("2020-06-11 12:33:17.831797: step 10960, loss = 0.98 (9134.5 examples/sec; 0.014 sec/batch)\n"
                            "2020-06-11 12:33:17.973054: step 10970, loss = nan (9061.4 examples/sec; 0.014 sec/batch)\n")  # fmt: skip
    assert _metric(metrics, "loss")[0] == (10960, 0.98)
    assert _metric(metrics, "step_time_s")[0] == (10960, 0.014)
    assert _metric(metrics, "examples_per_s")[0] == (10960, 9134.5)
    assert _events(events) == [(2, "train.loss_nonfinite", 10970, "loss")]
    # timm's train.py: the batch counts within an epoch that starts at 0
    events, metrics = _text(
        "Train: 0 [1250/1251 (100%)]  Loss: 6.912 (6.93)  Time: 0.412s,  621.45/s  (0.430s,  595.12/s)  LR: 1.000e-06  Data: 0.010 (0.012)\n"
        "Train: 1 [   0/1251 (  0%)]  Loss:  nan (nan)  Time: 3.529s,   72.55/s  (3.529s,   72.55/s)  LR: 2.008e-04  Data: 3.102 (3.102)\n"
    )  # fmt: skip
    assert _metric(metrics, "loss") == [(1250, 6.912), (1251, pytest.approx(float("nan"), nan_ok=True))]
    assert _metric(metrics, "lr")[0] == (1250, 1e-06) and _metric(metrics, "epoch") == [(1250, 0.0), (1251, 1.0)]
    assert _events(events) == [(2, "train.loss_nonfinite", 1251, "loss")]


def test_an_epoch_mean_loss_turning_nan() -> None:
    _, events, _ = _parse("trainlog-tqdm-epoch-bar-loss-postfix-sci-mean-training-loss-nan-01")
    assert [(line, kind) for line, kind, _, _ in _events(events)] == [(3, "train.loss_nonfinite")]
    _, events, _ = _parse("trainlog-custom-realnvp-arrow-average-train-loss-nan-01")  # then its validation loss
    assert [(line, kind) for line, kind, _, _ in _events(events)] == [(1, "train.loss_nonfinite"), (4, "train.loss_nonfinite")]


# ------------------------------------------------------------------------------ NaN and overflow evidence


def test_an_mmcv_line_pasted_without_its_logger_prefix() -> None:
    _, events, _ = _parse("trainlog-mmcv-mmocr-tab-grad-norm-nan-first-line-no-prefix-01")
    assert _events(events) == [(1, "train.grad_nonfinite", 100, "grad_norm")]


def test_megatron_nan_iteration_seen_only_as_a_missing_lm_loss() -> None:
    _, events, _ = _parse("trainlog-megatron-deepspeed-2024-nan-iteration-no-lm-loss-no-grad-norm-tgs-01")
    assert _events(events) == [(1, "train.loss_nonfinite", 9, "loss")]
    assert json.loads(events.get_column("detail")[0])["value"] == "missing"
    _, events, _ = _parse("trainlog-megatron-deepspeed-grad-norm-nan-no-lm-loss-tflops-01")
    assert _events(events) == [(1, "train.grad_nonfinite", 5426, "grad_norm")]  # the NaN seen names the onset


def test_megatron_skipped_iterations_are_overflows() -> None:
    _, events, _ = _parse("trainlog-megatron-lm-2022-bert-skipped-iterations-10-no-lm-loss-timers-01")
    overflow = events.filter(pl.col("kind") == "train.overflow").row(0, named=True)
    assert (overflow["line"], overflow["code"], json.loads(overflow["detail"])["value"]) == (11, 10, "10")
    assert (events.get_column("kind") == "train.loss_nonfinite").sum() == 0  # skipped, not NaN


def test_a_dict_naming_a_nan_grad_norm_beside_a_finite_loss_is_a_gradient_onset() -> None:
    _, events, _ = _parse("trainlog-hf-trl-orpo-dict-many-nan-keys-slash-names-01")
    assert _events(events) == [(1, "train.grad_nonfinite", None, "grad_norm")]


def test_apex_scales_written_with_an_exponent() -> None:
    _, events, _ = _parse("trainlog-apex-amp-gradient-overflow-single-space-denormal-e-202-scales-01")
    assert json.loads(events.get_column("detail")[0])["new_scale"] == 8.165126103939127e-202


# ------------------------------------------------------------------------------ metrics


def test_megatron_milliseconds_and_the_loss_named_loss() -> None:
    _, _, metrics = _parse("trainlog-megatron-bridge-bracket-timestamp-mtp-losses-01")
    assert _metric(metrics, "step_time_s")[0][1] == pytest.approx(26.813)
    assert _metric(metrics, "loss") and not _metric(metrics, "lm_loss")
    _, _, metrics = _parse("trainlog-detectron2-logfile-bracket-time-events-info-two-space-eta-01")
    assert _metric(metrics, "loss")[0] == (119, 9.214)  # total_loss


def test_thousands_separators_and_etas() -> None:
    _, _, metrics = _parse("trainlog-torchtitan-rank0-titan-prefix-grad-norm-padded-01")
    assert _metric(metrics, "tps")[0] == (14, 7282.0)
    _, _, metrics = _parse("trainlog-mmcv-2020-mmaction-no-logger-name-tab-epoch-01")
    assert "eta" not in set(metrics.get_column("name"))  # "eta: 2 days, 20:27:57" is no measure


def test_mmengine_steps_are_global_across_epochs() -> None:
    _, _, metrics = _parse("trainlog-mmengine-mmpretrain-mae-single-space-exp-name-lines-01")
    steps = [s for s, _ in _metric(metrics, "loss")]
    assert steps == sorted(steps) and steps[0] == 146 * 351 + 300  # Epoch(train) [147][300/351]
    assert _metric(metrics, "epoch")[0] == (steps[0], 147.0)


def test_a_dict_glued_after_a_tqdm_bar_takes_its_step() -> None:
    _, events, metrics = _parse("trainlog-hf-logging-ppo-tqdm-glued-dict-loss-nan-reward-01")
    assert _events(events) == [(10, "train.loss_nonfinite", 9, "loss")]
    assert [s for s, _ in _metric(metrics, "loss")] == [9, 19]


def test_a_renamed_key_keeps_its_name_beside_the_projects_own() -> None:
    _, metrics = _text("Epoch 0:   6%|██   | 32040/500150 [6:28:43<94:39:17,  1.37it/s, loss=2.6, reduced_train_loss=2.590]\n")
    assert _metric(metrics, "loss") == [(32040, 2.6)] and _metric(metrics, "reduced_train_loss") == [(32040, 2.59)]


@pytest.mark.parametrize(("name", "line", "step"), [
    ("trainlog-loguru-lion-rank-epoch-iter-bracket-loss-nan-01", 2, 104),  # "[Loss] nan | … | [step]   104 |"
    ("trainlog-darkflow-step-loss-padded-nan-moving-ave-elided-01", 2, 1655),  # "step 1655 - loss        nan"
    ("trainlog-python-logging-bracket-main-info-epoch-step-loss-nan-avg-escape-seq-01", 3, 100),
    ("trainlog-tf1-slim-step-total-loss-nan-global-step-sec-01", 2, 100),  # "step: 100 total_loss: nan"
    ("trainlog-custom-bare-epoch-iter-loss-equals-nan-time-01", 1, None),  # "333 154 Loss=nan Time=0.040"
    ("trainlog-custom-epoch-loss-colon-nan-gradnorm-tf-elided-01", 10, None),  # "epoch: 3451 loss: nan"
])  # fmt: skip
def test_any_other_line_printing_a_loss_turning_nan(name: str, line: int, step: int | None) -> None:
    source, events, _ = _parse(name)
    assert source == "trainlog"
    assert _events(events) == [(line, "train.loss_nonfinite", step, "loss")]


def test_fairseqs_validation_summary_is_no_step_line() -> None:
    _, _, metrics = _parse("trainlog-fairseq-2020-pipe-logger-train-inner-note-overflow-loss-scale-0-01")
    assert _metric(metrics, "loss") == [(695, 9.803), (700, 9.44)]


def test_a_loss_staying_at_half_again_its_level_is_a_spike_once() -> None:
    """A real litgpt log (losses 2.8-3.6 over 21 lines) gives no spike, nor does one line at twice its loss
    that comes back down (a bad batch); the log going on at twice its loss gives one ``train.loss_spike`` at
    the second such line, its median the level before the run, and reads in chunks as whole."""
    real = (GOLDEN / "trainlog-litgpt-2023-iter-step-loss-iter-time-optimizer-step-01.log").read_bytes()
    assert "train.loss_spike" not in parse_bytes(real, file="t").events.column("kind").to_pylist()
    once = real + b"iter 22 step 11: loss 6.5000, iter time: 700.00ms\niter 23 step 11: loss 3.1000, iter time: 700.00ms\n"
    assert "train.loss_spike" not in parse_bytes(once, file="t").events.column("kind").to_pylist()
    more = b"".join(b"iter %d step %d: loss %.4f, iter time: 700.00ms\n" % (22 + i, 11 + i // 2, 6.2 + i / 100)
                    for i in range(4))  # fmt: skip
    data = real + more
    events = parse_bytes(data, file="t").events.to_pylist()
    spikes = [e for e in events if e["kind"] == "train.loss_spike"]
    assert [(e["line"], e["code"], e["severity"]) for e in spikes] == [(real.count(b"\n") + 2, 11, "warning")]
    detail = json.loads(spikes[0]["detail"])
    assert detail["metric"] == "loss" and float(detail["value"]) == 6.21 and 2.8 < float(detail["median"]) < 3.6
    whole = [(e["line"], e["kind"]) for e in events]
    stream = io.BytesIO(data)
    chunked = [(e["line"], e["kind"]) for c in joblog.iter_parse(stream.read, source="trainlog", file="t", chunk_bytes=300)
               for e in c.events.to_pylist()]  # fmt: skip
    assert chunked == whole
