"""Tests of repros/deadends/pytorch/."""
