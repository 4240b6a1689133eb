"""Tests of repros/deadends/huggingface/."""
