"""The workflow's machinery: what a ``snakemake`` invocation does when it starts and ends (:mod:`.invocation`),
recovery after a killed run (:mod:`.recovery`), ``dvc.yaml`` and ``dvc.lock`` kept in step with the DAG
(:mod:`.dvc_sync`, :mod:`.dvc_lock`, :mod:`.dvc_status`, :mod:`.codedeps`), the checks before a run
(:mod:`.preflight`), the JSON schema of ``params.yaml`` (:mod:`.schema`), and the job server that runs the stages
(:mod:`.jobserver`, :mod:`.socket_folders`). The science imports none of it but a job's lock and lifetime, which
a stage holds while it runs, and the code digest a checkpoint records.
"""
