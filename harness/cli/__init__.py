"""The command line: one module per command, the table of commands, and the one error path
(a HarnessError becomes "file:line: what is wrong" and exit 2). May import every stage."""
