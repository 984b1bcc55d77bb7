"""Posting lists: blocks (layout, encoding, reads), writing postings into blocks, and write segments.

The index reaches them through a handful of functions (`add_postings`, `remove_postings`,
`read_blocks`, `read_overlapping`, `merge_pending`). Imports only `sql` and `protocol`. See docs/design/store.md.
"""
