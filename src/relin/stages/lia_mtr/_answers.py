"""What the stages that question a trained VLM after each phase share (lia-mtr-eval-mme, lia-mtr-vlm-photos): the
``--model PHASE=DIR`` specs and one phase's greedy answers. Apart from :mod:`._vlm` so that the training stages do not
depend on the generation code."""
from __future__ import annotations


def phase_models(specs: list[str]) -> dict[str, str]:
    """``{"align": DIR, "instruct": DIR}`` from ``--model PHASE=DIR ...``; one line for a spec without ``=``."""
    from ...errors import InputError

    if any("=" not in spec for spec in specs):
        raise InputError("--model: expected PHASE=DIR")
    return dict(spec.split("=", 1) for spec in specs)


def phase_answers(path: str, questions: list[dict], features, batch_size: int, **options) -> list[str]:
    """Greedy answers of the VLM saved at ``path`` (:func:`relin.eval.mme_answers.answer_with_images`)."""
    import torch

    from ...data.tokenizer import load_tokenizer
    from ...devices import compute_device
    from ...eval.mme_answers import answer_with_images
    from ...models.vlm.model import BridgeVLM

    with torch.no_grad():
        vlm = BridgeVLM.from_pretrained(path).to(compute_device())
        return answer_with_images(vlm, load_tokenizer(path), questions, features, batch_size, **options)
