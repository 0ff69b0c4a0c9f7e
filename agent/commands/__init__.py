"""One module per ``leadtime`` subcommand, each with ``register(subparsers)`` setting ``handler``."""
