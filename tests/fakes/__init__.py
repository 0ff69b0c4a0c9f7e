"""Local HTTP servers that answer like the Kubernetes, GKE and Cloud TPU APIs, for the real client libraries."""
