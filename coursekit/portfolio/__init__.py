"""``make portfolio``: the learner's route map and a correctness-backed benchmark report.

    python -m coursekit.portfolio --records build/learner --out build/portfolio
    python -m coursekit.portfolio.collect memory|scaling
"""
