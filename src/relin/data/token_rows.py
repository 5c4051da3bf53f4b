"""Rows of token ids addressed by index without holding them as Python lists.

A saved dataset's ``input_ids`` column is a memory-mapped Arrow ``list<int>`` array: :meth:`TokenRows.from_arrow`
keeps its chunks where they are (values and offsets as NumPy views, no copy) and hands out one row at a
time; a corpus of hundreds of millions of tokens costs its page cache, not the process's heap.
:meth:`TokenRows.from_lists` holds in-memory rows the same way (one flat array and offsets).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, Sequence

import numpy as np

if TYPE_CHECKING:
    import pyarrow as pa


class TokenRows:
    """Row ``i`` is ``values[c][offsets[c][j] : offsets[c][j + 1]]`` for the chunk ``c`` holding it.

    Attributes:
        lengths (np.ndarray): tokens per row ``[N]`` (int64).
    """

    def __init__(self, chunks: list[tuple[np.ndarray, np.ndarray]]):
        self._values = [values for values, _ in chunks]
        self._offsets = [offsets for _, offsets in chunks]
        sizes = [offsets.size - 1 for offsets in self._offsets]
        self._first = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.lengths = (np.concatenate([np.diff(o) for o in self._offsets]) if chunks
                        else np.zeros(0, dtype=np.int64)).astype(np.int64)

    @classmethod
    def from_lists(cls, rows: Sequence[Sequence[int]]) -> "TokenRows":
        lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        values = np.fromiter((t for r in rows for t in r), dtype=np.int64, count=int(offsets[-1]))
        return cls([(values, offsets)])

    @classmethod
    def from_arrow(cls, column: "pa.ChunkedArray") -> "TokenRows":
        """The rows of a ``list<int>`` column (a loaded dataset's ``ds.data.column(name)``), zero-copy."""
        chunks = []
        for chunk in column.chunks:
            if chunk.null_count:
                raise ValueError("token rows: the column holds null rows")
            chunks.append((chunk.values.to_numpy(zero_copy_only=False), chunk.offsets.to_numpy()))
        return cls(chunks)

    def __len__(self) -> int:
        return int(self._first[-1])

    def __getitem__(self, index: int) -> np.ndarray:
        """Row ``index`` as int64 ``[n]`` (a view when the stored values are int64)."""
        if not -len(self) <= index < len(self):
            raise IndexError(f"token row {index} out of range ({len(self)} rows)")
        index %= len(self)
        chunk = int(np.searchsorted(self._first, index, side="right")) - 1
        offsets = self._offsets[chunk]
        j = index - int(self._first[chunk])
        return self._values[chunk][offsets[j]:offsets[j + 1]].astype(np.int64, copy=False)

    def __iter__(self) -> Iterator[np.ndarray]:
        return (self[i] for i in range(len(self)))

    def head(self, count: int) -> list[list[int]]:
        """The first ``count`` rows as lists (what a model check or a scoring pass takes)."""
        return [self[i].tolist() for i in range(min(count, len(self)))]
