"""The documents a plain append's messages create, and their postings' segment, numbered from the append's
first entry (`log._one_call`): the store's function adds that entry's first document id when it has
drawn the keys."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..postings._segments import segment_due
from ..postings._writes import NewPostings, segment_rows
from ._terms import PreparedMessage, document_id, encode_term_ids

__all__ = ('NumberedDocuments', 'merge_due')


def merge_due(segments: int, postings: int) -> bool:
    """Whether a tenant holding `segments` pending segments of `postings` postings is due a merge."""
    return segment_due(segments, postings)


@dataclass(frozen=True)
class NumberedDocuments:
    """The documents an append's messages create, with their postings, numbered from its first entry's
    first document: the call adds that document's id (the entries' keys are consecutive, so every id
    and every offset inside a block is as the general append computes it from the keys)."""

    offsets: list[int]
    entries: list[int]
    """The entry (its index in the append) each document belongs to."""
    lengths: list[int]
    terms: list[bytes]
    roles: list[str]
    postings: NewPostings

    @classmethod
    def of(cls, items: Sequence[PreparedMessage], term_ids: dict[str, int]) -> NumberedDocuments:
        offsets: list[int] = []
        entries: list[int] = []
        lengths: list[int] = []
        encoded: list[bytes] = []
        roles: list[str] = []
        postings: tuple[list[int], list[int], list[int], list[int]] = ([], [], [], [])
        for entry, item in enumerate(items):
            for index, terms in enumerate(item.terms):
                offset = document_id(entry, index)  # the id from the append's first entry on
                offsets.append(offset)
                entries.append(entry)
                lengths.append(terms.length)
                encoded.append(encode_term_ids(term_ids[word] for word in terms.frequencies))
                roles.append(terms.role)
                for word, count in terms.frequencies.items():
                    for column, value in zip(postings, (term_ids[word], offset, count, terms.length), strict=True):
                        column.append(value)
        return cls(offsets, entries, lengths, encoded, roles, NewPostings(*postings))

    def segment(self) -> tuple[list[int], list[int], list[int], list[bytes]]:
        """The segment's rows, as `(term_ids, first offsets, last offsets, blocks)`."""
        if not self.offsets:
            return [], [], [], []
        rows = segment_rows(0, self.offsets[0], self.postings)
        return [row[2] for row in rows], [row[3] for row in rows], [row[4] for row in rows], [row[5] for row in rows]
