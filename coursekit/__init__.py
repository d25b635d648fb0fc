"""Shared code of the course, in layers (one folder per concern); course facts live in
``coursekit.facts``."""
