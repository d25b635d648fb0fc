"""The checker contract every ``projects/<p>/tests/check.py`` uses: registering checks,
running them, printing PASS/FAIL lines and ``--json``; importing the learner's file with
named errors; turning learner results into values or named failures.
"""
