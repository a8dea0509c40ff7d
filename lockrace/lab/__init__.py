"""The race lab: measured holder-vs-waiter races and the engine-overhead bench.

Everything here runs on real servers through lockrace's own Race and
backends, so the figures are the ones lockrace itself reports.  No Textual.
"""
