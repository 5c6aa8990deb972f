"""A Kubeflow Trainer TrainJob made into the JobSet (and side objects) Trainer v2.3.0
makes, and its status read back from the JobSet: pure, like the rest of the core.
`reconcile.reconcile_trainjob` is the entry point."""
