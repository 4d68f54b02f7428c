"""One module a command of `harness`: its arguments and its handler
(`harness.cli.table` lists them; a command's exit codes are its row there)."""
