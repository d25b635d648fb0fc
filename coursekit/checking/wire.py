"""The protocol (``coursekit.protocol``) as the checking side finds it: the sandbox's copy
first (``autograder_protocol``, the one the runner and the guard load there, so every side
of a graded run speaks the grader's copy), the package elsewhere.

The one place in ``coursekit.checking`` that looks the protocol up; the bridge, the
learner process and the exceptions take it from here.
"""

from __future__ import annotations

try:
    import autograder_protocol as protocol
except ImportError:
    from coursekit import protocol

__all__ = ["protocol"]
