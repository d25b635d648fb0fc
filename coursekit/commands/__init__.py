"""The make targets' runners: ``make course``, ``make lab``, ``make bench``.
"""
