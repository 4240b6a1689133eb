"""Tests of repros/deadends/cuda/."""
