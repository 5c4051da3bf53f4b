rule hedgehog_match:
    """HedgeMamba stage 1: the GPT-NeoX teacher's attention as Hedgehog layers; only the feature maps train. The
    model wildcard names the configured loss (hedgehog) or a loss variant (MATCH_VARIANTS)."""
    input:
        teacher=HEDGEMAMBA_TEACHER,
        data=HEDGEMAMBA_TRAIN_DATA,
    output:
        model=directory("results/hedgemamba/{model}{rep}/model"),
        history="results/hedgemamba/{model}{rep}/history.csv",
        metrics="results/hedgemamba/{model}{rep}/train_metrics.json",
    params:
        launch=TRAIN,
        cfg=hedgehog_match_sections,
    log:
        "logs/hedgemamba/hedgehog_match/{model}{rep}.log",
    benchmark:
        "results/benchmarks/hedgemamba/hedgehog_match/{model}{rep}.tsv"
    wildcard_constraints:
        model="|".join(HEDGEMAMBA_MATCH_VARIANTS),
        rep=REPLICA,
    threads: 1
    conda:
        "../envs/relin.yaml"
    resources:
        mem_mb=4000,
        gpu=GPUS_PER_JOB,
    shell:
        "{params.launch} hedgehog-match --config {params.cfg:q} --teacher {input.teacher} --data {input.data}"
        " --out {output.model} --history {output.history} --metrics {output.metrics}"
        " --checkpoints checkpoints/hedgemamba/{wildcards.model}{wildcards.rep} > {log} 2>&1"


rule hedgemamba_init:
    """HedgeMamba: the Hedgehog model converted to HedgeMamba blocks (eq. 7), with its logit gap recorded."""
    input:
        hedgehog="results/hedgemamba/hedgehog{rep}/model",
        data=HEDGEMAMBA_TRAIN_DATA,
    output:
        model=directory("results/hedgemamba/init{rep}/model"),
        check="results/hedgemamba/init{rep}/check.json",
    params:
        cfg=sections("hedgemamba.mamba"),
    log:
        "logs/hedgemamba/init{rep}.log",
    benchmark:
        "results/benchmarks/hedgemamba/init{rep}.tsv"
    wildcard_constraints:
        rep=REPLICA,
    threads: 1
    conda:
        "../envs/relin.yaml"
    resources:
        mem_mb=2000,
        gpu=0,
    shell:
        "relin hedgemamba-init --config {params.cfg:q} --hedgehog {input.hedgehog} --data {input.data}"
        " --out {output.model} --check {output.check} > {log} 2>&1"


rule hedgemamba_finetune:
    """HedgeMamba stage 2 (finetune) and its controls (random: same shape from random init, same budget; mil: the
    teacher's projections copied, no stage 1, same budget; hedgehog_only: stage 1 fine-tuned without the
    conversion): CE fine-tune of all but the embeddings."""
    input:
        student=hedgemamba_start,
        data=HEDGEMAMBA_TRAIN_DATA,
    output:
        model=directory("results/hedgemamba/{model}{rep}/model"),
        history="results/hedgemamba/{model}{rep}/history.csv",
        metrics="results/hedgemamba/{model}{rep}/train_metrics.json",
        decays="results/hedgemamba/{model}{rep}/decays.json",
    params:
        launch=TRAIN,
        cfg=hedgemamba_finetune_sections,
        variant=lambda wildcards: HEDGEMAMBA_FINETUNES[wildcards.model],
    log:
        "logs/hedgemamba/finetune/{model}{rep}.log",
    benchmark:
        "results/benchmarks/hedgemamba/finetune/{model}{rep}.tsv"
    wildcard_constraints:
        model="|".join(HEDGEMAMBA_FINETUNES),
        rep=REPLICA,
    threads: 1
    conda:
        "../envs/relin.yaml"
    resources:
        mem_mb=4000,
        gpu=GPUS_PER_JOB,
    shell:
        "{params.launch} hedgemamba-finetune --config {params.cfg:q} --variant {params.variant}"
        " --student {input.student} --data {input.data} --out {output.model} --history {output.history}"
        " --metrics {output.metrics} --decays {output.decays}"
        " --checkpoints checkpoints/hedgemamba/{wildcards.model}{wildcards.rep} > {log} 2>&1"


rule hedgemamba:
    """HedgeMamba alone (`snakemake --cores 2 hedgemamba`): the teacher, stage 1, the exact initialisation,
    stage 2 and its controls, evaluated."""
    input:
        expand("results/eval/{name}/metrics.json",
               name=[HEDGEMAMBA_TEACHER_EVAL, *(f"hedgemamba-{m}" for m in HEDGEMAMBA_MODELS)]),
        expand("results/hedgemamba/init{rep}/check.json", rep=replicas_of("hedgemamba", "hedgehog")),
        "results/report-hedgemamba",
