"""Reproducer test-matrix harness for documented PyTorch and Lightning errors."""

__version__ = "0.1.0"
