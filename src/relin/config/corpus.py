"""The ``corpus`` section: a text corpus from local files that the distillation stages may train on."""
from __future__ import annotations

from dataclasses import dataclass

from .loader import ConfigError, option

FORMATS = {".jsonl": "json", ".json": "json", ".parquet": "parquet"}


@dataclass(kw_only=True)
class CorpusConfig:
    """Documents read with Hugging Face ``datasets`` from local JSON-lines or parquet files, tokenized by the
    teacher's tokenizer, joined with its eos and cut into rows of ``seq_len`` tokens (packed: no padding),
    saved as Arrow and memory-mapped by the stages. ``opal.train_data`` / ``hedgemamba.train_data`` select it."""

    files: list[str] = option([], "local .jsonl / .json (JSON lines) or .parquet files, read in order; [] for none")
    text_field: str = option("text", "the column holding each document's text")
    seq_len: int = option(2048, "tokens per training row (packed documents)", minimum=16)
    max_tokens: int = option(0, "stop after this many tokens (0: the whole corpus)", minimum=0)
    test_rows: int = option(16, "rows held out (the last ones) as the corpus's test split", minimum=1)

    def validate(self, prefix: str) -> None:
        for i, name in enumerate(self.files):
            suffix = "." + name.rsplit(".", 1)[-1].lower() if "." in name else ""
            if suffix not in FORMATS:
                raise ConfigError(f"{prefix}.files[{i}]: {name!r} is neither JSON lines (.jsonl, .json) nor parquet "
                                  f"(.parquet)")
        kinds = {FORMATS["." + n.rsplit(".", 1)[-1].lower()] for n in self.files}
        if len(kinds) > 1:
            raise ConfigError(f"{prefix}.files: expected files of one format (got JSON lines and parquet)")
