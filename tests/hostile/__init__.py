"""Hostile inputs built on the fly, each run through the real command line under a time and memory bound.

Each `cases_*.py` module here holds the cases of one area (`CASES`, a list of
`harness.Hostile`); `tests/test_hostile_inputs.py` runs them all, and
`tools/hostile_inputs.py` writes them out for running by hand.
"""
