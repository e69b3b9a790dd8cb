"""The real engines the tests hold USE against, each in a process of its own: delta-spark and
qbeast-spark (docs/oracles.md). `fetch` gets their jars (pinned), `engine` runs and talks to them."""
