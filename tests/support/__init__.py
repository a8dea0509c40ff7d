"""Helpers shared by the tests of every folder: servers, DSNs, subprocesses, waits, scenario builders."""
