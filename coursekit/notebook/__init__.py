"""The notebook runtime: what notebook cells call (check cells, predictions, labels,
plots) and the guard that lets a notebook run to its end on unfinished learner code.
"""
