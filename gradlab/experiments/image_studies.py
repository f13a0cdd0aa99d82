"""The P-against-batch-size study on your own images and backbone (Brown et al., 2020, Smooth-AP
supplementary, Sec. 3 and Fig. S7a).

The protocol of the paper's Fig. S7a: for each mini-batch size m, one network starts from the
same weights (seeded, or a local checkpoint) and is trained with Smooth-AP (tau = 0.01) for
``epochs`` epochs of the 4-per-class sampler (m / 4 classes per batch); P (Eq. 1: the share of
difference-matrix entries whose sigmoid slope exceeds eps = 0.005) is averaged over the batches
of the last epoch. The result has the schema of the bundled study
(:func:`gradlab.experiments.p_vs_batch_size.measure`) with the one setting ``trained_at_m``, so
:func:`gradlab.experiments.p_vs_batch_size.summarize` and the report's figure read it as they
read the miniature's.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import torch
import torch.nn.functional as F

from gradlab.backbones import build_backbone
from gradlab.data import FixedCountBatches
from gradlab.data.image_folder import (
    ImageFolderSplit,
    check_image_groups,
    check_images,
    eval_transform,
    image_folder,
    train_transform,
)
from gradlab.errors import GradlabError
from gradlab.experiments.p_vs_batch_size import (
    KEYS,
    PER_CLASS,
    close_pair_proportions,
    p_decomposition,
)
from gradlab.experiments.runtime import (
    busy_machine_note,
    check_device,
    check_lr,
    check_seeds,
    timing_conditions,
)
from gradlab.functional import drop_diagonal
from gradlab.losses import SmoothAPLoss
from gradlab.memory import refuse_beyond_free
from gradlab.progress import progress
from gradlab.validation import check_positive_finite, check_positive_int, check_temperature

DEFAULT_BATCH_SIZES = (16, 32, 64, 128, 256)


def run_seed(seed: int, batch_size: int) -> int:
    """The seed of run (``seed``, m = ``batch_size``)'s batches and training crops:
    ``seed * 7919 + m``, distinct for every pair with m < 7919 (7919 is prime), so that no two
    runs of a study share their batches; pass it to :class:`gradlab.data.FixedCountBatches`
    and :class:`StudyImages` to draw a run's batches and crops again.

    Example:
        >>> run_seed(0, 64), run_seed(1, 64)
        (64, 7983)
    """
    return seed * 7919 + batch_size


def check_batch_sizes(
    batch_sizes: Sequence[int], classes: int | None = None, *, argument: str | None = None,
    split: str = "this split", left_out: dict | None = None,
) -> list[int]:  # fmt: skip
    """Batch sizes for the 4-per-class sampler: distinct positive multiples of 4 that hold at
    least two classes (a batch of one class has no negative: every batch would be degenerate),
    at most 4 x classes.

    ``argument`` names the sizes in the messages (default: "batch sizes", each a "batch size")
    and ``split`` the images they are drawn from (a command line passes its option,
    ``--batch-sizes``, and the split of its data folder). ``classes`` counts the classes that
    train; ``left_out``, the record of :func:`trainable_classes`, has the messages say which
    classes of the split were left out.

    Example:
        >>> check_batch_sizes([16, 64])
        [16, 64]
        >>> check_batch_sizes([16, -4], argument="--batch-sizes")
        Traceback (most recent call last):
        ...
        gradlab.errors.GradlabError: --batch-sizes must be a positive integer; got -4
    """
    if isinstance(batch_sizes, (str, bytes)) or not isinstance(batch_sizes, Iterable):
        example = ("[8, 16]" if isinstance(batch_sizes, (str, bytes))
                   else f"one size: [{batch_sizes!r}]")  # fmt: skip
        raise GradlabError(f"{argument or 'batch sizes'} must be a list of sizes "
                           f"({example}); got {batch_sizes!r}")  # fmt: skip
    sizes = list(batch_sizes)
    if not sizes:
        raise GradlabError(f"{argument or 'batch sizes'} must name at least one size; got none")
    repeated = next((size for size in sizes if sizes.count(size) > 1), None)
    if repeated is not None:  # a study keys its runs by m: a second run of m would merge in
        raise GradlabError(f"{argument or 'batch sizes'} must be distinct; got {repeated} more "
                           f"than once in {sizes}")  # fmt: skip
    argument = argument or "batch size"  # each size
    note = left_out_note(left_out)
    if classes is not None and classes < 2:
        raise GradlabError(f"{split} holds {classes} class(es){note}; a batch needs two (a query "
                           f"needs a negative)")  # fmt: skip
    for size in sizes:
        check_positive_int(argument, size)
        if size % PER_CLASS:
            raise GradlabError(
                f"{argument} must be a multiple of {PER_CLASS} ({PER_CLASS} images per class, "
                f"as Smooth-AP samples); got {size}"
            )
        if size < 2 * PER_CLASS:
            raise GradlabError(
                f"{argument} must hold at least two classes ({2 * PER_CLASS} or more, "
                f"{PER_CLASS} images per class): a batch of one class has no negative; got {size}"
            )
        if classes is not None and size > PER_CLASS * classes:
            raise GradlabError(
                f"{argument} must be at most {PER_CLASS} x {classes} classes = "
                f"{PER_CLASS * classes} for {split}{note}; got {size}"
            )
    return sizes


LEFT_OUT_NAMED = 5
"""How many left-out classes a study names (in its progress line and its messages)."""


def trainable_classes(dataset: ImageFolderSplit) -> tuple[ImageFolderSplit, dict]:
    """The split without its classes of fewer than 4 images, and the record of what was left out.

    A batch of the 4-per-class sampler (:class:`gradlab.data.FixedCountBatches`) takes 4
    distinct images of each of its classes, so a class of fewer images can be in no batch
    (Stanford Online Products has 2 to 12 images per product: many have 2 or 3). The studies
    train on the other classes; the evaluation split keeps every image.

    Returns:
        ``(kept, record)``. ``kept`` is ``dataset`` itself when every class has 4 or more images,
        else a copy without the others' images, its labels renumbered ``0..classes-1`` in their
        order. ``record``: ``{"min_images_per_class": 4, "classes", "images"`` (what trains),
        ``"left_out_classes", "left_out_images", "left_out_examples"}``, the last the first
        :data:`LEFT_OUT_NAMED` left-out classes in the split's order, each named as the data
        names it (folder, class_id, label) with its number of images.

    Example:
        >>> from PIL import Image
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp())
        >>> for name, count in (("cats", 4), ("dogs", 2), ("eels", 5), ("owls", 4), ("rats", 4),
        ...                     ("yaks", 4)):
        ...     (root / name).mkdir()
        ...     for index in range(count):
        ...         Image.new("RGB", (4, 4)).save(root / name / f"{index}.png")
        >>> kept, record = trainable_classes(image_folder(root, "train"))
        >>> kept.class_names, kept.labels.tolist()
        (['cats', 'eels'], [0, 0, 0, 0, 1, 1, 1, 1, 1])
        >>> record["left_out_classes"], record["left_out_images"], record["left_out_examples"]
        (1, 2, {'dogs': 2})
    """
    import dataclasses

    counts = torch.bincount(dataset.labels, minlength=len(dataset.class_names))
    small = counts < PER_CLASS
    named = torch.nonzero(small).flatten()[:LEFT_OUT_NAMED].tolist()
    record = {
        "min_images_per_class": PER_CLASS,
        "classes": int((~small).sum()),
        "images": int(counts[~small].sum()),
        "left_out_classes": int(small.sum()),
        "left_out_images": int(counts[small].sum()),
        "left_out_examples": {dataset.class_names[index]: int(counts[index]) for index in named},
    }
    if not record["left_out_classes"]:
        return dataset, record
    kept_classes = torch.nonzero(~small).flatten()
    renumbered = torch.full_like(counts, -1)
    renumbered[kept_classes] = torch.arange(len(kept_classes))
    keep = ~small[dataset.labels]
    kept = dataclasses.replace(
        dataset,
        paths=[path for path, keeps in zip(dataset.paths, keep.tolist(), strict=True) if keeps],
        labels=renumbered[dataset.labels[keep]],
        class_names=[dataset.class_names[index] for index in kept_classes.tolist()],
    )
    return kept, record


def left_out_examples(record: dict) -> str:
    """The left-out classes a record names, each with its images: ``'dogs' has 2, '17' has 3``,
    and how many more were left out.

    Example:
        >>> left_out_examples({"left_out_classes": 7, "left_out_examples": {"a": 2, "b": 3}})
        "'a' has 2, 'b' has 3 and 5 more"
    """
    examples = record.get("left_out_examples", {})
    text = ", ".join(f"{name!r} has {count}" for name, count in examples.items())
    more = record["left_out_classes"] - len(examples)
    return text + (f" and {more} more" if more > 0 else "")


def left_out_note(record: dict | None) -> str:
    """`` (the classes with 4 or more images; ... left out: ...)`` for a message about the classes
    that train, or ``""`` when none was left out."""
    if not record or not record["left_out_classes"]:
        return ""
    count = record["left_out_classes"]
    least = record["min_images_per_class"]
    return (f" (the classes with {least} or more images; {count} class{'es' if count > 1 else ''} "
            f"with fewer {'were' if count > 1 else 'was'} left out: "
            f"{left_out_examples(record)})")  # fmt: skip


def _say_if_busy(device: str, timed: bool) -> None:
    """After every check, before training on a CPU: that other processes hold the cores the
    study trains on, and the step times are taken on where it records them (``timed``:
    :func:`~gradlab.experiments.runtime.busy_machine_note`)."""
    if str(device).startswith("cpu"):
        note = busy_machine_note(torch.get_num_threads(), timed=timed)
        if note is not None:
            print(f"gradlab: {note}", file=sys.stderr, flush=True)


def _say_left_out(study: str, split: str, record: dict) -> None:
    """The study's progress line on the classes left out of training, if any."""
    if not record["left_out_classes"]:
        return
    least, count = record["min_images_per_class"], record["left_out_classes"]
    print(f"{study}: left out of training {count} of the "
          f"{count + record['classes']} classes of the {split} split "
          f"({record['left_out_images']} of its {record['left_out_images'] + record['images']} "
          f"images): a batch takes {least} distinct images of each of its classes and these "
          f"have fewer ({left_out_examples(record)})", file=sys.stderr, flush=True)  # fmt: skip


def p_vs_batch_size_on_images(
    data: str | Path,
    *,
    split: str = "train",
    layout: str = "auto",
    list_file: str | Path | None = None,
    backbone: str = "gradlab.backbones:tiny_resnet",
    weights: str | Path | None = None,
    embedding_dim: int = 512,
    image_size: int = 224,
    batch_sizes: Sequence[int] = DEFAULT_BATCH_SIZES,
    epochs: int = 1,
    seeds: Sequence[int] = (0,),
    device: str = "cpu",
    lr: float = 1e-5,
    amp: bool = False,
    workers: int = 0,
    tau: float = 0.01,
    eps: float = 0.005,
) -> dict:
    """P against m on an image folder, one network per (seed, m), the paper's protocol.

    Args:
        data: the image folder (:func:`gradlab.data.image_folder`).
        split, layout, list_file: which images train (see :func:`gradlab.data.image_folder`);
            a class of fewer than 4 images cannot fill a batch and is left out of training,
            said on stderr and recorded (:func:`trainable_classes`).
        backbone, weights, embedding_dim: the network (:func:`gradlab.backbones.build_backbone`).
        image_size: side of the training crops.
        batch_sizes: the m values, multiples of 4.
        epochs: epochs per m; P is averaged over the last one (the paper: one epoch).
        seeds: distinct whole numbers >= 0; each fixes the initial weights and the batches.
        device: ``"cpu"`` or ``"cuda"``.
        lr: Adam's learning rate (the paper fine-tunes at 1e-5).
        amp: mixed precision (bfloat16 on CPU, float16 with loss scaling on CUDA, float16 on MPS).
        workers: processes that load and augment the images (0: this one); the numbers do not
            depend on it (:class:`StudyImages`).
        tau, eps: the paper's temperature and slope threshold.

    Returns:
        ``{"batch_sizes", "data", "model", "training_classes", "per_class", "seeds", "tau",
        "eps", "settings": {"trained_at_m": {key: [[value per m] per seed] for key in KEYS,
        "steps", "epochs", "lr", "device", "amp", "image_size"}}}``; ``training_classes`` is
        :func:`trainable_classes`' record.

    Raises:
        GradlabError: a missing or malformed folder, an unknown backbone, weights of another
            architecture, a batch size the sampler cannot make from the classes of 4 or more
            images (fewer than two such classes: any batch size), seeds that are not distinct
            whole numbers >= 0, a device torch cannot compute on here (cpu, cuda[:N] or mps),
            or a ``tau`` or ``eps`` that is not a positive finite number; all before any
            training.

    Example:
        >>> try:
        ...     p_vs_batch_size_on_images("/no/such/folder")
        ... except GradlabError as error:
        ...     print(error)
        root must be an existing folder of images; '/no/such/folder' is not
    """
    check_temperature("tau", tau)  # both read at the first batch: refused before any training
    check_positive_finite("eps", eps)
    dataset, sizes, seeds, record = _setup(
        data, split, layout, list_file, backbone, weights, embedding_dim, image_size,
        batch_sizes, epochs, seeds, lr, workers, device,
    )  # fmt: skip
    _say_left_out("p-vs-batch-size", dataset.split, record)
    _say_if_busy(device, timed=False)  # P alone: no time recorded
    per_seed: dict[str, list[list[float]]] = {key: [] for key in KEYS}
    steps: list[int] = []
    for seed in seeds:
        rows, steps = [], []
        for size in sizes:
            row, count = _train_at(dataset, size, seed, backbone, weights, embedding_dim,
                                   image_size, epochs, device, lr, amp, tau, eps,
                                   workers)  # fmt: skip
            rows.append(row)
            steps.append(count)
            print(f"p-vs-batch-size: seed {seed}, m = {size}: {count} steps, "
                  f"P = {row[0]:.4f}", file=sys.stderr, flush=True)  # fmt: skip
        for index, key in enumerate(KEYS):
            per_seed[key].append([row[index] for row in rows])
    trained = {"epochs": epochs, "lr": lr, "device": device, "amp": amp, "image_size": image_size}
    return {
        "batch_sizes": sizes,
        **_describe(data, dataset, record, backbone, embedding_dim, weights),
        "per_class": PER_CLASS,
        "seeds": seeds,
        "tau": tau,
        "eps": eps,
        "settings": {"trained_at_m": {**per_seed, "steps": steps, **trained}},
    }


def _train_at(
    dataset: ImageFolderSplit, size, seed, backbone, weights, embedding_dim, image_size, epochs,
    device, lr, amp, tau, eps, workers=0,
) -> tuple[list[float], int]:  # fmt: skip
    torch.manual_seed(seed)
    model = build_backbone(
        backbone, embedding_dim=embedding_dim, weights=weights, image_size=image_size
    ).to(device)
    sampler = FixedCountBatches(dataset.labels, size, PER_CLASS, seed=run_seed(seed, size))
    batches = sampler.take(epochs * len(sampler))
    last_epoch = (epochs - 1) * len(sampler)
    logged = []

    def record(step, embeddings, labels):
        if step >= last_epoch:
            logged.append(torch.cat([close_pair_proportions(embeddings, labels, tau, eps),
                                     p_decomposition(embeddings, labels, tau, eps)]))  # fmt: skip

    seeded = _seeded(dataset, image_size, run_seed(seed, size))
    _train_steps(model, seeded, batches, SmoothAPLoss(tau), device, lr, amp, record, workers,
                 desc=f"p-vs-batch-size: seed {seed}, m = {size}: training")  # fmt: skip
    return torch.stack(logged).mean(dim=0).cpu().tolist(), len(batches)


LOSS_METRICS = ("recall@1", "recall@2", "recall@4", "recall@8", "R-Precision", "MAP@R")
"""The image studies' retrieval metrics (:func:`gradlab.functional.retrieval_at_scale`'s, under
the names of the bundled loss comparison; its tie-aware mAP needs the whole ranking and is left
out at data-set scale)."""

ANATOMY_LOSSES = ("SmoothAP", "VSE++ max-violation", "NT-Xent")
"""The losses of the anatomy study (the report's digit-scenes anatomy, Bleeker & de Rijke 2022)."""

ANATOMY_DIRECTION = "in_batch"
"""The anatomy study's one direction: each image of the batch queries the others."""


def _setup(
    data, split, layout, list_file, backbone, weights, embedding_dim, image_size, batch_sizes,
    epochs, seeds, lr, workers=0, device="cpu", images_now=True,
) -> tuple[ImageFolderSplit, list[int], list[int], dict]:  # fmt: skip
    """Every check of a study before it trains: ``(training split, batch sizes, seeds, record)``,
    the split without the classes that cannot fill a batch (:func:`trainable_classes`' record
    says which). ``images_now=False``: the training images are read by
    :func:`_check_images_of` with the evaluation split's, once that is known."""
    check_device(device)
    check_positive_int("epochs", epochs)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
        raise GradlabError(f"workers must be a whole number >= 0; got {workers!r}")
    check_lr(lr)
    seeds = check_seeds(seeds)
    dataset = image_folder(data, split, layout=layout, list_file=list_file, image_size=image_size)
    dataset, record = trainable_classes(dataset)
    sizes = check_batch_sizes(batch_sizes, len(dataset.class_names), left_out=record)
    check_training_length(dataset.labels, sizes, epochs)
    if images_now:
        check_images(dataset.paths, f"images in the {dataset.split} split")  # not deep in a run
    build_backbone(backbone, embedding_dim=embedding_dim, weights=weights, image_size=image_size)
    return dataset, sizes, seeds, record


STEP_BYTES = 1536
"""Host memory a training step holds until its run ends, beside its batch's ``8 m`` bytes of
indices: two small tensors (the index batch's and the loss's; about 520 and 730 bytes each,
measured as resident memory over 200,000 of them with torch 2.13 on Linux)."""


def check_training_length(labels: torch.Tensor, sizes: Sequence[int], epochs: int,
                          argument: str = "epochs") -> None:
    """Refuse, before any work, ``epochs`` whose batches (drawn up front) and per-step losses
    need more host memory than is free at the largest run: ``steps x (8 m + STEP_BYTES)``.

    Args:
        labels: the training split's ``[N]`` class labels.
        sizes: the batch sizes m, trained one after another.
        epochs: epochs per m.
        argument: the name the error gives ``epochs`` (``"--epochs"`` on the command line).

    Raises:
        GradlabError: naming ``epochs``, the steps it makes and the memory they need.

    Example:
        >>> import torch
        >>> labels = torch.arange(40) % 10
        >>> try:
        ...     check_training_length(labels, [8], 10**15)
        ... except GradlabError as error:
        ...     print(str(error).split(", whose")[0])
        epochs 1000000000000000: 5,000,000,000,000,000 optimizer steps at m = 8
    """
    def need(size: int) -> tuple[int, int, int]:
        steps = epochs * -(-len(labels) // size)  # FixedCountBatches: ceil(N / m) an epoch
        return steps * (8 * size + STEP_BYTES), steps, size

    bytes_needed, steps, size = max(need(m) for m in sizes)
    refuse_beyond_free(bytes_needed, "cpu", lambda need_gib, free_gib: (
        f"{argument} {epochs}: {steps:,} optimizer steps at m = {size}, whose batches and "
        f"losses are held in memory: at least {need_gib} GiB, more than the {free_gib} GiB "
        "available; pass fewer epochs"))


def _check_images_of(trained: ImageFolderSplit, test: ImageFolderSplit) -> None:
    """Refuse unreadable images of both splits in one error (the evaluation split's were found
    only once the training split's were mended, a second run later)."""
    check_image_groups([(trained.paths, f"images in the {trained.split} split"),
                        (test.paths, f"images in the {test.split} split")])  # fmt: skip


def _test_split(data, split, test_split, layout, list_file, test_list_file, image_size,
                trained: Sequence[Path]):
    """The evaluation split: the other class half / ``Ebay_test.txt``, or ``test_list_file``;
    never the training images themselves (``trained``: the paths the study trains on)."""
    if layout == "list" or list_file is not None:
        if test_list_file is None:
            raise GradlabError("test_list_file must name the evaluation images' 'path label' "
                               "file when the training images come from a list file")  # fmt: skip
        if list_file is not None and Path(test_list_file).resolve() == Path(list_file).resolve():
            raise GradlabError(f"test_list_file must name other images than list_file; both are "
                               f"{str(test_list_file)!r}")  # fmt: skip
        test = image_folder(data, test_split, layout="list", list_file=test_list_file,
                            image_size=image_size)  # fmt: skip
        # a copy of the training list passes the name check above
        # named by the files, which the command line and Python give alike
        refusal = (f"the evaluation list {str(test_list_file)!r} must name other images than the "
                   f"training list {str(list_file)!r}")  # fmt: skip
        where = "in the training list too"
    else:
        if split == test_split:
            raise GradlabError(f"split must not be the evaluation split {test_split!r}: the "
                               f"study would train and measure retrieval on the same images; "
                               f"got split={split!r}")  # fmt: skip
        test = image_folder(data, test_split, layout=layout, image_size=image_size)
        # Ebay_test.txt may repeat lines of Ebay_train.txt (a merged or hand-made copy; the
        # class halves cannot share an image)
        refusal = (f"the evaluation split {test.split!r} must hold other images than the "
                   f"training split {split!r}")  # fmt: skip
        where = "in both"
    # paths compared as given, made absolute and normalised: no image read, no link followed
    known = {os.path.abspath(path) for path in trained}
    seen = [path for path in test.paths if os.path.abspath(path) in known]
    if seen:
        raise GradlabError(
            f"{refusal}; {len(seen)} of its {len(test)} images "
            f"{'is' if len(seen) == 1 else 'are'} {where} (the first: {str(seen[0])!r}): "
            "retrieval would be measured on images the study trained on"
        )
    counts = torch.bincount(test.labels, minlength=len(test.class_names))
    if not bool((counts >= 2).any()):  # every average would run over no query: all NaN
        raise GradlabError(
            f"the evaluation split {test.split!r} ({len(test)} images, {len(test.class_names)} "
            f"classes) holds no class with two or more images: no image has another of its "
            f"class to retrieve, so retrieval would measure nothing; give each evaluation "
            f"class at least two images"
        )
    return test


def _describe(data, dataset: ImageFolderSplit, record, backbone, embedding_dim, weights) -> dict:
    """The data (the images that train) and the model of a study's JSON, with the record of the
    classes left out of training (:func:`trainable_classes`); the data is named by its folder's
    own name, also when given as ``.`` or ``..`` (a link keeps the name it was given by)."""
    folder = Path(os.path.abspath(data))
    return {
        "data": f"{folder.name or folder}, {dataset.split} split ({len(dataset)} images, "
        f"{len(dataset.class_names)} classes)",
        "model": f"{backbone} with a linear head to {embedding_dim} dimensions"
        + (f", from {Path(weights).name}" if weights is not None else ", random initial weights"),
        "training_classes": record,
    }


class StudyImages(torch.utils.data.Dataset):
    """The images of a split for a study, loadable by worker processes in any number.

    ``seed=None``: the evaluation transform (:func:`gradlab.data.image_folder.eval_transform`),
    keys are indices. With a seed: the training crop and flip of item ``(index, draw)`` come
    from ``(seed, draw)`` alone (``draw`` counts the images of a run's batches), so every loss
    and m of a seed sees the same augmented images, however many workers load them.

    Example:
        >>> from PIL import Image
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp())
        >>> for name in ("a", "b"):
        ...     (root / name).mkdir()
        ...     Image.new("RGB", (9, 9), (40, 80, 120)).save(root / name / "0.png")
        >>> crops = StudyImages(image_folder(root, "train"), image_size=4, seed=0)
        >>> bool(torch.equal(crops[0, 3][0], crops[0, 3][0])), crops[0, 3][1]
        (True, 0)
    """

    def __init__(self, dataset: ImageFolderSplit, image_size: int, seed: int | None = None):
        import dataclasses

        self.split = dataclasses.replace(dataset, transform=_no_transform)  # picklable
        self.image_size, self.seed = image_size, seed

    def __len__(self) -> int:
        return len(self.split)

    def __getitem__(self, key) -> tuple[torch.Tensor, int]:
        import dataclasses
        import hashlib

        if self.seed is None:
            index, transform = int(key), eval_transform(self.image_size)
        else:
            index, draw = key
            digest = hashlib.blake2b(f"{self.seed}:{draw}".encode(), digest_size=8).digest()
            seed = int.from_bytes(digest, "little") >> 1
            transform = train_transform(self.image_size, seed=seed)
        return dataclasses.replace(self.split, transform=transform)[index]

    def loader(self, batches: Sequence[torch.Tensor], workers: int = 0):
        """``(images, labels)`` of each batch of indices, in order, with ``workers`` processes."""
        keys, draw = [], 0
        for batch in batches:
            indices = batch.tolist()
            keys.append([(index, draw + place) for place, index in enumerate(indices)]
                        if self.seed is not None else indices)  # fmt: skip
            draw += len(indices)
        return _one_line_errors(
            torch.utils.data.DataLoader(self, batch_sampler=keys, num_workers=workers)
        )


def _one_line_errors(loader):
    """The loader's batches; a worker's :class:`GradlabError` (an unreadable image) comes back
    as its own one line, not as the worker's traceback that the DataLoader wraps it in."""
    try:
        yield from loader
    except GradlabError as error:
        last = (str(error).strip().splitlines() or [""])[-1]  # a traceback's last line
        prefix = f"{GradlabError.__module__}.{GradlabError.__name__}: "
        raise GradlabError(last.removeprefix(prefix)) from None


def _no_transform(picture):
    raise GradlabError("StudyImages sets each item's transform; none was set")


def _seeded(dataset: ImageFolderSplit, image_size: int, seed: int) -> StudyImages:
    return StudyImages(dataset, image_size, seed)


def _first_batch(images: StudyImages, batch: torch.Tensor, device: str) -> torch.Tensor:
    return next(iter(images.loader([batch])))[0].to(device)


def _autocast(device: str, amp: bool):
    kind = torch.device(device).type
    return torch.autocast(kind, dtype=torch.bfloat16 if kind == "cpu" else torch.float16,
                          enabled=amp)  # fmt: skip


@torch.no_grad()
def embed_split(
    model: torch.nn.Module, dataset: ImageFolderSplit, device: str = "cpu", amp: bool = False,
    batch_size: int = 128, workers: int = 0, desc: str | None = None,
) -> torch.Tensor:  # fmt: skip
    """``[N, d]`` float32 embeddings of a split (evaluation transform, evaluation mode),
    ``batch_size`` images at a time, loaded by ``workers`` processes; with ``desc``, reported
    as a stage of :func:`gradlab.progress.progress` (a bar on a terminal, else two lines)."""
    was_training = model.training
    model.eval()
    image_size = _image_size(dataset)
    batches = list(torch.arange(len(dataset)).split(batch_size))
    parts = []
    loader = StudyImages(dataset, image_size).loader(batches, workers)
    for images, _ in _reported(loader, len(batches), desc, "batch"):
        with _autocast(device, amp):
            parts.append(model(images.to(device)).float().cpu())
    model.train(was_training)
    return torch.cat(parts)


def _reported(loader, total: int, desc: str | None, unit: str):
    """``loader``'s batches, as one stage of :func:`gradlab.progress.progress` when ``desc``
    names it: a run of a study is minutes to hours on real data, and says so while it runs."""
    return loader if desc is None else progress(loader, total=total, desc=desc, unit=unit)


def _image_size(dataset: ImageFolderSplit) -> int:
    """The side of the split's images (its transform's output), read from its first image."""
    return int(dataset[0][0].shape[-1])


def evaluate_split(
    model: torch.nn.Module, dataset: ImageFolderSplit, device: str = "cpu", amp: bool = False,
    workers: int = 0,
) -> dict[str, float]:  # fmt: skip
    """Recall@1/2/4/8, R-Precision and MAP@R on a split, each image querying all the others
    (Musgrave et al., 2020; :func:`gradlab.functional.retrieval_at_scale`, bounded memory);
    the embedding pass is reported as a stage of :func:`gradlab.progress.progress`."""
    from gradlab.functional.retrieval_at_scale import retrieval_at_scale

    embeddings = embed_split(model, dataset, device, amp, workers=workers,
                             desc=f"embedding the {dataset.split} split")  # fmt: skip
    finite = torch.isfinite(embeddings).all(dim=1)
    if not bool(finite.all()):  # one host read per evaluation
        raise _NotFiniteError(f"the model's embeddings of the {dataset.split} split are not "
                              f"finite ({int((~finite).sum())} of {len(finite)} rows)")  # fmt: skip
    ks = tuple(k for k in (1, 2, 4, 8) if k < len(dataset))
    metrics = retrieval_at_scale(embeddings, dataset.labels, ks=ks)
    return {"recall@1": metrics["precision_at_1"],
            **{f"recall@{k}": metrics[f"recall@{k}"] for k in ks if k > 1},
            "R-Precision": metrics["r_precision"], "MAP@R": metrics["map_at_r"]}  # fmt: skip


class _NotFiniteError(GradlabError):
    """:func:`evaluate_split`'s embeddings hold NaN or infinite rows: after training, the run
    diverged (its callers say so, naming the run)."""


class _StepClock:
    """The time per training step after the first (``on_step`` of :func:`_train_steps`): the
    first step pays the run's one-time costs (loader workers, kernels, allocator), which fell
    on whichever loss trained first; a run of one step is timed whole."""

    def __init__(self, device) -> None:
        self.device = torch.device(device)
        self.started = time.perf_counter()
        self.after_first: float | None = None

    def __call__(self, step: int, embeddings: torch.Tensor, labels: torch.Tensor) -> None:
        if step == 0:
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)  # once per run: the first step is done
            self.after_first = time.perf_counter()

    def per_step(self, steps: int) -> float:
        """Seconds per step, read after the run (whose losses were read back: synchronised)."""
        now = time.perf_counter()
        if steps > 1 and self.after_first is not None:
            return (now - self.after_first) / (steps - 1)
        return (now - self.started) / max(steps, 1)


def _train_steps(
    model, images: StudyImages, batches, loss_fn, device, lr, amp, on_step=None, workers=0,
    desc=None,
) -> list[float]:  # fmt: skip
    """Adam over ``batches`` (index tensors of the split); the loss of every step. ``desc``
    names the run for :func:`gradlab.progress.progress`."""
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    scaler = torch.amp.GradScaler(enabled=amp and torch.device(device).type == "cuda")
    losses = []
    model.train()
    steps = _reported(images.loader(batches, workers), len(batches), desc, "step")
    for step, (batch_images, labels) in enumerate(steps):
        batch_images, labels = batch_images.to(device), labels.to(device)
        with _autocast(device, amp):
            embeddings = model(batch_images)
        embeddings = embeddings.float()
        try:
            loss = loss_fn(embeddings, labels)
        except GradlabError as error:  # the loss's own check: say what it means here
            if step == 0 or bool(torch.isfinite(embeddings).all()):
                raise
            raise _diverged(desc, step, lr, f"embeddings are no longer finite ({error})") from None
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.detach())
        if on_step is not None:
            on_step(step, embeddings.detach(), labels)
    return torch.stack(losses).cpu().tolist()


def _diverged(desc: str | None, steps: int, lr: float, what: str) -> GradlabError:
    """The error of a run whose training diverged: its name, its steps and its rate."""
    return GradlabError(
        f"training diverged{' (' + desc + ')' if desc else ''}: after {steps} optimizer "
        f"step(s) at lr={lr:g} the model's {what}; try a smaller --lr"
    )


def loss_comparison_on_images(
    data: str | Path,
    *,
    split: str = "train",
    test_split: str = "test",
    layout: str = "auto",
    list_file: str | Path | None = None,
    test_list_file: str | Path | None = None,
    backbone: str = "gradlab.backbones:tiny_resnet",
    weights: str | Path | None = None,
    embedding_dim: int = 512,
    image_size: int = 224,
    batch_sizes: Sequence[int] = (64,),
    epochs: int = 1,
    seeds: Sequence[int] = (0,),
    device: str = "cpu",
    lr: float = 1e-5,
    amp: bool = False,
    workers: int = 0,
    tau: float = 0.01,
    timing_repeats: int = 3,
) -> dict[int, dict]:
    """The report's loss comparison on your images and backbone, one result per batch size.

    For every seed and batch size m, the losses of
    :func:`gradlab.experiments.loss_comparison.loss_functions` at their papers' recommended
    settings for batches of m (SmoothAP both ways, Brown et al., 2020; FastAP, Cakir et al.,
    2019; Blackbox AP, Rolinek et al., 2020; FAPPY; a contrastive baseline; no sweep on your
    images: the report's study chooses among a small sweep on a validation split) each train
    the same network from the same weights on the same batches of the 4-per-class sampler for
    ``epochs`` epochs; retrieval is measured on the class-disjoint test split
    (:func:`evaluate_split`), with each loss's cost per step.

    Args:
        data, split, layout, list_file: the training images (:func:`gradlab.data.image_folder`),
            without the classes of fewer than 4 images (:func:`trainable_classes`).
        test_split, test_list_file: the evaluation images (``test_list_file`` with a list file),
            every one of them: a test image with no other image of its class is a candidate of
            the others but no query (:func:`gradlab.functional.retrieval_at_scale`).
        backbone, weights, embedding_dim, image_size: the network
            (:func:`gradlab.backbones.build_backbone`).
        batch_sizes, epochs, seeds, device, lr, amp, workers: as
            :func:`p_vs_batch_size_on_images`.
        tau: SmoothAP's temperature.
        timing_repeats: forward + backward passes of each loss timed (median).

    Returns:
        ``{m: result}``, each result in the schema of
        :func:`gradlab.experiments.loss_comparison.measure` (``settings``, ``seeds``, ``before``,
        ``initial_score_range``, ``losses``), read by its ``summarize`` and the report's figure;
        ``settings["training_classes"]`` is :func:`trainable_classes`' record.

    Raises:
        GradlabError: as :func:`p_vs_batch_size_on_images`, and a list file without
            ``test_list_file``; all before any training.

    Example:
        >>> try:
        ...     loss_comparison_on_images("/no/such/folder")
        ... except GradlabError as error:
        ...     print(error)
        root must be an existing folder of images; '/no/such/folder' is not
    """
    import copy

    from gradlab.experiments.loss_comparison import (
        CANDIDATES,
        _gradient_norm,
        _loss_seconds,
        loss_functions,
    )

    check_positive_int("timing_repeats", timing_repeats)
    dataset, sizes, seeds, record = _setup(
        data, split, layout, list_file, backbone, weights, embedding_dim, image_size,
        batch_sizes, epochs, seeds, lr, workers, device, images_now=False,
    )  # fmt: skip
    test = _test_split(data, split, test_split, layout, list_file, test_list_file, image_size,
                       dataset.paths)
    _check_images_of(dataset, test)
    _say_left_out("losses", dataset.split, record)
    _say_if_busy(device, timed=True)  # each loss's forward + backward and step times
    names = list(CANDIDATES)  # the losses of loss_functions, in its order
    described = _describe(data, dataset, record, backbone, embedding_dim, weights)
    results: dict[int, dict] = {}
    for size in sizes:
        results[size] = {
            "settings": {"per_class": PER_CLASS, "batch_size": size,
                         "classes_per_batch": size // PER_CLASS, "epochs": epochs, "steps": 0,
                         "lr": lr, "timing_repeats": timing_repeats, "device": device,
                         "amp": amp, "tau": tau, "image_size": image_size, **described,
                         "test_data": f"{test.split} split ({len(test)} images, "
                         f"{len(test.class_names)} classes)",
                         "timing": timing_conditions(device, torch.get_num_threads(), 1)},
            "seeds": seeds, "before": {}, "initial_score_range": [],
            "losses": {name: {"metrics": {}, "loss_seconds": [], "step_seconds": [],
                              "final_loss": [], "initial_loss": [], "initial_gradient_norm": []}
                       for name in names},
        }  # fmt: skip
    for seed in seeds:
        torch.manual_seed(seed)
        initial = build_backbone(backbone, embedding_dim=embedding_dim, weights=weights,
                                 image_size=image_size).to(device)  # fmt: skip
        before = evaluate_split(initial, test, device, amp, workers)
        for size in sizes:
            result = results[size]
            for metric, value in before.items():
                result["before"].setdefault(metric, []).append(value)
            sampler = FixedCountBatches(dataset.labels, size, PER_CLASS, seed=run_seed(seed, size))
            batches = sampler.take(epochs * len(sampler))
            result["settings"]["steps"] = len(batches)
            timing_images = _first_batch(_seeded(dataset, image_size, seed), batches[0], device)
            with torch.no_grad(), _autocast(device, amp):
                first = initial.eval()(timing_images).float()
            initial.train()
            first_labels = dataset.labels[batches[0]].to(device)
            unit = torch.nn.functional.normalize(first, dim=1)
            cosines = unit @ unit.T
            result["initial_score_range"].append((cosines.max() - cosines.min()).item())
            for name, loss_fn in loss_functions(tau, size).items():
                model = copy.deepcopy(initial)
                clock = _StepClock(device)
                seeded = _seeded(dataset, image_size, run_seed(seed, size))
                history = _train_steps(model, seeded, batches, loss_fn, device, lr, amp,
                                       on_step=clock, workers=workers,
                                       desc=f"losses: seed {seed}, m = {size}, {name}: "
                                       "training")  # fmt: skip
                run = result["losses"][name]
                run["step_seconds"].append(clock.per_step(len(batches)))
                try:
                    measured = evaluate_split(model, test, device, amp, workers)
                except _NotFiniteError as error:
                    raise _diverged(f"losses: seed {seed}, m = {size}, {name}: training",
                                    len(batches), lr, f"{error}"[len("the model's "):]) from None
                for metric, value in measured.items():
                    run["metrics"].setdefault(metric, []).append(value)
                run["loss_seconds"].append(_loss_seconds(loss_fn, first, first_labels,
                                                         timing_repeats))  # fmt: skip
                run["final_loss"].append(sum(history[-10:]) / len(history[-10:]))
                run["initial_loss"].append(history[0])
                run["initial_gradient_norm"].append(_gradient_norm(loss_fn, first, first_labels))
                score = run["metrics"]["MAP@R"][-1]
                print(f"losses: seed {seed}, m = {size}, {name}: {len(batches)} steps, "
                      f"MAP@R = {score:.4f}", file=sys.stderr, flush=True)  # fmt: skip
    return results


def _anatomy_losses(tau: float) -> dict:
    """Name -> ``loss(scores [m, m - 1], positives)`` of one direction (each image querying
    the others), as the report's scenes study writes them (Bleeker & de Rijke, 2022)."""
    from gradlab.experiments.digit_scenes import _one_direction_losses

    return {name: _one_direction_losses(name, tau)[0] for name in ANATOMY_LOSSES}


def in_batch_anatomy(embeddings: torch.Tensor, labels: torch.Tensor, loss_fn) -> torch.Tensor:
    """``[3]``: mean active negatives per query, share of queries without gradient, hardest-10 %
    share of the negative gradient mass, of ``loss_fn``'s ``dL/dS`` on the in-batch scores.

    The exact float64 cosine scores of the batch lose their diagonal (``[m, m - 1]``: each
    image queries the others, :func:`gradlab.functional.in_batch_retrieval` with
    ``rounded=False``), so a query is never its own candidate;
    :func:`gradlab.functional.gradient_anatomy` reads the gradient in float64.

    Example:
        >>> emb = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
        >>> loss = _anatomy_losses(0.01)["VSE++ max-violation"]
        >>> in_batch_anatomy(emb, torch.tensor([0, 0, 1, 1]), loss).tolist()
        [0.0, 1.0, nan]
    """
    from gradlab.functional import gradient_anatomy, in_batch_retrieval

    scores, positives = in_batch_retrieval(embeddings.detach(), labels, rounded=False)
    leaf = scores.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(loss_fn(leaf, positives), leaf)
    anatomy = gradient_anatomy(grad, scores, positives)
    return torch.stack([anatomy.active_negatives.double().mean(),
                        anatomy.without_gradient.double().mean(),
                        anatomy.hardest_10pct_share.nanmean()])  # fmt: skip


def anatomy_on_images(
    data: str | Path,
    *,
    split: str = "train",
    test_split: str = "test",
    layout: str = "auto",
    list_file: str | Path | None = None,
    test_list_file: str | Path | None = None,
    backbone: str = "gradlab.backbones:tiny_resnet",
    weights: str | Path | None = None,
    embedding_dim: int = 512,
    image_size: int = 224,
    batch_sizes: Sequence[int] = (64,),
    epochs: int = 1,
    seeds: Sequence[int] = (0,),
    device: str = "cpu",
    lr: float = 1e-5,
    amp: bool = False,
    workers: int = 0,
    tau: float = 0.01,
    logs: int = 10,
) -> dict:
    """The report's gradient anatomy over training (Bleeker & de Rijke, 2022, Sec. 5), on your
    images and backbone.

    For every seed, batch size m and loss of :data:`ANATOMY_LOSSES` (SmoothAP, tau = ``tau``;
    VSE++'s max-violation triplet loss; NT-Xent), the network trains from the same weights on
    the same 4-per-class batches for ``epochs`` epochs, each image of a batch querying the
    others; at every ``max(1, steps // logs)``-th step and the last (every step of a run of
    fewer than ``2 logs`` steps) :func:`in_batch_anatomy` reads the loss's own ``dL/dS`` on
    that training batch. Retrieval on the test split at the end.

    Args:
        As :func:`loss_comparison_on_images`; ``logs``: anatomy records per run.

    Returns:
        The schema of :func:`gradlab.experiments.digit_scenes.measure` with one "encoder" per
        batch size (``"m = 64"``) and one direction, ``"in_batch"``: ``{"settings", "seeds",
        "runs": {encoder: {loss: {"recall": {metric: [per seed]}, "loss_history": [[per step]
        per seed], "anatomy": {"steps", "in_batch": {quantity: [[per logged step] per
        seed]}}, "geometry": {quantity: [[per logged step] per seed]}}}}}`` with the geometry
        of :data:`IMAGE_GEOMETRY_KEYS` (:func:`in_batch_geometry`).

    Raises:
        GradlabError: as :func:`loss_comparison_on_images`.

    Example:
        >>> try:
        ...     anatomy_on_images("/no/such/folder")
        ... except GradlabError as error:
        ...     print(error)
        root must be an existing folder of images; '/no/such/folder' is not
    """
    from gradlab.experiments.digit_scenes import ANATOMY_KEYS

    check_positive_int("logs", logs)
    dataset, sizes, seeds, record = _setup(
        data, split, layout, list_file, backbone, weights, embedding_dim, image_size,
        batch_sizes, epochs, seeds, lr, workers, device, images_now=False,
    )  # fmt: skip
    test = _test_split(data, split, test_split, layout, list_file, test_list_file, image_size,
                       dataset.paths)
    _check_images_of(dataset, test)
    _say_left_out("anatomy", dataset.split, record)
    _say_if_busy(device, timed=False)  # the anatomy and recall: no time recorded
    losses = _anatomy_losses(tau)
    runs = {f"m = {size}": {name: {"recall": {}, "loss_history": [], "anatomy": {
        "steps": [], ANATOMY_DIRECTION: {key: [] for key in ANATOMY_KEYS}},
        "geometry": {key: [] for key in IMAGE_GEOMETRY_KEYS}}
        for name in losses} for size in sizes}  # fmt: skip
    for seed in seeds:
        torch.manual_seed(seed)
        initial = build_backbone(backbone, embedding_dim=embedding_dim, weights=weights,
                                 image_size=image_size).to(device)  # fmt: skip
        for size in sizes:
            sampler = FixedCountBatches(dataset.labels, size, PER_CLASS, seed=run_seed(seed, size))
            batches = sampler.take(epochs * len(sampler))
            for name, loss_fn in losses.items():
                seeded = _seeded(dataset, image_size, run_seed(seed, size))
                stage = f"anatomy: seed {seed}, m = {size}, {name}"
                recall, history, steps, table, shape = _anatomy_run(
                    initial, seeded, test, batches, loss_fn, logs, device, lr, amp, workers, stage
                )
                run = runs[f"m = {size}"][name]
                for metric, value in recall.items():
                    run["recall"].setdefault(metric, []).append(value)
                run["loss_history"].append(history)
                run["anatomy"]["steps"] = steps
                for column, key in enumerate(ANATOMY_KEYS):
                    run["anatomy"][ANATOMY_DIRECTION][key].append(table[:, column].tolist())
                for column, key in enumerate(IMAGE_GEOMETRY_KEYS):
                    run["geometry"][key].append(shape[:, column].tolist())
                print(f"anatomy: seed {seed}, m = {size}, {name}: {len(batches)} steps",
                      file=sys.stderr, flush=True)  # fmt: skip
    return {
        "settings": {"tau": tau, "batch_sizes": sizes, "epochs": epochs, "lr": lr,
                     "per_class": PER_CLASS, "device": device, "amp": amp,
                     "image_size": image_size,
                     "directions": [ANATOMY_DIRECTION],
                     **_describe(data, dataset, record, backbone, embedding_dim, weights),
                     "test_data": f"{test.split} split ({len(test)} images, "
                     f"{len(test.class_names)} classes)"},
        "seeds": seeds,
        "runs": runs,
    }  # fmt: skip


def _anatomy_run(
    initial, images, test, batches, loss_fn, logs, device, lr, amp, workers, desc=None
) -> tuple:
    """One network trained with one loss: ``(recall, losses, logged steps, [logs, 3] table)``;
    ``desc`` names the run's training for :func:`gradlab.progress.progress`."""
    import copy

    every, last = max(1, len(batches) // logs), len(batches) - 1
    records, steps, geometry = [], [], []

    def record(step, embeddings, labels):
        if step % every == 0 or step == last:
            steps.append(step)
            records.append(in_batch_anatomy(embeddings, labels, loss_fn))
            geometry.append(in_batch_geometry(embeddings, labels))

    def in_batch_loss(embeddings, labels):
        unit = F.normalize(embeddings, dim=1)
        same = labels.unsqueeze(0) == labels.unsqueeze(1)
        return loss_fn(drop_diagonal(unit @ unit.T), drop_diagonal(same))

    model = copy.deepcopy(initial)
    history = _train_steps(model, images, batches, in_batch_loss, device, lr, amp, record,
                           workers, desc=desc and f"{desc}: training")  # fmt: skip
    try:
        recall = evaluate_split(model, test, device, amp, workers)
    except _NotFiniteError as error:
        raise _diverged(desc and f"{desc}: training", len(batches), lr,
                        f"{error}"[len("the model's "):]) from None
    return recall, history, steps, torch.stack(records).cpu(), torch.stack(geometry).cpu()


IMAGE_GEOMETRY_KEYS = ("alignment", "uniformity_images", "rank_share_images")
"""The geometry the anatomy study logs: the scenes study's (:data:`gradlab.experiments.
digit_scenes.GEOMETRY_KEYS`) that need no second modality."""


def in_batch_geometry(embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """``[3]`` float64 in :data:`IMAGE_GEOMETRY_KEYS`' order: the alignment of the batch's
    positive pairs (Wang & Isola 2020, Eq. 4, from the in-batch cosine scores), the uniformity
    of its unit embeddings (Eq. 5) and their effective rank's share (RankMe, Garrido et al.
    2023).

    Example:
        >>> emb = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
        >>> in_batch_geometry(emb, torch.tensor([0, 0, 1, 1]))[0].item()  # positives coincide
        0.0
    """
    from gradlab.functional import in_batch_retrieval
    from gradlab.functional.geometry import alignment, effective_rank, uniformity

    unit = F.normalize(embeddings.detach().to(torch.float64), dim=1)
    scores, positives = in_batch_retrieval(unit, labels, rounded=False)
    return torch.stack([alignment(scores, positives), uniformity(unit),
                        effective_rank(unit).share.to(torch.float64)])  # fmt: skip
