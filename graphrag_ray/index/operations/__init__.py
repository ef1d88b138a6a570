"""What index steps share, kept out of the steps themselves: a step imports operations, never another step
(tests/unit/test_architecture.py checks it), as Microsoft GraphRAG's workflows stay thin over index/operations/.

reports.py       a community report's shape and its markdown
"""
