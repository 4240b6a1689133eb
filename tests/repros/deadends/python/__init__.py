"""Tests of repros/deadends/python/."""
