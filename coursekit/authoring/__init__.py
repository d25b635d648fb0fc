"""Authoring the course: notebooks built from their text sources, starters generated
from solutions.
"""
