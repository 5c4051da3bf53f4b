# LIA-MTR (seed 000): synthetic scenes -> CLIP tower -> cached patch features; a chat LLM; per bridge,
# LLaVA's phase 1 (align) and phase 2 (instruct), then the MME-style evaluation of both phases.
from relin.config.lia_mtr import MTR_VARIANTS

LIA_BRIDGES = config["lia_mtr"]["bridges"]


# Every bridge the config may name (relin.config.lia_mtr.BRIDGE_NAMES), as a wildcard constraint.
BRIDGE_WILDCARD = "|".join(BRIDGE_NAMES)


if config["lia_mtr"]["source"] == "synthetic":

    rule synth_vision:
        """Synthetic scenes: captions, conversations, the MME-style set, the chat tokenizer."""
        output:
            directory("results/lia_mtr/data"),
        params:
            cfg=sections("lia_mtr.data"),
        log:
            "logs/lia_mtr/synth_vision.log",
        benchmark:
            "results/benchmarks/lia_mtr/synth_vision.tsv"
        threads: 1
        conda:
            "../envs/relin.yaml"
        resources:
            mem_mb=2000,
            gpu=0,
        shell:
            "relin lia-mtr-synth-vision --config {params.cfg:q} --out {output} > {log} 2>&1"

else:

    rule llava_data:
        """Real data: LLaVA JSON for both phases, their images, and MME as released (same layout as synth_vision)."""
        input:
            align=config["lia_mtr"]["llava"]["align_json"],
            instruct=config["lia_mtr"]["llava"]["instruct_json"],
            images=config["lia_mtr"]["llava"]["image_folder"],
            mme=config["lia_mtr"]["llava"]["mme_folder"],
        output:
            directory("results/lia_mtr/data"),
        params:
            cfg=sections("lia_mtr.llava", "lia_mtr.llm"),
        log:
            "logs/lia_mtr/llava_data.log",
        benchmark:
            "results/benchmarks/lia_mtr/llava_data.tsv"
        threads: 1
        conda:
            "../envs/relin.yaml"
        resources:
            mem_mb=16000,
            gpu=0,
        shell:
            "relin lia-mtr-llava-data --config {params.cfg:q} --out {output} > {log} 2>&1"


rule vision_tower:
    """The CLIP tower, trained contrastively on the scenes (or a checkpoint)."""
    input:
        unpack(lambda wildcards: lia_checkpoint("tower")),
        data="results/lia_mtr/data",
    output:
        model=directory("results/lia_mtr/tower/model"),
        history="results/lia_mtr/tower/history.csv",
        metrics="results/lia_mtr/tower/train_metrics.json",
    params:
        launch=TRAIN,
        cfg=sections("lia_mtr.tower"),
        checkpoint=checkpoint_flag,
    log:
        "logs/lia_mtr/vision_tower.log",
    benchmark:
        "results/benchmarks/lia_mtr/vision_tower.tsv"
    priority: 5
    threads: 1
    conda:
        "../envs/relin.yaml"
    resources:
        mem_mb=3000,
        gpu=GPUS_PER_JOB,
    shell:
        "{params.launch} lia-mtr-vision-tower --config {params.cfg:q} --data {input.data}{params.checkpoint} --out {output.model}"
        " --history {output.history} --metrics {output.metrics} --checkpoints checkpoints/lia_mtr/tower > {log} 2>&1"


rule clip_features:
    """Penultimate-layer patch features (no CLS) of every image, cached."""
    input:
        tower="results/lia_mtr/tower/model",
        data="results/lia_mtr/data",
    output:
        directory("results/lia_mtr/features"),
    params:
        cfg=sections("lia_mtr.tower"),
    log:
        "logs/lia_mtr/clip_features.log",
    benchmark:
        "results/benchmarks/lia_mtr/clip_features.tsv"
    priority: 5
    threads: 1
    conda:
        "../envs/relin.yaml"
    resources:
        mem_mb=3000,
        gpu=1,
    shell:
        "relin lia-mtr-clip-features --config {params.cfg:q} --tower {input.tower} --data {input.data} --out {output}"
        " > {log} 2>&1"


# The chain synth_vision -> (vision_tower -> clip_features, chat_lm) -> bridge_align -> bridge_instruct -> eval_mme is
# the longest after the Qwen3 teacher's: at priority 5 it runs on the free core while the teacher trains, not last.
rule chat_lm:
    """The chat LLM, trained on the scenes' text alone (or a checkpoint)."""
    input:
        unpack(lambda wildcards: lia_checkpoint("llm")),
        data="results/lia_mtr/data",
    output:
        model=directory("results/lia_mtr/llm/model"),
        history="results/lia_mtr/llm/history.csv",
        metrics="results/lia_mtr/llm/train_metrics.json",
    params:
        launch=TRAIN,
        cfg=sections("lia_mtr.llm"),
        checkpoint=checkpoint_flag,
    log:
        "logs/lia_mtr/chat_lm.log",
    benchmark:
        "results/benchmarks/lia_mtr/chat_lm.tsv"
    priority: 5
    threads: 1
    conda:
        "../envs/relin.yaml"
    resources:
        mem_mb=3000,
        gpu=GPUS_PER_JOB,
    shell:
        "{params.launch} lia-mtr-chat-lm --config {params.cfg:q} --data {input.data}{params.checkpoint} --out {output.model}"
        " --history {output.history} --metrics {output.metrics} --checkpoints checkpoints/lia_mtr/llm > {log} 2>&1"


rule bridge_align:
    """LLaVA phase 1: the bridge alone, the LLM frozen, on captions."""
    input:
        start="results/lia_mtr/llm/model",
        features="results/lia_mtr/features",
        data="results/lia_mtr/data",
    output:
        model=directory("results/lia_mtr/align/{bridge}{rep}/model"),
        history="results/lia_mtr/align/{bridge}{rep}/history.csv",
        metrics="results/lia_mtr/align/{bridge}{rep}/train_metrics.json",
    params:
        launch=TRAIN,
        cfg=seeded(sections("lia_mtr.align", "lia_mtr.bridge", "lia_mtr.kernel_backend")),
    log:
        "logs/lia_mtr/bridge_align/{bridge}{rep}.log",
    benchmark:
        "results/benchmarks/lia_mtr/bridge_align/{bridge}{rep}.tsv"
    wildcard_constraints:
        bridge=BRIDGE_WILDCARD,
        rep=REPLICA,
    priority: 5
    threads: 1
    conda:
        "../envs/relin.yaml"
    resources:
        mem_mb=3000,
        gpu=GPUS_PER_JOB,
    shell:
        "{params.launch} lia-mtr-bridge-align --config {params.cfg:q} --bridge {wildcards.bridge} --start {input.start}"
        " --features {input.features} --data {input.data} --out {output.model} --history {output.history}"
        " --metrics {output.metrics} --checkpoints checkpoints/lia_mtr/align/{wildcards.bridge}{wildcards.rep} > {log} 2>&1"


rule bridge_instruct:
    """LLaVA phase 2: bridge + LLM on conversations, assistant tokens supervised."""
    input:
        start="results/lia_mtr/align/{bridge}{rep}/model",
        features="results/lia_mtr/features",
        data="results/lia_mtr/data",
    output:
        model=directory("results/lia_mtr/instruct/{bridge}{rep}/model"),
        history="results/lia_mtr/instruct/{bridge}{rep}/history.csv",
        metrics="results/lia_mtr/instruct/{bridge}{rep}/train_metrics.json",
    params:
        launch=TRAIN,
        cfg=seeded(sections("lia_mtr.instruct")),
    log:
        "logs/lia_mtr/bridge_instruct/{bridge}{rep}.log",
    benchmark:
        "results/benchmarks/lia_mtr/bridge_instruct/{bridge}{rep}.tsv"
    wildcard_constraints:
        bridge=BRIDGE_WILDCARD,
        rep=REPLICA,
    priority: 5
    threads: 1
    conda:
        "../envs/relin.yaml"
    resources:
        mem_mb=3000,
        gpu=GPUS_PER_JOB,
    shell:
        "{params.launch} lia-mtr-bridge-instruct --config {params.cfg:q} --bridge {wildcards.bridge} --start {input.start}"
        " --features {input.features} --data {input.data} --out {output.model} --history {output.history}"
        " --metrics {output.metrics} --checkpoints checkpoints/lia_mtr/instruct/{wildcards.bridge}{wildcards.rep} > {log} 2>&1"


rule eval_mme:
    """The MME-style set answered after each phase, scored as the official tool (Table I analogue)."""
    input:
        align="results/lia_mtr/align/{bridge}{rep}/model",
        instruct="results/lia_mtr/instruct/{bridge}{rep}/model",
        features="results/lia_mtr/features",
        data="results/lia_mtr/data",
    output:
        answers=directory(names.mme_file("{bridge}{rep}", "answers")),
        metrics=names.mme_file("{bridge}{rep}", "metrics"),
        scored=names.mme_file("{bridge}{rep}", "items"),
        figure=names.mme_file("{bridge}{rep}", "figure"),
    params:
        cfg=sections("eval"),
    log:
        "logs/lia_mtr/eval_mme/{bridge}{rep}.log",
    benchmark:
        "results/benchmarks/lia_mtr/eval_mme/{bridge}{rep}.tsv"
    wildcard_constraints:
        bridge=BRIDGE_WILDCARD,
        rep=REPLICA,
    priority: 5
    threads: 1
    conda:
        "../envs/relin.yaml"
    resources:
        mem_mb=3000,
        gpu=1,
    shell:
        "relin lia-mtr-eval-mme --config {params.cfg:q} --bridge {wildcards.bridge} --model align={input.align}"
        " instruct={input.instruct} --features {input.features} --data {input.data} --out {output.answers}"
        " --metrics {output.metrics} --items {output.scored} --figure {output.figure} > {log} 2>&1"


rule mme_text:
    """The text-only reference: the chat LLM answers the MME-style set from each scene's caption in text."""
    input:
        llm="results/lia_mtr/llm/model",
        data="results/lia_mtr/data",
    output:
        answers=directory(names.mme_file("text_reference", "answers")),
        metrics=names.mme_file("text_reference", "metrics"),
        scored=names.mme_file("text_reference", "items"),
    params:
        cfg=sections("eval"),
    log:
        "logs/lia_mtr/mme_text.log",
    benchmark:
        "results/benchmarks/lia_mtr/mme_text.tsv"
    threads: 1
    conda:
        "../envs/relin.yaml"
    resources:
        mem_mb=3000,
        gpu=1,
    shell:
        "relin lia-mtr-mme-text --config {params.cfg:q} --llm {input.llm} --data {input.data} --out {output.answers}"
        " --metrics {output.metrics} --items {output.scored} > {log} 2>&1"


rule mme_probe:
    """The per-patch linear probe: can one patch's features decide each MME-style category (a precondition)?"""
    input:
        features="results/lia_mtr/features",
        data="results/lia_mtr/data",
    output:
        metrics="results/lia_mtr/mme/patch_probe/metrics.json",
    params:
        cfg=sections(),
    log:
        "logs/lia_mtr/mme_probe.log",
    benchmark:
        "results/benchmarks/lia_mtr/mme_probe.tsv"
    threads: 1
    conda:
        "../envs/relin.yaml"
    resources:
        mem_mb=3000,
        gpu=0,
    shell:
        "relin lia-mtr-mme-probe --config {params.cfg:q} --features {input.features} --data {input.data}"
        " --metrics {output.metrics} > {log} 2>&1"


rule vlm_photos:
    """Real photos from installed packages described by LIA-MTR's VLM (first seed) after each phase: a qualitative
    look, with a tower that reads photos (a checkpoints row)."""
    input:
        tower="results/lia_mtr/tower/model",
        features="results/lia_mtr/features",
        align="results/lia_mtr/align/lia_mtr/model",
        instruct="results/lia_mtr/instruct/lia_mtr/model",
    output:
        directory("results/lia_mtr/photos"),
    params:
        cfg=sections("eval"),
    log:
        "logs/lia_mtr/vlm_photos.log",
    benchmark:
        "results/benchmarks/lia_mtr/vlm_photos.tsv"
    threads: 1
    conda:
        "../envs/relin.yaml"
    resources:
        mem_mb=3000,
        gpu=1,
    shell:
        "relin lia-mtr-vlm-photos --config {params.cfg:q} --tower {input.tower} --features {input.features}"
        " --model align={input.align} instruct={input.instruct} --out {output} > {log} 2>&1"


rule bridge_niah:
    """Bridge-isolated NIAH (Fig. 2): one bridge alone, trained through the loop, depth x length accuracy."""
    output:
        model=directory("results/lia_mtr/niah/{bridge}{rep}/model"),
        history="results/lia_mtr/niah/{bridge}{rep}/history.csv",
        train_metrics="results/lia_mtr/niah/{bridge}{rep}/train_metrics.json",
        table="results/lia_mtr/niah/{bridge}{rep}/niah.csv",
        item_scores="results/lia_mtr/niah/{bridge}{rep}/items.csv",
        metrics="results/lia_mtr/niah/{bridge}{rep}/metrics.json",
        figure="results/lia_mtr/niah/{bridge}{rep}/niah.png",
    params:
        cfg=seeded(sections("lia_mtr.niah", "lia_mtr.bridge", "lia_mtr.kernel_backend")),
    log:
        "logs/lia_mtr/bridge_niah/{bridge}{rep}.log",
    benchmark:
        "results/benchmarks/lia_mtr/bridge_niah/{bridge}{rep}.tsv"
    wildcard_constraints:
        bridge=BRIDGE_WILDCARD,
        rep=REPLICA,
    threads: 1
    conda:
        "../envs/relin.yaml"
    resources:
        mem_mb=3000,
        gpu=1,
    shell:
        "relin lia-mtr-bridge-niah --config {params.cfg:q} --bridge {wildcards.bridge} --table {output.table}"
        " --items {output.item_scores} --scores {output.metrics} --figure {output.figure} --out {output.model}"
        " --history {output.history} --metrics {output.train_metrics}"
        " --checkpoints checkpoints/lia_mtr/niah/{wildcards.bridge}{wildcards.rep} > {log} 2>&1"


rule bridge_memory:
    """Peak forward memory of each bridge against N visual patches (CPU sizes)."""
    output:
        table="results/lia_mtr/memory/memory.csv",
        metrics="results/lia_mtr/memory/metrics.json",
        figure="results/lia_mtr/memory/memory.png",
    params:
        cfg=sections("lia_mtr.memory"),
    log:
        "logs/lia_mtr/bridge_memory.log",
    benchmark:
        "results/benchmarks/lia_mtr/bridge_memory.tsv"
    threads: 1
    conda:
        "../envs/relin.yaml"
    resources:
        mem_mb=4000,
        gpu=1,
    shell:
        "relin lia-mtr-bridge-memory --config {params.cfg:q} --table {output.table} --metrics {output.metrics}"
        " --figure {output.figure} > {log} 2>&1"


# The LIA-MTR family among the Table I bridges (both readings, the ablations): each one's gate and mixer is probed.
MTR_PROBED = ["lia_mtr", *(b for b in LIA_BRIDGES if b in MTR_VARIANTS)] if LIA_BRIDGES else []


rule bridge_probe:
    """Write-gate statistics, mixer weights per scale and decay half-lives of the trained LIA-MTR bridges."""
    input:
        models=expand("results/lia_mtr/instruct/{bridge}/model", bridge=MTR_PROBED),
        features="results/lia_mtr/features",
    output:
        metrics="results/lia_mtr/probe/probe.json",
        figure="results/lia_mtr/probe/probe.png",
    params:
        cfg=sections(),
    log:
        "logs/lia_mtr/bridge_probe.log",
    benchmark:
        "results/benchmarks/lia_mtr/bridge_probe.tsv"
    threads: 1
    conda:
        "../envs/relin.yaml"
    resources:
        mem_mb=2000,
        gpu=0,
    shell:
        "relin lia-mtr-bridge-probe --config {params.cfg:q} --model "
        + " ".join(f"{b}=results/lia_mtr/instruct/{b}/model" for b in MTR_PROBED) + " --features {input.features}"
        " --metrics {output.metrics} --figure {output.figure} > {log} 2>&1"


rule lia_mtr:
    """LIA-MTR alone (`snakemake --cores 2 lia_mtr`): every bridge through both phases and MME, the text-only
    reference, the bridge NIAH, memory against N, the gate probe, and LIA-MTR's report."""
    input:
        # with a checkpoint tower (the pretrained overlay) the manifest lists the photos the VLM described
        manifest_paths(paper_files("lia_mtr", lambda path: lookup(config, path))),
        "results/report-lia_mtr",
