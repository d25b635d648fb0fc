"""Provenance: run records, MLflow tracking of every measurement (failed and killed runs
included), and when two runs are comparable.

    python -m coursekit.provenance list|ui
"""
