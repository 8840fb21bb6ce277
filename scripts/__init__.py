"""The scripts that write the results pages (docs/results) and their shared helpers.

Each generator runs the library, the Flower harness (`simulations`) or the `ldpfed` command and
writes one page with its tables and raw numbers; `arguments` and `provenance` give every script
(benchmarks/ included) its command line and its page's run stamp. Nothing below this package
imports it: it sits above `simulations` and below `benchmarks` (tests/test_layering.py).
"""
