"""The course's autograder: ``python -m autograder {release,grade,export,validate,merge}``.

release   the learner version (nbgrader's preprocessors; no solution/, no hidden tests)
grade     a batch of submissions, each project stage and notebook in its own sandbox,
          results in an append-only gradebook (resumable, shardable)
export    quoted CSV and per-student feedback (HTML, Markdown) without hidden checks
validate  what a learner runs before submitting: the same checks, no hidden ones
merge     join the gradebooks of shards graded on several machines
"""
