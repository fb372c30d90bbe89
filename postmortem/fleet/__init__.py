"""Bulk analysis: many cases through the one per-case pipeline, into a SQLite store, then buckets and a fleet view.

`cases` finds the cases under a directory and names each by its content,
`scan` maps `analysis.analyse_case` over them (local processes or a Dask
cluster) and writes through `store`, `buckets` groups what was found and
`fleet` computes the operator's view that `report` renders.
"""
