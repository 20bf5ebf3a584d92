"""Generation: chat rendering, batching, the arm runner and its store, and the backends."""
