"""Instructor-only code: what *is* a stage's answer, kept where the instructor grades.

``python -m autograder release`` never ships this package. Checkers reach it through
``coursekit.checking.graded.instructor_module``; the learner process finds the inspectors
and workloads of its ``remote_*`` modules beside the public ones
(``coursekit.workloads.inspectors``). docs/checkers/reference.md ("What a learner receives") says
what belongs here.
"""
