"""What the bridge training stages share: the arguments, the rows of each phase (image tokens expanded to
the features' N patches) and their batch source."""
from __future__ import annotations

import argparse

from .._training import add_output_arguments


def flush_denormals() -> None:
    """Flush subnormal floats to zero: on the CPU, subnormal activations made the mlp2x_gelu VLM's step
    20x slower than the other bridges' (1.8 s against 0.09 s at batch 8)."""
    import torch

    torch.set_flush_denormal(True)


def add_checkpoint_argument(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--checkpoint", default="", help=f"the model directory of the checkpoints row the {what} "
                                                         f"config names (relin pretrained-checkpoint's model/)")


def loaded_reference(cfg, args: argparse.Namespace, key: str) -> str:
    """The weights a tower or chat LLM config loads (``pretrained``, or the checkpoints row's directory the rule
    passes as ``--checkpoint``), empty when it is built and trained; one line when the row and the argument
    disagree."""
    from ...errors import UserError

    if bool(cfg.checkpoint) != bool(args.checkpoint):
        raise UserError(f"{key}.checkpoint: {cfg.checkpoint or 'none'}, but --checkpoint "
                        f"{args.checkpoint or 'not given'}; expected --checkpoint with the model directory of the "
                        f"checkpoints row the config names (results/pretrained/<row>/model), and only then")
    return cfg.pretrained or args.checkpoint


def add_bridge_arguments(parser: argparse.ArgumentParser, start: str) -> None:
    from ...config.lia_mtr import BRIDGE_NAMES

    parser.add_argument("--bridge", required=True, choices=BRIDGE_NAMES, help="the bridge trained")
    parser.add_argument("--start", required=True, help=start)
    parser.add_argument("--features", required=True, help="features directory (relin lia-mtr-clip-features)")
    parser.add_argument("--data", required=True, help="lia-mtr-synth-vision directory")
    add_output_arguments(parser)


def phase_rows(data, tokenizer, phase: str, num_patches: int) -> tuple[list[list[int]], list[list[int]], list[int]]:
    """Phase 1 (``align``): LLaVA's plain rows, ``<image>`` then the caption. Phase 2 (``instruct``): the
    conversation through the chat template with ``<image>`` opening the first user turn, and for drawn scenes a
    one-turn row per yes/no question of every MME category about the image (``train.qa``) and per open question
    (``train.open``). Only the caption,
    or the assistant turns, are supervised. Returns ids, labels and each row's image (its index in the
    features): the scene's own image for drawn scenes, ``train.<phase>_images`` for imported data."""
    from ...models.vlm.chat import IMAGE, encode_caption, encode_chat, expand_image_tokens

    image_id = tokenizer.convert_tokens_to_ids(IMAGE)
    rows = []
    if phase == "align":
        rows = [encode_caption(tokenizer, caption) for caption in data.train["captions"]]
        images = data.train.get("align_images", list(range(len(rows))))
    else:
        for turns in data.train["conversations"]:
            messages = [dict(turns[0], content=f"{IMAGE} {turns[0]['content']}"), *turns[1:]]
            rows.append(encode_chat(tokenizer, messages))
        images = list(data.train.get("instruct_images", range(len(rows))))
        none = [[]] * len(data.train.get("qa", []))
        # drawn scenes: MME's kind of question and the open ones behind it, each asked first
        for image, (qa, open_) in enumerate(zip(data.train.get("qa", []), data.train.get("open", none))):
            for item in (*qa, *open_):
                rows.append(encode_chat(tokenizer, [{"role": "user", "content": f"{IMAGE} {item['question']}"},
                                                    {"role": "assistant", "content": item["answer"]}]))
                images.append(image)
    expanded = [expand_image_tokens(ids, labels, image_id, num_patches) for ids, labels in rows]
    return [ids for ids, _ in expanded], [labels for _, labels in expanded], images


def feature_batches(ids, labels, images, features, pad_id: int, train_cfg, env):
    """Rows with their image's features (``features[images[row]]``): ``input_ids``, ``labels``,
    ``attention_mask`` and ``features``."""
    import torch

    from ...train.sources import RowBatches, pad_rows

    images = torch.as_tensor(images)

    def collate(idx):
        batch = pad_rows([ids[i] for i in idx], [labels[i] for i in idx], pad_id)
        return {**batch, "features": features[images[torch.as_tensor(idx)]]}

    return RowBatches(len(ids), collate, batch_size=train_cfg.batch_size, seed=train_cfg.seed,
                      max_len=max(map(len, ids)), rank=env.rank, world_size=env.world_size)
