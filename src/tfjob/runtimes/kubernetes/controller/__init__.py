"""The operator: its kinds' controllers, one reconcile, the writes, status, Events,
metrics, the Lease and the endpoints."""
