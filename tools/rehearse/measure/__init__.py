"""What a rehearsal measures: metrics, capacity, quality, quantized groups, prefill, faults."""
