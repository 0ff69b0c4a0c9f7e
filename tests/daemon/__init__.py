"""Tests of the in-cluster daemon: election, scheduling, endpoints, shutdown, deployment manifests."""
