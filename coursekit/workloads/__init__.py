"""Workloads and process glue: the course's reference classifier and readiness-review
workload, training runs in real processes, fresh-process calls, process groups that
always end, the shared compilation cache.
"""
