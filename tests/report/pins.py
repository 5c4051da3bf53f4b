"""The record a pinned-claims test compares: every field the report shows of a claim, and optionally its place in
its section's list."""
from __future__ import annotations


def shown_fields(claim, at: int | None = None) -> dict:
    record = {"claim": claim.claim, "source": claim.source, "ours": claim.ours, "verdict": str(claim.verdict),
              "preconditions": [str(p) for p in claim.preconditions], "kind": claim.kind, "seeds": claim.seeds,
              "margin": None if claim.margin is None else [claim.margin.value, claim.margin.reason]}
    if at is not None:
        record["at"] = at
    return record
