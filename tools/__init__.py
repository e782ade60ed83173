"""Developer tools: the rehearsal, the benchmark, the doc generators, image pinning and the
environment builder. The program and the planner never import them."""
