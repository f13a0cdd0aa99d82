"""The report's words: sentences and tables that render the studies' results.

Rendering only. Each function words a results dict that :mod:`gradlab.experiments` returned
(the verdicts in it are computed there, once); the report's sections, its key findings and the
generated blocks of the README and the docs all call these, so they cannot disagree.
"""

from __future__ import annotations

import re

from gradlab.experiments import digit_scenes, loss_comparison, p_vs_batch_size
from gradlab.experiments.statistics import separated
from gradlab.functional import HARMONIC_METHODS
from gradlab.report.summaries import VERDICT_WORDS, cell, run_name, trend

CHECK_WORDS = {"vs": "against", "fd": "finite differences", "eq37": "Eq. 37", "ap": "AP",
               "dcg": "DCG", "fappy": "FAPPY", "fastap": "FastAP"}  # fmt: skip


def check_label(name: str) -> str:
    """``"eq37_ap_log_vs_autograd"`` -> ``"Eq. 37 AP log against autograd"``.

    Example:
        >>> check_label("exact_vs_fd")
        'exact against finite differences'
    """
    return " ".join(CHECK_WORDS.get(word, word) for word in name.split("_"))


SETTING_WORDS = {
    "fixed_untrained": "At the untrained network",
    "fixed_trained": "At a fixed network trained with SmoothAP at m = 64",
    "trained_at_m": ("With one network fine-tuned at each m from the network trained at m = 64 "
                     "(same epochs)"),
}


def p_vs_batch_size_text(batch: dict, summary: dict | None = None) -> str:
    """What the P-vs-m study shows, setting by setting, with seed spreads.

    ``summary`` is :func:`gradlab.experiments.p_vs_batch_size.summarize` of ``batch`` (computed
    here when not given): the verdicts are read from it, never decided here.
    """
    summary = p_vs_batch_size.summarize(batch) if summary is None else summary
    sizes = batch["batch_sizes"]
    parts = [
        f"Batches of m = {sizes[0]} to {sizes[-1]} unseen 3-digit numbers, {batch['per_class']} "
        f"images per number and m/{batch['per_class']} numbers per batch (Smooth-AP's sampler), "
        f"{len(batch['seeds'])} seeds (each a different data set, initialization and batches)."
    ]
    for name, words in SETTING_WORDS.items():
        if name not in batch["settings"]:
            continue
        setting = batch["settings"][name]
        if min(min(values) for values in setting["P"]) > 0.999:
            parts.append(
                f"{words}: P = 1 at every m and every seed (all cosine scores lie within "
                "the operating region's width of each other), so this setting cannot show a trend."
            )
            continue
        sentence = (
            f"{words}: {trend(setting['P'], sizes, 'P')}; "
            f"{trend(setting['P_positive_negative'], sizes, 'the positive-negative share')}; "
            f"{trend(setting['P_negative_negative'], sizes, 'the negative-negative share')}."
        )
        if name == "trained_at_m":
            sentence += (
                f" (Optimizer steps per run: {setting['steps'][0]} at m={sizes[0]} down to "
                f"{setting['steps'][-1]} at m={sizes[-1]}.)"
            )
        parts.append(sentence)
    verdicts = []
    for name, words in (("fixed_trained", "at a fixed trained network"),
                        ("trained_at_m", "with one network fine-tuned per m")):  # fmt: skip
        change = summary["settings"].get(name, {}).get("change")
        off = summary["settings"].get(name, {}).get("off_diagonal")
        hidden = (f" (without each query's own entry, 1/m of P, it {off['change']})"
                  if off is not None and off["change"] not in (change, "within_spread")
                  else "")  # fmt: skip
        if change == "within_spread":
            verdicts.append(f"{words} P does not move beyond the seed spread{hidden}")
        elif change == "saturated":
            verdicts.append(f"{words} P is saturated, so it shows no trend")
        elif change is not None:
            verdicts.append(f"{words} P {change}")
    verdict = VERDICT_WORDS[summary["claim"]["verdict"]]
    miniature = VERDICT_WORDS[summary["claim"]["miniature"]["outcome"]]
    parts.append(
        f"Brown et al. (2020) report P rising with m, measured on Stanford Online Products with a "
        f"ResNet-50; here, on this miniature, {'; '.join(verdicts)}. The audit records the claim "
        f"as {verdict} (it needs the authors' data and network); its paired t-test over the "
        f"seeds, on the networks fine-tuned at each m, reads this miniature alone as: "
        f"{miniature}. At a fixed network, m "
        "changes only which items a batch holds (the diagonal's 1/m share; at small m a query's "
        "negatives come from few classes); beyond that, P moves with m only through what "
        "training at that m does to the scores."
    )
    return " ".join(parts)


def training_sentence(
    unseen_before: dict, unseen_after: dict, seen_before: dict, seen_after: dict
) -> str:
    """How mAP moved on the trained classes' held-out images and on the unseen classes.

    Example:
        >>> training_sentence({"mAP": 0.6}, {"mAP": 0.5}, {"mAP": 0.7}, {"mAP": 0.9})[:81]
        'mAP on held-out images of the training classes rises from 0.700 to 0.900; on the '
    """

    def change(before, after):
        delta = after["mAP"] - before["mAP"]
        return f"{'rises' if delta > 0 else 'falls'} from {before['mAP']:.3f} to {after['mAP']:.3f}"

    return (
        "mAP on held-out images of the training classes "
        f"{change(seen_before, seen_after)}; on the unseen classes it "
        f"{change(unseen_before, unseen_after)}. The untrained network's embeddings already "
        "retrieve well (the columns before training); the unseen 5-9 columns measure how much of "
        "what SmoothAP learns on 0-4 transfers."
    )


def timing_sentence(conditions: dict | None) -> str:
    """Where a table's times were taken (:func:`gradlab.experiments.runtime.timing_conditions`),
    or ``""`` for a result recorded without them.

    Example:
        >>> timing_sentence({"clock": "wall", "device": "cpu", "processor": "AMD EPYC",
        ...                  "cores": 2, "threads": 1, "processes": 2})
        'Times are wall-clock on AMD EPYC (2 cores), 1 torch thread per process, 2 training processes at once; other load on the machine moves them.'
    """  # noqa: E501
    if not conditions:
        return ""
    device, processor = conditions["device"], conditions["processor"]
    if not device.startswith("cpu"):
        return (f"Times are wall-clock on {processor} ({device}); other load on the machine "
                "moves them.")  # fmt: skip
    threads, processes, cores = (conditions[k] for k in ("threads", "processes", "cores"))
    at_once = ("one training process at a time" if processes == 1
               else f"{processes} training processes at once")  # fmt: skip
    return (f"Times are wall-clock on {processor} ({cores} core{'s' * (cores != 1)}), "
            f"{threads} torch thread{'s' * (threads != 1)} per process, {at_once}; other load "
            "on the machine moves them.")  # fmt: skip


def loss_comparison_text(results: dict, summary: dict | None = None) -> str:
    """Which losses beat the untrained network and are ranked, which are listed apart and why,
    and what the comparison can and cannot show.

    ``summary`` is :func:`gradlab.experiments.loss_comparison.summarize` of ``results``
    (computed here when not given).
    """
    summary = loss_comparison.summarize(results) if summary is None else summary
    text = best_loss_sentence(results, summary)
    if summary["tied"]:
        text += (
            f" Within the seed spread of it (gap below the sum of the two stds): "
            f"{', '.join(summary['tied'])}."
        )
    if summary["behind"]:
        text += f" Behind it by more than the spread: {', '.join(summary['behind'])}."
    text += apart_text(results, summary)
    return text + " " + scope_sentence(results)


def best_loss_sentence(results: dict, summary: dict) -> str:
    """The best of the losses that beat the untrained network by more than the seed spread.

    Example:
        >>> results = {"losses": {"A": {"metrics": {"MAP@R": [0.4, 0.6]}}},
        ...            "before": {"MAP@R": [0.1, 0.1]}}
        >>> best_loss_sentence(results, {"best": "A", "metric": "MAP@R"})
        'Best MAP@R among the losses that beat the untrained network (0.100 ± 0.000) by more than the seed spread: A (0.500 ± 0.100).'
    """  # noqa: E501
    metric, best = summary["metric"], summary["best"]
    before = cell(results["before"][metric])
    if summary.get("single_seed"):
        return (f"One seed: the losses are not ranked against the untrained network's {metric} "
                f"({before}) or one another, as one seed measures no spread to compare their "
                "gaps with (run two seeds or more).")  # fmt: skip
    if best is None:
        return (f"No loss beats the untrained network's {metric} ({before}) by more than the "
                "seed spread.")  # fmt: skip
    values = results["losses"][best]["metrics"][metric]
    return (f"Best {metric} among the losses that beat the untrained network ({before}) by more "
            f"than the seed spread: {best} ({cell(values)}).")  # fmt: skip


def apart_text(results: dict, summary: dict) -> str:
    """The losses listed apart (not ranked), each with its measured reason; empty if none.

    Example:
        >>> runs = {"B": {"metrics": {"MAP@R": [0.1, 0.1]}, "initial_gradient_norm": [0.0, 0.0]}}
        >>> reason = {"gap": 0.0, "spread": 0.0, "no_gradient": True, "initial_gradient_norm": 0.0}
        >>> summary = {"metric": "MAP@R", "apart": {"B": reason}}
        >>> apart_text({"losses": runs, "initial_score_range": [0.001]}, summary)[:60]
        ' Listed apart, not ranked (MAP@R not above the untrained net'
    """
    if not summary["apart"]:
        return ""
    metric = summary["metric"]
    parts = [f"{name}, {cell(results['losses'][name]['metrics'][metric])}: "
             f"{_apart_reason(results, reason)}"
             for name, reason in summary["apart"].items()]  # fmt: skip
    if summary.get("single_seed"):  # set apart for its gradient alone: no spread was measured
        return f" Listed apart: {'; '.join(parts)}."
    return (f" Listed apart, not ranked ({metric} not above the untrained network's by more than "
            f"the seed spread): {'; '.join(parts)}.")  # fmt: skip


def _apart_reason(results: dict, reason: dict) -> str:
    """One loss's measured reason, in words."""
    if reason["no_gradient"]:
        spread = max(results.get("initial_score_range", [float("nan")]))
        return (
            "loss gradient exactly 0 on the first batch at the initialization in every seed "
            f"(the untrained network's cosine scores of a batch span at most {spread:.4f})"
        )
    words = (f"gap to the untrained network {reason['gap']:+.4f} against a spread of "
             f"{reason['spread']:.4f}")  # fmt: skip
    steps = results.get("settings", {}).get("gradient_steps")
    if "early_gradient_norm" in reason and steps:
        words += (f"; loss gradient norm over the first {steps} steps "
                  f"{reason['early_gradient_norm']:.3g}")  # fmt: skip
    elif "initial_gradient_norm" in reason:
        words += f"; loss gradient norm at the initialization {reason['initial_gradient_norm']:.3g}"
    return "; ".join([words, *loss_change_words(reason)])


def loss_change_words(reason: dict) -> list[str]:
    """``["training loss fell from A to B"]`` (first step, mean of the last 10) where both are
    measured, else ``[]``.

    Example:
        >>> loss_change_words({"initial_loss": 0.8, "final_loss": 0.4})
        ['training loss fell from 0.800 to 0.400']
    """
    if "initial_loss" not in reason or "final_loss" not in reason:
        return []
    change = "rose" if reason["final_loss"] > reason["initial_loss"] else "fell"
    return [f"training loss {change} from {reason['initial_loss']:.3f} to "
            f"{reason['final_loss']:.3f}"]  # fmt: skip


def scope_sentence(results: dict) -> str:
    """What the comparison can and cannot show, from its settings."""
    config = results.get("settings", {})
    sweep = max((len(run.get("sweep", {}).get("candidates", [])) for run in
                 results["losses"].values()), default=0)  # fmt: skip
    chosen = (
        f", each loss's hyperparameters chosen from at most {sweep} settings on held-out "
        "training numbers"
        if sweep > 1
        else ", each loss at its paper's settings"
    )
    return (
        f"This ranks the losses for one small CNN trained from scratch for "
        f"{config.get('steps', '?')} steps, {len(results.get('seeds', []))} seeds{chosen}; "
        "it cannot show how they rank with a pre-trained backbone, longer training or a "
        "wider search, as on CUB-200 or Stanford Online Products."
    )


def sweep_lines(results: dict) -> list[str]:
    """A markdown table of each loss's sweep: validation MAP@R per candidate and the seeds
    that chose it; empty where no loss has more than one candidate."""
    rows = []
    for name, run in results["losses"].items():
        sweep = run.get("sweep")
        if not sweep or len(sweep["candidates"]) < 2:
            continue
        for index, params in enumerate(sweep["candidates"]):
            values = [per_seed[index] for per_seed in sweep["validation"]]
            chosen = [str(seed) for seed, pick in zip(results["seeds"], sweep["chosen"],
                                                      strict=True) if pick == index]  # fmt: skip
            setting = ", ".join(f"{key} {value:g}" for key, value in params.items())
            rows.append(f"| {name} | {setting} | {cell(values)} | {', '.join(chosen) or '-'} |")
    if not rows:
        return []
    return ["| loss | setting | validation MAP@R | chosen in seeds |", "| --- | --- | --- | --- |",
            *rows]  # fmt: skip


def unswept_sentence(results: dict) -> str:
    """The losses trained at one setting, not swept, with that setting: their place in the
    ranking may be their setting's (a baseline ranked last at one margin is not shown to be
    worse at its best); empty when every loss was swept.

    Example:
        >>> sentence = unswept_sentence({"losses": {
        ...     "Contrastive": {"sweep": {"candidates": [{"margin": 0.5}]}},
        ...     "FastAP": {"sweep": {"candidates": [{"bins": 20}, {"bins": 10}]}}}})
        >>> sentence.split("; the ranking")[0]
        'Trained at one setting each, not swept: Contrastive (margin 0.5)'
    """
    single = []
    for name, run in results["losses"].items():
        candidates = (run.get("sweep") or {}).get("candidates") or []
        if len(candidates) == 1:
            setting = ", ".join(f"{key} {value:g}" for key, value in candidates[0].items())
            single.append(f"{name} ({setting})" if setting else name)
    if not single:
        return ""
    return (f"Trained at one setting each, not swept: {'; '.join(single)}; the ranking does "
            "not show how they do at other settings.")


def scenes_text(results: dict, summary: dict | None = None) -> str:
    """Best R@1 each way, and per encoder the loss with the best rsum, against the seed spread,
    among the runs above twice chance; the others listed apart with their numbers; the scope.

    ``summary`` is :func:`gradlab.experiments.digit_scenes.summarize` of ``results`` (computed
    here when not given).
    """
    summary = digit_scenes.summarize(results) if summary is None else summary
    parts = best_recall_sentences(results, summary)
    for encoder, best in summary["best_rsum"].items():
        if best["loss"] is None:
            parts.append(f"{encoder}: no loss above {_chance_words(summary)}"
                         f"{_uncollapsed(summary, encoder)}, so its losses are not ranked.")
            continue
        rsum = results["runs"][encoder][best["loss"]]["recall"]["rsum"]
        sentence = f"{encoder}: highest rsum with {best['loss']} ({cell(rsum, 1)})"
        if best["tied"]:
            sentence += (f", not separated from {', '.join(best['tied'])} by more than the seed "
                         "spread.")  # fmt: skip
        elif len(results["runs"][encoder]) - len(summary["apart"][encoder]) > 1:
            sentence += ", ahead of the other compared losses by more than the seed spread."
        else:
            sentence += (f", the only one of its losses above {_chance_words(summary)}"
                         f"{_uncollapsed(summary, encoder)}.")  # fmt: skip
        parts.append(sentence)
    parts += [scenes_apart_text(summary), scenes_scope_sentence(results)]
    return " ".join(part for part in parts if part)


def _uncollapsed(summary: dict, encoder: str) -> str:
    """``" whose embeddings did not collapse"`` where one of ``encoder``'s runs collapsed."""
    collapsed = any(numbers.get("collapsed") and not numbers["below_chance"]
                    for numbers in summary["apart"][encoder].values())  # fmt: skip
    return " whose embeddings did not collapse" if collapsed else ""


def _chance_words(summary: dict) -> str:
    return f"{summary['chance_factor']:g} x chance R@1 both ways"


def scenes_apart_text(summary: dict) -> str:
    """The (encoder, loss) runs listed apart, each with its measured R@1 both ways and its
    training loss: those that did not train (R@1 below the chance gate; a modality that also
    collapsed is named with its uniformity), then those whose embeddings collapsed
    (:func:`collapse_words`), with their uniformity; empty if none.

    Example:
        >>> summary = {"chance": {"i2t": 0.002, "t2i": 0.002}, "chance_factor": 2.0,
        ...            "apart": {"VSE++": {"NT-Xent": {"i2t_R@1": 0.012, "t2i_R@1": 0.001,
        ...                                            "below_chance": True,
        ...                                            "below_gate": ["t2i"]}}}}
        >>> scenes_apart_text(summary)
        'Listed apart, not ranked, as they did not train both ways here (mean R@1 not at least 2 x chance R@1 both ways; chance 0.0020 image -> caption, 0.0020 caption -> image): the VSE++ encoder with NT-Xent (R@1 0.0120 image -> caption, 0.0010 caption -> image, below the gate caption -> image only).'
    """  # noqa: E501
    untrained, collapsed = [], []
    for encoder, losses in summary["apart"].items():
        for loss, numbers in losses.items():
            words = [f"R@1 {numbers['i2t_R@1']:.4f} image -> caption, {numbers['t2i_R@1']:.4f} "
                     "caption -> image", *loss_change_words(numbers)]  # fmt: skip
            # which way: one direction may have trained
            if numbers["below_chance"] and len(numbers["below_gate"]) == 1:
                words.insert(1, f"below the gate {DIRECTION_WORDS[numbers['below_gate'][0]]} only")
            if numbers.get("collapsed"):
                values = numbers["collapsed"]
                uniformity = ", ".join(f"{modality} {value:.3f}"
                                       for modality, value in values.items())
                if numbers["below_chance"]:  # a single modality is named once, in the subject
                    shown = f"{next(iter(values.values())):.3f}" if len(values) == 1 else uniformity
                    words.append(f"its {' and '.join(values)} also collapsed (uniformity {shown}, "
                                 f"above the collapse threshold "
                                 f"{summary['collapse']['uniformity']:.3f})")
                else:
                    words.append(f"uniformity {uniformity}")
            (untrained if numbers["below_chance"] else collapsed).append(
                run_name(encoder, loss) + " (" + ", ".join(words) + ")")
    sentences = []
    if untrained:
        chance = summary["chance"]
        sentences.append(
            f"Listed apart, not ranked, as they did not train both ways here (mean R@1 not at "
            f"least {_chance_words(summary)}; chance {chance['i2t']:.4f} image -> caption, "
            f"{chance['t2i']:.4f} caption -> image): {'; '.join(untrained)}.")  # fmt: skip
    if collapsed:
        sentences.append(f"Listed apart, not ranked, as their embeddings collapsed "
                         f"({collapse_words(summary)}): {'; '.join(collapsed)}.")  # fmt: skip
    return " ".join(sentences)


DIRECTION_WORDS = {"i2t": "image -> caption", "t2i": "caption -> image"}
"""The retrieval directions of the scenes comparison, in the report's words."""


def collapse_words(summary: dict) -> str:
    """What a collapsed run is, from :func:`gradlab.experiments.digit_scenes.summarize`'s
    ``collapse``.

    Example:
        >>> collapse_words({"collapse": {"uniformity": -0.0335, "cosine": 0.9, "share": 0.1}})
        'R@1 above the chance gate, but the mean uniformity of its images or of its captions at the last logged step above -0.034 = log(1 - 0.1 (1 - exp(-2 x 0.2))), so that at most 10 % of their pairs are farther apart than cosine 0.9 (squared distance 0.2): the embeddings of that modality nearly coincide'
    """  # noqa: E501
    collapse = summary["collapse"]
    far = 2 - 2 * collapse["cosine"]
    return (f"R@1 above the chance gate, but the mean uniformity of its images or of its "
            f"captions at the last logged step above {collapse['uniformity']:.3f} = "
            f"log(1 - {collapse['share']:g} (1 - exp(-2 x {far:g}))), so that at most "
            f"{100 * collapse['share']:.0f} % of their pairs are farther apart than cosine "
            f"{collapse['cosine']:g} (squared distance {far:g}): the embeddings of that modality "
            "nearly coincide")


def scenes_scope_sentence(results: dict) -> str:
    """What the scenes comparison can and cannot show, from its settings."""
    config = results.get("settings", {})
    return (
        f"This compares losses on miniatures (a frozen digit backbone, {config.get('steps', '?')} "
        f"steps, {len(results.get('seeds', []))} seeds, every loss at its paper's setting); a "
        "loss listed apart did not train both ways in this setup, so the comparison says "
        "nothing about "
        "it, and none of it shows how the losses rank on Flickr30k or MS-COCO with pre-trained "
        "encoders and full training."
    )


def best_recall_sentences(results: dict, summary: dict) -> list[str]:
    """One sentence per direction: the best R@1 and the pairs within its seed spread, among
    the runs compared (none: a sentence that says so).

    Example:
        >>> run = {"recall": {"i2t_R@1": [0.5, 0.5], "t2i_R@1": [0.25, 0.25]}}
        >>> best = {"encoder": "VSRN", "loss": "NT-Xent", "tied": []}
        >>> summary = {"best_recall_at_1": {"i2t": best, "t2i": best}}
        >>> best_recall_sentences({"runs": {"VSRN": {"NT-Xent": run}}}, summary)[1]
        'Best caption -> image R@1: the VSRN encoder with NT-Xent, 0.250 ± 0.000.'
    """
    parts = []
    for direction, words in (("i2t", "image -> caption"), ("t2i", "caption -> image")):
        best = summary["best_recall_at_1"][direction]
        if best is None:
            parts.append(f"No {words} R@1 is compared: no run is above {_chance_words(summary)}.")
            continue
        values = results["runs"][best["encoder"]][best["loss"]]["recall"][f"{direction}_R@1"]
        sentence = (f"Best {words} R@1: {run_name(best['encoder'], best['loss'])}, "
                    f"{cell(values)}")
        if best["tied"]:
            named = ", ".join(run_name(encoder, loss) for encoder, loss in best["tied"])
            sentence += f"; within its seed spread: {named}"
        parts.append(sentence + ".")
    return parts


def anatomy_text(results: dict) -> str:
    """The last logged step's anatomy, per encoder, loss and direction."""
    lines = [
        "Read from dL/dS of each direction's own term (gradlab.functional.gradient_anatomy: an "
        "entry is active above 1 % of its query's largest |dL/dS|), at the last logged step, "
        "mean ± std (population) over seeds. An image query has 5 positive and "
        f"{5 * results['settings']['batch_images'] - 5} negative captions; a caption query 1 "
        f"positive and {results['settings']['batch_images'] - 1} negative images.",
        "",
        "| encoder | loss | active negatives i2t | t2i | queries without gradient i2t | t2i | "
        "hardest-10 % share i2t | t2i |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for encoder, runs in results["runs"].items():
        for loss, run in runs.items():
            anatomy = run["anatomy"]
            cells = []
            for key in ("active_negatives", "share_without_gradient", "hardest_10pct_share"):
                for direction in ("i2t", "t2i"):
                    cells.append(cell([seed[-1] for seed in anatomy[direction][key]], 2))
            lines.append(f"| {encoder} | {loss} | " + " | ".join(cells) + " |")
    lines += ["", anatomy_comparison(results)]
    return "\n".join(lines)


def anatomy_comparison(results: dict) -> str:
    """How many negatives SmoothAP updates at the end next to NT-Xent, per encoder and direction
    (Bleeker & de Rijke's comparison), and whether the gap exceeds the seed spread."""
    parts = []
    for encoder, runs in results["runs"].items():
        if "SmoothAP" not in runs or "NT-Xent" not in runs:
            continue
        for direction, words in (("i2t", "image queries"), ("t2i", "caption queries")):
            smooth = [s[-1] for s in runs["SmoothAP"]["anatomy"][direction]["active_negatives"]]
            softmax = [s[-1] for s in runs["NT-Xent"]["anatomy"][direction]["active_negatives"]]
            relation = (
                "more than the seed spread apart" if separated(smooth, softmax)
                else "within the seed spread"
            )  # fmt: skip
            parts.append(
                f"{encoder}, {words}: SmoothAP sends gradient to {cell(smooth, 1)} negatives, "
                f"NT-Xent to {cell(softmax, 1)} ({relation})."
            )
    return " ".join(parts)


GEOMETRY_COLUMNS = ("alignment", "uniformity_images", "uniformity_captions",
                    "rank_share_images", "rank_share_captions", "modality_gap")  # fmt: skip
"""The digit-scenes geometry in the table's column order
(:data:`gradlab.experiments.digit_scenes.GEOMETRY_KEYS`)."""


def geometry_text(results: dict) -> str:
    """The embeddings' geometry at the last logged step, per encoder and loss, and per encoder
    and modality the loss that keeps the highest effective rank (against the seed spread),
    among the runs that trained: those in ``results["summary"]["apart"]`` (listed apart, as
    :func:`scenes_text` says) are left out of that comparison.

    Example:
        >>> geometry = {key: [[0.5, 0.4], [0.5, 0.2]] for key in GEOMETRY_COLUMNS}
        >>> run = {"geometry": geometry, "anatomy": {"steps": [0, 5]}}
        >>> text = geometry_text({"runs": {"VSRN": {"NT-Xent": run}}})
        >>> print(text.splitlines()[-1].replace(" and ", "\\n"))
        VSRN at step 5: the highest effective rank under NT-Xent for the images (0.300 ± 0.100)
        under NT-Xent for the captions (0.300 ± 0.100).
    """
    lines = [
        "Each logged step's batch (its images and their captions, unit vectors), mean ± std "
        "(population) over seeds at the last logged step: alignment of the (image, caption) "
        "positives, mean "
        "|u - v|^2 (Wang & Isola 2020, Eq. 4; 0: they coincide); uniformity of each modality, "
        "log mean exp(-2 |u - v|^2) (Eq. 5; lower: more spread); effective rank of each "
        "modality's centred embeddings over min(N - 1, d) (RankMe, Garrido et al. 2023; 1: the "
        "spread around the centroid uses every direction alike, 1/min(N - 1, d): it lies along a "
        "line; it does not see how large that spread is, so a batch shrunk to nearly one point "
        "can read 1 there, as a uniformity near 0 shows); modality gap, the distance "
        "between the two centroids (Liang et al. 2022).",
        "",
        "| encoder | loss | alignment | uniformity images | captions | effective rank / "
        "min(N - 1, d) images | captions | modality gap |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    sentences = []
    for encoder, runs in results["runs"].items():
        for loss, run in runs.items():
            cells = [cell([seed[-1] for seed in run["geometry"][key]], 3)
                     for key in GEOMETRY_COLUMNS]  # fmt: skip
            lines.append(f"| {encoder} | {loss} | " + " | ".join(cells) + " |")
        apart = results.get("summary", {}).get("apart", {}).get(encoder, {})
        compared = {loss: run for loss, run in runs.items() if loss not in apart}
        if not compared:
            continue
        parts = []
        for modality in ("images", "captions"):
            last = {loss: [seed[-1] for seed in run["geometry"][f"rank_share_{modality}"]]
                    for loss, run in compared.items()}  # fmt: skip
            best = max(last, key=lambda loss, last=last: sum(last[loss]) / len(last[loss]))
            tied = [loss for loss in last if loss != best and not separated(last[loss], last[best])]
            part = f"under {best} for the {modality} ({cell(last[best])}"
            parts.append(part + (f"; within its seed spread: {', '.join(tied)})" if tied else ")"))
        step = next(iter(runs.values()))["anatomy"]["steps"][-1]
        joined = " and ".join(parts)
        named = [f"{loss} ({_scenes_apart_reason(apart[loss])})" for loss in apart]
        left_out = f" (listed apart, not compared: {', '.join(named)})" if apart else ""
        sentences.append(f"{encoder} at step {step}: the highest effective rank {joined}"
                         f"{left_out}.")
    return "\n".join([*lines, "", " ".join(sentences)])


def _scenes_apart_reason(numbers: dict) -> str:
    """Why a scenes run is listed apart, in a few words: ``"did not train both ways"`` (below
    the chance gate), ``"collapsed"``, or both."""
    reasons = ["did not train both ways"] if numbers["below_chance"] else []
    return "; ".join([*reasons, "collapsed"] if numbers.get("collapsed") else reasons)


def family_title(stem: str) -> str:
    """The title ``gradlab plot`` gives a quantity family (its file stem), for a caption.

    Example:
        >>> family_title("no_such_family")
        'no such family'
    """
    from gradlab.plotting.monitor import FAMILIES

    family = FAMILIES.get(stem)
    return family[0] if family else stem.replace("_", " ")


def relaxation_summary(results: dict) -> str:
    """One sentence per objective and variant: where it stays within tolerance."""
    lines = []
    for objective in ("ap", "dcg"):
        for method in HARMONIC_METHODS:
            runs = [
                r for r in results["runs"] if r["objective"] == objective and r["method"] == method
            ]
            settled = [r for r in runs if r["settles_at"] is not None]
            largest = max(r["gap_at_largest_scale"] for r in runs)
            where = (
                "for "
                + ", ".join(f"{r['bits']} bits from scale {r['settles_at']:.3g}" for r in settled)
                if settled
                else "at no scale tried"
            )
            lines.append(
                f"{objective.upper()} {method}: within {results['tolerance']:g} of the exact value "
                f"{where}; at the largest scale tried, {results['scales'][-1]:.3g}, the gap is "
                f"at most {largest:.2e}."
            )
    return " ".join(lines)


def lemma1_verdict(results: dict) -> str:
    """Plain statement of what the measurement shows about Lemma 1 as printed."""
    return (
        f"Over {results['configurations']} configurations (Delta = {results['delta']}), "
        f"dP_ij/ds_ik is non-zero for {100 * results['nonzero_share_in_pair_bin']:.0f}% of "
        f"negatives in the pair's bin, {100 * results['nonzero_share_in_bin_below']:.0f}% of "
        f"those in the bin below it and {100 * results['nonzero_share_elsewhere']:.0f}% elsewhere; "
        f"every non-zero value is {results['sign_of_nonzero']} and the closed form "
        f"(h_left or h_right)/(|N| Delta) matches autograd to "
        f"{results['max_abs_closed_form_error']:.1e}. Lemma 1 claims one bin and the value "
        f"-h_right; "
        + ("the measurement agrees with that value." if results["lemma_value_matches"]
           else "the measurement does not agree with that value.")
    )  # fmt: skip


def pml_grouping_sentence(result: dict) -> str:
    """What the measured batches show about pytorch-metric-learning's SmoothAP grouping.

    Every claim is read from ``result`` (:func:`gradlab.experiments.pml_grouping.grouping_check`):
    which grouping the library's loss equals in every batch, in which batches it equals SmoothAP
    over the classes, and how far apart the two are at the largest batch.

    Example:
        >>> rows = [dict(classes=2, per_class=2, batch=4, equals_blocks=True, equals_classes=True,
        ...              difference_classes=0.0),
        ...         dict(classes=28, per_class=4, batch=112, equals_blocks=True,
        ...              equals_classes=False, difference_classes=0.007)]
        >>> pml_grouping_sentence({"pml_version": "2.9.0", "agreement": 1e-6, "rows": rows})[:72]
        "pytorch-metric-learning 2.9.0's SmoothAPLoss equals SmoothAP over consec"
    """
    rows = result["rows"]
    version = result["pml_version"]
    blocks = [r for r in rows if r["equals_blocks"]]
    classes = [r for r in rows if r["equals_classes"]]
    square = [r for r in rows if r["classes"] == r["per_class"]]
    largest = max(rows, key=lambda r: r["batch"])

    def layouts(chosen: list[dict]) -> str:
        return ", ".join(f"{r['classes']} x {r['per_class']}" for r in chosen) or "none"

    if len(blocks) == len(rows):
        first = (f"pytorch-metric-learning {version}'s SmoothAPLoss equals SmoothAP over "
                 f"consecutive blocks of n_classes items in every measured batch (classes x "
                 f"items per class: {layouts(rows)}; to {result['agreement']:.0e})")  # fmt: skip
    else:
        first = (f"pytorch-metric-learning {version}'s SmoothAPLoss equals SmoothAP over "
                 f"consecutive blocks of n_classes items in {len(blocks)} of {len(rows)} "
                 f"measured batches ({layouts(blocks)})")  # fmt: skip
    where = "only where there are as many classes as items per class" if classes == square else (
        "in these batches")
    second = f"and SmoothAP over the true classes {where} ({layouts(classes)})"
    if largest["equals_classes"]:
        return f"{first}, {second}."
    return (f"{first}, {second}: at {largest['classes']} classes of {largest['per_class']} "
            f"(B = {largest['batch']}) it optimises another grouping, "
            f"{largest['difference_classes']:.1e} away from SmoothAP's loss.")  # fmt: skip


ACRONYMS = {"FAPPY": "the false positive probability loss of Zhong, Li & Li"}
"""Each short name the report uses -> what it stands for, said where the page first uses it."""


def spelled_out(markdown: str, acronyms: dict[str, str] = ACRONYMS) -> str:
    """``markdown`` with each of ``acronyms`` followed by its meaning, in parentheses, where the
    page first uses it in running text: not in a heading (its anchor would change), a table
    row (a cell names a row or column), a code block or span, a link's or image's brackets and
    target, a longer name (``FAPPYLoss``) or a possessive (``FAPPY's``, which the parentheses
    would split).

    Example:
        >>> text = "## FAPPY\\n\\n| FAPPY | 1 |\\n\\n![FAPPY](f/FAPPY.png) FAPPY's `FAPPY`, FAPPY."
        >>> print(spelled_out(text))
        ## FAPPY
        <BLANKLINE>
        | FAPPY | 1 |
        <BLANKLINE>
        ![FAPPY](f/FAPPY.png) FAPPY's `FAPPY`, FAPPY (the false positive probability loss of Zhong, Li & Li).
    """  # noqa: E501
    lines = markdown.split("\n")
    prose = []  # the lines of running text: outside code blocks, headings and tables
    fenced = False
    for index, line in enumerate(lines):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not (fenced or line.startswith(("    ", "\t")) or
                  line.lstrip().startswith(("#", "|"))):  # fmt: skip
            prose.append(index)
    for short, meaning in acronyms.items():
        word = re.compile(rf"(?<![\w`]){re.escape(short)}(?![\w`'\u2019])")
        for index in prose:
            line = lines[index]
            kept = [span.span() for span in re.finditer(r"`[^`]*`|!?\[[^\]]*\]\([^)]*\)", line)]
            found = next((m for m in word.finditer(line)
                          if not any(a <= m.start() < b for a, b in kept)), None)  # fmt: skip
            if found:
                lines[index] = f"{line[:found.end()]} ({meaning}){line[found.end():]}"
                break
    return "\n".join(lines)
