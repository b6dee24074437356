"""The sending side of the network stack: result partitions of pipelined subpartitions that serialize
records into buffers, broadcast events (with priority for unaligned barriers) and hand buffers out under
credit-based flow control."""
