"""Memory and speed: per-GPU memory, the step-time and decode model, training workloads,
ranking layouts.
"""
