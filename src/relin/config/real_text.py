"""The ``real_text`` and ``bpe`` sections: a real-text corpus every install has, and the BPE tokenizer trained on it.

``real_text``: the Python source files of a pinned dependency's release (:mod:`relin.data.real_text`), checked
against a pinned digest and split by file. ``bpe``: a byte-level BPE trained on its train split, and the corpus
packed into token rows in it (:mod:`relin.data.bpe`).
"""
from __future__ import annotations

from dataclasses import dataclass

from .loader import ConfigError, option

# The digest (relin.data.documents.source_digest) of lm_eval 0.4.13's 751 .py files: the same computed from its
# wheel lm_eval-0.4.13-py3-none-any.whl (sha256 5daaa197...5286a) and from a pip install of it.
LM_EVAL_0_4_13 = "sha256:c91c63e2c7afe1bd24f0ccd029f28e5f77aaf258ffb5d11b03abc3dcefa8f93f"


@dataclass(kw_only=True)
class DocumentSplits:
    """How a corpus of whole documents is sampled and split (:mod:`relin.data.documents`): by hashes of their paths,
    so a document never moves between splits when ``max_bytes`` changes."""

    max_bytes: int = option(0, "documents (in a fixed order by path hash) until their bytes reach this; 0: all",
                            minimum=0)
    validation_fraction: float = option(0.1, "share of documents (by path hash) held out for validation",
                                        minimum=0, maximum=0.5)
    test_fraction: float = option(0.1, "share of documents (by path hash) held out for the test split",
                                  exclusive_minimum=0, maximum=0.5)


@dataclass(kw_only=True)
class RealTextConfig(DocumentSplits):
    """A real-text corpus every install has: the ``.py`` files of a pinned package release, digest-checked.

    The files of the installed release (pinned ``==`` in pyproject.toml) are read in path order and checked against
    ``expected_digest`` (sha256 over the package name, version, and every file's path and bytes): every machine
    reads the same bytes or stops with one line. Files go to train / validation / test by a hash of their path, so a
    file never moves between splits when ``max_bytes`` changes."""

    package: str = option("lm_eval", "the installed distribution whose .py files are the corpus (a pinned dependency)")
    version: str = option("0.4.13", "its version, as pyproject.toml pins it (another installed version is an error)")
    expected_digest: str = option(LM_EVAL_0_4_13, "sha256:<hex> of every .py file of the release (\"\": record only)")
    max_bytes: int = option(4_000_000, "files (in a fixed order by path hash) until their bytes reach this; 0: all",
                            minimum=0)
    source_dir: str = option("", "read the files under this folder (laid out as in site-packages) instead of the "
                                 "installed package's; for tests ('': the installed package)")

    def validate(self, prefix: str) -> None:
        if self.expected_digest and not (self.expected_digest.startswith("sha256:")
                                         and len(self.expected_digest) == 71):
            raise ConfigError(f"{prefix}.expected_digest: expected 'sha256:' and 64 hex digits (or \"\"), got "
                              f"{self.expected_digest!r}")


@dataclass(kw_only=True)
class BpeConfig:
    """A byte-level BPE learnt on the real-text train split, and the corpus packed into rows in it.

    Hugging Face ``tokenizers`` with GPT-2's byte alphabet and pre-tokenizer, saved as a ``PreTrainedTokenizerFast``
    with ``<pad>``, ``<bos>``, ``<eos>``; every split of the corpus packed into rows of ``seq_len`` tokens in it
    (documents joined by eos)."""

    vocab_size: int = option(4096, "tokens in the vocabulary: 3 special, 256 bytes, the rest merges", minimum=300)
    min_frequency: int = option(2, "a pair merges only when it occurs at least this often", minimum=1)
    split_digits: bool = option(True, "every digit its own token (as Llama's and Qwen's), so that numbers are "
                                      "copied and added digit by digit")
    seq_len: int = option(512, "tokens per packed row", minimum=16)
