"""JAX measurement helpers the checkers, notebooks and benchmarks share: synchronised
timing, compile counting, trace parsing, per-op events, collectives, Pallas lowering
inspection.
"""
