"""``relin lia-mtr-mme-text``: the text-only reference of the MME-style set. The chat LLM (the one every bridge feeds)
answers each question given the scene's caption in text instead of the image (the captions and the user turn in the
data's phrasing, the format the tiny chat LLM was trained on); written in the official layout
(``OUT/text/<subtask>.txt``) and scored as the official tool (``items.csv``: each question as scored). It bounds what
a bridge can add: a VLM below it loses in the bridge, a reference at chance means the LLM cannot answer.
"""
from __future__ import annotations

import argparse

from ...config.eval import EvalConfig


def config_sections(args: argparse.Namespace) -> dict[str, type]:
    return {"eval": EvalConfig}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--llm", required=True, help="chat LLM directory (relin lia-mtr-chat-lm)")
    parser.add_argument("--data", required=True, help="lia-mtr-synth-vision directory")
    parser.add_argument("--out", required=True, help="answers directory to write (official layout)")
    parser.add_argument("--metrics", required=True, help="metrics JSON to write")
    parser.add_argument("--items", required=True, help="per-question scores (CSV) to write")


def run(args: argparse.Namespace, sections) -> None:
    import torch

    from ...data.tokenizer import load_tokenizer
    from ...data.vision.artifact import VisionData
    from ...devices import compute_device
    from ...eval.mme import ITEM_COLUMNS
    from ...eval.mme_answers import answer_from_captions, write_and_score
    from ...io import atomic_dir, atomic_write_csv, atomic_write_json
    from ...models.teachers import load_pretrained
    from ...tracking import stage_run

    cfg = sections.get("eval")
    data = VisionData.load(args.data)
    mme, phrasing = data.mme, data.phrasing
    with stage_run("lia-mtr-mme-text", sections.raw, inputs=[args.llm, args.data],
                   outputs=[args.out, args.metrics, args.items]) as tracker:
        with atomic_dir(args.out) as tmp, torch.no_grad():
            llm = load_pretrained(args.llm).to(compute_device())
            preds = answer_from_captions(llm, load_tokenizer(args.llm), mme["questions"], mme["captions"],
                                         cfg.batch_size, phrasing.user_turn)
            text, items = write_and_score(tmp / "text", mme["questions"], preds)
        metrics = {"bridge": "text_reference", "phrasing": phrasing.name, "text": text}
        atomic_write_json(args.metrics, metrics)
        atomic_write_csv(args.items, items, ITEM_COLUMNS)
        tracker.log_metrics({"text_accuracy": metrics["text"]["accuracy"],
                             "text_yes_share": metrics["text"]["yes_share"]})
    print(f"lia-mtr-mme-text: accuracy {metrics['text']['accuracy']}%, yes {metrics['text']['yes_share']}%")
