"""Real TensorFlow training through `tfjob run`: the examples in examples/tensorflow."""
