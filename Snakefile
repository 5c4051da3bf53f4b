"""relin's stage graph. Rules live in workflow/rules/*.smk; each calls one ``relin <stage>``.

    snakemake --cores 2                                              # the default ("tiny") config
    snakemake --cores 2 --configfile workflow/configs/smoke.yaml     # CI: every rule, a few steps each
    snakemake --cores 2 --config 'teacher={train: {lr: 0.003}}'      # one value changed (typed)
"""
import json
import os
import sys

from snakemake.utils import validate

from relin import tracking

from relin.pipeline import recovery
from relin.config.params import deep_merge, load_layers, read_yaml, typed_overrides
from relin.errors import ConfigError, UserError
from relin.pipeline.invocation import Pipeline, command_line_error, dvc_stage_name, lock_held_elsewhere, show_stage_errors
from relin.pipeline.preflight import check as preflight
from relin.pipeline.preflight import check_writable

# relin's strict check first: a missing or bad params.yaml, overlay or --config value ends here with
# one line naming the file (or --config) and the key, before any job runs.
if mistake := command_line_error(sys.argv[1:], workflow.config_settings.configfiles):
    sys.exit(f"relin: {mistake}")
try:
    cli_overrides = typed_overrides(workflow.config_settings.config)
    layers = [("params.yaml", read_yaml("params.yaml"))]
    layers += [(os.path.relpath(path), read_yaml(path)) for path in workflow.config_settings.configfiles]
    layers += [("--config", cli_overrides)] if cli_overrides else []
    load_layers(layers, preflight)
except ConfigError as err:
    sys.exit(f"relin: {err}")
# dvc.lock may record this run only when its config is params.yaml itself, as DVC reads it.
PIPELINE = Pipeline(commits_dvc=all(deep_merge(layers[0][1], data) == layers[0][1] for _, data in layers))
# Before the DAG is built (relin.pipeline.recovery): an executing run takes the checkout's pipeline lock, removes the Snakemake
# locks a killed run left, and regenerates dvc.yaml when params.yaml or the code it is generated from changed;
# then every job whose output is missing or unfinished runs, with what depends on it, whatever the targets.
if PIPELINE.takes_lock:
    recovery.install(workflow, before=PIPELINE.before_dag, others_running=lock_held_elsewhere)
# A job's previous outputs stay until its rerun succeeds; a failed job's own error line heads Snakemake's block.
recovery.keep_replaced_outputs()
show_stage_errors()


configfile: "params.yaml"


# Snakemake reads nested --config values as strings; the typed ones replace them.
config.update(deep_merge(config, cli_overrides))
validate(config, "workflow/schemas/params.schema.yaml")

# Tracking options reach jobs through the environment, never the command line (which would rerun jobs).
os.environ[tracking.CONFIG_ENV] = json.dumps(config["tracking"], sort_keys=True)


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/teacher.smk"
include: "workflow/rules/eval.smk"
include: "workflow/rules/opal.smk"
include: "workflow/rules/hedgemamba.smk"
include: "workflow/rules/lia_mtr.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        rules.report.output,
        OPAL_EXPORT if "opal" in config["report"]["papers"] else [],


onstart:
    try:
        # before any job: every output, log and benchmark of the jobs to run can be created (a read-only results/)
        check_writable(path for job in workflow.dag.needrun_jobs()
                       for path in (*job.output, *job.log, *filter(None, [getattr(job, "benchmark", None)])))
        PIPELINE.start()
    except UserError as err:
        sys.exit(f"relin: {err}")


onsuccess:
    PIPELINE.end("FINISHED", [dvc_stage_name(job.rule.name, job.wildcards_dict) for job in workflow.dag.jobs
                              if job.output])


onerror:
    recovery.put_back_unsettled()
    PIPELINE.end("KILLED" if PIPELINE.stopped_on_request(workflow) else "FAILED")
