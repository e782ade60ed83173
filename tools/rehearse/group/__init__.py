"""The vLLM rank group a rehearsal serves: its tiny model, processes, requests and logs."""
