"""User code for the type checkers (tests/test_typing.py): never imported by the suite's tests."""
