"""The optimization dashboard: per conversation, what was sent, dropped, summarized and recalled, and
what it saved; and an overview across conversations.

Selectors (reads, sized for long conversations): `headline`, `series`, `message_map`, `turns`,
`overview`, `export`, with `costs`. Views: `pages`, `downloads`, `api` (JSON); URLs: `urls`, `api_urls`.
"""
