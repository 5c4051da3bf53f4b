rule report:
    """HTML/Markdown report (tables and figures) built only from stage outputs."""
    input:
        metrics=expand("results/eval/{name}/metrics.json", name=LM_MODELS),
        by_length=expand("results/eval/{name}/accuracy_by_length.csv", name=LM_MODELS),
        histories=expand("results/teacher/{arch}/history.csv", arch=config["teacher"]["archs"]),
        opal_histories=expand("results/opal/{stage}/history.csv",
                              stage=["align", "offpolicy_short", "offpolicy_long", "onpolicy", "offpolicy_matched"]),
        speed="results/opal/speed.csv",
        lia_mtr=LIA_MTR_REPORT,
        hedgemamba_histories=expand("results/hedgemamba/{stage}/history.csv",
                                    stage=["hedgehog", "finetune", "random", "hedgehog_only"]),
        hedgemamba_init="results/hedgemamba/init/check.json",
        lm_eval=OPAL_LM_EVAL,
    output:
        directory("results/report"),
    params:
        cfg=sections("report"),
    log:
        "logs/report.log",
    benchmark:
        "results/benchmarks/report.tsv"
    threads: 1
    conda:
        "../envs/relin.yaml"
    resources:
        mem_mb=2000,
        gpu=0,
    shell:
        "relin report --config {params.cfg:q} --eval {input.metrics}"
        " --history {input.histories} {input.opal_histories} {input.hedgemamba_histories}"
        " --by-length {input.by_length} --speed {input.speed} --hedgemamba-init {input.hedgemamba_init}"
        " --lia-mtr {input.lia_mtr} --lm-eval {input.lm_eval} --out {output} > {log} 2>&1"
