rule synth_text:
    """Synthetic text tasks (MQAR, NIAH, arithmetic, filler) and the tokenizer."""
    output:
        directory("results/data/synth_text"),
    params:
        cfg=sections("data"),
    log:
        "logs/synth_text.log",
    benchmark:
        "results/benchmarks/synth_text.tsv"
    threads: 1
    conda:
        "../envs/relin.yaml"
    resources:
        mem_mb=2000,
        gpu=0,
    shell:
        "relin synth-text --config {params.cfg:q} --out {output} > {log} 2>&1"
