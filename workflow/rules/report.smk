# The config layers of this invocation, named at the report's head (params.yaml, overlays, --config).
REPORT_CONFIGS = " ".join(name for name, _ in layers)


rule report:
    """HTML/Markdown report (verdicts, tables and figures) of the three papers, built only from stage outputs."""
    input:
        unpack(lambda wildcards: report_files(PAPERS)),
    output:
        directory("results/report"),
    params:
        cfg=sections("report", "opal.teacher", "opal.swa", "opal.niah_protocol", "opal.onpolicy",
                     "hedgemamba.teacher"),
        configs=REPORT_CONFIGS,
        options=report_options,
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
        "relin report --config {params.cfg:q} {params.options} --configs {params.configs} --out {output} > {log} 2>&1"


use rule report as paper_report with:
    input:
        unpack(lambda wildcards: report_files((wildcards.paper,))),
    output:
        directory("results/report-{paper}"),
    log:
        "logs/report-{paper}.log",
    benchmark:
        "results/benchmarks/report-{paper}.tsv"
    wildcard_constraints:
        paper="|".join(PAPERS),
