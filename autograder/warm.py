"""Imported once by the worker pool's fork server, so that every worker starts with
nbclient, nbformat, jupyter_client and nbgrader's utils already in memory (seconds of
imports paid once per batch, not once per worker)."""

from autograder import notebook

notebook.warm_up()
