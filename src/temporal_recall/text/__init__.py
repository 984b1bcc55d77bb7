"""What text the index holds and how it becomes terms: pure code below both the store and the search.

`_documents` decides which words of a message are searchable (and which messages are summaries,
never indexed); `_analyzer` turns text into terms, the same way for documents and queries. The
store indexes with them at write time and `temporal_recall.search` parses queries and cuts excerpts
with them, so both sit on this package and neither imports the other for it. The public names are
exported by `temporal_recall.search`.
"""
