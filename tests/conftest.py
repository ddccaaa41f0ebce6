"""Shared fixtures. Area-specific fixtures live in each test package's own conftest.py."""
