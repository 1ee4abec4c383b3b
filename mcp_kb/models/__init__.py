"""Models: embedders, rerankers and token counters behind small interfaces; fastembed implements them."""
