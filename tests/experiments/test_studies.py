"""The loss comparison and the digit-scenes study: their metrics against loops, their contracts."""

import pytest
import torch

from gradlab.data.digit_scenes import load_digit_scenes
from gradlab.experiments import digit_scenes, loss_comparison
from gradlab.models import DigitBackbone
from tests.reference import geometry_loops as loops


def test_contrastive_loss_matches_a_loop():
    generator = torch.Generator().manual_seed(3)
    embeddings = torch.randn(8, 4, generator=generator, dtype=torch.float64)
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 2, 3])
    unit = torch.nn.functional.normalize(embeddings, dim=1).tolist()
    pulls, pushes = [], []
    for i in range(8):
        for j in range(8):
            if i == j:
                continue
            s = sum(a * b for a, b in zip(unit[i], unit[j], strict=True))
            if labels[i] == labels[j]:
                pulls.append(1 - s)
            else:
                pushes.append(max(0.0, s - 0.5))
    expected = sum(pulls) / len(pulls) + sum(pushes) / len(pushes)
    assert loss_comparison.contrastive_loss(embeddings, labels).item() == pytest.approx(expected)


def test_scene_features_read_each_box():
    torch.manual_seed(0)
    backbone = DigitBackbone().eval()
    scenes = load_digit_scenes(6, seed=1)
    features = digit_scenes.scene_features(backbone, scenes)
    for index in range(6):
        count = int(scenes.counts[index])
        for slot in range(4):
            region = features["regions"][index, slot]
            if slot >= count:
                assert not region.any()
                continue
            top, left, bottom, right = scenes.boxes[index, slot].tolist()
            crop = scenes.images[index : index + 1, :, top:bottom, left:right]
            with torch.no_grad():
                expected = backbone.region_features(crop)[0]
            assert torch.allclose(region[:-2], expected, atol=1e-6)
            assert region[-2:].tolist() == pytest.approx([(top + 4) / 30, (left + 4) / 30])


@pytest.mark.slow
def test_digit_scenes_measure_contract_and_per_direction_anatomy():
    result = digit_scenes.measure(
        quick=True, seeds=(0, 1), encoders=("VSRN",), losses=("NT-Xent", "VSE++ max-violation")
    )
    runs = result["runs"]["VSRN"]
    batch = result["settings"]["batch_images"]
    for run in runs.values():
        assert set(run["recall"]) == {
            "i2t_R@1", "i2t_R@5", "i2t_R@10", "t2i_R@1", "t2i_R@5", "t2i_R@10", "rsum"
        }  # fmt: skip
        assert all(len(values) == 2 for values in run["recall"].values())
        assert len(run["anatomy"]["i2t"]["active_negatives"][0]) == len(run["anatomy"]["steps"])
        assert set(run["geometry"]) == set(digit_scenes.GEOMETRY_KEYS)
        for key, seeds in run["geometry"].items():
            assert len(seeds) == 2 and all(len(s) == len(run["anatomy"]["steps"]) for s in seeds)
            values = [value for seed in seeds for value in seed]
            low, high = {"alignment": (0, 4), "modality_gap": (0, 2)}.get(
                key, (-8, 0) if key.startswith("uniformity") else (0, 1))
            assert all(low <= value <= high for value in values), (key, values)
    # NT-Xent's softmax gives every negative some gradient; max-violation at most one negative
    # caption per image (its hardest) and one image per caption in its own direction.
    nt_xent = runs["NT-Xent"]["anatomy"]
    hardest = runs["VSE++ max-violation"]["anatomy"]
    assert nt_xent["i2t"]["active_negatives"][0][0] > 0.5 * (5 * batch - 5)
    assert max(max(seed) for seed in hardest["i2t"]["active_negatives"]) <= 1.0
    assert max(max(seed) for seed in hardest["t2i"]["active_negatives"]) <= 1.0


def test_scene_geometry_matches_float64_loops():
    """Alignment, both uniformities, both effective-rank shares and the modality gap of one
    batch of images (2 captions each) against tests/reference/geometry_loops.py."""
    generator = torch.Generator().manual_seed(5)
    images = torch.nn.functional.normalize(torch.randn(5, 4, generator=generator), dim=1)
    captions = torch.nn.functional.normalize(
        images.repeat_interleave(2, dim=0) + torch.randn(10, 4, generator=generator), dim=1)
    positives = torch.eye(5, dtype=torch.bool).repeat_interleave(2, dim=1)
    record = digit_scenes.geometry_record(images, captions, images @ captions.T, positives)
    rows, columns = images.tolist(), captions.tolist()
    expected = [
        loops.alignment(rows, columns, positives.tolist()),
        loops.uniformity(rows),
        loops.uniformity(columns),
        loops.effective_rank(rows)[1],
        loops.effective_rank(columns)[1],
        loops.modality_gap(rows, columns),
    ]
    assert record.dtype == torch.float64 and record.shape == (len(digit_scenes.GEOMETRY_KEYS),)
    torch.testing.assert_close(record, torch.tensor(expected, dtype=torch.float64), atol=1e-5,
                               rtol=0)  # fmt: skip
