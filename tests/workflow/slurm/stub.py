"""SLURM's client commands for a machine without SLURM: ``sbatch`` runs the job locally in the background, and
``sacct`` / ``squeue`` / ``scancel`` / ``sinfo`` / ``scontrol`` / ``srun`` / ``sacctmgr`` / ``sshare`` answer as
SLURM does, enough for snakemake-executor-plugin-slurm to submit, follow and collect jobs. State lives in
``$STUB_SLURM_STATE``: one ``<id>.json`` per job (its sbatch arguments and state) and ``calls.log`` (every
call, one JSON line).

Usage: ``python stub.py <command> [args...]``, one wrapper per command on PATH (:func:`install`). The state
directory travels in the wrappers, not the environment: the job-step executor runs ``srun`` with every ``SLURM_*``
variable removed.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

STATE = Path(os.environ.get("STUB_SLURM_STATE", "."))


def _log(command: str, args: list[str]) -> None:
    with open(STATE / "calls.log", "a") as fh:
        fh.write(json.dumps({"command": command, "args": args}) + "\n")


def _jobs() -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(STATE.glob("[0-9]*.json"), key=lambda p: int(p.stem))]


def _save(job: dict) -> None:
    path = STATE / f"{job['id']}.json"
    path.with_suffix(".tmp").write_text(json.dumps(job))
    path.with_suffix(".tmp").replace(path)


def _option(args: list[str], *names: str) -> str | None:
    for i, arg in enumerate(args):
        for name in names:
            if arg == name and i + 1 < len(args):
                return args[i + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


def sbatch(args: list[str]) -> int:
    wrap = _option(args, "--wrap")
    script = sys.stdin.read() if args and args[-1] == "/dev/stdin" else None
    command = wrap if wrap is not None else script
    if not command:
        print("sbatch: error: no command (expected --wrap or a script)", file=sys.stderr)
        return 1
    counter = STATE / "next_id"
    job_id = int(counter.read_text()) if counter.exists() else 1000
    counter.write_text(str(job_id + 1))
    output = (_option(args, "--output", "-o") or f"slurm-{job_id}.out").replace("%j", str(job_id))
    job = {"id": job_id, "name": _option(args, "--job-name", "-J") or "", "args": args, "state": "PENDING",
           "output": output, "workdir": _option(args, "--chdir", "-D") or os.getcwd()}
    _save(job)
    subprocess.Popen([sys.executable, __file__, "_run", str(job_id)], start_new_session=True,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     env={**os.environ, "SLURM_STUB_COMMAND": command})
    print(f"{job_id}" if "--parsable" in args else f"Submitted batch job {job_id}")
    return 0


def _run(job_id: str) -> int:
    """The job itself, detached: runs the command as SLURM would (SLURM_JOB_ID set), records its end state."""
    job = json.loads((STATE / f"{job_id}.json").read_text())
    Path(job["output"]).parent.mkdir(parents=True, exist_ok=True)
    with open(job["output"], "w") as log:
        process = subprocess.Popen(["/bin/sh", "-c", os.environ["SLURM_STUB_COMMAND"]], cwd=job["workdir"],
                                   stdout=log, stderr=subprocess.STDOUT,
                                   env={**os.environ, "SLURM_JOB_ID": job_id, "SLURM_JOBID": job_id,
                                        "SLURM_CPUS_PER_TASK": _option(job["args"], "--cpus-per-task", "-c") or "1"})
        job.update(state="RUNNING", pid=process.pid)
        _save(job)
        code = process.wait()
    job = json.loads((STATE / f"{job_id}.json").read_text())
    if job["state"] != "CANCELLED":
        job["state"] = "COMPLETED" if code == 0 else "FAILED"
    job["exit_code"] = code
    _save(job)
    return 0


def sacct(args: list[str]) -> int:
    """``sacct -X --parsable2 --noheader --format=JobIdRaw,State ...``: one ``id|STATE`` line per job; asked for
    accounts (``-o Account``), the stub's one account."""
    if "Account" in " ".join(args):
        return accounts(args)
    for job in _jobs():
        print(f"{job['id']}|{job['state']}")
    return 0


def squeue(args: list[str]) -> int:
    """Jobs still queued or running, ``id|STATE`` (the plugin's ``--format=%i|%T`` style)."""
    for job in _jobs():
        if job["state"] in ("PENDING", "RUNNING"):
            print(f"{job['id']}|{job['state']}")
    return 0


def scancel(args: list[str]) -> int:
    wanted = {int(a) for a in args if a.isdigit()}
    for job in _jobs():
        if job["id"] in wanted or not wanted:
            if job.get("pid") and job["state"] == "RUNNING":
                try:
                    os.killpg(os.getpgid(job["pid"]), signal.SIGTERM)
                except ProcessLookupError:
                    pass
            job["state"] = "CANCELLED"
            _save(job)
    return 0


def srun(args: list[str]) -> int:
    """``srun [options] command ...`` inside a job: runs the command here (options end at the first word that
    is neither an option nor an option's value)."""
    takes_value = {"-n", "-N", "-c", "-J", "--ntasks", "--nodes", "--cpus-per-task", "--job-name", "--jobid"}
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 2 if args[i] in takes_value else 1
    command = args[i:]
    if not command:  # a script on stdin
        return subprocess.call(["/bin/sh", "-s"], stdin=sys.stdin)
    return subprocess.call(command if len(command) > 1 else ["/bin/sh", "-c", command[0]])


def accounts(args: list[str]) -> int:
    """``sacctmgr ... list user`` / ``sshare``: the accounts of the user, here one, ``test``."""
    print("test")
    return 0


def sinfo(args: list[str]) -> int:
    print("gpu*|up|infinite|1|idle|stub-node")
    return 0


def scontrol(args: list[str]) -> int:
    if args[:2] == ["show", "config"]:
        print("MinJobAge               = 300 sec")
    return 0


def install(bin_dir: Path, state: Path) -> None:
    """A wrapper per command in ``bin_dir`` (put it first on PATH), keeping state in ``state``."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    state.mkdir(parents=True, exist_ok=True)
    for command in COMMANDS:
        wrapper = bin_dir / command
        stub = Path(__file__).resolve()
        wrapper.write_text(f'#!/bin/sh\nSTUB_SLURM_STATE="{state}" exec "{sys.executable}" "{stub}" {command} "$@"\n')
        wrapper.chmod(0o755)


COMMANDS = {"sbatch": sbatch, "sacct": sacct, "squeue": squeue, "scancel": scancel, "srun": srun, "sinfo": sinfo,
            "scontrol": scontrol, "sacctmgr": accounts, "sshare": accounts}


def main() -> int:
    command, args = sys.argv[1], sys.argv[2:]
    if command == "_run":
        return _run(args[0])
    _log(command, args)
    return COMMANDS[command](args)


if __name__ == "__main__":
    sys.exit(main())
