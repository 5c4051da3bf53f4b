"""The per-patch linear probe of the MME-style categories (issue 49): can the features of one patch decide a
category? A category that needs the whole image (relations between objects in different patches) must not be
decidable from any single patch, or a bridge that mixes patches has nothing to show over one that does not.

For a category and a patch position p, a logistic regression reads patch p's features ``x_p`` and the question's
words with their places (``w`` = (place, word), so "is the A left of the B" and "is the B left of the A" differ),
bilinearly:

    logit = Σ_{w ∈ question} (W_{p,w} · x_p + b_{p,w})

that is, for every question a linear classifier of the one patch's features (plus a bias per word, which holds
what the question alone tells). Every position is fitted at once on a ``fit`` split of the training images, the
best position is chosen on a ``select`` split and its accuracy is reported on a ``test`` split (the images apart
by a fixed hash, the same for every category). A category no single patch decides stays near 50%.

The ``control`` task asks for the background tint, which every patch shows: its accuracy shows that the probe
decides what one patch holds (a probe that fails there proves nothing about the categories).
"""
from __future__ import annotations

import numpy as np
import torch

CONTROL = "control"
SPLITS = ("fit", "select", "test")


def pixel_patches(images: np.ndarray, patch: int) -> torch.Tensor:
    """``[N, H, W, 3]`` uint8 images -> ``[N, P, 3 patch²]`` float patches in raster order (the features of a
    tower that mixes nothing)."""
    x = torch.as_tensor(images).float() / 255.0
    n, h, w, c = x.shape
    x = x.view(n, h // patch, patch, w // patch, patch, c).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(n, (h // patch) * (w // patch), patch * patch * c)


def control_rows(scenes: list[dict], tints: int, seed: int = 0) -> list[dict]:
    """Per image a true and a false question about its background tint (``control``)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i, scene in enumerate(scenes):
        true = int(scene["background"])
        wrong = int(rng.choice([t for t in range(tints) if t != true]))
        rows += [{"task": CONTROL, "index": i, "question": f"is the background tint{true}", "answer": "yes"},
                 {"task": CONTROL, "index": i, "question": f"is the background tint{wrong}", "answer": "no"}]
    return rows


def split_of(index: int) -> str:
    """The split of image ``index``: 60% fit, 20% select, 20% test, by a fixed hash."""
    h = (index * 2654435761) % 2**32 / 2**32
    return "fit" if h < 0.6 else "select" if h < 0.8 else "test"


def _design(rows: list[dict]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Bag-of-words of the distinct questions ``[U, V]``, each row's question ``[n]``, image ``[n]`` and answer
    ``[n]`` (1 = yes)."""
    questions = list(dict.fromkeys(r["question"] for r in rows))
    words = list(dict.fromkeys(w for q in questions for w in enumerate(q.split())))
    index = {w: i for i, w in enumerate(words)}
    bags = torch.zeros(len(questions), len(words))
    for u, q in enumerate(questions):
        bags[u, [index[w] for w in enumerate(q.split())]] = 1.0
    which = {q: u for u, q in enumerate(questions)}
    return (bags, torch.tensor([which[r["question"]] for r in rows]), torch.tensor([r["index"] for r in rows]),
            torch.tensor([r["answer"] == "yes" for r in rows], dtype=torch.float32))


def fit_positions(features: torch.Tensor, rows: list[dict], steps: int = 80, lr: float = 0.1,
                  weight_decay: float = 1e-3, seed: int = 0) -> dict:
    """One category's probe at every patch position (Adam, full batch, ``steps``).

    Args:
        features: ``[N, P, d]`` patch features of the images the rows index.
        rows: ``{"index", "question", "answer"}`` (yes/no).
    Returns:
        ``{"position": best p (on select), "accuracy": test accuracy there, "test_questions": n,
        "correct": right answers there, "select_accuracy": [P] per position, "train_accuracy": at the best}``.
    """
    torch.manual_seed(seed)
    bags, question, image, answer = _design(rows)
    x = features.float()
    mean, std = x.mean((0, 1)), x.std((0, 1)).clamp_min(1e-6)
    split = np.array([split_of(int(i)) for i in image])
    parts = {}
    for name in SPLITS:
        keep = torch.from_numpy(np.flatnonzero(split == name))
        # [P, n, d]: one batch of rows per position; each row's question as its bag
        parts[name] = (((x[image[keep]] - mean) / std).transpose(0, 1).contiguous(), bags[question[keep]],
                       answer[keep])
    P, d, V = x.shape[1], x.shape[2], bags.shape[1]
    W = torch.zeros(P, d, V, requires_grad=True)
    b = torch.zeros(P, 1, V, requires_grad=True)

    def logits(name: str) -> torch.Tensor:
        xs, bag, _ = parts[name]
        return ((torch.bmm(xs, W) + b) * bag[None]).sum(-1)              # [P, n]

    opt = torch.optim.Adam([W, b], lr=lr)
    target = parts["fit"][2][None].expand(P, -1)
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits("fit"), target) * P
        (loss + weight_decay * (W ** 2).sum()).backward()
        opt.step()
    with torch.no_grad():
        def accuracy(name: str) -> torch.Tensor:
            return ((logits(name) > 0).float() == parts[name][2][None]).float()   # [P, n]

        select = accuracy("select").mean(1)
        best = int(select.argmax())
        test = accuracy("test")[best]
        train = accuracy("fit")[best].mean()
    return {"position": best, "accuracy": round(float(test.mean()), 4), "test_questions": int(test.numel()),
            "correct": int(test.sum()), "train_accuracy": round(float(train), 4),
            "select_accuracy": [round(float(a), 4) for a in select]}


def probe_categories(features: torch.Tensor, rows: list[dict], **kwargs) -> dict[str, dict]:
    """:func:`fit_positions` per task of ``rows`` (the categories, and the control when its rows are given)."""
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    return {task: fit_positions(features, [r for r in rows if r["task"] == task], **kwargs) for task in tasks}
