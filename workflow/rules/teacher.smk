rule teacher_lm:
    """Build and train one teacher language model; checkpoints let a killed run resume."""
    input:
        data=lambda wildcards: text_data(wildcards.arch),
    output:
        model=directory("results/teacher/{arch}/model"),
        history="results/teacher/{arch}/history.csv",
        metrics="results/teacher/{arch}/train_metrics.json",
    params:
        launch=TRAIN,
        cfg=sections("teacher.models.{arch}", "teacher.train"),
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
        " --out {output.model} --history {output.history} --metrics {output.metrics}"
        " --checkpoints checkpoints/teacher/{wildcards.arch} > {log} 2>&1"
