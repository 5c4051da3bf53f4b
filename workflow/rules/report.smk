# The config layers of this invocation, named at the report's head (params.yaml, overlays, --config).
REPORT_CONFIGS = " ".join(name for name, _ in layers)


rule report:
    """HTML/Markdown report (verdicts, tables and figures) built only from stage outputs."""
    input:
        metrics=expand("results/eval/{name}/metrics.json", name=LM_MODELS),
        item_scores=expand("results/eval/{name}/items.csv", name=LM_MODELS),
        by_length=expand("results/eval/{name}/accuracy_by_length.csv", name=LM_MODELS),
        histories=expand("results/teacher/{arch}/history.csv", arch=config["teacher"]["archs"]),
        opal_histories=expand("results/opal/{stage}/history.csv", stage=OPAL_TRAINED),
        opal_budgets=expand("results/opal/{stage}/train_metrics.json", stage=OPAL_TRAINED),
        hedgemamba_budgets=expand("results/hedgemamba/{model}/train_metrics.json", model=HEDGEMAMBA_FINETUNES),
        speed="results/opal/speed.csv",
        opal_layers="results/opal/gdn/layers.json",
        lia_mtr=LIA_MTR_REPORT,
        hedgemamba_histories=expand("results/hedgemamba/{stage}/history.csv", stage=HEDGEMAMBA_MODELS),
        lia_mtr_histories=LIA_MTR_HISTORIES.values(),
        hedgemamba_init="results/hedgemamba/init/check.json",
        hedgemamba_decays=expand("results/hedgemamba/{model}/decays.json", model=HEDGEMAMBA_FINETUNES),
        lm_eval=OPAL_LM_EVAL,
    output:
        directory("results/report"),
    params:
        cfg=sections("report", "opal.teacher", "opal.swa", "opal.niah_protocol", "opal.onpolicy",
                     "hedgemamba.teacher"),
        configs=REPORT_CONFIGS,
        lia_mtr_histories=" ".join(f"{name}={path}" for name, path in LIA_MTR_HISTORIES.items()),
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
        "relin report --config {params.cfg:q} --eval {input.metrics} --items {input.item_scores}"
        " --history {input.histories} {input.opal_histories} {input.hedgemamba_histories} {params.lia_mtr_histories}"
        " --train-metrics {input.opal_budgets} {input.hedgemamba_budgets} --by-length {input.by_length} --speed {input.speed}"
        " --opal-layers {input.opal_layers}"
        " --hedgemamba-init {input.hedgemamba_init} --hedgemamba-decays {input.hedgemamba_decays}"
        " --lia-mtr {input.lia_mtr} --lm-eval {input.lm_eval}"
        " --configs {params.configs} --out {output} > {log} 2>&1"
