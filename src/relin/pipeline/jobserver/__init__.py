"""A job's life under the pipeline: the job server (stage processes forked from one that has already imported torch
and transformers), the watchdog that ends a job with its pipeline (:mod:`.lifetime`) and the lock that gives a job
one writer (:mod:`.job_lock`).

The server.

A stage process spends ~3.5 s of CPU importing torch and transformers' modelling code before it does anything
(transformers pulls torch._dynamo, torch.distributed.tensor, sympy and scipy.optimize at import); a default DAG of
~140 jobs on 2 cores pays ~8 minutes of CPU for it. :meth:`..invocation.Pipeline.start` starts this server (a
separate process: the ``snakemake`` process has threads, and a process with threads must not fork) and exports
its socket as ``RELIN_JOB_SERVER``. A ``relin <stage>`` command then hands its argv, working directory,
environment and standard streams (the file descriptors themselves, over the Unix socket) to the server, which
forks a child that runs the stage exactly as the command would have, and answers with the child's exit status.
The command forwards SIGINT, SIGTERM and SIGHUP to the child; a child whose command is gone (killed outright)
stops itself. Only third-party modules are pre-imported: relin's own code is read from disk by each child.

No server runs on a machine with GPUs (there a job's imports are small beside its work, and a driver touched by an
import would not survive the fork). A command runs in-process, as before, when no server is exported or it is another
host's (a cluster job), under a distributed launcher (each rank is the launcher's process), when the server's socket
is not there yet (it binds once its imports are done), and, after one stderr line, when the server does not answer.

Snakemake's ``benchmark:`` files time the command: their wall time is the job's, their CPU and memory columns the
command's own (MLflow's system metrics and each stage's run hold the job's).
"""
from __future__ import annotations

import signal
import struct

SERVER_ENV = "RELIN_JOB_SERVER"
FOLDER_PREFIX = "relin-jobs-"
HEADER = struct.Struct("!I")
STREAMS = (0, 1, 2)
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
