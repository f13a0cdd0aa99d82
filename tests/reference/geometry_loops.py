"""Float64 loop references of the geometry, margin, temperature and suspect quantities.

Plain Python over lists (NumPy only for the singular values), written from the papers'
definitions, never from gradlab's code.
"""

from __future__ import annotations

import math

import numpy as np


def unit_rows(matrix):
    return [[x / math.sqrt(sum(v * v for v in row)) for x in row] for row in matrix]


def cosines(first, second):
    a, b = unit_rows(first), unit_rows(second)
    return [[sum(x * y for x, y in zip(p, q, strict=True)) for q in b] for p in a]


def alignment(queries, candidates, positives):
    """Wang & Isola (2020) Eq. 4, alpha = 2: mean squared distance of the positive pairs."""
    a, b = unit_rows(queries), unit_rows(candidates)
    distances = [sum((x - y) ** 2 for x, y in zip(a[i], b[j], strict=True))
                 for i in range(len(a)) for j in range(len(b)) if positives[i][j]]  # fmt: skip
    return sum(distances) / len(distances)


def uniformity(points, t=2.0):
    """Wang & Isola (2020) Eq. 5 over the distinct pairs i < j."""
    units = unit_rows(points)
    terms = [math.exp(-t * sum((x - y) ** 2 for x, y in zip(units[i], units[j], strict=True)))
             for i in range(len(units)) for j in range(i + 1, len(units))]  # fmt: skip
    return math.log(sum(terms) / len(terms))


def effective_rank(points):
    """RankMe: exp(entropy) of the normalised singular values of the centred points (SVD)."""
    centred = np.asarray(points, dtype=np.float64)
    centred = centred - centred.mean(axis=0)
    singular = np.linalg.svd(centred, compute_uv=False)
    singular = singular[singular > singular[0] * 1e-12]
    p = singular / singular.sum()
    rank = math.exp(-sum(x * math.log(x) for x in p))
    return rank, rank / min(len(points) - 1, len(points[0]))


def normalized_std(points):
    units = unit_rows(points)
    columns = list(zip(*units, strict=True))
    size = len(units)
    stds = [math.sqrt(sum((x - sum(c) / size) ** 2 for x in c) / size) for c in columns]
    return sum(stds) / len(stds) * math.sqrt(len(columns))


def modality_gap(queries, candidates):
    a, b = unit_rows(queries), unit_rows(candidates)
    centre_a = [sum(column) / len(a) for column in zip(*a, strict=True)]
    centre_b = [sum(column) / len(b) for column in zip(*b, strict=True)]
    return math.sqrt(sum((x - y) ** 2 for x, y in zip(centre_a, centre_b, strict=True)))


def margins(scores, positives, candidates):
    """Per query with a positive and a negative: (mean positive, hardest negative, margin,
    violation share, R@1); means over those queries."""
    rows = []
    for row, pos, cand in zip(scores, positives, candidates, strict=True):
        p = [s for s, is_pos, c in zip(row, pos, cand, strict=True) if is_pos and c]
        n = [s for s, is_pos, c in zip(row, pos, cand, strict=True) if not is_pos and c]
        if p and n:
            violations = sum(1 for s in n if s >= min(p)) / len(n)
            rows.append((sum(p) / len(p), max(n), min(p) - max(n), violations,
                         float(max(p) > max(n))))  # fmt: skip
    return [sum(column) / len(rows) for column in zip(*rows, strict=True)]


def query_margins(scores, positives, candidates):
    """Per query: (mean positive, lowest positive, highest negative, margin, violation share,
    R@1) over its candidates, or None without a positive or a negative (nested lists in)."""
    out = []
    for row, pos, cand in zip(scores, positives, candidates, strict=True):
        p = [s for s, is_pos, c in zip(row, pos, cand, strict=True) if is_pos and c]
        n = [s for s, is_pos, c in zip(row, pos, cand, strict=True) if not is_pos and c]
        if not p or not n:
            out.append(None)
            continue
        out.append((sum(p) / len(p), min(p), max(n), min(p) - max(n),
                    sum(1 for s in n if s >= min(p)) / len(n), float(max(p) > max(n))))  # fmt: skip
    return out


def temperature_gradient(scores, positives, scale, candidates=None):
    """dL/dlog s of mean-over-queries InfoNCE (logits scale * scores), rows as queries."""
    per_query = []
    for i, row in enumerate(scores):
        cand = [j for j in range(len(row)) if candidates is None or candidates[i][j]]
        pos = [j for j in cand if positives[i][j]]
        if not pos:
            continue
        logits = [scale * row[j] for j in cand]
        top = max(logits)
        weights = [math.exp(z - top) for z in logits]
        expected = sum(w * z for w, z in zip(weights, logits, strict=True)) / sum(weights)
        per_query.append(expected - sum(scale * row[j] for j in pos) / len(pos))
    return sum(per_query) / len(per_query)


def logged_geometry(queries, candidates, positives):
    """The Geometry quantity's keys from the loops: alignment over ``positives`` of queries x
    candidates, the queries' uniformity, effective rank and spread, and (``candidates`` not
    None: a cross-modal batch) the modality gap. In-batch, ``candidates`` is None."""
    rank, share = effective_rank(queries)
    values = {
        "geometry_alignment": alignment(queries, candidates or queries, positives),
        "geometry_uniformity": uniformity(queries),
        "geometry_effective_rank": rank,
        "geometry_effective_rank_share": share,
        "geometry_std": normalized_std(queries),
    }
    if candidates is not None:
        values["geometry_modality_gap"] = modality_gap(queries, candidates)
    return values
