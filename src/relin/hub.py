"""Checkpoints by Hugging Face id or local directory, offline: an id resolves to its snapshot in the standard cache
(``HF_HUB_CACHE``, else ``HF_HOME/hub``, else ``~/.cache/huggingface/hub``); nothing is downloaded."""
from __future__ import annotations

import re
from pathlib import Path

from .errors import InputError

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def is_hub_id(reference: str) -> bool:
    """``owner/name`` that is not an existing path nor written as one (``./``, ``/``, ``~``)."""
    return (not Path(reference).expanduser().exists() and not reference.startswith((".", "/", "~"))
            and bool(HUB_ID.match(reference)))


def resolve(reference: str, what: str) -> Path:
    """The local directory of ``reference``: the directory itself, or the cached snapshot of a hub id.

    Args:
        reference (str): a ``save_pretrained`` directory or a Hugging Face id (``Qwen/Qwen3-4B``).
        what (str): what the reference names, for the error (``"model"``, ``"tokenizer"``, ``"vision tower"``).
    Raises:
        InputError: one line naming the reference and what to do.
    """
    if not is_hub_id(reference):
        path = Path(reference).expanduser()
        if not path.is_dir():
            raise InputError(f"{what} {reference}: no such directory (expected a save_pretrained directory or a "
                             f"Hugging Face id in the local cache)")
        return path
    from huggingface_hub import constants, snapshot_download

    try:
        return Path(snapshot_download(reference, local_files_only=True))
    except Exception as err:  # noqa: BLE001 - not cached, a damaged ref or an unreadable cache all mean: not here
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0][:160]
        raise InputError(f"{what} {reference}: not in the Hugging Face cache {constants.HF_HUB_CACHE} ({reason}); "
                         f"download it where there is network (`hf download {reference}`) and point HF_HUB_CACHE "
                         f"or HF_HOME at that cache") from None
