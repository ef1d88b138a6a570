"""Looking at a built index: export to graph tools (GraphML, GEXF, CSV, Neo4j), an offline HTML graph view, and a
Markdown + PNG report of what the index holds and what it cost."""
