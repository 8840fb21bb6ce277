"""The `ldpfed` command line (typer)."""
