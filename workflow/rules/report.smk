# The config layers of this invocation, named at the report's head (params.yaml, overlays, --config).
REPORT_CONFIGS = " ".join(name for name, _ in layers)


rule report_manifest:
    """The stage outputs one paper's report section reads, listed from its table with their digests."""
    input:
        manifest_inputs,
    output:
        "results/report-inputs/{paper}.json",
    params:
        cfg=manifest_sections,
    log:
        "logs/report-inputs/{paper}.log",
    benchmark:
        "results/benchmarks/report-inputs/{paper}.tsv"
    wildcard_constraints:
        paper="|".join(PAPERS),
    threads: 1
    conda:
        "../envs/relin.yaml"
    resources:
        mem_mb=1000,
        gpu=0,
    shell:
        "relin report-manifest --config {params.cfg:q} --paper {wildcards.paper} --out {output} > {log} 2>&1"


rule report:
    """HTML/Markdown report (verdicts, tables and figures) of the papers report.papers lists (the three by default),
    built only from stage outputs."""
    input:
        expand("results/report-inputs/{paper}.json", paper=config["report"]["papers"]),
    output:
        directory("results/report"),
    params:
        cfg=sections("report", "opal.teacher", "opal.swa", "opal.niah_protocol", "opal.onpolicy",
                     "hedgemamba.teacher", "teacher.train", "data.niah"),
        configs=REPORT_CONFIGS,
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
        "relin report --config {params.cfg:q} --manifest {input} --configs {params.configs} --out {output}"
        " > {log} 2>&1"


use rule report as paper_report with:
    input:
        "results/report-inputs/{paper}.json",
    output:
        directory("results/report-{paper}"),
    log:
        "logs/report-{paper}.log",
    benchmark:
        "results/benchmarks/report-{paper}.tsv"
    wildcard_constraints:
        paper="|".join(PAPERS),
