"""Code that runs inside a target environment, next to a torch it did not choose: standard
library only, Python 3.8+. Imports nothing from harness; talks to the host through files."""
