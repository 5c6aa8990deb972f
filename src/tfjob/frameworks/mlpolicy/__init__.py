"""Each mlPolicy source's env and parts for a TrainJob's JobSet (torch, mpi, jax,
xgboost, and the plain runtime without one), looked up by `registry.handler_for`."""
