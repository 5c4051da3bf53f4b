rule eval_lm:
    """Perplexity and accuracy per task family, context length and needle depth of one language model."""
    input:
        model=lm_model,
        data=lm_data,
    output:
        metrics="results/eval/{name}/metrics.json",
        by_length="results/eval/{name}/accuracy_by_length.csv",
        item_scores="results/eval/{name}/items.csv",
    params:
        cfg=sections("eval"),
    log:
        "logs/eval_lm/{name}.log",
    benchmark:
        "results/benchmarks/eval_lm/{name}.tsv"
    wildcard_constraints:
        name="|".join(map(re.escape, LM_MODELS)),
    threads: 1
    conda:
        "../envs/relin.yaml"
    resources:
        mem_mb=4000,
        gpu=1,
    shell:
        "relin eval-lm --config {params.cfg:q} --model {input.model} --data {input.data} --name {wildcards.name}"
        " --out {output.metrics} --by-length {output.by_length} --items {output.item_scores} > {log} 2>&1"
