"""The exported hybrid decodes on the GPU in stock transformers with relin's tokens.

A random hybrid of Qwen3 blocks (attention every 4th layer, Gated DeltaNet elsewhere; weights spread so that greedy
choices are not near-ties) is exported with ``relin.models.export.to_qwen3_5`` and saved. relin decodes greedily
on the GPU (its Triton kernels); a second process that never imports relin loads the export with
``AutoModelForCausalLM`` on the GPU and decodes the same prompts. Both in fp32. Prints and writes
``export_decode.json``: the prompt logits' max difference and whether every generated token agrees.

    python benchmarks/gpu/export_decode.py --out $OUT
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import torch

from relin.envelope import Envelope

STOCK = textwrap.dedent("""
    import json, sys
    import torch
    from transformers import AutoModelForCausalLM
    directory, ids_path, new_tokens, out_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    model = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32).to("cuda").eval()
    ids = torch.tensor(json.load(open(ids_path)), device="cuda")
    with torch.no_grad():
        logits = model(ids).logits[:, -1]
        tokens = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                                do_sample=False, eos_token_id=None, pad_token_id=0)
    assert not any(m == "relin" or m.startswith("relin.") for m in sys.modules)
    json.dump({"class": type(model).__name__, "last_logits": logits.tolist(), "tokens": tokens.tolist()},
              open(out_path, "w"))
""")


def random_hybrid(layers: int, width: int, heads: int, kv_heads: int, head_dim: int, vocab: int):
    from relin.models.hybrid import HybridConfig, HybridForCausalLM

    types = ["attention" if (i + 1) % 4 == 0 else "gdn" for i in range(layers)]
    config = HybridConfig(vocab_size=vocab, hidden_size=width, intermediate_size=3 * width, num_hidden_layers=layers,
                          num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=head_dim,
                          mixer_types=types, tie_word_embeddings=False, max_position_embeddings=4096,
                          gdn={"qk_norm": False}, pad_token_id=0, eos_token_id=None)
    torch.manual_seed(0)
    model = HybridForCausalLM(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.3 * torch.randn_like(p))
            elif "conv" in name:
                p.copy_(0.5 * torch.randn_like(p))
            elif name.endswith("weight"):
                p.normal_(0.0, 2.0 / width ** 0.5)
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--prompt", type=int, default=200)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--out", default="benchmarks/results")
    Envelope.add_argument(parser)
    args = parser.parse_args()
    envelope = Envelope.start("export_decode", allow_dirty=args.allow_dirty)

    from relin.models.export import to_qwen3_5

    model = random_hybrid(args.layers, args.width, heads=8, kv_heads=4, head_dim=64, vocab=4096)
    with tempfile.TemporaryDirectory() as tmp:
        to_qwen3_5(model).save_pretrained(Path(tmp) / "export")
        ids = torch.randint(1, 4096, (args.batch, args.prompt), generator=torch.Generator().manual_seed(1))
        (Path(tmp) / "ids.json").write_text(json.dumps(ids.tolist()))
        subprocess.run([sys.executable, "-c", STOCK, str(Path(tmp) / "export"), str(Path(tmp) / "ids.json"),
                        str(args.new_tokens), str(Path(tmp) / "stock.json")], check=True, cwd=tmp)
        stock = json.loads((Path(tmp) / "stock.json").read_text())
    model = model.to("cuda")
    ids = ids.to("cuda")
    with torch.no_grad():
        last = model(ids).logits[:, -1]
        tokens = model.generate(ids, max_new_tokens=args.new_tokens, do_sample=False, eos_token_id=None,
                                pad_token_id=0)
    difference = (torch.tensor(stock["last_logits"], device="cuda") - last).abs().max().item()
    agree = (torch.tensor(stock["tokens"], device="cuda") == tokens)[:, args.prompt:]
    result = {"stock_class": stock["class"],
              "layers": args.layers, "width": args.width, "batch": args.batch, "prompt": args.prompt,
              "new_tokens": args.new_tokens, "last_logits_max_abs": difference,
              "tokens_equal_share": agree.float().mean().item(), "all_tokens_equal": bool(agree.all()),
              "distinct_generated": len(set(tokens[:, args.prompt:].flatten().tolist()))}
    envelope.write(Path(args.out) / "export_decode.json", result)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
