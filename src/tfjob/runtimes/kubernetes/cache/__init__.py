"""What the operator knows of the cluster: informers (list + watch into caches), the
work queue and its backoff, and the consistency rule that reads one job's view."""
