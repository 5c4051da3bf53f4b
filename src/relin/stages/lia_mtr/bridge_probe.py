"""``relin bridge-probe``: the paper's probes of the trained LIA-MTR bridge on the evaluation images: the
write gate's mean and standard deviation over every visual token (paper: 0.5053 and 0.0444), the scale
mixer's mean weight per scale, and the fixed decays' half-lives (paper: 1.94 to 138.28 steps).
Writes ``probe.json`` and ``probe.png`` (gate histogram; half-lives with the mixer's weights)."""
from __future__ import annotations

import argparse


def SECTIONS(args: argparse.Namespace) -> dict[str, type]:
    return {}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="LIA-MTR VLM directory (relin bridge-instruct)")
    parser.add_argument("--features", required=True, help="features directory (relin clip-features)")
    parser.add_argument("--metrics", required=True, help="probe JSON to write")
    parser.add_argument("--figure", required=True, help="figure (PNG) to write")


def run(args: argparse.Namespace, sections) -> None:
    import torch
    from matplotlib.figure import Figure

    from ...data.vision.artifact import load_features
    from ...errors import InputError
    from ...eval.plots import save_figure
    from ...io import atomic_write_json
    from ...layers.mtr_bridge import MTRBridge, half_lives
    from ...models.vlm.model import BridgeVLM
    from ...tracking import stage_run

    with stage_run("bridge-probe", {}, inputs=[args.model, args.features], outputs=[args.metrics]) as tracker:
        vlm = BridgeVLM.from_pretrained(args.model)
        mixer = vlm.bridge.mixer
        if not isinstance(mixer, MTRBridge):
            raise InputError(f"{args.model}: a {vlm.bridge.name} bridge has no write gate (expected lia_mtr)")
        features = load_features(args.features)["mme"]
        with torch.no_grad():
            gate, mix = mixer.gates(features)
        lives = half_lives(mixer.log_decays.double().exp())
        probe = {"gate_mean": round(gate.mean().item(), 4), "gate_std": round(gate.std().item(), 4),
                 "gate_shape": "token" if gate.shape[-1] == 1 else "channel",
                 "half_lives": [round(x, 2) for x in lives.tolist()],
                 "decays": [round(x, 5) for x in mixer.log_decays.double().exp().tolist()],
                 "mixer_mean": [round(x, 4) for x in mix.mean((0, 1)).tolist()],
                 "tokens": int(gate.shape[0] * gate.shape[1]),
                 "gate_per_image": [round(x, 6) for x in gate.flatten(1).mean(1).tolist()]}
        atomic_write_json(args.metrics, probe)
        tracker.log_metrics({"gate_mean": probe["gate_mean"], "gate_std": probe["gate_std"]})
    fig = Figure(figsize=(7, 3))
    left, right = fig.subplots(1, 2)
    left.hist(gate.flatten().numpy(), bins=40, range=(0, 1))
    left.axvline(0.5053, color="r", ls="--", label="paper mean 0.5053")
    left.set(xlabel="write gate g", ylabel="count", title="write gate on evaluation images")
    left.legend(fontsize=7)
    right.bar(range(len(lives)), probe["mixer_mean"])
    right.set_xticks(range(len(lives)), [f"{x:.1f}" for x in lives.tolist()], fontsize=7)
    right.set(xlabel="half-life of scale (steps)", ylabel="mean mixer weight α", title="scales")
    fig.tight_layout()
    save_figure(fig, args.figure)
    print(f"bridge-probe: gate {probe['gate_mean']} ± {probe['gate_std']}, half-lives {probe['half_lives']}")
