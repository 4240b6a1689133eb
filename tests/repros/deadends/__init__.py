"""Tests of repros/deadends/."""
