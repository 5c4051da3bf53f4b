"""``relin lia-mtr-bridge-probe``: the paper's probes of the trained LIA-MTR bridges on the evaluation images: the
write gate's mean and standard deviation over every visual token (paper: 0.5053 and 0.0444), the scale
mixer's mean weight per scale (per image too, for intervals; a scale under 1% of the weight is flagged unused)
and the fixed decays' half-lives (paper: 1.94 to 138.28 steps).

``--model NAME=DIR`` per bridge (the first must be ``lia_mtr``, whose probe is the file's top level; every
bridge's, ``lia_mtr`` included, is under ``bridges``). Writes ``probe.json`` and ``probe.png`` (gate histogram;
half-lives with the mixer's weights)."""
from __future__ import annotations

import argparse

# A scale whose mean mixer weight is below this carries (almost) nothing: flagged "unused".
UNUSED_SCALE = 0.01


def config_sections(args: argparse.Namespace) -> dict[str, type]:
    return {}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", nargs="+", required=True, metavar="NAME=DIR",
                        help="LIA-MTR VLM directories (relin lia-mtr-bridge-instruct), lia_mtr first")
    parser.add_argument("--features", required=True, help="features directory (relin lia-mtr-clip-features)")
    parser.add_argument("--metrics", required=True, help="probe JSON to write")
    parser.add_argument("--figure", required=True, help="figure (PNG) to write")


def probe(mixer, features) -> dict:
    """One MTR bridge's gate and mixer statistics on ``features [N, P, d]``."""
    import torch

    from ...layers.mtr_bridge import half_lives

    with torch.no_grad():
        gate, mix = mixer.gates(features)
    lives = half_lives(mixer.log_decays.double().exp())
    mixer_mean = mix.mean((0, 1))
    return {"gate_mean": round(gate.mean().item(), 4), "gate_std": round(gate.std().item(), 4),
            "gate_shape": "token" if gate.shape[-1] == 1 else "channel",
            "state": mixer.state, "half_lives": [round(x, 2) for x in lives.tolist()],
            "decays": [round(x, 5) for x in mixer.log_decays.double().exp().tolist()],
            "mixer_mean": [round(x, 4) for x in mixer_mean.tolist()],
            "unused_scales": [i for i, w in enumerate(mixer_mean.tolist()) if w < UNUSED_SCALE],
            "mixer_per_image": [[round(x, 6) for x in row] for row in mix.mean(1).tolist()],
            "tokens": int(gate.shape[0] * gate.shape[1]),
            "gate_per_image": [round(x, 6) for x in gate.flatten(1).mean(1).tolist()]}


def run(args: argparse.Namespace, sections) -> None:
    from matplotlib.figure import Figure

    from ...data.vision.artifact import load_features
    from ...errors import InputError
    from ...eval.plots import save_figure
    from ...io import atomic_write_json
    from ...layers.mtr_bridge import MTRBridge
    from ...models.vlm.model import BridgeVLM
    from ...tracking import stage_run

    if any("=" not in spec for spec in args.model):
        raise InputError("--model: expected NAME=DIR")
    models = dict(spec.split("=", 1) for spec in args.model)
    if next(iter(models)) != "lia_mtr":
        raise InputError(f"--model: expected lia_mtr=DIR first, got {next(iter(models))}")
    features = load_features(args.features)["mme"]
    probes = {}
    with stage_run("lia-mtr-bridge-probe", {}, inputs=[*models.values(), args.features],
                   outputs=[args.metrics]) as tracker:
        for name, path in models.items():
            mixer = BridgeVLM.from_pretrained(path).bridge.mixer
            if not isinstance(mixer, MTRBridge):
                raise InputError(f"{path}: a {name} bridge has no write gate (expected the LIA-MTR family)")
            probes[name] = probe(mixer, features)
        out = {**probes["lia_mtr"], "bridges": probes}
        atomic_write_json(args.metrics, out)
        tracker.log_metrics({"gate_mean": out["gate_mean"], "gate_std": out["gate_std"]})
    fig = Figure(figsize=(7, 3))
    left, right = fig.subplots(1, 2)
    left.hist([p["gate_per_image"] for p in probes.values()], bins=30, range=(0, 1), label=list(probes))
    left.axvline(0.5053, color="r", ls="--", label="paper mean 0.5053")
    left.set(xlabel="write gate g (mean per image)", ylabel="images", title="write gate on evaluation images")
    left.legend(fontsize=6)
    width = 0.8 / len(probes)
    for i, (name, p) in enumerate(probes.items()):
        right.bar([s + i * width for s in range(len(p["mixer_mean"]))], p["mixer_mean"], width, label=name)
    lives = out["half_lives"]
    right.set_xticks(range(len(lives)), [f"{x:.1f}" for x in lives], fontsize=7)
    right.axhline(UNUSED_SCALE, color="grey", ls="--", lw=0.8)
    right.set(xlabel="half-life of scale (steps)", ylabel="mean mixer weight α", title="scales")
    right.legend(fontsize=6)
    fig.tight_layout()
    save_figure(fig, args.figure)
    print(f"lia-mtr-bridge-probe: gate {out['gate_mean']} ± {out['gate_std']}, half-lives {out['half_lives']}, mixer "
          + "; ".join(f"{n} {p['mixer_mean']}" for n, p in probes.items()))
