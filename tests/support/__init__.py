"""Small helpers for the fault-matrix tests (tests/test_fault_*.py)."""
