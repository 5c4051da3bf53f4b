rule opal_convert:
    """OPAL: the teacher converted to a Gated DeltaNet hybrid (gdn: it scores the layers and keeps the configured
    choice; gdn_kl_guided: the kl_guided choice from gdn's scores) or the SWA baseline (swa: gdn's kept layers)."""
    input:
        unpack(chain_inputs("opal")),
    output:
        model=directory("results/opal/{model}/model"),
        record="results/opal/{model}/layers.json",
    params:
        cfg=chain_config("opal"),
        options=chain_options("opal"),
    log:
        "logs/opal/convert/{model}.log",
    benchmark:
        "results/benchmarks/opal/convert/{model}.tsv"
    wildcard_constraints:
        model=rows_of("opal", "opal_convert"),
    # OPAL's chain after the teacher is the default DAG's critical path: its rules start first when a core is free
    priority: 10
    threads: 1
    conda:
        "../envs/relin.yaml"
    resources:
        mem_mb=2000,
        gpu=0,
    shell:
        "relin opal-convert --config {params.cfg:q} --teacher {input.start} {params.options}"
        " --out {output.model} --record {output.record} > {log} 2>&1"


rule opal_align:
    """OPAL stage 1: only GDN layers train, each aligned to the teacher's attention output (align; align_kl_guided
    aligns the kl_guided conversion at the same budget)."""
    input:
        unpack(chain_inputs("opal")),
        teacher=TEACHER_MODEL["opal"],
    output:
        model=directory("results/opal/{model}{rep}/model"),
        history="results/opal/{model}{rep}/history.csv",
        metrics="results/opal/{model}{rep}/train_metrics.json",
    params:
        launch=TRAIN,
        cfg=chain_config("opal"),
        options=chain_options("opal"),
    log:
        "logs/opal/align/{model}{rep}.log",
    benchmark:
        "results/benchmarks/opal/align/{model}{rep}.tsv"
    wildcard_constraints:
        model=rows_of("opal", "opal_align"),
        rep=REPLICA,
    priority: 10
    threads: 1
    conda:
        "../envs/relin.yaml"
    resources:
        mem_mb=4000,
        gpu=GPUS_PER_JOB,
    shell:
        "{params.launch} opal-align --config {params.cfg:q} --teacher {input.teacher} --student {input.start}"
        " {params.options} --out {output.model} --history {output.history} --metrics {output.metrics}"
        " --checkpoints checkpoints/opal/{wildcards.model}{wildcards.rep} > {log} 2>&1"


rule opal_teacher_continuations:
    """OPAL: the teacher's greedy continuations of the held-out prompts of the exact-match families, generated once
    for every training stage that measures its student's KL to the teacher on them."""
    input:
        teacher=TEACHER_MODEL["opal"],
        data=TRAIN_DATA["opal"],
    output:
        TEACHER_CONTINUATIONS,
    params:
        cfg=sections(),
    log:
        "logs/opal/teacher_continuations.log",
    benchmark:
        "results/benchmarks/opal/teacher_continuations.tsv"
    priority: 10
    threads: 1
    conda:
        "../envs/relin.yaml"
    resources:
        mem_mb=3000,
        gpu=1,
    shell:
        "relin opal-teacher-continuations --config {params.cfg:q} --teacher {input.teacher} --data {input.data}"
        " --out {output} > {log} 2>&1"


rule opal_offpolicy:
    """OPAL stage 2A (short context), 2B (long context) and Table 3's two controls at stage 3's budget: logit KD
    on dataset text (matched) or on the teacher's continuations of stage 3's prompts (teacher)."""
    input:
        unpack(chain_inputs("opal")),
        teacher=TEACHER_MODEL["opal"],
        continuations=TEACHER_CONTINUATIONS,
    output:
        model=directory("results/opal/{model}{rep}/model"),
        history="results/opal/{model}{rep}/history.csv",
        metrics="results/opal/{model}{rep}/train_metrics.json",
    params:
        launch=TRAIN,
        cfg=chain_config("opal"),
        options=chain_options("opal"),
    log:
        "logs/opal/offpolicy/{model}{rep}.log",
    benchmark:
        "results/benchmarks/opal/offpolicy/{model}{rep}.tsv"
    wildcard_constraints:
        model=rows_of("opal", "opal_offpolicy"),
        rep=REPLICA,
    priority: 10
    threads: 1
    conda:
        "../envs/relin.yaml"
    resources:
        mem_mb=4000,
        gpu=GPUS_PER_JOB,
    shell:
        "{params.launch} opal-offpolicy --config {params.cfg:q} --teacher {input.teacher} --student {input.start}"
        " --continuations {input.continuations}"
        " {params.options} --out {output.model} --history {output.history} --metrics {output.metrics}"
        " --checkpoints checkpoints/opal/{wildcards.model}{wildcards.rep} > {log} 2>&1"


rule opal_onpolicy:
    """OPAL stage 3: the student's own rollouts scored by the teacher (reverse KL, horizon curriculum)."""
    input:
        unpack(chain_inputs("opal")),
        teacher=TEACHER_MODEL["opal"],
        continuations=TEACHER_CONTINUATIONS,
    output:
        model=directory("results/opal/{model}{rep}/model"),
        history="results/opal/{model}{rep}/history.csv",
        metrics="results/opal/{model}{rep}/train_metrics.json",
    params:
        launch=TRAIN,
        cfg=chain_config("opal"),
        options=chain_options("opal"),
    log:
        "logs/opal/onpolicy/{model}{rep}.log",
    benchmark:
        "results/benchmarks/opal/onpolicy/{model}{rep}.tsv"
    wildcard_constraints:
        model=rows_of("opal", "opal_onpolicy"),
        rep=REPLICA,
    priority: 10
    threads: 1
    conda:
        "../envs/relin.yaml"
    resources:
        mem_mb=4000,
        gpu=GPUS_PER_JOB,
    shell:
        "{params.launch} opal-onpolicy --config {params.cfg:q} --teacher {input.teacher} --student {input.start}"
        " --continuations {input.continuations}"
        " {params.options} --out {output.model} --history {output.history} --metrics {output.metrics}"
        " --checkpoints checkpoints/opal/{wildcards.model}{wildcards.rep} > {log} 2>&1"


rule opal_export:
    """OPAL's hybrid as a qwen3_5_text checkpoint that stock transformers, vLLM and SGLang load without relin."""
    input:
        model="results/opal/onpolicy/model",
    output:
        model=directory("results/opal/export/model"),
        record="results/opal/export/export.json",
    params:
        cfg=sections(),
    log:
        "logs/opal/export.log",
    benchmark:
        "results/benchmarks/opal/export.tsv"
    threads: 1
    conda:
        "../envs/relin.yaml"
    resources:
        mem_mb=3000,
        gpu=0,
    shell:
        "relin opal-export --config {params.cfg:q} --model {input.model} --out {output.model} --record {output.record}"
        " > {log} 2>&1"


rule hybrid_speed:
    """Decode memory (KV + states) and throughput of the OPAL hybrid against its teacher by context."""
    input:
        teacher=TEACHER_MODEL["opal"],
        hybrid="results/opal/onpolicy/model",
    output:
        json="results/opal/speed.json",
        table="results/opal/speed.csv",
    params:
        cfg=sections("opal.speed"),
    log:
        "logs/opal/hybrid_speed.log",
    benchmark:
        "results/benchmarks/opal/hybrid_speed.tsv"
    threads: 1
    conda:
        "../envs/relin.yaml"
    resources:
        mem_mb=4000,
        gpu=1,
    shell:
        "relin opal-hybrid-speed --config {params.cfg:q} --teacher {input.teacher} --hybrid {input.hybrid}"
        " --out {output.json} --table {output.table} > {log} 2>&1"


rule opal_lm_eval:
    """The paper's benchmarks (GSM8K, MATH-500, commonsense) through lm-evaluation-harness on one OPAL model; in
    the DAG only when opal.lm_eval.tasks names tasks (the paper config)."""
    input:
        model=opal_model,
    output:
        "results/opal/lm_eval/{name}.json",
    params:
        cfg=sections("opal.lm_eval"),
    log:
        "logs/opal/lm_eval/{name}.log",
    benchmark:
        "results/benchmarks/opal/lm_eval/{name}.tsv"
    wildcard_constraints:
        name="|".join(LM_EVAL_MODELS),
    threads: 1
    conda:
        "../envs/relin.yaml"
    resources:
        mem_mb=8000,
        gpu=1,
    shell:
        "relin opal-lm-eval --config {params.cfg:q} --model {input.model} --name {wildcards.name} --out {output}"
        " > {log} 2>&1"


rule opal:
    """OPAL alone (`snakemake --cores 2 opal`): the teacher, every converted, trained and control model evaluated,
    the decode benchmark, the export (a qwen3-family teacher's) and OPAL's report."""
    input:
        paper_evaluations("opal"),
        "results/opal/speed.csv",
        OPAL_EXPORT,
        "results/report-opal",
        OPAL_LM_EVAL,
