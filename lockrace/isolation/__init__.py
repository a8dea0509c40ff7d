"""PostgreSQL isolation specs: run them as upstream's isolationtester does.

``spec_format`` (in lockrace.scenario) reads the spec; ``runner`` reproduces
isolationtester's schedule and transcript; ``pg`` / ``mysql`` are the
connections it drives; ``databases`` gives each spec a fresh database;
``cli`` is what ``lockrace run FILE.spec`` calls.
"""
