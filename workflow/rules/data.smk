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


rule synth_text_checkpoint:
    """The same tasks rendered with a pretrained teacher's own tokenizer (its ids are the only ones it knows)."""
    output:
        directory("results/data/synth_text-{arch}"),
    params:
        cfg=sections("data"),
        tokenizer=lambda wildcards: config["teacher"]["models"][wildcards.arch]["pretrained"],
    log:
        "logs/synth_text/{arch}.log",
    benchmark:
        "results/benchmarks/synth_text/{arch}.tsv"
    wildcard_constraints:
        arch="|".join(map(re.escape, PRETRAINED_ARCHS)) or "(?!)",
    threads: 1
    conda:
        "../envs/relin.yaml"
    resources:
        mem_mb=4000,
        gpu=0,
    shell:
        "relin synth-text --config {params.cfg:q} --tokenizer {params.tokenizer:q} --out {output} > {log} 2>&1"


rule text_corpus:
    """The corpus section's local files, tokenized by a pretrained teacher's tokenizer and packed into rows."""
    input:
        config["corpus"]["files"],
    output:
        directory("results/data/corpus-{arch}"),
    params:
        cfg=sections("corpus"),
        tokenizer=lambda wildcards: config["teacher"]["models"][wildcards.arch]["pretrained"],
    log:
        "logs/text_corpus/{arch}.log",
    benchmark:
        "results/benchmarks/text_corpus/{arch}.tsv"
    wildcard_constraints:
        arch="|".join(map(re.escape, PRETRAINED_ARCHS)) or "(?!)",
    threads: 1
    conda:
        "../envs/relin.yaml"
    resources:
        mem_mb=8000,
        gpu=0,
    shell:
        "relin text-corpus --config {params.cfg:q} --tokenizer {params.tokenizer:q} --out {output} > {log} 2>&1"
