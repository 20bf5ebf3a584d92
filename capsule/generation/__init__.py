"""Generation: chat rendering, batching, the arm runner (its rows, dispatch and store), the backends."""
