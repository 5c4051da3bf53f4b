rule hedgehog_match:
    """HedgeMamba stage 1: the GPT-NeoX teacher's attention as Hedgehog layers; only the feature maps train. The
    model wildcard names the configured loss (hedgehog) or a loss variant (a row of the table)."""
    input:
        unpack(chain_inputs("hedgemamba")),
    output:
        model=directory("results/hedgemamba/{model}{rep}/model"),
        history="results/hedgemamba/{model}{rep}/history.csv",
        metrics="results/hedgemamba/{model}{rep}/train_metrics.json",
    params:
        launch=TRAIN,
        cfg=chain_config("hedgemamba"),
        options=chain_options("hedgemamba"),
    log:
        "logs/hedgemamba/hedgehog_match/{model}{rep}.log",
    benchmark:
        "results/benchmarks/hedgemamba/hedgehog_match/{model}{rep}.tsv"
    wildcard_constraints:
        model=rows_of("hedgemamba", "hedgehog_match"),
        rep=REPLICA,
    threads: 1
    conda:
        "../envs/relin.yaml"
    resources:
        mem_mb=4000,
        gpu=GPUS_PER_JOB,
    shell:
        "{params.launch} hedgemamba-hedgehog-match --config {params.cfg:q} --teacher {input.start} {params.options}"
        " --out {output.model} --history {output.history} --metrics {output.metrics}"
        " --checkpoints checkpoints/hedgemamba/{wildcards.model}{wildcards.rep} > {log} 2>&1"


rule hedgemamba_init:
    """HedgeMamba: the Hedgehog model converted to HedgeMamba blocks (eq. 7), with its logit gap recorded."""
    input:
        unpack(chain_inputs("hedgemamba")),
    output:
        model=directory("results/hedgemamba/{model}{rep}/model"),
        check="results/hedgemamba/{model}{rep}/check.json",
    params:
        cfg=chain_config("hedgemamba"),
        options=chain_options("hedgemamba"),
    log:
        "logs/hedgemamba/{model}{rep}.log",
    benchmark:
        "results/benchmarks/hedgemamba/{model}{rep}.tsv"
    wildcard_constraints:
        model=rows_of("hedgemamba", "hedgemamba_init"),
        rep=REPLICA,
    threads: 1
    conda:
        "../envs/relin.yaml"
    resources:
        mem_mb=2000,
        gpu=0,
    shell:
        "relin hedgemamba-init --config {params.cfg:q} --hedgehog {input.start} {params.options}"
        " --out {output.model} --check {output.check} > {log} 2>&1"


rule hedgemamba_finetune:
    """HedgeMamba stage 2 (finetune) and its controls (random: same shape from random init, same budget; mil: the
    teacher's projections copied, no stage 1, same budget; hedgehog_only: stage 1 fine-tuned without the
    conversion): CE fine-tune of all but the embeddings."""
    input:
        unpack(chain_inputs("hedgemamba")),
    output:
        model=directory("results/hedgemamba/{model}{rep}/model"),
        history="results/hedgemamba/{model}{rep}/history.csv",
        metrics="results/hedgemamba/{model}{rep}/train_metrics.json",
        decays="results/hedgemamba/{model}{rep}/decays.json",
    params:
        launch=TRAIN,
        cfg=chain_config("hedgemamba"),
        options=chain_options("hedgemamba"),
    log:
        "logs/hedgemamba/finetune/{model}{rep}.log",
    benchmark:
        "results/benchmarks/hedgemamba/finetune/{model}{rep}.tsv"
    wildcard_constraints:
        model=rows_of("hedgemamba", "hedgemamba_finetune"),
        rep=REPLICA,
    threads: 1
    conda:
        "../envs/relin.yaml"
    resources:
        mem_mb=4000,
        gpu=GPUS_PER_JOB,
    shell:
        "{params.launch} hedgemamba-finetune --config {params.cfg:q} --student {input.start} {params.options}"
        " --out {output.model} --history {output.history} --metrics {output.metrics} --decays {output.decays}"
        " --checkpoints checkpoints/hedgemamba/{wildcards.model}{wildcards.rep} > {log} 2>&1"


rule hedgemamba:
    """HedgeMamba alone (`snakemake --cores 2 hedgemamba`): the teacher, stage 1, the exact initialisation,
    stage 2 and its controls, evaluated, and HedgeMamba's report."""
    input:
        paper_evaluations("hedgemamba"),
        [f"{model}/model" for model in chain_models("hedgemamba")],
        "results/report-hedgemamba",
