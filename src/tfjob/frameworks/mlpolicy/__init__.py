"""Each mlPolicy source's env and parts for a TrainJob's JobSet (torch, mpi, jax,
xgboost, the plain runtime without one, and tensorflow and paddle, runtimes without a
source that their framework label names), looked up by `registry.handler_for`."""
