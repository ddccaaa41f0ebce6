"""The optimization dashboard: per conversation, what was sent, dropped, summarized and recalled, and
what it saved; and an overview across conversations.

Selectors (reads, sized for long conversations): `headline`, `series`, `message_map`, `turns`,
`overview`, `export`, with `costs` and `figures` (stored totals, turn blocks, message numbers).
Writes: `totals` (the aggregates kept as records are written, tables in `models`) and `ledger` (the
message ledger those aggregates carry). Views: `pages`, `downloads`, `api` (JSON); URLs: `urls`,
`api_urls`.
"""
