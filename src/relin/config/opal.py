"""The ``opal`` section: OPAL's conversion of a Qwen3 teacher to a Gated DeltaNet hybrid and its three
recovery stages (Raje et al. 2026; Tables 5-7), with the SWA baseline and the matched off-policy control."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .chain import TEACHER, Chain, Step, check_chain, check_rows
from .claims import (
    ClaimRow,
    Claims,
    Competent,
    Different,
    EnoughSeeds,
    Headroom,
    Items,
    Learned,
    Moved,
    Reached,
    check_claims,
)
from .loader import ConfigError, check_replicated, option
from .train import TrainConfig

# The needle families a zero-shot protocol keeps out of every distillation stage.
NIAH_TASKS = ("niah_single", "niah_multikey", "niah_multiquery", "niah_text")


# The layer-selection rules of ``opal.layer_selection`` (pure: the report applies them too).
def kl_guided_layers(scores: list[float], keep: int) -> list[int]:
    """The ``keep`` layers whose conversion costs the most KL (ties to the later layer), in order."""
    ranked = sorted(range(len(scores)), key=lambda i: (scores[i], i), reverse=True)
    return sorted(ranked[:keep])


def kept_attention_layers(num_layers: int, keep_every: int, explicit: list[int] = ()) -> list[int]:
    """Indices of the layers that stay attention: ``explicit``, or every ``keep_every``-th counted from
    the top of each group (layers 3, 7, …, as Qwen3-Next and OPAL keep)."""
    kept = sorted(explicit) if explicit else [i for i in range(num_layers) if (i + 1) % keep_every == 0]
    if not kept or kept[-1] >= num_layers or kept[0] < 0:
        raise ConfigError(f"opal: kept attention layers {kept}: expected at least one index in [0, {num_layers}) "
                          f"for a teacher of {num_layers} layers (from opal.attention_layers, or every "
                          f"keep_every={keep_every}-th layer)")
    return kept


@dataclass(kw_only=True)
class GDNConfig:
    """The Gated DeltaNet layers that replace attention."""

    conv_size: int = option(4, "short-convolution taps over q, k and v", minimum=1)
    conv_activation: Literal["silu", "none"] = option("silu", "activation after the short convolution (fla: silu)")
    qk_norm: bool = option(False, "keep the teacher's per-head q/k RMSNorm before the kernel's L2 norm (RADLADS' "
                                    "use_qk_rmsnorm; Qwen3.5's GDN has none, so `relin opal-export` refuses it)")
    allow_neg_eigval: bool = option(False, "beta in (0, 2) instead of (0, 1)")


@dataclass(kw_only=True)
class LayerScoringConfig:
    """The rows each layer's conversion KL is scored on (the kl_guided selection and the report's per-layer KL): the
    first of the shuffled training split, cut to ``max_len``; a ranking needs few of them, and every layer costs a
    forward of the whole model over them."""

    rows: int = option(64, "training rows scored", minimum=1)
    max_len: int = option(0, "tokens of each scored row kept (0: whole rows)", minimum=0)


@dataclass(kw_only=True)
class SWAConfig:
    """The sliding-window baseline SWA(window, sinks) (the paper's is (256, 4) at 32K context)."""

    window: int = option(64, "tokens each query sees back", minimum=1)
    sinks: int = option(4, "first tokens every query also sees", minimum=0)
    # The paper's SWA rows score 0.0 on every NIAH family beyond the window, which a model keeping full-attention
    # layers would not: its baseline is read as every layer SWA. "hybrid" keeps the GDN conversion's layers.
    layout: Literal["all", "hybrid"] = option("all", "every layer SWA (all), or the GDN conversion's kept layers "
                                                     "full attention and the rest SWA (hybrid)")


@dataclass(kw_only=True)
class AlignConfig:
    """Stage 1: only GDN parameters train; each GDN layer's output aligned to the teacher's attention output."""

    loss: Literal["mse", "cosine"] = option("mse", "per-position alignment loss")
    inputs: Literal["teacher", "own"] = option("teacher", "GDN layers run on the teacher's layer inputs, or "
                                                          "on the student's own hidden states")
    train: TrainConfig = option(default_factory=TrainConfig, help="stage-1 training")

    def validate(self, prefix: str) -> None:
        if self.train.gradient_checkpointing:
            raise ConfigError(f"{prefix}.train.gradient_checkpointing: stage 1 feeds each GDN layer the teacher's "
                              f"layer inputs through hooks, which a recomputed forward would run again; expected "
                              f"false (stage 1 holds one layer's activations per layer, without the LM head)")


@dataclass(kw_only=True)
class OffPolicyConfig:
    """Stage 2: all parameters, logit distillation on the dataset's text (a curriculum caps the length)."""

    divergence: Literal["forward_kl", "reverse_kl"] = option("forward_kl", "token-level divergence to the teacher")
    train: TrainConfig = option(default_factory=TrainConfig, help="training (its curriculum sets the context)")


@dataclass(kw_only=True)
class OnPolicyConfig:
    """Stage 3: the student samples continuations of prompts; the frozen teacher scores every position."""

    divergence: Literal["reverse_kl", "reverse_kl_sampled"] = option(
        "reverse_kl", "position-wise reverse KL over the full vocabulary, or its sampled-token estimator")
    temperature: float = option(1.0, "rollout temperature", exclusive_minimum=0)
    top_p: float = option(1.0, "rollout nucleus", exclusive_minimum=0, maximum=1)
    initial_horizon: int = option(16, "tokens generated per prompt at first", minimum=1)
    max_horizon: int = option(128, "largest horizon the curriculum reaches", minimum=1)
    plateau_window: int = option(30, "steps over which the KL gain is measured", minimum=2)
    plateau_gain: float = option(0.02, "the horizon doubles when the relative KL gain over the window is below this",
                                 minimum=0)
    prompt_tasks: dict[str, float] = option({"walk": 1.0},
                                            "task -> weight of the prompts rolled out (filler, text: a prefix); the "
                                            "scored ones among them are Table 3's families")
    train: TrainConfig = option(default_factory=TrainConfig, help="stage-3 training (batch_size = prompts per step)")

    def validate(self, prefix: str) -> None:
        if self.max_horizon < self.initial_horizon:
            raise ConfigError(f"{prefix}.max_horizon: expected >= initial_horizon ({self.initial_horizon}), "
                              f"got {self.max_horizon}")
        if not any(weight > 0 for weight in self.prompt_tasks.values()):
            raise ConfigError(f"{prefix}.prompt_tasks: expected at least one task with a positive weight")


@dataclass(kw_only=True)
class SpeedConfig:
    """Decode memory and throughput of the hybrid against its teacher as the context grows (paper Fig. 4)."""

    contexts: list[int] = option([128, 256, 512, 1024], "prompt lengths (tokens) decoded from")
    batch_size: int = option(4, "sequences decoded together", minimum=1)
    decode_steps: int = option(16, "tokens generated (and timed) after each prompt", minimum=1)

    def validate(self, prefix: str) -> None:
        if not self.contexts or min(self.contexts) < 1:
            raise ConfigError(f"{prefix}.contexts: expected a non-empty list of positive lengths")


# OPAL's models in report order, one row each: the rules, the report manifest and the report's OPAL section all read
# this table (relin.config.chain). A model of the chain starts from the row it names; the Table 3 controls continue
# stage 2B at stage 3's budget.
_CONVERT = ("opal.layer_selection", "opal.keep_every", "opal.attention_layers", "opal.kernel_backend", "opal.gdn",
            "opal.layer_scoring")
_ALIGN = ("opal.align", "opal.niah_protocol")
CHAIN: Chain = {
    "swa": Step("opal_convert", "SWA(window, sinks) baseline", start=TEACHER,
                sections=("opal.swa", "opal.kernel_backend"), options={"mixer": "swa"},
                reads={"layers": "gdn/layers.json"}, data=False, trained=False),
    "gdn": Step("opal_convert", "GDN hybrid as converted", start=TEACHER, sections=_CONVERT, options={"mixer": "gdn"},
                trained=False),
    "gdn_kl_guided": Step("opal_convert", "GDN hybrid, kl_guided layers (from gdn's scores)", start=TEACHER,
                          sections=_CONVERT, variant={"opal.layer_selection": "kl_guided", "opal.attention_layers": []},
                          options={"mixer": "gdn"}, reads={"layers": "gdn/layers.json"}, data=False, trained=False,
                          evaluated=False),
    "align": Step("opal_align", "stage 1: hidden-state alignment", start="gdn", sections=_ALIGN),
    "align_kl_guided": Step("opal_align", "selection control: stage 1 from the kl_guided layers, stage 1's budget",
                            start="gdn_kl_guided", sections=_ALIGN),
    "offpolicy_short": Step("opal_offpolicy", "stage 2A: off-policy, short context", start="align",
                            sections=("opal.offpolicy_short", "opal.niah_protocol"), options={"phase": "short"}),
    "offpolicy_long": Step("opal_offpolicy", "stage 2B: off-policy, long context", start="offpolicy_short",
                           sections=("opal.offpolicy_long", "opal.niah_protocol"), options={"phase": "long"}),
    "onpolicy": Step("opal_onpolicy", "stage 3: on-policy (OPAL)", start="offpolicy_long",
                     sections=("opal.onpolicy", "opal.niah_protocol")),
    "offpolicy_matched": Step("opal_offpolicy", "control: off-policy on dataset text, stage 3's budget",
                              start="offpolicy_long", budget="onpolicy",
                              sections=("opal.offpolicy_matched", "opal.niah_protocol"), options={"phase": "matched"}),
    "offpolicy_teacher": Step("opal_offpolicy", "control: off-policy on the teacher's continuations, stage 3's budget",
                              start="offpolicy_long", budget="onpolicy",
                              sections=("opal.offpolicy_teacher", "opal.niah_protocol", "opal.onpolicy"),
                              options={"phase": "teacher"}),
}
check_chain("opal", CHAIN)
# The evaluated models (report order) and their labels; the trained ones.
MODELS = {name: step.label for name, step in CHAIN.items() if step.evaluated}
TRAINED = tuple(name for name, step in CHAIN.items() if step.trained)
# The Table 3 controls: trained at stage 3's budget.
CONTROLS = tuple(name for name, step in CHAIN.items() if step.budget == "onpolicy")
# Table 3's arms continue from this stage (2B).
PARENT = "offpolicy_long"
# Table 3 is judged only where the teacher generates the family's answers: at least this exact match (issue 48).
TABLE3_TEACHER = 0.9
# Table 3's claims hold where the run could show them: the teacher generates the answers, stage 3 moved the student
# from 2B (a control that stays put at the same budget is a result, not a run unable to show it), enough seeds, the
# metric has headroom, and the rollouts reached the horizon where a student's errors compound.
_TABLE3 = (Competent(threshold=TABLE3_TEACHER, over="all"), Moved(PARENT, who="stage 3"), EnoughSeeds(), Headroom(),
           Reached("stage 3's rollout horizon", "horizon", "opal_horizon", " tokens"))
# Table 4: "recovers" reads as at least RECOVERS % of the teacher, "collapses" as at most COLLAPSES %. The hybrid is
# read on the NIAH families no distillation stage trained on (the paper's students meet NIAH zero-shot), over those the
# teacher masters; a teacher trained on them is stronger than the paper's zero-shot one, and only a win can be read.
# SWA is read on the needles beyond what its stacked windows reach (a needle within the reach is visible to SWA, layer
# by layer); SWA is the teacher's weights under windows, so a teacher trained on the needles made SWA so too.
RECOVERS, COLLAPSES = 90.0, 10.0
# OPAL's claims judged by the one judge (relin.config.claims), in report order within each kind; the section's
# facts: the horizon stage 3 reached, Table 3's quoted figures (paper_<arm>, where_<arm>), Table 4's (table4_gdn,
# table4_swa), the families the teacher trained on, SWA's stacked reach (reach, reach_text), the attention layers the
# hybrid keeps (kept_count, kept_shown) and, with the conversion's layer record, the layers each selection keeps; its
# families: the NIAH ones (niah), those no stage trained on (niah_unseen) and those the stages train on (trained); its
# item filter: the needles beyond SWA's reach (beyond_reach).
CLAIMS: Claims = (
    ClaimRow("The GDN hybrid after OPAL recovers the teacher's NIAH retrieval (≥ {threshold:g}%)", "{table4_gdn}",
             ("onpolicy",), "recovery", "at_least", threshold=RECOVERS, families="niah_unseen", ours="{a} over {used}",
             preconditions=(Items("NIAH families the students never trained on, with items"),
                            Competent(trained_on="teacher_trained"),
                            Learned("onpolicy", "its training tasks (≥ {learned:g}% of the teacher)",
                                    families="trained", threshold="learned", shown="{a} over {used}"),
                            Reached("attention layers the hybrid keeps", "kept_count", "opal_kept_layers",
                                    shown="kept_shown"))),
    ClaimRow("SWA collapses on NIAH beyond its reach (≤ {threshold:g}% of the teacher)", "{table4_swa}", ("swa",),
             "recovery", "at_most", threshold=COLLAPSES, families="niah", over=("beyond_reach",), seeded=False,
             ours="{a} of the teacher, needles ≥ {reach:g} tokens back",
             preconditions=(Items("needles beyond SWA's stacked reach ({reach_text})"), Competent())),
    ClaimRow("The hybrid's decode cache is at most half the teacher's (context {longest})", "Fig. 4", ("onpolicy",),
             "figure", "at_most", kind="check", threshold=50, over=("cache_share",),
             ours="{a} of the teacher's (measured, exact)"),
    ClaimRow("On-policy beats off-policy on dataset text at a matched budget",
             "{paper_onpolicy} vs {paper_offpolicy_matched} (Table 3, MATH-500 at 400M tokens: "
             "{where_offpolicy_matched})", ("onpolicy", "offpolicy_matched"), "recovery", "beats",
             margin="opal.onpolicy_vs_offpolicy_matched", families="table3", preconditions=_TABLE3,
             ours="{a} vs {b} over {used}; difference {difference} points", names=("on-policy", "off-policy")),
    ClaimRow("On-policy beats off-policy on the teacher's continuations at a matched budget",
             "{paper_onpolicy} vs {paper_offpolicy_teacher} (Table 3, MATH-500 at 400M tokens: "
             "{where_offpolicy_teacher})", ("onpolicy", "offpolicy_teacher"), "recovery", "beats",
             margin="opal.onpolicy_vs_offpolicy_teacher", families="table3", preconditions=_TABLE3,
             ours="{a} vs {b} over {used}; difference {difference} points", names=("on-policy", "off-policy")),
    ClaimRow("KL-guided layer selection beats {selection} after stage 1 at the same budget",
             "fla-org/hybrid-distillation (no figure in seed 002)", ("align_kl_guided", "align"), "recovery", "beats",
             kind="beyond", margin="opal.kl_guided_vs_every_n", families="tasks",
             preconditions=(Different("the two selections keep different layers", "kl_layers", "kept_layers",
                                      "kl_guided {kl_layers}, {selection} {kept_layers}"),
                            Competent(), EnoughSeeds(), Headroom()),
             ours="layers {kl_layers}: {a} vs layers {kept_layers}: {b}; difference {difference} points",
             names=("kl_guided", "{selection}")),
)
check_claims("opal", CHAIN, CLAIMS)
# OPAL models lm-evaluation-harness can score: the teacher and every trained or baseline student.
LM_EVAL_MODELS = (TEACHER, *(name for name in MODELS if name != "gdn"))


@dataclass(kw_only=True)
class LMEvalConfig:
    """The paper's benchmarks (GSM8K, MATH-500, commonsense) through lm-evaluation-harness's Hugging Face model
    class on the teacher and the hybrid; no tasks (the default: the synthetic data has none of them) adds no stage."""

    tasks: list[str] = option([], "lm-evaluation-harness task names (e.g. gsm8k, minerva_math500, hellaswag, piqa, "
                                  "arc_easy, winogrande), or tasks defined under include_path")
    models: list[str] = option(["teacher", "onpolicy"], "OPAL models evaluated: teacher, swa, or a stage's model "
                                                        "(align, offpolicy_short, offpolicy_long, onpolicy, "
                                                        "offpolicy_matched)")
    include_path: str = option("", "folder of extra task YAML files (local datasets); '' for none")
    num_fewshot: int = option(-1, "few-shot examples per prompt; -1: each task's own default", minimum=-1)
    limit: int = option(0, "examples per task; 0: all", minimum=0)
    batch_size: int = option(8, "sequences per forward", minimum=1)
    max_length: int = option(0, "longest context fed to the model; 0: its max_position_embeddings", minimum=0)

    def validate(self, prefix: str) -> None:
        if unknown := [m for m in self.models if m not in LM_EVAL_MODELS]:
            raise ConfigError(f"{prefix}.models: unknown {unknown}; expected names from {list(LM_EVAL_MODELS)}")
        if self.tasks and not self.models:
            raise ConfigError(f"{prefix}.models: expected at least one model when tasks are given")


@dataclass(kw_only=True)
class OpalConfig:
    """OPAL: which teacher converts, which layers stay attention, and every stage's training."""

    teacher: str = option("qwen3", "key of teacher.models to convert (a qwen3-family teacher)")
    train_data: Literal["synth_text", "corpus"] = option(
        "synth_text", "what the student stages train on: the synthetic tasks in the teacher's tokenizer, or the "
                      "corpus section's text (the tasks stay the evaluation either way)")
    layer_selection: Literal["every_n", "explicit", "kl_guided"] = option(
        "every_n", "which layers stay attention: every keep_every-th (the paper's), the attention_layers listed, or "
                   "kl_guided: as many as every_n keeps, those whose conversion alone moves the teacher's next-token "
                   "distribution most (KL on training rows; fla-org/hybrid-distillation's KL-guided selection)")
    keep_every: int = option(4, "every_n: layers (i + 1) % keep_every == 0 stay attention (3, 7, ... at 4); "
                                "kl_guided: keeps as many", minimum=1)
    attention_layers: list[int] = option([], "explicit: the indices of the layers that stay attention")
    kernel_backend: Literal["auto", "triton", "torch"] = option("auto", "kernels of the GDN layers (auto: Triton "
                                                                          "on CUDA tensors)")
    gdn: GDNConfig = option(default_factory=GDNConfig, help="Gated DeltaNet layers")
    layer_scoring: LayerScoringConfig = option(default_factory=LayerScoringConfig,
                                               help="the rows each layer's conversion KL is scored on")
    swa: SWAConfig = option(default_factory=SWAConfig, help="the SWA baseline")
    align: AlignConfig = option(default_factory=AlignConfig, help="stage 1: hidden-state alignment")
    offpolicy_short: OffPolicyConfig = option(default_factory=OffPolicyConfig, help="stage 2A: short context")
    offpolicy_long: OffPolicyConfig = option(default_factory=OffPolicyConfig, help="stage 2B: long context")
    onpolicy: OnPolicyConfig = option(default_factory=OnPolicyConfig, help="stage 3: on-policy distillation")
    offpolicy_matched: OffPolicyConfig = option(default_factory=OffPolicyConfig,
                                                help="Table 3 control: off-policy from stage 2B on dataset text, "
                                                     "stage 3's optimizer steps and teacher-scored tokens per step "
                                                     "(its steps follow from stage 3's budget)")
    offpolicy_teacher: OffPolicyConfig = option(default_factory=OffPolicyConfig,
                                                help="Table 3's second control: off-policy from stage 2B on the "
                                                     "teacher's own continuations of stage 3's prompts, at stage "
                                                     "3's horizons and steps")
    niah_protocol: Literal["zero_shot", "in_distribution"] = option(
        "zero_shot", "zero_shot: no NIAH row in any distillation stage (the teacher learns NIAH; students are "
                     "scored zero-shot, as the paper's); in_distribution: each stage's own task mix, NIAH included")
    speed: SpeedConfig = option(default_factory=SpeedConfig, help="the hybrid_speed benchmark")
    lm_eval: LMEvalConfig = option(default_factory=LMEvalConfig, help="lm-evaluation-harness benchmarks")
    seeds: list[int] = option([], "training seeds of the models listed in replicated here, in place of the "
                                  "top-level `seeds` (empty: those); the first must be theirs, whose models carry no "
                                  "suffix")
    replicated: list[str] = option([], "the trained models retrained with every seed of `seeds` (replicas "
                                       "<name>-s<seed>); a replica starts from its parent's replica when the parent "
                                       "is replicated too, else from the parent (e.g. stage 3's arms from one 2B)")
    rows: list[str] = option([], "the rows of OPAL's table (config.opal.CHAIN) this config runs; empty: every row")

    def validate(self, prefix: str) -> None:
        check_rows(f"{prefix}.rows", CHAIN, self.rows)
        check_replicated(f"{prefix}.replicated", self.replicated, TRAINED)
        if (self.layer_selection == "explicit") != bool(self.attention_layers):
            raise ConfigError(f"{prefix}.attention_layers: expected indices exactly when layer_selection is explicit "
                              f"(got {self.attention_layers} with {self.layer_selection})")
        if self.train_data == "corpus":
            others = sorted(t for t, w in self.onpolicy.prompt_tasks.items() if w > 0 and t != "corpus")
            if others or not self.onpolicy.prompt_tasks.get("corpus", 0) > 0:
                raise ConfigError(f"{prefix}.onpolicy.prompt_tasks: train_data is corpus, whose rows are all of task "
                                  f"'corpus'; expected corpus: 1.0" + (f" and {', '.join(others)} set to 0" if others
                                                                        else ""))
        if self.niah_protocol == "zero_shot" and not any(
                weight > 0 for task, weight in self.onpolicy.prompt_tasks.items() if task not in NIAH_TASKS):
            raise ConfigError(f"{prefix}.onpolicy.prompt_tasks: niah_protocol zero_shot leaves no prompt task "
                              f"(expected a positive weight for a task other than {', '.join(NIAH_TASKS)})")
