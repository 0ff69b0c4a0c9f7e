"""The in-cluster daemon behind ``leadtime run``: leader election, scheduling, health and metrics endpoints."""
