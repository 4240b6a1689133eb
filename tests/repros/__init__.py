"""Tests of the reproducers under repros/: each postcondition shown able to fail, on the real torch of the test interpreter."""
