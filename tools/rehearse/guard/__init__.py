"""The memory-guard experiment: vLLM's memory guard in a pod-sized memory cgroup."""
