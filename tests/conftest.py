"""Suite-wide pytest configuration: the fake cloud and Kubernetes API fixtures (see ``tests/fakes``)."""

pytest_plugins = ("tests.fakes.fixtures",)
