"""relin's stage graph. Rules live in workflow/rules/*.smk; each calls one ``relin <stage>``.

    snakemake --cores 2                                              # the default ("tiny") config
    snakemake --cores 2 --configfile workflow/configs/smoke.yaml     # CI: every rule, a few steps each
"""
import json
import os
import sys

from snakemake.utils import validate

from relin import tracking
from relin.config import deep_merge, params_from_mapping, read_yaml
from relin.errors import ConfigError

# relin's strict check first: a missing or bad params.yaml or overlay ends here with one line.
try:
    params_yaml = read_yaml("params.yaml")
except ConfigError as err:
    sys.exit(f"relin: {err}")
try:
    params_from_mapping(deep_merge(params_yaml, workflow.config_settings.overwrite_config))
except ConfigError as err:
    sys.exit(f"relin: {' + '.join(['params.yaml', *map(str, workflow.overwrite_configfiles)])}: {err}")


configfile: "params.yaml"


validate(config, "workflow/schemas/params.schema.yaml")

# Tracking options reach jobs through the environment, never the command line (which would rerun jobs).
os.environ[tracking.CONFIG_ENV] = json.dumps(config["tracking"], sort_keys=True)


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/teacher.smk"
include: "workflow/rules/eval.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        rules.report.output,


onstart:
    start_pipeline_run()


onsuccess:
    end_pipeline_run("FINISHED")


onerror:
    end_pipeline_run("FAILED")
