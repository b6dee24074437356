"""The receiving side of the network stack: input channels (remote, with credits, and local), the
receive queue with priority events, buffer management and the single input gate."""
