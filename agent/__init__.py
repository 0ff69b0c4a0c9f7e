"""The agent: wiring, the loop, planning, metric sources, ledger, notifiers, reports, simulation and the CLI."""
