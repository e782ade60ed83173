"""The documentation's generated blocks (`doc_blocks`): the ranking of node types, the
scaling simulation, the change table and the stack-keys table, each made from the planner's own
functions (never its command line) and written and checked by `make regen` (`tools.regen`;
tests/test_regen.py fails when a page and its block's render differ)."""
