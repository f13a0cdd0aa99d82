"""The report's rendering of a study run on your own data (``gradlab study``).

``gradlab study NAME`` writes the study's JSON (the bundled study's schema) and hands it here:
the report's figure functions (:mod:`gradlab.plotting.studies`) draw it, its verdict functions
(:func:`gradlab.experiments.p_vs_batch_size.summarize`,
:func:`gradlab.experiments.loss_comparison.summarize`) read it and :func:`write_study_report`
writes ``summary.md`` and ``index.html`` beside it, as the report writes its own. The same call
renders the JSON of an earlier run (:func:`render_study_folder`).
"""

from __future__ import annotations

import json
import math
import os
import shlex
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from gradlab.errors import GradlabError
from gradlab.experiments import loss_comparison, p_vs_batch_size
from gradlab.experiments.digit_scenes import ANATOMY_KEYS
from gradlab.experiments.image_studies import left_out_examples
from gradlab.monitor.sinks import decode_value
from gradlab.paths import write_text
from gradlab.report.findings import Finding
from gradlab.report.html import markdown_to_html
from gradlab.report.prose import apart_text, best_loss_sentence, timing_sentence
from gradlab.report.summaries import cell
from gradlab.symbolic import batch_size as batch_size_claims
from gradlab.validation import count_noun

STUDY_FILES = {
    "p-vs-batch-size": "p_vs_batch_size.json",
    "losses": "loss_comparison_m*.json",
    "anatomy": "gradient_anatomy.json",
}
"""Study name -> the JSON file(s) ``gradlab study NAME`` writes (a glob for one per m)."""


STUDY_STAGING = ".gradlab-study."
"""The start of the name of the folder inside ``--out`` where a ``gradlab study`` run writes its
files before it moves them into place (each run its own, removed if it is interrupted or fails;
one killed outright leaves it)."""


def _stopped_run(folder: Path) -> str:
    """`` (but ...)`` naming the staging folders in ``folder`` that a run killed before moving its
    files into place left (:data:`STUDY_STAGING`), or ``""``."""
    left = sorted(path.name for path in Path(folder).glob(STUDY_STAGING + "*") if path.is_dir())
    if not left:
        return ""
    verb, runs = ("holds", "a run") if len(left) == 1 else ("hold", "runs")
    return (f" (but {', '.join(left)} {verb} the files of {runs} stopped before moving them into "
            "place: move them out to use them)")


def _other_studies(folder: Path) -> str:
    """``; it holds FILE: render it with gradlab study NAME --render --out FOLDER`` for each
    other study's JSON in ``folder`` (a ``--render`` of the wrong study), or ``""``."""
    held = [(name, sorted(path.name for path in Path(folder).glob(files)))
            for name, files in STUDY_FILES.items()]  # fmt: skip
    held = [(name, files) for name, files in held if files]
    return "".join(f"; it holds {', '.join(files)}: render it with gradlab study {name} --render "
                   f"--out {shlex.quote(str(folder))}" for name, files in held)  # fmt: skip


def held_study_results(folder: Path) -> tuple[list[Path], list[Path]]:
    """The results a ``gradlab study`` run left in ``folder``: (its study JSON, every file of
    the run that is there: the JSON, the figure drawn from each, ``summary.md``, ``index.html``).
    Nothing is held when no study JSON is there (the pages alone are no study)."""
    folder = Path(folder)
    found = sorted({path for files in STUDY_FILES.values() for path in folder.glob(files)
                    if path.is_file()})  # fmt: skip
    if not found:
        return [], []
    beside = [path.with_suffix(".png") for path in found]
    beside += [folder / "summary.md", folder / "index.html"]
    return found, sorted({*found, *(path for path in beside if path.is_file())})


def left_out_sentence(record: dict | None, evaluated: bool = False) -> str:
    """`` Left out of training: ...`` for a study whose JSON records classes left out of its
    training split (``training_classes``, written by ``gradlab study``), else ``""`` (none left
    out, or the JSON of a run that kept no such record); ``evaluated``: the study measured
    retrieval on a test split, which keeps every image.

    Example:
        >>> record = {"min_images_per_class": 4, "classes": 5, "images": 30,
        ...           "left_out_classes": 2, "left_out_images": 5,
        ...           "left_out_examples": {"17": 2, "23": 3}}
        >>> left_out_sentence(record)
        " Left out of training: 2 of the training split's 7 classes (5 of its 35 images), those \
with fewer than 4 images, as a batch takes 4 distinct images of each of its classes ('17' has 2, \
'23' has 3)."
    """
    if not record or not record.get("left_out_classes"):
        return ""
    count, images = record["left_out_classes"], record["left_out_images"]
    least = record["min_images_per_class"]
    text = (f" Left out of training: {count} of the training split's {count + record['classes']} "
            f"classes ({images} of its {images + record['images']} images), those with fewer "
            f"than {least} images, as a batch takes {least} distinct images of each of its "
            f"classes ({left_out_examples(record)}).")  # fmt: skip
    if evaluated:
        text += (" The test split keeps every image (a test image with no other image of its "
                 "class is ranked for the other queries but is no query itself).")  # fmt: skip
    return text


def _amp_sentence(settings: dict) -> str:
    """`` The backbone ran under torch.autocast ...`` for a run with ``--amp`` (its ``settings``
    hold ``amp`` and ``device``), whose numbers differ a little from a float32 run's; empty for
    a float32 run (or a JSON without ``amp``).

    Example:
        >>> _amp_sentence({"amp": True, "device": "cpu"})
        ' The backbone ran under torch.autocast in bfloat16 (--amp on cpu); the losses and measurements took its embeddings in float32.'
        >>> _amp_sentence({"amp": False, "device": "cuda"})
        ''
    """  # noqa: E501
    if settings.get("amp") is not True:
        return ""
    device = str(settings.get("device", "cpu"))
    kind = device.split(":")[0]  # as the study chose (image_studies' autocast and scaler)
    precision = {"cpu": "bfloat16", "cuda": "float16 with loss scaling"}.get(kind, "float16")
    return (f" The backbone ran under torch.autocast in {precision} (--amp on {device}); the "
            "losses and measurements took its embeddings in float32.")  # fmt: skip


WITHOUT_DIAGONAL = "P minus its diagonal part"
"""P less its diagonal part, a share of all m² pairs: the P table's own column name (the
Monitor's ``p_off_diagonal``, "P without the diagonal", divides the same pairs by m(m - 1))."""

PART_WORDS = {**batch_size_claims.PARTS, "P without the diagonal": WITHOUT_DIAGONAL}
"""The trends of P's parts (``summarize``'s keys) named as the audit and the P table name them."""


def p_vs_batch_size_markdown(measurement: dict, figure: str, where: str = ", on your data") -> str:
    """P per m (mean ± population std over seeds) and the paired t-test's trend of P and of its
    parts; ``where`` ends the heading."""
    summary = p_vs_batch_size.summarize(measurement)
    setting = measurement["settings"]["trained_at_m"]
    sizes = measurement["batch_sizes"]
    lines = [
        f"## P against the batch size (Brown et al., 2020, Fig. S7a){where}",
        "",
        f"{measurement['data']}; {measurement['model']}.{_amp_sentence(setting)}"
        f"{left_out_sentence(measurement.get('training_classes'))} For each m one network from "
        "the same "
        f"weights, {count_noun(setting['epochs'], 'epoch')} of Smooth-AP "
        f"(tau = {measurement['tau']}) with "
        f"{measurement['per_class']} images per class; P (slope above {measurement['eps']}) "
        f"averaged over the last epoch's batches. Mean ± std (population) over "
        f"{count_noun(len(measurement['seeds']), 'seed')}. P is a share of all m² score "
        "pairs, and so is "
        "P minus its diagonal part: the off-diagonal pairs in the region over m² (the "
        "Monitor's p_off_diagonal divides the same pairs by m(m - 1)). The positive-negative "
        "and negative-negative columns are shares of their own kind of pair (the query left "
        "out): how many of those pairs lie in the region.",
        "",
        "| m | steps | P | P minus its diagonal part | positive-negative | negative-negative |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for index, size in enumerate(sizes):
        column = {key: [run[index] for run in setting[key]] for key in setting
                  if isinstance(setting[key], list) and setting[key]
                  and isinstance(setting[key][0], list)}  # fmt: skip
        without = [p - d for p, d in zip(column["P"], column["P_diagonal"], strict=True)]
        lines.append(f"| {size} | {setting['steps'][index]} | {cell(column['P'], 4)} | "
                     f"{cell(without, 4)} | {cell(column['P_positive_negative'], 4)} | "
                     f"{cell(column['P_negative_negative'], 4)} |")  # fmt: skip
    trend = summary["settings"].get("trained_at_m", {})
    if trend:
        named = [(PART_WORDS.get(key, key), word) for key, word in trend["parts"].items()]
        parts = "; ".join(f"{'and ' if name == WITHOUT_DIAGONAL else ''}{name}: {word}"
                          for name, word in named)  # fmt: skip
        tested = trend.get("trend_detail", "") if len(sizes) > 1 else ""  # what it rests on
        sentence = p_vs_batch_size.trend_sentence(measurement, trend["trend"], tested)
        lines += ["", f"{sentence}." + (f" Its parts, each a share of the m² pairs: {parts}."
                                        if len(sizes) > 1 else "")]  # fmt: skip
    lines += ["", f"![P and the close pairs against m: every seed faint, mean and std as error "
              f"bars]({figure})"]  # fmt: skip
    return "\n".join(lines)


def loss_comparison_markdown(results: dict, figure: str, where: str = ", on your data") -> str:
    """The losses' retrieval on the test split and their cost per step, as the report's table;
    ``where`` ends the heading."""
    config = results["settings"]
    order = ("recall@1", "recall@2", "recall@4", "recall@8", "mAP", "R-Precision", "MAP@R")
    metrics = [metric for metric in order if metric in results["before"]]
    lines = [
        f"## Ranking losses at m = {config['batch_size']}{where}",
        "",
        f"{config['data']}; {config['model']}.{_amp_sentence(config)}"
        f"{left_out_sentence(config.get('training_classes'), evaluated=True)} The same "
        "initialization and batches "
        f"({config['batch_size']} images: 4 of each of {config['classes_per_batch']} classes) and "
        f"{count_noun(config['steps'], 'Adam step')} for every loss; retrieval on the "
        f"{config['test_data']}, "
        f"every image querying all the others (the means run over the images with another "
        f"of their class). Mean ± std (population) "
        f"over {count_noun(len(results['seeds']), 'seed')}:",
        "",
        "| loss | " + " | ".join(metrics) + " | loss fwd+bwd (ms) | training step (ms) |",
        "| --- |" + " --- |" * (len(metrics) + 2),
        "| untrained | " + " | ".join(cell(results["before"][m]) for m in metrics) + " | | |",
    ]
    for name, run in results["losses"].items():
        timing = (f"{cell([1e3 * v for v in run['loss_seconds']], 2)} | "
                  f"{cell([1e3 * v for v in run['step_seconds']], 1)}")  # fmt: skip
        lines.append(f"| {name} | " + " | ".join(cell(run["metrics"][m]) for m in metrics)
                     + f" | {timing} |")  # fmt: skip
    timing = timing_sentence(config.get("timing"))
    lines += ["", *([timing, ""] if timing else []), _losses_text(results), "",
              f"![Each loss's retrieval on the test split (dots: seeds, bars: mean ± std; "
              f"dashed: untrained) and its own cost per step]({figure})"]  # fmt: skip
    return "\n".join(lines)


def _losses_text(results: dict) -> str:
    """The verdicts of :func:`gradlab.experiments.loss_comparison.summarize`, in words that hold
    for any backbone (batch norm and augmentation move a network whose loss has no gradient)."""
    summary = loss_comparison.summarize(results)
    text = best_loss_sentence(results, summary)
    if summary["tied"]:
        text += (" Within the seed spread of it (gap below the sum of the two stds): "
                 f"{', '.join(summary['tied'])}.")  # fmt: skip
    if summary["behind"]:
        text += f" Behind it by more than the spread: {', '.join(summary['behind'])}."
    return text + apart_text(results, summary) + _alike_text(results)


def _alike_text(results: dict) -> str:
    """A note when every loss gave the very same retrieval: the losses were not told apart,
    whether that retrieval is the untrained network's (nothing moved) or another (see
    docs/your-data.md: batch normalization's running statistics alone can move the network so
    in a few steps at a tiny lr)."""
    runs = list(results["losses"].values())
    if len(runs) < 2 or any(run["metrics"] != runs[0]["metrics"] for run in runs[1:]):
        return ""
    config = results["settings"]
    lr = f" at lr {config['lr']:g}" if "lr" in config else ""
    if all(runs[0]["metrics"][m] == results["before"].get(m) for m in runs[0]["metrics"]):
        return (f" Every loss gave the untrained network's retrieval in every seed: these "
                f"{config['steps']} steps{lr} did not move it, so they did not tell the "
                "losses apart; train longer or at a larger lr to compare the losses.")  # fmt: skip
    return (f" Every loss gave the same retrieval in every seed, other than the untrained "
            f"network's: these {config['steps']} steps{lr} did not tell the "
            "losses apart. Training runs in train mode, where a backbone's batch normalization "
            "updates its running statistics from the training images whatever the loss, which "
            "alone can move the retrieval so; train longer or at a larger lr to compare the "
            "losses.")  # fmt: skip


def anatomy_markdown(results: dict, figure: str, where: str = ", on your data") -> str:
    """The anatomy at the last logged step and the test-split retrieval, per m and loss;
    ``where`` ends the heading."""
    config = results["settings"]
    lines = [
        f"## Gradient anatomy over training (Bleeker & de Rijke, 2022){where}",
        "",
        f"{config['data']}; {config['model']}.{_amp_sentence(config)}"
        f"{left_out_sentence(config.get('training_classes'), evaluated=True)} Each loss trains "
        "its own network from the same "
        f"weights on the same 4-per-class batches for {count_noun(config['epochs'], 'epoch')}; "
        "dL/dS of the "
        "batch's in-batch scores (each image querying the others) read by "
        "gradlab.functional.gradient_anatomy (an entry is active above 1 % of its query's "
        "largest |dL/dS|). At the last logged step, mean ± std (population) over "
        f"{count_noun(len(results['seeds']), 'seed')}; MAP@R on the {config['test_data']}:",
        "",
        "| batch | loss | active negatives | queries without gradient | hardest-10 % share "
        "| MAP@R |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for encoder, runs in results["runs"].items():
        for loss, run in runs.items():
            anatomy = run["anatomy"]
            direction = next(key for key in anatomy if key != "steps")
            cells = [cell([seed[-1] for seed in anatomy[direction][key]], 2)
                     for key in ANATOMY_KEYS]  # fmt: skip
            lines.append(f"| {encoder} | {loss} | " + " | ".join(cells)
                         + f" | {cell(run['recall']['MAP@R'])} |")  # fmt: skip
    lines += ["", "![How many negatives per query receive gradient, the share of queries "
              "without gradient and the hardest negatives' share, over training]"
              f"({figure})"]  # fmt: skip
    return "\n".join(lines)


def _draw(name: str, results: dict, folder: Path, prefix: str = "",
          where: str = ", on your data") -> tuple[list[Path], list[str]]:  # fmt: skip
    """Draw a study's figures into ``folder`` (file names after ``prefix``) and return them with
    the markdown of each of its sections, which cite a figure by ``prefix`` and its file name."""
    from gradlab.plotting.studies import (
        plot_loss_comparison,
        plot_p_vs_batch_size,
        plot_scene_anatomy,
    )

    stem = prefix.rsplit("/", 1)[-1]
    if name == "p-vs-batch-size":
        figures = [plot_p_vs_batch_size(results, folder / f"{stem}p_vs_batch_size.png")]
        return figures, [p_vs_batch_size_markdown(results, prefix + "p_vs_batch_size.png", where)]
    if name == "losses":
        figures, sections = [], []
        for size, measurement in results.items():
            file = f"loss_comparison_m{size}.png"
            figures.append(plot_loss_comparison(measurement, folder / f"{stem}{file}"))
            sections.append(loss_comparison_markdown(measurement, prefix + file, where))
        return figures, sections
    if name == "anatomy":
        figures = [plot_scene_anatomy(results, folder / f"{stem}gradient_anatomy.png")]
        return figures, [anatomy_markdown(results, prefix + "gradient_anatomy.png", where)]
    raise GradlabError(f"study must be one of {list(STUDY_FILES)}; got {name!r}")


def write_study_report(name: str, results: dict, out: Path) -> list[Path]:
    """Draw the figures of a ``gradlab study NAME`` result and write ``summary.md`` and
    ``index.html`` into ``out``; return the written files.

    ``results`` is the study's JSON: one measurement for ``p-vs-batch-size`` and ``anatomy``,
    ``{m: measurement}`` for ``losses``.
    """
    out = Path(out)
    figures, sections = _draw(name, results, out)
    text = "\n\n".join(["# gradlab study: " + name, *sections]) + "\n"
    write_text(out / "summary.md", text)
    write_text(out / "index.html", markdown_to_html(text, out, title=f"gradlab study {name}"))
    return [*figures, out / "summary.md", out / "index.html"]


REQUIRED_KEYS = {
    "p-vs-batch-size": (("batch_sizes", "data", "model", "per_class", "seeds", "tau", "eps",
                         "settings"), ("trained_at_m",)),
    "losses": (("settings", "seeds", "before", "losses"),
               ("batch_size", "classes_per_batch", "steps", "data", "model", "test_data")),
    "anatomy": (("settings", "seeds", "runs"), ("data", "model", "epochs", "test_data")),
}  # fmt: skip
"""Study name -> (top-level keys, ``settings`` keys) its JSON needs to be rendered."""


class StudyRun(NamedTuple):
    """The saved result of one ``gradlab study NAME`` run: the JSON as its renderers take it."""

    name: str
    folder: Path
    paths: list[Path]
    results: dict


def _read_study(name: str, path: Path, argument: str) -> dict:
    """One study JSON, checked for the keys its renderers read."""
    prefix = f"{argument}: " if argument else ""
    try:
        data = decode_value(json.loads(path.read_text(encoding="utf-8")))  # "NaN": NaN
    except UnicodeDecodeError as error:
        raise GradlabError(
            f"{prefix}{str(path)!r} is not UTF-8 text (byte {error.start}); expected the JSON of "
            f"gradlab study {name}"
        ) from None
    except json.JSONDecodeError as error:
        raise GradlabError(
            f"{prefix}{str(path)!r} is not JSON ({error.msg}, line {error.lineno}); expected "
            f"the JSON of gradlab study {name}"
        ) from None
    except RecursionError:  # lists in lists, deeper than Python's parser goes
        raise GradlabError(
            f"{prefix}{str(path)!r} nests its lists or objects too deeply to be read; expected "
            f"the JSON of gradlab study {name}"
        ) from None
    top, settings = REQUIRED_KEYS[name]
    missing = [key for key in top if not isinstance(data, dict) or key not in data]
    if not missing:
        held = data["settings"]
        missing = [f"settings.{key}" for key in settings
                   if not isinstance(held, dict) or key not in held]  # fmt: skip
    if not missing:
        missing = _nested_missing(name, data)
    if missing:
        raise GradlabError(f"{prefix}{str(path)!r} is not the JSON of gradlab study {name}: it "
                           f"lacks {', '.join(missing)}")  # fmt: skip
    for key, least in (("seeds", 0), *((("batch_sizes", 1),) if name == "p-vs-batch-size"
                                        else ())):  # fmt: skip
        values = data[key]  # what every table is laid out by: checked before the tables
        if not (isinstance(values, list) and values and all(
                isinstance(value, int) and not isinstance(value, bool) and value >= least
                for value in values)):  # fmt: skip
            raise GradlabError(f"{prefix}{str(path)!r} is not the JSON of gradlab study {name}: "
                               f"{key} must be a non-empty list of whole numbers >= {least}; "
                               f"got {json.dumps(values)[:80]}")  # fmt: skip
    seeds = data["seeds"]
    for where, values, inner in _per_seed_lists(name, data):
        rows_fit = inner is None or all(isinstance(row, list) and len(row) == inner[0]
                                        for row in values or [])  # fmt: skip
        if not (isinstance(seeds, list) and isinstance(values, list)
                and len(values) == len(seeds) and rows_fit):  # fmt: skip
            # a hand-merged JSON: its figures and tables would pair values with the wrong seed
            rows = f" of {inner[0]} values ({inner[1]})" if inner is not None else ""
            raise GradlabError(f"{prefix}{str(path)!r} is not the JSON of gradlab study {name}: "
                               f"{where} must hold one entry per seed of {seeds}{rows}; got "
                               f"{json.dumps(values)[:80]}")  # fmt: skip
        shares = where.startswith("settings.trained_at_m.P")  # shares of pairs, per size
        if shares or _retrieval_metric(where):  # numbers in [0, 1]: a hand edit shows here
            flat = [value for row in values for value in row] if shares else values
            bad = [value for value in flat if not _proportion(value)]
            if bad:
                raise GradlabError(f"{prefix}{str(path)!r} is not the JSON of gradlab study "
                                   f"{name}: {where} holds {json.dumps(bad[0])[:40]}, which is "
                                   "no proportion (a number from 0 to 1, or NaN)")  # fmt: skip
    return data


def _retrieval_metric(where: str) -> bool:
    """Whether the per-seed list at ``where`` holds a retrieval metric (recall@k, R-Precision,
    MAP@R: each a share of a query's results, from 0 to 1)."""
    return where.startswith("before.") or ".metrics." in where or ".recall." in where


def _proportion(value: object) -> bool:
    """Whether ``value`` is a proportion as a study writes one: a number from 0 to 1, or NaN (a
    share with nothing to count)."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and (math.isnan(value) or 0 <= value <= 1))  # fmt: skip


_KINDS = {dict: "an object", list: "a list"}


def _nested_missing(name: str, data: dict) -> list[str]:
    """The nested entries a study's renderers read that its JSON lacks (or holds as another
    kind), each as ``where (kind)``: every loss's metrics and timings, every run's recall and
    anatomy with its logged steps and at least one direction's table."""
    missing: list[str] = []

    def need(holder, key: str, where: str, kind: type):
        value = holder.get(key) if isinstance(holder, dict) else None
        if not isinstance(value, kind):
            missing.append(f"{where}{key} ({_KINDS[kind]})")
        return value

    if name == "losses":
        for loss, run in _items(need(data, "losses", "", dict)):
            need(run, "metrics", f"losses.{loss}.", dict)
            need(run, "loss_seconds", f"losses.{loss}.", list)
            need(run, "step_seconds", f"losses.{loss}.", list)
    elif name == "anatomy":
        for encoder, _ in _items(need(data, "runs", "", dict)):
            for loss, run in _items(need(data["runs"], encoder, "runs.", dict)):
                where = f"runs.{encoder}.{loss}."
                need(run, "recall", where, dict)
                anatomy = need(run, "anatomy", where, dict)
                if isinstance(anatomy, dict):
                    need(anatomy, "steps", f"{where}anatomy.", list)
                    if not any(isinstance(table, dict) for key, table in anatomy.items()
                               if key != "steps"):  # fmt: skip
                        missing.append(f"{where}anatomy's tables (an object per direction)")
    return missing


def _items(value) -> list:
    """A JSON object's items; none for anything else (its keys were checked already)."""
    return list(value.items()) if isinstance(value, dict) else []


def _per_seed_lists(name: str, data: dict):
    """``(where, list, None or (row length, what a row holds))`` of every list a study's JSON
    keeps one entry per seed in, for the checks of :func:`_read_study` (after
    :func:`_nested_missing`: every run is an object with its tables and logged steps)."""
    if name == "p-vs-batch-size":
        sizes = data["batch_sizes"]
        for key, values in _items(data["settings"]["trained_at_m"]):
            if isinstance(values, list) and values and isinstance(values[0], list):
                inner = (len(sizes), "one per batch size")  # a list: checked before
                yield f"settings.trained_at_m.{key}", values, inner
    elif name == "losses":
        for metric, values in _items(data["before"]):
            yield f"before.{metric}", values, None
        for loss, run in data["losses"].items():
            for metric, values in _items(run["metrics"]):
                yield f"losses.{loss}.metrics.{metric}", values, None
    else:
        for encoder, runs in data["runs"].items():
            for loss, run in runs.items():
                for metric, values in _items(run["recall"]):
                    yield f"runs.{encoder}.{loss}.recall.{metric}", values, None
                anatomy = run["anatomy"]
                inner = (len(anatomy["steps"]), "one per logged step")
                for direction, table in _items(anatomy):
                    for key, values in _items(table) if direction != "steps" else []:
                        yield f"runs.{encoder}.{loss}.anatomy.{direction}.{key}", values, inner


def load_study(name: str, folder: Path, argument: str = "") -> StudyRun:
    """Read the JSON a ``gradlab study NAME`` run left in ``folder``, checked for the keys its
    renderers read; a missing file or another schema raises :class:`GradlabError`."""
    folder = Path(folder)
    if name not in STUDY_FILES:
        raise GradlabError(f"study must be one of {list(STUDY_FILES)}; got {name!r}")
    paths = sorted(folder.glob(STUDY_FILES[name]))
    if not paths:
        prefix = f"{argument}: " if argument else ""
        if not folder.exists():
            raise GradlabError(f"{prefix}{str(folder)!r} does not exist; give the folder a "
                               f"gradlab study run wrote its {STUDY_FILES[name]} into")  # fmt: skip
        raise GradlabError(f"{prefix}{str(folder)!r} holds no {STUDY_FILES[name]} of a gradlab "
                           f"study{_stopped_run(folder)}{_other_studies(folder)}")  # fmt: skip
    if name == "losses":
        loaded = [_read_study(name, path, argument) for path in paths]
        first: dict = {}  # batch size -> its first file: a second one would replace it unsaid
        for data, path in zip(loaded, paths, strict=True):
            size = data["settings"]["batch_size"]
            if size in first:
                prefix = f"{argument}: " if argument else ""
                raise GradlabError(f"{prefix}{str(first[size])!r} and {str(path)!r} both hold "
                                   f"the losses study at batch size {size}; keep one of them "
                                   "in the folder")  # fmt: skip
            first[size] = path
        ran_on = [_ran_on(name, data) for data in loaded]  # the section's heading names one
        for path, where in zip(paths, ran_on, strict=True):
            if where != ran_on[0]:
                prefix = f"{argument}: " if argument else ""
                raise GradlabError(f"{prefix}{str(paths[0])!r} and {str(path)!r} hold losses "
                                   f"studies of different runs ({' with '.join(ran_on[0])}; "
                                   f"{' with '.join(where)}); keep one run's files in the "
                                   "folder")  # fmt: skip
        order = sorted(range(len(paths)), key=lambda i: loaded[i]["settings"]["batch_size"])
        results = {loaded[i]["settings"]["batch_size"]: loaded[i] for i in order}
        paths = [paths[i] for i in order]  # in the order of the results: one per section
    else:
        results = _read_study(name, paths[0], argument)
    return StudyRun(name, folder, paths, results)


RENDER_FAILURES = (LookupError, TypeError, ValueError, AttributeError, ArithmeticError,
                   StopIteration)
"""What a study's renderers raise on a JSON whose values are not the kind ``gradlab study``
writes (a hand-edited or hand-merged file): a missing key deeper down, a string where numbers
go, a number where a list goes."""


@contextmanager
def rendered_or_refused(run: StudyRun, argument: str = "") -> Iterator[None]:
    """Turn a failure of ``run``'s renderers inside the block (:data:`RENDER_FAILURES`) into
    one :class:`GradlabError` naming its files and what failed, instead of a traceback."""
    try:
        yield
    except RENDER_FAILURES as error:
        prefix = f"{argument}: " if argument else ""
        files = ", ".join(repr(str(path)) for path in run.paths)
        failure = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
        raise GradlabError(
            f"{prefix}{files} cannot be rendered as gradlab study {run.name} ({failure}): its "
            "values are not of the kinds the study writes (was it edited by hand?); restore "
            "the file or run the study again"
        ) from None


def check_study_folders(
    folders: list[Path], argument: str = "--studies", rendered: bool = False
) -> list[StudyRun]:
    """Every study saved in each of ``folders`` (folders written by ``gradlab study``), in the
    order given and, within a folder, in :data:`STUDY_FILES` order.

    Checked before any work: a missing folder, one named twice, one that holds no study JSON
    and a JSON without the keys its study's renderers read each raise :class:`GradlabError`
    naming ``argument``. ``rendered``: also render each study as the report would (its figures
    into a temporary folder, its tables and findings), so that a JSON whose values are not of
    the kinds the study writes is refused now, not after the report's own sections.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     try:
        ...         check_study_folders([Path(folder)])
        ...     except GradlabError as error:
        ...         print(str(error).split(" holds")[1])
         no study JSON (p_vs_batch_size.json, loss_comparison_m*.json, gradient_anatomy.json); \
give a folder written by gradlab study
    """
    runs, seen = [], {}
    for folder in map(Path, folders):
        if folder.resolve() in seen:  # one section per study: a second would repeat it
            raise GradlabError(f"{argument}: {str(folder)!r} names the folder "
                               f"{str(seen[folder.resolve()])!r} again; give each folder "
                               "once")  # fmt: skip
        seen[folder.resolve()] = folder
        if not folder.is_dir():
            raise GradlabError(f"{argument}: {str(folder)!r} is not a folder; give folders "
                               "written by gradlab study")  # fmt: skip
        names = [name for name, files in STUDY_FILES.items() if any(folder.glob(files))]
        if not names:
            raise GradlabError(f"{argument}: {str(folder)!r} holds no study JSON "
                               f"({', '.join(STUDY_FILES.values())}){_stopped_run(folder)}; give "
                               "a folder written by gradlab study")  # fmt: skip
        runs += [load_study(name, folder, argument) for name in names]
    if rendered:  # the report draws them again: their warnings are said there, once
        with tempfile.TemporaryDirectory() as scratch, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for number, run in enumerate(runs, 1):
                with rendered_or_refused(run, argument):
                    study_findings(study_report_section(run, Path(scratch), number)[0])
    return runs


def render_study_folder(name: str, folder: Path) -> list[Path]:
    """Render the JSON a ``gradlab study NAME`` run left in ``folder`` (figures, ``summary.md``,
    ``index.html``), e.g. after copying it from the GPU machine."""
    run = load_study(name, folder)
    # drawn beside the JSON in a folder of its own, then moved into place: a study that cannot
    # be rendered leaves no figure without its pages
    with rendered_or_refused(run, "--out"), tempfile.TemporaryDirectory(
        prefix=".gradlab-render.", dir=run.folder
    ) as scratch:
        drawn = write_study_report(name, run.results, Path(scratch))
        for path in drawn:
            os.replace(path, run.folder / path.name)
    return [run.folder / path.name for path in drawn]


def _measurements(run: StudyRun) -> list[dict]:
    """The run's measurements: one per batch size for ``losses``, else the one."""
    return list(run.results.values()) if run.name == "losses" else [run.results]


def _ran_on(name: str, measurement: dict) -> tuple[str, str]:
    """(data folder, backbone) from a measurement's ``data`` and ``model`` lines, as
    :mod:`gradlab.experiments.image_studies` writes them (``"NAME, train split (...)"``,
    ``"BACKBONE with a linear head to ..."``)."""
    described = measurement if name == "p-vs-batch-size" else measurement["settings"]
    data = str(described["data"]).split(",", 1)[0]
    return data, str(described["model"]).split(" with a linear head", 1)[0]


def study_report_section(run: StudyRun, out: Path, number: int) -> tuple[dict, str]:
    """A saved study as a section of the report in ``out``: its figures drawn into
    ``out / "figures"`` (named ``studyN_...``), its tables and verdicts as on the study's own
    page, its heading naming the data and the backbone it ran on.

    Returns the results the report keeps (the study's JSON, where it came from) and the
    markdown, one ``##`` heading per section of the study.
    """
    data, backbone = _ran_on(run.name, _measurements(run)[0])
    figures, sections = _draw(run.name, run.results, Path(out) / "figures",
                              prefix=f"figures/study{number}_",
                              where=f", your study on {data} with {backbone}")  # fmt: skip
    # each section names the one file it was read from (losses: one file per batch size)
    sections = [section.replace("\n\n", f"\n\nRead from `{path}`, written by `gradlab study "
                                f"{run.name}` at its own settings (the report's --quick does "
                                "not change them).\n\n", 1)
                for section, path in zip(sections, run.paths, strict=True)]  # fmt: skip
    results = {"study": run.name, "folder": str(run.folder), "data": data, "backbone": backbone,
               "files": [str(path) for path in run.paths],
               "figures": [f"figures/{figure.name}" for figure in figures],
               "results": run.results}  # fmt: skip
    return results, "\n\n".join(sections)


def study_findings(section: dict) -> list[Finding]:
    """The key findings of a study section (:func:`study_report_section`'s results): the P
    trend of :func:`gradlab.experiments.p_vs_batch_size.summarize`, the best loss of
    :func:`gradlab.experiments.loss_comparison.summarize` per m; the anatomy has no verdict."""
    on = f"In your study on {section['data']} with {section['backbone']}"
    results, figures = section["results"], section["figures"]
    if section["study"] == "p-vs-batch-size":
        trend = p_vs_batch_size.summarize(results)["settings"]["trained_at_m"]
        mean = (f"mean P {cell(trend['first'])} to {cell(trend['last'])}"
                if len(results["batch_sizes"]) > 1 else f"mean P {cell(trend['first'])}")
        sentence = p_vs_batch_size.trend_sentence(results, trend["trend"], mean)
        return [Finding(f"{on}, {sentence}.", figures[0])]
    if section["study"] == "losses":
        findings = []
        for (size, measurement), figure in zip(results.items(), figures, strict=True):
            sentence = best_loss_sentence(measurement, loss_comparison.summarize(measurement))
            findings.append(Finding(f"{on} at m = {size}, {sentence[:1].lower()}{sentence[1:]}",
                                    figure))  # fmt: skip
        return findings
    return []
