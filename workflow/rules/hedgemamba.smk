rule hedgehog_match:
    """HedgeMamba stage 1: the GPT-NeoX teacher's attention as Hedgehog layers; only the feature maps train."""
    input:
        teacher=HEDGEMAMBA_TEACHER,
        data="results/data/synth_text",
    output:
        model=directory("results/hedgemamba/hedgehog/model"),
        history="results/hedgemamba/hedgehog/history.csv",
        metrics="results/hedgemamba/hedgehog/train_metrics.json",
    params:
        cfg=sections("hedgemamba.hedgehog", "hedgemamba.match", "hedgemamba.kernel_backend"),
    log:
        "logs/hedgehog_match.log",
    benchmark:
        "results/benchmarks/hedgehog_match.tsv"
    threads: 1
    conda:
        "../envs/relin.yaml"
    resources:
        mem_mb=4000,
        gpu=1,
    shell:
        "relin hedgehog-match --config {params.cfg:q} --teacher {input.teacher} --data {input.data}"
        " --out {output.model} --history {output.history} --metrics {output.metrics}"
        " --checkpoints checkpoints/hedgemamba/hedgehog > {log} 2>&1"


rule hedgemamba_init:
    """HedgeMamba: the Hedgehog model converted to HedgeMamba blocks (eq. 7), with its logit gap recorded."""
    input:
        hedgehog="results/hedgemamba/hedgehog/model",
        data="results/data/synth_text",
    output:
        model=directory("results/hedgemamba/init/model"),
        check="results/hedgemamba/init/check.json",
    params:
        cfg=sections("hedgemamba.mamba"),
    log:
        "logs/hedgemamba_init.log",
    benchmark:
        "results/benchmarks/hedgemamba_init.tsv"
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
    """HedgeMamba stage 2: all but the embeddings trained with CE, conv and gate unlocked."""
    input:
        student="results/hedgemamba/init/model",
        data="results/data/synth_text",
    output:
        model=directory("results/hedgemamba/finetune/model"),
        history="results/hedgemamba/finetune/history.csv",
        metrics="results/hedgemamba/finetune/train_metrics.json",
    params:
        cfg=sections("hedgemamba.finetune"),
    log:
        "logs/hedgemamba_finetune.log",
    benchmark:
        "results/benchmarks/hedgemamba_finetune.tsv"
    threads: 1
    conda:
        "../envs/relin.yaml"
    resources:
        mem_mb=4000,
        gpu=1,
    shell:
        "relin hedgemamba-finetune --config {params.cfg:q} --variant hedgemamba"
        " --student {input.student} --data {input.data} --out {output.model} --history {output.history}"
        " --metrics {output.metrics} --checkpoints checkpoints/hedgemamba/finetune > {log} 2>&1"


rule mamba_random_finetune:
    """HedgeMamba control: the same block shape from random init, stage 2 for stage 1 + 2's rows."""
    input:
        teacher=HEDGEMAMBA_TEACHER,
        data="results/data/synth_text",
    output:
        model=directory("results/hedgemamba/random/model"),
        history="results/hedgemamba/random/history.csv",
        metrics="results/hedgemamba/random/train_metrics.json",
    params:
        cfg=sections("hedgemamba.finetune", "hedgemamba.match.train", "hedgemamba.hedgehog", "hedgemamba.mamba",
                     "hedgemamba.kernel_backend"),
    log:
        "logs/mamba_random_finetune.log",
    benchmark:
        "results/benchmarks/mamba_random_finetune.tsv"
    threads: 1
    conda:
        "../envs/relin.yaml"
    resources:
        mem_mb=4000,
        gpu=1,
    shell:
        "relin hedgemamba-finetune --config {params.cfg:q} --variant random --student {input.teacher}"
        " --data {input.data} --out {output.model} --history {output.history}"
        " --metrics {output.metrics} --checkpoints checkpoints/hedgemamba/random > {log} 2>&1"


rule hedgehog_only:
    """HedgeMamba control: the stage-1 Hedgehog model fine-tuned like stage 2, without the conversion."""
    input:
        student="results/hedgemamba/hedgehog/model",
        data="results/data/synth_text",
    output:
        model=directory("results/hedgemamba/hedgehog_only/model"),
        history="results/hedgemamba/hedgehog_only/history.csv",
        metrics="results/hedgemamba/hedgehog_only/train_metrics.json",
    params:
        cfg=sections("hedgemamba.finetune"),
    log:
        "logs/hedgehog_only.log",
    benchmark:
        "results/benchmarks/hedgehog_only.tsv"
    threads: 1
    conda:
        "../envs/relin.yaml"
    resources:
        mem_mb=4000,
        gpu=1,
    shell:
        "relin hedgemamba-finetune --config {params.cfg:q} --variant hedgehog"
        " --student {input.student} --data {input.data} --out {output.model} --history {output.history}"
        " --metrics {output.metrics} --checkpoints checkpoints/hedgemamba/hedgehog_only > {log} 2>&1"
