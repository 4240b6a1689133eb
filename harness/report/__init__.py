"""The report step: aggregates -> results/ (pages, HTML, JSON, PNG), its caches, and write-back
into each entry's document; render/ holds the pure renderers. May import store/, aggregate/, spec/."""
