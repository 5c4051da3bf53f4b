"""The report's tables, built from evaluation metrics and training histories as they were written."""
from __future__ import annotations

from .inputs import EvalResult, NamedRows
from .table import Table


def _families(evals: list[EvalResult]) -> list[str]:
    return sorted({family for e in evals for family in e.metrics["accuracy"]})


def evaluation_table(evals: list[EvalResult]) -> Table:
    """One row per model: perplexity, accuracy per task family, their mean."""
    families = _families(evals)
    return Table(
        title="Perplexity and accuracy per task family (every model)",
        columns=["model", "perplexity", *families, "overall"],
        rows=[[e.name, e.metrics["perplexity"], *(e.metrics["accuracy"].get(f) for f in families),
               e.metrics.get("overall")] for e in evals],
        note="Perplexity of the held-out real-text files (the filler passages where the data has none); accuracy in "
             "[0, 1]: MQAR at the query positions, NIAH RULER string_match_all, arithmetic exact match; overall = "
             "mean over families.")


def perplexity_by_position_table(evals: list[EvalResult]) -> Table | None:
    """One row per model: perplexity of the held-out files' tokens by their position in the file."""
    shown = [e for e in evals if e.metrics.get("perplexity_by_position")]
    if not shown:
        return None
    bins = list(dict.fromkeys(b for e in shown for b in e.metrics["perplexity_by_position"]))
    return Table(
        title="Perplexity by position in the held-out file (every model)",
        columns=["model", "all", *(f"tokens {b}" for b in bins)],
        rows=[[e.name, e.metrics["perplexity"], *(e.metrics["perplexity_by_position"].get(b) for b in bins)]
              for e in shown],
        note="Each held-out real-text file is one row from its first token, so a token's position is its position "
             "in the file: a model that uses long context gains most at late positions. A model trained on shorter "
             "rows than a bin's positions meets them only here.")


def accuracy_by_length_table(evals: list[EvalResult]) -> Table:
    """One row per (model, family): accuracy at each context length (tokens)."""
    lengths = sorted({int(n) for e in evals for by_len in e.metrics["accuracy_by_length"].values() for n in by_len})
    rows = [[e.name, family, *(e.metrics["accuracy_by_length"][family].get(str(n)) for n in lengths)]
            for e in evals for family in sorted(e.metrics["accuracy_by_length"])]
    return Table(title="Accuracy by context length (every model)", columns=["model", "family", *map(str, lengths)],
                 rows=rows, collapsed=True,
                 note="Columns are context lengths in tokens; a dash where the family has no example of that length.")


def niah_depth_table(by_length: list[NamedRows]) -> Table:
    """One row per (model, NIAH family, length): accuracy at each needle depth."""
    niah = [(b.name, r) for b in by_length for r in b.rows if str(r["task"]).startswith("niah")]
    depths = sorted({float(r["depth"]) for _, r in niah})
    cells: dict[tuple, dict[float, float]] = {}
    for name, r in niah:
        cells.setdefault((name, r["task"], int(r["length"])), {})[float(r["depth"])] = r["accuracy"]
    return Table(title="NIAH accuracy by needle depth (every model)",
                 columns=["model", "family", "length", *map(str, depths)],
                 rows=[[*key, *(acc.get(d) for d in depths)] for key, acc in cells.items()], collapsed=True,
                 note="Depth is the needle's position as a fraction of the haystack (0 = start).")


def training_table(histories: list[NamedRows]) -> Table:
    """One row per training run: its last logged step."""
    extra = [c for c in ("accuracy", "lr") if any(c in h.rows[-1] for h in histories if h.rows)]
    rows = []
    for h in histories:
        last = h.rows[-1] if h.rows else {}
        rows.append([h.name, last.get("step"), last.get("loss"), *(last.get(c) for c in extra)])
    return Table(title="Last logged training step", columns=["run", "step", "loss", *extra], rows=rows, digits=4,
                 formats={"lr": ".2e"},
                 note="The last logged row of each history.csv.")
